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

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use otlp_sink::{ReceivedSpan, Spans};
use serde_json::{Value, json};

fn service_name(span: &ReceivedSpan) -> &str {
    if span.service.is_empty() { "unknown_service" } else { &span.service }
}

fn services(spans: &Spans) -> Value {
    let spans = spans.all();
    let mut names: Vec<&str> = spans.iter().map(service_name).collect();
    names.sort_unstable();
    names.dedup();
    json!({ "data": names })
}

/// Jaeger's `/api/traces` shape, for the traces touching `service`.
fn traces(spans: &Spans, service: &str) -> Value {
    let spans = spans.all();
    let mut by_trace: BTreeMap<&str, Vec<&ReceivedSpan>> = BTreeMap::new();
    for span in spans.iter() {
        by_trace.entry(span.trace_id.as_str()).or_default().push(span);
    }
    let data: Vec<Value> = by_trace
        .into_iter()
        .filter(|(_, spans)| spans.iter().any(|s| service_name(s) == service))
        .map(|(trace_id, mut spans)| {
            spans.sort_by_key(|s| s.start_unix_nano);
            let mut processes: HashMap<&str, String> = HashMap::new();
            let spans: Vec<Value> = spans
                .iter()
                .map(|s| {
                    let next = format!("p{}", processes.len() + 1);
                    let process = processes.entry(service_name(s)).or_insert(next).clone();
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
    let store = Spans::default();
    let grpc = bind(address("OTLP_SINK_GRPC", "0.0.0.0:4317")).await;
    let http = bind(address("OTLP_SINK_HTTP", "0.0.0.0:4318")).await;
    let query = bind(address("OTLP_SINK_QUERY", "0.0.0.0:16686")).await;
    for (what, listener) in [("otlp grpc", &grpc), ("otlp http", &http), ("query", &query)] {
        if let Ok(addr) = listener.local_addr() {
            eprintln!("otlp-sink {what} listening on {addr}");
        }
    }

    let grpc = tokio::spawn(otlp_sink::serve_grpc(grpc, store.clone()));
    let http = tokio::spawn(otlp_sink::serve_http(http, store.clone()));
    let grpc = async { grpc.await.map(|served| served.map_err(|e| e.to_string())) };
    let http = async { http.await.map(|served| served.map_err(|e| e.to_string())) };

    let api = axum::Router::new()
        .route("/api/services", get(|State(store): State<Spans>| async move { axum::Json(services(&store)) }))
        .route(
            "/api/traces",
            get(|State(store): State<Spans>, Query(params): Query<HashMap<String, String>>| async move {
                match params.get("service") {
                    Some(service) => (StatusCode::OK, axum::Json(traces(&store, service))),
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
