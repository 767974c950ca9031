//! The invocation rules in-process: a real store (SQLite in a temp dir), the real
//! coordinator, broker and worktree handlers, and a scripted runner in place of the
//! interpreter, so every rule (R1–R17, the output law, the plan and finish laws, output
//! composition) is one table row. `tests/` runs the same rules against the real interpreter.

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use world_core::capsule::{CapsuleError, Runner};
use world_core::effects::ailang::AilangHandlers;
use world_core::effects::handlers::Effects;
use world_core::effects::workspace::WorkspaceHandlers;
use world_core::invoke::{Call, Coordinator, Invoked};
use world_core::limits::Limits;
use world_core::registry::{RegistryReader, revision_object};
use world_core::session::SessionBinding;
use world_core::store::{OpenMode, Store, StoreLocation, StoredObject};
use world_core::subprocess::{Finished, RunError, Slots};
use world_model::registry::{TRANSITION_REGISTRY, TRANSITION_SOURCE};
use world_model::{
    AccessTriple, Descriptor, Episode, Failure, Grant, HashRef, Revision, Schema, Surface, TransitionId,
};

/// What one run of the scripted interpreter answers.
enum Reply {
    Exit(i32, &'static str, &'static str),
    Out(String),
    Fail(fn() -> CapsuleError),
}

/// Answers runs from a script, in order, and remembers each input it was given.
struct Scripted {
    replies: Mutex<VecDeque<Reply>>,
    inputs: Mutex<Vec<String>>,
}

impl Runner for Scripted {
    fn interpreter_ref(&self) -> HashRef {
        HashRef::of(b"scripted interpreter")
    }

    fn slots_in_use(&self) -> usize {
        0
    }

    fn run<'a>(&'a self, _: &'a [u8], input: &'a str, _: Duration) -> BoxFuture<'a, Result<Finished, CapsuleError>> {
        self.inputs.lock().unwrap().push(input.to_owned());
        let reply = self.replies.lock().unwrap().pop_front().expect("the script has a reply for every run");
        Box::pin(async move {
            let finished = |code: i32, stdout: &str, stderr: &str| Finished {
                status: std::process::ExitStatus::from_raw(code << 8),
                stdout: stdout.as_bytes().to_vec(),
                stderr: stderr.as_bytes().to_vec(),
            };
            match reply {
                Reply::Exit(code, stdout, stderr) => Ok(finished(code, stdout, stderr)),
                Reply::Out(stdout) => Ok(finished(0, &format!("{stdout}\n"), "")),
                Reply::Fail(error) => Err(error()),
            }
        })
    }
}

struct Bench {
    _dir: tempfile::TempDir,
    root: PathBuf,
    store: Store,
    registry: Arc<RegistryReader>,
    runner: Arc<Scripted>,
    coordinator: Arc<Coordinator>,
    head: HashRef,
}

fn triple(effect: &str, scope: &str, cost: i64) -> AccessTriple {
    AccessTriple { effect: effect.into(), scope: scope.into(), cost }
}

