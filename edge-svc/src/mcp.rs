//! `POST /mcp/`: MCP streamable HTTP (reference-edge §6, §7; DESIGN "Edge").
//!
//! The checks run in DESIGN's order: Authorization first (every denial is the 401
//! text/plain), admission and the tool surface (a host callback; a failure is the whole-POST
//! envelope), Origin (403 when present and not allowed), the 4 MiB body cap, Content-Type,
//! Accept, MCP-Protocol-Version, the batch rules, then each message. Replies are one SSE event;
//! JSON-RPC errors of a message (unknown method, unknown tool, bad params) travel inside it,
//! while any failed host callback answers the whole POST with the frozen envelope.
//!
//! The endpoint is stateless, as the reference's: no `Mcp-Session-Id`, `initialize` is not
//! required first, and every POST's session is checked afresh. A `tools/call` goes to the core
//! as one invocation that resolves the session, finds the tool on the surface current now and
//! runs it; `tools/list` is answered from the admitted surface; a POST no call of which reached
//! the core is admitted before it is answered ([`Verdict`]), so a session refusal answers it
//! whatever else it met, as admission's place in the order wants.

use std::collections::BTreeMap;
use std::time::Duration;
use tracing::Instrument as _;

use axum::body::Body;
use axum::response::Response;
use http::header::{ACCEPT, CONTENT_TYPE, ORIGIN};
use http::{HeaderMap, StatusCode};
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::time::Instant;
use world_model::{Failure, FailureCode, McpNameError, escape_surface, go_quote};
use world_proto::v1 as pb;

use crate::body::{BodyError, MCP_LIMIT, read_capped};
use crate::callback::{CallbackError, Callbacks};
use crate::card::{CARD_NAME, CARD_VERSION};
use crate::core::CoreClient;
use crate::json::{self, compact_raw, go_fields, go_members, go_string};
use crate::server::AppState;
use crate::session::{self, Forwarded, Verdict, refuses_session};
use crate::surface::Surface;
use crate::wire;

/// The whole-POST message for a body over the cap or unreadable (reference-edge §6.3 step 1).
pub const INVALID_BODY: &str = "invalid MCP request body";
pub const ORIGIN_REFUSED: &str = "Origin is not allowed";
/// Newest first; 2026-07-28 is deliberately absent, as in the reference (§6.1).
pub const SUPPORTED_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// Assumed when the header is absent or empty; the only version that allows batches.
pub const DEFAULT_VERSION: &str = "2025-03-26";

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

/// How long an invocation's reply may take beyond the moment its caller stops waiting, so
/// the core's own typed deadline answer arrives, and its subprocess ends, while the slot is
/// still held.
const INVOKE_GRACE: Duration = Duration::from_secs(2);

/// Which browser origins may call `/mcp/` (MCP's DNS-rebinding defence). Loopback origins are
/// always allowed, since a local client is the common case and rebinding attacks arrive from
/// other hosts; `--allowed-origins` adds exact origins, or `*` for any.
#[derive(Clone, Debug, Default)]
pub struct OriginPolicy {
    allowed: Vec<String>,
    any: bool,
}

impl OriginPolicy {
    pub fn new<S: AsRef<str>>(allowed: &[S]) -> OriginPolicy {
        let allowed: Vec<String> = allowed
            .iter()
            .map(|origin| origin.as_ref().trim().trim_end_matches('/').to_ascii_lowercase())
            .filter(|origin| !origin.is_empty())
            .collect();
        OriginPolicy { any: allowed.iter().any(|origin| origin == "*"), allowed }
    }

    pub fn allows(&self, origin: &str) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        self.any || is_loopback_origin(&origin) || self.allowed.contains(&origin)
    }

    /// Whether a request with `headers` may go on: one without an `Origin` always may.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        headers.get(ORIGIN).is_none_or(|origin| self.allows(&String::from_utf8_lossy(origin.as_bytes())))
    }
}

fn is_loopback_origin(origin: &str) -> bool {
    let Some(authority) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        match bracketed.split_once(']') {
            Some((host, rest)) if rest.is_empty() || is_port(rest) => host,
            _ => return false,
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) if is_port(&format!(":{port}")) => host,
            Some(_) => return false,
            None => authority,
        }
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

fn is_port(text: &str) -> bool {
    text.strip_prefix(':')
        .is_some_and(|port| !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit()))
}

/// How long a denied POST's body may take to arrive before the denial is sent regardless.
const DENIAL_BODY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

pub async fn handle(state: &AppState, headers: &HeaderMap, body: Body) -> Response {
    let deadline = Instant::now() + state.limits.request_deadline;
    let credential = match session::precheck(headers) {
        Ok(credential) => credential,
        Err(denial) => {
            // Read the body (bounded) before answering: a body left unread makes hyper close the
            // connection after the 401, under a client that reuses it at once for its next
            // request (an OAuth client's discovery follows its first 401 immediately).
            let _ = read_capped(body, MCP_LIMIT, DENIAL_BODY_WAIT).await;
            return wire::mcp_denial(denial);
        }
    };
    let session = PostSession {
        core: &state.core,
        callbacks: &state.callbacks,
        credential,
        deadline,
        surface: tokio::sync::OnceCell::new(),
        verdict: Verdict::default(),
    };
    let response = answer(state, headers, body, &session).await;
    match session.verdict.refusal(|| async { session.surface().await.map(|_| ()) }).await {
        Some(refusal) => wire::mcp_callback_failure(&refusal, RawValue::NULL),
        None => response,
    }
}

