//! The transition registry and the epoch registry: their object formats and
//! the rules a revision must satisfy (reference-core §5).
//!
//! A registry revision is one canonical JSON object; its sha256 is the head
//! ref. Decoding is strict: unknown or missing keys are refused and the bytes
//! must re-encode identically, so a revision has exactly one byte form.

use serde_json::value::RawValue;

use crate::canonical::{canonical_value, canonicalize};
use crate::grant::{AccessTriple, Grant, grants_allow};
use crate::hashref::HashRef;
use crate::ids::TransitionId;

pub const TRANSITION_REGISTRY: &str = "world/transition-registry/v1";
pub const EPOCH_REGISTRY: &str = "world/epoch-registry/v1";
pub const TRANSITION_SOURCE: &str = "world/transition-source/v1";
/// The one registry object whose interface hash is not sha256(semantic id).
pub const TRANSITION_REGISTRY_INTERFACE: &str =
    "sha256:743f39f470bf354ebab0ab196598b5ba72db80463d833325cb7672249d4734ac";

pub const MAX_ENTRIES: usize = 1024;
pub const MAX_SCHEMA_RAW: usize = 256 * 1024;
pub const MAX_SCHEMA_CANONICAL: usize = 64 * 1024;
pub const MAX_REVISION_CANONICAL: usize = 8 * 1024 * 1024;
/// The release string of a core serving without an interpreter.
pub const UNPINNED_RELEASE: &str = "unpinned";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("schema: {0}")]
    Schema(String),
    #[error("revision is not canonical registry JSON: {0}")]
    Undecodable(String),
    #[error("revision {revision} is invalid: {reason}")]
    Invalid { revision: i64, reason: String },
    #[error("duplicate descriptor ID {0:?}")]
    DuplicateId(String),
}

/// A JSON schema in canonical form whose root is an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema(String);

impl Schema {
    pub fn parse(raw: &[u8]) -> Result<Schema, RegistryError> {
        let canonical = canonicalize(raw, MAX_SCHEMA_RAW).map_err(|e| RegistryError::Schema(e.to_string()))?;
        if canonical.first() != Some(&b'{') {
            return Err(RegistryError::Schema("the schema root must be a JSON object".into()));
        }
        if canonical.len() > MAX_SCHEMA_CANONICAL {
            return Err(RegistryError::Schema(format!(
                "canonical schema is {} bytes, over the {MAX_SCHEMA_CANONICAL}-byte limit",
                canonical.len()
            )));
        }
        // canonicalize emits UTF-8 only.
        String::from_utf8(canonical).map(Schema).map_err(|e| RegistryError::Schema(e.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One published transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub id: TransitionId,
    pub title: String,
    pub description: String,
    pub transition_fn: HashRef,
    pub interpreter: HashRef,
    pub semantics_epoch: i64,
    pub input_schema: Schema,
    pub output_schema: Schema,
    pub access: AccessTriple,
    pub declared_effects: Vec<AccessTriple>,
}

impl Descriptor {
    pub fn validate(&self) -> Result<(), String> {
        if self.semantics_epoch < 0 {
            return Err(format!("entry {:?}: semanticsEpoch must be non-negative", self.id.as_str()));
        }
        if self.access.cost < 0 {
            return Err(format!("entry {:?}: access cost must be non-negative", self.id.as_str()));
        }
        for (i, effect) in self.declared_effects.iter().enumerate() {
            if effect.cost < 0 {
                return Err(format!("entry {:?}: declared effect {i} has a negative cost", self.id.as_str()));
            }
            if self.declared_effects[..i].contains(effect) {
                return Err(format!(
                    "entry {:?}: declared effect {}/{}/{} appears twice",
                    self.id.as_str(),
                    effect.effect,
                    effect.scope,
                    effect.cost
                ));
            }
        }
        Ok(())
    }

    /// Whether a session holding `grants` sees and may call this transition.
    pub fn visible_to(&self, grants: &[Grant], now: i64) -> bool {
        grants_allow(grants, &self.access, now)
    }

    fn encode_into(&self, out: &mut String) {
        out.push_str("{\"access\":");
        encode_triple(&self.access, out);
        out.push_str(",\"declaredEffects\":[");
        for (i, effect) in self.declared_effects.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            encode_triple(effect, out);
        }
        out.push_str("],\"description\":");
        push_string(&self.description, out);
        out.push_str(",\"id\":");
        push_string(self.id.as_str(), out);
        out.push_str(",\"inputSchema\":");
        out.push_str(self.input_schema.as_str());
        out.push_str(",\"interpreter\":");
        push_string(&self.interpreter.to_string(), out);
        out.push_str(",\"outputSchema\":");
        out.push_str(self.output_schema.as_str());
        out.push_str(&format!(",\"semanticsEpoch\":{}", self.semantics_epoch));
        out.push_str(",\"title\":");
        push_string(&self.title, out);
        out.push_str(",\"transitionFn\":");
        push_string(&self.transition_fn.to_string(), out);
        out.push('}');
    }
}

fn encode_triple(triple: &AccessTriple, out: &mut String) {
    out.push_str(&format!("{{\"cost\":{},\"effect\":", triple.cost));
    push_string(&triple.effect, out);
    out.push_str(",\"scope\":");
    push_string(&triple.scope, out);
    out.push('}');
}

fn push_string(text: &str, out: &mut String) {
    let encoded = canonical_value(&serde_json::Value::String(text.to_owned()));
    out.push_str(&String::from_utf8_lossy(&encoded));
}

/// One revision of the transition registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revision {
    pub revision: i64,
    /// `None` for revision 1.
    pub parent: Option<HashRef>,
    /// Strictly ordered by the bytes of their ids.
    pub entries: Vec<Descriptor>,
}

impl Revision {
    pub fn validate(&self) -> Result<(), RegistryError> {
        let invalid = |reason: String| RegistryError::Invalid { revision: self.revision, reason };
        if self.revision < 1 {
            return Err(invalid("revision numbers start at 1".into()));
        }
        match (self.revision, self.parent) {
            (1, Some(_)) => return Err(invalid("revision 1 has no parent".into())),
            (n, None) if n > 1 => return Err(invalid("a revision after the first names its parent".into())),
            _ => {}
        }
        if self.entries.is_empty() && self.revision == 1 {
            return Err(invalid("a first revision needs at least one descriptor".into()));
        }
        if self.entries.len() > MAX_ENTRIES {
            return Err(invalid(format!("{} entries, over the limit of {MAX_ENTRIES}", self.entries.len())));
        }
        for pair in self.entries.windows(2) {
            if pair[0].id.as_str() == pair[1].id.as_str() {
                return Err(RegistryError::DuplicateId(pair[0].id.as_str().to_owned()));
            }
            if pair[0].id.as_str() > pair[1].id.as_str() {
                return Err(invalid("entries are not sorted by id".into()));
            }
        }
        for entry in &self.entries {
            entry.validate().map_err(invalid)?;
        }
        Ok(())
    }

