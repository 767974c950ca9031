//! Faults under mixed load: sixteen clients make pure calls (A2A and MCP), effectful calls
//! and A2A resends through an edge while the core is SIGKILLed three times and restarted.
//! Every answer is whole; a resent task id always answers its committed result; afterwards the
//! store alone shows a gapless, hash-chained log, every call a client saw succeed committed and
//! journaled, every effect recorded or `indeterminate`, and budgets debited once per effect.
//! Then an edge is killed mid-request: its clients see a clean error, never half a reply.
//! A core killed mid-call leaves capsule roots the next start removes (and no one else's);
//! refused requests write no ERROR or WARN line, while a tampered interpreter does; and a store
//! removed under a serving core stops it, its calls in flight answered as not committed.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use world_core::genesis::entry_hash;
use world_core::store::{OpenMode, Receipt, Store, StoreLocation};
use world_model::{EffectOutcome, HashRef, canonical_value};
use world_tests::{Answer, World, bin, examples_dir, fixture, http, json_rpc, tasks_send};

const CLIENTS: usize = 16;
/// Calls per client, at most; the run is bounded in time too.
const CALLS: usize = 300;
const KILLS: usize = 3;

/// What the clients saw, for the checks against the store.
#[derive(Default)]
struct Seen {
    /// A2A successes: (token, task id, skill, data) → the result first answered.
    tasks: Mutex<HashMap<String, (String, String, Value, Value)>>,
    /// Inputs of MCP echo calls that succeeded.
    mcp_inputs: Mutex<Vec<Value>>,
    /// Answers that were not whole, and resends whose answer differed from the first.
    violations: Mutex<Vec<String>>,
    refused: std::sync::atomic::AtomicUsize,
}

impl Seen {
    fn violation(&self, what: String) {
        self.violations.lock().unwrap().push(what);
    }
}

async fn client(edge: String, token: String, client: usize, seen: Arc<Seen>, stop: Arc<AtomicBool>) {
    let (a2a, mcp) = (format!("{edge}/a2a/"), format!("{edge}/mcp/"));
    let mut mine: Vec<String> = Vec::new();
    for i in 0..CALLS {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let task = format!("c{client}-{i}");
        let (answer, first) = match i % 4 {
            0 | 1 => {
                let (skill, data) = if i % 4 == 0 {
                    ("tools.echo", json!({"c": client, "i": i}))
                } else {
                    ("fx.read", json!({"path": "hello.txt"}))
                };
                let answer = json_rpc(&a2a, &token, &tasks_send(&task, skill, data.clone())).await;
                if let Answer::Result(result) = &answer {
                    let entry = (token.clone(), skill.to_owned(), data, result.clone());
                    seen.tasks.lock().unwrap().insert(task.clone(), entry);
                    mine.push(task);
                }
                (answer, None)
            }
            2 => {
                let input = json!({"c": client, "i": i, "mcp": true});
                let call = json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"tools_decho","arguments":input}});
                let answer = json_rpc(&mcp, &token, &call).await;
                if let Answer::Result(result) = &answer {
                    if result["structuredContent"]["echo"] != input {
                        seen.violation(format!("MCP echo of {input} answered {result}"));
                    }
                    seen.mcp_inputs.lock().unwrap().push(input);
                }
                (answer, None)
            }
            _ => match mine.get(i % mine.len().max(1)).cloned() {
                Some(task) => {
                    let (_, skill, data, first) = seen.tasks.lock().unwrap()[&task].clone();
                    (json_rpc(&a2a, &token, &tasks_send(&task, &skill, data)).await, Some((task, first)))
                }
                None => continue,
            },
        };
        match (&answer, first) {
            (Answer::Broken(why), _) => seen.violation(format!("client {client} call {i}: {why}")),
            (Answer::Refused(_), _) => {
                seen.refused.fetch_add(1, Ordering::Relaxed);
            }
            (Answer::Result(result), Some((task, first))) if *result != first => {
                seen.violation(format!("resent {task} answered {result}, first {first}"))
            }
            _ => {}
        }
    }
}