/// The POST's answer past Authorization, its session aside.
async fn answer(state: &AppState, headers: &HeaderMap, body: Body, session: &PostSession<'_>) -> Response {
    let null = RawValue::NULL;
    if !state.origins.admits(headers) {
        return wire::mcp_transport_error(StatusCode::FORBIDDEN, null, INVALID_REQUEST, ORIGIN_REFUSED);
    }
    let bytes = match read_body(state, body, session.deadline).await {
        Ok(bytes) => bytes,
        // The seed's deadline answer: the body's time is the POST's.
        Err(BodyError::TooSlow { .. }) => return wire::mcp_callback_failure(&CallbackError::TimedOut, null),
        Err(_) => return wire::mcp_host_envelope(INVALID_BODY, null),
    };
    let post_id = top_level_id(&bytes);
    let bad_request =
        |message: &str| wire::mcp_transport_error(StatusCode::BAD_REQUEST, &post_id, INVALID_REQUEST, message);
    if !content_type_is_json(headers) {
        return bad_request("Content-Type must be application/json");
    }
    if !accepts_json_and_sse(headers) {
        return bad_request("Accept must list both application/json and text/event-stream");
    }
    let version = match protocol_version(headers) {
        Ok(version) => version,
        Err(sent) => {
            return bad_request(&format!(
                "unsupported MCP-Protocol-Version {} (supported: {})",
                go_quote(&sent),
                SUPPORTED_VERSIONS.join(", ")
            ));
        }
    };
    let post = Post { version, session };
    let body = bytes.trim_ascii();
    if body.first() == Some(&b'[') { post.batch(version, body).await } else { post.single(body).await }
}

/// The body under the 4 MiB cap, within the POST's aggregate deadline (the seed's 20 s) or the
/// body read timeout, whichever ends first.
async fn read_body(state: &AppState, body: Body, deadline: Instant) -> Result<axum::body::Bytes, BodyError> {
    let within = deadline.saturating_duration_since(Instant::now()).min(state.limits.body_read_timeout);
    read_capped(body, MCP_LIMIT, within).await
}

/// The top-level `id` of a body that is one JSON object, for answering the POST as a whole;
/// `null` for anything else (arrays included), as mcphttp extracts it (§6.3 step 2).
pub fn top_level_id(bytes: &[u8]) -> Box<RawValue> {
    serde_json::from_slice::<&RawValue>(bytes)
        .ok()
        .and_then(|value| go_fields(value, ["id"]).ok().flatten())
        .and_then(|[id]| id.map(compact_raw))
        .unwrap_or_else(|| RawValue::NULL.to_owned())
}

/// A media type as Go's `mime.ParseMediaType` names it: lowercased, parameters dropped.
fn media_type(value: &str) -> Option<String> {
    let media = value.split(';').next()?.trim().to_ascii_lowercase();
    (!media.is_empty()).then_some(media)
}

/// The first Content-Type (Go's `Header.Get`) must be `application/json`, parameters allowed.
pub fn content_type_is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(media_type)
        .is_some_and(|media| media == "application/json")
}

/// Across every Accept value both types must be listed literally: `*/*` and `application/*`
/// do not count, and `q` is ignored (§6.3 step 5).
pub fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let listed: Vec<String> = headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(media_type)
        .collect();
    ["application/json", "text/event-stream"].iter().all(|wanted| listed.iter().any(|media| media == wanted))
}

/// The effective protocol version, or the unsupported value as sent.
pub fn protocol_version(headers: &HeaderMap) -> Result<&'static str, String> {
    let Some(value) = headers.get("mcp-protocol-version") else {
        return Ok(DEFAULT_VERSION);
    };
    let text = String::from_utf8_lossy(value.as_bytes());
    if text.is_empty() {
        return Ok(DEFAULT_VERSION);
    }
    SUPPORTED_VERSIONS.iter().find(|version| **version == text).copied().ok_or_else(|| text.into_owned())
}

/// One message of a POST, classified (§6.5).
#[derive(Debug)]
pub enum Message<'a> {
    Request {
        id: Box<RawValue>,
        method: String,
        params: Option<&'a RawValue>,
    },
    /// A notification or a response: accepted, answered with nothing.
    Ignored,
}

/// Why a message aborts the POST: the 400 it is answered with.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    pub code: i64,
    pub message: String,
    /// The message's id as sent, `null` when absent or unreadable.
    pub id: String,
}

impl Refused {
    fn response(&self) -> Response {
        let id = RawValue::from_string(self.id.clone()).unwrap_or_else(|_| RawValue::NULL.to_owned());
        wire::mcp_transport_error(StatusCode::BAD_REQUEST, &id, self.code, &self.message)
    }
}

