//! Logging and tracing for the World services, set up in one place: `tracing`
//! log lines on stderr (human or JSON) and, when an OTLP endpoint is
//! configured by the standard `OTEL_*` variables, spans exported over OTLP
//! (gRPC or HTTP/protobuf). W3C trace context is carried across HTTP headers
//! and gRPC metadata with the helpers here.

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// Span attribute names: OpenTelemetry conventions where they exist, the
/// project's own otherwise. Defined once so every span uses the same names.
pub mod attr {
    pub const RPC_SYSTEM: &str = "rpc.system";
    pub const RPC_METHOD: &str = "rpc.method";
    pub const HTTP_METHOD: &str = "http.request.method";
    pub const HTTP_ROUTE: &str = "http.route";
    pub const HTTP_STATUS: &str = "http.response.status_code";
    pub const MCP_METHOD: &str = "mcp.method.name";
    pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
    pub const JSONRPC_ID: &str = "jsonrpc.request.id";
    pub const TOOL_NAME: &str = "gen_ai.tool.name";
    pub const INVOCATION_ID: &str = "world.invocation.id";
    pub const TRANSITION: &str = "world.transition.id";
    pub const EPISODE: &str = "world.episode";
    pub const ENTRY_INDEX: &str = "world.entry.index";
    pub const OUTCOME: &str = "world.outcome";
    pub const INTERPRETER: &str = "world.interpreter.ref";
    pub const EXIT_STATUS: &str = "process.exit.code";
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug)]
pub struct TelemetryError(String);

impl std::fmt::Display for TelemetryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "telemetry: {}", self.0)
    }
}

impl std::error::Error for TelemetryError {}

/// Keeps the exporter alive; `shutdown` flushes what is still buffered.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Flushes and stops the exporter (call before the process exits).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider {
            let _ = provider.force_flush();
            let _ = provider.shutdown();
        }
    }
}

/// Whether the standard variables name an OTLP traces endpoint.
fn endpoint_configured() -> bool {
    ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|value| !value.trim().is_empty()))
}

/// Installs logging and, when configured, OTLP trace export. Call it from
/// inside the tokio runtime: the gRPC exporter needs one alive.
pub fn init(default_service_name: &str, format: LogFormat) -> Result<Telemetry, TelemetryError> {
    let filter = || {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,h2=warn,tower=warn,hyper=warn,opentelemetry=warn"))
    };
    // Colour only for a person at a terminal: a log file or collector gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(ansi);
    let fmt = match format {
        LogFormat::Human => fmt.boxed(),
        LogFormat::Json => fmt.json().with_current_span(true).with_span_list(false).boxed(),
    };
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let provider = if endpoint_configured() { Some(provider(default_service_name)?) } else { None };
    let registry = tracing_subscriber::registry().with(fmt.with_filter(filter()));
    match &provider {
        Some(provider) => {
            let tracer = provider.tracer("world");
            let otel = tracing_opentelemetry::layer().with_tracer(tracer).with_filter(filter());
            registry.with(otel).try_init()
        }
        None => registry.try_init(),
    }
    .map_err(|e| TelemetryError(e.to_string()))?;
    Ok(Telemetry { provider })
}

fn provider(default_service_name: &str) -> Result<SdkTracerProvider, TelemetryError> {
    use opentelemetry_otlp::{Protocol, WithExportConfig as _};
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|_| "http/protobuf".to_owned());
    let exporter = match protocol.trim() {
        "grpc" => opentelemetry_otlp::SpanExporter::builder().with_tonic().build(),
        "http/protobuf" => {
            opentelemetry_otlp::SpanExporter::builder().with_http().with_protocol(Protocol::HttpBinary).build()
        }
        other => {
            return Err(TelemetryError(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL {other:?} is not supported: use grpc or http/protobuf"
            )));
        }
    }
    .map_err(|e| TelemetryError(e.to_string()))?;
    let service_name = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| default_service_name.to_owned());
    let resource = opentelemetry_sdk::Resource::builder().with_service_name(service_name).build();
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
}

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

struct HeaderInjector<'a>(&'a mut http::HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) =
            (http::HeaderName::from_bytes(key.as_bytes()), http::HeaderValue::from_str(&value))
        {
            self.0.insert(name, value);
        }
    }
}

/// Makes `span` a child of the trace context in `headers` (HTTP headers or
/// gRPC metadata), when there is one, and records the trace id in the span's
/// `trace_id` field (declare it `Empty`) so every log line inside carries it.
pub fn adopt_parent(span: &tracing::Span, headers: &http::HeaderMap) {
    let parent = opentelemetry::global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(headers)));
    let _ = span.set_parent(parent);
    // Without an exporter the span has no OpenTelemetry context; the
    // caller's traceparent still names the trace.
    let id = trace_id(span).or_else(|| {
        let traceparent = headers.get("traceparent")?.to_str().ok()?;
        let id = traceparent.split('-').nth(1)?;
        (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_ascii_lowercase())
    });
    if let Some(id) = id {
        span.record("trace_id", id);
    }
}

/// Makes `span` a child of a W3C `traceparent` (and optional `tracestate`)
/// given as text, e.g. from MCP's `params._meta`.
pub fn adopt_traceparent(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    let mut headers = http::HeaderMap::new();
    if let Ok(value) = http::HeaderValue::from_str(traceparent) {
        headers.insert("traceparent", value);
    }
    if let Some(Ok(value)) = tracestate.map(http::HeaderValue::from_str) {
        headers.insert("tracestate", value);
    }
    adopt_parent(span, &headers);
}

/// Writes the context of `span` as `traceparent`/`tracestate` into `headers`.
pub fn inject(span: &tracing::Span, headers: &mut http::HeaderMap) {
    let context = span.context();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&context, &mut HeaderInjector(headers)));
}

/// Writes the context of `span` into a gRPC request's metadata.
pub fn inject_grpc<T>(span: &tracing::Span, request: &mut tonic::Request<T>) {
    let mut headers = http::HeaderMap::new();
    inject(span, &mut headers);
    for (name, value) in headers.iter() {
        if let (Ok(key), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(name.as_str().as_bytes()),
            tonic::metadata::MetadataValue::try_from(value.as_bytes()),
        ) {
            request.metadata_mut().insert(key, value);
        }
    }
}

/// The trace id of `span`'s context as 32 hex digits, when it has one.
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt as _;
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context.is_valid().then(|| span_context.trace_id().to_string())
}