    /// The canonical bytes (the object payload; its sha256 is the head ref).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = String::from("{\"entries\":[");
        for (i, entry) in self.entries.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            entry.encode_into(&mut out);
        }
        out.push_str("],\"interfaceHash\":");
        push_string(TRANSITION_REGISTRY_INTERFACE, &mut out);
        out.push_str(",\"parent\":");
        push_string(&HashRef::optional_text(self.parent.as_ref()), &mut out);
        out.push_str(&format!(",\"revision\":{},\"semanticID\":", self.revision));
        push_string(TRANSITION_REGISTRY, &mut out);
        out.push('}');
        out.into_bytes()
    }

    pub fn decode(bytes: &[u8]) -> Result<Revision, RegistryError> {
        let undecodable = |e: String| RegistryError::Undecodable(e);
        if bytes.len() > MAX_REVISION_CANONICAL {
            return Err(undecodable(format!("{} bytes, over the {MAX_REVISION_CANONICAL}-byte limit", bytes.len())));
        }
        let wire: wire::Revision = serde_json::from_slice(bytes).map_err(|e| undecodable(e.to_string()))?;
        if wire.semantic_id != TRANSITION_REGISTRY || wire.interface_hash != TRANSITION_REGISTRY_INTERFACE {
            return Err(undecodable("wrong semanticID or interfaceHash".into()));
        }
        let parent = HashRef::parse_optional(&wire.parent).map_err(|e| undecodable(format!("parent: {e}")))?;
        let mut entries = Vec::with_capacity(wire.entries.len());
        for entry in wire.entries {
            let reference = |field: &str, text: &str| {
                HashRef::parse(text).map_err(|e| undecodable(format!("entry {:?} {field}: {e}", entry.id)))
            };
            entries.push(Descriptor {
                id: TransitionId::parse(&entry.id).map_err(|e| undecodable(e.to_string()))?,
                transition_fn: reference("transitionFn", &entry.transition_fn)?,
                interpreter: reference("interpreter", &entry.interpreter)?,
                title: entry.title,
                description: entry.description,
                semantics_epoch: entry.semantics_epoch,
                input_schema: Schema(entry.input_schema.get().to_owned()),
                output_schema: Schema(entry.output_schema.get().to_owned()),
                access: entry.access,
                declared_effects: entry.declared_effects,
            });
        }
        let revision = Revision { revision: wire.revision, parent, entries };
        if revision.encode() != bytes {
            return Err(undecodable("the bytes do not re-encode identically".into()));
        }
        revision.validate()?;
        Ok(revision)
    }

    pub fn entry(&self, id: &str) -> Option<&Descriptor> {
        self.entries.binary_search_by(|d| d.id.as_str().cmp(id)).ok().map(|i| &self.entries[i])
    }

    /// The first revision or the one after `current`, replacing or adding
    /// `changes` by id; entries come out sorted by id.
    pub fn next(current: Option<(&HashRef, &Revision)>, changes: Vec<Descriptor>) -> Result<Revision, RegistryError> {
        let mut entries: Vec<Descriptor> = current.map(|(_, r)| r.entries.clone()).unwrap_or_default();
        let mut seen = std::collections::BTreeSet::new();
        for change in changes {
            if !seen.insert(change.id.as_str().to_owned()) {
                return Err(RegistryError::DuplicateId(change.id.as_str().to_owned()));
            }
            match entries.binary_search_by(|d| d.id.as_str().cmp(change.id.as_str())) {
                Ok(i) => entries[i] = change,
                Err(i) => entries.insert(i, change),
            }
        }
        let next = match current {
            None => Revision { revision: 1, parent: None, entries },
            Some((head, revision)) => Revision { revision: revision.revision + 1, parent: Some(*head), entries },
        };
        next.validate()?;
        Ok(next)
    }
}

