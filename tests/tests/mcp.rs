//! `POST /mcp/` over real processes: every request requirement and error row of the seed and
//! of reference-edge §7.4, each pinned (status, content type, code, message), the golden SSE
//! bytes, the four methods, batches, and the host-callback slots.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use world_tests::{INVOKE_TOOLS, INVOKE_TRANSITIONS, Setup, World, http, invoke_fixture};

const JSON: &str = "application/json";
const SSE: &str = "text/event-stream";

struct Answer {
    status: StatusCode,
    content_type: String,
    body: String,
}

/// A POST with the headers a conforming client sends; `edit` changes them per row.
async fn post_with(
    url: &str,
    token: &str,
    body: impl Into<reqwest::Body>,
    edit: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
) -> Answer {
    let request = http().post(format!("{url}/mcp/")).header("Authorization", format!("Bearer {token}"));
    let response = edit(request).body(body).send().await.expect("mcp request");
    let status = response.status();
    let content_type =
        response.headers().get("content-type").map(|v| v.to_str().unwrap_or("").to_owned()).unwrap_or_default();
    Answer { status, content_type, body: response.text().await.expect("body") }
}

fn conforming(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    request.header("Content-Type", JSON).header("Accept", "application/json, text/event-stream")
}

async fn post(url: &str, token: &str, body: impl Into<reqwest::Body>) -> Answer {
    post_with(url, token, body, conforming).await
}

fn sse(data: &str) -> String {
    format!("event: message\ndata: {data}\n\n")
}

fn rpc_error(id: &str, code: i64, message: &str) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":{code},\"message\":\"{message}\"}}}}")
}

fn assert_answer(answer: &Answer, status: u16, content_type: &str, body: &str, row: &str) {
    assert_eq!(answer.status.as_u16(), status, "{row}: {}", answer.body);
    assert_eq!(answer.content_type, content_type, "{row}");
    assert_eq!(answer.body, body, "{row}");
}

