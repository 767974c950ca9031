//! The whole edge in process (its axum app, driven with `oneshot`) against a small scripted
//! core: a real tonic server on a loopback port that answers by credential, so what is pinned
//! here is the edge's translation, not the core's rules. Its invocations are scripted by their
//! arguments (`{"fail": code}`, `{"output": text}`, anything else echoed), so bodies fuzzed at
//! `/mcp/` and `/a2a/` reach every wire rendering.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use proptest::prelude::*;
use tonic::{Response, Status};
use tower::ServiceExt;
use world_edge::origin::OriginPolicy;
use world_edge::{AppState, CoreClient, app};
use world_proto::v1 as pb;
use world_proto::v1::admission_server::{Admission, AdmissionServer};
use world_proto::v1::invocation_server::{Invocation, InvocationServer};
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

    /// The reply to a call the core admits by its credential: the session's failure, else
    /// `result`.
    fn answer<T, R>(&self, request: &tonic::Request<T>, result: Result<R::Value, pb::Failure>) -> Reply<R>
    where
        R: world_proto::Outcome<Error = pb::Failure>,
    {
        Ok(Response::new(R::from_result(self.session(request).and(result))))
    }
}

#[tonic::async_trait]
impl Admission for FakeCore {
    async fn admit(&self, request: tonic::Request<pb::AdmitRequest>) -> Reply<pb::AdmitReply> {
        let admitted = pb::Admitted {
            episode: "ep1".into(),
            expires_at: 4_000_000_000,
            surface: vec![pb::Descriptor {
                id: "tools.echo".into(),
                title: "Echo".into(),
                description: "Echoes its input".into(),
                input_schema: br#"{"type":"object"}"#.to_vec(),
                ..Default::default()
            }],
            registry_head: HEAD.into(),
            // An edge that is sent no digest keeps nothing: every request carries its surface.
            surface_digest: String::new(),
        };
        self.answer(&request, Ok(admitted))
    }
}

/// `{"fail": code}` answers that failure, `{"output": text}` commits `text` as the output
/// verbatim (JSON or not), anything else commits `{"echo": arguments}`.
fn scripted_outcome(arguments: &[u8], task_id: &str) -> pb::invoke_reply::Outcome {
    use pb::invoke_reply::Outcome;
    let value: serde_json::Value = serde_json::from_slice(arguments).unwrap_or_default();
    if let Some(code) = value.get("fail").and_then(|c| c.as_str()) {
        return Outcome::Failure(pb::Failure {
            code: code.into(),
            message: "scripted".into(),
            effect_records: vec![HEAD.into()],
            ..Default::default()
        });
    }
    let output = match value.get("output").and_then(|o| o.as_str()) {
        Some(text) => text.as_bytes().to_vec(),
        None => [&b"{\"echo\":"[..], arguments, b"}"].concat(),
    };
    Outcome::Invoked(pb::Invoked {
        output,
        invocation_id: format!("a2a:ep1:{task_id}"),
        world_ref: HEAD.into(),
        entry_index: 3,
        task_id: task_id.into(),
        reconciled: false,
        episode: "ep1".into(),
    })
}

#[tonic::async_trait]
impl Invocation for FakeCore {
    async fn invoke(&self, request: tonic::Request<pb::InvokeRequest>) -> Reply<pb::InvokeReply> {
        let outcome = match self.session(&request) {
            Err(failure) => pb::invoke_reply::Outcome::Failure(failure),
            Ok(()) => scripted_outcome(&request.get_ref().arguments, &request.get_ref().task_id),
        };
        Ok(Response::new(pb::InvokeReply { outcome: Some(outcome) }))
    }

