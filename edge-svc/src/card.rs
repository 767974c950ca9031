//! `GET /.well-known/agent.json` (the seed's card, reference-edge §4) and
//! `/.well-known/agent-card.json` (A2A 1.0's card, carrying 0.3's fields too so clients of
//! either resolve it): the session's A2A agent cards. The skills are the session's surface as
//! the core admits it — the same grant-filtered list MCP's `tools/list` uses — with ids
//! verbatim; both answer the seed's denial rows.

use std::collections::BTreeMap;

use axum::response::Response;
use http::header::HOST;
use http::{HeaderMap, StatusCode};
use serde::Serialize;
use world_model::Failure;
use world_proto::v1 as pb;

use crate::core::CoreClient;
use crate::json;
use crate::oauth::{self, CardScheme, PublicUrl};
use crate::session;
use crate::surface::Surfaces;
use crate::wire;

/// The reference daemon's name and description literals; agents comparing cards see the same
/// text from either implementation.
pub const CARD_NAME: &str = "ailang-worldd";
pub const CARD_DESCRIPTION: &str = "AILANG World daemon: a published skill accepts one JSON-object data part and produces a JSON-object data artifact; invocation requires an archived interpreter; schemas are carried but not validated.";
pub const CARD_VERSION: &str = env!("CARGO_PKG_VERSION");

// The reference encodes the card as a Go map, so every field below is declared in bytewise
// key order, a flattened `Daemon` standing where its keys sort.