/// A store bootstrapped with the echo example and the effect fixtures, and genesis.
fn bootstrap(dir: &Path, store: &Path) {
    let serve = world_tests::serve_args(&bin("ailang"), None);
    let serve: Vec<&str> = serve.iter().map(String::as_str).collect();
    let (bootstrap, _) = world_tests::start_core(store, dir, &serve);
    assert!(bootstrap.terminate().success());
    world_tests::publish(store, &examples_dir().join("transitions.json"), 1);
    world_tests::publish(store, &fixture("effects/transitions.json"), 5);
    world_tests::commit_genesis(store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_clients_through_three_core_crashes_leave_a_consistent_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("world.db");
    let workspace = dir.path().join("workspace");
    for client in 0..CLIENTS {
        std::fs::create_dir_all(workspace.join(format!("c{client}"))).unwrap();
        std::fs::write(workspace.join(format!("c{client}/hello.txt")), format!("hello, {client}\n")).unwrap();
    }
    bootstrap(dir.path(), &store);
    let serve = world_tests::serve_args(&bin("ailang"), None);
    let workspace_arg = workspace.display().to_string();
    let serve: Vec<&str> = serve
        .iter()
        .map(String::as_str)
        .chain(["--workspace-root", workspace_arg.as_str(), "--max-subprocesses", "32"])
        .collect();
    let (core, core_addr) = world_tests::start_core(&store, dir.path(), &serve);
    let (edge, edge_url) = world_tests::start_edge(&[&core_addr], dir.path(), &[]);
    let mut world = World { dir, store: store.clone(), core, core_addr, edge: Some(edge), edge_url: edge_url.clone() };
    let grants = ["world.apply=world:1000000", "Workspace.Read=worktree:1000000"];
    let tokens: Vec<String> = (0..CLIENTS).map(|c| world.mint(&format!("c{c}"), &grants, 3600)).collect();

    let seen = Arc::new(Seen::default());
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = tokens
        .iter()
        .enumerate()
        .map(|(c, token)| {
            tokio::spawn(client(edge_url.clone(), token.clone(), c, Arc::clone(&seen), Arc::clone(&stop)))
        })
        .collect();
    let started = Instant::now();
    for _ in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        world.restart_core(&bin("world-core"), &serve, &[]);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.expect("client");
    }
    let violations = seen.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "{} violations: {violations:#?}", violations.len());
    let tasks = seen.tasks.lock().unwrap().clone();
    assert!(tasks.len() > 50, "the load ran ({} A2A successes in {:?})", tasks.len(), started.elapsed());
    assert!(seen.refused.load(Ordering::Relaxed) > 0, "some calls met a dead core");

    // Every task id that succeeded answers its committed result, now the core is steady.
    for (task, (token, skill, data, first)) in &tasks {
        let again = json_rpc(&world.url("/a2a/"), token, &tasks_send(task, skill, data.clone())).await;
        assert_eq!(again, Answer::Result(first.clone()), "resent {task}");
    }
    let mcp_inputs = seen.mcp_inputs.lock().unwrap().clone();
    let World { core, edge, dir, .. } = world;
    assert!(edge.expect("edge").terminate().success());
    assert!(core.terminate().success());

    let store = Store::open(&StoreLocation::Sqlite(store), OpenMode::MustExist).await.expect("open the store");
    let entries = log_is_gapless_and_chained(&store).await;
    journal_matches_the_log(&store, entries, &tasks, &mcp_inputs).await;
    effects_are_recorded_once(&store, &dir.path().join("world.db")).await;
    store.close().await;
    drop(dir);
}

