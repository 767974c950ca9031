//! `GET /.well-known/agent.json` and `/.well-known/agent-card.json`: the session's A2A agent
//! card (reference-edge §4). The skills are the session's surface as the core admits it —
//! the same grant-filtered list MCP's `tools/list` uses — with ids verbatim.

use axum::response::Response;
use http::HeaderMap;
use http::header::HOST;
use serde::Serialize;
use world_model::Failure;
use world_proto::v1 as pb;

use crate::core::CoreClient;
use crate::session;
use crate::wire;

/// The reference daemon's name and description literals; agents comparing cards see the same
/// text from either implementation.
pub const CARD_NAME: &str = "ailang-worldd";
pub const CARD_DESCRIPTION: &str = "AILANG World daemon: a published skill accepts one JSON-object data part and produces a JSON-object data artifact; invocation requires an archived interpreter; schemas are carried but not validated.";
pub const CARD_VERSION: &str = env!("CARGO_PKG_VERSION");

// The reference encodes the card as a Go map, so every field below is declared in bytewise
// key order.

#[derive(Serialize)]
pub struct Card {
    pub capabilities: Capabilities,
    #[serde(rename = "defaultInputModes")]
    pub default_input_modes: [&'static str; 1],
    #[serde(rename = "defaultOutputModes")]
    pub default_output_modes: [&'static str; 1],
    pub description: &'static str,
    pub name: &'static str,
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
        default_input_modes: ["application/json"],
        default_output_modes: ["application/json"],
        description: CARD_DESCRIPTION,
        name: CARD_NAME,
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

/// The request's `Host` header verbatim, as Go's `r.Host`.
fn host(headers: &HeaderMap) -> String {
    headers.get(HOST).map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned()).unwrap_or_default()
}

pub async fn handle(core: &CoreClient, headers: &HeaderMap) -> Response {
    let credential = match session::precheck(headers) {
        Ok(credential) => credential,
        Err(denial) => return wire::card_failure(&Failure::from(denial)),
    };
    match core.admit(&credential).await {
        Ok(admitted) => wire::rest_ok(&card(admitted.surface, &host(headers))),
        Err(failure) => wire::card_failure(&failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    #[test]
    fn card_bytes_match_the_reference_shape() {
        let surface = vec![
            pb::Descriptor {
                id: "ailang-read".into(),
                title: "Read".into(),
                description: "Reads a file <safely>".into(),
                ..Default::default()
            },
            pb::Descriptor {
                id: "tools.echo".into(),
                title: "Echo".into(),
                description: "Echoes".into(),
                ..Default::default()
            },
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
}
