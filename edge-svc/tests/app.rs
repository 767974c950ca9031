//! The whole edge in process (its axum app, driven with `oneshot`) against a small scripted
//! core: a real tonic server on a loopback port that answers by credential, so what is pinned
//! here is the edge's translation, not the core's rules.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use proptest::prelude::*;
use tonic::{Response, Status};
use tower::ServiceExt;
use world_edge::mcp::OriginPolicy;
use world_edge::{AppState, CoreClient, app};
use world_proto::v1 as pb;
use world_proto::v1::admission_server::{Admission, AdmissionServer};
use world_proto::v1::store_server::{Store, StoreServer};

const GOOD: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const EXPIRED: &str = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100";
const HEAD: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

#[derive(Clone, Default)]
struct FakeCore {
    /// Every `authorization` value received, in order.
    seen: Arc<Mutex<Vec<Option<String>>>>,
}

type Reply<T> = Result<Response<T>, Status>;

impl FakeCore {
    /// The core's session decision for this fake: one good and one expired credential.
    fn session<T>(&self, request: &tonic::Request<T>) -> Result<(), pb::Failure> {
        let value = request.metadata().get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
        self.seen.lock().unwrap().push(value.clone());
        let token = value.as_deref().and_then(|v| v.split([' ', '\t']).rfind(|s| !s.is_empty()));
        let code = match token {
            Some(GOOD) => return Ok(()),
            Some(EXPIRED) => "session_expired",
            None => "session_absent",
            Some(_) => "session_unknown",
        };
        Err(pb::Failure { code: code.into(), message: "from the core".into(), ..Default::default() })
    }
}

#[tonic::async_trait]
impl Admission for FakeCore {
    async fn admit(&self, request: tonic::Request<pb::AdmitRequest>) -> Reply<pb::AdmitReply> {
        use pb::admit_reply::Outcome;
        let outcome = match self.session(&request) {
            Err(failure) => Outcome::Failure(failure),
            Ok(()) => Outcome::Admitted(pb::Admitted {
                episode: "ep1".into(),
                expires_at: 4_000_000_000,
                surface: vec![pb::Descriptor {
                    id: "tools.echo".into(),
                    title: "Echo".into(),
                    description: "Echoes its input".into(),
                    ..Default::default()
                }],
                registry_head: HEAD.into(),
                // An edge that is sent no digest keeps nothing: every request carries its surface.
                surface_digest: String::new(),
            }),
        };
        Ok(Response::new(pb::AdmitReply { outcome: Some(outcome) }))
    }
}

