//! Failover: one edge given two cores on one PostgreSQL database keeps serving while one core
//! dies and after it comes back. Calls in flight on the dying core end in a whole JSON-RPC
//! answer (a result or an error), never a broken reply; new calls go to the living core; the
//! core that comes back serves calls again.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use world_tests::{World, bin, http};

/// How an answer to one `tools/call` ended.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Result,
    /// A JSON-RPC error: a clean refusal.
    Error(i64),
    /// Anything else: an HTTP failure, a cut reply, a body that is not one JSON-RPC answer.
    Broken(String),
}

async fn call_echo(edge: &str, token: &str, n: u64) -> Answer {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"tools_decho","arguments":{{"n":{n}}}}}}}"#
    );
    let response = http()
        .post(format!("{edge}/mcp/"))
        .header("Authorization", format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(body)
        .send()
        .await;
    let response = match response {
        Ok(response) => response,
        Err(error) => return Answer::Broken(format!("request: {error}")),
    };
    let status = response.status();
    let text = match response.text().await {
        Ok(text) => text,
        Err(error) => return Answer::Broken(format!("body: {error}")),
    };
    if status != reqwest::StatusCode::OK {
        return Answer::Broken(format!("HTTP {status}: {text}"));
    }
    let json = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap_or(&text);
    match serde_json::from_str::<Value>(json) {
        Ok(answer) if answer["result"]["structuredContent"]["echo"]["n"] == n => Answer::Result,
        Ok(answer) if answer["error"]["code"].is_i64() => Answer::Error(answer["error"]["code"].as_i64().unwrap()),
        _ => Answer::Broken(text),
    }
}

/// `count` calls, one after another; all must succeed.
async fn all_succeed(edge: &str, token: &str, count: u64, phase: &str) {
    for n in 0..count {
        assert_eq!(call_echo(edge, token, n).await, Answer::Result, "{phase}: call {n}");
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
    let admin = std::env::var("WORLD_TEST_POSTGRES_URL")
        .expect("WORLD_TEST_POSTGRES_URL must name a PostgreSQL server: run tests/run.sh, which starts one");
    let url = world_tests::fresh_postgres_database(&admin).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let artifacts = dir.path().join("artifacts");
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
    assert!(answers.iter().filter(|a| **a == Answer::Result).count() > 10, "calls went on: {answers:?}");

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
        assert_eq!(call_echo(&edge, &token, n).await, Answer::Result, "core A back: call {n}");
        n += 1;
    }
    all_succeed(&edge, &token, 20, "both cores up again").await;
}