    /// Task ids starting `done` committed `{"done": true}`; any other was never started.
    async fn committed_task(&self, request: tonic::Request<pb::CommittedTaskRequest>) -> Reply<pb::InvokeReply> {
        use pb::invoke_reply::Outcome;
        let task_id = request.get_ref().task_id.clone();
        let outcome = match self.session(&request) {
            Err(failure) => Outcome::Failure(failure),
            Ok(()) if task_id.starts_with("done") => scripted_outcome(br#"{"output":"{\"done\":true}"}"#, &task_id),
            Ok(()) => Outcome::Failure(pb::Failure { code: "not_found".into(), ..Default::default() }),
        };
        Ok(Response::new(pb::InvokeReply { outcome: Some(outcome) }))
    }
}

#[tonic::async_trait]
impl Store for FakeCore {
    async fn health(&self, _: tonic::Request<pb::HealthRequest>) -> Reply<pb::HealthReply> {
        Ok(Response::new(pb::HealthReply {
            status: "ok".into(),
            daemon_version: "0.1.0".into(),
            store: "/tmp/fake.db".into(),
            coordinator: true,
            ..Default::default()
        }))
    }
    async fn head(&self, request: tonic::Request<pb::HeadRequest>) -> Reply<pb::HeadReply> {
        self.answer(&request, Ok(HEAD.into()))
    }
    async fn get_world(&self, request: tonic::Request<pb::GetWorldRequest>) -> Reply<pb::GetWorldReply> {
        let absent = pb::Failure { code: "not_found".into(), message: "world not found".into(), ..Default::default() };
        self.answer(&request, Err(absent))
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
        // Echo the paging the edge computed, so the test can see it.
        let echoed = pb::LogEntry {
            entry_index: request.get_ref().from,
            semantics_epoch: i64::from(request.get_ref().limit),
            ..Default::default()
        };
        self.answer(&request, Ok(pb::EntryPage { items: vec![echoed] }))
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
        let selected = request.get_ref().next_world.as_ref().map(|w| w.r#ref.clone()).unwrap_or_default();
        self.answer(&request, Ok(selected))
    }
}

/// The scripted core on a loopback port, and the state of an edge in front of it.
async fn start_fake() -> (FakeCore, AppState) {
    let fake = FakeCore::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let served = fake.clone();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(StoreServer::new(served.clone()))
            .add_service(AdmissionServer::new(served.clone()))
            .add_service(InvocationServer::new(served))
            .serve_with_incoming(tokio_stream_listener(listener))
            .await
            .unwrap();
    });
    (fake, state(&format!("http://{address}")))
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
    let (fake, state) = start_fake().await;
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
    let (fake, state) = start_fake().await;
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
    let (fake, state) = start_fake().await;
    let good = format!("Bearer {GOOD}");
    let answer = call(&state, request("GET", "/v1/worlds/nope", Some(&good), "")).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.body,
        "{\"error\":{\"class\":\"BadRequest\",\"message\":\"world ref: hashref: missing algorithm tag (expected algo:digest): \\\"nope\\\"\"}}\n"
    );
    assert!(fake.seen.lock().unwrap().is_empty());
    let answer = call(&state, request("GET", &format!("/v1/worlds/{HEAD}"), Some(&good), "")).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (StatusCode::NOT_FOUND, "{\"error\":{\"class\":\"NotFound\",\"message\":\"world not found\"}}\n")
    );
    let answer = call(&state, request("GET", "/v1/log?from=%2B3&limit=9000&from=1", Some(&good), "")).await;
    assert!(answer.body.contains("\"entryIndex\":3,\"semanticsEpoch\":500,"), "{}", answer.body);
    let answer = call(&state, request("GET", "/v1/head", Some(&good), "")).await;
    assert_eq!((answer.status, answer.body.as_str()), (StatusCode::OK, HEAD));
    let answer = call(&state, request("HEAD", "/v1/head", Some(&good), "")).await;
    assert_eq!((answer.status, answer.body.as_str()), (StatusCode::OK, ""));
    assert_eq!(answer.headers["content-length"], HEAD.len().to_string());
    let answer = call(&state, request("GET", "/v1/health", None, "")).await;
    assert_eq!(
        answer.body,
        "{\"status\":\"ok\",\"daemon_version\":\"0.1.0\",\"db_path\":\"/tmp/fake.db\",\"interpreter_ref\":\"\",\"interpreter_version\":\"\"}\n"
    );
}

#[tokio::test]
async fn commit_checks_the_session_before_the_body() {
    let (_fake, state) = start_fake().await;
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
        cases: cases(64),
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

/// One scripted core and one edge for every case of the wire properties, on a runtime that
/// outlives the cases (a runtime per case would pay a connection per case).
fn shared_edge() -> &'static (tokio::runtime::Runtime, AppState) {
    static EDGE: std::sync::OnceLock<(tokio::runtime::Runtime, AppState)> = std::sync::OnceLock::new();
    EDGE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (_fake, state) = runtime.block_on(start_fake());
        (runtime, state)
    })
}

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