#[tonic::async_trait]
impl Store for FakeCore {
    async fn health(&self, _: tonic::Request<pb::HealthRequest>) -> Reply<pb::HealthReply> {
        Ok(Response::new(pb::HealthReply {
            status: "ok".into(),
            daemon_version: "0.1.0".into(),
            store: "/tmp/fake.db".into(),
            ..Default::default()
        }))
    }
    async fn head(&self, request: tonic::Request<pb::HeadRequest>) -> Reply<pb::HeadReply> {
        use pb::head_reply::Outcome;
        let outcome = match self.session(&request) {
            Err(failure) => Outcome::Failure(failure),
            Ok(()) => Outcome::Head(HEAD.into()),
        };
        Ok(Response::new(pb::HeadReply { outcome: Some(outcome) }))
    }
    async fn get_world(&self, request: tonic::Request<pb::GetWorldRequest>) -> Reply<pb::GetWorldReply> {
        use pb::get_world_reply::Outcome;
        let outcome = match self.session(&request) {
            Err(failure) => Outcome::Failure(failure),
            Ok(()) => Outcome::Failure(pb::Failure {
                code: "not_found".into(),
                message: "world not found".into(),
                ..Default::default()
            }),
        };
        Ok(Response::new(pb::GetWorldReply { outcome: Some(outcome) }))
    }
    async fn get_object(&self, _: tonic::Request<pb::GetObjectRequest>) -> Reply<pb::GetObjectReply> {
        Err(Status::internal("not scripted"))
    }
    async fn objects_by_semantic_id(
        &self,
        _: tonic::Request<pb::ObjectsBySemanticIdRequest>,
    ) -> Reply<pb::ObjectsBySemanticIdReply> {
        Err(Status::internal("not scripted"))
    }
    async fn get_log_entry(&self, _: tonic::Request<pb::GetLogEntryRequest>) -> Reply<pb::GetLogEntryReply> {
        Err(Status::internal("not scripted"))
    }
    async fn object_entry(&self, _: tonic::Request<pb::ObjectEntryRequest>) -> Reply<pb::ObjectEntryReply> {
        Err(Status::internal("not scripted"))
    }
    async fn log_page(&self, request: tonic::Request<pb::LogPageRequest>) -> Reply<pb::LogPageReply> {
        use pb::log_page_reply::Outcome;
        let outcome = match self.session(&request) {
            Err(failure) => Outcome::Failure(failure),
            // Echo the paging the edge computed, so the test can see it.
            Ok(()) => Outcome::Page(pb::EntryPage {
                items: vec![pb::LogEntry {
                    entry_index: request.get_ref().from,
                    semantics_epoch: i64::from(request.get_ref().limit),
                    ..Default::default()
                }],
            }),
        };
        Ok(Response::new(pb::LogPageReply { outcome: Some(outcome) }))
    }
    async fn registry_head(&self, _: tonic::Request<pb::RegistryHeadRequest>) -> Reply<pb::RegistryHeadReply> {
        Err(Status::internal("not scripted"))
    }
    async fn receipt(&self, _: tonic::Request<pb::ReceiptRequest>) -> Reply<pb::ReceiptReply> {
        Err(Status::internal("not scripted"))
    }
    async fn session(&self, _: tonic::Request<pb::SessionRequest>) -> Reply<pb::SessionReply> {
        Err(Status::internal("not scripted"))
    }
    async fn calls(&self, _: tonic::Request<pb::CallsRequest>) -> Reply<pb::CallsReply> {
        Err(Status::internal("not scripted"))
    }
    async fn commit(&self, request: tonic::Request<pb::CommitRequest>) -> Reply<pb::CommitReply> {
        use pb::commit_reply::Outcome;
        let outcome = match self.session(&request) {
            Err(failure) => Outcome::Failure(failure),
            Ok(()) => Outcome::SelectedHead(
                request.get_ref().next_world.as_ref().map(|w| w.r#ref.clone()).unwrap_or_default(),
            ),
        };
        Ok(Response::new(pb::CommitReply { outcome: Some(outcome) }))
    }
}

async fn start_fake() -> (FakeCore, String) {
    let fake = FakeCore::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let served = fake.clone();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(StoreServer::new(served.clone()))
            .add_service(AdmissionServer::new(served))
            .serve_with_incoming(tokio_stream_listener(listener))
            .await
            .unwrap();
    });
    (fake, format!("http://{address}"))
}

fn tokio_stream_listener(
    listener: tokio::net::TcpListener,
) -> impl futures::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| stream);
        Some((accepted, listener))
    })
}

fn state(url: &str) -> AppState {
    AppState::new(CoreClient::connect_lazy(&[url]).unwrap(), OriginPolicy::default())
}

struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: String,
}

async fn call(state: &AppState, request: Request<Body>) -> Answer {
    let response = app(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
}

fn request(method: &str, uri: &str, authorization: Option<&str>, body: &str) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(uri).header("host", "edge.test:7644");
    if let Some(value) = authorization {
        builder = builder.header("authorization", value);
    }
    builder.body(Body::from(body.to_owned())).unwrap()
}

#[tokio::test]
async fn card_lists_the_admitted_surface_and_forwards_the_header_verbatim() {
    let (fake, url) = start_fake().await;
    let state = state(&url);
    let authorization = format!("Bearer\t{GOOD}");
    let answer = call(&state, request("GET", "/.well-known/agent.json", Some(&authorization), "")).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert!(answer.body.contains(
        r#""skills":[{"description":"Echoes its input","examples":[],"id":"tools.echo","name":"Echo","tags":[]}],"url":"http://edge.test:7644""#
    ));
    assert_eq!(fake.seen.lock().unwrap().last().cloned(), Some(Some(authorization)));
}

