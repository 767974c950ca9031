//! The edge over real HTTP through edge → core: every row of the seed's
//! authentication table on the card, `/mcp/` and `/a2a/`, and the `/v1`
//! routes' documented statuses and messages.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use world_tests::{World, http};

const ABSENT_REST: &str = r#"{"error":{"class":"SessionAbsent","message":"a session credential is required: no Authorization Bearer header was present"}}"#;
// Bodies are encoded as Go's encoding/json does: `<` and `>` travel as \u003c and \u003e.
const MALFORMED_REST: &str = r#"{"error":{"class":"InvalidSession","message":"malformed Authorization header: expected a Bearer \u003c64-hex-credential\u003e"}}"#;
const UNKNOWN_REST: &str =
    r#"{"error":{"class":"SessionUnknown","message":"unknown session credential: no session matches this token"}}"#;
const EXPIRED_REST: &str = r#"{"error":{"class":"SessionExpired","message":"session credential has expired"}}"#;

/// The four kinds of credential a request can carry, given a live token and an expired one.
fn denials(live: &str, expired: &str) -> Vec<(&'static str, Option<String>)> {
    vec![
        ("absent", None),
        ("malformed", Some(format!("Token {live}"))),
        ("unknown", Some(format!("Bearer {}", live.to_uppercase()))),
        ("expired", Some(format!("Bearer {expired}"))),
    ]
}

async fn send(request: reqwest::RequestBuilder, authorization: &Option<String>) -> (StatusCode, String, String) {
    let request = match authorization {
        Some(value) => request.header("Authorization", value),
        None => request,
    };
    let response = request.send().await.expect("request");
    let status = response.status();
    let content_type =
        response.headers().get("content-type").map(|v| v.to_str().unwrap_or("").to_owned()).unwrap_or_default();
    (status, content_type, response.text().await.expect("body"))
}

/// One world and a live session on it, granted the echo skill.
fn world_with_a_session() -> (World, String) {
    let world = World::with_echo();
    let live = world.mint("ep1", &["world.apply=world:10"], 3600);
    (world, live)
}

