//! `POST /a2a/` over real processes: the seed's example adapted to the echo transition, the
//! task-id rule, the `message/send` alias, and every row of the seed's A2A error table a pure
//! transition can reach, each pinned (code, exact message, HTTP 200).

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use world_model::HashRef;
use world_tests::{INVOKE_TRANSITIONS, Setup, World, a2a_post, http, invoke_fixture};

struct Answer {
    status: StatusCode,
    connection: Option<String>,
    body: String,
}

async fn post(world: &World, token: &str, body: impl Into<reqwest::Body>) -> Answer {
    let response = a2a_post(&http(), &world.url("/a2a/"), token).body(body).send().await.expect("a2a request");
    let status = response.status();
    let connection = response.headers().get("connection").map(|v| v.to_str().unwrap_or("").to_owned());
    Answer { status, connection, body: response.text().await.expect("body") }
}

/// A `tasks/send` (or alias) request whose one part carries `data`.
fn send(method: &str, id: Value, task: &str, metadata: Value, data: Value) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":method,"params":{
        "id":task,"metadata":metadata,"message":{"role":"user","parts":[{"type":"data","data":data}]}}})
    .to_string()
}

fn skill(id: &str) -> Value {
    json!({ "skill_id": id })
}

/// The seed's error body, Go-encoded as the reference writes it.
fn error(code: i64, message: &str, id: &str) -> String {
    format!("{{\"error\":{{\"code\":{code},\"message\":\"{message}\"}},\"id\":{id},\"jsonrpc\":\"2.0\"}}\n")
}

