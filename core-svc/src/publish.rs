//! Publishing transitions into the registry (the library behind
//! `world-publish transitions`): manifest parsing, per-entry build (epoch,
//! source check under the pinned interpreter, schemas), and the
//! compare-and-swap of the registry head with one bounded retry.

use std::path::Path;
use std::time::Duration;

use serde_json::value::RawValue;
use world_model::registry::{TRANSITION_REGISTRY, TRANSITION_SOURCE};
use world_model::{AccessTriple, Descriptor, EpochRegistry, HashRef, Revision, Schema, TransitionId, canonical_source};

use crate::archive::{Archive, Interpreter};
use crate::capsule;
use crate::registry::{self, RegistryReadError, revision_object};
use crate::store::{Store, StoreError, StoredObject};
use crate::subprocess::{self, Slots, Spawn};

pub const SOURCE_PROVENANCE: &str = "cmd/world-publish";
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
const CHECK_OUTPUT_CAP: usize = 400;
/// Environment variables a source check never inherits.
const REGISTRY_VARIABLES: [&str; 4] =
    ["AILANG_REGISTRY", "AILANG_REGISTRY_API", "AILANG_REGISTRY_API_KEY", "AILANG_REGISTRY_VALIDATOR"];

/// One manifest element, as written (unknown keys are ignored).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestEntry {
    pub id: String,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub description: String,
    pub transition_fn_file: Option<String>,
    pub transition_fn: Option<String>,
    #[serde(default)]
    pub semantics_epoch: i64,
    pub input_schema: Option<Box<RawValue>>,
    pub output_schema: Option<Box<RawValue>>,
    #[serde(default = "empty_access")]
    pub access: AccessTriple,
    #[serde(default)]
    pub declared_effects: Vec<AccessTriple>,
}

fn empty_access() -> AccessTriple {
    AccessTriple { effect: String::new(), scope: String::new(), cost: 0 }
}

/// Parses a manifest. A refusal names the offending field by its path in the manifest
/// (`[2].declaredEffects[0].cost`), so a long manifest needs no bisecting.
pub fn parse_manifest(bytes: &[u8], path: &str) -> Result<Vec<ManifestEntry>, String> {
    let mut decoder = serde_json::Deserializer::from_slice(bytes);
    let entries: Vec<ManifestEntry> =
        serde_path_to_error::deserialize(&mut decoder).map_err(|error| match error.path().to_string().as_str() {
            // The root: the document itself is not a JSON array.
            "." => format!("parse manifest {path}: {}", error.inner()),
            field => format!("parse manifest {path}: {field}: {}", error.inner()),
        })?;
    decoder.end().map_err(|error| format!("parse manifest {path}: {error}"))?;
    if entries.is_empty() {
        return Err("manifest holds no descriptors".into());
    }
    Ok(entries)
}

/// What the build produced: the descriptors to publish, the new source
/// objects (stored only when the publish proceeds), and the derived epoch.
pub struct Changes {
    pub descriptors: Vec<Descriptor>,
    pub sources: Vec<StoredObject>,
    pub derived_epoch: Option<i64>,
}

