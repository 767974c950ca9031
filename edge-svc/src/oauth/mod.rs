//! OAuth sign-in for MCP clients, the edge's side: discovery (RFC 9728 protected-resource
//! metadata, RFC 8414 authorization-server metadata, the `WWW-Authenticate` challenge on every
//! 401 from `/mcp/`), dynamic registration (RFC 7591), the authorization endpoint's approval
//! page and its long-poll, and the token endpoint. The core decides every step
//! (`world.v1.OAuth`); this module parses HTTP and renders the answers.
//!
//! No code, token, verifier or request handle is logged or put on a span here: the request
//! line's query and the bodies never leave the handlers.

mod client;
mod page;
mod params;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::response::Response;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION, PRAGMA, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::Serialize;
use world_model::oauth::{OAuthErrorCode, redirect_with};
use world_proto::v1 as pb;

use crate::body::read_capped;
use crate::core::CoreClient;
use crate::{json, wire};

/// The registration and token endpoints read at most this much of a body.
const BODY_LIMIT: usize = 65_536;
/// How long one long-poll at `/authorize/wait` holds the browser before answering the page again.
const WAIT_HOLD: Duration = Duration::from_secs(10);
/// How often the long-poll asks the core.
const WAIT_STEP: Duration = Duration::from_secs(1);

/// The OAuth endpoints the router knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `GET /.well-known/oauth-protected-resource/mcp/`: RFC 9728 for `/mcp/`.
    McpResource,
    /// `GET /.well-known/oauth-protected-resource`: RFC 9728, root-based.
    RootResource,
    /// `GET /.well-known/oauth-authorization-server`: RFC 8414.
    Server,
    /// `POST /register`: RFC 7591.
    Register,
    /// `GET /authorize`: the approval page.
    Authorize,
    /// `GET /authorize/wait`: the page's long-poll.
    Wait,
    /// `POST /token`.
    Token,
}

/// The address clients see (`--public-url`): an origin, `scheme://host[:port]`, no path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublicUrl(String);

#[derive(Debug, thiserror::Error)]
#[error(
    "--public-url {0:?} must be the origin clients reach this edge at: http:// or https://, a host and an \
     optional port, no path (for example https://world.example.com)"
)]
pub struct PublicUrlError(String);

impl PublicUrl {
    pub fn parse(text: &str) -> Result<Self, PublicUrlError> {
        let trimmed = text.trim().trim_end_matches('/');
        let refused = || PublicUrlError(text.to_owned());
        let rest = trimmed.strip_prefix("https://").or_else(|| trimmed.strip_prefix("http://")).ok_or_else(refused)?;
        if rest.is_empty()
            || !rest.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b))
            || rest.starts_with(':')
        {
            return Err(refused());
        }
        Ok(Self(trimmed.to_owned()))
    }

    /// The edge's own listen address, as clients on this machine reach it: an unspecified IP
    /// (0.0.0.0, ::) becomes the loopback one.
    pub fn from_listen(address: std::net::SocketAddr) -> Self {
        let ip = match address.ip() {
            ip if !ip.is_unspecified() => ip,
            std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        };
        Self(format!("http://{}", std::net::SocketAddr::new(ip, address.port())))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.0)
    }

    /// Where `/mcp/`'s protected-resource metadata is.
    pub fn resource_metadata(&self) -> String {
        self.at("/.well-known/oauth-protected-resource/mcp/")
    }

    pub fn authorization_server_metadata(&self) -> String {
        self.at("/.well-known/oauth-authorization-server")
    }

    pub fn authorize(&self) -> String {
        self.at("/authorize")
    }

    pub fn token(&self) -> String {
        self.at("/token")
    }
}