async fn assert_error(world: &World, token: &str, body: impl Into<reqwest::Body>, code: i64, message: &str, id: &str) {
    let answer = post(world, token, body).await;
    assert_eq!(answer.status, StatusCode::OK, "{message}");
    assert_eq!(answer.body, error(code, message, id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_example_completes_and_a_resent_task_returns_the_committed_entry() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let body = send("tasks/send", json!(1), "read-1", skill("tools.echo"), json!({"path":"hello.ail"}));
    let first = post(&world, &token, body.clone()).await;
    assert_eq!(first.status, StatusCode::OK);
    let parsed: Value = serde_json::from_str(&first.body).unwrap();
    let world_ref = parsed["result"]["metadata"]["world_ref"].as_str().expect("a world ref").to_owned();
    assert!(HashRef::parse(&world_ref).is_ok(), "{world_ref}");
    assert_eq!(
        first.body,
        format!(
            "{{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{{\"artifacts\":[{{\"parts\":[{{\"data\":{{\"echo\":{{\"path\":\"hello.ail\"}}}},\"type\":\"data\"}}]}}],\"id\":\"read-1\",\"metadata\":{{\"entry_index\":1,\"invocation_id\":\"a2a:ep1:read-1\",\"world_ref\":\"{world_ref}\"}},\"status\":{{\"state\":\"completed\"}}}}}}\n"
        )
    );
    assert_eq!(world.log_len(&token).await, 2, "genesis and the call");

    // The same task id and call again: the committed result, nothing new in the log.
    let again = post(&world, &token, body).await;
    assert_eq!(again.body, first.body);
    assert_eq!(world.log_len(&token).await, 2, "the resend added no entry");

    // The same task id for different arguments.
    let different = send("tasks/send", json!(2), "read-1", skill("tools.echo"), json!({"path":"other.ail"}));
    assert_error(&world, &token, different, -32602, "task id already used in this session", "2").await;

    // The alias takes the same request shape; output keys come back sorted.
    let alias = send("message/send", json!("m"), "alias-1", skill("tools.echo"), json!({"z":1,"a":"<&>"}));
    let answer = post(&world, &token, alias).await;
    let parsed: Value = serde_json::from_str(&answer.body).unwrap();
    assert_eq!(parsed["id"], "m");
    assert_eq!(parsed["result"]["metadata"]["entry_index"], 2);
    assert_eq!(parsed["result"]["metadata"]["invocation_id"], "a2a:ep1:alias-1");
    assert!(answer.body.contains(r#""data":{"echo":{"a":"\u003c\u0026\u003e","z":1}}"#), "{}", answer.body);
    assert_eq!(world.log_len(&token).await, 3);
}

/// Every send is one invocation, which the core admits against the registry head current as it
/// runs it: having seen a skill conveys no authority. A skill a new revision hides is refused at
/// once, and an ended session is answered exactly as a session the edge never saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_is_admitted_by_its_invocation_against_the_current_registry() {
    let mut world = World::invoke(Setup::default());
    let grants = ["world.apply=world:1000"];
    let (token, expiry) = world.mint_expiring("ep1", &grants, 8);
    let echo = |n: i64| send("tasks/send", json!(n), &format!("kept-{n}"), skill("tools.echo"), json!({"n":n}));
    for n in 0..3 {
        let answer = post(&world, &token, echo(n)).await;
        assert!(answer.body.contains(r#""status":{"state":"completed"}"#), "{}", answer.body);
    }
    // No send was admitted on its own.
    world.assert_core_calls(0, 3).await;

    // A new revision in which the echo transition needs a scope the session was not granted.
    world.republish_rescoped(&invoke_fixture(), INVOKE_TRANSITIONS, "tools.echo", "elsewhere");

    let stale = post(&world, &token, echo(3)).await;
    let fresh = post(&world, &world.mint("ep2", &grants, 3600), echo(3)).await;
    assert_eq!(stale.body, fresh.body, "a skill the new revision hides");
    assert!(stale.body.contains(r#""error":{"code":"#), "{}", stale.body);
    // The skills of the session's new surface run, in every vocabulary.
    let named = send("message/send", json!(4), "kept-4", skill("tests.named"), json!({"name":"x"}));
    let answer = post(&world, &token, named).await;
    assert!(answer.body.contains(r#""data":{"echo":{"name":"x"}}"#), "{}", answer.body);
    let answer =
        post(&world, &token, send("tasks/send", json!(5), "kept-5", skill("tests.named"), json!({"name":"y"}))).await;
    assert!(answer.body.contains(r#""data":{"echo":{"name":"y"}}"#), "{}", answer.body);

    // The session ends. (A session minted already at its end, which this edge never saw, is the
    // comparison.)
    let expired = world.mint("ep4", &grants, 0);
    expiry.pass().await;
    let named = send("tasks/send", json!(6), "kept-6", skill("tests.named"), json!({"name":"z"}));
    let ended = post(&world, &token, named.clone()).await;
    let never_seen = post(&world, &expired, named).await;
    assert_eq!((ended.status, &ended.body), (never_seen.status, &never_seen.body), "an ended session");
    assert!(ended.body.contains("expired"), "{}", ended.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reachable_error_row_is_the_seed_text() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let echo = skill("tools.echo");

    // -32600: not one JSON-RPC object, or jsonrpc not 2.0 (the id is echoed).
    assert_error(&world, &token, "not json", -32600, "invalid JSON-RPC request", "null").await;
    assert_error(
        &world,
        &token,
        r#"{"jsonrpc":"1.0","id":9,"method":"tasks/send"}"#,
        -32600,
        "invalid JSON-RPC request",
        "9",
    )
    .await;
    // The 1 MiB cap bounds the decoder: a request cut by it is undecodable, while one that
    // fits is decoded whatever follows.
    let cut = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":"{}"}}"#, "x".repeat(1 << 20));
    assert_error(&world, &token, cut, -32600, "invalid JSON-RPC request", "null").await;
    let padded = format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tasks/nope"}}{}"#, " ".repeat(2 << 20));
    assert_error(&world, &token, padded, -32601, "method not found", "3").await;

    assert_error(
        &world,
        &token,
        r#"{"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{}}"#,
        -32601,
        "method not found",
        "4",
    )
    .await;

    // -32602 invalid params: params absent, part shape, data type, pin, task id, schema.
    let invalid = |body: String| assert_error(&world, &token, body, -32602, "invalid params", "5");
    invalid(r#"{"jsonrpc":"2.0","id":5,"method":"tasks/send"}"#.to_owned()).await;
    let two_parts = json!({"jsonrpc":"2.0","id":5,"method":"tasks/send","params":{"id":"p-1","metadata":echo,
        "message":{"role":"user","parts":[{"type":"data","data":{}},{"type":"data","data":{}}]}}});
    invalid(two_parts.to_string()).await;
    let text_part = json!({"jsonrpc":"2.0","id":5,"method":"tasks/send","params":{"id":"p-1","metadata":echo,
        "message":{"role":"user","parts":[{"type":"text","text":"hello"}]}}});
    invalid(text_part.to_string()).await;
    invalid(send("tasks/send", json!(5), "p-1", echo.clone(), json!([1]))).await;
    // A wrongly typed data fails the params decode, before the skill is even looked at.
    invalid(send("tasks/send", json!(5), "p-1", skill("tests.nope"), json!([1]))).await;
    invalid(send(
        "tasks/send",
        json!(5),
        "p-1",
        json!({"skill_id":"tools.echo","transition_fn":"sha256:zz"}),
        json!({}),
    ))
    .await;
    invalid(send("tasks/send", json!(5), "p-1", json!({"skill_id":"tools.echo","transition_fn":7}), json!({}))).await;
    invalid(send("tasks/send", json!(5), "bad id!", echo.clone(), json!({}))).await;
    invalid(send("tasks/send", json!(5), "p-2", skill("tests.named"), json!({}))).await;
    invalid(send("tasks/send", json!(5), "p-3", skill("tests.named"), json!({"name": 7}))).await;

    // -32602 not authorized: unknown, ungranted and absent skills answer alike, whatever the
    // parts look like.
    let denied = |body: String| assert_error(&world, &token, body, -32602, "not authorized", "6");
    denied(send("tasks/send", json!(6), "n-1", skill("tests.nope"), json!({}))).await;
    denied(send("tasks/send", json!(6), "n-1", skill("tests.hidden"), json!({}))).await;
    denied(send("tasks/send", json!(6), "n-1", json!({}), json!({}))).await;
    denied(send("tasks/send", json!(6), "n-1", json!({"skill_id": 1}), json!({}))).await;
    let unauthorized_text_part = json!({"jsonrpc":"2.0","id":6,"method":"tasks/send","params":{"id":"n-1",
        "metadata":{"skill_id":"tests.hidden"},"message":{"role":"user","parts":[{"type":"text","text":"x"}]}}});
    denied(unauthorized_text_part.to_string()).await;

    // -32602 proposal mismatch: a well-formed pin naming another source.
    let other_pin = HashRef::of(b"some other source").to_string();
    assert_error(
        &world,
        &token,
        send("tasks/send", json!(7), "pin-1", json!({"skill_id":"tools.echo","transition_fn":other_pin}), json!({})),
        -32602,
        "proposal does not match the registered transition",
        "7",
    )
    .await;

    // -32603 rows of the run itself.
    let rows = [
        ("tests.nomain", "transition does not implement the invocation calling convention"),
        ("tests.intmain", "transition does not implement the invocation calling convention"),
        ("tests.divide", "transition execution failed"),
        ("tests.array", "transition output is not a JSON object"),
    ];
    for (n, (transition, message)) in rows.into_iter().enumerate() {
        let body = send("tasks/send", json!(8), &format!("run-{n}"), skill(transition), json!({}));
        assert_error(&world, &token, body, -32603, message, "8").await;
    }
    assert_eq!(world.log_len(&token).await, 1, "no refused call committed anything");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_without_genesis_has_no_world() {
    let world = World::invoke(Setup { genesis: false, ..Setup::default() });
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let body = send("tasks/send", json!(1), "w-1", skill("tools.echo"), json!({}));
    assert_error(&world, &token, body, -32603, "no world is selected; commit a genesis world first", "1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_core_without_an_interpreter_is_not_available() {
    let world = World::invoke(Setup { interpreter: false, ..Setup::default() });
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let message = "transition invocation is not available in this daemon";
    let body = send("tasks/send", json!(1), "u-1", skill("tools.echo"), json!({}));
    assert_error(&world, &token, body, -32603, message, "1").await;
    // The service check (step 11) comes before the part checks (step 12).
    let two_parts = json!({"jsonrpc":"2.0","id":2,"method":"tasks/send","params":{"id":"u-2",
        "metadata":{"skill_id":"tools.echo"},"message":{"parts":[{"type":"text","text":"x"}]}}});
    assert_error(&world, &token, two_parts.to_string(), -32603, message, "2").await;
    // Authorization still comes first.
    let hidden = send("tasks/send", json!(3), "u-3", skill("tests.hidden"), json!({}));
    assert_error(&world, &token, hidden, -32602, "not authorized", "3").await;
}

/// Takes about 20 s (the invocation deadline), run beside the other tests rather than after
/// them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_the_deadline_is_refused_and_closes_the_connection() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let started = Instant::now();
    let body = send("tasks/send", json!(1), "slow-1", skill("tests.spin"), json!({"outer": 100000, "middle": 1000}));
    let answer = post(&world, &token, body).await;
    let elapsed = started.elapsed();
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, error(-32603, "invocation exceeded its deadline", "1"));
    assert_eq!(answer.connection.as_deref(), Some("close"));
    assert!(elapsed >= Duration::from_secs(19) && elapsed < Duration::from_secs(26), "{elapsed:?}");
    assert_eq!(world.log_len(&token).await, 1);
}