/// Builds every manifest entry under `interpreter`, checking each source.
pub async fn build_changes(
    store: &Store,
    interpreter: &Interpreter,
    entries: Vec<ManifestEntry>,
    base_dir: &Path,
    slots: &Slots,
) -> Result<Changes, String> {
    let release = interpreter.release();
    let epochs = registry::read_epochs(store).await.map_err(|e| e.to_string())?.ok_or_else(|| {
        "publish transition registry: no epoch registry head exists (world/epoch-registry/v1); run world-core \
         serve --ailang-bin once so it bootstraps epoch 1 from the interpreter it serves, then retry"
            .to_owned()
    })?;
    let nominating = epochs.nominating(&release);
    if nominating.is_empty() {
        return Err(format!(
            "interpreter release {release:?} is nominated by NO epoch in world/epoch-registry/v1; the core bootstraps \
             epoch 1 from the interpreter it serves: run world-core serve --ailang-bin with this binary once"
        ));
    }
    let mut changes = Changes { descriptors: Vec::new(), sources: Vec::new(), derived_epoch: None };
    for entry in entries {
        let id = TransitionId::parse(&entry.id).map_err(|e| format!("entry {:?}: {e}", entry.id))?;
        let label = format!("entry {:?}", entry.id);
        let epoch = epoch_for(&label, entry.semantics_epoch, &nominating, &release, &mut changes.derived_epoch)?;
        let transition_fn = match (&entry.transition_fn, &entry.transition_fn_file) {
            (Some(_), Some(_)) => return Err(format!("{label}: give exactly one of transitionFn or transitionFnFile")),
            (None, None) => {
                return Err(format!(
                    "{label}: a transition source pin is required: transitionFn (existing object ref) or \
                     transitionFnFile (AILANG source file)"
                ));
            }
            (Some(reference), None) => HashRef::parse(reference).map_err(|e| format!("{label}: transitionFn: {e}"))?,
            (None, Some(file)) => {
                let raw =
                    std::fs::read(base_dir.join(file)).map_err(|e| format!("read transition source {file}: {e}"))?;
                let source =
                    canonical_source(&raw).map_err(|e| format!("canonicalise transition source {file}: {e}"))?;
                let object = StoredObject::new(TRANSITION_SOURCE, SOURCE_PROVENANCE, source);
                check_source(interpreter, object.payload.as_deref().unwrap_or_default(), slots)
                    .await
                    .map_err(|output| not_loadable(&entry.id, &object.hash, &output))?;
                let reference = object.hash;
                changes.sources.push(object);
                reference
            }
        };
        let schema = |raw: &Option<Box<RawValue>>, which: &str| {
            let raw = raw.as_ref().map(|r| r.get()).unwrap_or("");
            Schema::parse(raw.as_bytes()).map_err(|e| format!("{label}: {which} schema: {e}"))
        };
        let descriptor = Descriptor {
            id,
            title: entry.title,
            description: entry.description,
            transition_fn,
            interpreter: interpreter.reference,
            semantics_epoch: epoch,
            input_schema: schema(&entry.input_schema, "input")?,
            output_schema: schema(&entry.output_schema, "output")?,
            access: entry.access,
            declared_effects: entry.declared_effects,
        };
        descriptor.validate()?;
        compile_schema(&descriptor).map_err(|e| format!("{label}: {e}"))?;
        changes.descriptors.push(descriptor);
    }
    Ok(changes)
}

fn epoch_for(
    label: &str,
    stated: i64,
    nominating: &[i64],
    release: &str,
    derived: &mut Option<i64>,
) -> Result<i64, String> {
    let epoch = if stated == 0 {
        match nominating {
            [only] => {
                *derived = Some(*only);
                *only
            }
            several => {
                return Err(format!(
                    "{label}: semanticsEpoch is required — interpreter release {release:?} is nominated by more than \
                     one epoch ({several:?}); state one of them"
                ));
            }
        }
    } else {
        stated
    };
    if !nominating.contains(&epoch) {
        return Err(format!(
            "{label}: semanticsEpoch {epoch} is not one of the epochs nominating interpreter release {release:?} ({nominating:?})"
        ));
    }
    Ok(epoch)
}

/// Both schemas must compile as JSON Schema (DESIGN: a schema that does not
/// compile is refused at publication, not at the first call).
fn compile_schema(descriptor: &Descriptor) -> Result<(), String> {
    for (which, schema) in [("input", &descriptor.input_schema), ("output", &descriptor.output_schema)] {
        let value: serde_json::Value =
            serde_json::from_str(schema.as_str()).map_err(|e| format!("{which} schema: {e}"))?;
        jsonschema::validator_for(&value).map_err(|e| format!("{which} schema does not compile: {e}"))?;
    }
    Ok(())
}

fn not_loadable(id: &str, source: &HashRef, output: &str) -> String {
    format!(
        "publish transition registry: entry {id:?}'s source \"{source}\" is not loadable under its pinned interpreter: {output}"
    )
}

/// `<interpreter> check host/capsule/main.ail` in an empty scratch root, so
/// only `std/*` imports resolve. `Err` carries the interpreter's output.
pub async fn check_source(interpreter: &Interpreter, source: &[u8], slots: &Slots) -> Result<(), String> {
    let scratch =
        capsule::Root::stage("world-source-check-", source, None).map_err(|e| format!("scratch root: {e}"))?;
    let spawn = Spawn::new(&interpreter.path, scratch.path())
        .args(["check", capsule::SOURCE_PATH])
        .inherit_env_except(&REGISTRY_VARIABLES)
        .env("AILANG_RELAX_MODULES", "1")
        .env("AILANG_CACHE_DIR", scratch.path().join(".cache"));
    let slot = slots.try_take().map_err(|e| e.to_string())?;
    let finished = subprocess::run(spawn, slot, CHECK_TIMEOUT, 1024 * 1024).await.map_err(|e| e.to_string())?;
    if finished.success() {
        return Ok(());
    }
    let mut output = String::from_utf8_lossy(&finished.stdout).into_owned();
    output.push_str(&String::from_utf8_lossy(&finished.stderr));
    Err(cap_output(output.trim()))
}