/// Entries 0..n, each naming its predecessor's hash and hashing to its own; returns n + 1.
async fn log_is_gapless_and_chained(store: &Store) -> i64 {
    let mut previous: Option<world_core::store::LogEntry> = None;
    let mut next = 0;
    loop {
        let page = store.log_page(next, 500).await.expect("log page");
        if page.is_empty() {
            break;
        }
        for entry in page {
            assert_eq!(entry.entry_index, next, "gapless");
            assert_eq!(entry_hash(&entry), entry.entry_hash, "entry {next} hashes to its hash");
            if let Some(previous) = &previous {
                assert_eq!(entry.prev_entry_hash, previous.entry_hash, "entry {next} chains to its predecessor");
            }
            previous = Some(entry);
            next += 1;
        }
    }
    next
}

async fn journal_matches_the_log(
    store: &Store,
    entries: i64,
    tasks: &HashMap<String, (String, String, Value, Value)>,
    mcp_inputs: &[Value],
) {
    for (task, (_, _, _, result)) in tasks {
        let id = result["metadata"]["invocation_id"].as_str().expect("an invocation id").to_owned();
        assert!(id.ends_with(&format!(":{task}")), "{id} is {task}'s");
        let index = result["metadata"]["entry_index"].as_i64().expect("an entry index");
        assert!(index < entries, "{task}'s entry {index} is in the log");
        let receipt = store.receipt(&id).await.expect("receipt");
        assert!(matches!(receipt, Receipt::Resolved { .. }), "{id}: {receipt:?}");
    }
    for input in mcp_inputs {
        let input_ref = HashRef::of(&canonical_value(input));
        let entry = store.entry_of_object(&input_ref).await.expect("entry of object");
        assert!(entry.is_some(), "the MCP call with input {input} committed");
    }
}

/// Every effect intent has gapless ordinals in its episode, at most one per call, and either
/// an outcome naming a stored record or no outcome (indeterminate); each episode's spend is
/// one per intent.
async fn effects_are_recorded_once(store: &Store, path: &Path) {
    use sqlx::Row;
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.expect("open");
    let rows = sqlx::query("SELECT episode, ordinal, call_id FROM effect_intents ORDER BY episode, ordinal")
        .fetch_all(&pool)
        .await
        .expect("intents");
    let mut per_episode: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut per_call: HashMap<String, usize> = HashMap::new();
    let (mut resolved, mut indeterminate) = (0, 0);
    for row in &rows {
        let (episode, ordinal, call): (String, i64, String) = (row.get(0), row.get(1), row.get(2));
        per_episode.entry(episode.clone()).or_default().push(ordinal);
        *per_call.entry(call.clone()).or_default() += 1;
        let id = format!("effect:{episode}:{ordinal}");
        let outcome = sqlx::query("SELECT object_ref FROM journal WHERE invocation_id = $1 AND kind = 'outcome'")
            .bind(&id)
            .fetch_optional(&pool)
            .await
            .expect("journal");
        match outcome {
            Some(row) => {
                let reference = HashRef::parse(&row.get::<String, _>(0)).expect("a ref");
                let object = store.get_object(&reference, true).await.expect("read").expect("the outcome object");
                let outcome = EffectOutcome::decode(object.payload.as_deref().unwrap()).expect("an outcome");
                assert!(store.get_object(&outcome.record_ref, false).await.expect("read").is_some(), "{id}'s record");
                resolved += 1;
            }
            None => {
                assert_eq!(store.effect_receipt(&id).await.expect("receipt"), "indeterminate");
                indeterminate += 1;
            }
        }
    }
    assert!(resolved > 10, "effects ran ({resolved} resolved, {indeterminate} indeterminate)");
    for (episode, ordinals) in &per_episode {
        assert_eq!(*ordinals, (0..ordinals.len() as i64).collect::<Vec<_>>(), "{episode}: gapless ordinals");
        let spend = store.effect_spend(episode).await.expect("spend");
        assert_eq!(spend[0].2, ordinals.len() as i64, "{episode}: debited once per intent");
    }
    let twice: Vec<_> = per_call.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "calls whose effect ran more than once: {twice:?}");
    pool.close().await;
}

