//! A small, honest OTLP trace receiver for the tests: the collector's
//! `TraceService` over gRPC and `POST /v1/traces` (protobuf) over HTTP, both
//! on loopback, keeping every span they receive.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;

/// One received span, flattened.
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    pub service: String,
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub attributes: Vec<(String, String)>,
    pub status_code: i32,
    pub status_message: String,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Default)]
pub struct Spans(Arc<Mutex<Vec<ReceivedSpan>>>);

impl Spans {
    fn record(&self, request: ExportTraceServiceRequest) {
        let mut spans = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for resource in request.resource_spans {
            let service = resource
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                .map(|a| any_text(a.value.as_ref().and_then(|v| v.value.as_ref())))
                .unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    spans.push(ReceivedSpan {
                        service: service.clone(),
                        name: span.name,
                        trace_id: hex(&span.trace_id),
                        span_id: hex(&span.span_id),
                        parent_span_id: hex(&span.parent_span_id),
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

/// Starts a gRPC OTLP receiver; returns its `http://127.0.0.1:PORT` endpoint.
pub async fn grpc_receiver() -> (String, Spans) {
    let spans = Spans::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind OTLP gRPC receiver");
    let address = listener.local_addr().expect("local address");
    let service = TraceServiceServer::new(Collector(spans.clone()));
    tokio::spawn(async move {
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let _ = tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming).await;
    });
    (format!("http://{address}"), spans)
}

/// Starts an HTTP/protobuf OTLP receiver; returns its base endpoint.
pub async fn http_receiver() -> (String, Spans) {
    let spans = Spans::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind OTLP HTTP receiver");
    let address = listener.local_addr().expect("local address");
    let received = spans.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let received = received.clone();
            async move {
                match <ExportTraceServiceRequest as prost::Message>::decode(body) {
                    Ok(request) => {
                        received.record(request);
                        (axum::http::StatusCode::OK, Vec::new())
                    }
                    Err(_) => (axum::http::StatusCode::BAD_REQUEST, Vec::new()),
                }
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{address}"), spans)
}
