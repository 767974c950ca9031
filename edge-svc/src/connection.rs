//! One accepted connection, served by hyper (HTTP/1.1, or HTTP/2 with prior knowledge) under
//! bounds that hold whatever the protocol: a connection that has not delivered its first
//! request's headers within the header timeout is closed (hyper's own HTTP/1.1 timeout starts
//! only once the protocol is chosen, and HTTP/2 has none), and one with no request in flight
//! for the idle timeout is shut down gracefully. Silent or trickling clients therefore cannot
//! hold descriptors until the edge runs out.
//!
//! An HTTP/1.1 connection carries its next request only once this one's body has been read,
//! and hyper closes one whose body was left unread (it drains only what it has buffered). So
//! whatever answered early without reading the body — a 401, a 403 `Origin`, an A2A refusal, a
//! 413 — the connection reads the rest of it, bounded in size and time, before the answer
//! goes out, and a client reusing the connection at once (an OAuth client's discovery right
//! after its first 401) finds it still open.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::Version;
use http_body_util::BodyExt as _;
use hyper::body::{Body as HttpBody, Buf as _, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};
use tower::Service as _;

use crate::body::MCP_LIMIT;
use crate::limits::Limits;
use crate::metrics::{ConnectionClose, Metrics};

/// The most of an unread body the connection reads to stay open: the largest body `/mcp/`
/// accepts, so a refused MCP POST never costs its client the connection.
const UNREAD_BODY_LIMIT: usize = MCP_LIMIT;
/// How long the rest of an unread body may take to arrive before the answer goes out anyway
/// (and the connection closes after it).
const UNREAD_BODY_WAIT: Duration = Duration::from_secs(1);

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
            let (request, unread) = watch_body(request);
            let response = app.call(request).await;
            if let Some(body) = unread.and_then(|mut unread| unread.try_recv().ok()) {
                drain(body).await;
            }
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

/// The request with its body watched when it is an HTTP/1 body: the receiver yields the body if
/// the app drops it unread. (An HTTP/2 stream's unread body ends with the stream.)
fn watch_body(request: http::Request<Incoming>) -> (http::Request<Body>, Option<oneshot::Receiver<Incoming>>) {
    let http1 = matches!(request.version(), Version::HTTP_10 | Version::HTTP_11);
    if !http1 || request.body().is_end_stream() {
        return (request.map(Body::new), None);
    }
    let (back, unread) = oneshot::channel();
    (request.map(|body| Body::new(Watched::new(body, back))), Some(unread))
}

/// Reads and discards the rest of an unread body, within [`UNREAD_BODY_LIMIT`] and
/// [`UNREAD_BODY_WAIT`]; beyond either it is dropped, and hyper closes the connection.
async fn drain<B: HttpBody + Unpin>(mut body: B) {
    if body.size_hint().lower() > UNREAD_BODY_LIMIT as u64 {
        return;
    }
    let mut left = UNREAD_BODY_LIMIT;
    let read = async {
        while let Some(Ok(frame)) = body.frame().await {
            let size = frame.data_ref().map_or(0, |data| data.remaining());
            if size > left {
                return;
            }
            left -= size;
        }
    };
    let _ = tokio::time::timeout(UNREAD_BODY_WAIT, read).await;
}

/// A request body as the app reads it, handed back through `back` when the app drops it before
/// its end. A body the app was waiting on when it gave up (a slow client past its body
/// timeout) is not handed back: it has had its time.
struct Watched<B: HttpBody> {
    body: Option<B>,
    back: Option<oneshot::Sender<B>>,
    waiting: bool,
}

impl<B: HttpBody> Watched<B> {
    fn new(body: B, back: oneshot::Sender<B>) -> Self {
        Watched { body: Some(body), back: Some(back), waiting: false }
    }
}

impl<B: HttpBody + Unpin> HttpBody for Watched<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        let Some(body) = this.body.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(body).poll_frame(cx);
        this.waiting = polled.is_pending();
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            // Read to its end, or broken: nothing is left to drain.
            this.back = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.as_ref().map_or_else(|| SizeHint::with_exact(0), HttpBody::size_hint)
    }
}

impl<B: HttpBody> Drop for Watched<B> {
    fn drop(&mut self) {
        if let (Some(back), Some(body)) = (self.back.take(), self.body.take())
            && !self.waiting
            && !body.is_end_stream()
        {
            let _ = back.send(body);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;
    use http_body_util::{Full, StreamBody};

    fn run<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(future)
    }

    /// A body of two frames whose second never comes.
    fn stalled() -> StreamBody<futures::stream::BoxStream<'static, Result<Frame<Bytes>, std::io::Error>>> {
        use futures::StreamExt as _;
        let first = futures::stream::iter([Ok(Frame::data(Bytes::from_static(b"first")))]);
        StreamBody::new(first.chain(futures::stream::pending()).boxed())
    }

    #[test]
    fn a_body_dropped_unread_comes_back_and_one_read_to_its_end_does_not() {
        let (back, mut unread) = oneshot::channel();
        drop(Watched::new(Full::new(Bytes::from_static(b"unread")), back));
        let body = unread.try_recv().expect("handed back");
        assert_eq!(run(body.collect()).unwrap().to_bytes(), "unread");

        let (back, mut unread) = oneshot::channel();
        let read = run(Watched::new(Full::new(Bytes::from_static(b"read")), back).collect());
        assert_eq!(read.unwrap().to_bytes(), "read");
        assert!(unread.try_recv().is_err());
    }

    #[test]
    fn a_body_given_up_on_while_waiting_is_not_handed_back() {
        let (back, mut unread) = oneshot::channel();
        let mut watched = Watched::new(stalled(), back);
        let read = async { while watched.frame().await.is_some() {} };
        assert!(run(async { tokio::time::timeout(Duration::from_millis(20), read).await }).is_err());
        drop(watched);
        assert!(unread.try_recv().is_err());
    }

    #[test]
    fn a_drain_stops_at_its_bounds() {
        // A stalled body is given up on once the wait is over.
        let started = std::time::Instant::now();
        run(drain(stalled()));
        assert!(started.elapsed() >= UNREAD_BODY_WAIT && started.elapsed() < 3 * UNREAD_BODY_WAIT);
        // A body larger than the limit is not read at all.
        let large = Full::new(Bytes::from(vec![0; UNREAD_BODY_LIMIT + 1]));
        let started = std::time::Instant::now();
        run(drain(large));
        assert!(started.elapsed() < UNREAD_BODY_WAIT);
    }
}