/// Arguments that make the scripted core commit, fail with any code, or commit an output
/// that is not JSON, not an object, or has duplicate members; and arguments that are not an
/// object at all.
fn arguments() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{Value, json};
    let mut codes: Vec<&str> = world_model::FailureCode::ALL.iter().map(|code| code.as_str()).collect();
    codes.extend(["no_such_code", ""]);
    prop_oneof![
        2 => Just(json!({"a": 1, "s": "<&>"})),
        3 => prop::sample::select(codes).prop_map(|code| json!({"fail": code})),
        2 => prop::sample::select(vec!["{\"ok\":true}", "[1]", "not json", "", "{\"b\":1,\"b\":2}", "1e400", "{\"n\":1.50}", "null"])
            .prop_map(|output| json!({"output": output})),
        1 => prop::sample::select(vec![json!([1]), json!("x"), Value::Null, json!(7)]),
    ]
}

fn id() -> impl Strategy<Value = Option<serde_json::Value>> {
    use serde_json::json;
    prop::option::weighted(
        0.9,
        prop::sample::select(vec![json!(1), json!("x<"), serde_json::Value::Null, json!([1]), json!(2.50)]),
    )
}

/// A JSON-RPC object: mostly well formed, with members of every wrong kind now and then.
fn rpc(
    call: impl Strategy<Value = (&'static str, Option<serde_json::Value>)>,
) -> impl Strategy<Value = serde_json::Value> {
    use serde_json::json;
    let version = prop_oneof![12 => Just(json!("2.0")), 1 => Just(json!("1.0")), 1 => Just(json!(2))];
    (version, id(), call).prop_map(|(version, id, (method, params))| {
        let mut message = json!({"jsonrpc": version, "method": method});
        if let Some(id) = id {
            message["id"] = id;
        }
        if let Some(params) = params {
            message["params"] = params;
        }
        message
    })
}

fn mcp_message() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::json;
    let name = prop_oneof![8 => Just(json!("tools_decho")), 1 => prop::sample::select(vec![json!("tools.echo"), json!("nope"), json!(7)])];
    let call = (name, prop::option::weighted(0.9, arguments())).prop_map(|(name, arguments)| {
        let mut params = json!({"name": name});
        if let Some(arguments) = arguments {
            params["arguments"] = arguments;
        }
        params
    });
    let params = prop::option::weighted(
        0.95,
        prop_oneof![
            4 => call,
            1 => Just(json!({"protocolVersion": "2025-06-18", "_meta": {"traceparent": "00-zz-00"}})),
            1 => prop::sample::select(vec![json!({}), json!([]), serde_json::Value::Null, json!("x")]),
        ],
    );
    let method = prop_oneof![
        8 => Just("tools/call"),
        1 => prop::sample::select(vec!["tools/list", "initialize", "ping", "notifications/initialized", "nope", ""]),
    ];
    rpc((method, params))
}

fn a2a_message() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::json;
    let pin = || prop::option::weighted(0.2, prop::sample::select(vec![json!(HEAD), json!("nope"), json!(5)]));
    let skill =
        || prop_oneof![8 => Just(json!("tools.echo")), 1 => prop::sample::select(vec![json!("nope"), json!(7)])];
    let task_id = || {
        prop_oneof![
            8 => prop::sample::select(vec![json!("t-1"), json!("done-1")]),
            1 => prop::sample::select(vec![json!(""), json!("bad id!"), json!("x".repeat(129)), json!(7)]),
        ]
    };
    let part = || (prop_oneof![8 => Just("data"), 1 => Just("text")], arguments());
    let parts =
        move || prop_oneof![8 => prop::collection::vec(part(), 1..=1), 1 => prop::collection::vec(part(), 0..3)];
    let tasks_send = move || {
        (task_id(), skill(), pin(), parts()).prop_map(|(id, skill, pin, parts)| {
            let parts: Vec<_> = parts.into_iter().map(|(kind, data)| json!({"type": kind, "data": data})).collect();
            let mut metadata = json!({"skill_id": skill});
            if let Some(pin) = pin {
                metadata["transition_fn"] = pin;
            }
            json!({"id": id, "metadata": metadata, "message": {"role": "user", "parts": parts}})
        })
    };
    let v03 = move || {
        (task_id(), skill(), arguments()).prop_map(|(id, skill, data)| {
            json!({"message": {"kind": "message", "messageId": id, "role": "user", "parts": [{"kind": "data", "data": data}], "metadata": {"skill_id": skill}}})
        })
    };
    let v1 = move || {
        (task_id(), skill(), arguments()).prop_map(|(id, skill, data)| {
            json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"data": data}]}, "metadata": {"skill_id": skill}})
        })
    };
    let query = move || task_id().prop_map(|id| json!({"id": id}));
    let junk = || prop::sample::select(vec![json!({}), json!([]), serde_json::Value::Null, json!("x")]);
    // Mostly each method with its own params shape; now and then any method with any shape.
    let matched = prop_oneof![
        4 => tasks_send().prop_map(|params| ("tasks/send", Some(params))),
        2 => v03().prop_map(|params| ("message/send", Some(params))),
        1 => tasks_send().prop_map(|params| ("message/send", Some(params))),
        2 => v1().prop_map(|params| ("SendMessage", Some(params))),
        1 => (prop::sample::select(vec!["GetTask", "CancelTask"]), query()).prop_map(|(m, p)| (m, Some(p))),
    ];
    let params = prop::option::of(prop_oneof![tasks_send(), v03(), v1(), query(), junk()]);
    let method =
        prop::sample::select(vec!["tasks/send", "message/send", "SendMessage", "GetTask", "CancelTask", "nope"]);
    rpc(prop_oneof![8 => matched, 1 => (method, params)])
}

