//! `POST /a2a/`: A2A JSON-RPC in three vocabularies on one endpoint, one session authority and
//! one coordinator (DESIGN "Edge"): the seed's `tasks/send` (reference-edge §5, byte for byte),
//! A2A 0.3's `message/send` (which still accepts the seed's shape it has always aliased) and
//! A2A 1.0's `SendMessage`, `GetTask` and `CancelTask` ([`message`]). Every answer is HTTP 200.
//!
//! The checks run in the reference's order (§5.2) whatever the method: one deadline for the
//! whole request, the session, the 1 MiB decoder-bounded envelope, `jsonrpc`, the method (and,
//! for A2A 1.0's methods, `A2A-Version`), the params shape; then a send goes to the core as one
//! `Invocation.Invoke`, which resolves the session and checks, in order, the skill against the
//! session's surface at the registry head current now, the invocation service, the part shape
//! and the optional `transition_fn` pin, and runs the call; [`wire::a2a_failure`] words every
//! failure with the seed's table. A request none of whose calls reached the core is admitted
//! before it is answered ([`Verdict`]), so a session refusal answers it whatever else it met.

pub mod message;

use axum::body::Body;
use axum::response::Response;
use http::HeaderMap;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::time::Instant;
use tracing::Instrument as _;
use world_model::failure::{
    A2A_INVALID_REQUEST, A2A_METHOD_NOT_FOUND, A2A_TASK_NOT_CANCELABLE, A2A_VERSION_NOT_SUPPORTED,
    a2a_version_not_supported,
};
use world_model::{Failure, FailureCode, HashRef, canonicalize};
use world_proto::v1 as pb;

use crate::body::{A2A_LIMIT, read_prefix};
use crate::core::CoreClient;
use crate::json::{self, DecodeError, compact_raw, go_fields, go_members, go_string, is_null, member};
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::session::{self, Forwarded, Verdict, refuses_session};
use crate::surface::Surfaces;
use crate::wire;
use message::Dialect;

/// The methods `/a2a/` answers; any other is `-32601 method not found`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The seed's method.
    TasksSend,
    /// A2A 0.3's, or the seed's shape under this name (the alias it has always been).
    MessageSend,
    /// A2A 1.0's.
    SendMessage,
    GetTask,
    CancelTask,
}

impl Method {
    pub const ALL: [Method; 5] =
        [Method::TasksSend, Method::MessageSend, Method::SendMessage, Method::GetTask, Method::CancelTask];

    pub fn as_str(self) -> &'static str {
        match self {
            Method::TasksSend => "tasks/send",
            Method::MessageSend => "message/send",
            Method::SendMessage => "SendMessage",
            Method::GetTask => "GetTask",
            Method::CancelTask => "CancelTask",
        }
    }

    pub fn parse(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|method| method.as_str() == name)
    }

    /// A2A 1.0's methods, which require `A2A-Version: 1.0`.
    pub fn is_a2a_1_0(self) -> bool {
        matches!(self, Method::SendMessage | Method::GetTask | Method::CancelTask)
    }

    /// The methods that run a transition.
    pub fn sends(self) -> bool {
        matches!(self, Method::TasksSend | Method::MessageSend | Method::SendMessage)
    }
}

/// The header A2A 1.0 clients name their protocol version in.
pub const VERSION_HEADER: &str = "a2a-version";

/// A JSON-RPC request that passed the envelope checks.
#[derive(Debug)]
pub struct Envelope {
    /// Echoed as sent (compacted, as Go re-encodes a raw message); `null` when absent.
    pub id: Box<RawValue>,
    pub method: String,
    pub params: Option<Box<RawValue>>,
}

#[derive(Debug)]
pub enum EnvelopeError {
    /// Not one decodable JSON-RPC object: answered with id `null`.
    Undecodable,
    /// `jsonrpc` is not `"2.0"`: answered with the request's id.
    NotVersion2 { id: Box<RawValue> },
}

