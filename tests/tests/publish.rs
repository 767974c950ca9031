//! `world-publish transitions` through the real binary and a pseudo-terminal:
//! every step of the reference's order and every outcome line.

use std::path::PathBuf;
use std::process::Command;

use world_core::registry::read_revision;
use world_core::store::{OpenMode, Reader, Store, StoreLocation, StoredObject};
use world_model::registry::{EPOCH_REGISTRY, TRANSITION_REGISTRY, TRANSITION_SOURCE};
use world_model::{EpochRegistry, HashRef};
use world_tests::{AttendedRun, bin, run_attended, start_core};

const ECHO: &str =
    "module quickstart/echo\n\nexport func main(input: string) -> string {\n  \"{\\\"echo\\\":${input}}\"\n}\n";
const RELEASE: &str = "ailang-rs 0.1.0 (AILANG v0.41 compatible)";

struct Fixture {
    dir: tempfile::TempDir,
    store: PathBuf,
}

impl Fixture {
    /// A store that a core has served once with the interpreter (epoch 1 bootstrapped).
    fn served() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("world.db");
        let ailang = bin("ailang");
        let (core, _) = start_core(&store, dir.path(), &["--ailang-bin", ailang.to_str().unwrap()]);
        assert!(core.terminate().success());
        std::fs::write(dir.path().join("echo.ail"), ECHO).unwrap();
        let fixture = Self { dir, store };
        fixture.manifest("echo.json", &[("tools.echo", "echo.ail")]);
        fixture
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn manifest(&self, name: &str, entries: &[(&str, &str)]) {
        let items: Vec<serde_json::Value> = entries
            .iter()
            .map(|(id, file)| {
                serde_json::json!({
                    "id": id, "title": "Echo", "description": "quickstart transition",
                    "transitionFnFile": file,
                    "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
                    "access": {"effect": "world.apply", "scope": "world", "cost": 1},
                    "declaredEffects": []
                })
            })
            .collect();
        std::fs::write(self.path(name), serde_json::to_vec(&items).unwrap()).unwrap();
    }

    fn command(&self, manifest: &str, extra: &[&str]) -> Command {
        let mut command = Command::new(bin("world-publish"));
        command
            .current_dir(self.dir.path())
            .args(["transitions", "--store", "world.db", "--manifest", manifest, "--ailang-bin"])
            .arg(bin("ailang"))
            .args(extra);
        command
    }

    fn publish(&self, manifest: &str, count: usize) -> AttendedRun {
        run_attended(self.command(manifest, &[]), &format!("publish {count} transitions to world.db\n"))
    }

    async fn store(&self) -> Store {
        Store::open(&StoreLocation::Sqlite(self.store.clone()), OpenMode::MustExist).await.unwrap()
    }

    async fn head(&self) -> Option<HashRef> {
        let store = self.store().await;
        let head = store.registry_head(TRANSITION_REGISTRY).await.unwrap();
        store.close().await;
        head
    }

    async fn sources(&self) -> usize {
        let store = self.store().await;
        let n =
            store.reads(&Reader::Everything).objects_by_semantic_id(TRANSITION_SOURCE, None, 500).await.unwrap().len();
        store.close().await;
        n
    }
}

fn head_of(line: &str) -> HashRef {
    let start = line.find("(head ").expect("line names the head") + "(head ".len();
    HashRef::parse(&line[start..start + 71]).unwrap()
}

