//! The `Origin` rule: a transport rule, which the MCP handler applies in its place in DESIGN's
//! order (after Authorization, before the body is read).

use http::HeaderMap;
use http::header::ORIGIN;

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

    /// Whether a request with `headers` may go on: one without an `Origin` always may.
    pub fn admits(&self, headers: &HeaderMap) -> bool {
        headers.get(ORIGIN).is_none_or(|origin| self.allows(&String::from_utf8_lossy(origin.as_bytes())))
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

#[cfg(test)]
mod tests {
    use super::*;

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

    proptest::proptest! {
        #![proptest_config(crate::fuzzing::config(256))]

        #[test]
        fn origin_checks_never_panic(text in ".{0,64}") {
            let _ = OriginPolicy::new(&[text.as_str()]).allows(&text);
        }
    }
}