pub fn classify(raw: &[u8]) -> Result<Message<'_>, Refused> {
    let invalid_json = |detail: String| Refused {
        code: PARSE_ERROR,
        message: format!("invalid JSON: {detail}"),
        id: "null".to_owned(),
    };
    if raw.trim_ascii().is_empty() {
        // Go's own words for an empty document.
        return Err(invalid_json("unexpected end of JSON input".to_owned()));
    }
    let value = serde_json::from_slice::<&RawValue>(raw).map_err(|error| invalid_json(error.to_string()))?;
    let fields = go_fields(value, ["jsonrpc", "id", "method", "params", "result", "error"])
        .map_err(|error| invalid_json(error.to_string()))?;
    // `null` decodes into the message as a no-op, leaving every field empty.
    let [jsonrpc, id, method, params, result, error] = fields.unwrap_or_default();
    let jsonrpc = go_string(jsonrpc).map_err(|error| invalid_json(error.to_string()))?;
    let method = go_string(method).map_err(|error| invalid_json(error.to_string()))?;
    let id_text = id.map(|id| compact_raw(id).get().to_owned()).unwrap_or_else(|| "null".to_owned());
    if jsonrpc != "2.0" {
        return Err(Refused { code: INVALID_REQUEST, message: r#"expected jsonrpc: "2.0""#.to_owned(), id: id_text });
    }
    // An `"id": null` member is present: such a message is a request answered with id null.
    let has_method = !method.is_empty();
    match (has_method, id) {
        (true, Some(id)) => Ok(Message::Request { id: compact_raw(id), method, params }),
        (true, None) => Ok(Message::Ignored),
        (false, Some(_)) if result.is_some() || error.is_some() => Ok(Message::Ignored),
        _ => Err(Refused {
            code: INVALID_REQUEST,
            message: "not a JSON-RPC request, notification or response".to_owned(),
            id: id_text,
        }),
    }
}

/// One tool of the session's surface as `tools/list` shows it (mcphttp's struct order).
#[derive(Clone, Debug, Serialize)]
pub struct Tool {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(rename = "inputSchema")]
    pub input_schema: Box<RawValue>,
    #[serde(rename = "outputSchema", skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Box<RawValue>>,
}

#[derive(Debug, thiserror::Error)]
pub enum SurfaceError {
    #[error(transparent)]
    Name(#[from] McpNameError),
    #[error("transition {}: {reason}", go_quote(.id))]
    Schema { id: String, reason: String },
}

/// The session's tools: names escaped (an over-long or colliding name refuses the whole
/// surface rather than dropping a tool), schemas normalised, sorted by name (§6.8, §7.2–7.3).
pub fn tool_surface(descriptors: &[pb::Descriptor]) -> Result<Vec<Tool>, SurfaceError> {
    let names = escape_surface(descriptors.iter().map(|descriptor| descriptor.id.as_str()))?;
    let mut tools = Vec::with_capacity(descriptors.len());
    for (descriptor, name) in descriptors.iter().zip(names) {
        let schema_error = |reason: String| SurfaceError::Schema { id: descriptor.id.clone(), reason };
        let input_schema = input_schema(&descriptor.input_schema).map_err(schema_error)?;
        let output_schema = if descriptor.output_schema.is_empty() {
            None
        } else {
            let raw = serde_json::from_slice::<&RawValue>(&descriptor.output_schema)
                .map_err(|error| schema_error(format!("output schema: {error}")))?;
            Some(compact_raw(raw))
        };
        tools.push(Tool { name, description: descriptor.description.clone(), input_schema, output_schema });
    }
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(tools)
}

/// An input schema must be an object whose `type`, when present, is `"object"` (passed
/// through); one without `type` gains `"type":"object"` and is re-encoded as Go re-encodes a
/// map: keys sorted, the last of duplicate keys kept.
pub fn input_schema(bytes: &[u8]) -> Result<Box<RawValue>, String> {
    let value = serde_json::from_slice::<&RawValue>(bytes).map_err(|error| format!("input schema: {error}"))?;
    let members = match go_members(value) {
        Ok(Some(members)) => members,
        _ => return Err("the input schema is not a JSON object".to_owned()),
    };
    if let Some(kind) = json::member(&members, "type") {
        return match serde_json::from_str::<String>(kind.get()) {
            Ok(kind) if kind == "object" => Ok(compact_raw(value)),
            _ => Err(r#"the input schema's type is not "object""#.to_owned()),
        };
    }
    let mut sorted: BTreeMap<String, &RawValue> = members.into_iter().collect();
    let object = RawValue::from_string(r#""object""#.to_owned()).map_err(|error| error.to_string())?;
    sorted.insert("type".to_owned(), &object);
    let mut text = Vec::from(&b"{"[..]);
    for (index, (key, raw)) in sorted.iter().enumerate() {
        if index > 0 {
            text.push(b',');
        }
        text.extend_from_slice(&json::marshal(key));
        text.push(b':');
        text.extend_from_slice(&json::compact(raw.get().as_bytes()));
    }
    text.push(b'}');
    let text = String::from_utf8(text).map_err(|error| error.to_string())?;
    RawValue::from_string(text).map_err(|error| error.to_string())
}

/// One POST's caller: what its host callbacks need, and what it has learnt of its session.
struct PostSession<'a> {
    core: &'a CoreClient,
    callbacks: &'a Callbacks,
    credential: Forwarded,
    deadline: Instant,
    /// The admitted surface, once `tools/list` (or the session check) asked for it.
    surface: tokio::sync::OnceCell<Result<std::sync::Arc<Surface>, CallbackError>>,
    verdict: Verdict<CallbackError>,
}

impl PostSession<'_> {
    /// The session's surface, admitted once per POST (a host callback); a surface that has no
    /// MCP tools refuses the POST as a failed callback.
    async fn surface(&self) -> Result<&Surface, CallbackError> {
        let admitted = self
            .surface
            .get_or_init(|| async {
                let admitted = self
                    .callbacks
                    .run(self.deadline, |_| {
                        let (core, credential) = (self.core.clone(), self.credential.clone());
                        async move { core.admit(&credential).await }
                    })
                    .await?;
                if let Err(error) = admitted.surface.tools() {
                    // The reference's operator line; the caller sees only "host callback failed".
                    tracing::error!("mcp refusal: tools/list -: {error:?}");
                    return Err(CallbackError::Failed(Failure::of(FailureCode::Unavailable)));
                }
                Ok(admitted.surface)
            })
            .await;
        self.verdict.heard(admitted.as_ref().err().cloned());
        admitted.as_deref().map_err(Clone::clone)
    }
}

/// One POST after its checks.
struct Post<'a> {
    /// The negotiated MCP-Protocol-Version of this POST.
    version: &'static str,
    session: &'a PostSession<'a>,
}

