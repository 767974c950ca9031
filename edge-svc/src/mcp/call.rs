//! A `tools/call`: its params as sent, and the tool result a committed call's output becomes.

use serde::Serialize;
use serde_json::value::RawValue;

use super::jsonrpc::{INTERNAL_ERROR, reply};
use crate::json::{compact_raw, go_fields, go_string};
use crate::wire;

/// A `tools/call`'s tool name and arguments as sent, or why its params do not decode.
pub fn tool_call(params: Option<&RawValue>) -> Result<(String, Option<&RawValue>), String> {
    let params = params.ok_or_else(|| "unexpected end of JSON input".to_owned())?;
    let [name, arguments] = go_fields(params, ["name", "arguments"]).map_err(|e| e.to_string())?.unwrap_or_default();
    Ok((go_string(name).map_err(|e| e.to_string())?, arguments))
}

/// A committed call's output as the tool result: the bytes verbatim as text and the same JSON,
/// compacted, as `structuredContent` (§6.7).
pub fn tool_result(id: &RawValue, output: &[u8]) -> Vec<u8> {
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

/// A tool's own error as its result: `text` says what went wrong (no `structuredContent`).
pub fn error_result(id: &RawValue, text: &str) -> Vec<u8> {
    reply(id, &CallError { content: [TextContent { kind: "text", text }], is_error: true })
}

/// Whether a tool output is an object whose top-level `ok` is `false`.
fn says_not_ok(output: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Verdict {
        ok: Option<serde_json::Value>,
    }
    serde_json::from_str::<Verdict>(output.get()).is_ok_and(|v| v.ok == Some(serde_json::Value::Bool(false)))
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