#[tokio::test]
async fn the_seed_echo_publishes_and_an_identical_republish_is_unchanged() {
    let fixture = Fixture::served();
    let run = fixture.publish("echo.json", 1);
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.terminal.contains(
            "Type exactly, to write a LOCAL transition-registry revision (1 descriptor(s) from echo.json):\n  publish 1 transitions to world.db\n> "
        ) || run.terminal.contains("publish 1 transitions to world.db\r\n> "),
        "prompt: {:?}",
        run.terminal
    );
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("semantics epoch 1 derived from world/epoch-registry/v1 for interpreter release \"{RELEASE}\"")
    );
    assert!(lines[1].starts_with("published transition registry revision 1 (head sha256:"), "{}", lines[1]);
    assert!(lines[1].ends_with("); the daemon's A2A card will list these skills on its next read"));
    let head = head_of(lines[1]);
    assert_eq!(fixture.head().await, Some(head));

    let store = fixture.store().await;
    let revision = read_revision(&store, &head).await.unwrap();
    assert_eq!(revision.revision, 1);
    assert_eq!(revision.parent, None);
    let echo = revision.entry("tools.echo").unwrap();
    let source = store.get_object(&echo.transition_fn, true).await.unwrap().unwrap();
    assert_eq!(source.semantic_id, TRANSITION_SOURCE);
    assert_eq!(source.provenance, "cmd/world-publish");
    assert_eq!(source.payload.as_deref(), Some(ECHO.as_bytes()));
    store.close().await;

    let again = fixture.publish("echo.json", 1);
    assert!(again.status.success(), "{}", again.stderr);
    assert_eq!(
        again.stdout.lines().last().unwrap(),
        format!("transition registry UNCHANGED at revision 1 (head {head}); nothing written")
    );
    assert_eq!(fixture.head().await, Some(head));
}

#[tokio::test]
async fn a_changed_source_makes_revision_two_with_revision_one_as_parent() {
    let fixture = Fixture::served();
    let first = head_of(fixture.publish("echo.json", 1).stdout.lines().last().unwrap());
    std::fs::write(fixture.path("echo.ail"), ECHO.replace("echo", "echoed")).unwrap();
    let run = fixture.publish("echo.json", 1);
    assert!(run.status.success(), "{}", run.stderr);
    let line = run.stdout.lines().last().unwrap();
    assert!(line.starts_with("published transition registry revision 2 (head "), "{line}");
    let store = fixture.store().await;
    let revision = read_revision(&store, &head_of(line)).await.unwrap();
    assert_eq!(revision.parent, Some(first));
    store.close().await;
}

#[tokio::test]
async fn a_source_importing_world_is_refused_with_ldr001_and_nothing_is_written() {
    refused_source(
        "module quickstart/bad\n\nimport world/kernel (commit)\n\nexport func main(input: string) -> string {\n  input\n}\n",
        "LDR001",
    )
    .await;
}

#[tokio::test]
async fn an_ill_typed_source_is_refused_with_the_checker_diagnostic_and_nothing_is_written() {
    refused_source(
        "module quickstart/bad\n\nexport func main(input: string) -> string {\n  intToFloat(input)\n}\n",
        "Error: TC001: type mismatch: expected int, found string: argument 1 of 'intToFloat' at host/capsule/main.ail:4:14",
    )
    .await;
}

/// Publishing `source` is refused with `diagnostic`, and nothing is written.
async fn refused_source(source: &str, diagnostic: &str) {
    let fixture = Fixture::served();
    std::fs::write(fixture.path("bad.ail"), source).unwrap();
    fixture.manifest("bad.json", &[("tools.bad", "bad.ail")]);
    let run = fixture.publish("bad.json", 1);
    assert_eq!(run.status.code(), Some(1), "{}", run.stdout);
    assert!(run.stderr.contains("is not loadable under its pinned interpreter"), "{}", run.stderr);
    assert!(run.stderr.contains(diagnostic), "{}", run.stderr);
    assert_eq!(fixture.head().await, None);
    assert_eq!(fixture.sources().await, 0, "a refused source is never stored");
}