/// One world, a live and an expired session (minted with ttl 0, then one second passes).
fn world_with_sessions() -> (World, String, String) {
    let (world, live) = world_with_a_session();
    let expired = world.mint("ep2", &["world.apply=world:10"], 0);
    std::thread::sleep(Duration::from_millis(1100));
    (world, live, expired)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_authentication_row_is_answered_as_the_seed_says() {
    let (world, live, expired) = world_with_sessions();
    let client = http();
    for (kind, authorization) in denials(&live, &expired) {
        // The agent card: the REST envelope.
        let (status, content_type, body) = send(client.get(world.url("/.well-known/agent.json")), &authorization).await;
        let (want_status, want_body) = match kind {
            "absent" => (401, ABSENT_REST),
            "malformed" => (400, MALFORMED_REST),
            "unknown" => (401, UNKNOWN_REST),
            _ => (401, EXPIRED_REST),
        };
        assert_eq!(status.as_u16(), want_status, "card {kind}");
        assert!(content_type.starts_with("application/json"), "card {kind}: {content_type}");
        assert_eq!(body, format!("{want_body}\n"), "card {kind}");
        // The explorer's reads answer as every /v1 read does.
        for path in ["/v1/session", "/v1/calls"] {
            let (status, _, body) = send(client.get(world.url(path)), &authorization).await;
            assert_eq!((status.as_u16(), body), (want_status, format!("{want_body}\n")), "{path} {kind}");
        }

        // MCP: 401 text/plain with the seed's message, before anything about the transport.
        let request = client.post(world.url("/mcp/")).header("Content-Type", "text/html").body("not json");
        let (status, content_type, body) = send(request, &authorization).await;
        let message = match kind {
            "absent" => "session credential is absent: send Authorization: Bearer <session-credential>",
            "malformed" => "malformed Authorization header: expected Bearer <64-hex-credential>",
            "unknown" => "unknown session credential",
            _ => "session credential has expired",
        };
        assert_eq!(status, StatusCode::UNAUTHORIZED, "mcp {kind}");
        assert_eq!(content_type, "text/plain; charset=utf-8", "mcp {kind}");
        assert_eq!(body, format!("{message}\n"), "mcp {kind}");

        // A2A: HTTP 200 with a JSON-RPC error; -32600 only for a malformed header.
        let request = client.post(world.url("/a2a/")).body("not even json");
        let (status, _, body) = send(request, &authorization).await;
        let code = if kind == "malformed" { -32600 } else { -32001 };
        assert_eq!(status, StatusCode::OK, "a2a {kind}");
        let encoded = message.replace('<', "\\u003c").replace('>', "\\u003e");
        assert_eq!(
            body,
            format!("{{\"error\":{{\"code\":{code},\"message\":\"{encoded}\"}},\"id\":null,\"jsonrpc\":\"2.0\"}}\n"),
            "a2a {kind}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_lists_exactly_the_skills_the_session_can_see() {
    let (world, granted) = world_with_a_session();
    let ungranted = world.mint("ep1", &["world.apply=elsewhere:10"], 3600);
    let client = http();
    // The seed's card at agent.json; A2A 1.0's (with 0.3's url) at agent-card.json, whose
    // skills add tags and drop the seed's empty examples.
    let description = "quickstart transition: returns its arguments under \"echo\"";
    let cards = [
        (
            "/.well-known/agent.json",
            serde_json::json!([{"description":description,"examples":[],"id":"tools.echo","name":"Echo","tags":[]}]),
            world.edge_url.clone(),
        ),
        (
            "/.well-known/agent-card.json",
            serde_json::json!([{"description":description,"id":"tools.echo","name":"Echo","tags":["transition","pure"]}]),
            format!("{}/a2a/", world.edge_url),
        ),
    ];
    for (path, skills, url) in cards {
        let (status, _, body) = send(client.get(world.url(path)), &Some(format!("Bearer {granted}"))).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        let card: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(card["skills"], skills, "{path}");
        assert_eq!(card["url"], url.as_str(), "{path}");
        assert_eq!(card["capabilities"]["streaming"], false);
        let (_, _, body) = send(client.get(world.url(path)), &Some(format!("Bearer {ungranted}"))).await;
        let card: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(card["skills"], serde_json::json!([]), "an ungranted session sees no skill on {path}");
    }
}

/// Revocation takes effect on the next request, calls included: the edge keeps a session's
/// surface to send its calls without a separate admission, and the core, admitting them as it
/// runs them, still answers a revoked session with the seed's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_session_is_unknown_on_the_next_request() {
    let (world, token) = world_with_a_session();
    let authorization = Some(format!("Bearer {token}"));
    let client = http();
    let mcp_call = || {
        client
            .post(world.url("/mcp/"))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"tools_decho","arguments":{}}}"#)
    };
    let a2a_send = |task: &str| {
        client.post(world.url("/a2a/")).body(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{{"id":"{task}","metadata":{{"skill_id":"tools.echo"}},"message":{{"role":"user","parts":[{{"type":"data","data":{{}}}}]}}}}}}"#
        ))
    };
    let (status, _, _) = send(client.get(world.url("/.well-known/agent.json")), &authorization).await;
    assert_eq!(status, StatusCode::OK);
    // Two of each call, so the second goes out on the kept surface.
    for task in ["t1", "t2"] {
        let (status, _, body) = send(mcp_call(), &authorization).await;
        assert!(status == StatusCode::OK && body.contains("structuredContent"), "{body}");
        let (_, _, body) = send(a2a_send(task), &authorization).await;
        assert!(body.contains(r#""state":"completed""#), "{body}");
    }
    let id = world_model::Credential::from_token(&token).unwrap().credential_id();
    let revoked = world.core_verb(&["session", "revoke", &id]);
    assert!(revoked.status.success(), "{}", String::from_utf8_lossy(&revoked.stderr));
    let (status, _, body) = send(client.get(world.url("/.well-known/agent.json")), &authorization).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body, format!("{UNKNOWN_REST}\n"));
    let (status, content_type, body) = send(mcp_call(), &authorization).await;
    assert_eq!(
        (status, content_type.as_str(), body.as_str()),
        (StatusCode::UNAUTHORIZED, "text/plain; charset=utf-8", "unknown session credential\n")
    );
    let (status, _, body) = send(a2a_send("t3"), &authorization).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        "{\"error\":{\"code\":-32001,\"message\":\"unknown session credential\"},\"id\":null,\"jsonrpc\":\"2.0\"}\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_routes_answer_with_their_documented_statuses_and_messages() {
    let (world, token) = world_with_a_session();
    let auth = Some(format!("Bearer {token}"));
    let client = http();
    let get = |path: &str| client.get(world.url(path));

    // Health is open; every other read needs a session.
    let (status, _, body) = send(get("/v1/health"), &None).await;
    assert_eq!(status, StatusCode::OK);
    let health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "ok");
    assert!(health["interpreter_ref"].as_str().unwrap().starts_with("sha256:"));
    assert!(health["interpreter_version"].as_str().unwrap().starts_with("ailang-rs 0.1.0"));
    assert!(body.find("\"status\"").unwrap() < body.find("\"daemon_version\"").unwrap(), "struct order");
    let (status, _, body) = send(get("/v1/head"), &None).await;
    assert_eq!((status, body), (StatusCode::UNAUTHORIZED, format!("{ABSENT_REST}\n")));

    let (status, content_type, head) = send(get("/v1/head"), &auth).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "text/plain; charset=utf-8");
    assert!(head.starts_with("sha256:") && head.len() == 71, "no trailing newline: {head:?}");

    let (status, _, body) = send(get(&format!("/v1/worlds/{head}")), &auth).await;
    assert_eq!(status, StatusCode::OK);
    let world_row: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(world_row["revision"], 0);

    let cases: &[(&str, u16, &str)] = &[
        (
            "/v1/worlds/nope",
            400,
            r#"{"error":{"class":"BadRequest","message":"world ref: hashref: missing algorithm tag (expected algo:digest): \"nope\""}}"#,
        ),
        (
            "/v1/worlds/sha256:ABC",
            400,
            r#"{"error":{"class":"BadRequest","message":"world ref: hashref: digest is not lowercase hexadecimal: \"ABC\""}}"#,
        ),
        (
            "/v1/objects/by-semantic-id",
            400,
            r#"{"error":{"class":"BadRequest","message":"object ref: hashref: missing algorithm tag (expected algo:digest): \"by-semantic-id\""}}"#,
        ),
        (
            "/v1/worlds/sha256:0000000000000000000000000000000000000000000000000000000000000000",
            404,
            r#"{"error":{"class":"NotFound","message":"world not found"}}"#,
        ),
        (
            "/v1/objects/sha256:0000000000000000000000000000000000000000000000000000000000000000",
            404,
            r#"{"error":{"class":"NotFound","message":"object not found"}}"#,
        ),
        ("/v1/log/-1", 400, r#"{"error":{"class":"BadRequest","message":"log index must be a non-negative integer"}}"#),
        ("/v1/log/x", 400, r#"{"error":{"class":"BadRequest","message":"log index must be a non-negative integer"}}"#),
        ("/v1/log/7", 404, r#"{"error":{"class":"NotFound","message":"log entry not found"}}"#),
        ("/v1/log?from=-1", 400, r#"{"error":{"class":"BadRequest","message":"from must be a non-negative integer"}}"#),
        ("/v1/log?limit=x", 400, r#"{"error":{"class":"BadRequest","message":"limit must be an integer"}}"#),
        ("/v1/registry/", 400, r#"{"error":{"class":"BadRequest","message":"registry name is empty"}}"#),
        ("/v1/registry/world/nothing/v1", 404, r#"{"error":{"class":"NotFound","message":"registry head not found"}}"#),
        (
            "/v1/receipts/a2a:x",
            400,
            r#"{"error":{"class":"BadRequest","message":"receipt id must be rest:\u003cid\u003e"}}"#,
        ),
        ("/v1/receipts/rest:nope", 200, r#"{"invocationId":"rest:nope","state":"not-started"}"#),
        ("/v1/objects/by-semantic-id/no/such/id", 200, r#"{"items":[]}"#),
    ];
    for (path, status, body) in cases {
        let (got_status, _, got_body) = send(get(path), &auth).await;
        assert_eq!((got_status.as_u16(), got_body.as_str()), (*status, format!("{body}\n").as_str()), "{path}");
    }

    let (status, _, body) = send(get("/v1/log?from=0&limit=%2B5"), &auth).await;
    assert_eq!(status, StatusCode::OK);
    let page: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["items"][0]["header"]["writtenBy"], "genesis");

    let (status, _, body) = send(get("/v1/registry/world/transition-registry/v1"), &auth).await;
    assert_eq!(status, StatusCode::OK);
    let registry: serde_json::Value = serde_json::from_str(&body).unwrap();
    let registry_head = registry["head"].as_str().unwrap().to_owned();
    let (status, _, body) = send(get(&format!("/v1/objects/{registry_head}?payload=true")), &auth).await;
    assert_eq!(status, StatusCode::OK);
    let object: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(object["semanticId"], "world/transition-registry/v1");
    assert!(object["payload"].is_string());
    let (_, _, body) = send(get(&format!("/v1/objects/{registry_head}?payload=TRUE")), &auth).await;
    assert!(!body.contains("\"payload\""), "payload only for exactly true");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_answers_like_go_serve_mux() {
    let world = World::start();
    let client = http();
    // (method, path, status, a header it must carry, its body where the seed pins it)
    let rows = [
        (Method::GET, "/mcp/", StatusCode::METHOD_NOT_ALLOWED, Some(("allow", "POST")), Some("Method Not Allowed\n")),
        (
            Method::POST,
            "/v1/objects/by-semantic-id/x",
            StatusCode::METHOD_NOT_ALLOWED,
            Some(("allow", "GET, HEAD")),
            None,
        ),
        (Method::GET, "/nowhere", StatusCode::NOT_FOUND, None, Some("404 page not found\n")),
        (Method::POST, "/mcp?x=1", StatusCode::MOVED_PERMANENTLY, Some(("location", "/mcp/?x=1")), None),
        (Method::GET, "/v1/registry", StatusCode::MOVED_PERMANENTLY, Some(("location", "/v1/registry/")), None),
    ];
    for (method, path, status, header, body) in rows {
        let response = client.request(method.clone(), world.url(path)).send().await.unwrap();
        assert_eq!(response.status(), status, "{method} {path}");
        if let Some((name, value)) = header {
            assert_eq!(response.headers()[name], value, "{method} {path}");
        }
        if let Some(body) = body {
            assert_eq!(response.text().await.unwrap(), body, "{method} {path}");
        }
    }

    // Oversized commit bodies are refused after the session check.
    let token = world.mint("ep1", &["world.apply=world:10"], 3600);
    let response = client
        .post(world.url("/v1/commit"))
        .header("Authorization", format!("Bearer {token}"))
        .body(vec![b' '; 8 * 1024 * 1024 + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        response.text().await.unwrap(),
        "{\"error\":{\"class\":\"PayloadTooLarge\",\"message\":\"commit body exceeds 8388608 bytes\"}}\n"
    );
    let (status, _, body) = send(client.post(world.url("/v1/commit")).body("{}"), &None).await;
    assert_eq!((status, body), (StatusCode::UNAUTHORIZED, format!("{ABSENT_REST}\n")));

    // /metrics is Prometheus text that counts the traffic above.
    let metrics = client.get(world.url("/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("# TYPE"), "{metrics}");
}

/// Sends one request on `stream` whose body follows its head a moment later (so it is not yet
/// buffered when the edge answers), and reads the answer: its head and body.
fn exchange(stream: &mut std::net::TcpStream, head: &str, body: &str) -> (String, String) {
    use std::io::{BufRead, BufReader, Read, Write};
    stream.write_all(head.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    stream.write_all(body.as_bytes()).expect("the edge is still reading the body");
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut answer_head = String::new();
    loop {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the edge closed the connection: {answer_head:?}");
        answer_head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let length = answer_head
        .lines()
        .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned))
        .expect("a content-length")
        .parse::<usize>()
        .unwrap();
    let mut answer_body = vec![0; length];
    reader.read_exact(&mut answer_body).unwrap();
    assert!(reader.buffer().is_empty(), "nothing beyond the answer");
    (answer_head, String::from_utf8(answer_body).unwrap())
}

/// An answer sent before the request's body was read (a 401, a 403 `Origin`, an A2A refusal)
/// leaves the client its connection: the edge reads the rest of the body first, so the next
/// request on the same connection is served.
#[test]
fn an_early_answer_keeps_the_connection_for_the_next_request() {
    let world = World::start();
    let token = world.mint("ep1", &["world.apply=world:10"], 3600);
    let mut stream = std::net::TcpStream::connect(world.edge_url.trim_start_matches("http://")).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let post = |path: &str, extra: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\n\r\n",
            body.len()
        )
    };
    let origin = format!("Authorization: Bearer {token}\r\nOrigin: http://evil.example\r\n");
    for (path, extra, status) in [("/mcp/", origin.as_str(), "403"), ("/mcp/", "", "401"), ("/a2a/", "", "200")] {
        let (head, answer) = exchange(&mut stream, &post(path, extra), body);
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{path}: {head}{answer}");
        assert!(!head.to_ascii_lowercase().contains("connection: close"), "{path}: {head}");
    }
    let (head, answer) = exchange(&mut stream, "GET /v1/health HTTP/1.1\r\nHost: edge\r\n\r\n", "");
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}{answer}");
}