/// Go decodes the first JSON value into `{jsonrpc, id, method, params}`; trailing bytes are not
/// examined. Keys match case-insensitively, a string field holding `null` stays empty, and any
/// other type is a decode error.
pub fn parse_envelope(bytes: &[u8]) -> Result<Envelope, EnvelopeError> {
    let first = serde_json::Deserializer::from_slice(bytes).into_iter::<&RawValue>().next();
    let Some(Ok(value)) = first else {
        return Err(EnvelopeError::Undecodable);
    };
    let fields = go_fields(value, ["jsonrpc", "id", "method", "params"]).map_err(|_| EnvelopeError::Undecodable)?;
    // Go decodes `null` into the struct as a no-op: every field stays empty.
    let [jsonrpc, id, method, params] = fields.unwrap_or_default();
    let jsonrpc = go_string(jsonrpc).map_err(|_| EnvelopeError::Undecodable)?;
    let method = go_string(method).map_err(|_| EnvelopeError::Undecodable)?;
    let id = id.map(compact_raw).unwrap_or_else(|| RawValue::NULL.to_owned());
    if jsonrpc != "2.0" {
        return Err(EnvelopeError::NotVersion2 { id });
    }
    Ok(Envelope { id, method, params: params.map(ToOwned::to_owned) })
}

/// `tasks/send` params as the reference decodes them (§5.2 step 7):
/// `{id, message:{role, parts:[{type, text, data}]}, metadata}`.
#[derive(Debug, Default)]
pub struct Params<'a> {
    pub id: String,
    pub parts: Vec<Part<'a>>,
    /// `None` when absent or `null` (a nil Go map).
    pub metadata: Option<Vec<(String, &'a RawValue)>>,
}

#[derive(Debug, Default)]
pub struct Part<'a> {
    pub kind: String,
    /// Only an object can be here; `None` for absent or `null`.
    pub data: Option<&'a RawValue>,
}

/// Step 7. Absent params are a decode error, as unmarshalling an empty raw message is in Go;
/// `null` params decode to all-empty fields.
pub fn parse_params(raw: Option<&RawValue>) -> Result<Params<'_>, DecodeError> {
    let raw = raw.ok_or(DecodeError::Type { expected: "object", found: "nothing" })?;
    let Some([id, message, metadata]) = go_fields(raw, ["id", "message", "metadata"])? else {
        return Ok(Params::default());
    };
    let mut params = Params { id: go_string(id)?, ..Params::default() };
    if let Some(message) = message
        && let Some([role, parts]) = go_fields(message, ["role", "parts"])?
    {
        go_string(role)?;
        if let Some(parts) = parts.filter(|parts| !is_null(parts)) {
            let parts: Vec<&RawValue> = match json::kind(parts) {
                "array" => serde_json::from_str(parts.get())?,
                found => return Err(DecodeError::Type { expected: "array", found }),
            };
            for part in parts {
                let Some([kind, text, data]) = go_fields(part, ["type", "text", "data"])? else {
                    params.parts.push(Part::default());
                    continue;
                };
                go_string(text)?;
                let data = match data {
                    Some(data) if json::kind(data) == "object" => Some(data),
                    Some(data) if is_null(data) => None,
                    None => None,
                    Some(data) => return Err(DecodeError::Type { expected: "object", found: json::kind(data) }),
                };
                params.parts.push(Part { kind: go_string(kind)?, data });
            }
        }
    }
    if let Some(metadata) = metadata {
        params.metadata = go_members(metadata)?;
    }
    Ok(params)
}

impl<'a> Params<'a> {
    fn metadata(&self, key: &str) -> Option<&'a RawValue> {
        self.metadata.as_deref().and_then(|members| member(members, key))
    }

    /// Step 8: `metadata.skill_id` when it is a string, else the empty skill.
    pub fn skill(&self) -> String {
        self.metadata("skill_id").and_then(|raw| serde_json::from_str::<String>(raw.get()).ok()).unwrap_or_default()
    }

    /// Steps 12–13: the one data part's object and the optional pin, or `None` when either is
    /// malformed (both are `invalid params`).
    pub fn call(&self) -> Option<(&'a RawValue, Option<HashRef>)> {
        let [part] = self.parts.as_slice() else { return None };
        if part.kind != "data" {
            return None;
        }
        let data = part.data?;
        let pin = match self.metadata("transition_fn") {
            None => None,
            Some(raw) => {
                let text: String = serde_json::from_str(raw.get()).ok()?;
                Some(HashRef::parse(&text).ok()?)
            }
        };
        Some((data, pin))
    }
}

pub async fn handle(
    core: &CoreClient,
    surfaces: &Surfaces,
    limits: &Limits,
    metrics: &Metrics,
    headers: &HeaderMap,
    body: Body,
) -> Response {
    let (method, response) = answer(core, surfaces, limits, headers, body).await;
    let error = response.extensions().get::<wire::A2aErrorCode>().map(|code| code.0);
    metrics.a2a(method.map_or("-", Method::as_str), error);
    response
}

