//! The HTTP server: one axum fallback that routes with [`crate::router`] (so the Go mux rules
//! hold for every request, known path or not), calls the route's handler, and records metrics
//! and a log line. A handler panic is caught and answered 500 so no input can take a
//! connection — or the process — down with it.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::response::Response;
use futures::FutureExt;
use http::header::CONTENT_LENGTH;
use http::{HeaderValue, Method};
use tokio::net::TcpListener;
use tracing::Instrument as _;
use world_model::{Failure, FailureCode};

use crate::callback::Callbacks;
use crate::cli::EdgeArgs;
use crate::core::{CoreClient, CoreUrlError};
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::oauth::{self, PublicUrl, PublicUrlError};
use crate::origin::OriginPolicy;
use crate::router::{self, Resolution, Route};
use crate::surface::Surfaces;
use crate::{a2a, card, connection, mcp, rest, ui, wire};

/// How long open connections may finish after SIGINT/SIGTERM before the edge closes them.
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct AppState {
    pub core: CoreClient,
    /// The surfaces admitted through `core`, kept by digest.
    pub surfaces: Arc<Surfaces>,
    pub origins: Arc<OriginPolicy>,
    pub metrics: Arc<Metrics>,
    pub limits: Limits,
    /// The MCP host-callback slots, shared by every request this edge serves.
    pub callbacks: Callbacks,
    /// The address clients see, which OAuth sign-in names.
    pub public_url: Arc<PublicUrl>,
}

impl AppState {
    pub fn new(core: CoreClient, origins: OriginPolicy) -> AppState {
        AppState::with_limits(core, origins, Limits::default())
    }

    pub fn with_limits(core: CoreClient, origins: OriginPolicy, limits: Limits) -> AppState {
        AppState {
            core,
            surfaces: Arc::default(),
            origins: Arc::new(origins),
            metrics: Arc::new(Metrics::new()),
            callbacks: Callbacks::new(&limits),
            limits,
            public_url: Arc::new(PublicUrl::from_listen(([127, 0, 0, 1], 7644).into())),
        }
    }

