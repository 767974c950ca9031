//! Every response the edge writes that is not a success body: the REST error envelope, the
//! card's projection errors, A2A JSON-RPC errors, MCP's 401 / transport / whole-POST
//! envelopes, and the router's plain-text answers. This is the only module that turns a
//! [`Failure`] (or a session denial) into a status code; handlers only say which wire they
//! speak. The status and message tables themselves live in world-model; this module applies
//! them with the reference's exact bytes and headers (reference-edge §1.4, §2.2, §3.1, §5.1,
//! §6.2).

use axum::body::Body;
use axum::response::Response;
use http::header::{ALLOW, CACHE_CONTROL, CONNECTION, CONTENT_TYPE, LOCATION};
use http::{HeaderValue, Method, StatusCode};
use serde::Serialize;
use world_model::failure::{MCP_HOST_CALLBACK_CODE, MCP_HOST_CANCELED};
use world_model::{Failure, FailureCode, SessionDenial};

use crate::callback::CallbackError;
use crate::json;

pub const APPLICATION_JSON: &str = "application/json";
pub const TEXT_PLAIN: &str = "text/plain; charset=utf-8";
pub const EVENT_STREAM: &str = "text/event-stream";
const NOSNIFF: (&str, &str) = ("x-content-type-options", "nosniff");

/// The card's own failure classes (reference-edge §3.1, "card only").
const PROJECTION_DEADLINE: (u16, &str, &str) =
    (504, "ProjectionDeadlineExceeded", "the projection read exceeded its bounded deadline");
const PROJECTION_UNAVAILABLE: (u16, &str, &str) =
    (503, "ProjectionUnavailable", "the projection read failed; retry the request");

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// A response with a body and a content type; the building block of every writer here.
pub fn bytes(code: StatusCode, content_type: &'static str, body: impl Into<Body>) -> Response {
    let mut response = Response::new(body.into());
    *response.status_mut() = code;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn with_nosniff(mut response: Response) -> Response {
    response.headers_mut().insert(NOSNIFF.0, HeaderValue::from_static(NOSNIFF.1));
    response
}

/// Go's `http.Error`: text/plain, nosniff, the message plus a newline.
pub fn go_http_error(code: StatusCode, message: &str) -> Response {
    with_nosniff(bytes(code, TEXT_PLAIN, format!("{message}\n").into_bytes()))
}

// ---- router ----------------------------------------------------------------------------

pub fn not_found() -> Response {
    go_http_error(StatusCode::NOT_FOUND, "404 page not found")
}

pub fn method_not_allowed(allow: &str) -> Response {
    let mut response = go_http_error(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    if let Ok(value) = HeaderValue::from_str(allow) {
        response.headers_mut().insert(ALLOW, value);
    }
    response
}

/// Go's server answer to a request line it cannot parse (a malformed percent-escape).
pub fn malformed_request() -> Response {
    let mut response = bytes(StatusCode::BAD_REQUEST, TEXT_PLAIN, b"400 Bad Request".to_vec());
    response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Go's `http.Redirect` with 301: a small HTML body for GET only, the HTML content type for GET
/// and HEAD, nothing else for other methods.
pub fn redirect(method: &Method, location: &str) -> Response {
    let location_value = HeaderValue::from_str(location).unwrap_or_else(|_| HeaderValue::from_static("/"));
    let mut response = if method == Method::GET {
        let body = format!("<a href=\"{}\">Moved Permanently</a>.\n\n", html_escape(location, "&#34;"));
        bytes(StatusCode::MOVED_PERMANENTLY, "text/html; charset=utf-8", body.into_bytes())
    } else if method == Method::HEAD {
        bytes(StatusCode::MOVED_PERMANENTLY, "text/html; charset=utf-8", Vec::new())
    } else {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::MOVED_PERMANENTLY;
        response
    };
    response.headers_mut().insert(LOCATION, location_value);
    response
}

/// Text for HTML content and attribute values, with `quote` for `"`: Go's `htmlEscape`, as
/// `http.Redirect` applies it, writes `&#34;`.
pub fn html_escape(text: &str, quote: &'static str) -> String {
    world_model::escape_chars(text, |c| match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        '"' => Some(quote),
        '\'' => Some("&#39;"),
        _ => None,
    })
}

// ---- REST /v1 and the card ---------------------------------------------------------------

#[derive(Serialize)]
struct RestEnvelope<'a> {
    error: RestError<'a>,
}

#[derive(Serialize)]
struct RestError<'a> {
    class: &'a str,
    message: &'a str,
    #[serde(rename = "observedHead", skip_serializing_if = "Option::is_none")]
    observed_head: Option<String>,
    #[serde(rename = "selectedHead", skip_serializing_if = "Option::is_none")]
    selected_head: Option<String>,
}