#[tokio::test]
async fn every_denial_row_on_every_gated_surface() {
    let (fake, url) = start_fake().await;
    let state = state(&url);
    let unknown = format!("Bearer {}", "ab".repeat(32));
    let expired = format!("Bearer {EXPIRED}");
    // (authorization, card status + class, MCP body, A2A code + message)
    let rows: [(Option<&str>, u16, &str, &str, &str); 4] = [
        (
            None,
            401,
            "SessionAbsent",
            "session credential is absent: send Authorization: Bearer <session-credential>",
            r#"{"code":-32001,"message":"session credential is absent: send Authorization: Bearer \u003csession-credential\u003e"}"#,
        ),
        (
            Some("Bearer short"),
            400,
            "InvalidSession",
            "malformed Authorization header: expected Bearer <64-hex-credential>",
            r#"{"code":-32600,"message":"malformed Authorization header: expected Bearer \u003c64-hex-credential\u003e"}"#,
        ),
        (
            Some(&unknown),
            401,
            "SessionUnknown",
            "unknown session credential",
            r#"{"code":-32001,"message":"unknown session credential"}"#,
        ),
        (
            Some(&expired),
            401,
            "SessionExpired",
            "session credential has expired",
            r#"{"code":-32001,"message":"session credential has expired"}"#,
        ),
    ];
    for (authorization, status, class, mcp, a2a) in rows {
        for path in ["/.well-known/agent.json", "/.well-known/agent-card.json", "/v1/head"] {
            let answer = call(&state, request("GET", path, authorization, "")).await;
            assert_eq!(answer.status.as_u16(), status, "{path} {authorization:?}");
            assert!(answer.body.starts_with(&format!("{{\"error\":{{\"class\":\"{class}\"")), "{}", answer.body);
        }
        let answer = call(&state, request("POST", "/mcp/", authorization, "{}")).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
        assert_eq!(answer.headers["content-type"], "text/plain; charset=utf-8");
        assert_eq!(answer.headers["x-content-type-options"], "nosniff");
        assert_eq!(answer.body, format!("{mcp}\n"));
        let answer = call(&state, request("POST", "/a2a/", authorization, "{}")).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.body, format!("{{\"error\":{a2a},\"id\":null,\"jsonrpc\":\"2.0\"}}\n"));
    }
    // Absent and malformed never reached the core.
    let seen = fake.seen.lock().unwrap();
    assert!(seen.iter().all(|value| value.as_deref().is_some_and(|v| v.len() > 60)));
}

#[tokio::test]
async fn rest_reads_validate_before_calling_the_core() {
    let (fake, url) = start_fake().await;
    let state = state(&url);
    let good = format!("Bearer {GOOD}");
    let answer = call(&state, request("GET", "/v1/worlds/nope", Some(&good), "")).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.body,
        "{\"error\":{\"class\":\"BadRequest\",\"message\":\"world ref: hashref: missing algorithm tag (expected algo:digest): \\\"nope\\\"\"}}\n"
    );
    assert!(fake.seen.lock().unwrap().is_empty());
    let answer = call(&state, request("GET", &format!("/v1/worlds/{HEAD}"), Some(&good), "")).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(answer.body, "{\"error\":{\"class\":\"NotFound\",\"message\":\"world not found\"}}\n");
    let answer = call(&state, request("GET", "/v1/log?from=%2B3&limit=9000&from=1", Some(&good), "")).await;
    assert!(answer.body.contains("\"entryIndex\":3,\"semanticsEpoch\":500,"), "{}", answer.body);
    let answer = call(&state, request("GET", "/v1/head", Some(&good), "")).await;
    assert_eq!((answer.status, answer.body.as_str()), (StatusCode::OK, HEAD));
    let answer = call(&state, request("HEAD", "/v1/head", Some(&good), "")).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, "");
    assert_eq!(answer.headers["content-length"], HEAD.len().to_string());
    let answer = call(&state, request("GET", "/v1/health", None, "")).await;
    assert_eq!(
        answer.body,
        "{\"status\":\"ok\",\"daemon_version\":\"0.1.0\",\"db_path\":\"/tmp/fake.db\",\"interpreter_ref\":\"\",\"interpreter_version\":\"\"}\n"
    );
}