fn cap_output(text: &str) -> String {
    if text.len() <= CHECK_OUTPUT_CAP {
        return text.to_owned();
    }
    let mut end = CHECK_OUTPUT_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Published { revision: i64, head: HashRef },
    Unchanged { revision: i64, head: HashRef },
}

/// Re-verifies `changes` and moves the registry head by compare-and-swap,
/// retrying once over a concurrent winner.
pub async fn publish_set(
    store: &Store,
    archive: &Archive,
    changes: &Changes,
    slots: &Slots,
) -> Result<Outcome, String> {
    reverify(store, archive, changes, slots).await?;
    let mut retried = false;
    loop {
        let head = store.registry_head(TRANSITION_REGISTRY).await.map_err(|e| e.to_string())?;
        let current = match head {
            Some(head) => Some((head, registry::read_revision(store, &head).await.map_err(read_error)?)),
            None => None,
        };
        if retried && let Some((_, winner)) = &current {
            refuse_same_id_conflicts(winner, &changes.descriptors)?;
        }
        let next = Revision::next(current.as_ref().map(|(h, r)| (h, r)), changes.descriptors.clone())
            .map_err(|e| format!("publish transition registry: {e}"))?;
        if let Some((head, revision)) = &current
            && revision.entries == next.entries
        {
            return Ok(Outcome::Unchanged { revision: revision.revision, head: *head });
        }
        for source in &changes.sources {
            store.put_object(source).await.map_err(|e| e.to_string())?;
        }
        let object = revision_object(&next);
        store.put_object(&object).await.map_err(|e| e.to_string())?;
        match store.compare_and_set_registry_head(TRANSITION_REGISTRY, head.as_ref(), &object.hash).await {
            Ok(()) => return Ok(Outcome::Published { revision: next.revision, head: object.hash }),
            Err(StoreError::RegistryConflict { .. }) if !retried => retried = true,
            Err(StoreError::RegistryConflict { .. }) => {
                return Err(
                    "the registry head kept moving during publish; nothing was written — re-run the command".into()
                );
            }
            Err(error) => return Err(error.to_string()),
        }
    }
}

fn read_error(error: RegistryReadError) -> String {
    format!("publish transition registry: {error}")
}

fn refuse_same_id_conflicts(winner: &Revision, ours: &[Descriptor]) -> Result<(), String> {
    for descriptor in ours {
        if let Some(theirs) = winner.entry(descriptor.id.as_str())
            && theirs != descriptor
        {
            return Err(format!(
                "both this publish and the registry's revision {} set {:?} with different bytes; nothing was \
                     written — republish the winner's descriptor, or remove the entry",
                winner.revision,
                descriptor.id.as_str()
            ));
        }
    }
    Ok(())
}

