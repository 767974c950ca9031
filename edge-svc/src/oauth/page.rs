//! The authorization endpoint's pages: the approval page (the client, where the browser will
//! return, the approval code and the operator's command) and the refusal page. No script runs:
//! the page moves on by a meta refresh to the long-poll at `/authorize/wait`, and its one
//! inline style is allowed by its hash alone, so the policy is as strict as the explorer's.

use std::sync::LazyLock;

use axum::response::Response;
use base64::Engine as _;
use http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS};
use http::{HeaderValue, StatusCode};
use sha2::Digest as _;

use crate::wire;

const STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2430}\
main{max-width:40rem;margin:3rem auto;padding:2rem;background:#fff;border-radius:12px;\
box-shadow:0 1px 4px rgba(0,0,0,.1)}h1{margin-top:0;font-size:1.5rem}\
#approval-code{font:700 2.2rem/1.2 ui-monospace,monospace;letter-spacing:.15em;margin:.5rem 0 1rem}\
pre,code{font-family:ui-monospace,monospace;background:#eef1f5;border-radius:6px}\
pre{padding:.75rem;white-space:pre-wrap;word-break:break-all}code{padding:0 .25rem;word-break:break-all}\
.muted{color:#5b6472;font-size:.9rem}#error{color:#a11d2b}";

/// The pages' policy: nothing but their own inline style.
pub static CONTENT_SECURITY_POLICY_VALUE: LazyLock<String> = LazyLock::new(|| {
    let digest = base64::engine::general_purpose::STANDARD.encode(sha256(STYLE.as_bytes()));
    format!(
        "default-src 'none'; style-src 'sha256-{digest}'; img-src 'none'; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'"
    )
});

fn sha256(bytes: &[u8]) -> Vec<u8> {
    sha2::Sha256::digest(bytes).to_vec()
}

/// What the waiting page shows.
pub struct Waiting<'a> {
    pub request: &'a str,
    pub approval_code: &'a str,
    pub client_name: &'a str,
    pub redirect_uri: &'a str,
    pub expires_at: i64,
}

/// The page that waits for the operator; it reloads itself through the long-poll.
pub fn waiting(waiting: &Waiting<'_>) -> Response {
    let code = escape(waiting.approval_code);
    let refresh = format!("1;url=/authorize/wait?request={}", world_model::oauth::form_encode(waiting.request));
    let body = format!(
        "<h1>Sign in to World</h1>\
         <p><strong id=\"client-name\">{client}</strong> asks for a World session. Once it is approved, this \
         browser returns to <code id=\"redirect-uri\">{redirect}</code>.</p>\
         <p>Approval code</p><p id=\"approval-code\">{code}</p>\
         <p>The operator of this World approves it at a terminal, with the episode and grants the session gets:</p>\
         <pre id=\"approve-command\">world-core session approve {code} --store STORE --episode EPISODE --grant EFFECT=SCOPE:BUDGET</pre>\
         <p>or refuses it:</p><pre id=\"deny-command\">world-core session deny {code} --store STORE</pre>\
         <p id=\"status\" class=\"muted\">Waiting for the operator; this page moves on by itself. \
         The request expires at {expires} UTC.</p>",
        client = escape(waiting.client_name),
        redirect = escape(waiting.redirect_uri),
        expires = clock(waiting.expires_at),
    );
    page(StatusCode::OK, &format!("<meta http-equiv=\"refresh\" content=\"{}\">", escape(&refresh)), &body)
}

/// What a HEAD of the approval page answers: the page's status and headers, nothing started.
pub fn headers_only() -> Response {
    page(StatusCode::OK, "", "")
}

/// A request the endpoint will not redirect for: what was wrong, and nothing else.
pub fn refused(status: StatusCode, error: &str, description: &str) -> Response {
    let body = format!(
        "<h1>Sign-in refused</h1><p id=\"error\" data-error=\"{}\">{}</p>\
         <p class=\"muted\">Start the sign-in again from your MCP client.</p>",
        escape(error),
        escape(description)
    );
    page(status, "", &body)
}

fn page(status: StatusCode, head: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{head}\
         <title>Sign in to World</title><style>{STYLE}</style></head><body><main>{body}</main></body></html>\n"
    );
    let mut response = wire::bytes(status, "text/html; charset=utf-8", html.into_bytes());
    let headers = response.headers_mut();
    if let Ok(policy) = HeaderValue::from_str(&CONTENT_SECURITY_POLICY_VALUE) {
        headers.insert(CONTENT_SECURITY_POLICY, policy);
    }
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// `HH:MM:SS` of a Unix time, UTC.
fn clock(unix: i64) -> String {
    let seconds = unix.rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", seconds / 3600, seconds % 3600 / 60, seconds % 60)
}

/// Text for HTML content and attribute values.
fn escape(text: &str) -> String {
    wire::html_escape(text, "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn text(response: Response) -> String {
        String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    #[tokio::test]
    async fn the_waiting_page_shows_the_code_escapes_the_client_and_allows_only_its_style() {
        let response = waiting(&Waiting {
            request: "h+/=",
            approval_code: "ABCD-EFGH",
            client_name: "<script>alert(1)</script>",
            redirect_uri: "http://127.0.0.1:9/cb?a=1&b=\"2\"",
            expires_at: 3_661,
        });
        assert_eq!(response.status(), StatusCode::OK);
        let policy = response.headers()["content-security-policy"].to_str().unwrap().to_owned();
        assert!(policy.starts_with("default-src 'none'; style-src 'sha256-"), "{policy}");
        assert!(!policy.contains("script-src") && !policy.contains("unsafe"));
        let expected = base64::engine::general_purpose::STANDARD.encode(sha256(STYLE.as_bytes()));
        assert!(policy.contains(&expected));
        let body = text(response).await;
        assert!(body.contains(r#"<p id="approval-code">ABCD-EFGH</p>"#), "{body}");
        assert!(body.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !body.contains("<script>"));
        assert!(body.contains("http://127.0.0.1:9/cb?a=1&amp;b=&quot;2&quot;"));
        assert!(body.contains(r#"content="1;url=/authorize/wait?request=h%2B%2F%3D""#), "{body}");
        assert!(body.contains("world-core session approve ABCD-EFGH --store STORE"));
        assert!(body.contains("expires at 01:01:01 UTC"));
    }

    #[tokio::test]
    async fn the_refusal_page_never_refreshes() {
        let response = refused(StatusCode::BAD_REQUEST, "invalid_request", "redirect_uri \"x\" is not registered");
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert!(response.headers().get("location").is_none());
        let body = text(response).await;
        assert!(body.contains(r#"data-error="invalid_request">redirect_uri &quot;x&quot; is not registered</p>"#));
        assert!(!body.contains("refresh"));
    }
}
