//! One accepted connection, served by hyper (HTTP/1.1, or HTTP/2 with prior knowledge) under
//! bounds that hold whatever the protocol: a connection that has not delivered its first
//! request's headers within the header timeout is closed (hyper's own HTTP/1.1 timeout starts
//! only once the protocol is chosen, and HTTP/2 has none), and one with no request in flight
//! for the idle timeout is shut down gracefully. Silent or trickling clients therefore cannot
//! hold descriptors until the edge runs out.

use std::sync::Arc;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tower::Service as _;

use crate::limits::Limits;
use crate::metrics::{ConnectionClose, Metrics};

/// Requests seen on one connection: how many began, how many have not been answered yet.
#[derive(Clone, Copy, Default)]
struct Requests {
    begun: u64,
    open: usize,
}

/// Marks one request open on its connection until dropped.
struct OpenRequest(Arc<watch::Sender<Requests>>);

impl OpenRequest {
    fn begin(requests: &Arc<watch::Sender<Requests>>) -> OpenRequest {
        requests.send_modify(|requests| {
            requests.begun += 1;
            requests.open += 1;
        });
        OpenRequest(Arc::clone(requests))
    }
}

impl Drop for OpenRequest {
    fn drop(&mut self) {
        self.0.send_modify(|requests| requests.open -= 1);
    }
}

/// Serves `stream` with `app` until the client closes it, a bound in `limits` ends it, or
/// `stopping` turns true (then open requests finish and the connection closes).
pub async fn serve(
    stream: TcpStream,
    app: Router,
    builder: Arc<auto::Builder<TokioExecutor>>,
    limits: Limits,
    metrics: Arc<Metrics>,
    mut stopping: watch::Receiver<bool>,
) {
    let _counted = metrics.connection_opened();
    let requests = Arc::new(watch::Sender::new(Requests::default()));
    let mut seen = requests.subscribe();
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        let open = OpenRequest::begin(&requests);
        let mut app = app.clone();
        async move {
            let response = app.call(request).await;
            drop(open);
            response
        }
    });
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    let mut connection = std::pin::pin!(connection);

    // Until the first request's headers: the protocol choice, HTTP/2's preface and settings,
    // and the request head itself all fall within the header timeout.
    tokio::select! {
        ended = connection.as_mut() => return finished(ended),
        // Err: the service is gone, so is the connection.
        begun = seen.wait_for(|requests| requests.begun > 0) => if begun.is_err() { return },
        () = tokio::time::sleep(limits.header_read_timeout) => {
            tracing::debug!(timeout = ?limits.header_read_timeout, "closing a connection that sent no request headers in time");
            metrics.connection_closed(ConnectionClose::HeaderTimeout);
            return;
        }
        _ = stopping.wait_for(|stopping| *stopping) => return,
    }
    tokio::select! {
        ended = connection.as_mut() => return finished(ended),
        () = idle_for(&mut seen, limits.idle_timeout) => metrics.connection_closed(ConnectionClose::Idle),
        _ = stopping.wait_for(|stopping| *stopping) => {}
    }
    // Requests in flight finish; HTTP/2 clients are told to open no more streams.
    connection.as_mut().graceful_shutdown();
    finished(connection.await);
}

/// Resolves once no request has been open on the connection for `timeout`; never once the
/// connection's service is gone (the connection itself then ends).
async fn idle_for(seen: &mut watch::Receiver<Requests>, timeout: std::time::Duration) {
    loop {
        if seen.wait_for(|requests| requests.open == 0).await.is_err() {
            return std::future::pending().await;
        }
        tokio::select! {
            () = tokio::time::sleep(timeout) => return,
            changed = seen.changed() => if changed.is_err() { return std::future::pending().await },
        }
    }
}

fn finished(ended: Result<(), Box<dyn std::error::Error + Send + Sync>>) {
    if let Err(error) = ended {
        tracing::debug!(%error, "connection ended with an error");
    }
}