/// A 200 JSON body (`json.NewEncoder(w).Encode`).
pub fn rest_ok<T: Serialize + ?Sized>(body: &T) -> Response {
    bytes(StatusCode::OK, APPLICATION_JSON, json::encode(body))
}

/// A 200 text body with no trailing newline (`GET /v1/head`).
pub fn rest_text(text: String) -> Response {
    bytes(StatusCode::OK, TEXT_PLAIN, text.into_bytes())
}

/// The REST envelope with an explicit status, class and message.
pub fn rest_error(code: u16, class: &str, message: &str) -> Response {
    let envelope = RestEnvelope { error: RestError { class, message, observed_head: None, selected_head: None } };
    bytes(status(code), APPLICATION_JSON, json::encode(&envelope))
}

/// 400 `BadRequest` naming what was wrong (refs, integers, body shape).
pub fn rest_bad_request(message: &str) -> Response {
    rest_failure(&Failure::new(FailureCode::BadRequest, message))
}

/// A session denial in the REST vocabulary (`/v1` and the card): 401, or 400 for malformed.
pub fn rest_denial(denial: SessionDenial) -> Response {
    let (code, class, message) = denial.rest();
    rest_error(code, class, message)
}

/// Any failure on `/v1`.
pub fn rest_failure(failure: &Failure) -> Response {
    if let Some(denial) = failure.code.session_denial() {
        return rest_denial(denial);
    }
    let (code, class) = failure.code.rest();
    let head = |head: &Option<world_model::HashRef>| head.as_ref().map(ToString::to_string);
    let envelope = RestEnvelope {
        error: RestError {
            class,
            message: &failure.message,
            observed_head: head(&failure.observed_head),
            selected_head: head(&failure.selected_head),
        },
    };
    bytes(status(code), APPLICATION_JSON, json::encode(&envelope))
}

/// A failure while building the agent card: denials as on `/v1`, anything else as the
/// projection classes (504 for a deadline, 503 otherwise; reference-edge §4).
pub fn card_failure(failure: &Failure) -> Response {
    if let Some(denial) = failure.code.session_denial() {
        return rest_denial(denial);
    }
    let (code, class, message) = match failure.code {
        FailureCode::Timeout | FailureCode::Deadline => PROJECTION_DEADLINE,
        _ => PROJECTION_UNAVAILABLE,
    };
    rest_error(code, class, message)
}

// ---- A2A ---------------------------------------------------------------------------------

/// `{"error":{…},"id":…,"jsonrpc":"2.0"}`: the reference encodes a Go map, so keys are sorted.
#[derive(Serialize)]
struct A2aErrorEnvelope<'a, I: ?Sized> {
    error: RpcError<'a>,
    id: &'a I,
    jsonrpc: &'static str,
}

/// `{"id":…,"jsonrpc":"2.0","result":…}`, sorted as the reference's map.
#[derive(Serialize)]
struct A2aResultEnvelope<'a, I: ?Sized, R: ?Sized> {
    id: &'a I,
    jsonrpc: &'static str,
    result: &'a R,
}

/// `{"code","message"}`: sorted and in struct order alike.
#[derive(Serialize)]
struct RpcError<'a> {
    code: i64,
    message: &'a str,
}

/// An A2A success: HTTP 200 with the task as `result` (reference-edge §5.4).
pub fn a2a_ok<I: Serialize + ?Sized, R: Serialize + ?Sized>(result: &R, id: &I) -> Response {
    let envelope = A2aResultEnvelope { id, jsonrpc: "2.0", result };
    bytes(StatusCode::OK, APPLICATION_JSON, json::encode(&envelope))
}

/// The JSON-RPC error code an A2A answer carried, kept on the response for the method metrics
/// (every A2A answer is HTTP 200, so the status says nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct A2aErrorCode(pub i64);

