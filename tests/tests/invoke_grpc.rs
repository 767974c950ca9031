//! `world.v1.Invocation` called directly, as internal services do: the
//! coordinator's idempotency, concurrency and provenance rules.

use std::collections::BTreeSet;

use world_core::store::{OpenMode, Store, StoreLocation};
use world_model::HashRef;
use world_proto::v1 as pb;
use world_proto::v1::invocation_client::InvocationClient;
use world_tests::{PostgresStore, World, a2a_invoke, authorized};

type Client = InvocationClient<tonic::transport::Channel>;

async fn client(world: &World) -> Client {
    InvocationClient::connect(format!("http://{}", world.core_addr)).await.expect("connect to the core")
}

async fn invoke(client: &mut Client, token: &str, task: &str, arguments: &str) -> pb::invoke_reply::Outcome {
    let request = a2a_invoke(token, "tools.echo", task, arguments.as_bytes());
    client.invoke(request).await.expect("invoke rpc").into_inner().outcome.expect("an outcome")
}

async fn send(client: &mut Client, token: &str, message: pb::InvokeRequest) -> pb::invoke_reply::Outcome {
    client.invoke(authorized(message, token)).await.expect("invoke rpc").into_inner().outcome.expect("an outcome")
}

fn invoked(outcome: pb::invoke_reply::Outcome) -> pb::Invoked {
    match outcome {
        pb::invoke_reply::Outcome::Invoked(invoked) => invoked,
        other => panic!("expected success, got {other:?}"),
    }
}