/// The answer and, once the envelope named a known method, that method.
async fn answer(
    core: &CoreClient,
    surfaces: &Surfaces,
    limits: &Limits,
    headers: &HeaderMap,
    body: Body,
) -> (Option<Method>, Response) {
    // Step 1: one deadline for the whole request, admission included.
    let deadline = Instant::now() + limits.request_deadline;
    let credential = match session::precheck(headers) {
        Ok(credential) => credential,
        Err(denial) => return (None, wire::a2a_failure(&Failure::from(denial), RawValue::NULL)),
    };
    let verdict = Verdict::default();
    let answered = respond(core, limits, headers, body, &credential, &verdict, deadline).await;
    let admit = || async {
        match tokio::time::timeout_at(deadline, surfaces.admit(core, &credential)).await {
            Ok(admitted) => admitted.map(|_| ()),
            // A session lookup that outlived the request is the not-available row (§2.2).
            Err(_) => Err(Failure::of(FailureCode::Timeout)),
        }
    };
    match verdict.refusal(admit).await {
        Some(refusal) => (None, wire::a2a_failure(&refusal, RawValue::NULL)),
        None => answered,
    }
}

/// The answer past the session's own check.
async fn respond(
    core: &CoreClient,
    limits: &Limits,
    headers: &HeaderMap,
    body: Body,
    credential: &Forwarded,
    verdict: &Verdict<Failure>,
    deadline: Instant,
) -> (Option<Method>, Response) {
    let null = RawValue::NULL;
    let invalid_request = |id: &RawValue| wire::a2a_error(A2A_INVALID_REQUEST.0, A2A_INVALID_REQUEST.1, id);
    let Ok(bytes) = read_prefix(body, A2A_LIMIT, limits.body_read_timeout).await else {
        return (None, invalid_request(null));
    };
    let envelope = match parse_envelope(&bytes) {
        Ok(envelope) => envelope,
        Err(EnvelopeError::Undecodable) => return (None, invalid_request(null)),
        Err(EnvelopeError::NotVersion2 { id }) => return (None, invalid_request(&id)),
    };
    let Some(method) = Method::parse(&envelope.method) else {
        return (None, wire::a2a_error(A2A_METHOD_NOT_FOUND.0, A2A_METHOD_NOT_FOUND.1, &envelope.id));
    };
    let request = Request { core, credential, verdict, envelope: &envelope, deadline };
    let answer = dispatch(&request, method, headers).instrument(message_span(method, &envelope)).await;
    (Some(method), answer)
}

fn message_span(method: Method, envelope: &Envelope) -> tracing::Span {
    tracing::info_span!(
        "a2a.message",
        otel.name = method.as_str(),
        a2a.method = method.as_str(),
        a2a.skill = tracing::field::Empty,
        a2a.task.id = tracing::field::Empty,
        jsonrpc.request.id = envelope.id.get(),
    )
}

/// One request past the envelope: what every method needs.
struct Request<'a> {
    core: &'a CoreClient,
    credential: &'a Forwarded,
    /// What the core's answers said of the session.
    verdict: &'a Verdict<Failure>,
    envelope: &'a Envelope,
    deadline: Instant,
}

impl Request<'_> {
    /// `answer`, a core's answer to one of this request's calls, noted for the session check.
    fn heard<T>(&self, answer: Result<T, Failure>) -> Result<T, Failure> {
        self.verdict.heard(answer.as_ref().err().filter(|failure| refuses_session(failure)).cloned());
        answer
    }
}

async fn dispatch(request: &Request<'_>, method: Method, headers: &HeaderMap) -> Response {
    let id: &RawValue = &request.envelope.id;
    if method.is_a2a_1_0() {
        let version = headers.get(VERSION_HEADER).map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
        if !version.as_deref().is_some_and(message::speaks_1_0) {
            let message = a2a_version_not_supported(version.as_deref());
            return wire::a2a_error(A2A_VERSION_NOT_SUPPORTED, &message, id);
        }
    }
    let params = request.envelope.params.as_deref();
    match method {
        Method::TasksSend => send(request).await,
        Method::MessageSend if message::is_v03(params) => send_message(request, Dialect::V03).await,
        Method::MessageSend => send(request).await,
        Method::SendMessage => send_message(request, Dialect::V1).await,
        Method::GetTask => read_task(request, false).await,
        Method::CancelTask => read_task(request, true).await,
    }
}