    /// The state with the address clients see set.
    pub fn with_public_url(self, public_url: PublicUrl) -> AppState {
        AppState { public_url: Arc::new(public_url), ..self }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Core(#[from] CoreUrlError),
    #[error("cannot listen on {address}: {source}")]
    Bind { address: std::net::SocketAddr, source: std::io::Error },
    #[error(transparent)]
    PublicUrl(#[from] PublicUrlError),
}

/// The whole edge as an axum router.
pub fn app(state: AppState) -> Router {
    Router::new().fallback(dispatch).with_state(state)
}

async fn dispatch(State(state): State<AppState>, request: Request) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let span = tracing::info_span!(
        "http.server",
        otel.kind = "server",
        http.request.method = %method,
        http.route = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        trace_id = tracing::field::Empty,
    );
    // A client's traceparent makes this request part of its trace; without
    // one the trace is rooted here.
    world_telemetry::adopt_parent(&span, request.headers());
    let routed = AssertUnwindSafe(route(&state, request)).catch_unwind().instrument(span.clone()).await;
    let (label, response) = match routed {
        Ok(answer) => answer,
        Err(_) => {
            tracing::error!(%method, %path, "a request handler panicked");
            ("panic", wire::rest_failure(&Failure::of(FailureCode::Internal)))
        }
    };
    let status = response.status().as_u16();
    span.record(world_telemetry::attr::HTTP_ROUTE, label);
    span.record(world_telemetry::attr::HTTP_STATUS, status);
    if status >= 500 {
        span.record("otel.status_code", "ERROR");
    }
    let _entered = span.enter();
    let elapsed = started.elapsed();
    state.metrics.observe(label, status, elapsed);
    // Metrics and traces account for every request; the log keeps the ones that went wrong.
    let elapsed_ms = elapsed.as_secs_f64() * 1e3;
    if status >= 400 {
        tracing::info!(%method, route = label, status, elapsed_ms, "request");
    } else {
        tracing::debug!(%method, route = label, status, elapsed_ms, "request");
    }
    if method == Method::HEAD { strip_body(response) } else { response }
}

/// A GET route answering HEAD keeps its headers and the length it would have sent.
fn strip_body(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    if let Some(length) = body.size_hint().exact()
        && !parts.headers.contains_key(CONTENT_LENGTH)
    {
        parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    }
    Response::from_parts(parts, Body::empty())
}

async fn route(state: &AppState, request: Request) -> (&'static str, Response) {
    let (parts, body) = request.into_parts();
    let query = parts.uri.query();
    let matched = match router::resolve(&parts.method, parts.uri.path(), query) {
        Resolution::Matched(matched) => matched,
        Resolution::Redirect(location) => return ("redirect", wire::redirect(&parts.method, &location)),
        Resolution::MethodNotAllowed(allow) => return ("method_not_allowed", wire::method_not_allowed(&allow)),
        Resolution::NotFound => return ("not_found", wire::not_found()),
        Resolution::BadRequest => return ("bad_request", wire::malformed_request()),
    };
    let (core, surfaces) = (&state.core, &*state.surfaces);
    let headers = &parts.headers;
    let param = matched.param.as_str();
    let response = match matched.route {
        Route::Health => rest::health(core).await,
        Route::Head => rest::head(core, headers).await,
        Route::World => rest::world(core, headers, param).await,
        Route::Object => rest::object(core, headers, param, query).await,
        Route::ObjectsBySemanticId => rest::objects_by_semantic_id(core, headers, param, query).await,
        Route::LogEntry => rest::log_entry(core, headers, param).await,
        Route::LogPage => rest::log_page(core, headers, query).await,
        Route::Registry => rest::registry(core, headers, param).await,
        Route::Commit => rest::commit(core, headers, body, state.limits.body_read_timeout).await,
        Route::Receipt => rest::receipt(core, headers, param).await,
        Route::Session => rest::session(core, headers).await,
        Route::Calls => rest::calls(core, headers, query).await,
        Route::Ui => ui::asset(param),
        Route::AgentCard => card::handle(core, surfaces, headers).await,
        Route::A2aCard => card::handle_a2a(core, surfaces, headers, &state.public_url).await,
        Route::A2a => a2a::handle(core, surfaces, &state.limits, &state.metrics, headers, body).await,
        Route::Mcp => {
            let answer =
                mcp::handle(core, &state.surfaces, &state.callbacks, &state.origins, &state.limits, headers, body);
            oauth::challenge(&state.public_url, answer.await)
        }
        Route::Metrics => wire::bytes(
            http::StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            state.metrics.render_with(state.callbacks.in_use(), state.core.sent()).into_bytes(),
        ),
        Route::OAuth(oauth::Endpoint::Authorize) if parts.method == Method::HEAD => oauth::authorize_head(),
        Route::OAuth(endpoint) => {
            oauth::handle(core, &state.public_url, endpoint, query, headers, body, state.limits.body_read_timeout).await
        }
    };
    (matched.pattern, response)
}

/// Accepts connections until SIGINT or SIGTERM, each served by [`connection::serve`] under the
/// header and idle bounds of `limits`; then lets open connections finish for up to
/// [`SHUTDOWN_DRAIN`].
async fn serve_connections(listener: TcpListener, app: Router, limits: Limits, metrics: Arc<Metrics>) {
    use hyper_util::rt::{TokioExecutor, TokioTimer};
    use hyper_util::server::conn::auto;

    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    let builder = Arc::new(builder);
    // Every connection holds a receiver, so the sender learns when the last one has ended.
    let stopping = tokio::sync::watch::Sender::new(false);
    let mut signalled = std::pin::pin!(shutdown_signal());
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of descriptors, say: the connections already open still need serving.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut signalled => break,
        };
        // Without TCP_NODELAY small replies can wait out a delayed ACK (~40 ms).
        let _ = stream.set_nodelay(true);
        let serving = connection::serve(
            stream,
            app.clone(),
            Arc::clone(&builder),
            limits,
            Arc::clone(&metrics),
            stopping.subscribe(),
        );
        tokio::spawn(serving);
    }
    drop(listener);
    tracing::info!("stopping: draining open connections");
    stopping.send_replace(true);
    if tokio::time::timeout(SHUTDOWN_DRAIN, stopping.closed()).await.is_err() {
        tracing::warn!("drain deadline reached; closing remaining connections");
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        }
        Err(error) => {
            tracing::error!(%error, "cannot watch SIGTERM; stopping only on SIGINT");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Binds, prints `world-edge listening on http://ADDR` on stdout, serves until SIGINT or
/// SIGTERM, then drains open connections for up to [`SHUTDOWN_DRAIN`].
pub async fn serve(args: EdgeArgs) -> Result<(), ServeError> {
    let core = CoreClient::connect_lazy(&args.core)?;
    let public_url =
        args.public_url.as_deref().filter(|url| !url.trim().is_empty()).map(PublicUrl::parse).transpose()?;
    let state = AppState::with_limits(core, OriginPolicy::new(&args.allowed_origins), args.limits());
    let listener =
        TcpListener::bind(args.listen).await.map_err(|source| ServeError::Bind { address: args.listen, source })?;
    let address = listener.local_addr().map_err(|source| ServeError::Bind { address: args.listen, source })?;
    let state = state.with_public_url(public_url.unwrap_or_else(|| PublicUrl::from_listen(address)));
    {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        // Whoever started the edge reads this line to learn the port; a closed stdout must not
        // stop the edge from serving.
        let _ = writeln!(stdout, "world-edge listening on http://{address}");
        let _ = stdout.flush();
    }
    tracing::info!(%address, cores = ?args.core, public_url = state.public_url.as_str(), "world-edge serving");

    let (limits, metrics) = (state.limits, Arc::clone(&state.metrics));
    serve_connections(listener, app(state), limits, metrics).await;
    tracing::info!("world-edge stopped");
    Ok(())
}