#[tokio::test]
async fn an_ambiguous_epoch_is_refused_and_a_stated_one_must_be_nominated() {
    let fixture = Fixture::served();
    let store = fixture.store().await;
    let current = store.registry_head(EPOCH_REGISTRY).await.unwrap();
    let two = EpochRegistry { epochs: vec![(1, vec![RELEASE.into()]), (2, vec![RELEASE.into()])] };
    let object = StoredObject::new(EPOCH_REGISTRY, "test", two.encode());
    store.put_object(&object).await.unwrap();
    store.compare_and_set_registry_head(EPOCH_REGISTRY, current.as_ref(), &object.hash).await.unwrap();
    store.close().await;
    let run = fixture.publish("echo.json", 1);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        run.stderr.contains(&format!(
            "entry \"tools.echo\": semanticsEpoch is required — interpreter release \"{RELEASE}\" is nominated by more than one epoch ([1, 2]); state one of them"
        )),
        "{}",
        run.stderr
    );
    assert_eq!(fixture.head().await, None);

    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture.path("echo.json")).unwrap()).unwrap();
    manifest[0]["semanticsEpoch"] = 7.into();
    std::fs::write(fixture.path("seven.json"), manifest.to_string()).unwrap();
    let run = fixture.publish("seven.json", 1);
    assert_eq!(run.status.code(), Some(1));
    assert!(run.stderr.contains("semanticsEpoch 7 is not one of the epochs nominating"), "{}", run.stderr);
}

#[tokio::test]
async fn publishing_while_a_core_serves_is_refused() {
    let fixture = Fixture::served();
    let (_core, _) = start_core(&fixture.store, fixture.dir.path(), &[]);
    let run = fixture.publish("echo.json", 1);
    assert_eq!(run.status.code(), Some(3));
    assert!(run.stderr.contains("stop the core first"), "{}", run.stderr);
    assert!(run.stderr.contains("STOP fence=store reason=unopenable\n"), "{}", run.stderr);
    assert_eq!(fixture.head().await, None);
}

#[tokio::test]
async fn fences_refuse_ci_a_missing_terminal_a_wrong_phrase_and_live() {
    let fixture = Fixture::served();

    let under_ci = fixture.command("echo.json", &[]).env("CI", "true").output().unwrap();
    assert_eq!(under_ci.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&under_ci.stderr).starts_with("STOP fence=ci reason=ci\n"));

    let detached = world_tests::run_without_terminal(fixture.command("echo.json", &[]));
    assert_eq!(detached.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&detached.stderr);
    assert!(stderr.starts_with("STOP fence=tty reason=no-controlling-terminal\n"), "{stderr}");

    let wrong = run_attended(fixture.command("echo.json", &[]), "publish 2 transitions to world.db\n");
    assert_eq!(wrong.status.code(), Some(3));
    assert!(wrong.stderr.starts_with("STOP fence=confirmation reason=mismatch\n"), "{}", wrong.stderr);
    assert!(wrong.stderr.ends_with("type exactly: publish 1 transitions to world.db\n"), "{}", wrong.stderr);

    let live = run_attended(fixture.command("echo.json", &["--live"]), "publish 1 transitions to world.db\n");
    assert_eq!(live.status.code(), Some(3));
    assert!(live.stderr.starts_with("STOP fence=mode reason=transitions-is-read-only\n"));

    assert_eq!(fixture.head().await, None, "a refused publish wrote a head");
    assert_eq!(fixture.sources().await, 0);
}

#[tokio::test]
async fn usage_and_pin_errors_say_what_is_wrong() {
    let fixture = Fixture::served();
    let no_manifest = Command::new(bin("world-publish"))
        .current_dir(fixture.dir.path())
        .args(["transitions", "--store", "world.db"])
        .output()
        .unwrap();
    assert_eq!(no_manifest.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_manifest.stderr).contains("--manifest names the descriptor manifest file"));

    let no_store = Command::new(bin("world-publish"))
        .args(["transitions", "--manifest", "m.json"])
        .env_remove("WORLD_STORE")
        .output()
        .unwrap();
    assert_eq!(no_store.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&no_store.stderr).starts_with("STOP fence=store reason=absent\n"));

    let mut both = fixture.command("echo.json", &["--interpreter-ref", &HashRef::of(b"x").to_string()]);
    both.env_remove("CI");
    let both = run_attended(both, "publish 1 transitions to world.db\n");
    assert_eq!(both.status.code(), Some(1));
    assert!(both.stderr.contains("give exactly one of --ailang-bin or --interpreter-ref"));

    let mut unknown = Command::new(bin("world-publish"));
    unknown.current_dir(fixture.dir.path()).args([
        "transitions",
        "--store",
        "world.db",
        "--manifest",
        "echo.json",
        "--interpreter-ref",
        &HashRef::of(b"x").to_string(),
    ]);
    let unknown = run_attended(unknown, "publish 1 transitions to world.db\n");
    assert_eq!(unknown.status.code(), Some(1));
    assert!(unknown.stderr.contains("is not archived next to the store"), "{}", unknown.stderr);
}