#[derive(Serialize)]
struct Reply<'a, R: ?Sized> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    result: &'a R,
}

fn reply<R: Serialize + ?Sized>(id: &RawValue, result: &R) -> Vec<u8> {
    json::marshal(&Reply { jsonrpc: "2.0", id, result })
}

/// The `tools/list` reply, written into a buffer of its final size: with a large registry it
/// is the biggest body the edge writes.
fn tools_reply(id: &RawValue, tools: &RawValue) -> Vec<u8> {
    let envelope = r#"{"jsonrpc":"2.0","id":,"result":{"tools":}}"#.len();
    json::marshal_sized(
        &Reply { jsonrpc: "2.0", id, result: &ToolList { tools } },
        envelope + id.get().len() + tools.get().len(),
    )
}

// The reference builds the `initialize` result as a Go map: keys in bytewise order.
#[derive(Serialize)]
struct Initialized {
    capabilities: Capabilities,
    #[serde(rename = "protocolVersion")]
    protocol_version: &'static str,
    #[serde(rename = "serverInfo")]
    server_info: ServerInfo,
}

#[derive(Serialize)]
struct Capabilities {
    tools: ToolsCapability,
}

#[derive(Serialize)]
struct ToolsCapability {
    #[serde(rename = "listChanged")]
    list_changed: bool,
}

#[derive(Serialize)]
struct ServerInfo {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize)]
struct ToolList<'a> {
    tools: &'a RawValue,
}

#[derive(Serialize)]
struct TextContent<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct CallResult<'a> {
    content: [TextContent<'a>; 1],
    #[serde(rename = "structuredContent")]
    structured_content: &'a RawValue,
    /// Set when the output says `"ok": false`, so a client that only reads `isError` sees
    /// the refusal; absent otherwise (the seed's success bytes are unchanged).
    #[serde(rename = "isError", skip_serializing_if = "std::ops::Not::not")]
    is_error: bool,
}

#[derive(Serialize)]
struct CallError<'a> {
    content: [TextContent<'a>; 1],
    #[serde(rename = "isError")]
    is_error: bool,
}

#[derive(Serialize)]
struct Empty {}

/// The version `initialize` answers: the client's when supported, else the newest (the
/// header is irrelevant here, and a params decode error is ignored).
pub fn negotiate(params: Option<&RawValue>) -> &'static str {
    let asked = params
        .and_then(|params| go_fields(params, ["protocolversion"]).ok().flatten())
        .and_then(|[version]| go_string(version).ok())
        .unwrap_or_default();
    SUPPORTED_VERSIONS.iter().find(|version| **version == asked).copied().unwrap_or(SUPPORTED_VERSIONS[0])
}

