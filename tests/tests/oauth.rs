//! OAuth sign-in for MCP clients, end to end: the official MCP Python SDK's OAuth client
//! (`tests/python/oauth_client.py`: discovery from the 401, dynamic registration, PKCE S256)
//! signs in through the approval page in headless Chromium while the operator approves the
//! page's code at a terminal; then every refusal the flow must make, each with its OAuth error
//! and nothing minted, spoken over plain HTTP against a real core and edge.
//!
//! `WORLD_TEST_PYTHON` and `WORLD_TEST_CHROMIUM` must be set: `tests/run.sh` provides both.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use world_model::Credential;
use world_model::oauth::s256_challenge;
use world_tests::otlp::{export_env, grpc_receiver, spans_text};
use world_tests::{Setup, World, bin, http, lines_of, mcp_post, python_script, required_env, run_attended};

const GRANT: &str = "world.apply=world:1000";
const VERIFIER: &str = "a-verifier-of-the-test-that-is-long-enough-for-pkce-0123456789";
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

fn world() -> World {
    World::invoke(Setup::default())
}

/// `world-core session approve CODE` answered `y` at its terminal prompt.
fn approve(world: &World, code: &str) -> world_tests::AttendedRun {
    let mut command = Command::new(bin("world-core"));
    command.args(["session", "approve", code, "--episode", "ep1", "--grant", GRANT, "--ttl", "3600", "--store"]);
    command.arg(&world.store);
    run_attended(command, "y\n")
}