/// Two publisher processes at once: each either publishes or is refused
/// whole; the registry never loses an entry and every revision's parent is
/// the head before it.
#[tokio::test]
async fn racing_publishers_never_lose_an_entry_or_break_the_parent_chain() {
    let fixture = Fixture::served();
    std::fs::write(fixture.path("other.ail"), ECHO.replace("quickstart/echo", "quickstart/other")).unwrap();
    fixture.manifest("a.json", &[("tools.a", "echo.ail")]);
    fixture.manifest("b.json", &[("tools.b", "other.ail")]);
    let mut published = Vec::new();
    for _round in 0..3 {
        let a = fixture.command("a.json", &[]);
        let b = fixture.command("b.json", &[]);
        let runs = std::thread::scope(|scope| {
            let first = scope.spawn(|| run_attended(a, "publish 1 transitions to world.db\n"));
            let second = scope.spawn(|| run_attended(b, "publish 1 transitions to world.db\n"));
            [("tools.a", first.join().unwrap()), ("tools.b", second.join().unwrap())]
        });
        for (id, run) in runs {
            match run.status.code() {
                Some(0) => published.push(id),
                Some(3) => assert!(run.stderr.contains("STOP fence=store reason=unopenable"), "{}", run.stderr),
                other => panic!("{id}: exit {other:?}: {}", run.stderr),
            }
        }
    }
    assert!(!published.is_empty());
    let store = fixture.store().await;
    let mut head = store.registry_head(TRANSITION_REGISTRY).await.unwrap().expect("a head");
    let top = read_revision(&store, &head).await.unwrap();
    for id in &published {
        assert!(top.entry(id).is_some(), "{id} was published but is missing from the head revision");
    }
    loop {
        let revision = read_revision(&store, &head).await.unwrap();
        match revision.parent {
            None => {
                assert_eq!(revision.revision, 1);
                break;
            }
            Some(parent) => {
                assert_eq!(read_revision(&store, &parent).await.unwrap().revision, revision.revision - 1);
                head = parent;
            }
        }
    }
    store.close().await;
}

#[tokio::test]
async fn manifest_errors_and_a_closed_terminal_write_nothing() {
    let fixture = Fixture::served();
    let cases: [(&str, &[u8], &str); 5] = [
        ("missing.json", b"", "world-publish transitions: read manifest: "),
        ("garbage.json", b"{not json", "world-publish transitions: parse manifest garbage.json: "),
        ("empty.json", b"[]", "world-publish transitions: manifest holds no descriptors"),
        (
            "both.json",
            br#"[{"id":"tools.x","transitionFn":"sha256:0000000000000000000000000000000000000000000000000000000000000000","transitionFnFile":"echo.ail","inputSchema":{},"outputSchema":{}}]"#,
            "entry \"tools.x\": give exactly one of transitionFn or transitionFnFile",
        ),
        (
            "schema.json",
            br#"[{"id":"tools.x","transitionFnFile":"echo.ail","inputSchema":{"type":7},"outputSchema":{}}]"#,
            "input schema does not compile",
        ),
    ];
    for (name, bytes, message) in cases {
        if name != "missing.json" {
            std::fs::write(fixture.path(name), bytes).unwrap();
        }
        let run = fixture.publish(name, 1);
        assert_eq!(run.status.code(), Some(1), "{name}: {}", run.stderr);
        assert!(run.stderr.contains(message), "{name}: {}", run.stderr);
    }
    // The terminal closes before a line is typed.
    let closed = run_attended(fixture.command("echo.json", &[]), "\u{4}");
    assert_eq!(closed.status.code(), Some(3));
    assert!(closed.stderr.starts_with("STOP fence=confirmation reason=eof\n"), "{}", closed.stderr);
    assert_eq!(fixture.head().await, None);
    assert_eq!(fixture.sources().await, 0);
}
