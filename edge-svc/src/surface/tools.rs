//! A surface's MCP tools, made here and nowhere else: each descriptor as `tools/list` shows it
//! (mcphttp's struct order), names escaped, schemas normalised, sorted by name, and the list
//! encoded once for every `tools/list` the surface answers.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::value::RawValue;
use world_model::{McpNameError, escape_surface, go_quote};
use world_proto::v1 as pb;

use crate::json::{self, compact_raw, go_members};

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

/// The `tools/list` array of `descriptors`, encoded, or why the surface has no MCP tools.
pub fn encoded(descriptors: &[pb::Descriptor]) -> Result<Box<RawValue>, String> {
    let tools = tool_surface(descriptors).map_err(|error| error.to_string())?;
    let text = String::from_utf8(json::marshal(&tools)).map_err(|error| error.to_string())?;
    RawValue::from_string(text).map_err(|error| error.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let listed = encoded(&[
            descriptor("tools.echo", r#"{"type":"object"}"#, r#"{"type":"object"}"#, "Echo"),
            descriptor("a_b/c", r#"{"required":["x"],"properties":{"x":{"type":"string"}}}"#, "", ""),
        ])
        .unwrap();
        assert_eq!(
            listed.get(),
            r#"[{"name":"a_ub_sc","inputSchema":{"properties":{"x":{"type":"string"}},"required":["x"],"type":"object"}},{"name":"tools_decho","description":"Echo","inputSchema":{"type":"object"},"outputSchema":{"type":"object"}}]"#
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

    proptest::proptest! {
        #![proptest_config(crate::fuzzing::config(256))]

        #[test]
        fn input_schemas_never_panic(text in ".{0,64}") {
            let _ = input_schema(text.as_bytes());
        }
    }
}
