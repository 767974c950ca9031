//! `POST /a2a/`: A2A JSON-RPC (reference-edge §5). Every answer is HTTP 200.
//!
//! Implemented so far: the session check before the body is read (§5.2 steps 2–3), the 1 MiB
//! decoder-bounded envelope, the `jsonrpc` and method checks (steps 4–6). `tasks/send` and its
//! `message/send` alias answer "transition invocation is not available in this daemon", which
//! is the reference's answer of a daemon without a coordinator; [`send`] is where the params
//! checks and the core's `Invocation.Invoke` go.

use axum::body::Body;
use axum::response::Response;
use http::HeaderMap;
use serde_json::Value;
use world_model::failure::{A2A_INVALID_REQUEST, A2A_METHOD_NOT_FOUND};
use world_model::{Failure, FailureCode};
use world_proto::v1 as pb;

use crate::body::{A2A_LIMIT, read_prefix};
use crate::core::CoreClient;
use crate::session;
use crate::wire;

/// The methods that invoke a transition: the legacy `tasks/send` and DESIGN's alias.
pub const SEND_METHODS: [&str; 2] = ["tasks/send", "message/send"];

/// A JSON-RPC request that passed the envelope checks.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    /// Echoed as sent; `null` when absent.
    pub id: Value,
    pub method: String,
    pub params: Option<Value>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum EnvelopeError {
    /// Not one decodable JSON-RPC object: answered with id `null`.
    Undecodable,
    /// `jsonrpc` is not `"2.0"`: answered with the request's id.
    NotVersion2 { id: Value },
}

/// Go decodes the first JSON value into `{jsonrpc, id, method, params}`; trailing bytes are not
/// examined. A string field holding `null` stays empty; any other type is a decode error.
pub fn parse_envelope(bytes: &[u8]) -> Result<Envelope, EnvelopeError> {
    let first = serde_json::Deserializer::from_slice(bytes).into_iter::<Value>().next();
    let object = match first {
        Some(Ok(Value::Object(object))) => object,
        // Go decodes `null` into the struct as a no-op: every field stays empty.
        Some(Ok(Value::Null)) => serde_json::Map::new(),
        _ => return Err(EnvelopeError::Undecodable),
    };
    let text = |key: &str| match object.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err(EnvelopeError::Undecodable),
    };
    let jsonrpc = text("jsonrpc")?;
    let method = text("method")?;
    let id = object.get("id").cloned().unwrap_or(Value::Null);
    if jsonrpc != "2.0" {
        return Err(EnvelopeError::NotVersion2 { id });
    }
    Ok(Envelope { id, method, params: object.get("params").cloned() })
}

pub async fn handle(core: &CoreClient, headers: &HeaderMap, body: Body) -> Response {
    let credential = match session::precheck(headers) {
        Ok(credential) => credential,
        Err(denial) => return wire::a2a_failure(&Failure::from(denial), &Value::Null),
    };
    let admitted = match core.admit(&credential).await {
        Ok(admitted) => admitted,
        Err(failure) => return wire::a2a_failure(&failure, &Value::Null),
    };
    let invalid_request = |id: &Value| wire::a2a_error(A2A_INVALID_REQUEST.0, A2A_INVALID_REQUEST.1, id);
    let Ok(bytes) = read_prefix(body, A2A_LIMIT).await else {
        return invalid_request(&Value::Null);
    };
    let envelope = match parse_envelope(&bytes) {
        Ok(envelope) => envelope,
        Err(EnvelopeError::Undecodable) => return invalid_request(&Value::Null),
        Err(EnvelopeError::NotVersion2 { id }) => return invalid_request(&id),
    };
    if !SEND_METHODS.contains(&envelope.method.as_str()) {
        return wire::a2a_error(A2A_METHOD_NOT_FOUND.0, A2A_METHOD_NOT_FOUND.1, &envelope.id);
    }
    send(&admitted, &envelope)
}

/// One `tasks/send`. There is no coordinator behind this edge yet, so the answer is the
/// reference's not-available row, logged like the reference's refusal line.
fn send(_admitted: &pb::Admitted, envelope: &Envelope) -> Response {
    tracing::info!(method = %envelope.method, "a2a refusal: no invocation service behind this edge");
    wire::a2a_failure(&Failure::of(FailureCode::Unavailable), &envelope.id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn envelope_rules() {
        let ok = |id: Value, method: &str| Ok(Envelope { id, method: method.into(), params: None });
        let table: &[(&str, Result<Envelope, EnvelopeError>)] = &[
            (r#"{"jsonrpc":"2.0","id":1,"method":"tasks/send"}"#, ok(json!(1), "tasks/send")),
            (r#"{"jsonrpc":"2.0","method":"x"}"#, ok(Value::Null, "x")),
            (r#"{"jsonrpc":"2.0","id":"a","method":null}"#, ok(json!("a"), "")),
            // Only the first value is decoded.
            (r#"{"jsonrpc":"2.0","id":2,"method":"m"} trailing garbage"#, ok(json!(2), "m")),
            (r#"{"jsonrpc":"1.0","id":3}"#, Err(EnvelopeError::NotVersion2 { id: json!(3) })),
            (r#"{"id":4}"#, Err(EnvelopeError::NotVersion2 { id: json!(4) })),
            ("null", Err(EnvelopeError::NotVersion2 { id: Value::Null })),
            (r#"{"jsonrpc":2,"id":5}"#, Err(EnvelopeError::Undecodable)),
            (r#"{"jsonrpc":"2.0","method":7}"#, Err(EnvelopeError::Undecodable)),
            ("[]", Err(EnvelopeError::Undecodable)),
            ("", Err(EnvelopeError::Undecodable)),
            ("{", Err(EnvelopeError::Undecodable)),
            ("\"2.0\"", Err(EnvelopeError::Undecodable)),
        ];
        for (body, want) in table {
            assert_eq!(&parse_envelope(body.as_bytes()), want, "{body}");
        }
        let with_params = parse_envelope(br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}"#).unwrap();
        assert_eq!(with_params.params, Some(json!({"a": 1})));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn envelope_parsing_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = parse_envelope(&bytes);
        }
    }
}
