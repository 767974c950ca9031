//! One `/mcp/` POST past its checks: a single message or a batch, each request answered by its
//! method (`initialize`, `ping`, `tools/list`, `tools/call`) in its own span, with the host
//! callbacks (admission, each invocation) run in the edge's slots.

use std::sync::Arc;

use axum::response::Response;
use http::StatusCode;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::time::Instant;
use tracing::Instrument as _;
use world_model::{Failure, FailureCode, go_quote};
use world_proto::v1 as pb;

use super::call::{error_result, tool_call, tool_result};
use super::headers::{DEFAULT_VERSION, SUPPORTED_VERSIONS};
use super::jsonrpc::{
    INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, Message, PARSE_ERROR, classify, reply, reply_sized,
};
use crate::callback::{CallbackError, Callbacks};
use crate::card::{CARD_NAME, CARD_VERSION};
use crate::core::CoreClient;
use crate::json::{go_fields, go_string};
use crate::limits::HOP;
use crate::session::{Forwarded, Verdict, refuses_session};
use crate::surface::{Surface, Surfaces};
use crate::wire;

/// One POST's caller: what its host callbacks need, and what it has learnt of its session.
pub struct PostSession<'a> {
    core: &'a CoreClient,
    surfaces: &'a Arc<Surfaces>,
    callbacks: &'a Callbacks,
    credential: Forwarded,
    deadline: Instant,
    /// The admitted surface, once `tools/list` (or the session check) asked for it.
    surface: tokio::sync::OnceCell<Result<Arc<Surface>, CallbackError>>,
    verdict: Verdict<CallbackError>,
}

impl<'a> PostSession<'a> {
    pub fn new(
        core: &'a CoreClient,
        surfaces: &'a Arc<Surfaces>,
        callbacks: &'a Callbacks,
        credential: Forwarded,
        deadline: Instant,
    ) -> Self {
        PostSession {
            core,
            surfaces,
            callbacks,
            credential,
            deadline,
            surface: tokio::sync::OnceCell::new(),
            verdict: Verdict::default(),
        }
    }

    /// The POST's deadline, everything included.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The session refusal that answers the POST in place of anything else, if any: the one a
    /// call of it heard, or, when none reached the core, what an admission answers now.
    pub async fn refusal(&self) -> Option<CallbackError> {
        self.verdict.refusal(|| async { self.surface().await.map(|_| ()) }).await
    }

    /// The session's surface, admitted once per POST (a host callback); a surface that has no
    /// MCP tools refuses the POST as a failed callback.
    async fn surface(&self) -> Result<&Surface, CallbackError> {
        let admitted = self
            .surface
            .get_or_init(|| async {
                let admitted = self
                    .callbacks
                    .run(self.deadline, |_| {
                        let (core, surfaces, credential) =
                            (self.core.clone(), Arc::clone(self.surfaces), self.credential.clone());
                        async move { surfaces.admit(&core, &credential).await }
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

/// The POST's answer: `body` (trimmed, past every check) as one message or a batch.
pub async fn answer(session: &PostSession<'_>, version: &'static str, body: &[u8]) -> Response {
    let post = Post { version, session };
    if body.first() == Some(&b'[') { post.batch(version, body).await } else { post.single(body).await }
}

/// The `tools/list` reply, written into a buffer of its final size: with a large registry it
/// is the biggest body the edge writes.
fn tools_reply(id: &RawValue, tools: &RawValue) -> Vec<u8> {
    let envelope = r#"{"jsonrpc":"2.0","id":,"result":{"tools":}}"#.len();
    reply_sized(id, &ToolList { tools }, envelope + id.get().len() + tools.get().len())
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
                Ok(tools) => Ok(tools_reply(id, tools)),
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
                    // The reply may take the hop beyond the moment its caller stops waiting, so the
                    // core's own typed deadline answer arrives, and its subprocess ends, while the
                    // slot is still held.
                    let timeout = until.saturating_duration_since(Instant::now()) + HOP;
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
                Some(text) => Ok(error_result(id, text)),
                None => Err(CallbackError::Failed(failure)),
            },
            Err(error) => Err(error),
        }
    }
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
}
