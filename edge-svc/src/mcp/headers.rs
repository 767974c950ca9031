//! `/mcp/`'s header rules (reference-edge §6.3 steps 4–6): Content-Type, Accept and
//! MCP-Protocol-Version, each as literal as mcphttp's.

use http::HeaderMap;
use http::header::{ACCEPT, CONTENT_TYPE};
use world_model::go_quote;

/// Newest first; 2026-07-28 is deliberately absent, as in the reference (§6.1).
pub const SUPPORTED_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// Assumed when the header is absent or empty; the only version that allows batches.
pub const DEFAULT_VERSION: &str = "2025-03-26";

/// The POST's effective protocol version when its headers meet every rule, else the message
/// of the 400 the first broken rule answers.
pub fn check(headers: &HeaderMap) -> Result<&'static str, String> {
    if !content_type_is_json(headers) {
        return Err("Content-Type must be application/json".to_owned());
    }
    if !accepts_json_and_sse(headers) {
        return Err("Accept must list both application/json and text/event-stream".to_owned());
    }
    protocol_version(headers).map_err(|sent| {
        format!("unsupported MCP-Protocol-Version {} (supported: {})", go_quote(&sent), SUPPORTED_VERSIONS.join(", "))
    })
}

/// A media type as Go's `mime.ParseMediaType` names it: lowercased, parameters dropped.
fn media_type(value: &str) -> Option<String> {
    let media = value.split(';').next()?.trim().to_ascii_lowercase();
    (!media.is_empty()).then_some(media)
}

/// The first Content-Type (Go's `Header.Get`) must be `application/json`, parameters allowed.
fn content_type_is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(media_type)
        .is_some_and(|media| media == "application/json")
}

/// Across every Accept value both types must be listed literally: `*/*` and `application/*`
/// do not count, and `q` is ignored (§6.3 step 5).
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
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
fn protocol_version(headers: &HeaderMap) -> Result<&'static str, String> {
    let Some(value) = headers.get("mcp-protocol-version") else {
        return Ok(DEFAULT_VERSION);
    };
    let text = String::from_utf8_lossy(value.as_bytes());
    if text.is_empty() {
        return Ok(DEFAULT_VERSION);
    }
    SUPPORTED_VERSIONS.iter().find(|version| **version == text).copied().ok_or_else(|| text.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