impl Post<'_> {
    async fn single(&self, body: &[u8]) -> Response {
        match classify(body) {
            Err(refused) => refused.response(),
            Ok(Message::Ignored) => wire::mcp_accepted(),
            Ok(Message::Request { id, method, params }) => match self.dispatch(&id, &method, params).await {
                Ok(answer) => wire::mcp_sse(&answer),
                Err(error) => wire::mcp_callback_failure(&error, &id),
            },
        }
    }

    /// Items run in order, each with its own callbacks; a bad item or a failed callback ends
    /// the POST there, even though earlier items may have committed (§6.4).
    async fn batch(&self, version: &str, body: &[u8]) -> Response {
        let null = RawValue::NULL;
        let refuse = |code: i64, message: &str| wire::mcp_transport_error(StatusCode::BAD_REQUEST, null, code, message);
        if version != DEFAULT_VERSION {
            return refuse(
                INVALID_REQUEST,
                &format!("batch requests are not supported under protocol version {version}"),
            );
        }
        let items = match serde_json::from_slice::<Vec<&RawValue>>(body) {
            Ok(items) => items,
            Err(error) => return refuse(PARSE_ERROR, &format!("invalid JSON: {error}")),
        };
        if items.is_empty() {
            return refuse(INVALID_REQUEST, "empty batch");
        }
        let mut answers: Vec<Vec<u8>> = Vec::new();
        for item in items {
            match classify(item.get().as_bytes()) {
                Err(refused) => return refused.response(),
                Ok(Message::Ignored) => {}
                Ok(Message::Request { id, method, params }) => match self.dispatch(&id, &method, params).await {
                    Ok(answer) => answers.push(answer),
                    Err(error) => return wire::mcp_callback_failure(&error, null),
                },
            }
        }
        if answers.is_empty() {
            return wire::mcp_accepted();
        }
        let mut data = vec![b'['];
        data.extend_from_slice(&answers.join(&b","[..]));
        data.push(b']');
        wire::mcp_sse(&data)
    }

    /// One request's JSON-RPC reply, or the host failure that answers the whole POST, in
    /// its own span (a child of the `params._meta.traceparent` the client sent, if any).
    async fn dispatch(&self, id: &RawValue, method: &str, params: Option<&RawValue>) -> Result<Vec<u8>, CallbackError> {
        let span = tracing::info_span!(
            "mcp.message",
            otel.name = method,
            mcp.method.name = method,
            mcp.protocol.version = self.version,
            jsonrpc.request.id = id.get(),
            gen_ai.tool.name = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        if let Some((traceparent, tracestate)) = params.and_then(meta_trace_context) {
            world_telemetry::adopt_traceparent(&span, &traceparent, tracestate.as_deref());
        }
        let answer = self.dispatch_in_span(id, method, params).instrument(span.clone()).await;
        if answer.is_err() {
            span.record("otel.status_code", "ERROR");
        }
        answer
    }

    async fn dispatch_in_span(
        &self,
        id: &RawValue,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Vec<u8>, CallbackError> {
        match method {
            "initialize" => Ok(reply(
                id,
                &Initialized {
                    capabilities: Capabilities { tools: ToolsCapability { list_changed: false } },
                    protocol_version: negotiate(params),
                    server_info: ServerInfo { name: CARD_NAME, version: CARD_VERSION },
                },
            )),
            "ping" => Ok(reply(id, &Empty {})),
            "tools/list" => match self.session.surface().await?.tools() {
                Ok(tools) => Ok(tools_reply(id, &tools.json)),
                // The admission refused a surface without tools already.
                Err(_) => Err(CallbackError::Failed(Failure::of(FailureCode::Unavailable))),
            },
            "tools/call" => self.call(id, params).await,
            _ => Ok(wire::mcp_error_object(id, METHOD_NOT_FOUND, &format!("method not found: {}", go_quote(method)))),
        }
    }

    /// One invocation: the core finds the tool on the session's surface and runs it. A tool not
    /// there is unknown (unknown and ungranted are one answer); arguments that are not an object
    /// fail the host callback; arguments the input schema refuses are the tool's own error.
    async fn call(&self, id: &RawValue, params: Option<&RawValue>) -> Result<Vec<u8>, CallbackError> {
        let (name, arguments) = match tool_call(params) {
            Ok(call) => call,
            Err(detail) => {
                return Ok(wire::mcp_error_object(id, INVALID_PARAMS, &format!("invalid params: {detail}")));
            }
        };
        tracing::Span::current().record(world_telemetry::attr::TOOL_NAME, name.as_str());
        let request = pb::InvokeRequest {
            surface: "mcp".into(),
            // The core mints a fresh random task id: MCP ids give no idempotency.
            task_id: String::new(),
            arguments: arguments.map(|arguments| arguments.get().as_bytes().to_vec()).unwrap_or_default(),
            mcp_tool: name.clone(),
            ..Default::default()
        };
        let session = self.session;
        let invoked = session
            .callbacks
            .run(session.deadline, |until| {
                let (core, credential) = (session.core.clone(), session.credential.clone());
                async move {
                    let timeout = until.saturating_duration_since(Instant::now()) + INVOKE_GRACE;
                    core.invoke(&credential, request, timeout).await
                }
            })
            .await;
        session.verdict.heard(match &invoked {
            Err(refusal @ CallbackError::Failed(failure)) if refuses_session(failure) => Some(refusal.clone()),
            _ => None,
        });
        match invoked {
            Ok(invoked) => Ok(tool_result(id, &invoked.output)),
            Err(CallbackError::Failed(failure)) if failure.code == FailureCode::NotAuthorized => {
                Ok(wire::mcp_error_object(id, INVALID_PARAMS, &format!("unknown tool {}", go_quote(&name))))
            }
            Err(CallbackError::Failed(failure)) => match wire::mcp_tool_error_text(&failure) {
                Some(text) => {
                    Ok(reply(id, &CallError { content: [TextContent { kind: "text", text }], is_error: true }))
                }
                None => Err(CallbackError::Failed(failure)),
            },
            Err(error) => Err(error),
        }
    }
}

/// A `tools/call`'s tool name and arguments as sent, or why its params do not decode.
fn tool_call(params: Option<&RawValue>) -> Result<(String, Option<&RawValue>), String> {
    let params = params.ok_or_else(|| "unexpected end of JSON input".to_owned())?;
    let [name, arguments] = go_fields(params, ["name", "arguments"]).map_err(|e| e.to_string())?.unwrap_or_default();
    Ok((go_string(name).map_err(|e| e.to_string())?, arguments))
}

/// A committed call's output as the tool result: the bytes verbatim as text and the same JSON,
/// compacted, as `structuredContent` (§6.7).
fn tool_result(id: &RawValue, output: &[u8]) -> Vec<u8> {
    if output.is_empty() {
        return wire::mcp_error_object(id, INTERNAL_ERROR, "host callback returned no result");
    }
    let Ok(value) = serde_json::from_slice::<&RawValue>(output) else {
        return wire::mcp_error_object(id, INTERNAL_ERROR, "host callback returned invalid JSON");
    };
    let text = String::from_utf8_lossy(output);
    let structured = compact_raw(value);
    let is_error = says_not_ok(value);
    reply(
        id,
        &CallResult { content: [TextContent { kind: "text", text: &text }], structured_content: &structured, is_error },
    )
}

/// Whether a tool output is an object whose top-level `ok` is `false`.
fn says_not_ok(output: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Verdict {
        ok: Option<serde_json::Value>,
    }
    serde_json::from_str::<Verdict>(output.get()).is_ok_and(|v| v.ok == Some(serde_json::Value::Bool(false)))
}

/// `params._meta.traceparent` (and `tracestate`), the MCP way to carry trace context.
fn meta_trace_context(params: &RawValue) -> Option<(String, Option<String>)> {
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "_meta")]
        meta: Option<Meta>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        traceparent: Option<String>,
        tracestate: Option<String>,
    }
    let meta = serde_json::from_str::<Params>(params.get()).ok()?.meta?;
    Some((meta.traceparent?, meta.tracestate))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzzing::{member, spelling};
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn origin_policy() {
        let default = OriginPolicy::new::<&str>(&[]);
        for origin in [
            "http://localhost",
            "http://localhost:3000",
            "https://127.0.0.1:7644",
            "http://[::1]:8080",
            "HTTP://LOCALHOST",
        ] {
            assert!(default.allows(origin), "{origin}");
        }
        for origin in [
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "http://localhost:80x",
            "null",
            "",
            "file://localhost",
            "http://[::1]x",
        ] {
            assert!(!default.allows(origin), "{origin}");
        }
        let configured = OriginPolicy::new(&["https://app.example/", " https://b.example "]);
        assert!(configured.allows("https://app.example"));
        assert!(configured.allows("https://b.example"));
        assert!(!configured.allows("https://c.example"));
        assert!(OriginPolicy::new(&["*"]).allows("https://anything.example"));
    }

    #[test]
    fn the_post_id_is_the_top_level_id_of_one_object() {
        assert_eq!(top_level_id(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).get(), "7");
        assert_eq!(top_level_id(br#"{"ID": [1, "<"]}"#).get(), r#"[1,"\u003c"]"#);
        assert_eq!(top_level_id(br#"[{"id":1}]"#).get(), "null");
        assert_eq!(top_level_id(b"junk").get(), "null");
        assert_eq!(top_level_id(br#"{"method":"x"}"#).get(), "null");
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        }
        map
    }

    #[test]
    fn header_requirements_are_literal() {
        for (value, ok) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            (" application/json ", true),
            ("text/json", false),
            ("application/json-seq", false),
            ("", false),
        ] {
            assert_eq!(content_type_is_json(&headers(&[("content-type", value)])), ok, "{value:?}");
        }
        assert!(!content_type_is_json(&HeaderMap::new()));
        let accept = |values: &[&str]| {
            accepts_json_and_sse(&headers(&values.iter().map(|v| ("accept", *v)).collect::<Vec<_>>()))
        };
        assert!(accept(&["application/json, text/event-stream"]));
        assert!(accept(&["text/event-stream;q=0.5", "APPLICATION/JSON"]));
        assert!(!accept(&["*/*"]));
        assert!(!accept(&["application/json, */*"]));
        assert!(!accept(&["application/*, text/event-stream"]));
        assert!(!accept(&[]));
        assert_eq!(protocol_version(&HeaderMap::new()), Ok("2025-03-26"));
        assert_eq!(protocol_version(&headers(&[("mcp-protocol-version", "")])), Ok("2025-03-26"));
        for version in SUPPORTED_VERSIONS {
            assert_eq!(protocol_version(&headers(&[("mcp-protocol-version", version)])), Ok(version));
        }
        assert_eq!(protocol_version(&headers(&[("mcp-protocol-version", "2026-07-28")])), Err("2026-07-28".into()));
    }

    fn row(body: &str) -> String {
        match classify(body.as_bytes()) {
            Ok(Message::Request { id, method, params }) => {
                format!("request id={} method={method} params={}", id.get(), params.map(|p| p.get()).unwrap_or("-"))
            }
            Ok(Message::Ignored) => "ignored".to_owned(),
            Err(refused) if refused.code == PARSE_ERROR => {
                assert!(refused.message.starts_with("invalid JSON: "), "{}", refused.message);
                format!("parse id={}", refused.id)
            }
            Err(refused) => format!("{} {} id={}", refused.code, refused.message, refused.id),
        }
    }

    #[test]
    fn messages_are_classified_as_mcphttp_does() {
        let table = [
            (r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#, "request id=7 method=ping params=-"),
            (r#"{"jsonrpc":"2.0","id":null,"method":"ping","params":{}}"#, "request id=null method=ping params={}"),
            (r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, "ignored"),
            (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, "ignored"),
            (r#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#, "ignored"),
            (r#"{"jsonrpc":"2.0","id":1}"#, "-32600 not a JSON-RPC request, notification or response id=1"),
            (r#"{"jsonrpc":"2.0","id":1,"method":""}"#, "-32600 not a JSON-RPC request, notification or response id=1"),
            (r#"{"jsonrpc":"2.0"}"#, "-32600 not a JSON-RPC request, notification or response id=null"),
            (r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#, r#"-32600 expected jsonrpc: "2.0" id="a""#),
            ("null", r#"-32600 expected jsonrpc: "2.0" id=null"#),
            (r#"{"jsonrpc":2,"id":1,"method":"ping"}"#, "parse id=null"),
            ("{", "parse id=null"),
            ("", "parse id=null"),
            ("7", "parse id=null"),
            (r#"{"jsonrpc":"2.0","id":1,"method":"ping"} x"#, "parse id=null"),
        ];
        for (body, want) in table {
            assert_eq!(row(body), want, "{body}");
        }
        assert_eq!(classify(b"  ").unwrap_err().message, "invalid JSON: unexpected end of JSON input");
    }

    fn descriptor(id: &str, input: &str, output: &str, description: &str) -> pb::Descriptor {
        pb::Descriptor {
            id: id.into(),
            description: description.into(),
            input_schema: input.as_bytes().to_vec(),
            output_schema: output.as_bytes().to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn the_tool_surface_is_escaped_normalised_and_sorted() {
        let surface = crate::surface::Surface::new(
            "d".into(),
            vec![
                descriptor("tools.echo", r#"{"type":"object"}"#, r#"{"type":"object"}"#, "Echo"),
                descriptor("a_b/c", r#"{"required":["x"],"properties":{"x":{"type":"string"}}}"#, "", ""),
            ],
        );
        let tools = &surface.tools().as_ref().unwrap().json;
        let listed = String::from_utf8(json::marshal(&ToolList { tools })).unwrap();
        assert_eq!(
            listed,
            r#"{"tools":[{"name":"a_ub_sc","inputSchema":{"properties":{"x":{"type":"string"}},"required":["x"],"type":"object"}},{"name":"tools_decho","description":"Echo","inputSchema":{"type":"object"},"outputSchema":{"type":"object"}}]}"#
        );
        let long = format!("{}.{}.{}", "a".repeat(30), "b".repeat(30), "c".repeat(10));
        assert!(matches!(
            tool_surface(&[descriptor(&long, "{}", "", "")]),
            Err(SurfaceError::Name(McpNameError::EscapedTooLong { .. }))
        ));
        for bad in [r#"{"type":"string"}"#, "[]", "null", r#"{"type":null}"#] {
            assert!(tool_surface(&[descriptor("x", bad, "", "")]).is_err(), "{bad}");
        }
    }

    #[test]
    fn initialize_negotiates_the_version() {
        let raw = |text: &str| RawValue::from_string(text.to_owned()).unwrap();
        assert_eq!(negotiate(None), "2025-11-25");
        assert_eq!(negotiate(Some(&raw(r#"{"protocolVersion":"2025-06-18"}"#))), "2025-06-18");
        assert_eq!(negotiate(Some(&raw(r#"{"protocolVersion":"2025-03-26"}"#))), "2025-03-26");
        assert_eq!(negotiate(Some(&raw(r#"{"protocolVersion":"1999-01-01"}"#))), "2025-11-25");
        assert_eq!(negotiate(Some(&raw(r#"{"protocolVersion":5}"#))), "2025-11-25");
        assert_eq!(negotiate(Some(&raw("[]"))), "2025-11-25");
    }

    #[test]
    fn tool_results_carry_the_output_as_text_and_structured_content() {
        let id = RawValue::from_string("2".into()).unwrap();
        assert_eq!(
            String::from_utf8(tool_result(&id, br#"{"echo": {"a":"<1>"}}"#)).unwrap(),
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"{\"echo\": {\"a\":\"\u003c1\u003e\"}}"}],"structuredContent":{"echo":{"a":"\u003c1\u003e"}}}}"#
        );
        assert_eq!(
            String::from_utf8(tool_result(&id, b"")).unwrap(),
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"host callback returned no result"}}"#
        );
        assert_eq!(
            String::from_utf8(tool_result(&id, b"{")).unwrap(),
            r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"host callback returned invalid JSON"}}"#
        );
    }

    #[test]
    fn an_output_that_says_ok_false_is_an_error_result_with_the_output_kept() {
        let id = RawValue::from_string("2".into()).unwrap();
        assert_eq!(
            String::from_utf8(tool_result(&id, br#"{"ok":false,"refused":"no"}"#)).unwrap(),
            r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"{\"ok\":false,\"refused\":\"no\"}"}],"structuredContent":{"ok":false,"refused":"no"},"isError":true}}"#
        );
        for fine in [&br#"{"ok":true}"#[..], br#"{"ok":"false"}"#, br#"{"okay":false}"#, br#"{}"#] {
            assert!(!String::from_utf8(tool_result(&id, fine)).unwrap().contains("isError"));
        }
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(256))]

        #[test]
        fn origin_and_body_parsing_never_panic(text in ".{0,64}") {
            let _ = OriginPolicy::new(&[text.as_str()]).allows(&text);
            let _ = top_level_id(text.as_bytes());
            let _ = classify(text.as_bytes());
            let _ = input_schema(text.as_bytes());
        }
    }

    fn go_text(value: &Option<serde_json::Value>) -> Option<String> {
        match value {
            None | Some(serde_json::Value::Null) => Some(String::new()),
            Some(serde_json::Value::String(text)) => Some(text.clone()),
            Some(_) => None,
        }
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(512))]

        /// Every message is classified by its members as mcphttp does: a parse error for
        /// undecodable JSON or wrongly typed `jsonrpc`/`method`, `-32600` for another version or
        /// a message that is none of request, notification and response; ids echo as sent.
        #[test]
        fn messages_are_classified_by_their_members(
            jsonrpc in member(vec![json!("2.0"), json!("2.0"), json!("1.0"), json!(2), serde_json::Value::Null]),
            id in member(vec![json!(2), json!("x"), serde_json::Value::Null, json!([1, "<"]), json!(0.5)]),
            method in member(vec![json!("tools/call"), json!("ping"), json!(""), serde_json::Value::Null, json!(1)]),
            params in member(vec![json!({}), json!({"name": "x", "arguments": {}}), json!([]), serde_json::Value::Null]),
            result in member(vec![json!({}), serde_json::Value::Null]),
            error in member(vec![json!({"code": 1}), serde_json::Value::Null]),
            trailing in prop::sample::select(vec!["", "", "\n", " x"]),
            spelling in spelling(),
        ) {
            let body = spelling.object(&[
                ("jsonrpc", &jsonrpc), ("id", &id), ("method", &method), ("params", &params), ("result", &result), ("error", &error),
            ]) + trailing;
            let id_text = id.as_ref().map(json::marshal).map(|b| String::from_utf8(b).unwrap()).unwrap_or("null".into());
            let want = match (go_text(&jsonrpc), go_text(&method)) {
                _ if !trailing.trim().is_empty() => "parse".to_owned(),
                (None, _) | (_, None) => "parse".to_owned(),
                (Some(version), _) if version != "2.0" => format!("-32600 expected jsonrpc: \"2.0\" id={id_text}"),
                (Some(_), Some(method)) if !method.is_empty() && id.is_some() => {
                    let params = params.as_ref().map(json::marshal).map(|b| String::from_utf8(b).unwrap());
                    format!("request id={id_text} method={method} params={}", params.as_deref().unwrap_or("-"))
                }
                (Some(_), Some(method)) if !method.is_empty() => "ignored".to_owned(),
                _ if id.is_some() && (result.is_some() || error.is_some()) => "ignored".to_owned(),
                _ => format!("-32600 not a JSON-RPC request, notification or response id={id_text}"),
            };
            let mut got = row(&body);
            if got.starts_with("parse") {
                got = "parse".to_owned();
            }
            if let Some(rest) = got.strip_prefix("request ") {
                // Params keep the client's member order and spacing; compare them as values.
                let (head, params) = rest.split_once(" params=").unwrap();
                let params = if params == "-" { "-".to_owned() } else {
                    String::from_utf8(json::marshal(&serde_json::from_str::<serde_json::Value>(params).unwrap())).unwrap()
                };
                got = format!("request {head} params={params}");
            }
            prop_assert_eq!(got, want, "{}", body);
            // The POST's own id is the top-level id of an object, whatever else is wrong.
            let post_id = top_level_id(body.as_bytes());
            if trailing.trim().is_empty() {
                prop_assert_eq!(post_id.get(), id_text.as_str());
            }
        }
    }
}
