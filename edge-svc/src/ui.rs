//! The world explorer at `/ui/`: one page and its script and style, embedded in the binary so
//! the edge serves it with nothing beside it. The page reads the `/v1` routes with the session
//! a person pastes and checks every object's bytes against its ref in the browser.

use axum::response::Response;
use http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS};
use http::{HeaderValue, StatusCode};

use crate::wire;

/// Only the edge's own script, style and reads; no inline code, no frames, no forms elsewhere.
pub const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const ASSETS: &[(&str, &str, &str)] = &[
    ("", "text/html; charset=utf-8", include_str!("../ui/index.html")),
    ("app.js", "text/javascript; charset=utf-8", include_str!("../ui/app.js")),
    ("sha256.js", "text/javascript; charset=utf-8", include_str!("../ui/sha256.js")),
    ("app.css", "text/css; charset=utf-8", include_str!("../ui/app.css")),
];

/// `GET /ui/{name}`: an embedded asset, or 404.
pub fn asset(name: &str) -> Response {
    let Some((_, content_type, body)) = ASSETS.iter().find(|(asset, _, _)| *asset == name) else {
        return wire::not_found();
    };
    // A static body: served from the binary without a copy.
    let mut response = wire::bytes(StatusCode::OK, content_type, *body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE));
    // Nothing the page shows may outlive the tab.
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_carry_the_policy_and_unknown_names_are_404() {
        for (name, content_type, _) in ASSETS {
            let response = asset(name);
            assert_eq!(response.status(), StatusCode::OK, "{name}");
            assert_eq!(response.headers()["content-type"], *content_type);
            assert_eq!(response.headers()["content-security-policy"], CONTENT_SECURITY_POLICY_VALUE);
            assert_eq!(response.headers()["cache-control"], "no-store");
        }
        assert_eq!(asset("index.html").status(), StatusCode::NOT_FOUND);
        assert_eq!(asset("../Cargo.toml").status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn the_page_loads_only_its_own_assets() {
        let page = ASSETS[0].2;
        assert!(!page.contains("<script>") && !page.contains("style="), "inline code would break the policy");
        assert!(page.contains(r#"src="app.js""#) && page.contains(r#"href="app.css""#));
    }
}
