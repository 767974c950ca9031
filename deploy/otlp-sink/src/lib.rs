//! The OTLP trace collector shared by the `otlp-sink` binary (compose's stand-in for Jaeger)
//! and the end-to-end tests: the collector's `TraceService` over gRPC and
//! `POST /v1/traces` (protobuf) over HTTP, keeping every span they receive in memory.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;

/// Spans kept at most; the oldest are dropped beyond it.
pub const MAX_SPANS: usize = 100_000;

/// One received span, flattened.
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    /// The resource's `service.name`; empty when it has none.
    pub service: String,
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub start_unix_nano: u64,
    pub attributes: Vec<(String, String)>,
    pub status_code: i32,
    pub status_message: String,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Every span received so far, oldest first.
#[derive(Clone, Default)]
pub struct Spans(Arc<Mutex<Vec<ReceivedSpan>>>);

impl Spans {
    pub fn record(&self, request: ExportTraceServiceRequest) {
        let mut received = Vec::new();
        for resource in request.resource_spans {
            let service = resource
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                .map(|a| any_text(a.value.as_ref().and_then(|v| v.value.as_ref())))
                .unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    received.push(ReceivedSpan {
                        service: service.clone(),
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
                        start_unix_nano: span.start_time_unix_nano,
                        attributes: span
                            .attributes
                            .iter()
                            .map(|a| (a.key.clone(), any_text(a.value.as_ref().and_then(|v| v.value.as_ref()))))
                            .collect(),
                        status_code: span.status.as_ref().map_or(0, |s| s.code),
                        status_message: span.status.map(|s| s.message).unwrap_or_default(),
                    });
                }
            }
        }
        let mut spans = self.0.lock().unwrap_or_else(|p| p.into_inner());
        spans.extend(received);
        let excess = spans.len().saturating_sub(MAX_SPANS);
        spans.drain(..excess);
    }

    pub fn all(&self) -> Vec<ReceivedSpan> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits (bounded) until `done` holds for the received spans.
    pub fn wait_for(&self, timeout: Duration, done: impl Fn(&[ReceivedSpan]) -> bool) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans = self.all();
            if done(&spans) || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn any_text(value: Option<&Value>) -> String {
    match value {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

struct Collector(Spans);

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

/// Serves OTLP over gRPC on `listener` into `spans` until the server fails.
pub async fn serve_grpc(listener: tokio::net::TcpListener, spans: Spans) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(Collector(spans)))
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
        .await
}

/// Serves OTLP's HTTP/protobuf `POST /v1/traces` on `listener` into `spans`.
pub async fn serve_http(listener: tokio::net::TcpListener, spans: Spans) -> std::io::Result<()> {
    let ingest = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| async move {
            match <ExportTraceServiceRequest as prost::Message>::decode(body) {
                Ok(request) => {
                    spans.record(request);
                    // An empty ExportTraceServiceResponse is zero bytes of protobuf.
                    (StatusCode::OK, [("content-type", "application/x-protobuf")], Vec::new())
                }
                Err(_) => (StatusCode::BAD_REQUEST, [("content-type", "text/plain")], b"bad protobuf".to_vec()),
            }
        }),
    );
    axum::serve(listener, ingest).await
}