/// Clients of an edge killed mid-request see a transport error or a whole answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_killed_mid_request_leaves_no_half_answers() {
    let world = World::echo_core();
    let token = world.mint("ep1", &["world.apply=world:1000000"], 3600);
    let (mut edge, edge_url) = world_tests::start_edge(&[&world.core_addr], world.dir.path(), &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|c| {
            let (edge_url, token, stop) = (edge_url.clone(), token.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut answers = Vec::new();
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) && i < 2_000 {
                    let input = json!({"c": c, "i": i});
                    let call = json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"tools_decho","arguments":input}});
                    answers.push((input, json_rpc(&format!("{edge_url}/mcp/"), &token, &call).await));
                    i += 1;
                }
                answers
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    edge.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut whole, mut cut) = (0, 0);
    for client in clients {
        for (input, answer) in client.await.expect("client") {
            match answer {
                Answer::Result(result) => {
                    assert_eq!(result["structuredContent"]["echo"], input, "a whole answer is the right one");
                    whole += 1;
                }
                Answer::Broken(why) => {
                    // Nothing half-parsed: the client saw the connection fail, not a partial event.
                    assert!(why.starts_with("request:") || why.starts_with("body:"), "a cut answer: {why}");
                    cut += 1;
                }
                Answer::Refused(code) => panic!("the edge refused {input} with {code} before it died"),
            }
        }
    }
    assert!(whole > 10 && cut > 0, "{whole} whole answers, {cut} cut by the kill");
}

/// The names of the capsule and tool roots in `dir`.
fn scratch_roots(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("the scratch directory")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("world-capsule-") || name.starts_with("world-tool-"))
        .collect();
    names.sort();
    names
}

/// The owner tag a root made by process `pid` carries: pid, start time, pid namespace.
fn owner_tag(pid: u32) -> String {
    use std::os::unix::fs::MetadataExt;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process's stat");
    let fields: Vec<&str> = stat.rsplit_once(')').expect("a stat line").1.split_whitespace().collect();
    let namespace = std::fs::metadata(format!("/proc/{pid}/ns/pid")).expect("its pid namespace").ino();
    format!("{pid}.{}.{namespace}", fields[19])
}

fn spin_world(env: &[(&str, &str)]) -> World {
    World::invoke(world_tests::Setup { env, ..Default::default() })
}

