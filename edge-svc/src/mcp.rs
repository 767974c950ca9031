//! `POST /mcp/`: MCP streamable HTTP (reference-edge §6, §7; DESIGN "Edge").
//!
//! Implemented so far, in DESIGN's order: Authorization first (every denial is the 401
//! text/plain), admission (a failure is the whole-POST envelope), Origin (403 when present and
//! not allowed), the 4 MiB body cap. The methods are not served yet: every message is answered
//! `-32601 method not found`; [`dispatch`] is where Content-Type, Accept,
//! MCP-Protocol-Version, batches and the methods go.

use axum::body::Body;
use axum::response::Response;
use http::header::ORIGIN;
use http::{HeaderMap, StatusCode};
use serde_json::Value;
use world_model::go_quote;
use world_proto::v1 as pb;

use crate::body::{MCP_LIMIT, read_capped};
use crate::core::CoreClient;
use crate::session;
use crate::wire;

/// The whole-POST message for a body over the cap or unreadable (reference-edge §6.3 step 1).
pub const INVALID_BODY: &str = "invalid MCP request body";
pub const ORIGIN_REFUSED: &str = "Origin is not allowed";

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

pub async fn handle(core: &CoreClient, origins: &OriginPolicy, headers: &HeaderMap, body: Body) -> Response {
    let credential = match session::precheck(headers) {
        Ok(credential) => credential,
        Err(denial) => return wire::mcp_denial(denial),
    };
    let admitted = match core.admit(&credential).await {
        Ok(admitted) => admitted,
        Err(failure) => return wire::mcp_failure(&failure, &Value::Null),
    };
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = String::from_utf8_lossy(origin.as_bytes());
        if !origins.allows(&origin) {
            return wire::mcp_transport_error(StatusCode::FORBIDDEN, &Value::Null, -32600, ORIGIN_REFUSED);
        }
    }
    let Ok(bytes) = read_capped(body, MCP_LIMIT).await else {
        return wire::mcp_host_envelope(INVALID_BODY, &Value::Null);
    };
    dispatch(&admitted, &bytes)
}

/// The top-level `id` and `method` of a single JSON-RPC object, for answering it; `null` and
/// empty for anything else (arrays included), as mcphttp extracts the id.
pub fn id_and_method(bytes: &[u8]) -> (Value, String) {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(object)) => {
            let method = match object.get("method") {
                Some(Value::String(method)) => method.clone(),
                _ => String::new(),
            };
            (object.get("id").cloned().unwrap_or(Value::Null), method)
        }
        _ => (Value::Null, String::new()),
    }
}

/// No MCP method is served yet; answer each request so a client sees why.
fn dispatch(_admitted: &pb::Admitted, bytes: &[u8]) -> Response {
    let (id, method) = id_and_method(bytes);
    let message = format!("method not found: {}", go_quote(&method));
    wire::mcp_transport_error(StatusCode::OK, &id, -32601, &message)
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn id_and_method_extraction() {
        assert_eq!(id_and_method(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#), (json!(7), "ping".to_owned()));
        assert_eq!(id_and_method(br#"[{"id":1}]"#), (Value::Null, String::new()));
        assert_eq!(id_and_method(b"junk"), (Value::Null, String::new()));
        assert_eq!(id_and_method(br#"{"id":"x","method":3}"#), (json!("x"), String::new()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn origin_and_body_parsing_never_panic(text in ".{0,64}") {
            let _ = OriginPolicy::new(&[text.as_str()]).allows(&text);
            let _ = id_and_method(text.as_bytes());
        }
    }
}