/// The serialised body, now and then cut short or with one byte replaced.
fn body_of(value: impl Strategy<Value = serde_json::Value>) -> impl Strategy<Value = Vec<u8>> {
    (
        value,
        prop::option::weighted(0.08, (any::<prop::sample::Index>(), prop::sample::select(b"{}[]\",:x\0 ".to_vec()))),
        any::<bool>(),
    )
        .prop_map(|(value, garble, cut)| {
            let mut bytes = serde_json::to_vec(&value).unwrap();
            if let Some((at, byte)) = garble {
                let at = at.index(bytes.len());
                if cut { bytes.truncate(at) } else { bytes[at] = byte }
            }
            bytes
        })
}

fn authorization() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        12 => Just(Some(format!("Bearer {GOOD}"))),
        1 => Just(None),
        1 => Just(Some("Bearer short".to_owned())),
        1 => Just(Some(format!("Bearer {}", "ab".repeat(32)))),
        1 => Just(Some(format!("Bearer {EXPIRED}"))),
    ]
}

fn post(path: &str, authorization: Option<&str>, headers: &[(&str, &str)], body: Vec<u8>) -> Answer {
    let (runtime, state) = shared_edge();
    let mut builder = Request::builder().method("POST").uri(path).header("host", "edge.test:7644");
    if let Some(value) = authorization {
        builder = builder.header("authorization", value);
    }
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    runtime.block_on(call(state, builder.body(Body::from(body)).unwrap()))
}

/// A JSON-RPC response object (or a batch of them): version 2.0, an id, and exactly one of
/// result and error, the error's code in the JSON-RPC server range with a message. Values are
/// read raw: an output may hold numbers no f64 holds.
fn assert_json_rpc(text: &str) -> Result<(), TestCaseError> {
    #[derive(serde::Deserialize)]
    struct ErrorObject {
        code: i64,
        message: String,
    }
    type Members<'a> = std::collections::BTreeMap<String, &'a serde_json::value::RawValue>;
    let text = text.trim_end();
    let fail = |e: serde_json::Error| TestCaseError::fail(format!("{e}: {text}"));
    let replies: Vec<&serde_json::value::RawValue> = if text.starts_with('[') {
        serde_json::from_str(text).map_err(fail)?
    } else {
        vec![serde_json::from_str(text).map_err(fail)?]
    };
    for raw in replies {
        // Members read raw (a null id is still an id).
        let reply: Members<'_> = serde_json::from_str(raw.get()).map_err(fail)?;
        prop_assert_eq!(reply.get("jsonrpc").map(|v| v.get()), Some("\"2.0\""), "{}", text);
        prop_assert!(reply.contains_key("id"), "{}", text);
        prop_assert!(reply.contains_key("result") != reply.contains_key("error"), "{}", text);
        if let Some(error) = reply.get("error") {
            let error: ErrorObject = serde_json::from_str(error.get()).map_err(fail)?;
            prop_assert!((-32768..=-32000).contains(&error.code), "{}", text);
            prop_assert!(!error.message.is_empty(), "{}", text);
        }
    }
    Ok(())
}