/// Every source exists (or is about to be written) and loads under its own
/// pinned interpreter; every epoch nominates that interpreter's release.
async fn reverify(store: &Store, archive: &Archive, changes: &Changes, slots: &Slots) -> Result<(), String> {
    let epochs: EpochRegistry = registry::read_epochs(store).await.map_err(|e| e.to_string())?.ok_or_else(|| {
        "publish transition registry: no epoch registry head exists (world/epoch-registry/v1)".to_owned()
    })?;
    for descriptor in &changes.descriptors {
        let interpreter = archive.resolve(&descriptor.interpreter).map_err(|e| e.to_string())?;
        if !epochs.nominating(&interpreter.release()).contains(&descriptor.semantics_epoch) {
            return Err(format!(
                "publish transition registry: entry {:?} pins semantics epoch {}, but world/epoch-registry/v1 nominates \
                 no such epoch for interpreter release {:?}",
                descriptor.id.as_str(),
                descriptor.semantics_epoch,
                interpreter.release()
            ));
        }
        if changes.sources.iter().any(|s| s.hash == descriptor.transition_fn) {
            continue; // checked moments ago by build_changes
        }
        let source = store
            .get_object(&descriptor.transition_fn, true)
            .await
            .map_err(|e| e.to_string())?
            .filter(|o| o.semantic_id == TRANSITION_SOURCE)
            .and_then(|o| o.payload)
            .filter(|payload| HashRef::of(payload) == descriptor.transition_fn)
            .ok_or_else(|| {
                format!(
                    "publish transition registry: transition source \"{}\" is absent — publish the transition source \
                     object first, or name it via transitionFnFile",
                    descriptor.transition_fn
                )
            })?;
        check_source(&interpreter, &source, slots)
            .await
            .map_err(|output| not_loadable(descriptor.id.as_str(), &descriptor.transition_fn, &output))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    fn entry(id: &str) -> Value {
        json!({
            "id": id,
            "title": "Echo",
            "description": "echoes",
            "transitionFnFile": "echo.ail",
            "semanticsEpoch": 1,
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object"},
            "access": {"effect": "world.apply", "scope": "world", "cost": 1},
            "declaredEffects": [{"effect": "Workspace.Read", "scope": "worktree", "cost": 1}],
        })
    }

    fn parse(manifest: &Value) -> Result<Vec<ManifestEntry>, String> {
        parse_manifest(&serde_json::to_vec(manifest).unwrap(), "m.json")
    }

    #[test]
    fn a_refusal_names_the_field_path() {
        let mut manifest = json!([entry("a"), entry("b"), entry("c")]);
        manifest[2]["declaredEffects"][0]["cost"] = json!("1");
        assert_eq!(
            parse(&manifest).err().unwrap(),
            "parse manifest m.json: [2].declaredEffects[0].cost: invalid type: string \"1\", expected i64 at line 1 \
             column 687"
        );
        // The first offending field is the one named.
        manifest[1]["access"] = json!({"effect": "e", "scope": "s"});
        assert_eq!(
            parse(&manifest).err().unwrap(),
            "parse manifest m.json: [1].access: missing field `cost` at line 1 column 335"
        );
        let table: [(&[u8], &str); 5] = [
            (b"{not json", "parse manifest m.json: invalid type: map, expected a sequence at line 1 column 0"),
            (b"{}", "parse manifest m.json: invalid type: map, expected a sequence at line 1 column 0"),
            (
                b"[1]",
                "parse manifest m.json: [0]: invalid type: integer `1`, expected struct ManifestEntry at line 1 column 2",
            ),
            (b"[{\"id\":\"a\"}] x", "parse manifest m.json: trailing characters at line 1 column 14"),
            (b"[]", "manifest holds no descriptors"),
        ];
        for (bytes, message) in table {
            assert_eq!(parse_manifest(bytes, "m.json").err().unwrap(), message);
        }
    }

    /// A field of a manifest entry and a value of a type it never takes.
    fn mistyped_field() -> impl Strategy<Value = (&'static str, Value)> {
        prop::sample::select(vec![
            ("id", json!(7)),
            ("id", Value::Null),
            ("title", json!(["Echo"])),
            ("description", json!({"text": "x"})),
            ("transitionFnFile", json!(5)),
            ("transitionFn", json!(true)),
            ("semanticsEpoch", json!("1")),
            ("semanticsEpoch", json!(1.5)),
            ("access", json!("world.apply")),
            ("access.cost", json!("1")),
            ("access.effect", json!(1)),
            ("access.scope", Value::Null),
            ("declaredEffects", json!({"effect": "x"})),
            ("declaredEffects[0]", json!(["Workspace.Read"])),
            ("declaredEffects[0].cost", json!(1e300)),
            ("declaredEffects[0].scope", json!(false)),
        ])
    }

    fn set(value: &mut Value, field: &str, replacement: Value) {
        let pointer = format!("/{}", field.replace("[0]", "/0").replace('.', "/"));
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        match value.pointer_mut(parent).unwrap() {
            Value::Array(items) => items[key.parse::<usize>().unwrap()] = replacement,
            parent => {
                parent.as_object_mut().unwrap().insert(key.to_owned(), replacement);
            }
        }
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(256))]

        /// One mistyped field anywhere in a manifest of lawful entries: the refusal names its
        /// path; with none, every entry parses, unknown keys ignored.
        #[test]
        fn a_mistyped_field_is_refused_by_its_path(
            entries in 1usize..6,
            broken in proptest::option::of((any::<prop::sample::Index>(), mistyped_field())),
            unknown in any::<bool>(),
        ) {
            let mut manifest: Vec<Value> = (0..entries).map(|i| entry(&format!("t{i}"))).collect();
            if unknown {
                manifest[0]["interpreter"] = json!({"note": "ignored"});
            }
            let expected = broken.map(|(index, (field, value))| {
                let index = index.index(entries);
                set(&mut manifest[index], field, value);
                format!("parse manifest m.json: [{index}].{field}: ")
            });
            match (parse(&Value::Array(manifest)), expected) {
                (Ok(parsed), None) => prop_assert_eq!(parsed.len(), entries),
                (Err(message), Some(prefix)) => prop_assert!(message.starts_with(&prefix), "{} does not start {}", message, prefix),
                (outcome, expected) => prop_assert!(false, "{:?} vs {:?}", outcome.map(|e| e.len()), expected),
            }
        }

        #[test]
        fn the_manifest_parser_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256), text in "[\\[\\]{}\":,a-zA-Z0-9 ]{0,96}") {
            let _ = parse_manifest(&bytes, "m.json");
            let _ = parse_manifest(text.as_bytes(), "m.json");
        }
    }
}
