//! `/metrics` on the edge and on the core's `--metrics-listen` parse as
//! Prometheus text, and their counters move with traffic.

use std::collections::BTreeMap;

use world_tests::{World, http, tasks_send};

/// Every sample line of a text exposition: `name{labels} value`.
fn parse(text: &str) -> BTreeMap<String, f64> {
    let mut samples = BTreeMap::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            assert!(line.is_empty() || line.starts_with("# HELP ") || line.starts_with("# TYPE "), "{line}");
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a sample: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("not a number: {line}"));
        let name = series.split('{').next().unwrap();
        assert!(!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'), "{line}");
        assert!(!series.contains('{') || series.ends_with('}'), "{line}");
        samples.insert(series.to_owned(), value);
    }
    samples
}

async fn scrape(url: &str) -> BTreeMap<String, f64> {
    let response = http().get(url).send().await.unwrap();
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    parse(&response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_move_with_traffic() {
    let listen = world_tests::free_listen_address();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("world.db");
    let mut world = World::echo_core_on(dir, store, None, &["--metrics-listen", &listen], &[]);
    world.attach_edge(&[], &[]);
    let token = world.mint("ep1", &["world.apply=world:10"], 3600);
    let core_metrics = format!("http://{listen}/metrics");

    let before_core = scrape(&core_metrics).await;
    let before_edge = scrape(&world.url("/metrics")).await;
    for task in ["m-1", "m-2"] {
        let reply = world.a2a(&token, &tasks_send(task, "tools.echo", serde_json::json!({"a":1}))).await;
        assert_eq!(reply["result"]["status"]["state"], "completed");
    }
    let after_core = scrape(&core_metrics).await;
    let after_edge = scrape(&world.url("/metrics")).await;

    let moved = |before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>, series: &str| {
        after.get(series).copied().unwrap_or(0.0) - before.get(series).copied().unwrap_or(0.0)
    };
    let invocations = r#"world_core_invocations_total{transition="tools.echo",outcome="committed"}"#;
    assert_eq!(moved(&before_core, &after_core, invocations), 2.0);
    assert_eq!(moved(&before_core, &after_core, "world_core_capsule_run_seconds_count"), 2.0);
    assert_eq!(
        moved(&before_core, &after_core, r#"world_core_store_operation_seconds_count{operation="commit"}"#),
        2.0
    );
    assert_eq!(after_core.get("world_core_subprocesses_in_use"), Some(&0.0));
    let a2a = r#"world_edge_http_requests_total{route="POST /a2a/",status="200"}"#;
    assert_eq!(moved(&before_edge, &after_edge, a2a), 2.0);
    assert_eq!(
        moved(&before_edge, &after_edge, r#"world_edge_http_request_duration_seconds_count{route="POST /a2a/"}"#),
        2.0
    );
    assert_eq!(after_edge.get("world_edge_host_callbacks_in_use"), Some(&0.0));
}
