//! Failover: one edge given two cores on one PostgreSQL database keeps serving while one core
//! dies and after it comes back. Calls in flight on the dying core end in a whole JSON-RPC
//! answer (a result or an error), never a broken reply; new calls go to the living core; the
//! core that comes back serves calls again. A core killed while it holds an effect intent
//! leaves task ids that resolve on the other core once it is known dead, and recovery at its
//! restart speaks for it alone.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use world_proto::v1 as pb;
use world_proto::v1::invocation_client::InvocationClient;
use world_tests::{
    Answer, PostgresStore, World, a2a_invoke, a2a_post, bin, faults_core, fixture, http, json_rpc, scripted_write_args,
    tasks_send,
};

/// One `tools/call` of `tools_decho` on `n`; a result that is not that echo is broken.
async fn call_echo(edge: &str, token: &str, n: u64) -> Answer {
    let body =
        json!({"jsonrpc":"2.0","id":n,"method":"tools/call","params":{"name":"tools_decho","arguments":{"n":n}}});
    match json_rpc(&format!("{edge}/mcp/"), token, &body).await {
        Answer::Result(result) if result["structuredContent"]["echo"]["n"] != n => {
            Answer::Broken(format!("not the echo of {n}: {result}"))
        }
        answer => answer,
    }
}

/// `count` calls, one after another; all must succeed.
async fn all_succeed(edge: &str, token: &str, count: u64, phase: &str) {
    for n in 0..count {
        let answer = call_echo(edge, token, n).await;
        assert!(matches!(answer, Answer::Result(_)), "{phase}: call {n}: {answer:?}");
    }
}

