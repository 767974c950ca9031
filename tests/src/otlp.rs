//! OTLP trace receivers for the tests, on loopback: the collector the compose suite's
//! `otlp-sink` runs, keeping every span it receives.

pub use otlp_sink::{ReceivedSpan, Spans};

/// Starts a gRPC OTLP receiver; returns its `http://127.0.0.1:PORT` endpoint.
pub async fn grpc_receiver() -> (String, Spans) {
    let (endpoint, listener, spans) = bind("gRPC").await;
    tokio::spawn(otlp_sink::serve_grpc(listener, spans.clone()));
    (endpoint, spans)
}

/// Starts an HTTP/protobuf OTLP receiver; returns its base endpoint.
pub async fn http_receiver() -> (String, Spans) {
    let (endpoint, listener, spans) = bind("HTTP").await;
    tokio::spawn(otlp_sink::serve_http(listener, spans.clone()));
    (endpoint, spans)
}

/// The environment under which a served process exports its spans to `endpoint` over
/// `protocol` (`grpc` or `http/protobuf`), a batch every 200 ms.
pub fn export_env<'a>(endpoint: &'a str, protocol: &'a str) -> [(&'static str, &'a str); 3] {
    [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
    ]
}

/// Every span as a line of text (name, status message, attributes), once both the edge's and
/// the core's have arrived (waiting at most 10 s): what a test asserts holds no secret.
pub fn spans_text(spans: &Spans) -> String {
    let received = spans.wait_for(std::time::Duration::from_secs(10), |s| {
        s.iter().any(|s| s.service == "world-edge") && s.iter().any(|s| s.service == "world-core")
    });
    received
        .iter()
        .map(|span| {
            let attributes: Vec<String> = span.attributes.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{} {} {}\n", span.name, span.status_message, attributes.join(" "))
        })
        .collect()
}

async fn bind(what: &str) -> (String, tokio::net::TcpListener, Spans) {
    let listener =
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind OTLP {what} receiver: {e}"));
    let address = listener.local_addr().expect("local address");
    (format!("http://{address}"), listener, Spans::default())
}