/// Steps 7–15 of one `tasks/send` (or `message/send` in the seed's shape).
async fn send(request: &Request<'_>) -> Response {
    let id: &RawValue = &request.envelope.id;
    let Ok(params) = parse_params(request.envelope.params.as_deref()) else {
        return wire::a2a_failure(&Failure::of(FailureCode::InvalidParams), id);
    };
    let invoked = invoke(request, params.skill(), &params.id, params.call()).await;
    match invoked.and_then(|invoked| task(&params.id, &invoked).map(|task| wire::a2a_ok(&task, id))) {
        Ok(answer) => answer,
        Err(failure) => wire::a2a_failure(&failure, id),
    }
}

/// A2A 0.3 `message/send` and A2A 1.0 `SendMessage`: the same steps as `tasks/send`, with the
/// message's `messageId` as the task id.
async fn send_message(request: &Request<'_>, dialect: Dialect) -> Response {
    let id: &RawValue = &request.envelope.id;
    let Ok(send) = message::parse_send(request.envelope.params.as_deref(), dialect) else {
        return wire::a2a_failure(&Failure::of(FailureCode::InvalidParams), id);
    };
    let answer = invoke(request, send.skill, &send.task_id, send.call).await.and_then(|invoked| {
        let task = message::task(dialect, &send.task_id, &invoked)?;
        Ok(match dialect {
            Dialect::V03 => wire::a2a_ok(&task, id),
            Dialect::V1 => wire::a2a_ok(&message::SendMessageResult { task }, id),
        })
    });
    answer.unwrap_or_else(|failure| wire::a2a_failure(&failure, id))
}

/// A2A 1.0 `GetTask` (the committed task, read from the store) and `CancelTask` (a task that
/// exists has completed: never cancelable).
async fn read_task(request: &Request<'_>, cancel: bool) -> Response {
    let id: &RawValue = &request.envelope.id;
    let Some(task_id) = message::parse_task_query(request.envelope.params.as_deref()) else {
        return wire::a2a_failure(&Failure::of(FailureCode::InvalidParams), id);
    };
    tracing::Span::current().record("a2a.task.id", task_id.as_str());
    let remaining = request.deadline.saturating_duration_since(Instant::now());
    if remaining.is_zero() {
        return wire::a2a_failure(&Failure::of(FailureCode::Deadline), id);
    }
    let invoked = match request.heard(request.core.committed_task(request.credential, &task_id, remaining).await) {
        Ok(invoked) => invoked,
        Err(failure) => return wire::a2a_task_read_failure(&failure, id),
    };
    if cancel {
        return wire::a2a_error(A2A_TASK_NOT_CANCELABLE.0, A2A_TASK_NOT_CANCELABLE.1, id);
    }
    match message::task(Dialect::V1, &task_id, &invoked) {
        Ok(task) => wire::a2a_ok(&task, id),
        Err(failure) => wire::a2a_failure(&failure, id),
    }
}

/// Steps 9–14, the same for every vocabulary, in one call to the core: it checks the skill
/// against the session's surface (unknown, invisible and ungranted skills are one answer), the
/// invocation service, then the part shape and pin (a call without one usable data part, or
/// with a malformed pin, is sent without arguments), and runs it.
async fn invoke(
    request: &Request<'_>,
    skill: String,
    task_id: &str,
    call: Option<(&RawValue, Option<HashRef>)>,
) -> Result<pb::Invoked, Failure> {
    let span = tracing::Span::current();
    span.record("a2a.skill", skill.as_str());
    span.record("a2a.task.id", task_id);
    let (arguments, pin) = match call {
        Some((data, pin)) => (data.get().as_bytes().to_vec(), pin.map(|pin| pin.to_string()).unwrap_or_default()),
        None => Default::default(),
    };
    let invoke = pb::InvokeRequest {
        surface: "a2a".into(),
        transition_id: skill,
        task_id: task_id.to_owned(),
        arguments,
        transition_fn: pin,
        ..Default::default()
    };
    let remaining = request.deadline.saturating_duration_since(Instant::now());
    if remaining.is_zero() {
        return Err(Failure::of(FailureCode::Deadline));
    }
    request.heard(request.core.invoke(request.credential, invoke, remaining).await)
}

// The reference encodes the task as a Go map, so each struct below is declared in bytewise
// key order.

#[derive(Serialize)]
pub struct Task<'a> {
    pub artifacts: [Artifact; 1],
    pub id: &'a str,
    pub metadata: TaskMetadata<'a>,
    pub status: TaskStatus,
}

#[derive(Serialize)]
pub struct Artifact {
    pub parts: [DataPart; 1],
}

#[derive(Serialize)]
pub struct DataPart {
    pub data: Box<RawValue>,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

#[derive(Serialize)]
pub struct TaskMetadata<'a> {
    pub entry_index: i64,
    pub invocation_id: &'a str,
    pub world_ref: &'a str,
}