/// `world_core_invocations_total` summed over every series of the core's `/metrics`.
async fn invocations(metrics: &str) -> f64 {
    let text = http().get(metrics).send().await.expect("core metrics").text().await.expect("metrics body");
    text.lines()
        .filter(|line| line.starts_with("world_core_invocations_total{"))
        .filter_map(|line| line.rsplit_once(' ').and_then(|(_, value)| value.parse::<f64>().ok()))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_keeps_serving_while_one_of_two_cores_dies_and_returns() {
    let PostgresStore { url, dir, artifacts } = PostgresStore::fresh().await;
    let store = PathBuf::from(&url);
    let a_metrics = world_tests::free_listen_address();
    let mut a = World::echo_core_on(dir, store.clone(), Some(&artifacts), &["--metrics-listen", &a_metrics], &[]);
    let serve = world_tests::serve_args(&bin("ailang"), Some(&artifacts));
    let serve: Vec<&str> = serve.iter().map(String::as_str).collect();
    let b_logs = a.dir.path().join("b");
    std::fs::create_dir_all(&b_logs).expect("logs");
    let (_b, b_addr) = world_tests::start_core(&store, &b_logs, &serve);
    let (edge_process, edge) = world_tests::start_edge(&[&a.core_addr, &b_addr], a.dir.path(), &[]);
    let token = a.mint("ep1", &["world.apply=world:100000"], 3600);

    all_succeed(&edge, &token, 20, "both cores up").await;

    // Four clients call without pause while core A is killed.
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4u64)
        .map(|client| {
            let (edge, token, stop) = (edge.clone(), token.clone(), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut answers = Vec::new();
                let mut n = client * 1_000_000;
                while !stop.load(Ordering::Relaxed) && answers.len() < 2_000 {
                    answers.push(call_echo(&edge, &token, n).await);
                    n += 1;
                }
                answers
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.core.kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut answers = Vec::new();
    for client in clients {
        answers.extend(client.await.expect("client task"));
    }
    let broken: Vec<&Answer> = answers.iter().filter(|a| matches!(a, Answer::Broken(_))).collect();
    assert!(broken.is_empty(), "every answer is whole while a core dies: {broken:?}");
    assert!(answers.iter().filter(|a| matches!(a, Answer::Result(_))).count() > 10, "calls went on: {answers:?}");

    all_succeed(&edge, &token, 20, "core A dead").await;

    // Core A comes back on its address; once it is no longer passed over it serves again.
    let a_serve: Vec<&str> = serve.iter().copied().chain(["--metrics-listen", a_metrics.as_str()]).collect();
    a.restart_core(&bin("world-core"), &a_serve, &[]);
    let a_metrics = format!("http://{a_metrics}/metrics");
    let started = Instant::now();
    let mut n = 0;
    while invocations(&a_metrics).await == 0.0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the returned core never served a call; the edge's log:\n{}",
            edge_process.stderr()
        );
        let answer = call_echo(&edge, &token, n).await;
        assert!(matches!(answer, Answer::Result(_)), "core A back: call {n}: {answer:?}");
        n += 1;
    }
    all_succeed(&edge, &token, 20, "both cores up again").await;
}

/// `fx.scripted_write` of `path` as the A2A task `task`, straight to one core.
async fn invoke_write(core: &str, token: &str, task: &str, path: &str) -> Result<pb::invoke_reply::Outcome, String> {
    let mut client = InvocationClient::connect(format!("http://{core}")).await.map_err(|e| e.to_string())?;
    let request = a2a_invoke(token, "fx.scripted_write", task, scripted_write_args(path).to_string().as_bytes());
    let reply = client.invoke(request).await.map_err(|e| e.to_string())?;
    reply.into_inner().outcome.ok_or_else(|| "no outcome".to_owned())
}

/// The same task resent through the edge as the seed's `tasks/send`.
async fn resend_write(edge: &str, token: &str, task: &str, path: &str) -> Value {
    let body = tasks_send(task, "fx.scripted_write", scripted_write_args(path));
    let response =
        a2a_post(&http(), &format!("{edge}/a2a/"), token).body(body.to_string()).send().await.expect("POST /a2a/");
    response.json().await.expect("a JSON-RPC answer")
}

/// Polls `sql` (one count) until it reaches `want`; bounded.
async fn until_count(pool: &sqlx::PgPool, sql: &'static str, want: i64, what: &str) {
    for _ in 0..300 {
        let count: i64 = sqlx::query_scalar(sql).fetch_one(pool).await.expect("count");
        if count >= want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} never happened");
}

/// The effect ids a core's `recovery:` lines name.
fn recovered_effects(stderr: &str) -> BTreeSet<String> {
    stderr
        .lines()
        .filter(|line| line.contains("recovery: effect intent without an outcome"))
        .filter_map(|line| line.split_whitespace().find_map(|word| word.strip_prefix("effect=")))
        .map(|id| id.trim_matches('"').to_owned())
        .collect()
}

fn worktrees(root: &Path, episodes: &[&str]) {
    for episode in episodes {
        std::fs::create_dir_all(root.join(episode)).expect("episode worktree");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_cores_task_ids_resolve_on_the_other_and_its_recovery_names_only_its_own_intents() {
    let PostgresStore { url, dir, artifacts } = PostgresStore::fresh().await;
    let store = PathBuf::from(&url);
    let root = dir.path().join("ws");
    worktrees(&root, &["ep1", "ep2", "ep3"]);
    let serve =
        world_tests::bootstrap_store(&store, dir.path(), &fixture("effects/transitions.json"), 5, Some(&artifacts));
    let serve: Vec<&str> = serve.iter().map(String::as_str).collect();
    let root_arg = root.display().to_string();
    let serve: Vec<&str> = serve.iter().copied().chain(["--workspace-root", root_arg.as_str()]).collect();

    // Both cores hold a call after its effect intent while their hold file exists.
    let (hold_a, hold_b) = (dir.path().join("hold-a"), dir.path().join("hold-b"));
    let env_a = format!("after-intent:{}", hold_a.display());
    let env_b = format!("after-intent:{}", hold_b.display());
    let a_listen = world_tests::free_listen_address();
    let a_args: Vec<&str> = serve.iter().copied().chain(["--core-id", "core-a"]).collect();
    let b_args: Vec<&str> = serve.iter().copied().chain(["--core-id", "core-b"]).collect();
    let logs = |name: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(&path).expect("log folder");
        path
    };
    let (mut a, a_addr) = world_tests::start_core_at(
        &faults_core(),
        &a_listen,
        &store,
        &logs("a"),
        &a_args,
        &[("WORLD_FAULT_HOLD", &env_a)],
    );
    let b_listen = world_tests::free_listen_address();
    let (_b, b_addr) = world_tests::start_core_at(
        &faults_core(),
        &b_listen,
        &store,
        &logs("b"),
        &b_args,
        &[("WORLD_FAULT_HOLD", &env_b)],
    );
    let (_edge, edge) = world_tests::start_edge(&[&a_addr, &b_addr], dir.path(), &[]);
    let grants = ["Workspace.Write=worktree:10"];
    let tokens: Vec<String> =
        ["ep1", "ep2", "ep3"].iter().map(|episode| world_tests::mint(&store, episode, &grants, 3600)).collect();
    let pool = sqlx::PgPool::connect(&url).await.expect("connect");

    // On core A: w1 (ep1) and w3 (ep2) stand after their intents, w2 (ep1) waits for ep1's turn.
    std::fs::write(&hold_a, "").expect("hold file");
    let in_flight = [("w1", 0usize), ("w2", 0), ("w3", 1)];
    let mut calls = Vec::new();
    for (i, (task, episode)) in in_flight.iter().enumerate() {
        let (addr, token, task) = (a_addr.clone(), tokens[*episode].clone(), task.to_string());
        calls.push(tokio::spawn(async move { invoke_write(&addr, &token, &task, &format!("{task}.txt")).await }));
        if i == 0 {
            until_count(&pool, "SELECT COUNT(*) FROM effect_intents", 1, "w1's intent").await;
        }
    }
    until_count(&pool, "SELECT COUNT(*) FROM effect_intents", 2, "w3's intent").await;
    until_count(&pool, "SELECT COUNT(*) FROM invocation_claims WHERE state = 'running'", 3, "three claims").await;

    a.kill();
    let killed = Instant::now();
    for call in calls {
        assert!(!matches!(call.await.expect("call task"), Ok(pb::invoke_reply::Outcome::Invoked(_))));
    }
    // Core A's claims and lease end once it is known dead, well before the lease (20 s + 4 s
    // + 10 s) would expire, and never answer "task id already used" after that.
    let lease = Duration::from_secs(34);
    let not_committed = json!({"code":-32603,"message":"invocation was not committed; send a new task id"});
    for (task, episode) in in_flight {
        let answer = loop {
            let answer = resend_write(&edge, &tokens[episode], task, &format!("{task}.txt")).await;
            if answer["error"]["code"] != -32602 {
                break answer;
            }
            assert_eq!(answer["error"]["message"], "task id already used in this session", "{task}: {answer}");
            assert!(killed.elapsed() < lease, "{task} still in use {:?} after the kill", killed.elapsed());
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        match task {
            // Its effect may have run: spent, never run again.
            "w1" | "w3" => assert_eq!(answer["error"], not_committed, "{task}: {answer}"),
            // It never reached its effect: a fresh run on core B.
            _ => assert!(answer["result"].is_object(), "{task}: {answer}"),
        }
    }
    println!("every in-flight task id resolved {:?} after the kill", killed.elapsed());
    assert!(
        root.join("ep1/w2.txt").is_file() && !root.join("ep1/w1.txt").exists() && !root.join("ep2/w3.txt").exists()
    );

    // Core B holds an intent of its own (w4, ep3) while core A restarts with a 2 s timeout.
    std::fs::write(&hold_b, "").expect("hold file");
    let (b_addr_w4, token_w4) = (b_addr.clone(), tokens[2].clone());
    let w4 = tokio::spawn(async move { invoke_write(&b_addr_w4, &token_w4, "w4", "w4.txt").await });
    until_count(&pool, "SELECT COUNT(*) FROM effect_intents WHERE episode = 'ep3'", 1, "w4's intent").await;
    let a_metrics = world_tests::free_listen_address();
    let a_args: Vec<&str> =
        a_args.iter().copied().chain(["--invocation-timeout", "2", "--metrics-listen", a_metrics.as_str()]).collect();
    let (a_again, a_addr) = world_tests::start_core_at(&bin("world-core"), &a_addr, &store, &logs("a2"), &a_args, &[]);
    let logged = a_again.stderr();
    let named = recovered_effects(&logged);
    let own: BTreeSet<String> = ["effect:ep1:0", "effect:ep2:0"].map(str::to_owned).into();
    assert_eq!(named, own, "recovery names core A's intents only, not core B's effect:ep3:0:\n{logged}");
    let metrics =
        http().get(format!("http://{a_metrics}/metrics")).send().await.expect("metrics").text().await.expect("body");
    assert!(metrics.contains("world_core_pending_intents_at_start{kind=\"effect\"} 2\n"), "{metrics}");

    std::fs::remove_file(&hold_b).expect("release w4");
    match w4.await.expect("w4 task") {
        Ok(pb::invoke_reply::Outcome::Invoked(invoked)) => {
            let output: Value = serde_json::from_slice(&invoked.output).expect("output JSON");
            assert_eq!(output["world"]["effects"][0]["status"], "ok", "{output}");
        }
        other => panic!("w4 on core B: {other:?}"),
    }

    // Core A, at a 2 s invocation timeout, runs an effectful call.
    match invoke_write(&a_addr, &tokens[2], "w5", "w5.txt").await {
        Ok(pb::invoke_reply::Outcome::Invoked(invoked)) => {
            let output: Value = serde_json::from_slice(&invoked.output).expect("output JSON");
            assert_eq!(output["world"]["effects"][0]["status"], "ok", "{output}");
        }
        other => panic!("w5 on core A at 2 s: {other:?}"),
    }
    assert!(root.join("ep3/w5.txt").is_file());
    // A timeout too short for an effect is refused at start, with the reason.
    let refused = std::process::Command::new(bin("world-core"))
        .args(["serve", "--store", &url, "--listen", "127.0.0.1:0", "--invocation-timeout", "1"])
        .output()
        .expect("world-core serve");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("--invocation-timeout 1: an invocation timeout of 1s is too short: at least 2s"),
        "{stderr}"
    );
    // No task id ever got a second intent.
    let most: i64 = sqlx::query_scalar(
        "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM effect_intents GROUP BY call_id) c",
    )
    .fetch_one(&pool)
    .await
    .expect("intents per call");
    assert_eq!(most, 1);
    pool.close().await;
}
