//! `/mcp/`'s JSON-RPC: the POST's own id, each message classified as mcphttp does (§6.5), and
//! a request's success reply.

use axum::response::Response;
use http::StatusCode;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::json::{self, compact_raw, go_fields, go_string};
use crate::wire;

/// JSON-RPC's error codes, as `/mcp/` answers them.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// The top-level `id` of a body that is one JSON object, for answering the POST as a whole;
/// `null` for anything else (arrays included), as mcphttp extracts it (§6.3 step 2).
pub fn top_level_id(bytes: &[u8]) -> Box<RawValue> {
    serde_json::from_slice::<&RawValue>(bytes)
        .ok()
        .and_then(|value| go_fields(value, ["id"]).ok().flatten())
        .and_then(|[id]| id.map(compact_raw))
        .unwrap_or_else(|| RawValue::NULL.to_owned())
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
    pub fn response(&self) -> Response {
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

/// A request's success reply: `result` under the request's id.
pub fn reply<R: Serialize + ?Sized>(id: &RawValue, result: &R) -> Vec<u8> {
    json::marshal(&Reply { jsonrpc: "2.0", id, result })
}

/// [`reply`] written into a buffer of `size` bytes, for a reply whose size is known ahead.
pub fn reply_sized<R: Serialize + ?Sized>(id: &RawValue, result: &R, size: usize) -> Vec<u8> {
    json::marshal_sized(&Reply { jsonrpc: "2.0", id, result }, size)
}

#[derive(Serialize)]
struct Reply<'a, R: ?Sized> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    result: &'a R,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzzing::{member, spelling};
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn the_post_id_is_the_top_level_id_of_one_object() {
        assert_eq!(top_level_id(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).get(), "7");
        assert_eq!(top_level_id(br#"{"ID": [1, "<"]}"#).get(), r#"[1,"\u003c"]"#);
        assert_eq!(top_level_id(br#"[{"id":1}]"#).get(), "null");
        assert_eq!(top_level_id(b"junk").get(), "null");
        assert_eq!(top_level_id(br#"{"method":"x"}"#).get(), "null");
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

    proptest! {
        #![proptest_config(crate::fuzzing::config(256))]

        #[test]
        fn body_parsing_never_panics(text in ".{0,64}") {
            let _ = top_level_id(text.as_bytes());
            let _ = classify(text.as_bytes());
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