/// An A2A call of the spin transition that runs until the invocation deadline; its answer's
/// JSON-RPC error, if it has one.
fn spin_forever(world: &World, token: &str, task: &str) -> tokio::task::JoinHandle<Value> {
    let (url, token) = (world.url("/a2a/"), token.to_owned());
    let body = tasks_send(task, "tests.spin", json!({"outer": 100000, "middle": 1000}));
    tokio::spawn(async move {
        let response = http().post(&url).header("Authorization", format!("Bearer {token}")).json(&body).send().await;
        let answer: Value = response.expect("an answer").json().await.expect("a JSON-RPC answer");
        answer["error"].clone()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_cores_capsule_roots_are_removed_at_the_next_start_and_no_one_elses() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let scratch_dir = scratch.path().to_str().expect("a UTF-8 path").to_owned();
    // Capsule roots go where --capsule-dir says, tool roots to the temporary directory: here
    // both are the scratch directory.
    let env = [("TMPDIR", scratch_dir.as_str()), ("WORLD_CAPSULE_DIR", scratch_dir.as_str())];
    let mut world = spin_world(&env);
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    // What the sweep must leave: a root of a process still running (this test), one whose name
    // records no owner, and anything else.
    let live = format!("world-capsule-{}-Keep01", owner_tag(std::process::id()));
    let kept = [live.as_str(), "world-capsule-unmarked", "world-tool-x", "something-else"];
    for name in kept {
        std::fs::create_dir_all(scratch.path().join(name).join("host")).unwrap();
    }

    let call = spin_forever(&world, &token, "spin-1");
    let core_tag = owner_tag(u32::try_from(world.core.pid()).unwrap());
    let started = Instant::now();
    let leftover = loop {
        let theirs = scratch_roots(scratch.path()).into_iter().find(|name| name.contains(&core_tag));
        if let Some(name) = theirs {
            break name;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "no capsule root appeared: {:?}",
            scratch_roots(scratch.path())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let serve = world_tests::serve_args(&bin("ailang"), None);
    let serve: Vec<&str> = serve.iter().map(String::as_str).collect();
    world.core.kill();
    assert!(scratch.path().join(&leftover).is_dir(), "a SIGKILL removes nothing");
    call.abort();
    world.restart_core(&bin("world-core"), &serve, &env);

    assert!(!scratch.path().join(&leftover).exists(), "{leftover} was left behind");
    for name in kept {
        assert!(scratch.path().join(name).join("host").is_dir(), "{name} was removed");
    }
    let log = world.core.stderr();
    assert!(log.contains("removed 1 capsule and tool roots left by cores no longer running"), "{log}");
    // The restarted core serves, and its own roots come and go.
    let answer = json_rpc(&world.url("/a2a/"), &token, &tasks_send("echo-1", "tools.echo", json!({"a": 1}))).await;
    assert!(matches!(&answer, Answer::Result(result) if result["status"]["state"] == "completed"), "{answer:?}");
    let mut expected = [live.as_str(), "world-capsule-unmarked", "world-tool-x"];
    expected.sort();
    assert_eq!(scratch_roots(scratch.path()), expected);
}

/// Lines of a log at `level` (the human format's level column).
fn lines_at<'a>(log: &'a str, level: &str) -> Vec<&'a str> {
    log.lines().filter(|line| line.split_whitespace().nth(1) == Some(level)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_requests_write_no_error_lines_while_a_tampered_interpreter_does() {
    const TEXT_BUSY_WAIT: Duration = Duration::from_secs(5);
    let mut world = spin_world(&[]);
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let long = format!("a {}", "b".repeat(5000));
    let a2a = world.url("/a2a/");
    let mcp = world.url("/mcp/");
    let tool_call = |name: &str, arguments: Value| json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":name,"arguments":arguments}});
    let refused = [
        (&a2a, tasks_send("has a space", "tools.echo", json!({"a": 1}))),
        (&a2a, tasks_send(&long, "tools.echo", json!({"a": 1}))),
        (&a2a, tasks_send("unknown-skill", "no.such.skill", json!({"a": 1}))),
        (&a2a, tasks_send("bad-args", "tests.spin", json!({"outer": "many"}))),
        (
            &a2a,
            json!({"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{
                "id":"no-parts","metadata":{"skill_id":"tools.echo"},"message":{"role":"user","parts":[]}}}),
        ),
        (
            &a2a,
            json!({"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{
                "id":"bad-pin","metadata":{"skill_id":"tools.echo","transition_fn":"sha256:0"},
                "message":{"role":"user","parts":[{"type":"data","data":{}}]}}}),
        ),
        (&mcp, tool_call("no_dsuch", json!({}))),
        (&mcp, tool_call("tools_decho", json!([1]))),
        (&mcp, tool_call("Tools_decho", json!({}))),
        (&mcp, tool_call("tests_dspin", json!({"outer": "many"}))),
    ];
    for (url, body) in &refused {
        let answer = json_rpc(url, &token, body).await;
        assert!(!matches!(answer, Answer::Result(ref r) if r["isError"] != true), "{body}: {answer:?}");
    }
    let answer = json_rpc(&a2a, "f".repeat(64).as_str(), &tasks_send("unknown-session", "tools.echo", json!({}))).await;
    assert_eq!(answer, Answer::Refused(-32001));
    // Read the logs only once the last refusal's line is surely written.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let core_log = world.core.stderr();
    let edge_log = world.edge.as_ref().expect("an edge").stderr();
    for (name, log) in [("core", &core_log), ("edge", &edge_log)] {
        assert_eq!(lines_at(log, "ERROR"), Vec::<&str>::new(), "{name}");
        assert_eq!(lines_at(log, "WARN"), Vec::<&str>::new(), "{name}");
        // The caller's text never fills a line.
        assert!(!log.contains(&long[..1000]), "{name} logged a caller's text whole");
        assert!(log.lines().all(|line| line.len() < 2000), "{name}: {log}");
    }
    let refusals = lines_at(&core_log, "INFO").into_iter().filter(|line| line.contains("a2a refusal:")).count();
    assert!(refusals >= 2, "{core_log}");
    assert!(core_log.contains("invalid_params"), "refusals name their class: {core_log}");

    // An archived interpreter that no longer matches its pin is an operator's matter.
    world.core.kill();
    let mut archived = Vec::new();
    let mut stack = vec![world.store.with_extension("db.artifacts")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("the artifacts directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|name| name == "ailang") {
                archived.push(path);
            }
        }
    }
    assert_eq!(archived.len(), 1, "{archived:?}");
    let mut permissions = std::fs::metadata(&archived[0]).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&archived[0], permissions).unwrap();
    // The fork server, which executes the archived file, dies with its core a moment later.
    let waited = std::time::Instant::now();
    let mut file = loop {
        match std::fs::OpenOptions::new().append(true).open(&archived[0]) {
            Err(error)
                if error.kind() == std::io::ErrorKind::ExecutableFileBusy && waited.elapsed() < TEXT_BUSY_WAIT =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            opened => break opened.expect("the archived interpreter"),
        }
    };
    std::io::Write::write_all(&mut file, b"tampered").unwrap();
    drop(file);
    let stderr = world.dir.path().join("tampered.stderr");
    let mut core = std::process::Command::new(bin("world-core"))
        .args(["serve", "--listen", "127.0.0.1:0", "--ailang-bin"])
        .arg(bin("ailang"))
        .arg("--store")
        .arg(&world.store)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("start a core");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = core.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = core.kill();
            panic!("a core with a tampered interpreter served");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    let log = std::fs::read_to_string(&stderr).unwrap();
    let errors = lines_at(&log, "ERROR");
    assert_eq!(errors.len(), 1, "{log}");
    assert!(errors[0].contains("no longer matches its pin"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_core_whose_capsule_directory_cannot_be_opened_refuses_to_start_and_says_which() {
    let mut world = spin_world(&[]);
    world.core.kill();
    let missing = world.dir.path().join("no-such-dir");
    let output = std::process::Command::new(bin("world-core"))
        .args(["serve", "--listen", "127.0.0.1:0", "--ailang-bin"])
        .arg(bin("ailang"))
        .arg("--store")
        .arg(&world.store)
        .arg("--capsule-dir")
        .arg(&missing)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run a core");
    assert!(!output.status.success());
    let log = String::from_utf8_lossy(&output.stderr);
    let expected = format!("cannot open the capsule roots directory {}", missing.display());
    assert!(lines_at(&log, "ERROR").iter().any(|line| line.contains(&expected)), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_removed_under_a_serving_core_stops_it_and_calls_in_flight_are_not_committed() {
    let mut world = spin_world(&[]);
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let answer = json_rpc(&world.url("/a2a/"), &token, &tasks_send("before", "tools.echo", json!({"a": 1}))).await;
    assert!(matches!(&answer, Answer::Result(_)), "{answer:?}");
    let call = spin_forever(&world, &token, "in-flight");
    // The call is running once the core holds an interpreter for it.
    tokio::time::sleep(Duration::from_millis(500)).await;

    std::fs::remove_file(&world.store).expect("remove the store file");
    let removed = Instant::now();
    let status = world.core.wait_exit(Duration::from_secs(10)).expect("the core stopped within 10 s");
    assert!(!status.success(), "{status:?}");
    assert!(removed.elapsed() < Duration::from_secs(10));
    let error = tokio::time::timeout(Duration::from_secs(10), call).await.expect("an answer").expect("the call");
    assert_eq!(error, json!({"code": -32603, "message": "invocation was not committed; send a new task id"}));
    let log = world.core.stderr();
    let errors = lines_at(&log, "ERROR");
    assert_eq!(errors.len(), 1, "{log}");
    let store = world.store.display().to_string();
    assert!(errors[0].contains(&format!("the store file {store} was removed")), "{log}");
}
