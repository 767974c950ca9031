//! A credential never leaves the request it came with: with core and edge logging at debug
//! level and exporting spans, a session's credential (and a well-formed but unknown one, and a
//! malformed one) appears in no log line, span, metric or answer body, whatever the route.

use std::time::Duration;

use world_tests::otlp::{export_env, grpc_receiver, spans_text};
use world_tests::{World, http};

/// Every request a client makes with a credential, as (method, path, body).
const REQUESTS: &[(&str, &str, &str)] = &[
    (
        "POST",
        "/mcp/",
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    ),
    ("POST", "/mcp/", r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#),
    (
        "POST",
        "/mcp/",
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"tools_decho","arguments":{"a":1}}}"#,
    ),
    (
        "POST",
        "/mcp/",
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}"#,
    ),
    (
        "POST",
        "/a2a/",
        r#"{"jsonrpc":"2.0","id":5,"method":"tasks/send","params":{"id":"s-1","metadata":{"skill_id":"tools.echo"},"message":{"role":"user","parts":[{"type":"data","data":{"a":1}}]}}}"#,
    ),
    (
        "POST",
        "/a2a/",
        r#"{"jsonrpc":"2.0","id":6,"method":"message/send","params":{"message":{"messageId":"s-2","role":"user","parts":[{"kind":"data","data":{"a":1}}],"metadata":{"skill_id":"tools.echo"}}}}"#,
    ),
    ("POST", "/a2a/", r#"{"jsonrpc":"2.0","id":7,"method":"tasks/send","params":"#),
    ("GET", "/v1/head", ""),
    ("GET", "/v1/log?from=0&limit=5", ""),
    ("GET", "/v1/objects/sha256:0000000000000000000000000000000000000000000000000000000000000000", ""),
    ("GET", "/.well-known/agent.json", ""),
    ("GET", "/.well-known/agent-card.json", ""),
    ("POST", "/v1/commit", "{}"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_appear_in_no_log_span_metric_or_answer() {
    let (endpoint, spans) = grpc_receiver().await;
    let env = [export_env(&endpoint, "grpc").as_slice(), &[("RUST_LOG", "debug")]].concat();
    let core_metrics = world_tests::free_listen_address();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("world.db");
    let mut world = World::echo_core_on(dir, store, None, &["--metrics-listen", &core_metrics], &env);
    world.attach_edge(&[], &env);
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let expired = world.mint("ep2", &["world.apply=world:1000"], 1);
    let unknown = "5e".repeat(32);
    let malformed = "s3cr3t-but-not-a-credential";
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let mut answers = String::new();
    let credentials = [
        format!("Bearer {token}"),
        format!("bearer {token}"),
        format!("Bearer {expired}"),
        format!("Bearer {unknown}"),
        format!("Bearer {malformed}"),
        format!("Basic {token}"),
        token.clone(),
    ];
    for authorization in &credentials {
        for (method, path, body) in REQUESTS {
            let request = match *method {
                "GET" => http().get(world.url(path)),
                _ => http().post(world.url(path)).body(*body),
            };
            let response = request
                .header("Authorization", authorization)
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .send()
                .await
                .expect("request");
            answers.push_str(&format!("{method} {path} {}\n", response.status()));
            for (name, value) in response.headers() {
                answers.push_str(&format!("{name}: {}\n", String::from_utf8_lossy(value.as_bytes())));
            }
            answers.push_str(&response.text().await.expect("body"));
            answers.push('\n');
        }
    }
    assert!(answers.contains(r#""echo":{"a":1}"#), "the valid credential was served: {answers}");

    let mut metrics = http().get(world.url("/metrics")).send().await.unwrap().text().await.unwrap();
    metrics.push_str(&http().get(format!("http://{core_metrics}/metrics")).send().await.unwrap().text().await.unwrap());
    assert!(metrics.contains("world_edge_http_requests_total"), "{metrics}");

    // A graceful stop flushes the spans still batched; the logs are then complete.
    let (core_log, edge_log) = world.stop();
    assert!(edge_log.contains("DEBUG") && core_log.contains("DEBUG"), "both processes logged at debug level");
    let spans_text = spans_text(&spans);

    for (place, haystack) in [
        ("answers", &answers),
        ("metrics", &metrics),
        ("core log", &core_log),
        ("edge log", &edge_log),
        ("spans", &spans_text),
    ] {
        for secret in [token.as_str(), expired.as_str(), unknown.as_str(), malformed] {
            assert!(!haystack.contains(secret), "the {place} hold a credential ({secret})");
        }
    }
}