/// `result.artifacts[0].parts[0].data` (or under `result.task` for A2A 1.0), read raw.
fn task_data(body: &str) -> Option<String> {
    use serde_json::value::RawValue;
    type Members<'a> = std::collections::BTreeMap<String, &'a RawValue>;
    let member = |raw: &str, key: &str| -> Option<String> {
        serde_json::from_str::<Members<'_>>(raw).ok()?.get(key).map(|v| v.get().to_owned())
    };
    let first = |raw: &str| -> Option<String> {
        serde_json::from_str::<Vec<&RawValue>>(raw).ok()?.first().map(|v| v.get().to_owned())
    };
    let result = member(body.trim_end(), "result")?;
    let task = member(&result, "task").unwrap_or(result);
    let part = first(&member(&first(&member(&task, "artifacts")?)?, "parts")?)?;
    member(&part, "data")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(192), failure_persistence: None, ..ProptestConfig::default() })]

    /// Any A2A body, method, params shape, part, pin, task id, header and credential: HTTP 200
    /// and one JSON-RPC response, never a 5xx.
    #[test]
    fn a2a_answers_every_request_with_one_json_rpc_response(
        authorization in authorization(),
        version in prop::option::weighted(0.7, prop::sample::select(vec!["1.0", "1.0", "1.0", "0.3", "1.0.2", "x"])),
        body in body_of(a2a_message()),
    ) {
        let headers: Vec<(&str, &str)> = version.iter().map(|v| ("a2a-version", *v)).collect();
        let answer = post("/a2a/", authorization.as_deref(), &headers, body.clone());
        prop_assert_eq!(answer.status, StatusCode::OK, "{}: {}", String::from_utf8_lossy(&body), answer.body);
        prop_assert_eq!(answer.headers["content-type"].to_str().unwrap(), "application/json");
        assert_json_rpc(&answer.body)?;
        // A completed task's data is the output object, in every vocabulary (reference-edge §5.4).
        if let Some(data) = task_data(&answer.body) {
            prop_assert!(data.starts_with('{'), "{}", answer.body);
        }
    }

    /// Any MCP body (single, batch or garbled), header set and credential: a 401 denial, a
    /// 400 or 403 JSON-RPC error, a 202, or a 200 that is either one SSE event carrying
    /// JSON-RPC or the whole-POST JSON envelope; never a 5xx.
    #[test]
    fn mcp_answers_every_request_without_a_server_error(
        authorization in authorization(),
        content_type in prop_oneof![12 => Just("application/json"), 1 => Just("application/json; charset=utf-8"), 1 => Just("text/plain")],
        accept in prop_oneof![12 => Just("application/json, text/event-stream"), 1 => Just("application/json"), 1 => Just("*/*")],
        version in prop::option::of(prop_oneof![6 => Just("2025-03-26"), 1 => Just("2025-06-18"), 1 => Just("2025-11-25"), 1 => Just("1999-01-01")]),
        origin in prop::option::weighted(0.05, prop::sample::select(vec!["http://localhost:3000", "https://evil.example"])),
        shape in prop::sample::select(vec!["one", "one", "one", "batch"]),
        messages in prop::collection::vec(body_of(mcp_message()), 0..4),
    ) {
        let body = match (shape, messages.as_slice()) {
            ("one", [first, ..]) => first.clone(),
            ("one", []) => Vec::new(),
            _ => [&b"["[..], &messages.join(&b","[..]), b"]"].concat(),
        };
        let mut headers = vec![("content-type", content_type), ("accept", accept)];
        headers.extend(version.map(|v| ("mcp-protocol-version", v)));
        headers.extend(origin.map(|o| ("origin", o)));
        let answer = post("/mcp/", authorization.as_deref(), &headers, body.clone());
        let sent = String::from_utf8_lossy(&body).into_owned();
        let content = answer.headers.get("content-type").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        match answer.status.as_u16() {
            401 => prop_assert!(content.starts_with("text/plain"), "{}", sent),
            400 | 403 => assert_json_rpc(&answer.body)?,
            202 => prop_assert_eq!(answer.body.as_str(), ""),
            200 if content == "text/event-stream" => {
                let data = answer.body.strip_prefix("event: message\ndata: ").and_then(|rest| rest.strip_suffix("\n\n"));
                prop_assert!(data.is_some(), "{} -> {:?}", sent, answer.body);
                assert_json_rpc(data.unwrap_or_default())?;
            }
            200 => assert_json_rpc(&answer.body)?,
            status => prop_assert!(false, "{} -> {} {}", sent, status, answer.body),
        }
    }
}