/// Every 401 from `/mcp/` keeps its status and body and names where the client learns to sign
/// in (RFC 9728 §5.1).
pub fn challenge(public: &PublicUrl, mut response: Response) -> Response {
    if response.status() == StatusCode::UNAUTHORIZED
        && let Ok(value) =
            HeaderValue::from_str(&format!("Bearer resource_metadata=\"{}\"", public.resource_metadata()))
    {
        response.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
    response
}

/// `HEAD /authorize`: a HEAD changes nothing, so the page's headers and no approval opened.
pub fn authorize_head() -> Response {
    page::headers_only()
}

pub async fn handle(
    core: &CoreClient,
    public: &PublicUrl,
    endpoint: Endpoint,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Body,
    body_within: Duration,
) -> Response {
    match endpoint {
        Endpoint::McpResource => document(&resource_metadata(public, &public.at("/mcp/"))),
        Endpoint::RootResource => document(&resource_metadata(public, &public.at("/"))),
        Endpoint::Server => document(&server_metadata(public)),
        Endpoint::Register => register(core, headers, body, body_within).await,
        Endpoint::Authorize => authorize(core, public, query).await,
        Endpoint::Wait => wait(core, public, query).await,
        Endpoint::Token => token(core, headers, body, body_within).await,
    }
}

// ---- discovery ------------------------------------------------------------------------------

#[derive(Serialize)]
struct ResourceMetadata {
    resource: String,
    authorization_servers: [String; 1],
    bearer_methods_supported: [&'static str; 1],
    resource_name: &'static str,
}

fn resource_metadata(public: &PublicUrl, resource: &str) -> ResourceMetadata {
    ResourceMetadata {
        resource: resource.to_owned(),
        authorization_servers: [public.as_str().to_owned()],
        bearer_methods_supported: ["header"],
        resource_name: "World",
    }
}

#[derive(Serialize)]
struct ServerMetadata {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    registration_endpoint: String,
    response_types_supported: [&'static str; 1],
    grant_types_supported: [&'static str; 2],
    code_challenge_methods_supported: [&'static str; 1],
    token_endpoint_auth_methods_supported: [&'static str; 1],
    authorization_response_iss_parameter_supported: bool,
}

fn server_metadata(public: &PublicUrl) -> ServerMetadata {
    ServerMetadata {
        issuer: public.as_str().to_owned(),
        authorization_endpoint: public.authorize(),
        token_endpoint: public.token(),
        registration_endpoint: public.at("/register"),
        response_types_supported: ["code"],
        grant_types_supported: ["authorization_code", "refresh_token"],
        code_challenge_methods_supported: ["S256"],
        token_endpoint_auth_methods_supported: ["none"],
        authorization_response_iss_parameter_supported: true,
    }
}

/// A public metadata document: any origin may read it.
fn document<T: Serialize>(body: &T) -> Response {
    let mut response = wire::bytes(StatusCode::OK, wire::APPLICATION_JSON, json::encode(body));
    response.headers_mut().insert("access-control-allow-origin", HeaderValue::from_static("*"));
    response
}

// ---- JSON answers of the registration and token endpoints ---------------------------------

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    error_description: &'a str,
}

/// An OAuth JSON error (RFC 6749 §5.2, RFC 7591 §3.2.2), its status from the code.
fn json_error(error: &str, description: &str) -> Response {
    let status = OAuthErrorCode::parse(error).map_or(400, OAuthErrorCode::http_status);
    no_store(json_answer(
        StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
        &ErrorBody { error, error_description: description },
    ))
}

fn json_answer<T: Serialize>(status: StatusCode, body: &T) -> Response {
    wire::bytes(status, wire::APPLICATION_JSON, json::encode(body))
}

/// Token responses and errors are never cached (RFC 6749 §5.1).
fn no_store(mut response: Response) -> Response {
    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response.headers_mut().insert(PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

const CORE_DOWN: &str = "World's core cannot be reached right now; retry in a moment";

fn unavailable() -> Response {
    json_error(OAuthErrorCode::TemporarilyUnavailable.as_str(), CORE_DOWN)
}

fn content_type_is(headers: &HeaderMap, expected: &str) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|value| value.trim().eq_ignore_ascii_case(expected))
}

// ---- registration ---------------------------------------------------------------------------

#[derive(Serialize)]
struct RegisteredBody {
    client_id: String,
    client_id_issued_at: i64,
    client_name: String,
    redirect_uris: Vec<String>,
    grant_types: [&'static str; 2],
    response_types: [&'static str; 1],
    token_endpoint_auth_method: &'static str,
}

async fn register(core: &CoreClient, headers: &HeaderMap, body: Body, within: Duration) -> Response {
    let metadata = |description: &str| json_error(OAuthErrorCode::InvalidClientMetadata.as_str(), description);
    if !content_type_is(headers, "application/json") {
        return json_error(OAuthErrorCode::InvalidRequest.as_str(), "the registration must be application/json");
    }
    let bytes = match read_capped(body, BODY_LIMIT, within).await {
        Ok(bytes) => bytes,
        Err(error) => return json_error(OAuthErrorCode::InvalidRequest.as_str(), &error.to_string()),
    };
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return metadata("the registration must be one JSON object");
    };
    let text = |name: &str| -> Result<String, String> {
        match fields.get(name) {
            None | Some(serde_json::Value::Null) => Ok(String::new()),
            Some(serde_json::Value::String(text)) => Ok(text.clone()),
            Some(_) => Err(format!("{name} must be a string")),
        }
    };
    let list = |name: &str| -> Result<Vec<String>, String> {
        match fields.get(name) {
            None | Some(serde_json::Value::Null) => Ok(Vec::new()),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned).ok_or_else(|| format!("{name} must list strings")))
                .collect(),
            Some(_) => Err(format!("{name} must be an array of strings")),
        }
    };
    let message = match (|| {
        Ok::<_, String>(pb::RegisterClientRequest {
            client_name: text("client_name")?,
            redirect_uris: list("redirect_uris")?,
            grant_types: list("grant_types")?,
            response_types: list("response_types")?,
            token_endpoint_auth_method: text("token_endpoint_auth_method")?,
        })
    })() {
        Ok(message) => message,
        Err(description) => return metadata(&description),
    };
    match core.register_oauth_client(message).await {
        Ok(Some(Ok(client))) => no_store(json_answer(
            StatusCode::CREATED,
            &RegisteredBody {
                client_id: client.client_id,
                client_id_issued_at: client.issued_at,
                client_name: client.client_name,
                redirect_uris: client.redirect_uris,
                grant_types: ["authorization_code", "refresh_token"],
                response_types: ["code"],
                token_endpoint_auth_method: "none",
            },
        )),
        Ok(Some(Err(error))) => json_error(&error.error, &error.description),
        Ok(None) | Err(_) => unavailable(),
    }
}

// ---- the authorization endpoint --------------------------------------------------------------

async fn authorize(core: &CoreClient, public: &PublicUrl, query: Option<&str>) -> Response {
    let params = match params::parse(query.unwrap_or_default().as_bytes()) {
        Ok(params) => params,
        Err(error) => return page::refused(StatusCode::BAD_REQUEST, "invalid_request", &error.describe()),
    };
    let get = |name: &str| params.get(name).cloned().unwrap_or_default();
    let message = pb::StartApprovalRequest {
        client_id: get("client_id"),
        redirect_uri: get("redirect_uri"),
        response_type: get("response_type"),
        state: params.get("state").cloned(),
        code_challenge: get("code_challenge"),
        code_challenge_method: get("code_challenge_method"),
    };
    match core.start_oauth_approval(message).await {
        Ok(Some(outcome)) => approval_answer(public, outcome),
        Ok(None) | Err(_) => page::refused(StatusCode::SERVICE_UNAVAILABLE, "temporarily_unavailable", CORE_DOWN),
    }
}

/// The page's long-poll: answers as soon as the operator decided, or after [`WAIT_HOLD`] with
/// the page again (which comes back here).
async fn wait(core: &CoreClient, public: &PublicUrl, query: Option<&str>) -> Response {
    let request = params::parse(query.unwrap_or_default().as_bytes())
        .ok()
        .and_then(|params: BTreeMap<String, String>| params.get("request").cloned())
        .unwrap_or_default();
    let held = Instant::now();
    loop {
        let outcome = match core.await_oauth_approval(&request).await {
            Ok(Some(outcome)) => outcome,
            Ok(None) | Err(_) => {
                return page::refused(StatusCode::SERVICE_UNAVAILABLE, "temporarily_unavailable", CORE_DOWN);
            }
        };
        if matches!(outcome, pb::approval_reply::Outcome::Pending(_)) && held.elapsed() + WAIT_STEP < WAIT_HOLD {
            tokio::time::sleep(WAIT_STEP).await;
            continue;
        }
        return approval_answer(public, outcome);
    }
}

fn approval_answer(public: &PublicUrl, outcome: pb::approval_reply::Outcome) -> Response {
    use pb::approval_reply::Outcome;
    match outcome {
        Outcome::Pending(pending) => page::waiting(&page::Waiting {
            request: &pending.request,
            approval_code: &pending.approval_code,
            client_name: &pending.client_name,
            redirect_uri: &pending.redirect_uri,
            expires_at: pending.expires_at,
        }),
        Outcome::Redirect(redirect) => {
            let mut params: Vec<(&str, &str)> = Vec::with_capacity(4);
            if redirect.error.is_empty() {
                params.push(("code", &redirect.code));
            } else {
                params.push(("error", &redirect.error));
                params.push(("error_description", &redirect.error_description));
            }
            if let Some(state) = &redirect.state {
                params.push(("state", state));
            }
            // RFC 9207: the client checks the response came from the server it asked.
            params.push(("iss", public.as_str()));
            let location = redirect_with(&redirect.redirect_uri, &params);
            match HeaderValue::from_str(&location) {
                Ok(location) => {
                    let mut response = Response::new(Body::empty());
                    *response.status_mut() = StatusCode::FOUND;
                    response.headers_mut().insert(LOCATION, location);
                    response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
                    response
                }
                Err(_) => page::refused(StatusCode::BAD_REQUEST, "invalid_request", "the redirect URI is unusable"),
            }
        }
        Outcome::Refused(error) => page::refused(StatusCode::BAD_REQUEST, &error.error, &error.description),
    }
}

// ---- the token endpoint ------------------------------------------------------------------------

#[derive(Serialize)]
struct TokenBody {
    access_token: String,
    token_type: &'static str,
    expires_in: i64,
    refresh_token: String,
}

async fn token(core: &CoreClient, headers: &HeaderMap, body: Body, within: Duration) -> Response {
    let invalid = |description: &str| json_error(OAuthErrorCode::InvalidRequest.as_str(), description);
    if !content_type_is(headers, "application/x-www-form-urlencoded") {
        return invalid("the token request must be application/x-www-form-urlencoded");
    }
    let bytes = match read_capped(body, BODY_LIMIT, within).await {
        Ok(bytes) => bytes,
        Err(error) => return invalid(&error.to_string()),
    };
    let params = match params::parse(&bytes) {
        Ok(params) => params,
        Err(error) => return invalid(&error.describe()),
    };
    let get = |name: &str| params.get(name).cloned().unwrap_or_default();
    let message = pb::ExchangeTokenRequest {
        grant_type: get("grant_type"),
        client_id: get("client_id"),
        code: get("code"),
        redirect_uri: get("redirect_uri"),
        code_verifier: get("code_verifier"),
        refresh_token: get("refresh_token"),
    };
    match core.exchange_oauth_token(message).await {
        Ok(Some(Ok(token))) => no_store(json_answer(
            StatusCode::OK,
            &TokenBody {
                access_token: token.access_token,
                token_type: "Bearer",
                expires_in: token.expires_in,
                refresh_token: token.refresh_token,
            },
        )),
        Ok(Some(Err(error))) => json_error(&error.error, &error.description),
        Ok(None) | Err(_) => unavailable(),
    }
}

// ---- the agent card ----------------------------------------------------------------------------

/// The card's OAuth 2.0 scheme in both A2A spellings: 1.0's `oauth2SecurityScheme` member and
/// 0.3's `type: "oauth2"` with `flows` beside it.
#[derive(Serialize)]
pub struct CardScheme {
    pub description: &'static str,
    pub flows: CardFlows,
    #[serde(rename = "oauth2MetadataUrl")]
    pub metadata_url: String,
    #[serde(rename = "oauth2SecurityScheme")]
    pub oauth2_security_scheme: CardOAuth2,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

#[derive(Serialize)]
pub struct CardOAuth2 {
    pub description: &'static str,
    pub flows: CardFlows,
    #[serde(rename = "oauth2MetadataUrl")]
    pub metadata_url: String,
}

#[derive(Clone, Serialize)]
pub struct CardFlows {
    #[serde(rename = "authorizationCode")]
    pub authorization_code: CardAuthorizationCode,
}

#[derive(Clone, Serialize)]
pub struct CardAuthorizationCode {
    #[serde(rename = "authorizationUrl")]
    pub authorization_url: String,
    #[serde(rename = "pkceRequired")]
    pub pkce_required: bool,
    #[serde(rename = "refreshUrl")]
    pub refresh_url: String,
    pub scopes: BTreeMap<String, String>,
    #[serde(rename = "tokenUrl")]
    pub token_url: String,
}

const CARD_DESCRIPTION: &str =
    "sign in with OAuth 2.1 (authorization code with PKCE S256); the operator approves each sign-in at a terminal";

pub fn card_scheme(public: &PublicUrl) -> CardScheme {
    let flows = CardFlows {
        authorization_code: CardAuthorizationCode {
            authorization_url: public.authorize(),
            pkce_required: true,
            refresh_url: public.token(),
            scopes: BTreeMap::new(),
            token_url: public.token(),
        },
    };
    CardScheme {
        description: CARD_DESCRIPTION,
        flows: flows.clone(),
        metadata_url: public.authorization_server_metadata(),
        oauth2_security_scheme: CardOAuth2 {
            description: CARD_DESCRIPTION,
            flows,
            metadata_url: public.authorization_server_metadata(),
        },
        kind: "oauth2",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_url_is_an_origin() {
        for (text, want) in [
            ("https://world.example.com", "https://world.example.com"),
            ("https://world.example.com/", "https://world.example.com"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("http://[::1]:7644", "http://[::1]:7644"),
        ] {
            assert_eq!(PublicUrl::parse(text).unwrap().as_str(), want, "{text}");
        }
        for text in ["world.example.com", "ftp://h", "https://", "https://h/world", "https://h?x", "https://:80"] {
            assert!(PublicUrl::parse(text).is_err(), "{text}");
        }
        let listen = |text: &str| PublicUrl::from_listen(text.parse().unwrap()).as_str().to_owned();
        assert_eq!(listen("127.0.0.1:7644"), "http://127.0.0.1:7644");
        assert_eq!(listen("0.0.0.0:7644"), "http://127.0.0.1:7644");
        assert_eq!(listen("[::]:7644"), "http://[::1]:7644");
    }

    #[test]
    fn a_401_gains_the_challenge_and_nothing_else_changes() {
        let public = PublicUrl::parse("https://w.example").unwrap();
        let denied = challenge(&public, wire::go_http_error(StatusCode::UNAUTHORIZED, "missing"));
        assert_eq!(
            denied.headers()["www-authenticate"],
            "Bearer resource_metadata=\"https://w.example/.well-known/oauth-protected-resource/mcp/\""
        );
        assert_eq!(denied.headers()["content-type"], wire::TEXT_PLAIN);
        let other = challenge(&public, wire::go_http_error(StatusCode::FORBIDDEN, "origin"));
        assert!(other.headers().get("www-authenticate").is_none());
    }

    #[test]
    fn the_metadata_names_the_s256_public_client_flow() {
        let public = PublicUrl::parse("http://127.0.0.1:7644").unwrap();
        let server = String::from_utf8(json::encode(&server_metadata(&public))).unwrap();
        assert_eq!(
            server,
            concat!(
                r#"{"issuer":"http://127.0.0.1:7644","authorization_endpoint":"http://127.0.0.1:7644/authorize","#,
                r#""token_endpoint":"http://127.0.0.1:7644/token","registration_endpoint":"http://127.0.0.1:7644/register","#,
                r#""response_types_supported":["code"],"grant_types_supported":["authorization_code","refresh_token"],"#,
                r#""code_challenge_methods_supported":["S256"],"token_endpoint_auth_methods_supported":["none"],"#,
                r#""authorization_response_iss_parameter_supported":true}"#,
                "\n"
            )
        );
        let resource = String::from_utf8(json::encode(&resource_metadata(&public, &public.at("/mcp/")))).unwrap();
        assert!(resource.starts_with(
            r#"{"resource":"http://127.0.0.1:7644/mcp/","authorization_servers":["http://127.0.0.1:7644"]"#
        ));
    }
}