fn descriptor(id: &str, source: HashRef, access: AccessTriple, declared: Vec<AccessTriple>) -> Descriptor {
    Descriptor {
        id: TransitionId::parse(id).unwrap(),
        title: id.into(),
        description: String::new(),
        transition_fn: source,
        interpreter: HashRef::of(b"scripted interpreter"),
        semantics_epoch: 1,
        input_schema: Schema::parse(br#"{"type":"object","properties":{"n":{"type":"integer"}}}"#).unwrap(),
        output_schema: Schema::parse(br#"{"type":"object"}"#).unwrap(),
        access,
        declared_effects: declared,
    }
}

async fn bench() -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir_all(root.join("ep1")).unwrap();
    std::fs::write(root.join("ep1/hello.txt"), "hi").unwrap();
    let store =
        Store::open(&StoreLocation::Sqlite(dir.path().join("world.db")), OpenMode::CreateIfMissing).await.unwrap();
    world_core::genesis::commit_genesis(&store, 1).await.unwrap();
    let source = StoredObject::new(TRANSITION_SOURCE, "test", b"module scripted\n".to_vec());
    store.put_object(&source).await.unwrap();
    let apply = triple("world.apply", "world", 1);
    let read = triple("Workspace.Read", "worktree", 1);
    let revision = Revision::next(
        None,
        vec![
            descriptor("t.pure", source.hash, apply.clone(), vec![]),
            descriptor("t.read", source.hash, triple("Workspace.Read", "worktree", 0), vec![read]),
            descriptor("t.net", source.hash, apply, vec![triple("Net.Fetch", "world", 1)]),
        ],
    )
    .unwrap();
    let object = revision_object(&revision);
    store.put_object(&object).await.unwrap();
    store.compare_and_set_registry_head(TRANSITION_REGISTRY, None, &object.hash).await.unwrap();
    let runner = Arc::new(Scripted { replies: Mutex::default(), inputs: Mutex::default() });
    // No row here reaches the tool interpreter, so none is given.
    let tools = AilangHandlers::new(
        PathBuf::from("/nonexistent/ailang"),
        HashRef::of(b"tool"),
        None,
        Slots::new(1),
        Duration::from_secs(1),
    );
    let effects = Effects::new(root.clone(), WorkspaceHandlers::new(HashRef::of(b"core")), tools);
    let coordinator = Coordinator::new(store.clone(), runner.clone(), Limits::default(), Default::default())
        .with_effects(Arc::new(effects));
    Bench {
        _dir: dir,
        root,
        store,
        registry: Default::default(),
        runner,
        coordinator: Arc::new(coordinator),
        head: object.hash,
    }
}

impl Bench {
    async fn call(
        &self,
        episode: &str,
        transition: &str,
        task: Option<&str>,
        args: &str,
        replies: Vec<Reply>,
    ) -> Result<Invoked, Failure> {
        *self.runner.replies.lock().unwrap() = replies.into();
        let grant = |effect: &str, scope: &str| Grant {
            effect: effect.into(),
            scope: scope.into(),
            budget: 2,
            expires_at: i64::MAX,
        };
        let session = SessionBinding {
            episode: Episode::parse(episode).unwrap(),
            grants: vec![grant("world.apply", "world"), grant("Workspace.Read", "worktree")],
            expires_at: i64::MAX,
            created_at: 0,
            registry_head: Some(self.head),
        };
        let call = Call {
            surface: Surface::A2a,
            session,
            transition_id: transition.into(),
            task_id: task.map(str::to_owned),
            arguments: args.as_bytes().to_vec(),
            pin: None,
        };
        self.coordinator.invoke(Arc::clone(&self.registry), call).await
    }

    fn runs(&self) -> usize {
        self.runner.inputs.lock().unwrap().len()
    }
}

fn plan(effects: Value, finish: bool, result: Value) -> String {
    json!({"plan":"world/effect-plan/v1","effects":effects,"finish":finish,"result":result}).to_string()
}

fn read_effect() -> Value {
    json!([{"id":"e1","effect":"Workspace.Read","scope":"worktree","cost":1,"payload":{"op":"read","path":"hello.txt"}}])
}

/// One row: the rule, transition, task id, arguments, the interpreter's script, and the
/// failure code the call must end in.
type Row = (&'static str, &'static str, &'static str, &'static str, Vec<Reply>, &'static str);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_rule_is_one_row() {
    let bench = bench().await;
    let no_slot: fn() -> CapsuleError = || CapsuleError::Run(RunError::NoSlot(8));
    let timeout: fn() -> CapsuleError = || CapsuleError::Run(RunError::Timeout(Duration::from_secs(1)));
    let rows: Vec<Row> = vec![
        ("R1 task id grammar", "t.pure", "bad id!", "{}", vec![], "invalid_params"),
        ("R1 arguments are an object", "t.pure", "r1b", "[1]", vec![], "invalid_params"),
        ("input schema", "t.pure", "schema", r#"{"n":"x"}"#, vec![], "invalid_params"),
        ("R2 unknown transition", "t.none", "r2", "{}", vec![], "not_authorized"),
        (
            "R9 incompatible",
            "t.pure",
            "r9",
            "{}",
            vec![Reply::Exit(1, "", "Error: ARG_DECODE_MISMATCH")],
            "incompatible",
        ),
        ("R9 no main", "t.pure", "r9b", "{}", vec![Reply::Exit(1, "", "entrypoint 'main' not found")], "incompatible"),
        (
            "R10 execution",
            "t.pure",
            "r10",
            "{}",
            vec![Reply::Exit(1, "", "Error: division by zero")],
            "execution_failed",
        ),
        ("R12 not an object", "t.pure", "r12", "{}", vec![Reply::Out("[1]".into())], "output_not_object"),
        ("R12 not JSON", "t.pure", "r12b", "{}", vec![Reply::Out("hello".into())], "output_not_object"),
        ("capacity", "t.pure", "cap", "{}", vec![Reply::Fail(no_slot)], "capacity_exceeded"),
        ("deadline", "t.pure", "late", "{}", vec![Reply::Fail(timeout)], "deadline"),
        ("R8 unhandled effect", "t.net", "r8", "{}", vec![], "effects_unsupported"),
        ("plan law", "t.read", "law", "{}", vec![Reply::Out(plan(json!([]), false, Value::Null))], "execution_failed"),
        (
            "finish law",
            "t.read",
            "finish",
            "{}",
            vec![Reply::Out(plan(read_effect(), true, Value::Null)), Reply::Out(r#"{"world":1}"#.into())],
            "effects_unrecorded",
        ),
    ];
    for (rule, transition, task, args, script, want) in rows {
        let runs = script.len();
        let before = bench.runs();
        let failure = bench.call("ep1", transition, Some(task), args, script).await.expect_err(rule);
        assert_eq!(failure.code.as_str(), want, "{rule}: {failure:?}");
        assert_eq!(bench.runs() - before, runs, "{rule}: the interpreter runs only as the script says");
        if want == "effects_unrecorded" {
            assert_eq!(failure.effect_records.len(), 1, "{rule}: the record travels with the failure");
        }
    }
    // R8 also holds for an episode without a worktree, before anything runs.
    let failure = bench.call("ep2", "t.read", Some("r8-ep2"), "{}", vec![]).await.expect_err("no worktree");
    assert_eq!(failure.code.as_str(), "effects_unsupported");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_ids_reconcile_once_and_refuse_another_call() {
    let bench = bench().await;
    let first =
        bench.call("ep1", "t.pure", Some("same"), r#"{"n":1}"#, vec![Reply::Out(r#"{"a":1}"#.into())]).await.unwrap();
    assert!(!first.reconciled);
    let again = bench.call("ep1", "t.pure", Some("same"), r#"{"n":1}"#, vec![]).await.unwrap();
    assert!(again.reconciled, "a resend of the same call reconciles");
    assert_eq!((again.output.clone(), again.entry_index), (first.output.clone(), first.entry_index));
    let other = bench.call("ep1", "t.pure", Some("same"), r#"{"n":2}"#, vec![]).await.expect_err("another call");
    assert_eq!(other.code.as_str(), "task_id_used");
    assert_eq!(bench.runs(), 1, "the interpreter ran once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effectful_outputs_compose_with_the_world_block() {
    let bench = bench().await;
    // A refusal plan: the plan's result plus an empty world block, committed.
    let refusal = plan(json!([]), false, json!({"ok":false,"refused":"no"}));
    let invoked = bench.call("ep1", "t.read", Some("refuse"), "{}", vec![Reply::Out(refusal.clone())]).await.unwrap();
    let plan_ref = HashRef::of(world_model::canonicalize(refusal.as_bytes(), usize::MAX).unwrap().as_slice());
    let want = format!(r#"{{"ok":false,"refused":"no","world":{{"effects":[],"plan":"{plan_ref}"}}}}"#);
    assert_eq!(String::from_utf8(invoked.output).unwrap(), want);
    assert_eq!(bench.runner.inputs.lock().unwrap().last().unwrap(), r#"{"args":{},"phase":"plan"}"#);

    // One read, no finish: the handler's output plus the world block.
    let invoked = bench
        .call("ep1", "t.read", Some("read"), "{}", vec![Reply::Out(plan(read_effect(), false, Value::Null))])
        .await
        .unwrap();
    let output: Value = serde_json::from_slice(&invoked.output).unwrap();
    assert_eq!(output["content"], "hi");
    assert_eq!(output["world"]["effects"][0]["status"], "ok");

    // With finish: the finish input carries the result, the finish output is the body.
    let script = vec![Reply::Out(plan(read_effect(), true, Value::Null)), Reply::Out(r#"{"done":true}"#.into())];
    let invoked = bench.call("ep1", "t.read", Some("fin"), "{}", script).await.unwrap();
    let output: Value = serde_json::from_slice(&invoked.output).unwrap();
    assert_eq!(output["done"], true);
    let finish_input: Value = serde_json::from_str(bench.runner.inputs.lock().unwrap().last().unwrap()).unwrap();
    assert_eq!(finish_input["phase"], "finish");
    assert_eq!(finish_input["results"][0]["output"]["content"], "hi");
    assert_eq!(finish_input["results"][0]["record"], output["world"]["effects"][0]["record"]);

    // The grant of 2 is spent: the third read is denied, with an empty body.
    let invoked = bench
        .call("ep1", "t.read", Some("denied"), "{}", vec![Reply::Out(plan(read_effect(), false, Value::Null))])
        .await
        .unwrap();
    let output: Value = serde_json::from_slice(&invoked.output).unwrap();
    assert_eq!(output["world"]["effects"][0]["status"], "denied", "{output}");
    assert_eq!(output.as_object().unwrap().len(), 1);
    assert_eq!(bench.store.effect_spend("ep1").await.unwrap()[0].2, 2, "a denial debits nothing");
    assert!(bench.root.join("ep1/hello.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_does_not_commit_makes_its_effects_durable_before_it_answers() {
    let bench = bench().await;
    let failing_finish = || vec![Reply::Out(plan(read_effect(), true, Value::Null)), Reply::Exit(1, "", "Error: no")];
    // A read that ran: its record and its outcome are written before EffectsUnrecorded.
    let ran = bench.call("ep1", "t.read", Some("ran"), "{}", failing_finish()).await.expect_err("finish fails");
    assert_eq!(ran.code.as_str(), "effects_unrecorded");
    assert_eq!(bench.store.effect_receipt("effect:ep1:0").await.unwrap(), "resolved");
    // Spend the rest of the grant of 2, then a read the budget denies: its record too.
    let read = vec![Reply::Out(plan(read_effect(), false, Value::Null))];
    bench.call("ep1", "t.read", Some("spend"), "{}", read).await.unwrap();
    let denied = bench.call("ep1", "t.read", Some("denied"), "{}", failing_finish()).await.expect_err("finish fails");
    assert_eq!(denied.code.as_str(), "effects_unrecorded");
    for failure in [ran, denied] {
        assert_eq!(failure.effect_records.len(), 1, "{failure:?}");
        let record = bench.store.get_object(&failure.effect_records[0], true).await.unwrap();
        assert!(record.is_some(), "the record EffectsUnrecorded names is durable: {failure:?}");
    }
}