/// The epoch registry: which interpreter releases each semantics epoch nominates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochRegistry {
    pub epochs: Vec<(i64, Vec<String>)>,
}

impl EpochRegistry {
    /// The bootstrap revision a core writes for the release it serves.
    pub fn bootstrap(release: &str) -> EpochRegistry {
        EpochRegistry { epochs: vec![(1, vec![release.to_owned()])] }
    }

    pub fn encode(&self) -> Vec<u8> {
        let epochs: Vec<serde_json::Value> = self
            .epochs
            .iter()
            .map(|(epoch, candidates)| serde_json::json!({ "epoch": epoch, "candidates": candidates }))
            .collect();
        canonical_value(&serde_json::json!({ "semantic_id": EPOCH_REGISTRY, "epochs": epochs }))
    }

    pub fn decode(bytes: &[u8]) -> Result<EpochRegistry, RegistryError> {
        let wire: wire::EpochRegistry =
            serde_json::from_slice(bytes).map_err(|e| RegistryError::Undecodable(e.to_string()))?;
        if wire.semantic_id != EPOCH_REGISTRY {
            return Err(RegistryError::Undecodable("wrong semantic_id".into()));
        }
        Ok(EpochRegistry { epochs: wire.epochs.into_iter().map(|e| (e.epoch, e.candidates)).collect() })
    }

    /// The epochs whose candidates include `release`, in registry order.
    pub fn nominating(&self, release: &str) -> Vec<i64> {
        self.epochs
            .iter()
            .filter(|(_, candidates)| candidates.iter().any(|c| c == release))
            .map(|(epoch, _)| *epoch)
            .collect()
    }
}

/// An interpreter's release string: the first non-blank line of its
/// `--version` output, trimmed.
pub fn release_of(version_output: &str) -> String {
    version_output.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or(UNPINNED_RELEASE).to_owned()
}

mod wire {
    use super::*;

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Revision {
        pub entries: Vec<Entry>,
        #[serde(rename = "interfaceHash")]
        pub interface_hash: String,
        pub parent: String,
        pub revision: i64,
        #[serde(rename = "semanticID")]
        pub semantic_id: String,
    }

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    pub struct Entry {
        pub access: AccessTriple,
        pub declared_effects: Vec<AccessTriple>,
        pub description: String,
        pub id: String,
        pub input_schema: Box<RawValue>,
        pub interpreter: String,
        pub output_schema: Box<RawValue>,
        pub semantics_epoch: i64,
        pub title: String,
        pub transition_fn: String,
    }

    #[derive(serde::Deserialize)]
    pub struct EpochRegistry {
        pub semantic_id: String,
        pub epochs: Vec<Epoch>,
    }

