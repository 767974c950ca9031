//! The two reads the explorer (`/ui/`) needs beyond the reference's `/v1` API: the caller's own
//! session with each grant's spend (`GET /v1/session`) and the log read as calls, newest first
//! (`GET /v1/calls`). Same rules as every `/v1` read: a live session, the REST envelope.

use axum::response::Response;
use http::HeaderMap;
use serde::Serialize;
use world_proto::v1 as pb;

use super::{BadInput, bad, credential, reply, try_response};
use crate::core::CoreClient;
use crate::query::{non_negative, query_get};
use crate::wire;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantBody {
    pub effect: String,
    pub scope: String,
    pub budget: i64,
    pub spent: i64,
    pub left: i64,
    pub expires_at: i64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionBody {
    pub episode: String,
    pub expires_at: i64,
    pub created_at: i64,
    pub grants: Vec<GrantBody>,
    /// Whether the session reads every episode (it holds `Log.Read` at `world`) or its own.
    pub reads_every_episode: bool,
}

#[derive(Serialize)]
pub struct CallEffectBody {
    pub effect: String,
    pub scope: String,
    pub status: String,
    pub record: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallBody {
    pub entry_index: i64,
    pub entry_hash: String,
    pub transition_ref: String,
    pub written_by: String,
    pub invocation_id: String,
    pub episode: String,
    pub transition: String,
    /// Unix seconds; 0 when the journal does not say.
    pub time: i64,
    pub outcome: String,
    pub effects: Vec<CallEffectBody>,
}

#[derive(Serialize)]
pub struct CallPageBody {
    pub items: Vec<CallBody>,
    /// The `before` of the next (older) page; `null` when nothing older remains.
    pub next: Option<i64>,
}

impl From<pb::SessionView> for SessionBody {
    fn from(view: pb::SessionView) -> SessionBody {
        SessionBody {
            episode: view.episode,
            expires_at: view.expires_at,
            created_at: view.created_at,
            reads_every_episode: view.reads_every_episode,
            grants: view
                .grants
                .into_iter()
                .map(|g| GrantBody {
                    effect: g.effect,
                    scope: g.scope,
                    budget: g.budget,
                    spent: g.spent,
                    left: g.left,
                    expires_at: g.expires_at,
                })
                .collect(),
        }
    }
}

impl From<pb::CallPage> for CallPageBody {
    fn from(page: pb::CallPage) -> CallPageBody {
        let items = page
            .items
            .into_iter()
            .map(|call| CallBody {
                entry_index: call.entry_index,
                entry_hash: call.entry_hash,
                transition_ref: call.transition_ref,
                written_by: call.written_by,
                invocation_id: call.invocation_id,
                episode: call.episode,
                transition: call.transition,
                time: call.time,
                outcome: call.outcome,
                effects: call
                    .effects
                    .into_iter()
                    .map(|e| CallEffectBody { effect: e.effect, scope: e.scope, status: e.status, record: e.record })
                    .collect(),
            })
            .collect();
        CallPageBody { items, next: (page.next > 0).then_some(page.next) }
    }
}

/// The query of `GET /v1/calls`: `before` (an entry index; absent for the newest), `limit`
/// (1–100, default 25), `episode`, `transition`, and `find` (an entry index, invocation id,
/// task id or ref), which answers the one call it names and ignores the rest.
pub fn parse_calls_query(query: Option<&str>) -> Result<pb::CallsRequest, BadInput> {
    let before = match query_get(query, "before").filter(|text| !text.is_empty()) {
        None => 0,
        Some(text) => non_negative(&text).ok_or_else(|| BadInput("before must be a non-negative integer".into()))?,
    };
    let limit = match query_get(query, "limit").filter(|text| !text.is_empty()) {
        None => 0,
        Some(text) => {
            text.parse::<i64>().map_err(|_| BadInput("limit must be an integer".into()))?.clamp(0, 100) as u32
        }
    };
    let text = |key| query_get(query, key).unwrap_or_default();
    Ok(pb::CallsRequest { before, limit, episode: text("episode"), transition: text("transition"), find: text("find") })
}

pub async fn session(core: &CoreClient, headers: &HeaderMap) -> Response {
    let credential = try_response!(credential(headers).map_err(wire::rest_denial));
    reply(core.session_view(&credential).await, SessionBody::from)
}

pub async fn calls(core: &CoreClient, headers: &HeaderMap, query: Option<&str>) -> Response {
    let credential = try_response!(credential(headers).map_err(wire::rest_denial));
    let request = try_response!(parse_calls_query(query).map_err(bad));
    reply(core.calls(&credential, request).await, CallPageBody::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_query_rules() {
        let parsed = parse_calls_query(Some("before=40&limit=10&episode=ep%201&transition=fx.read")).unwrap();
        assert_eq!((parsed.before, parsed.limit), (40, 10));
        assert_eq!((parsed.episode.as_str(), parsed.transition.as_str()), ("ep 1", "fx.read"));
        let empty = parse_calls_query(None).unwrap();
        assert_eq!((empty.before, empty.limit, empty.find.as_str()), (0, 0, ""));
        assert_eq!(parse_calls_query(Some("limit=900")).unwrap().limit, 100);
        assert_eq!(parse_calls_query(Some("limit=-4")).unwrap().limit, 0);
        assert_eq!(parse_calls_query(Some("find=a2a%3Aep%3At1")).unwrap().find, "a2a:ep:t1");
        assert_eq!(
            parse_calls_query(Some("before=-1")).unwrap_err(),
            BadInput("before must be a non-negative integer".into())
        );
        assert_eq!(parse_calls_query(Some("limit=x")).unwrap_err(), BadInput("limit must be an integer".into()));
    }
}
