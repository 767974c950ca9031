//! `POST /mcp/`: MCP streamable HTTP (reference-edge §6, §7; DESIGN "Edge").
//!
//! The checks run in DESIGN's order: Authorization first (every denial is the 401
//! text/plain), admission and the tool surface (a host callback; a failure is the whole-POST
//! envelope), Origin (403 when present and not allowed), the 4 MiB body cap, Content-Type,
//! Accept, MCP-Protocol-Version ([`headers`]), the batch rules, then each message ([`jsonrpc`],
//! [`dispatch`], a `tools/call`'s params and result in [`call`]). Replies are one SSE event;
//! JSON-RPC errors of a message (unknown method, unknown tool, bad params) travel inside it,
//! while any failed host callback answers the whole POST with the frozen envelope. The tools
//! `tools/list` shows are made by the surface the edge holds (`surface::tools`).
//!
//! The endpoint is stateless, as the reference's: no `Mcp-Session-Id`, `initialize` is not
//! required first, and every POST's session is checked afresh. A `tools/call` goes to the core
//! as one invocation that resolves the session, finds the tool on the surface current now and
//! runs it; `tools/list` is answered from the admitted surface; a POST no call of which reached
//! the core is admitted before it is answered (`session::Verdict`), so a session refusal
//! answers it whatever else it met, as admission's place in the order wants.

pub mod call;
pub mod dispatch;
pub mod headers;
pub mod jsonrpc;

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use serde_json::value::RawValue;
use tokio::time::Instant;

use crate::body::{BodyError, MCP_LIMIT, read_capped};
use crate::callback::{CallbackError, Callbacks};
use crate::core::CoreClient;
use crate::limits::Limits;
use crate::origin::OriginPolicy;
use crate::session;
use crate::surface::Surfaces;
use crate::wire;
use dispatch::PostSession;
use jsonrpc::{INVALID_REQUEST, top_level_id};

/// The whole-POST message for a body over the cap or unreadable (reference-edge §6.3 step 1).
pub const INVALID_BODY: &str = "invalid MCP request body";
pub const ORIGIN_REFUSED: &str = "Origin is not allowed";

pub async fn handle(
    core: &CoreClient,
    surfaces: &Arc<Surfaces>,
    callbacks: &Callbacks,
    origins: &OriginPolicy,
    limits: &Limits,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    let deadline = Instant::now() + limits.request_deadline;
    let credential = match session::precheck(headers) {
        Ok(credential) => credential,
        // The body left unread is drained by the connection, which so stays open.
        Err(denial) => return wire::mcp_denial(denial),
    };
    let session = PostSession::new(core, surfaces, callbacks, credential, deadline);
    let response = answer(origins, limits, headers, body, &session).await;
    match session.refusal().await {
        Some(refusal) => wire::mcp_callback_failure(&refusal, RawValue::NULL),
        None => response,
    }
}

/// The POST's answer past Authorization, its session aside.
async fn answer(
    origins: &OriginPolicy,
    limits: &Limits,
    headers: &HeaderMap,
    body: Body,
    session: &PostSession<'_>,
) -> Response {
    let null = RawValue::NULL;
    if !origins.admits(headers) {
        return wire::mcp_transport_error(StatusCode::FORBIDDEN, null, INVALID_REQUEST, ORIGIN_REFUSED);
    }
    let bytes = match read_body(limits, body, session.deadline()).await {
        Ok(bytes) => bytes,
        // The seed's deadline answer: the body's time is the POST's.
        Err(BodyError::TooSlow { .. }) => return wire::mcp_callback_failure(&CallbackError::TimedOut, null),
        Err(_) => return wire::mcp_host_envelope(INVALID_BODY, null),
    };
    let version = match headers::check(headers) {
        Ok(version) => version,
        Err(message) => {
            return wire::mcp_transport_error(
                StatusCode::BAD_REQUEST,
                &top_level_id(&bytes),
                INVALID_REQUEST,
                &message,
            );
        }
    };
    dispatch::answer(session, version, bytes.trim_ascii()).await
}

/// The body under the 4 MiB cap, within the POST's aggregate deadline (the seed's 20 s) or the
/// body read timeout, whichever ends first.
async fn read_body(limits: &Limits, body: Body, deadline: Instant) -> Result<axum::body::Bytes, BodyError> {
    let within = deadline.saturating_duration_since(Instant::now()).min(limits.body_read_timeout);
    read_capped(body, MCP_LIMIT, within).await
}