/// What both cards say of the daemon itself (`defaultInputModes` to `name`).
#[derive(Serialize)]
pub struct Daemon {
    #[serde(rename = "defaultInputModes")]
    pub default_input_modes: [&'static str; 1],
    #[serde(rename = "defaultOutputModes")]
    pub default_output_modes: [&'static str; 1],
    pub description: &'static str,
    pub name: &'static str,
}

/// A skill takes and gives JSON; the name and description are the reference's.
pub const DAEMON: Daemon = Daemon {
    default_input_modes: ["application/json"],
    default_output_modes: ["application/json"],
    description: CARD_DESCRIPTION,
    name: CARD_NAME,
};

#[derive(Serialize)]
pub struct Card {
    pub capabilities: Capabilities,
    #[serde(flatten)]
    pub daemon: Daemon,
    pub skills: Vec<Skill>,
    pub url: String,
    pub version: &'static str,
}

#[derive(Serialize)]
pub struct Capabilities {
    #[serde(rename = "pushNotifications")]
    pub push_notifications: bool,
    #[serde(rename = "stateTransitionHistory")]
    pub state_transition_history: bool,
    pub streaming: bool,
}

#[derive(Serialize)]
pub struct Skill {
    pub description: String,
    pub examples: [&'static str; 0],
    pub id: String,
    pub name: String,
    pub tags: [&'static str; 0],
}

/// The card for a surface, served at `http://<host>` (the edge never terminates TLS).
pub fn card(surface: Vec<pb::Descriptor>, host: &str) -> Card {
    Card {
        capabilities: Capabilities { push_notifications: false, state_transition_history: false, streaming: false },
        daemon: DAEMON,
        skills: surface
            .into_iter()
            .map(|descriptor| Skill {
                description: descriptor.description,
                examples: [],
                id: descriptor.id,
                name: descriptor.title,
                tags: [],
            })
            .collect(),
        url: format!("http://{host}"),
        version: CARD_VERSION,
    }
}

// ---- agent-card.json -----------------------------------------------------------------------

/// The scheme name the card's security entries use.
pub const BEARER_SCHEME: &str = "bearer";
/// The OAuth sign-in scheme's name.
pub const OAUTH_SCHEME: &str = "oauth";

/// A2A 1.0's `AgentCard` with A2A 0.3's connection and security fields beside it, as a2a-sdk's
/// own servers write a card that speaks both; keys in bytewise order, as every body here.
#[derive(Serialize)]
pub struct A2aCard {
    pub capabilities: A2aCapabilities,
    #[serde(flatten)]
    pub daemon: Daemon,
    /// 0.3: the transport at `url`.
    #[serde(rename = "preferredTransport")]
    pub preferred_transport: &'static str,
    /// 0.3: the version spoken at `url`.
    #[serde(rename = "protocolVersion")]
    pub protocol_version: &'static str,
    /// 0.3's security requirement list: either scheme.
    pub security: [BTreeMap<&'static str, [&'static str; 0]>; 2],
    /// 1.0's security requirement list: either scheme.
    #[serde(rename = "securityRequirements")]
    pub security_requirements: [SecurityRequirement; 2],
    #[serde(rename = "securitySchemes")]
    pub security_schemes: BTreeMap<&'static str, SecurityScheme>,
    pub skills: Vec<A2aSkill>,
    #[serde(rename = "supportedInterfaces")]
    pub supported_interfaces: [Interface; 1],
    /// 0.3: where to send JSON-RPC.
    pub url: String,
    pub version: &'static str,
}

#[derive(Serialize)]
pub struct A2aCapabilities {
    #[serde(rename = "pushNotifications")]
    pub push_notifications: bool,
    pub streaming: bool,
}

#[derive(Serialize)]
pub struct SecurityRequirement {
    pub schemes: BTreeMap<&'static str, EmptyScopes>,
}

/// 1.0's `StringList` with no scopes, which its JSON form writes as `{}`.
#[derive(Serialize)]
pub struct EmptyScopes {}

/// A card's security scheme: a session credential pasted as a bearer, or OAuth sign-in, which
/// mints one.
#[derive(Serialize)]
#[serde(untagged)]
pub enum SecurityScheme {
    Bearer(BearerScheme),
    OAuth(Box<CardScheme>),
}

/// An HTTP bearer scheme in both spellings: 1.0's `httpAuthSecurityScheme` member and 0.3's
/// `type: "http"` with `scheme` beside it. A 1.0 reader ignores the 0.3 members and a 0.3 reader
/// the 1.0 one.
#[derive(Serialize)]
pub struct BearerScheme {
    pub description: &'static str,
    #[serde(rename = "httpAuthSecurityScheme")]
    pub http_auth_security_scheme: HttpAuthScheme,
    pub scheme: &'static str,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

#[derive(Serialize)]
pub struct HttpAuthScheme {
    pub description: &'static str,
    pub scheme: &'static str,
}

#[derive(Serialize)]
pub struct A2aSkill {
    pub description: String,
    pub id: String,
    pub name: String,
    pub tags: [&'static str; 2],
}

#[derive(Serialize)]
pub struct Interface {
    #[serde(rename = "protocolBinding")]
    pub protocol_binding: &'static str,
    #[serde(rename = "protocolVersion")]
    pub protocol_version: &'static str,
    pub url: String,
}

const BEARER_DESCRIPTION: &str = "a World session credential: Authorization: Bearer <64-hex-credential>";

/// The A2A card for a surface; JSON-RPC is served at `http://<host>/a2a/`, sign-in under the
/// public URL.
pub fn a2a_card(surface: Vec<pb::Descriptor>, host: &str, public: &PublicUrl) -> A2aCard {
    let url = format!("http://{host}/a2a/");
    A2aCard {
        capabilities: A2aCapabilities { push_notifications: false, streaming: false },
        daemon: DAEMON,
        preferred_transport: "JSONRPC",
        protocol_version: "0.3.0",
        security: [BTreeMap::from([(BEARER_SCHEME, [])]), BTreeMap::from([(OAUTH_SCHEME, [])])],
        security_requirements: [
            SecurityRequirement { schemes: BTreeMap::from([(BEARER_SCHEME, EmptyScopes {})]) },
            SecurityRequirement { schemes: BTreeMap::from([(OAUTH_SCHEME, EmptyScopes {})]) },
        ],
        security_schemes: BTreeMap::from([
            (
                BEARER_SCHEME,
                SecurityScheme::Bearer(BearerScheme {
                    description: BEARER_DESCRIPTION,
                    http_auth_security_scheme: HttpAuthScheme { description: BEARER_DESCRIPTION, scheme: "Bearer" },
                    scheme: "Bearer",
                    kind: "http",
                }),
            ),
            (OAUTH_SCHEME, SecurityScheme::OAuth(Box::new(oauth::card_scheme(public)))),
        ]),
        skills: surface
            .into_iter()
            .map(|descriptor| A2aSkill {
                tags: ["transition", if descriptor.declared_effects.is_empty() { "pure" } else { "effectful" }],
                description: descriptor.description,
                id: descriptor.id,
                name: descriptor.title,
            })
            .collect(),
        supported_interfaces: [Interface { protocol_binding: "JSONRPC", protocol_version: "1.0", url: url.clone() }],
        url,
        version: CARD_VERSION,
    }
}

/// The request's `Host` header verbatim, as Go's `r.Host`.
fn host(headers: &HeaderMap) -> String {
    headers.get(HOST).map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()).unwrap_or_default()
}

pub async fn handle(core: &CoreClient, surfaces: &Surfaces, headers: &HeaderMap) -> Response {
    serve(core, surfaces, headers, |surface, host| json::encode(&card(surface, host))).await
}

pub async fn handle_a2a(core: &CoreClient, surfaces: &Surfaces, headers: &HeaderMap, public: &PublicUrl) -> Response {
    serve(core, surfaces, headers, |surface, host| json::encode(&a2a_card(surface, host, public))).await
}

async fn serve(
    core: &CoreClient,
    surfaces: &Surfaces,
    headers: &HeaderMap,
    render: impl Fn(Vec<pb::Descriptor>, &str) -> Vec<u8>,
) -> Response {
    let credential = match session::precheck(headers) {
        Ok(credential) => credential,
        Err(denial) => return wire::card_failure(&Failure::from(denial)),
    };
    match surfaces.admit(core, &credential).await {
        Ok(admitted) => {
            let body = render(admitted.surface.descriptors.clone(), &host(headers));
            wire::bytes(StatusCode::OK, wire::APPLICATION_JSON, body)
        }
        Err(failure) => wire::card_failure(&failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor(id: &str, title: &str, description: &str) -> pb::Descriptor {
        pb::Descriptor { id: id.into(), title: title.into(), description: description.into(), ..Default::default() }
    }

    #[test]
    fn card_bytes_match_the_reference_shape() {
        let surface = vec![
            descriptor("ailang-read", "Read", "Reads a file <safely>"),
            descriptor("tools.echo", "Echo", "Echoes"),
        ];
        let body = String::from_utf8(json::encode(&card(surface, "127.0.0.1:7644"))).unwrap();
        assert_eq!(
            body,
            concat!(
                r#"{"capabilities":{"pushNotifications":false,"stateTransitionHistory":false,"streaming":false},"#,
                r#""defaultInputModes":["application/json"],"defaultOutputModes":["application/json"],"#,
                r#""description":"AILANG World daemon: a published skill accepts one JSON-object data part and produces a JSON-object data artifact; invocation requires an archived interpreter; schemas are carried but not validated.","#,
                r#""name":"ailang-worldd","#,
                r#""skills":[{"description":"Reads a file \u003csafely\u003e","examples":[],"id":"ailang-read","name":"Read","tags":[]},"#,
                r#"{"description":"Echoes","examples":[],"id":"tools.echo","name":"Echo","tags":[]}],"#,
                r#""url":"http://127.0.0.1:7644","version":"0.1.0"}"#,
                "\n"
            )
        );
        let empty = String::from_utf8(json::encode(&card(vec![], "h"))).unwrap();
        assert!(empty.contains(r#""skills":[],"url":"http://h""#));
    }

    #[test]
    fn the_a2a_card_carries_1_0_and_0_3_fields() {
        let surface = vec![
            descriptor("tools.echo", "Echo", "Echoes"),
            pb::Descriptor {
                declared_effects: vec![pb::AccessTriple::default()],
                ..descriptor("ailang-read", "Read", "Reads")
            },
        ];
        let public = PublicUrl::parse("https://w.example").unwrap();
        let body = String::from_utf8(json::encode(&a2a_card(surface, "127.0.0.1:7644", &public))).unwrap();
        let flows = concat!(
            r#""flows":{"authorizationCode":{"authorizationUrl":"https://w.example/authorize","pkceRequired":true,"#,
            r#""refreshUrl":"https://w.example/token","scopes":{},"tokenUrl":"https://w.example/token"}},"#,
            r#""oauth2MetadataUrl":"https://w.example/.well-known/oauth-authorization-server""#,
        );
        let oauth_description = r#""description":"sign in with OAuth 2.1 (authorization code with PKCE S256); the operator approves each sign-in at a terminal","#;
        let bearer =
            r#"{"description":"a World session credential: Authorization: Bearer \u003c64-hex-credential\u003e","#;
        assert_eq!(
            body,
            [
                r#"{"capabilities":{"pushNotifications":false,"streaming":false},"#,
                r#""defaultInputModes":["application/json"],"defaultOutputModes":["application/json"],"#,
                &format!(r#""description":{},"name":"ailang-worldd","#, serde_json::to_string(CARD_DESCRIPTION).unwrap()),
                r#""preferredTransport":"JSONRPC","protocolVersion":"0.3.0","#,
                r#""security":[{"bearer":[]},{"oauth":[]}],"#,
                r#""securityRequirements":[{"schemes":{"bearer":{}}},{"schemes":{"oauth":{}}}],"#,
                r#""securitySchemes":{"bearer":"#,
                bearer,
                r#""httpAuthSecurityScheme":"#,
                bearer,
                r#""scheme":"Bearer"},"scheme":"Bearer","type":"http"},"#,
                r#""oauth":{"#,
                oauth_description,
                flows,
                r#","oauth2SecurityScheme":{"#,
                oauth_description,
                flows,
                r#"},"type":"oauth2"}},"#,
                r#""skills":[{"description":"Echoes","id":"tools.echo","name":"Echo","tags":["transition","pure"]},"#,
                r#"{"description":"Reads","id":"ailang-read","name":"Read","tags":["transition","effectful"]}],"#,
                r#""supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":"http://127.0.0.1:7644/a2a/"}],"#,
                r#""url":"http://127.0.0.1:7644/a2a/","version":"0.1.0"}"#,
                "\n",
            ]
            .concat()
        );
    }
}