/// The sessions in the store, as `session list --json` shows them.
fn sessions(world: &World) -> Vec<Value> {
    let output = world.core_verb(&["session", "list", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice::<Value>(&output.stdout).expect("a JSON list").as_array().expect("an array").clone()
}

/// The status of `tools/list` on `/mcp/` with `token`.
async fn mcp_status(world: &World, token: &str) -> StatusCode {
    mcp_post(&http(), &world.url("/mcp/"), token).body(TOOLS_LIST).send().await.expect("POST /mcp/").status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_sdk_signs_in_through_the_approval_page_calls_refreshes_and_is_revoked() {
    let chromium = required_env("WORLD_TEST_CHROMIUM", "a Chromium executable (Debian: apt-get install chromium)");
    let (endpoint, spans) = grpc_receiver().await;
    let env = [export_env(&endpoint, "grpc").as_slice(), &[("RUST_LOG", "debug")]].concat();
    let world = World::invoke(Setup { env: &env, ..Setup::default() });
    let mut client = python_script("oauth_client.py")
        .arg(world.url("/mcp/"))
        .arg(&chromium)
        .arg("tools_decho")
        .arg(r#"{"greeting":"hello","n":1}"#)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the OAuth client");
    let stdout = client.stdout.take().expect("piped stdout");
    let received = lines_of(stdout);
    let mut seen: Option<Value> = None;
    let mut terminal = String::new();
    while let Ok(line) = received.recv_timeout(Duration::from_secs(180)) {
        if let Some(code) = line.strip_prefix("approval-code ") {
            // The operator reads the code off the page and approves it.
            let run = approve(&world, code);
            assert!(run.status.success(), "approve: {}\n{}", run.stderr, run.terminal);
            terminal = run.terminal;
        } else {
            seen = Some(serde_json::from_str(&line).expect("the client prints one JSON object"));
        }
    }
    let output = client.wait_with_output().expect("wait for the OAuth client");
    let seen = seen.unwrap_or_else(|| panic!("the OAuth client failed: {}", String::from_utf8_lossy(&output.stderr)));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    assert!(
        terminal.contains("Approve sign-in of World sign-in test (the browser returns to http://127.0.0.1:")
            && terminal.contains("for episode ep1 (1 grant(s), expiry +3600s) with a session credential? [y/N] "),
        "{terminal}"
    );
    assert_eq!(seen["problems"], json!([]));
    assert_eq!(seen["landed"], seen["redirectUri"]);
    assert_eq!(seen["callback"], json!(["code", "iss", "state"]));
    assert_eq!(seen["iss"], json!(world.edge_url));
    assert_eq!(seen["serverName"], "ailang-worldd");
    assert!(seen["tools"].as_array().unwrap().contains(&json!("tools_decho")), "{seen}");
    assert_eq!(seen["structuredContent"], json!({"echo":{"greeting":"hello","n":1}}));
    assert_eq!(seen["afterRefresh"], json!({"echo":{"greeting":"hello","n":1}}));
    let tokens = seen["tokens"].as_array().expect("tokens");
    assert_eq!(tokens.len(), 2, "one exchange and one refresh: {seen}");
    let access: Vec<&str> = tokens.iter().map(|t| t["access"].as_str().unwrap()).collect();
    let refresh: Vec<&str> = tokens.iter().map(|t| t["refresh"].as_str().unwrap()).collect();
    assert_ne!(access[0], access[1]);
    assert_ne!(refresh[0], refresh[1], "refresh tokens rotate");
    for token in &tokens[..] {
        let expires_in = token["expiresIn"].as_i64().unwrap();
        assert!((3500..=3600).contains(&expires_in), "{token}");
        assert_eq!(token["type"], "Bearer");
    }
    // Both access tokens are sessions, approved for the client by name; the first lives on.
    let listed = sessions(&world);
    assert_eq!(listed.len(), 2, "{listed:?}");
    let ids: Vec<String> = access.iter().map(|t| Credential::from_token(t).unwrap().credential_id()).collect();
    for session in &listed {
        assert!(ids.contains(&session["credentialId"].as_str().unwrap().to_owned()));
        assert_eq!(session["episode"], "ep1");
        assert_eq!(session["minted"]["by"], "approval");
        assert_eq!(session["minted"]["clientName"], "World sign-in test");
        assert_eq!(session["minted"]["clientId"], seen["clientId"]);
    }
    let text = world.core_verb(&["session", "list"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("(approved for \"World sign-in test\")"));
    for token in &access {
        assert_eq!(mcp_status(&world, token).await, StatusCode::OK);
    }

    // Revoking either session ends the sign-in: both tokens, and the live refresh token.
    let revoked = world.core_verb(&["session", "revoke", &ids[0]]);
    assert!(revoked.status.success(), "{}", String::from_utf8_lossy(&revoked.stderr));
    let said = String::from_utf8_lossy(&revoked.stdout);
    assert!(ids.iter().all(|id| said.contains(&format!("revoked session credential {id}"))), "{said}");
    for token in &access {
        assert_eq!(mcp_status(&world, token).await, StatusCode::UNAUTHORIZED);
    }
    let client_id = seen["clientId"].as_str().unwrap();
    let (status, body) =
        token(&world, &[("grant_type", "refresh_token"), ("client_id", client_id), ("refresh_token", refresh[1])])
            .await;
    assert_eq!((status, body["error"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid_grant")), "{body}");
    assert!(sessions(&world).is_empty());

    // No code, token or verifier reached a log line or a span.
    let (core_log, edge_log) = world.stop();
    let logs = core_log + &edge_log;
    assert!(logs.contains("DEBUG"), "both processes logged at debug level");
    let spans_text = spans_text(&spans);
    let mut secrets: Vec<&str> = access.iter().chain(refresh.iter()).copied().collect();
    secrets.push(seen["authorizationCode"].as_str().expect("the authorization code"));
    secrets.extend(seen["verifiers"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()));
    for secret in secrets {
        assert!(!logs.contains(secret), "a log line holds a secret ({secret})");
        assert!(!spans_text.contains(secret), "a span holds a secret ({secret})");
    }
}

// ---- the refusals, over plain HTTP ---------------------------------------------------------------

const REDIRECT: &str = "http://127.0.0.1:9/callback";

async fn register(world: &World, redirect_uris: Value) -> (StatusCode, Value) {
    let response = http()
        .post(world.url("/register"))
        .json(&json!({"client_name": "Refusals", "redirect_uris": redirect_uris, "token_endpoint_auth_method": "none"}))
        .send()
        .await
        .expect("POST /register");
    let status = response.status();
    (status, response.json().await.expect("a JSON answer"))
}

async fn client(world: &World) -> String {
    let (status, body) = register(world, json!([REDIRECT])).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["client_id"].as_str().expect("a client id").to_owned()
}

fn authorize_url(world: &World, params: &[(&str, &str)]) -> String {
    let query: Vec<String> =
        params.iter().map(|(k, v)| format!("{k}={}", world_model::oauth::form_encode(v))).collect();
    world.url(&format!("/authorize?{}", query.join("&")))
}

/// A well-formed authorization request of `client_id`, S256 over [`VERIFIER`].
fn s256_request(client_id: &str) -> Vec<(&'static str, String)> {
    vec![
        ("response_type", "code".into()),
        ("client_id", client_id.into()),
        ("redirect_uri", REDIRECT.into()),
        ("state", "st-1".into()),
        ("code_challenge", s256_challenge(VERIFIER)),
        ("code_challenge_method", "S256".into()),
    ]
}

async fn get(url: &str) -> reqwest::Response {
    http().get(url).send().await.expect("GET")
}

/// The page's approval code and the request handle it polls with.
async fn approval_page(world: &World, params: &[(&str, String)]) -> (String, String) {
    let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let response = get(&authorize_url(world, &params)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()["content-security-policy"].to_str().unwrap().starts_with("default-src 'none'"));
    let page = response.text().await.unwrap();
    let between = |start: &str, end: char| {
        let at = page.find(start).unwrap_or_else(|| panic!("{start} in {page}")) + start.len();
        page[at..].split(end).next().unwrap().to_owned()
    };
    (between(r#"id="approval-code">"#, '<'), between("url=/authorize/wait?request=", '"'))
}

/// Where the long-poll sends the browser, as (redirect URI, parameters).
async fn decision(world: &World, request: &str) -> (String, Vec<(String, String)>) {
    let response = get(&world.url(&format!("/authorize/wait?request={request}"))).await;
    assert_eq!(response.status(), StatusCode::FOUND);
    location(&response)
}

fn location(response: &reqwest::Response) -> (String, Vec<(String, String)>) {
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let (base, query) = location.split_once('?').expect("a query");
    let params = query
        .split('&')
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap();
            let decode = |t: &str| String::from_utf8(percent_decode(t)).unwrap();
            (decode(k), decode(v))
        })
        .collect();
    (base.to_owned(), params)
}

fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.replace('+', " ").into_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap(), 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

async fn token(world: &World, form: &[(&str, &str)]) -> (StatusCode, Value) {
    let body: Vec<String> = form.iter().map(|(k, v)| format!("{k}={}", world_model::oauth::form_encode(v))).collect();
    let response = http()
        .post(world.url("/token"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(body.join("&"))
        .send()
        .await
        .expect("POST /token");
    assert_eq!(response.headers()["cache-control"], "no-store");
    let status = response.status();
    (status, response.json().await.expect("a JSON answer"))
}

/// A sign-in approved through to its authorization code.
async fn approved_code(world: &World, client_id: &str) -> String {
    let (code, request) = approval_page(world, &s256_request(client_id)).await;
    let run = approve(world, &code);
    assert!(run.status.success(), "{}", run.stderr);
    let (base, params) = decision(world, &request).await;
    assert_eq!(base, REDIRECT);
    assert_eq!(param(&params, "state"), Some("st-1"));
    assert_eq!(param(&params, "iss"), Some(world.edge_url.as_str()));
    param(&params, "code").expect("a code").to_owned()
}

async fn exchange(world: &World, client_id: &str, code: &str, verifier: &str) -> (StatusCode, Value) {
    token(
        world,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", client_id),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier),
        ],
    )
    .await
}

fn assert_error(answer: &(StatusCode, Value), status: StatusCode, error: &str) {
    assert_eq!((answer.0, answer.1["error"].as_str()), (status, Some(error)), "{}", answer.1);
    assert!(answer.1["error_description"].as_str().is_some_and(|d| !d.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_names_the_flow_and_every_401_from_mcp_points_to_it() {
    let world = world();
    let denied = http()
        .post(world.url("/mcp/"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(INITIALIZE)
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), StatusCode::UNAUTHORIZED);
    let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp/", world.edge_url);
    assert_eq!(denied.headers()["www-authenticate"], format!("Bearer resource_metadata=\"{metadata_url}\""));
    assert_eq!(denied.headers()["content-type"], "text/plain; charset=utf-8");
    assert_eq!(
        denied.text().await.unwrap(),
        "session credential is absent: send Authorization: Bearer <session-credential>\n",
        "the seed's body, unchanged"
    );
    let unknown = mcp_status(&world, &"0".repeat(64)).await;
    assert_eq!(unknown, StatusCode::UNAUTHORIZED);

    let resource: Value = get(&metadata_url).await.json().await.unwrap();
    assert_eq!(resource["resource"], format!("{}/mcp/", world.edge_url));
    assert_eq!(resource["authorization_servers"], json!([world.edge_url]));
    let root: Value = get(&world.url("/.well-known/oauth-protected-resource")).await.json().await.unwrap();
    assert_eq!(root["authorization_servers"], json!([world.edge_url]));
    let server: Value = get(&world.url("/.well-known/oauth-authorization-server")).await.json().await.unwrap();
    assert_eq!(server["issuer"], json!(world.edge_url));
    assert_eq!(server["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(server["token_endpoint_auth_methods_supported"], json!(["none"]));
    assert_eq!(server["grant_types_supported"], json!(["authorization_code", "refresh_token"]));
    assert_eq!(server["registration_endpoint"], format!("{}/register", world.edge_url));

    // The card names the flow beside the bearer.
    let token = world.mint("ep1", &[GRANT], 3600);
    let card: Value = world.get_json(&token, "/.well-known/agent-card.json").await;
    let flow = &card["securitySchemes"]["oauth"]["oauth2SecurityScheme"]["flows"]["authorizationCode"];
    assert_eq!(flow["authorizationUrl"], format!("{}/authorize", world.edge_url));
    assert_eq!(flow["tokenUrl"], format!("{}/token", world.edge_url));
    assert_eq!(card["securitySchemes"]["oauth"]["type"], "oauth2");

    // A session minted at the terminal says so.
    let listed = sessions(&world);
    assert_eq!(listed[0]["minted"], json!({"by": "terminal"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_takes_https_and_loopback_http_redirects_only() {
    let world = world();
    for uris in [
        json!(["http://example.com/callback"]),
        json!(["cursor://anysphere.cursor-retrieval/oauth/callback"]),
        json!(["https://example.com/cb#fragment"]),
        json!([]),
    ] {
        let answer = register(&world, uris.clone()).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_redirect_uri");
    }
    let (status, body) = register(
        &world,
        json!(["http://localhost:33418/", "http://[::1]:1/cb", "https://claude.ai/api/mcp/auth_callback"]),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["token_endpoint_auth_method"], "none");
    assert_eq!(body["client_name"], "Refusals");
    let secret = http()
        .post(world.url("/register"))
        .json(&json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"}))
        .send()
        .await
        .unwrap();
    assert_eq!(secret.status(), StatusCode::BAD_REQUEST);
    assert_eq!(secret.json::<Value>().await.unwrap()["error"], "invalid_client_metadata");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_requests_get_a_page_and_bad_ones_go_back_with_invalid_request() {
    let world = world();
    let client_id = client(&world).await;

    // An unknown client or a redirect URI it did not register: a page, never a redirect.
    let mut unregistered = s256_request(&client_id);
    unregistered[2].1 = "http://127.0.0.1:9/elsewhere".into();
    let mut unknown = s256_request(&client_id);
    unknown[1].1 = "no-such-client".into();
    for params in [unregistered, unknown] {
        let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let response = get(&authorize_url(&world, &params)).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert!(response.headers().get("location").is_none());
        let page = response.text().await.unwrap();
        assert!(page.contains("Sign-in refused") && !page.contains(r#"id="approval-code""#), "{page}");
    }

    // `plain` PKCE, or none at all: back to the client with invalid_request.
    let mut plain = s256_request(&client_id);
    plain[4].1 = VERIFIER.into();
    plain[5].1 = "plain".into();
    let mut missing = s256_request(&client_id);
    missing.truncate(4);
    for params in [plain, missing] {
        let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let response = get(&authorize_url(&world, &params)).await;
        assert_eq!(response.status(), StatusCode::FOUND);
        let (base, params) = location(&response);
        assert_eq!(base, REDIRECT);
        assert_eq!(param(&params, "error"), Some("invalid_request"));
        assert_eq!(param(&params, "state"), Some("st-1"));
        assert_eq!(param(&params, "iss"), Some(world.edge_url.as_str()));
        assert_eq!(param(&params, "code"), None);
    }
    assert!(sessions(&world).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_and_expired_approvals_send_access_denied_and_mint_nothing() {
    let world = world();
    let client_id = client(&world).await;

    let (code, request) = approval_page(&world, &s256_request(&client_id)).await;
    let denied = world.core_verb(&["session", "deny", &code]);
    assert!(denied.status.success(), "{}", String::from_utf8_lossy(&denied.stderr));
    let (base, params) = decision(&world, &request).await;
    assert_eq!(base, REDIRECT);
    assert_eq!(param(&params, "error"), Some("access_denied"));
    assert_eq!(param(&params, "state"), Some("st-1"));
    let late = approve(&world, &code);
    assert_eq!(late.status.code(), Some(1));
    assert!(late.stderr.contains("was already denied"), "{}", late.stderr);

    // Ten minutes pass (the store's clock is moved back instead).
    let (code, request) = approval_page(&world, &s256_request(&client_id)).await;
    expire_pending_approvals(&world.store).await;
    let expired = approve(&world, &code);
    assert_eq!(expired.status.code(), Some(1));
    assert!(expired.stderr.contains("expired; ask the client to sign in again"), "{}", expired.stderr);
    let (_, params) = decision(&world, &request).await;
    assert_eq!(param(&params, "error"), Some("access_denied"));
    assert!(param(&params, "error_description").unwrap().contains("expired"));

    // Approving is attended exactly as minting is.
    let (code, _) = approval_page(&world, &s256_request(&client_id)).await;
    let mut under_ci = Command::new(bin("world-core"));
    under_ci.args(["session", "approve", &code, "--episode", "ep1", "--grant", GRANT, "--store"]).arg(&world.store);
    let output = under_ci.env("CI", "true").output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("session approve is an attended step and CI is set"));
    let mut detached = Command::new(bin("world-core"));
    detached.args(["session", "approve", &code, "--episode", "ep1", "--grant", GRANT, "--store"]).arg(&world.store);
    let output = world_tests::run_without_terminal(detached);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("needs a controlling terminal"));
    let unknown = world.core_verb(&["session", "deny", "ZZZZ-ZZZZ"]);
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no sign-in is waiting with approval code ZZZZ-ZZZZ"));

    assert!(sessions(&world).is_empty());
}

/// A HEAD of the approval page answers its headers and opens no approval; a GET opens one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_of_the_approval_page_opens_nothing() {
    let world = world();
    let client_id = client(&world).await;
    let params = s256_request(&client_id);
    let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let head = http().head(authorize_url(&world, &params)).send().await.unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    assert!(head.headers()["content-security-policy"].to_str().unwrap().starts_with("default-src 'none'"));
    assert_eq!(approvals(&world.store).await, 0);
    approval_page(&world, &s256_request(&client_id)).await;
    assert_eq!(approvals(&world.store).await, 1);
}

async fn store_connection(store: &Path) -> sqlx::AnyConnection {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    sqlx::AnyConnection::connect(&format!("sqlite://{}", store.display())).await.unwrap()
}

async fn approvals(store: &Path) -> i64 {
    use sqlx::Row;
    let mut conn = store_connection(store).await;
    let row = sqlx::query("SELECT COUNT(*) AS n FROM oauth_approvals").fetch_one(&mut conn).await.unwrap();
    row.get::<i64, _>("n")
}

/// Moves every pending approval's deadline into the past, as ten minutes would.
async fn expire_pending_approvals(store: &Path) {
    let mut conn = store_connection(store).await;
    sqlx::query("UPDATE oauth_approvals SET expires_at = created_at - 601 WHERE status = 'pending'")
        .execute(&mut conn)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_is_exchanged_once_with_its_verifier_and_a_reused_one_ends_the_sign_in() {
    let world = world();
    let client_id = client(&world).await;
    let code = approved_code(&world, &client_id).await;

    let wrong = "another-verifier-of-the-test-that-is-long-enough-for-pkce-98765";
    assert_error(&exchange(&world, &client_id, &code, wrong).await, StatusCode::BAD_REQUEST, "invalid_grant");
    let elsewhere = token(
        &world,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client_id),
            ("code", &code),
            ("redirect_uri", "http://127.0.0.1:9/elsewhere"),
            ("code_verifier", VERIFIER),
        ],
    )
    .await;
    assert_error(&elsewhere, StatusCode::BAD_REQUEST, "invalid_grant");
    assert_error(
        &exchange(&world, "no-such-client", &code, VERIFIER).await,
        StatusCode::UNAUTHORIZED,
        "invalid_client",
    );
    assert!(sessions(&world).is_empty(), "a refused exchange minted a session");

    let (status, issued) = exchange(&world, &client_id, &code, VERIFIER).await;
    assert_eq!(status, StatusCode::OK, "{issued}");
    assert_eq!(issued["token_type"], "Bearer");
    let access = issued["access_token"].as_str().unwrap();
    assert_eq!(access.len(), 64);
    assert!((3500..=3600).contains(&issued["expires_in"].as_i64().unwrap()));
    assert_eq!(mcp_status(&world, access).await, StatusCode::OK);

    // The same code again: refused, and the session it minted is ended with it.
    assert_error(&exchange(&world, &client_id, &code, VERIFIER).await, StatusCode::BAD_REQUEST, "invalid_grant");
    assert_eq!(mcp_status(&world, access).await, StatusCode::UNAUTHORIZED);
    let refresh = issued["refresh_token"].as_str().unwrap();
    let answer =
        token(&world, &[("grant_type", "refresh_token"), ("client_id", &client_id), ("refresh_token", refresh)]).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_grant");
    assert!(sessions(&world).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_token_works_once_and_its_second_use_ends_every_session_of_the_sign_in() {
    let world = world();
    let client_id = client(&world).await;
    let code = approved_code(&world, &client_id).await;
    let (_, first) = exchange(&world, &client_id, &code, VERIFIER).await;
    let refresh = first["refresh_token"].as_str().unwrap().to_owned();
    let refresh_form = |token: &str| {
        vec![
            ("grant_type", "refresh_token".to_owned()),
            ("client_id", client_id.clone()),
            ("refresh_token", token.to_owned()),
        ]
    };
    let send = |form: Vec<(&'static str, String)>| {
        let world = &world;
        async move {
            let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
            token(world, &form).await
        }
    };
    let (status, second) = send(refresh_form(&refresh)).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_ne!(second["access_token"], first["access_token"]);
    assert_ne!(second["refresh_token"], first["refresh_token"]);
    assert!(
        second["expires_in"].as_i64().unwrap() <= first["expires_in"].as_i64().unwrap(),
        "never past the approval's"
    );
    for answer in [&first, &second] {
        assert_eq!(mcp_status(&world, answer["access_token"].as_str().unwrap()).await, StatusCode::OK);
    }
    assert_eq!(sessions(&world).len(), 2);

    // The first refresh token again: refused, and every session of the sign-in ends.
    assert_error(&send(refresh_form(&refresh)).await, StatusCode::BAD_REQUEST, "invalid_grant");
    for answer in [&first, &second] {
        assert_eq!(mcp_status(&world, answer["access_token"].as_str().unwrap()).await, StatusCode::UNAUTHORIZED);
    }
    assert_error(
        &send(refresh_form(second["refresh_token"].as_str().unwrap())).await,
        StatusCode::BAD_REQUEST,
        "invalid_grant",
    );
    assert!(sessions(&world).is_empty());
}