fn call(id: i64, name: &str, arguments: Value) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":arguments}}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_requirement_and_error_row() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let url = world.edge_url.as_str();
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let bad = |message: &str, id: &str| format!("{}\n", rpc_error(id, -32600, message));

    // Content-Type, then Accept (the other header conforming): both types literally, wildcards
    // do not count.
    let rows = [
        (
            "Content-Type",
            ("Accept", "application/json, text/event-stream"),
            &[None, Some("text/plain"), Some("application/jsonx")][..],
            "Content-Type must be application/json",
        ),
        (
            "Accept",
            ("Content-Type", "application/json; charset=utf-8"),
            &[None, Some("application/json"), Some("text/event-stream"), Some("*/*"), Some("application/json, */*")][..],
            "Accept must list both application/json and text/event-stream",
        ),
    ];
    for (header, (other, valid), values, message) in rows {
        for value in values {
            let answer = post_with(url, &token, ping, |r| {
                let r = r.header(other, valid);
                match value {
                    Some(value) => r.header(header, *value),
                    None => r,
                }
            })
            .await;
            assert_answer(&answer, 400, JSON, &bad(message, "1"), &format!("{header} {value:?}"));
        }
    }
    let answer = post_with(url, &token, ping, |r| {
        conforming(r).header("Accept", "text/event-stream").header("Content-Type", "application/json")
    })
    .await;
    assert_eq!(answer.status, StatusCode::OK, "Accept may be split over several headers");

    // MCP-Protocol-Version.
    let answer = post_with(url, &token, ping, |r| conforming(r).header("MCP-Protocol-Version", "2024-11-05")).await;
    let message = r#"unsupported MCP-Protocol-Version \"2024-11-05\" (supported: 2025-11-25, 2025-06-18, 2025-03-26)"#;
    assert_answer(&answer, 400, JSON, &bad(message, "1"), "bad version");

    // Batches only under 2025-03-26; an empty or broken one is refused.
    let batch = format!("[{ping}]");
    for version in ["2025-06-18", "2025-11-25"] {
        let answer =
            post_with(url, &token, batch.clone(), |r| conforming(r).header("MCP-Protocol-Version", version)).await;
        let message = format!("batch requests are not supported under protocol version {version}");
        assert_answer(&answer, 400, JSON, &bad(&message, "null"), version);
    }
    assert_answer(&post(url, &token, " [ ] ").await, 400, JSON, &bad("empty batch", "null"), "empty batch");
    let broken = post(url, &token, "[1,").await;
    assert_eq!((broken.status.as_u16(), broken.content_type.as_str()), (400, JSON));
    assert!(broken.body.starts_with(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"invalid JSON: "#));

    // One message: invalid JSON, jsonrpc not 2.0, not a request.
    for body in ["{", "", r#"{"jsonrpc":"2.0","id":1,"method":"ping"} trailing"#] {
        let answer = post(url, &token, body).await;
        assert_eq!((answer.status.as_u16(), answer.content_type.as_str()), (400, JSON), "{body:?}");
        assert!(
            answer.body.starts_with(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"invalid JSON: "#),
            "{body:?}: {}",
            answer.body
        );
    }
    let empty = post(url, &token, "").await;
    assert_eq!(empty.body, format!("{}\n", rpc_error("null", -32700, "invalid JSON: unexpected end of JSON input")));
    let answer = post(url, &token, r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#).await;
    assert_answer(&answer, 400, JSON, &bad(r#"expected jsonrpc: \"2.0\""#, "3"), "jsonrpc 1.0");
    let answer = post(url, &token, r#"{"jsonrpc":"2.0","id":4}"#).await;
    assert_answer(&answer, 400, JSON, &bad("not a JSON-RPC request, notification or response", "4"), "no method");

    // Notifications and responses only: 202 and nothing else.
    let notification = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_answer(&post(url, &token, notification).await, 202, JSON, "", "notification");
    let both = format!(r#"[{notification},{{"jsonrpc":"2.0","id":9,"result":{{}}}}]"#);
    assert_answer(&post(url, &token, both).await, 202, JSON, "", "notification and response batch");

    // Unknown method and unknown or ungranted tool: JSON-RPC errors inside the SSE.
    let answer = post(url, &token, r#"{"jsonrpc":"2.0","id":5,"method":"tools/nope"}"#).await;
    assert_answer(&answer, 200, SSE, &sse(&rpc_error("5", -32601, r#"method not found: \"tools/nope\""#)), "method");
    for name in ["tools_dnope", "tests_dhidden"] {
        let answer = post(url, &token, call(6, name, json!({}))).await;
        let message = format!(r#"unknown tool \"{name}\""#);
        assert_answer(&answer, 200, SSE, &sse(&rpc_error("6", -32602, &message)), name);
    }
    let answer = post(url, &token, r#"{"jsonrpc":"2.0","id":6,"method":"tools/call"}"#).await;
    let message = "invalid params: unexpected end of JSON input";
    assert_answer(&answer, 200, SSE, &sse(&rpc_error("6", -32602, message)), "tools/call without params");

    // Arguments that are not an object fail the whole POST; nothing runs.
    let host_failed = |id: &str| format!("{}\n", rpc_error(id, -32603, "host callback failed"));
    for arguments in [json!([1]), json!("x"), json!(null), json!(3)] {
        let answer = post(url, &token, call(7, "tools_decho", arguments.clone())).await;
        assert_answer(&answer, 200, JSON, &host_failed("7"), &format!("arguments {arguments}"));
    }
    let answer =
        post(url, &token, r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"tools_decho"}}"#).await;
    assert_answer(&answer, 200, JSON, &host_failed("7"), "arguments absent");

    // Origin: refused when present and not allowed; loopback origins are allowed.
    let answer = post_with(url, &token, ping, |r| conforming(r).header("Origin", "http://evil.example")).await;
    assert_answer(&answer, 403, JSON, &format!("{}\n", rpc_error("null", -32600, "Origin is not allowed")), "origin");
    let answer = post_with(url, &token, ping, |r| conforming(r).header("Origin", "http://localhost:3000")).await;
    assert_eq!(answer.status, StatusCode::OK);

    // The 4 MiB cap: one byte over is the whole-POST envelope.
    let over = format!("{ping}{}", " ".repeat(4 * 1024 * 1024 + 1 - ping.len()));
    let answer = post(url, &token, over).await;
    assert_answer(&answer, 200, JSON, &format!("{}\n", rpc_error("null", -32603, "invalid MCP request body")), "cap");
    let exact = format!("{ping}{}", " ".repeat(4 * 1024 * 1024 - ping.len()));
    assert_eq!(post(url, &token, exact).await.status, StatusCode::OK, "exactly 4 MiB is accepted");

    // A session whose surface holds a 74-byte tool name: every POST fails, even ping.
    let long = world.mint("ep2", &["world.apply=long:10"], 3600);
    let answer = post(url, &long, ping).await;
    assert_answer(&answer, 200, JSON, &host_failed("null"), "name over 64 bytes");
    assert_eq!(world.log_len(&token).await, 1, "no refused call committed anything");
}

/// Every `tools/call` is one invocation, which the core admits against the registry head current
/// as it runs it: having seen a tool conveys no authority. A tool a new revision hides is
/// unknown at once, and an ended session is answered exactly as a session the edge never saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_admitted_by_its_invocation_against_the_current_registry() {
    let mut world = World::invoke(Setup::default());
    let grants = ["world.apply=world:1000"];
    let (token, expiry) = world.mint_expiring("ep1", &grants, 8);
    let url = world.edge_url.clone();
    let url = url.as_str();
    let echo = call(3, "tools_decho", json!({"n":1}));
    for _ in 0..3 {
        let answer = post(url, &token, echo.clone()).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        assert!(answer.body.contains(r#""structuredContent":{"echo":{"n":1}}"#), "{}", answer.body);
    }
    // No call was admitted on its own.
    world.assert_core_calls(0, 3).await;

    // A new revision in which the echo transition needs a scope the session was not granted.
    world.republish_rescoped(&invoke_fixture(), INVOKE_TRANSITIONS, "tools.echo", "elsewhere");

    let stale = post(url, &token, echo.clone()).await;
    let fresh = post(url, &world.mint("ep2", &grants, 3600), echo.clone()).await;
    assert_answer(&stale, 200, SSE, &fresh.body, "a tool the new revision dropped");
    assert_eq!(stale.body, sse(&rpc_error("3", -32602, r#"unknown tool \"tools_decho\""#)));
    // The tools of the session's new surface run.
    for _ in 0..2 {
        let named = post(url, &token, call(4, "tests_dnamed", json!({"name":"x"}))).await;
        assert_eq!(named.status, StatusCode::OK, "{}", named.body);
        assert!(named.body.contains(r#""structuredContent":{"echo":{"name":"x"}}"#), "{}", named.body);
    }

    // The session ends. (A session minted already at its end, which this edge never saw, is the
    // comparison.)
    let expired = world.mint("ep4", &grants, 0);
    expiry.pass().await;
    let ended = post(url, &token, call(5, "tests_dnamed", json!({}))).await;
    let never_seen = post(url, &expired, call(5, "tests_dnamed", json!({}))).await;
    assert_answer(&ended, never_seen.status.as_u16(), &never_seen.content_type, &never_seen.body, "an ended session");
    assert_eq!(ended.status, StatusCode::UNAUTHORIZED, "{}", ended.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_methods_answer_with_one_sse_event() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let url = world.edge_url.as_str();

    // The golden bytes of the reference's fixture.
    let answer = post(url, &token, r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).await;
    assert_eq!(answer.body.as_bytes(), b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n");
    assert_eq!(answer.content_type, SSE);

    let initialize = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let answer = post(url, &token, initialize.to_string()).await;
    assert_answer(
        &answer,
        200,
        SSE,
        &sse(
            r#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{"listChanged":false}},"protocolVersion":"2025-06-18","serverInfo":{"name":"ailang-worldd","version":"0.1.0"}}}"#,
        ),
        "initialize",
    );
    let unknown = json!({"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"1999-01-01"}});
    let answer = post(url, &token, unknown.to_string()).await;
    assert!(answer.body.contains(r#""protocolVersion":"2025-11-25""#), "{}", answer.body);

    // tools/list: the session's surface only, escaped, sorted, schemas normalised.
    let answer = post(url, &token, r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).await;
    assert_eq!((answer.status, answer.content_type.as_str()), (StatusCode::OK, SSE));
    let data = answer.body.strip_prefix("event: message\ndata: ").and_then(|b| b.strip_suffix("\n\n")).unwrap();
    let listed: Value = serde_json::from_str(data).unwrap();
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, INVOKE_TOOLS);
    assert!(data.contains(r#"{"name":"tools_decho","description":"quickstart transition: returns its arguments under \"echo\"","inputSchema":{"type":"object"},"outputSchema":{"type":"object"}}"#), "{data}");
    assert!(
        data.contains(r#"{"name":"tests_duntyped_uschema","inputSchema":{"properties":{"n":{"type":"integer"}},"type":"object"},"outputSchema":{"type":"object"}}"#),
        "a schema without a type gains one, and an empty description is omitted: {data}"
    );

    // tools/call: the output as text and as structuredContent.
    let answer = post(url, &token, call(3, "tools_decho", json!({"b":[1,2],"a":"x"}))).await;
    assert_answer(
        &answer,
        200,
        SSE,
        &sse(
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"{\"echo\":{\"a\":\"x\",\"b\":[1,2]}}"}],"structuredContent":{"echo":{"a":"x","b":[1,2]}}}}"#,
        ),
        "tools/call",
    );
    assert_eq!(world.log_len(&token).await, 2);

    // Arguments the schema refuses: the tool's own error result, naming the violation.
    let answer = post(url, &token, call(4, "tests_dnamed", json!({"other": 1}))).await;
    assert_eq!((answer.status, answer.content_type.as_str()), (StatusCode::OK, SSE));
    let data = answer.body.strip_prefix("event: message\ndata: ").and_then(|b| b.strip_suffix("\n\n")).unwrap();
    let result: Value = serde_json::from_str(data).unwrap();
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("arguments do not match the input schema: ") && text.contains("name"), "{text}");
    assert_eq!(result["result"]["isError"], true);
    assert_eq!(result["result"].as_object().unwrap().len(), 2, "no structuredContent: {data}");
    assert_eq!(world.log_len(&token).await, 2, "a refused call commits nothing");

    // A batch of two calls (default version): run in order, two entries, one event.
    let batch = format!("[{},{}]", call(5, "tools_decho", json!({"n":1})), call(5, "tools_decho", json!({"n":2})));
    let answer = post(url, &token, batch).await;
    assert_answer(
        &answer,
        200,
        SSE,
        &sse(
            r#"[{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"{\"echo\":{\"n\":1}}"}],"structuredContent":{"echo":{"n":1}}}},{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"{\"echo\":{\"n\":2}}"}],"structuredContent":{"echo":{"n":2}}}}]"#,
        ),
        "batch",
    );
    assert_eq!(world.log_len(&token).await, 4, "each call item committed its own entry");
    let entry: Value = world.get_json(&token, "/v1/log/3").await;
    assert_eq!(entry["header"]["writtenBy"], "coordinator:mcp", "{entry}");

    // A batch whose later item is bad: the 400 of that item, after the first ran.
    let batch = format!(r#"[{},{{"jsonrpc":"1.0","id":6,"method":"ping"}}]"#, call(6, "tools_decho", json!({"n":3})));
    let answer = post(url, &token, batch).await;
    assert_answer(
        &answer,
        400,
        JSON,
        &format!("{}\n", rpc_error("6", -32600, r#"expected jsonrpc: \"2.0\""#)),
        "bad item",
    );
    assert_eq!(world.log_len(&token).await, 5);
}

/// Calls of `tests.spin` that each take about `seconds`, measured on this machine.
async fn spin_arguments(url: &str, token: &str, seconds: f64) -> Value {
    // Calibrate on a probe long enough that the call's fixed cost (spawn, commit) is a small
    // part of it: on a loaded machine a short probe overstates each iteration's cost, and the
    // calls made from it would end far sooner than `seconds`.
    let mut outer: i64 = 200;
    loop {
        let started = Instant::now();
        let answer = post(url, token, call(1, "tests_dspin", json!({ "outer": outer }))).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        let took = started.elapsed().as_secs_f64();
        if took >= 0.3 || outer >= 1 << 24 {
            return json!({ "outer": ((seconds / took * outer as f64) as i64).max(outer) });
        }
        outer *= 4;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn more_concurrent_calls_than_slots_are_refused_as_capacity_exceeded() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    // A short slot wait makes the refusal come long before any call ends: 8 calls sharing
    // this machine's cores hold every slot for about 4 s while the other 4 wait 1 s. Much
    // longer calls could run into the 20 s deadline on a loaded machine.
    let (_edge, url) = world.extra_edge(&["--callback-slot-wait", "1s"]);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let arguments = spin_arguments(&url, &token, 4.0 * (cores / 8.0).min(1.0)).await;
    let calls = (0..12).map(|i| {
        let (url, token, body) = (url.clone(), token.clone(), call(i, "tests_dspin", arguments.clone()));
        async move { post(&url, &token, body).await }
    });
    let answers = futures::future::join_all(calls).await;
    let mut refused = 0;
    for answer in &answers {
        if answer.content_type == SSE {
            assert!(answer.body.contains("structuredContent"), "{}", answer.body);
        } else {
            let expected = format!("{}\n", rpc_error("null", -32603, "host callback capacity exceeded"));
            let expected_with_id = |id: &str| format!("{}\n", rpc_error(id, -32603, "host callback capacity exceeded"));
            assert!(
                answer.body == expected || (0..12).any(|i| answer.body == expected_with_id(&i.to_string())),
                "{}",
                answer.body
            );
            assert_eq!(answer.status, StatusCode::OK);
            refused += 1;
        }
    }
    assert!((1..=4).contains(&refused), "{refused} refused of 12 with 8 slots");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_stays_taken_until_the_callback_returns_even_when_its_client_left() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let (_edge, url) = world.extra_edge(&["--callback-slots", "1", "--callback-slot-wait", "500ms"]);
    // Long enough that a loaded machine cannot finish it before the ping below; the core's
    // invocation deadline bounds it either way.
    let arguments = spin_arguments(&url, &token, 10.0).await;
    let gave_up = reqwest::Client::new()
        .post(format!("{url}/mcp/"))
        .header("Authorization", format!("Bearer {token}"))
        .header("Content-Type", JSON)
        .header("Accept", "application/json, text/event-stream")
        .body(call(1, "tests_dspin", arguments))
        .timeout(Duration::from_millis(700))
        .send()
        .await;
    assert!(gave_up.is_err(), "the client stopped waiting");
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let answer = post(&url, &token, ping).await;
    assert_answer(
        &answer,
        200,
        JSON,
        &format!("{}\n", rpc_error("null", -32603, "host callback capacity exceeded")),
        "the abandoned call still holds the only slot",
    );
    // Once the abandoned call returns, the slot is free again.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = post(&url, &token, ping).await;
        if answer.content_type == SSE {
            break;
        }
        assert!(Instant::now() < deadline, "the slot never came back: {}", answer.body);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_the_callback_timeout_answers_the_whole_post_as_timed_out() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let (_edge, url) = world.extra_edge(&["--callback-timeout", "1s"]);
    // Several times the timeout, so even a loaded machine is still running it when it ends.
    let arguments = spin_arguments(&url, &token, 5.0).await;
    let answer = post(&url, &token, call(7, "tests_dspin", arguments)).await;
    assert_answer(
        &answer,
        200,
        JSON,
        &format!("{}\n", rpc_error("7", -32603, "host callback timed out")),
        "a call that outlives its callback timeout",
    );
}