#[tokio::test]
async fn commit_checks_the_session_before_the_body() {
    let (_fake, url) = start_fake().await;
    let state = state(&url);
    let unknown = format!("Bearer {}", "ab".repeat(32));
    let oversized = "x".repeat(8_388_609);
    let answer = call(&state, request("POST", "/v1/commit", Some(&unknown), &oversized)).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    let good = format!("Bearer {GOOD}");
    let answer = call(&state, request("POST", "/v1/commit", Some(&good), &oversized)).await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        answer.body,
        "{\"error\":{\"class\":\"PayloadTooLarge\",\"message\":\"commit body exceeds 8388608 bytes\"}}\n"
    );
    let answer = call(&state, request("POST", "/v1/commit", Some(&good), "{\"observedHead\":\"x\"}")).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.body.contains("observedHead: hashref: missing algorithm tag"));
}

#[tokio::test]
async fn an_unreachable_core_is_a_503_not_a_hang() {
    // Port 9 (discard) on loopback refuses connections on a normal test machine.
    let state = state("http://127.0.0.1:9");
    let good = format!("Bearer {GOOD}");
    let answer = call(&state, request("GET", "/v1/head", Some(&good), "")).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        answer.body,
        "{\"error\":{\"class\":\"Unavailable\",\"message\":\"world-core is unreachable; retry the request\"}}\n"
    );
    let answer = call(&state, request("GET", "/.well-known/agent.json", Some(&good), "")).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    let answer = call(&state, request("POST", "/mcp/", Some(&good), "{}")).await;
    assert_eq!(
        answer.body,
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"host callback failed\"}}\n"
    );
    let metrics = call(&state, request("GET", "/metrics", None, "")).await;
    assert!(metrics.body.contains("world_edge_http_requests_total{route=\"GET /v1/head\",status=\"503\"} 1"));
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        // Integration tests have no lib.rs beside them for the regression file.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any method, path, query and body through the whole app: an answer, never a panic, and
    /// never a 5xx other than the 503 of the unreachable core.
    #[test]
    fn no_route_panics(
        method in prop_oneof![Just("GET"), Just("HEAD"), Just("POST"), Just("PUT"), Just("DELETE")],
        path in prop_oneof![
            Just("/v1/commit".to_owned()), Just("/mcp/".to_owned()), Just("/a2a/".to_owned()),
            "(/(v1|objects|by-semantic-id|log|worlds|registry|receipts|mcp|a2a|\\.well-known|agent\\.json|[a-z0-9%:.+-]{0,6})){0,5}/?",
        ],
        query in "[a-z0-9=&%+;-]{0,24}",
        authorized in any::<bool>(),
        body in "[ -~]{0,64}",
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // A lazy channel spawns its connection task, so it is made inside the runtime.
        let state = runtime.block_on(async { state("http://127.0.0.1:9") });
        let uri = if query.is_empty() { path.clone() } else { format!("{path}?{query}") };
        let Ok(parsed) = uri.parse::<http::Uri>() else { return Ok(()) };
        let authorization = authorized.then(|| format!("Bearer {GOOD}"));
        let mut builder = Request::builder().method(method).uri(parsed);
        if let Some(value) = &authorization {
            builder = builder.header("authorization", value);
        }
        let answer = runtime.block_on(call(&state, builder.body(Body::from(body)).unwrap()));
        prop_assert!(answer.status.as_u16() < 500 || answer.status == StatusCode::SERVICE_UNAVAILABLE,
            "{} {} -> {}", method, uri, answer.status);
    }
}