    #[derive(serde::Deserialize)]
    pub struct Epoch {
        pub epoch: i64,
        pub candidates: Vec<String>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor(id: &str, cost: i64) -> Descriptor {
        Descriptor {
            id: TransitionId::parse(id).unwrap(),
            title: "Echo".into(),
            description: "quickstart <transition> & \"more\"".into(),
            transition_fn: HashRef::of(b"source"),
            interpreter: HashRef::of(b"interpreter"),
            semantics_epoch: 1,
            input_schema: Schema::parse(br#"{ "type": "object", "maximum": 1.50 }"#).unwrap(),
            output_schema: Schema::parse(br#"{"type":"object"}"#).unwrap(),
            access: AccessTriple { effect: "world.apply".into(), scope: "world".into(), cost },
            declared_effects: vec![],
        }
    }

    #[test]
    fn a_revision_has_one_canonical_byte_form_that_round_trips() {
        let revision = Revision::next(None, vec![descriptor("tools.echo", 1), descriptor("a.b", 0)]).unwrap();
        assert_eq!(revision.revision, 1);
        assert_eq!(revision.entries[0].id.as_str(), "a.b", "entries sorted by id");
        let bytes = revision.encode();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.starts_with("{\"entries\":[{\"access\":{\"cost\":0,\"effect\":\"world.apply\",\"scope\":\"world\"}")
        );
        assert!(text.contains("\"inputSchema\":{\"maximum\":1.5,\"type\":\"object\"}"));
        assert!(text.contains("quickstart <transition> & \\\"more\\\""));
        assert!(text.ends_with(&format!(
            "\"interfaceHash\":\"{TRANSITION_REGISTRY_INTERFACE}\",\"parent\":\"\",\"revision\":1,\"semanticID\":\"world/transition-registry/v1\"}}"
        )));
        assert_eq!(Revision::decode(&bytes).unwrap(), revision);
        // Canonical means the encoding is a fixed point of canonicalize.
        assert_eq!(canonicalize(&bytes, usize::MAX).unwrap(), bytes);
    }

    #[test]
    fn decoding_refuses_anything_but_the_canonical_form() {
        let revision = Revision::next(None, vec![descriptor("tools.echo", 1)]).unwrap();
        let text = String::from_utf8(revision.encode()).unwrap();
        for bad in [
            text.replacen("{\"entries\"", "{ \"entries\"", 1),
            text.replacen("\"revision\":1", "\"revision\":1,\"extra\":1", 1),
            text.replacen(",\"title\":\"Echo\"", "", 1),
            text.replacen("\"semanticID\":\"world/transition-registry/v1\"", "\"semanticID\":\"x\"", 1),
        ] {
            assert!(Revision::decode(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn next_replaces_by_id_and_chains_to_the_head() {
        let first = Revision::next(None, vec![descriptor("tools.echo", 1)]).unwrap();
        let head = HashRef::of(&first.encode());
        let second =
            Revision::next(Some((&head, &first)), vec![descriptor("tools.echo", 2), descriptor("b", 0)]).unwrap();
        assert_eq!(second.revision, 2);
        assert_eq!(second.parent, Some(head));
        assert_eq!(second.entries.len(), 2);
        assert_eq!(second.entry("tools.echo").unwrap().access.cost, 2);
        assert!(matches!(
            Revision::next(None, vec![descriptor("x", 0), descriptor("x", 1)]),
            Err(RegistryError::DuplicateId(_))
        ));
        assert!(Revision::next(None, vec![]).is_err(), "a first revision needs a descriptor");
    }

    #[test]
    fn descriptors_refuse_negative_costs_and_duplicate_declared_effects() {
        let mut d = descriptor("x", -1);
        assert!(d.validate().is_err());
        d.access.cost = 0;
        let effect = AccessTriple { effect: "Workspace.Read".into(), scope: "worktree".into(), cost: 1 };
        d.declared_effects = vec![effect.clone(), effect];
        assert!(d.validate().unwrap_err().contains("appears twice"));
    }

    #[test]
    fn schemas_must_be_canonical_objects() {
        assert!(Schema::parse(b"[]").is_err());
        assert!(Schema::parse(b"{\"a\":1,\"a\":2}").is_err());
        assert_eq!(Schema::parse(b" {\"b\":1, \"a\":1e2} ").unwrap().as_str(), "{\"a\":100,\"b\":1}");
    }

    #[test]
    fn epochs_nominate_releases_and_releases_come_from_the_first_line() {
        let registry = EpochRegistry::bootstrap("ailang-rs 0.1.0 (AILANG v0.41 compatible)");
        let decoded = EpochRegistry::decode(&registry.encode()).unwrap();
        assert_eq!(decoded, registry);
        assert_eq!(decoded.nominating("ailang-rs 0.1.0 (AILANG v0.41 compatible)"), vec![1]);
        assert!(decoded.nominating("other").is_empty());
        assert_eq!(release_of("\n  AILANG v0.41.0 \nbuilt …"), "AILANG v0.41.0");
        assert_eq!(release_of(""), UNPINNED_RELEASE);
    }
}