#[derive(Serialize)]
pub struct TaskStatus {
    pub state: &'static str,
}

/// Step 15 (§5.4): the output object re-encoded with sorted keys, as the reference's map is.
pub fn task<'a>(task_id: &'a str, invoked: &'a pb::Invoked) -> Result<Task<'a>, Failure> {
    Ok(Task {
        artifacts: [Artifact { parts: [DataPart { data: sorted_output(&invoked.output)?, kind: "data" }] }],
        id: task_id,
        metadata: TaskMetadata {
            entry_index: invoked.entry_index,
            invocation_id: &invoked.invocation_id,
            world_ref: &invoked.world_ref,
        },
        status: TaskStatus { state: "completed" },
    })
}

/// The reference decodes the output into a Go map and encodes it again: keys sorted, strings
/// HTML-escaped. Numbers keep their exact decimal value in the project's canonical form rather
/// than passing through float64 (DESIGN "Deliberate differences" 1).
pub(crate) fn sorted_output(output: &[u8]) -> Result<Box<RawValue>, Failure> {
    let sorted = match canonicalize(output, output.len()) {
        Ok(canonical) if canonical.first() == Some(&b'{') => json::compact(&canonical),
        // A number, string, array or null is valid JSON but no map: the reference's decode fails.
        Ok(_) => return Err(Failure::of(FailureCode::OutputNotObject)),
        // The canonical parser refuses duplicate members; a map keeps the last of each.
        Err(_) => match serde_json::from_slice::<serde_json::Value>(output) {
            Ok(value @ serde_json::Value::Object(_)) => json::marshal(&value),
            _ => return Err(Failure::of(FailureCode::OutputNotObject)),
        },
    };
    String::from_utf8(sorted)
        .ok()
        .and_then(|text| RawValue::from_string(text).ok())
        .ok_or_else(|| Failure::of(FailureCode::OutputNotObject))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzzing::{member, spelling};
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn envelope_row(body: &str) -> String {
        match parse_envelope(body.as_bytes()) {
            Ok(e) => {
                format!("ok id={} method={} params={:?}", e.id.get(), e.method, e.params.map(|p| p.get().to_owned()))
            }
            Err(EnvelopeError::Undecodable) => "undecodable".to_owned(),
            Err(EnvelopeError::NotVersion2 { id }) => format!("not2 id={}", id.get()),
        }
    }

    #[test]
    fn envelope_rules() {
        let table: &[(&str, &str)] = &[
            (r#"{"jsonrpc":"2.0","id":1,"method":"tasks/send"}"#, "ok id=1 method=tasks/send params=None"),
            (r#"{"jsonrpc":"2.0","method":"x"}"#, "ok id=null method=x params=None"),
            (r#"{"jsonrpc":"2.0","id":"a","method":null}"#, "ok id=\"a\" method= params=None"),
            // Only the first value is decoded.
            (r#"{"jsonrpc":"2.0","id":2,"method":"m"} trailing garbage"#, "ok id=2 method=m params=None"),
            // Go matches field names case-insensitively and re-encodes a raw id compactly.
            (r#"{"JSONRPC":"2.0","Id":[1, 2],"METHOD":"m"}"#, "ok id=[1,2] method=m params=None"),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}"#,
                "ok id=1 method=m params=Some(\"{\\\"a\\\":1}\")",
            ),
            (r#"{"jsonrpc":"1.0","id":3}"#, "not2 id=3"),
            (r#"{"id":4}"#, "not2 id=4"),
            ("null", "not2 id=null"),
            (r#"{"jsonrpc":2,"id":5}"#, "undecodable"),
            (r#"{"jsonrpc":"2.0","method":7}"#, "undecodable"),
            ("[]", "undecodable"),
            ("", "undecodable"),
            ("{", "undecodable"),
            ("\"2.0\"", "undecodable"),
        ];
        for (body, want) in table {
            assert_eq!(envelope_row(body), *want, "{body}");
        }
    }

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn params_follow_the_reference_decode_and_part_rules() {
        // (params, decodes, skill, call is well formed)
        let table: &[(Option<&str>, bool, &str, bool)] = &[
            (None, false, "", false),
            (Some("null"), true, "", false),
            (Some("[]"), false, "", false),
            (
                Some(
                    r#"{"id":"t","metadata":{"skill_id":"a.b"},"message":{"role":"user","parts":[{"type":"data","data":{}}]}}"#,
                ),
                true,
                "a.b",
                true,
            ),
            (
                Some(r#"{"metadata":{"skill_id":7},"message":{"parts":[{"type":"data","data":{"x":1}}]}}"#),
                true,
                "",
                true,
            ),
            // A wrongly typed data fails the decode itself (step 7), before the skill check.
            (Some(r#"{"message":{"parts":[{"type":"data","data":[1]}]}}"#), false, "", false),
            (Some(r#"{"message":{"parts":[{"type":"data","data":"x"}]}}"#), false, "", false),
            (Some(r#"{"id":1}"#), false, "", false),
            (Some(r#"{"metadata":[]}"#), false, "", false),
            (Some(r#"{"message":{"parts":{}}}"#), false, "", false),
            (Some(r#"{"message":{"parts":[{"type":"text","text":5}]}}"#), false, "", false),
            // Shape faults that decode: checked at step 12.
            (Some(r#"{"message":{"parts":[{"type":"text","text":"hi"}]}}"#), true, "", false),
            (Some(r#"{"message":{"parts":[{"type":"data","data":{}},{"type":"data","data":{}}]}}"#), true, "", false),
            (Some(r#"{"message":{"parts":[{"type":"data","data":null}]}}"#), true, "", false),
            (Some(r#"{"message":{"parts":[null]}}"#), true, "", false),
            (Some(r#"{"message":{"parts":[]}}"#), true, "", false),
            (Some(r#"{"message":{"Parts":[{"TYPE":"data","Data":{}}]}}"#), true, "", true),
            // The pin: a string holding a valid ref, when present at all.
            (
                Some(r#"{"metadata":{"transition_fn":"nope"},"message":{"parts":[{"type":"data","data":{}}]}}"#),
                true,
                "",
                false,
            ),
            (
                Some(r#"{"metadata":{"transition_fn":null},"message":{"parts":[{"type":"data","data":{}}]}}"#),
                true,
                "",
                false,
            ),
        ];
        for (params, decodes, skill, well_formed) in table {
            let params_raw = params.map(raw);
            let parsed = parse_params(params_raw.as_deref());
            assert_eq!(parsed.is_ok(), *decodes, "{params:?}");
            if let Ok(parsed) = parsed {
                assert_eq!(parsed.skill(), *skill, "{params:?}");
                assert_eq!(parsed.call().is_some(), *well_formed, "{params:?}");
            }
        }
        let pin = HashRef::of(b"x");
        let text = format!(
            r#"{{"metadata":{{"transition_fn":"{pin}"}},"message":{{"parts":[{{"type":"data","data":{{"a": 1}}}}]}}}}"#
        );
        let params_raw = raw(&text);
        let parsed = parse_params(Some(&params_raw)).unwrap();
        let (data, got) = parsed.call().unwrap();
        assert_eq!((data.get(), got), (r#"{"a": 1}"#, Some(pin)));
    }

    #[test]
    fn the_task_is_sorted_and_go_encoded() {
        let invoked = pb::Invoked {
            output: br#"{"z":1.50,"a":{"y":"<b>","b":[1e2]}}"#.to_vec(),
            invocation_id: "a2a:ep1:t-1".into(),
            world_ref: "sha256:00".into(),
            entry_index: 3,
            task_id: "t-1".into(),
            reconciled: false,
            episode: "ep1".into(),
        };
        let body = json::marshal(&task("t-1", &invoked).unwrap());
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"artifacts":[{"parts":[{"data":{"a":{"b":[100],"y":"\u003cb\u003e"},"z":1.5},"type":"data"}]}],"id":"t-1","metadata":{"entry_index":3,"invocation_id":"a2a:ep1:t-1","world_ref":"sha256:00"},"status":{"state":"completed"}}"#
        );
        let duplicated = pb::Invoked { output: br#"{"b":1,"a":2,"b":3}"#.to_vec(), ..invoked };
        let body = json::marshal(&task("t-1", &duplicated).unwrap());
        assert!(String::from_utf8(body).unwrap().contains(r#""data":{"a":2,"b":3}"#));
    }

    /// Found by the wire property: a committed output that canonicalised but was not an
    /// object (`[1]`, `1e400`) was sent as a completed task's data.
    #[test]
    fn a_committed_output_that_is_not_an_object_is_refused() {
        for output in ["[1]", "1e400", "null", "\"s\"", "7", "true", " [] ", "not json", "[1,1]"] {
            let failure = sorted_output(output.as_bytes()).err();
            assert_eq!(failure.map(|f| f.code), Some(FailureCode::OutputNotObject), "{output}");
        }
        assert_eq!(sorted_output(br#" {"b":1,"a":[1e2]} "#).unwrap().get(), r#"{"a":[100],"b":1}"#);
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(256))]

        #[test]
        fn envelope_and_params_parsing_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Ok(envelope) = parse_envelope(&bytes) {
                let _ = parse_params(envelope.params.as_deref()).map(|p| (p.skill(), p.call().is_some()));
            }
        }

        #[test]
        fn params_parsing_never_panics_on_jsonish_text(text in r#"[\[\]{}",:0-9a-z ]{0,64}"#) {
            if let Ok(value) = RawValue::from_string(text) {
                let _ = parse_params(Some(&value)).map(|p| (p.skill(), p.call().is_some()));
            }
        }
    }

    fn jsonrpc_member() -> impl Strategy<Value = Option<Value>> {
        member(vec![json!("2.0"), json!("2.0"), json!("1.0"), json!(""), json!(2), Value::Null, json!(["2.0"])])
    }

    fn id_member() -> impl Strategy<Value = Option<Value>> {
        member(vec![json!(1), json!("a-1"), Value::Null, json!([1, " <"]), json!({"k": "&"}), json!(1.5), json!("ü")])
    }

    fn string_or_not(strings: &[&str]) -> impl Strategy<Value = Option<Value>> {
        let mut pool: Vec<Value> = strings.iter().map(|s| json!(s)).collect();
        pool.extend([Value::Null, json!(7), json!(["x"]), json!({})]);
        member(pool)
    }

    /// `Some(text)` for a Go string field's value, `None` when the kind makes the decode fail.
    fn go_text(value: &Option<Value>) -> Option<String> {
        match value {
            None | Some(Value::Null) => Some(String::new()),
            Some(Value::String(text)) => Some(text.clone()),
            Some(_) => None,
        }
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(512))]

        /// The envelope decodes as Go decodes it into `{jsonrpc, id, method, params}`, whatever
        /// the key case, member order, spacing or trailing bytes.
        #[test]
        fn envelopes_decode_as_go_decodes_them(
            jsonrpc in jsonrpc_member(),
            id in id_member(),
            method in string_or_not(&["tasks/send", "GetTask", ""]),
            params in member(vec![json!({}), json!([]), Value::Null, json!("x"), json!({"a": [1, {"b": "<"}]})]),
            top in prop::sample::select(vec!["object", "object", "object", "null", "array", "string"]),
            trailing in prop::sample::select(vec!["", "", " ", " garbage", "{"]),
            spelling in spelling(),
        ) {
            let body = match top {
                "object" => spelling.object(&[("jsonrpc", &jsonrpc), ("id", &id), ("method", &method), ("params", &params)]),
                "null" => "null".to_owned(),
                "array" => "[]".to_owned(),
                _ => "\"2.0\"".to_owned(),
            } + trailing;
            let parsed = parse_envelope(body.as_bytes());
            let fields = (go_text(&jsonrpc), go_text(&method));
            let want_id = id.clone().unwrap_or(Value::Null);
            let id_of = |raw: &RawValue| serde_json::from_str::<Value>(raw.get()).unwrap();
            match (top, fields, parsed) {
                ("null", _, Err(EnvelopeError::NotVersion2 { id })) => prop_assert_eq!(id.get(), "null"),
                ("object", (Some(jsonrpc), Some(method)), Ok(envelope)) => {
                    prop_assert_eq!(jsonrpc, "2.0");
                    prop_assert_eq!(envelope.method, method);
                    prop_assert_eq!(id_of(&envelope.id), want_id);
                    prop_assert!(!envelope.id.get().contains(['\n', '<', '&']), "compact and Go-escaped: {}", envelope.id.get());
                    let got = envelope.params.map(|p| serde_json::from_str::<Value>(p.get()).unwrap());
                    prop_assert_eq!(got, params);
                }
                ("object", (Some(jsonrpc), Some(_)), Err(EnvelopeError::NotVersion2 { id })) => {
                    prop_assert_ne!(jsonrpc, "2.0");
                    prop_assert_eq!(id_of(&id), want_id);
                }
                ("object", (None, _) | (_, None), Err(EnvelopeError::Undecodable)) => {}
                ("array" | "string", _, Err(EnvelopeError::Undecodable)) => {}
                (top, fields, parsed) => prop_assert!(false, "{} {:?} {:?} -> {:?}", top, fields, body, parsed),
            }
        }

        /// `tasks/send` params decode as the reference's struct does, and the call is well
        /// formed exactly when the seed says: one data part holding an object, and a pin that,
        /// when present, is a string holding a ref.
        #[test]
        fn tasks_send_params_decode_as_the_reference_does(
            shape in prop::sample::select(vec!["object", "object", "object", "object", "null", "array", "absent"]),
            task_id in string_or_not(&["read-1"]),
            message_kind in prop::sample::select(vec!["object", "object", "object", "null", "string"]),
            role in string_or_not(&["user"]),
            parts_kind in prop::sample::select(vec!["array", "array", "array", "null", "object"]),
            parts in prop::collection::vec(
                (
                    prop::sample::select(vec!["object", "object", "object", "null", "string"]),
                    string_or_not(&["data", "data", "text"]),
                    string_or_not(&["hi"]),
                    member(vec![Value::Null, json!({}), json!({"path": "a"}), json!([1]), json!("x")]),
                ),
                0..3,
            ),
            metadata_kind in prop::sample::select(vec!["object", "object", "object", "null", "array", "absent"]),
            skill in member(vec![json!("ailang-read"), json!(7), Value::Null]),
            pin in member(vec![json!(HashRef::of(b"x").to_string()), json!("nope"), Value::Null, json!(5)]),
            spelling in spelling(),
        ) {
            // Each level decodes only when its own members do and the level holding it is read.
            let mut parts_decode = true;
            let parts_text: Vec<String> = parts.iter().map(|(kind, kind_field, text, data)| match *kind {
                "object" => {
                    let data_ok = matches!(data, None | Some(Value::Null) | Some(Value::Object(_)));
                    parts_decode &= go_text(kind_field).is_some() && go_text(text).is_some() && data_ok;
                    spelling.object(&[("type", kind_field), ("text", text), ("data", data)])
                }
                "null" => "null".to_owned(),
                _ => { parts_decode = false; "\"part\"".to_owned() }
            }).collect();
            let one_data_part = match parts.as_slice() {
                [(kind, kind_field, _, data)] => *kind == "object" && go_text(kind_field).as_deref() == Some("data") && matches!(data, Some(Value::Object(_))),
                _ => false,
            };
            let parts_value = match parts_kind {
                "array" => format!("[{}]", parts_text.join(",")),
                "null" => { parts_decode = true; "null".to_owned() }
                _ => { parts_decode = false; "{}".to_owned() }
            };
            let (message, message_decodes) = match message_kind {
                "object" => {
                    let parts_member = Some(serde_json::from_str::<Value>(&parts_value).unwrap());
                    (Some(spelling.object(&[("role", &role), ("parts", &parts_member)])), go_text(&role).is_some() && parts_decode)
                }
                "null" => (Some("null".to_owned()), true),
                _ => (Some("\"message\"".to_owned()), false),
            };
            let mut decodes = go_text(&task_id).is_some() && message_decodes;
            let metadata = match metadata_kind {
                "object" => Some(spelling.exact_object(&[("skill_id", &skill), ("transition_fn", &pin)])),
                "null" => Some("null".to_owned()),
                "array" => { decodes = false; Some("[]".to_owned()) }
                _ => None,
            };
            let as_value = |text: Option<String>| text.map(|t| serde_json::from_str::<Value>(&t).unwrap());
            let text = match shape {
                "object" => Some(spelling.object(&[("id", &task_id), ("message", &as_value(message.clone())), ("metadata", &as_value(metadata.clone()))])),
                "null" => Some("null".to_owned()),
                "array" => { decodes = false; Some("[]".to_owned()) }
                _ => { decodes = false; None }
            };
            let raw_params = text.map(|t| RawValue::from_string(t).unwrap());
            let parsed = parse_params(raw_params.as_deref());
            if shape != "object" {
                decodes = shape == "null";
            }
            prop_assert_eq!(parsed.is_ok(), decodes, "{:?}", raw_params);
            let Ok(parsed) = parsed else { return Ok(()) };
            let in_metadata = shape == "object" && metadata_kind == "object";
            let want_skill = match (&skill, in_metadata) {
                (Some(Value::String(skill)), true) => skill.clone(),
                _ => String::new(),
            };
            prop_assert_eq!(parsed.skill(), want_skill);
            let pin_ok = !in_metadata || match &pin {
                None => true,
                Some(Value::String(text)) => HashRef::parse(text).is_ok(),
                Some(_) => false,
            };
            let parts_ok = shape == "object" && message_kind == "object" && parts_kind == "array" && one_data_part;
            prop_assert_eq!(parsed.call().is_some(), parts_ok && pin_ok, "{:?}", raw_params);
        }
    }
}