/// An A2A JSON-RPC error: always HTTP 200 (reference-edge §5.1).
pub fn a2a_error<I: Serialize + ?Sized>(code: i64, message: &str, id: &I) -> Response {
    let envelope = A2aErrorEnvelope { error: RpcError { code, message }, id, jsonrpc: "2.0" };
    let mut response = bytes(StatusCode::OK, APPLICATION_JSON, json::encode(&envelope));
    response.extensions_mut().insert(A2aErrorCode(code));
    response
}

/// A failure of an A2A task read (`GetTask`, `CancelTask`): A2A 1.0's task-not-found for a task
/// that never committed in the caller's episode, the seed's row for everything else.
pub fn a2a_task_read_failure<I: Serialize + ?Sized>(failure: &Failure, id: &I) -> Response {
    match failure.code {
        FailureCode::NotFound => {
            let (code, message) = failure.code.a2a_task_read();
            a2a_error(code, message, id)
        }
        _ => a2a_failure(failure, id),
    }
}

/// A failure on `/a2a/` with the seed's exact code and message; the core's free-text message
/// never reaches this wire. A deadline also closes the connection, as the reference does.
pub fn a2a_failure<I: Serialize + ?Sized>(failure: &Failure, id: &I) -> Response {
    let (code, _) = failure.code.a2a();
    let mut response = a2a_error(code, &failure.a2a_message(), id);
    if failure.code.a2a_closes_connection() {
        response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

// ---- MCP ---------------------------------------------------------------------------------

/// `{"jsonrpc":"2.0","id":…,"error":{…}}`: mcphttp's struct order.
#[derive(Serialize)]
struct McpErrorEnvelope<'a, I: ?Sized> {
    jsonrpc: &'static str,
    id: &'a I,
    error: RpcError<'a>,
}

fn mcp_error_body<I: Serialize + ?Sized>(id: &I, code: i64, message: &str) -> Vec<u8> {
    let mut body = mcp_error_object(id, code, message);
    body.push(b'\n');
    body
}

/// A JSON-RPC error response object as it travels inside an SSE event (`json.Marshal`: no
/// newline): unknown method, unknown tool, bad `tools/call` params.
pub fn mcp_error_object<I: Serialize + ?Sized>(id: &I, code: i64, message: &str) -> Vec<u8> {
    json::marshal(&McpErrorEnvelope { jsonrpc: "2.0", id, error: RpcError { code, message } })
}

/// The MCP 401: every denial kind, malformed included, is Go `http.Error(401, message)`.
pub fn mcp_denial(denial: SessionDenial) -> Response {
    go_http_error(StatusCode::UNAUTHORIZED, denial.wire_message())
}

/// The whole-POST envelope (HTTP 200, plain JSON, never SSE) with code -32603.
pub fn mcp_host_envelope<I: Serialize + ?Sized>(message: &str, id: &I) -> Response {
    with_nosniff(bytes(StatusCode::OK, APPLICATION_JSON, mcp_error_body(id, MCP_HOST_CALLBACK_CODE, message)))
}

/// A failure of a host callback (session resolution, admission, invocation) on `/mcp/`:
/// denials are the 401, everything else the whole-POST envelope whose message says only
/// failed / timed out / capacity exceeded (reference-edge §6.6).
pub fn mcp_failure<I: Serialize + ?Sized>(failure: &Failure, id: &I) -> Response {
    match failure.code.session_denial() {
        Some(denial) => mcp_denial(denial),
        None => mcp_host_envelope(failure.code.mcp_host_message(), id),
    }
}

/// An MCP transport error (400 for bad headers, batches or JSON; 403 for a refused Origin):
/// a JSON-RPC error body with nosniff.
pub fn mcp_transport_error<I: Serialize + ?Sized>(code: StatusCode, id: &I, rpc_code: i64, message: &str) -> Response {
    with_nosniff(bytes(code, APPLICATION_JSON, mcp_error_body(id, rpc_code, message)))
}

/// A host callback that produced no value: the whole-POST envelope, or the 401 when the
/// callback found the session denied (reference-edge §6.6).
pub fn mcp_callback_failure<I: Serialize + ?Sized>(error: &CallbackError, id: &I) -> Response {
    match error {
        CallbackError::Failed(failure) => mcp_failure(failure, id),
        CallbackError::TimedOut => mcp_host_envelope(FailureCode::Deadline.mcp_host_message(), id),
        CallbackError::Canceled => mcp_host_envelope(MCP_HOST_CANCELED, id),
        CallbackError::CapacityExceeded => mcp_host_envelope(FailureCode::CapacityExceeded.mcp_host_message(), id),
    }
}

/// A failed `tools/call` whose failure belongs to the call itself rather than to the host:
/// arguments the input schema refuses come back as the tool's own `isError` result naming the
/// violation (DESIGN "Edge"), so a model can correct them; `None` means the whole POST fails.
pub fn mcp_tool_error_text(failure: &Failure) -> Option<&str> {
    (failure.code == FailureCode::InvalidParams).then_some(failure.message.as_str())
}

/// One SSE event carrying one JSON-RPC reply (or a batch's array), then the end of the
/// response: `event: message`, no id, no retry (reference-edge §6.2).
pub fn mcp_sse(data: &[u8]) -> Response {
    let mut body = Vec::with_capacity(data.len() + 24);
    body.extend_from_slice(b"event: message\ndata: ");
    body.extend_from_slice(data);
    body.extend_from_slice(b"\n\n");
    let mut response = with_nosniff(bytes(StatusCode::OK, EVENT_STREAM, body));
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Only notifications and responses: 202 with no body.
pub fn mcp_accepted() -> Response {
    with_nosniff(bytes(StatusCode::ACCEPTED, APPLICATION_JSON, Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use serde_json::Value;
    use world_model::HashRef;

    fn parts(response: Response) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let status = response.status().as_u16();
        let mut headers: Vec<(String, String)> =
            response.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned())).collect();
        headers.sort();
        let body = runtime.block_on(response.into_body().collect()).unwrap().to_bytes().to_vec();
        (status, headers, body)
    }

    fn header(name: &str, value: &str) -> (String, String) {
        (name.to_owned(), value.to_owned())
    }

    #[test]
    fn router_answers_are_go_bytes() {
        let plain = |allow: Option<&str>| {
            let mut h =
                vec![header("content-type", "text/plain; charset=utf-8"), header("x-content-type-options", "nosniff")];
            if let Some(allow) = allow {
                h.push(header("allow", allow));
            }
            h.sort();
            h
        };
        assert_eq!(parts(not_found()), (404, plain(None), b"404 page not found\n".to_vec()));
        assert_eq!(
            parts(method_not_allowed("GET, HEAD")),
            (405, plain(Some("GET, HEAD")), b"Method Not Allowed\n".to_vec())
        );
        let (status, headers, body) = parts(redirect(&Method::GET, "/v1/registry/?a=1&b=2"));
        assert_eq!(status, 301);
        assert!(headers.contains(&header("location", "/v1/registry/?a=1&b=2")));
        assert_eq!(body, b"<a href=\"/v1/registry/?a=1&amp;b=2\">Moved Permanently</a>.\n\n");
        let (status, headers, body) = parts(redirect(&Method::POST, "/mcp/"));
        assert_eq!((status, headers, body), (301, vec![header("location", "/mcp/")], Vec::new()));
    }

    #[test]
    fn rest_session_denials_are_the_seed_rows() {
        let table = [
            (
                SessionDenial::Absent,
                401,
                r#"{"error":{"class":"SessionAbsent","message":"a session credential is required: no Authorization Bearer header was present"}}"#,
            ),
            (
                SessionDenial::Malformed,
                400,
                r#"{"error":{"class":"InvalidSession","message":"malformed Authorization header: expected a Bearer \u003c64-hex-credential\u003e"}}"#,
            ),
            (
                SessionDenial::Unknown,
                401,
                r#"{"error":{"class":"SessionUnknown","message":"unknown session credential: no session matches this token"}}"#,
            ),
            (
                SessionDenial::Expired,
                401,
                r#"{"error":{"class":"SessionExpired","message":"session credential has expired"}}"#,
            ),
        ];
        for (denial, code, body) in table {
            let want = (code, vec![header("content-type", "application/json")], format!("{body}\n").into_bytes());
            assert_eq!(parts(rest_denial(denial)), want, "{denial:?}");
            // A denial the core reports renders the same, whatever message it carried.
            assert_eq!(parts(rest_failure(&Failure::from(denial))), want);
            assert_eq!(parts(card_failure(&Failure::from(denial))), want);
        }
    }

    #[test]
    fn rest_failures_use_the_failure_table() {
        let observed = HashRef::of(b"o");
        let selected = HashRef::of(b"s");
        let conflict = Failure::head_conflict(Some(observed), Some(selected));
        let (code, _, body) = parts(rest_failure(&conflict));
        assert_eq!(code, 409);
        assert_eq!(
            String::from_utf8(body).unwrap(),
            format!(
                "{{\"error\":{{\"class\":\"HeadConflict\",\"message\":\"conflict: observed {observed} selected {selected}\",\"observedHead\":\"{observed}\",\"selectedHead\":\"{selected}\"}}}}\n"
            )
        );
        let genesis = Failure::head_conflict(None, Some(selected));
        let (_, _, body) = parts(rest_failure(&genesis));
        assert_eq!(
            String::from_utf8(body).unwrap(),
            format!(
                "{{\"error\":{{\"class\":\"HeadConflict\",\"message\":\"conflict: observed  selected {selected}\",\"selectedHead\":\"{selected}\"}}}}\n"
            )
        );
        let table = [
            (
                Failure::new(FailureCode::BadRequest, "world ref: hashref: empty hashref text"),
                400,
                r#"{"error":{"class":"BadRequest","message":"world ref: hashref: empty hashref text"}}"#,
            ),
            (
                Failure::new(FailureCode::NotFound, "world not found"),
                404,
                r#"{"error":{"class":"NotFound","message":"world not found"}}"#,
            ),
            (
                Failure::of(FailureCode::PayloadTooLarge),
                413,
                r#"{"error":{"class":"PayloadTooLarge","message":"commit body exceeds 8388608 bytes"}}"#,
            ),
            (
                Failure::of(FailureCode::Internal),
                500,
                r#"{"error":{"class":"Internal","message":"internal store failure"}}"#,
            ),
            (
                Failure::new(FailureCode::Unavailable, crate::core::CORE_UNREACHABLE),
                503,
                r#"{"error":{"class":"Unavailable","message":"world-core is unreachable; retry the request"}}"#,
            ),
            (
                Failure::of(FailureCode::Timeout),
                503,
                r#"{"error":{"class":"Timeout","message":"read deadline (10s) exceeded"}}"#,
            ),
        ];
        for (failure, code, body) in table {
            let got = parts(rest_failure(&failure));
            assert_eq!(got.0, code, "{failure:?}");
            assert_eq!(got.2, format!("{body}\n").into_bytes(), "{failure:?}");
        }
    }

    #[test]
    fn card_projection_failures() {
        let (code, _, body) = parts(card_failure(&Failure::of(FailureCode::Timeout)));
        assert_eq!(code, 504);
        assert_eq!(
            body,
            b"{\"error\":{\"class\":\"ProjectionDeadlineExceeded\",\"message\":\"the projection read exceeded its bounded deadline\"}}\n"
        );
        let (code, _, body) = parts(card_failure(&Failure::of(FailureCode::Unavailable)));
        assert_eq!(code, 503);
        assert_eq!(
            body,
            b"{\"error\":{\"class\":\"ProjectionUnavailable\",\"message\":\"the projection read failed; retry the request\"}}\n"
        );
    }

    #[test]
    fn a2a_session_denials_are_http_200_json_rpc() {
        let table = [
            (
                SessionDenial::Absent,
                r#"{"error":{"code":-32001,"message":"session credential is absent: send Authorization: Bearer \u003csession-credential\u003e"},"id":null,"jsonrpc":"2.0"}"#,
            ),
            (
                SessionDenial::Malformed,
                r#"{"error":{"code":-32600,"message":"malformed Authorization header: expected Bearer \u003c64-hex-credential\u003e"},"id":null,"jsonrpc":"2.0"}"#,
            ),
            (
                SessionDenial::Unknown,
                r#"{"error":{"code":-32001,"message":"unknown session credential"},"id":null,"jsonrpc":"2.0"}"#,
            ),
            (
                SessionDenial::Expired,
                r#"{"error":{"code":-32001,"message":"session credential has expired"},"id":null,"jsonrpc":"2.0"}"#,
            ),
        ];
        for (denial, body) in table {
            assert_eq!(
                parts(a2a_failure(&Failure::from(denial), &Value::Null)),
                (200, vec![header("content-type", "application/json")], format!("{body}\n").into_bytes()),
                "{denial:?}"
            );
        }
    }

    #[test]
    fn a2a_failures_use_the_seed_text_not_the_core_message() {
        let failure = Failure::new(FailureCode::Unavailable, "some internal cause");
        let (_, _, body) = parts(a2a_failure(&failure, &Value::from(7)));
        assert_eq!(
            body,
            b"{\"error\":{\"code\":-32603,\"message\":\"transition invocation is not available in this daemon\"},\"id\":7,\"jsonrpc\":\"2.0\"}\n"
        );
        let (_, headers, _) = parts(a2a_failure(&Failure::of(FailureCode::Deadline), &Value::Null));
        assert!(headers.contains(&header("connection", "close")));
        let records = vec![HashRef::of(b"r")];
        let (_, _, body) = parts(a2a_failure(&Failure::effects_unrecorded(records.clone()), &Value::Null));
        assert!(String::from_utf8(body).unwrap().contains(&format!("effect records: {}\"", records[0])));
    }

    #[test]
    fn mcp_denials_are_plain_text_401() {
        let table = [
            (SessionDenial::Absent, "session credential is absent: send Authorization: Bearer <session-credential>\n"),
            (SessionDenial::Malformed, "malformed Authorization header: expected Bearer <64-hex-credential>\n"),
            (SessionDenial::Unknown, "unknown session credential\n"),
            (SessionDenial::Expired, "session credential has expired\n"),
        ];
        for (denial, body) in table {
            let want = (
                401,
                vec![header("content-type", "text/plain; charset=utf-8"), header("x-content-type-options", "nosniff")],
                body.as_bytes().to_vec(),
            );
            assert_eq!(parts(mcp_denial(denial)), want, "{denial:?}");
            assert_eq!(parts(mcp_failure(&Failure::from(denial), &Value::Null)), want);
        }
    }

    #[test]
    fn mcp_sse_is_the_golden_event() {
        let (status, headers, body) = parts(mcp_sse(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#));
        assert_eq!(status, 200);
        assert_eq!(
            headers,
            vec![
                header("cache-control", "no-cache"),
                header("content-type", "text/event-stream"),
                header("x-content-type-options", "nosniff")
            ]
        );
        assert_eq!(body, b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n");
        let (status, _, body) = parts(mcp_accepted());
        assert_eq!((status, body), (202, Vec::new()));
    }

    /// The whole-POST envelope, however the host callback ended: the core's failure (which
    /// `mcp_failure` renders alike), or the callback's own timeout, cancellation or capacity.
    #[test]
    fn mcp_host_failures_say_only_failed_timed_out_canceled_or_capacity() {
        let failed = |code| CallbackError::Failed(Failure::of(code));
        let table = [
            (failed(FailureCode::ExecutionFailed), "host callback failed"),
            (failed(FailureCode::Unavailable), "host callback failed"),
            (failed(FailureCode::Internal), "host callback failed"),
            (failed(FailureCode::Timeout), "host callback timed out"),
            (failed(FailureCode::Deadline), "host callback timed out"),
            (failed(FailureCode::CapacityExceeded), "host callback capacity exceeded"),
            (CallbackError::TimedOut, "host callback timed out"),
            (CallbackError::Canceled, "host callback canceled"),
            (CallbackError::CapacityExceeded, "host callback capacity exceeded"),
        ];
        let envelope = |id: &str, message: &str| {
            (
                200,
                vec![header("content-type", "application/json"), header("x-content-type-options", "nosniff")],
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32603,\"message\":\"{message}\"}}}}\n"
                )
                .into_bytes(),
            )
        };
        for (error, message) in table {
            assert_eq!(parts(mcp_callback_failure(&error, &Value::Null)), envelope("null", message), "{error:?}");
            if let CallbackError::Failed(failure) = &error {
                assert_eq!(parts(mcp_failure(failure, &Value::from(2))), envelope("2", message), "{error:?}");
            }
        }
        let (status, _, _) =
            parts(mcp_callback_failure(&CallbackError::Failed(Failure::from(SessionDenial::Expired)), &Value::Null));
        assert_eq!(status, 401);
        // A schema refusal is the tool's own result, not a host failure.
        let schema = Failure::new(FailureCode::InvalidParams, "arguments do not match the input schema: x");
        assert_eq!(mcp_tool_error_text(&schema), Some("arguments do not match the input schema: x"));
        assert_eq!(mcp_tool_error_text(&Failure::of(FailureCode::NotAuthorized)), None);
    }

    #[test]
    fn mcp_transport_errors_are_json_rpc_bodies() {
        let (status, _, body) = parts(mcp_transport_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            -32600,
            "Content-Type must be application/json",
        ));
        assert_eq!(status, 400);
        assert_eq!(
            body,
            b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"Content-Type must be application/json\"}}\n"
        );
    }
}
