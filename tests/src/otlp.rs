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

async fn bind(what: &str) -> (String, tokio::net::TcpListener, Spans) {
    let listener =
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap_or_else(|e| panic!("bind OTLP {what} receiver: {e}"));
    let address = listener.local_addr().expect("local address");
    (format!("http://{address}"), listener, Spans::default())
}
