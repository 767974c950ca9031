//! `otlp-sink`: receives OTLP traces — gRPC `TraceService` on `:4317` and
//! HTTP/protobuf `POST /v1/traces` on `:4318` — keeps a summary of every span
//! in memory, and answers a small subset of Jaeger's query API on `:16686`:
//!
//! * `GET /api/services` → `{"data":["world-core",…]}`
//! * `GET /api/traces?service=NAME` → `{"data":[{"traceID","spans":[{"traceID",
//!   "spanID","operationName","references":[{"refType":"CHILD_OF","traceID",
//!   "spanID"}],"processID"}],"processes":{"p1":{"serviceName"}}}]}`: every
//!   trace with at least one span of NAME, with all of that trace's spans.
//!
//! It stands in for Jaeger where images cannot be pulled, so the same query
//! can be asserted against either. Ports can be moved with `OTLP_SINK_GRPC`,
//! `OTLP_SINK_HTTP` and `OTLP_SINK_QUERY` (socket addresses).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use serde_json::{Value, json};

/// Spans kept at most; the oldest are dropped beyond it.
const MAX_SPANS: usize = 100_000;

#[derive(Clone, Debug)]
struct SpanSummary {
    service: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    name: String,
    start_unix_nano: u64,
}

#[derive(Clone, Default)]
struct Store(Arc<Mutex<Vec<SpanSummary>>>);

impl Store {
    fn record(&self, request: ExportTraceServiceRequest) -> usize {
        let mut received = Vec::new();
        for resource in request.resource_spans {
            let service = resource
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                .and_then(|a| a.value.as_ref())
                .and_then(|v| match &v.value {
                    Some(AnyValue::StringValue(s)) => Some(s.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| "unknown_service".to_owned());
            for scope in resource.scope_spans {
                for span in scope.spans {
                    received.push(SpanSummary {
                        service: service.clone(),
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        name: span.name,
                        start_unix_nano: span.start_time_unix_nano,
                    });
                }
            }
        }
        let count = received.len();
        let mut spans = self.0.lock().unwrap_or_else(|p| p.into_inner());
        spans.extend(received);
        let excess = spans.len().saturating_sub(MAX_SPANS);
        spans.drain(..excess);
        count
    }

    fn services(&self) -> Value {
        let spans = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut names: Vec<&str> = spans.iter().map(|s| s.service.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        json!({ "data": names })
    }

    /// Jaeger's `/api/traces` shape, for the traces touching `service`.
    fn traces(&self, service: &str) -> Value {
        let spans = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut by_trace: BTreeMap<&str, Vec<&SpanSummary>> = BTreeMap::new();
        for span in spans.iter() {
            by_trace.entry(span.trace_id.as_str()).or_default().push(span);
        }
        let data: Vec<Value> = by_trace
            .into_iter()
            .filter(|(_, spans)| spans.iter().any(|s| s.service == service))
            .map(|(trace_id, mut spans)| {
                spans.sort_by_key(|s| s.start_unix_nano);
                let mut processes: HashMap<&str, String> = HashMap::new();
                let spans: Vec<Value> = spans
                    .iter()
                    .map(|s| {
                        let next = format!("p{}", processes.len() + 1);
                        let process = processes.entry(s.service.as_str()).or_insert(next).clone();
                        let references = if s.parent_span_id.is_empty() {
                            json!([])
                        } else {
                            json!([{ "refType": "CHILD_OF", "traceID": s.trace_id, "spanID": s.parent_span_id }])
                        };
                        json!({
                            "traceID": s.trace_id,
                            "spanID": s.span_id,
                            "operationName": s.name,
                            "references": references,
                            "startTime": s.start_unix_nano / 1000,
                            "processID": process,
                        })
                    })
                    .collect();
                let processes: serde_json::Map<String, Value> = processes
                    .into_iter()
                    .map(|(service, id)| (id, json!({ "serviceName": service, "tags": [] })))
                    .collect();
                json!({ "traceID": trace_id, "spans": spans, "processes": processes })
            })
            .collect();
        json!({ "data": data })
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

struct Collector(Store);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.record(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

fn address(var: &str, default: &str) -> SocketAddr {
    let text = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    text.parse().unwrap_or_else(|e| {
        eprintln!("otlp-sink: {var}={text:?} is not a socket address: {e}");
        std::process::exit(2)
    })
}

async fn bind(addr: SocketAddr) -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind(addr).await.unwrap_or_else(|e| {
        eprintln!("otlp-sink: cannot listen on {addr}: {e}");
        std::process::exit(1)
    })
}

#[tokio::main]
async fn main() {
    let store = Store::default();
    let grpc = bind(address("OTLP_SINK_GRPC", "0.0.0.0:4317")).await;
    let http = bind(address("OTLP_SINK_HTTP", "0.0.0.0:4318")).await;
    let query = bind(address("OTLP_SINK_QUERY", "0.0.0.0:16686")).await;
    for (what, listener) in [("otlp grpc", &grpc), ("otlp http", &http), ("query", &query)] {
        if let Ok(addr) = listener.local_addr() {
            eprintln!("otlp-sink {what} listening on {addr}");
        }
    }

    let collector = TraceServiceServer::new(Collector(store.clone()));
    let grpc = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(collector)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(grpc))
            .await
            .map_err(|e| e.to_string())
    });

    let ingest = axum::Router::new()
        .route(
            "/v1/traces",
            post(|State(store): State<Store>, body: axum::body::Bytes| async move {
                match <ExportTraceServiceRequest as prost::Message>::decode(body) {
                    Ok(request) => {
                        store.record(request);
                        // An empty ExportTraceServiceResponse is zero bytes of protobuf.
                        (StatusCode::OK, [("content-type", "application/x-protobuf")], Vec::new())
                    }
                    Err(_) => (StatusCode::BAD_REQUEST, [("content-type", "text/plain")], b"bad protobuf".to_vec()),
                }
            }),
        )
        .with_state(store.clone());
    let http = tokio::spawn(async move { axum::serve(http, ingest).await.map_err(|e| e.to_string()) });

    let api = axum::Router::new()
        .route("/api/services", get(|State(store): State<Store>| async move { axum::Json(store.services()) }))
        .route(
            "/api/traces",
            get(|State(store): State<Store>, Query(params): Query<HashMap<String, String>>| async move {
                match params.get("service") {
                    Some(service) => (StatusCode::OK, axum::Json(store.traces(service))),
                    None => {
                        (StatusCode::BAD_REQUEST, axum::Json(json!({ "errors": [{ "msg": "service is required" }] })))
                    }
                }
            }),
        )
        .route("/", get(|| async { "otlp-sink\n" }))
        .with_state(store);
    let query = tokio::spawn(async move { axum::serve(query, api).await.map_err(|e| e.to_string()) });

    let (what, result) = tokio::select! {
        r = grpc => ("otlp grpc", r),
        r = http => ("otlp http", r),
        r = query => ("query", r),
        _ = shutdown() => return,
    };
    eprintln!("otlp-sink: {what} listener stopped: {result:?}");
    std::process::exit(1);
}

async fn shutdown() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
    }
}