fn failure_code(outcome: pb::invoke_reply::Outcome) -> String {
    match outcome {
        pb::invoke_reply::Outcome::Failure(failure) => failure.code,
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// One call resolves the session, admits the call on the session's surface and runs it; a
/// refusal at any step is the classified failure of the seed's tables, in the seed's order
/// (session, tool, arguments), and runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_invocation_admits_and_runs_or_answers_the_classified_refusal() {
    let world = World::echo_core();
    let token = world.mint("ep1", &["world.apply=world:10"], 3600);
    let blind = world.mint("ep2", &["Workspace.Read=worktree:10"], 3600);
    let mut client = client(&world).await;
    let call = |surface: &str, transition: &str, tool: &str, arguments: &str| pb::InvokeRequest {
        surface: surface.into(),
        transition_id: transition.into(),
        mcp_tool: tool.into(),
        task_id: if surface == "a2a" { "t-1".into() } else { String::new() },
        arguments: arguments.as_bytes().to_vec(),
        ..Default::default()
    };
    let refusals = [
        ("0".repeat(64), call("a2a", "tools.echo", "", "{}"), "session_unknown"),
        ("0".repeat(64), call("a2a", "tools.nope", "", ""), "session_unknown"),
        (blind.clone(), call("a2a", "tools.echo", "", r#"{"a":1}"#), "not_authorized"),
        (token.clone(), call("a2a", "tools.nope", "", ""), "not_authorized"),
        (token.clone(), call("a2a", "tools.echo", "", ""), "invalid_params"),
        (token.clone(), call("a2a", "tools.echo", "tools_decho", "[]"), "invalid_params"),
        // MCP names its tool as `tools/list` shows it, escaped.
        (token.clone(), call("mcp", "", "tools.echo", "{}"), "not_authorized"),
        (token.clone(), call("mcp", "tools.echo", "", "{}"), "not_authorized"),
        (blind.clone(), call("mcp", "", "tools_decho", "{}"), "not_authorized"),
        (token.clone(), call("mcp", "", "tools_decho", "[1]"), "bad_request"),
        (token.clone(), call("mcp", "", "tools_decho", ""), "bad_request"),
    ];
    for (credential, message, code) in refusals {
        let row = format!("{message:?}");
        assert_eq!(failure_code(send(&mut client, &credential, message).await), code, "{row}");
    }
    // The refused calls left no trace: the first call is the first entry, and the A2A task id
    // the refused calls named is still free.
    let mcp = invoked(send(&mut client, &token, call("mcp", "", "tools_decho", r#"{"a":1}"#)).await);
    assert_eq!((mcp.entry_index, mcp.episode.as_str(), mcp.output.as_slice()), (1, "ep1", &br#"{"echo":{"a":1}}"#[..]));
    assert!(mcp.invocation_id.starts_with("mcp:ep1:"), "{}", mcp.invocation_id);
    let a2a = invoked(send(&mut client, &token, call("a2a", "tools.echo", "", r#"{"a":2}"#)).await);
    assert_eq!((a2a.entry_index, a2a.invocation_id.as_str(), a2a.reconciled), (2, "a2a:ep1:t-1", false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_task_returns_the_committed_result_and_a_different_call_is_refused() {
    let world = World::echo_core();
    let token = world.mint("ep1", &["world.apply=world:10"], 3600);
    let mut client = client(&world).await;

    let first = invoked(invoke(&mut client, &token, "echo-1", r#"{"a":1}"#).await);
    assert_eq!(first.output, br#"{"echo":{"a":1}}"#);
    assert_eq!(first.invocation_id, "a2a:ep1:echo-1");
    assert_eq!(first.entry_index, 1);
    assert!(!first.reconciled);

    let again = invoked(invoke(&mut client, &token, "echo-1", r#"{ "a" : 1 }"#).await);
    assert_eq!(again.entry_index, 1, "the same call resent returns the committed entry");
    assert_eq!(again.world_ref, first.world_ref);
    assert!(again.reconciled);

    assert_eq!(failure_code(invoke(&mut client, &token, "echo-1", r#"{"a":2}"#).await), "task_id_used");
    assert_eq!(failure_code(invoke(&mut client, &token, "bad id!", r#"{"a":2}"#).await), "invalid_params");

    // Provenance: the entry's record, input and output exist and hash to their refs.
    let store = Store::open(&StoreLocation::Sqlite(world.store.clone()), OpenMode::MustExist).await.unwrap();
    let entry = store.log_entry(1).await.unwrap().expect("entry 1");
    assert_eq!(entry.written_by, "coordinator:a2a");
    assert_eq!(store.log_entry(2).await.unwrap(), None, "the resend added no entry");
    let record = store.get_object(&entry.transition_ref, true).await.unwrap().expect("record");
    assert_eq!(HashRef::of(record.payload.as_deref().unwrap()), record.hash);
    let record: serde_json::Value = serde_json::from_slice(record.payload.as_deref().unwrap()).unwrap();
    assert_eq!(record["invocationId"], "a2a:ep1:echo-1");
    for key in ["input", "output"] {
        let reference = HashRef::parse(record[key].as_str().unwrap()).unwrap();
        let object = store.get_object(&reference, true).await.unwrap().expect(key);
        assert_eq!(HashRef::of(object.payload.as_deref().unwrap()), reference);
    }
    let world_row = store.world(&HashRef::parse(&first.world_ref).unwrap()).await.unwrap().unwrap();
    assert_eq!(world_row.state_root.to_string(), record["output"].as_str().unwrap());
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_distinct_calls_all_commit_and_one_task_id_runs_once() {
    // This pins the database's serialisation of commits, not the slot limit
    // (tested below): give every call its own interpreter slot.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("world.db");
    let world = World::echo_core_on(dir, store, None, &["--max-subprocesses", "64"], &[]);
    let token = world.mint("ep1", &["world.apply=world:100"], 3600);
    let client = client(&world).await;

    let calls = (0..50).map(|i| {
        let (mut client, token) = (client.clone(), token.clone());
        async move { invoked(invoke(&mut client, &token, &format!("c-{i}"), &format!(r#"{{"n":{i}}}"#)).await) }
    });
    let results = futures::future::join_all(calls).await;
    let indices: BTreeSet<i64> = results.iter().map(|r| r.entry_index).collect();
    assert_eq!(indices, (1..=50).collect::<BTreeSet<_>>(), "50 commits with a gapless log");

    let same = (0..10).map(|_| {
        let (mut client, token) = (client.clone(), token.clone());
        async move { invoke(&mut client, &token, "same", r#"{"same":true}"#).await }
    });
    let outcomes = futures::future::join_all(same).await;
    let mut entries = BTreeSet::new();
    for outcome in outcomes {
        match outcome {
            pb::invoke_reply::Outcome::Invoked(invoked) => {
                entries.insert(invoked.entry_index);
            }
            // A resend that arrives while the first is still running.
            pb::invoke_reply::Outcome::Failure(failure) => assert_eq!(failure.code, "task_id_used"),
        }
    }
    assert_eq!(entries, BTreeSet::from([51]), "the same task id ran once");
    let store = Store::open(&StoreLocation::Sqlite(world.store.clone()), OpenMode::MustExist).await.unwrap();
    assert_eq!(store.log_page(0, 500).await.unwrap().len(), 52);
    store.close().await;
}

/// Several cores serving one PostgreSQL database: calls spread over both
/// all commit, the log stays gapless and a task id still runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_cores_on_one_postgres_database_share_one_log() {
    let PostgresStore { url, dir, artifacts } = PostgresStore::fresh().await;
    let first = World::echo_core_on(dir, url.into(), Some(&artifacts), &["--max-subprocesses", "32"], &[]);
    let serve_args = world_tests::serve_args(&world_tests::bin("ailang"), Some(&artifacts));
    let mut serve_args: Vec<&str> = serve_args.iter().map(String::as_str).collect();
    serve_args.extend(["--max-subprocesses", "32"]);
    let (_second, second_addr) = world_tests::start_core(&first.store, first.dir.path(), &serve_args);
    let token = first.mint("ep1", &["world.apply=world:100"], 3600);

    let a = client(&first).await;
    let b = InvocationClient::connect(format!("http://{second_addr}")).await.unwrap();
    let calls = (0..20).map(|i| {
        let mut client = if i % 2 == 0 { a.clone() } else { b.clone() };
        let token = token.clone();
        async move { invoked(invoke(&mut client, &token, &format!("pg-{i}"), &format!(r#"{{"n":{i}}}"#)).await) }
    });
    let indices: BTreeSet<i64> = futures::future::join_all(calls).await.iter().map(|r| r.entry_index).collect();
    assert_eq!(indices, (1..=20).collect::<BTreeSet<_>>());

    let same = (0..6).map(|i| {
        let mut client = if i % 2 == 0 { a.clone() } else { b.clone() };
        let token = token.clone();
        async move { invoke(&mut client, &token, "pg-same", r#"{"same":1}"#).await }
    });
    let mut entries = BTreeSet::new();
    for outcome in futures::future::join_all(same).await {
        match outcome {
            pb::invoke_reply::Outcome::Invoked(invoked) => {
                entries.insert(invoked.entry_index);
            }
            pb::invoke_reply::Outcome::Failure(failure) => assert_eq!(failure.code, "task_id_used"),
        }
    }
    assert_eq!(entries, BTreeSet::from([21]));
}

/// Beyond its subprocess slots a core refuses at once rather than queueing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_beyond_the_subprocess_slots_is_refused_not_queued() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("world.db");
    let world = World::echo_core_on(dir, store, None, &["--max-subprocesses", "1"], &[]);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // Publishing needs the store to itself: stop, publish the slow fixture, serve again.
    let World { dir, store, core, .. } = world;
    assert!(core.terminate().success());
    world_tests::publish(&store, &root.join("tests/fixtures/core-slow/transitions.json"), 1);
    let serve_args = world_tests::serve_args(&world_tests::bin("ailang"), None);
    let mut serve_args: Vec<&str> = serve_args.iter().map(String::as_str).collect();
    serve_args.extend(["--max-subprocesses", "1"]);
    let (core, core_addr) = world_tests::start_core(&store, dir.path(), &serve_args);
    let token = world_tests::mint(&store, "ep1", &["world.apply=world:10"], 3600);
    let mut slow_client = InvocationClient::connect(format!("http://{core_addr}")).await.unwrap();
    let mut quick_client = slow_client.clone();

    let slow_token = token.clone();
    let slow = tokio::spawn(async move {
        slow_client
            .invoke(a2a_invoke(&slow_token, "tools.slow", "slow-1", b"{}"))
            .await
            .unwrap()
            .into_inner()
            .outcome
            .unwrap()
    });
    // The slow call holds the one slot once its interpreter runs.
    let waited = std::time::Instant::now();
    while capsule_run(core.pid()).is_none() {
        assert!(waited.elapsed() < std::time::Duration::from_secs(10), "the slow call never started");
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let started = std::time::Instant::now();
    assert_eq!(failure_code(invoke(&mut quick_client, &token, "quick-1", r#"{"a":1}"#).await), "capacity_exceeded");
    assert!(started.elapsed() < std::time::Duration::from_millis(500), "the refusal waited for the slot");
    invoked(slow.await.unwrap());
    // With the slot free again the same call goes through.
    invoked(invoke(&mut quick_client, &token, "quick-1", r#"{"a":1}"#).await);
}

/// A field of `/proc/<pid>/status` (`"PPid:"`, say), trimmed.
fn status_field(pid: i32, name: &str) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(name)).map(|v| v.trim().to_owned())
}

/// The live (not zombie) descendants of `ancestor`, from /proc.
fn descendants_of(ancestor: i32) -> Vec<i32> {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let live = status_field(pid, "State:").is_some_and(|state| !state.starts_with('Z'));
        if let Some(parent) = status_field(pid, "PPid:").and_then(|p| p.parse::<i32>().ok())
            && live
        {
            parents.push((pid, parent));
        }
    }
    let mut found = vec![ancestor];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(parents.iter().filter(|(_, p)| *p == parent).map(|(pid, _)| *pid));
        next += 1;
    }
    found.split_off(1)
}

fn alive(pid: i32) -> bool {
    status_field(pid, "State:").is_some_and(|state| !state.starts_with('Z'))
}

/// The interpreter run below `core` (forked or spawned), found by its working directory: a
/// capsule root.
fn capsule_run(core: i32) -> Option<(i32, std::path::PathBuf)> {
    descendants_of(core).into_iter().find_map(|pid| {
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
        let name = cwd.file_name()?.to_string_lossy().into_owned();
        name.starts_with(world_core::scratch::CAPSULE).then_some((pid, cwd))
    })
}

/// A world whose core is running the spin transition (for as long as its deadline allows),
/// and the run's pid and capsule root.
async fn spinning(core_args: &[&str]) -> (World, tokio::task::JoinHandle<()>, i32, std::path::PathBuf) {
    let world = World::invoke(world_tests::Setup { core_args, ..Default::default() });
    let token = world.mint("ep1", &["world.apply=world:10"], 3600);
    let mut client = client(&world).await;
    let spin = tokio::spawn(async move {
        let _ = client.invoke(a2a_invoke(&token, "tests.spin", "spin-forever", br#"{"outer":100000000}"#)).await;
    });
    for _ in 0..100 {
        if let Some((pid, root)) = capsule_run(world.core.pid()) {
            return (world, spin, pid, root);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the spin transition never started an interpreter run");
}

/// A core killed outright (no destructor runs) takes its interpreter runs with it, and the
/// fork server they were forked from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_interpreter_outlives_a_killed_core() {
    let (world, spin, _, _) = spinning(&[]).await;
    let core_pid = world.core.pid();
    let runs = descendants_of(core_pid);
    // SAFETY: signals the core process we started.
    unsafe { libc::kill(core_pid, libc::SIGKILL) };
    let _ = spin.await;
    for _ in 0..50 {
        if !runs.iter().any(|pid| alive(*pid)) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("interpreter processes {runs:?} outlived their killed core");
}

/// However it was started (`WORLD_INTERPRETER_RUNS`), a run leads its own process group at
/// the lowered priority, dies with its parent, starts in its capsule root and holds no
/// descriptor but stdin (`/dev/null`) and its two output pipes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_prepared_alike_forked_or_spawned() {
    let (world, _spin, pid, root) = spinning(&[]).await;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Past the command's closing parenthesis: state, ppid, pgrp, session, …, nice (the 17th).
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    assert_eq!(fields[2], pid.to_string(), "the run leads its own process group: {stat}");
    assert_eq!(fields[16], "10", "the run's priority is lowered: {stat}");
    let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    fds.sort();
    assert_eq!(fds, ["0", "1", "2"], "the run holds stdio only");
    assert_eq!(std::fs::read_link(format!("/proc/{pid}/fd/0")).unwrap(), std::path::Path::new("/dev/null"));
    for fd in [1, 2] {
        let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap();
        assert!(target.to_string_lossy().starts_with("pipe:"), "fd {fd} is {target:?}");
    }
    assert!(root.join("host/capsule/main.ail").is_file(), "the run starts in its capsule root");
    // Spawned by the core, or forked by the core's fork server.
    let parent: i32 = status_field(pid, "PPid:").unwrap().parse().unwrap();
    let core = world.core.pid();
    assert!(
        parent == core || (is_fork_server(parent) && status_field(parent, "PPid:") == Some(core.to_string())),
        "parent {parent}"
    );
}

fn is_fork_server(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmd| cmd.ends_with(b"fork-server\0"))
}

/// A core whose runs are forked, a session of episode `ep1` with a budget for 100 calls, and a
/// client of the core.
async fn forked_world() -> (World, String, Client) {
    let world =
        World::invoke(world_tests::Setup { core_args: &["--interpreter-runs", "forked"], ..Default::default() });
    let token = world.mint("ep1", &["world.apply=world:100"], 3600);
    let client = client(&world).await;
    (world, token, client)
}

/// A fork server that dies is started again for the next run; the runs go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_fork_server_is_started_again() {
    let (world, token, mut client) = forked_world().await;
    let server = || descendants_of(world.core.pid()).into_iter().find(|pid| is_fork_server(*pid));
    invoked(invoke(&mut client, &token, "before", r#"{"a":1}"#).await);
    let first = server().expect("the core runs a fork server");
    // SAFETY: signals a process this test's core started.
    unsafe { libc::kill(first, libc::SIGKILL) };
    while alive(first) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    invoked(invoke(&mut client, &token, "after", r#"{"a":2}"#).await);
    let second = server().expect("a fork server was started again");
    assert_ne!(first, second);
}

/// After a run, the fork server keeps the program checked (`P`); the runs forked after it
/// start from that program and answer exactly as the first, checked one did, each from its
/// own input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_of_a_program_the_fork_server_keeps_answer_as_the_first() {
    let (_world, token, mut client) = forked_world().await;
    for n in 0..12 {
        let arguments = format!(r#"{{"a":{n},"s":"run {n}"}}"#);
        let output = invoked(invoke(&mut client, &token, &format!("kept-{n}"), &arguments).await).output;
        assert_eq!(String::from_utf8(output).unwrap(), format!(r#"{{"echo":{arguments}}}"#), "run {n}");
    }
}
