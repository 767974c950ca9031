//! The REST `/v1` API (reference-edge §3): parse and validate at the edge, forward to the core,
//! encode the reply in the reference's struct key order. Every route but `/v1/health` needs a
//! session (DESIGN "Edge"); the credential's shape is checked first, then the route's input,
//! so a malformed ref never costs a round trip, and the core decides unknown and expired.

mod commit;
mod explorer;

pub use commit::{CommitBody, commit, decode_commit, uncertain_message, validate_commit};
pub use explorer::{calls, parse_calls_query, session};

use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use http::HeaderMap;
use serde::Serialize;
use world_model::{FailureCode, HashRef, SessionDenial};
use world_proto::v1 as pb;

use crate::core::CoreClient;
use crate::query::{non_negative, page_limit, query_get};
use crate::session::{self, Forwarded};
use crate::wire;

#[derive(Serialize)]
pub struct HealthBody {
    pub status: String,
    pub daemon_version: String,
    pub db_path: String,
    pub interpreter_ref: String,
    pub interpreter_version: String,
}

#[derive(Serialize)]
pub struct WorldBody {
    #[serde(rename = "ref")]
    pub reference: String,
    pub revision: i64,
    #[serde(rename = "stateRoot")]
    pub state_root: String,
    #[serde(rename = "logHead")]
    pub log_head: String,
}

#[derive(Serialize)]
pub struct ObjectBody {
    pub hash: String,
    #[serde(rename = "interfaceHash")]
    pub interface_hash: String,
    #[serde(rename = "semanticId")]
    pub semantic_id: String,
    pub provenance: String,
    /// Absent unless asked for with `?payload=true`; `Some(None)` (a stored object without
    /// payload bytes) encodes as `null`, as Go encodes a nil byte slice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Option<String>>,
}

#[derive(Serialize)]
pub struct Items<T> {
    pub items: Vec<T>,
}

#[derive(Serialize)]
pub struct EntryHeaderBody {
    #[serde(rename = "entryIndex")]
    pub entry_index: i64,
    #[serde(rename = "semanticsEpoch")]
    pub semantics_epoch: i64,
    #[serde(rename = "transitionFn")]
    pub transition_fn: String,
    pub interpreter: String,
    #[serde(rename = "prevEntryHash")]
    pub prev_entry_hash: String,
    #[serde(rename = "writtenBy")]
    pub written_by: String,
}

#[derive(Serialize)]
pub struct EntryBody {
    pub header: EntryHeaderBody,
    #[serde(rename = "entryHash")]
    pub entry_hash: String,
    #[serde(rename = "transitionRef")]
    pub transition_ref: String,
}

#[derive(Serialize)]
pub struct RegistryBody {
    pub name: String,
    pub head: String,
}

#[derive(Serialize)]
pub struct ReceiptBody {
    #[serde(rename = "invocationId")]
    pub invocation_id: String,
    pub state: String,
    #[serde(rename = "resultRef", skip_serializing_if = "String::is_empty")]
    pub result_ref: String,
}

impl ObjectBody {
    pub fn from_proto(object: pb::StoredObject, with_payload: bool) -> ObjectBody {
        ObjectBody {
            hash: object.hash,
            interface_hash: object.interface_hash,
            semantic_id: object.semantic_id,
            provenance: object.provenance,
            payload: with_payload.then(|| object.payload.map(|bytes| BASE64.encode(bytes))),
        }
    }
}

impl From<pb::World> for WorldBody {
    fn from(world: pb::World) -> WorldBody {
        WorldBody {
            reference: world.r#ref,
            revision: world.revision,
            state_root: world.state_root,
            log_head: world.log_head,
        }
    }
}

impl From<pb::LogEntry> for EntryBody {
    fn from(entry: pb::LogEntry) -> EntryBody {
        EntryBody {
            header: EntryHeaderBody {
                entry_index: entry.entry_index,
                semantics_epoch: entry.semantics_epoch,
                transition_fn: entry.transition_fn,
                interpreter: entry.interpreter,
                prev_entry_hash: entry.prev_entry_hash,
                written_by: entry.written_by,
            },
            entry_hash: entry.entry_hash,
            transition_ref: entry.transition_ref,
        }
    }
}

/// A `/v1` input problem, answered 400 `BadRequest` with this message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadInput(pub String);

/// `<field>: <hashref error>`, the reference's field-named ref message.
pub fn parse_ref(field: &str, text: &str) -> Result<HashRef, BadInput> {
    HashRef::parse(text).map_err(|error| BadInput(format!("{field}: {error}")))
}

pub fn parse_optional_ref(field: &str, text: &str) -> Result<Option<HashRef>, BadInput> {
    HashRef::parse_optional(text).map_err(|error| BadInput(format!("{field}: {error}")))
}

/// Query of `GET /v1/log`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogRange {
    pub from: i64,
    pub limit: u32,
}

pub fn parse_log_index(param: &str) -> Result<i64, BadInput> {
    non_negative(param).ok_or_else(|| BadInput("log index must be a non-negative integer".into()))
}

/// `from` (default 0) then `limit` (§3.8); an empty value counts as absent, as Go reads it.
pub fn parse_log_range(query: Option<&str>) -> Result<LogRange, BadInput> {
    let from = match query_get(query, "from").filter(|text| !text.is_empty()) {
        None => 0,
        Some(text) => non_negative(&text).ok_or_else(|| BadInput("from must be a non-negative integer".into()))?,
    };
    let limit =
        page_limit(query_get(query, "limit").as_deref()).map_err(|_| BadInput("limit must be an integer".into()))?;
    Ok(LogRange { from, limit })
}

/// Query and name of `GET /v1/objects/by-semantic-id/{name...}` (§3.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SemanticPage {
    pub name: String,
    pub after: Option<HashRef>,
    pub limit: u32,
}

pub fn parse_semantic_page(name: &str, query: Option<&str>) -> Result<SemanticPage, BadInput> {
    if name.is_empty() {
        return Err(BadInput("semantic id is empty".into()));
    }
    let after = parse_optional_ref("after", &query_get(query, "after").unwrap_or_default())?;
    let limit =
        page_limit(query_get(query, "limit").as_deref()).map_err(|_| BadInput("limit must be an integer".into()))?;
    Ok(SemanticPage { name: name.to_owned(), after, limit })
}

/// `rest:` followed by at least one character: the only ids REST commits and receipts use.
pub fn is_rest_id(id: &str) -> bool {
    id.len() > "rest:".len() && id.starts_with("rest:")
}

pub fn parse_receipt_id(param: &str) -> Result<&str, BadInput> {
    if is_rest_id(param) { Ok(param) } else { Err(BadInput("receipt id must be rest:<id>".into())) }
}

/// Only the exact text `true` asks for the payload (§3.6).
pub fn wants_payload(query: Option<&str>) -> bool {
    query_get(query, "payload").as_deref() == Some("true")
}

/// The credential, or the denial its shape earns.
fn credential(headers: &HeaderMap) -> Result<Forwarded, SessionDenial> {
    session::precheck(headers)
}

fn bad(input: BadInput) -> Response {
    wire::rest_bad_request(&input.0)
}

macro_rules! try_response {
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(response) => return response,
        }
    };
}
pub(crate) use try_response;

fn reply<T, B: Serialize>(result: Result<T, world_model::Failure>, body: impl FnOnce(T) -> B) -> Response {
    match result {
        Ok(value) => wire::rest_ok(&body(value)),
        Err(failure) => wire::rest_failure(&failure),
    }
}

pub async fn health(core: &CoreClient) -> Response {
    reply(core.health().await, |health| HealthBody {
        status: health.status,
        daemon_version: health.daemon_version,
        db_path: health.store,
        interpreter_ref: health.interpreter_ref,
        interpreter_version: health.interpreter_version,
    })
}

pub async fn head(core: &CoreClient, headers: &HeaderMap) -> Response {
    let credential = try_response!(credential(headers).map_err(wire::rest_denial));
    match core.head(&credential).await {
        Ok(head) => wire::rest_text(head),
        Err(failure) => wire::rest_failure(&failure),
    }
}

pub async fn world(core: &CoreClient, headers: &HeaderMap, param: &str) -> Response {
    let credential = try_response!(credential(headers).map_err(wire::rest_denial));
    let reference = try_response!(parse_ref("world ref", param).map_err(bad));
    reply(core.world(&credential, &reference).await, WorldBody::from)
}

pub async fn object(core: &CoreClient, headers: &HeaderMap, param: &str, query: Option<&str>) -> Response {
    let credential = try_response!(credential(headers).map_err(wire::rest_denial));
    let hash = try_response!(parse_ref("object ref", param).map_err(bad));
    let with_payload = wants_payload(query);
    reply(core.object(&credential, &hash, with_payload).await, |object| ObjectBody::from_proto(object, with_payload))
}

pub async fn objects_by_semantic_id(
    core: &CoreClient,
    headers: &HeaderMap,
    param: &str,
    query: Option<&str>,
) -> Response {
    let credential = try_response!(credential(headers).map_err(wire::rest_denial));
    let page = try_response!(parse_semantic_page(param, query).map_err(bad));
    let result = core.objects_by_semantic_id(&credential, &page.name, page.after.as_ref(), page.limit).await;
    // The route never returns payloads, whatever the query says.
    reply(result, |items| Items {
        items: items.into_iter().map(|object| ObjectBody::from_proto(object, false)).collect(),
    })
}

pub async fn log_entry(core: &CoreClient, headers: &HeaderMap, param: &str) -> Response {
    let credential = try_response!(credential(headers).map_err(wire::rest_denial));
    let index = try_response!(parse_log_index(param).map_err(bad));
    reply(core.log_entry(&credential, index).await, EntryBody::from)
}

pub async fn log_page(core: &CoreClient, headers: &HeaderMap, query: Option<&str>) -> Response {
    let credential = try_response!(credential(headers).map_err(wire::rest_denial));
    let range = try_response!(parse_log_range(query).map_err(bad));
    reply(core.log_page(&credential, range.from, range.limit).await, |items| Items {
        items: items.into_iter().map(EntryBody::from).collect::<Vec<_>>(),
    })
}

pub async fn registry(core: &CoreClient, headers: &HeaderMap, param: &str) -> Response {
    let credential = try_response!(credential(headers).map_err(wire::rest_denial));
    if param.is_empty() {
        return wire::rest_bad_request("registry name is empty");
    }
    reply(core.registry_head(&credential, param).await, |head| RegistryBody { name: param.to_owned(), head })
}

pub async fn receipt(core: &CoreClient, headers: &HeaderMap, param: &str) -> Response {
    let credential = try_response!(credential(headers).map_err(wire::rest_denial));
    let id = try_response!(parse_receipt_id(param).map_err(bad));
    reply(core.receipt(&credential, id).await, |receipt| ReceiptBody {
        invocation_id: receipt.invocation_id,
        // Only a resolved receipt names its result, whatever else the core filled in.
        result_ref: if receipt.state == "resolved" { receipt.result_ref } else { String::new() },
        state: receipt.state,
    })
}

/// `NotFound` from the session probe means the session is fine and there is merely no head.
fn probe_passed(failure: &world_model::Failure) -> bool {
    failure.code == FailureCode::NotFound
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    const REF: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn ref_errors_name_the_field() {
        let table = [
            ("", "world ref: hashref: empty hashref text"),
            ("by-semantic-id", "world ref: hashref: missing algorithm tag (expected algo:digest): \"by-semantic-id\""),
            ("a:b:c", "world ref: hashref: malformed hashref (multiple colons): \"a:b:c\""),
            (":abc", "world ref: hashref: empty algorithm tag: \":abc\""),
            ("md5:abc", "world ref: hashref: unsupported algorithm tag: \"md5\""),
            ("sha256:", "world ref: hashref: digest is not lowercase hexadecimal"),
            ("sha256:ABC", "world ref: hashref: digest is not lowercase hexadecimal: \"ABC\""),
            ("sha256:abc", "world ref: hashref: digest length 3 does not match sha256 width 64: \"abc\""),
        ];
        for (text, want) in table {
            assert_eq!(parse_ref("world ref", text), Err(BadInput(want.into())), "{text:?}");
        }
        assert!(parse_ref("object ref", REF).is_ok());
    }

    #[test]
    fn log_index_and_range_rules() {
        let index_error = Err(BadInput("log index must be a non-negative integer".into()));
        assert_eq!(parse_log_index("0"), Ok(0));
        assert_eq!(parse_log_index("+12"), Ok(12));
        assert_eq!(parse_log_index("-0"), Ok(0));
        assert_eq!(parse_log_index("-1"), index_error);
        assert_eq!(parse_log_index("1.0"), index_error);
        assert_eq!(parse_log_index("99999999999999999999"), index_error);

        let from_error = Err(BadInput("from must be a non-negative integer".into()));
        let limit_error = Err(BadInput("limit must be an integer".into()));
        let range = |from, limit| Ok(LogRange { from, limit });
        let table: &[(Option<&str>, Result<LogRange, BadInput>)] = &[
            (None, range(0, 100)),
            (Some(""), range(0, 100)),
            (Some("from="), range(0, 100)),
            (Some("from=5&limit=2"), range(5, 2)),
            (Some("from=%2B5&limit=%2B2"), range(5, 2)),
            (Some("from=5&from=x"), range(5, 100)),
            (Some("limit=0"), range(0, 100)),
            (Some("limit=-3"), range(0, 100)),
            (Some("limit=501"), range(0, 500)),
            // In a query `+` is a space, so Go's parse of " 5" fails.
            (Some("from=+5"), from_error.clone()),
            (Some("from=-1"), from_error.clone()),
            (Some("from=x&limit=y"), from_error.clone()),
            (Some("from=9223372036854775808"), from_error),
            (Some("limit=+2"), limit_error.clone()),
            (Some("limit=y"), limit_error.clone()),
            (Some("limit=1e2"), limit_error),
        ];
        for (query, want) in table {
            assert_eq!(&parse_log_range(*query), want, "{query:?}");
        }
    }

    #[test]
    fn semantic_page_rules() {
        assert_eq!(parse_semantic_page("", None), Err(BadInput("semantic id is empty".into())));
        assert_eq!(
            parse_semantic_page("a/b", Some("after=x")),
            Err(BadInput("after: hashref: missing algorithm tag (expected algo:digest): \"x\"".into()))
        );
        assert_eq!(parse_semantic_page("a", Some("limit=z")), Err(BadInput("limit must be an integer".into())));
        let page = parse_semantic_page("a/b", Some(&format!("after={REF}&limit=900"))).unwrap();
        assert_eq!(page.after.map(|r| r.to_string()).as_deref(), Some(REF));
        assert_eq!(page.limit, 500);
        assert_eq!(parse_semantic_page("a", Some("after=")).unwrap().after, None);
    }

    #[test]
    fn receipt_and_payload_rules() {
        assert_eq!(parse_receipt_id("rest:a"), Ok("rest:a"));
        for id in ["rest:", "rest", "a2a:x", "REST:x", ""] {
            assert_eq!(parse_receipt_id(id), Err(BadInput("receipt id must be rest:<id>".into())), "{id:?}");
        }
        assert!(wants_payload(Some("payload=true")));
        assert!(wants_payload(Some("payload=true&payload=false")));
        assert!(!wants_payload(Some("payload=True")));
        assert!(!wants_payload(Some("payload=1")));
        assert!(!wants_payload(Some("payload=false&payload=true")));
        assert!(!wants_payload(None));
    }

    #[test]
    fn bodies_keep_the_reference_key_order() {
        let object = pb::StoredObject {
            hash: "h".into(),
            interface_hash: "i".into(),
            semantic_id: "s".into(),
            provenance: "p".into(),
            payload: Some(b"hi".to_vec()),
        };
        assert_eq!(
            json::encode(&ObjectBody::from_proto(object.clone(), false)),
            b"{\"hash\":\"h\",\"interfaceHash\":\"i\",\"semanticId\":\"s\",\"provenance\":\"p\"}\n"
        );
        assert_eq!(
            json::encode(&ObjectBody::from_proto(object.clone(), true)),
            b"{\"hash\":\"h\",\"interfaceHash\":\"i\",\"semanticId\":\"s\",\"provenance\":\"p\",\"payload\":\"aGk=\"}\n"
        );
        let bare = pb::StoredObject { payload: None, ..object };
        assert!(
            String::from_utf8(json::encode(&ObjectBody::from_proto(bare, true)))
                .unwrap()
                .ends_with(",\"payload\":null}\n")
        );
        let entry = pb::LogEntry {
            entry_index: 3,
            semantics_epoch: 1,
            transition_fn: "f".into(),
            interpreter: "i".into(),
            prev_entry_hash: "p".into(),
            written_by: "w".into(),
            entry_hash: "e".into(),
            transition_ref: "t".into(),
        };
        assert_eq!(
            json::encode(&Items {
                items: vec![EntryBody::from(entry)]
            }),
            b"{\"items\":[{\"header\":{\"entryIndex\":3,\"semanticsEpoch\":1,\"transitionFn\":\"f\",\"interpreter\":\"i\",\"prevEntryHash\":\"p\",\"writtenBy\":\"w\"},\"entryHash\":\"e\",\"transitionRef\":\"t\"}]}\n"
        );
        assert_eq!(json::encode(&Items::<EntryBody> { items: vec![] }), b"{\"items\":[]}\n");
        let world = pb::World { r#ref: "r".into(), revision: 2, state_root: "s".into(), log_head: "l".into() };
        assert_eq!(
            json::encode(&WorldBody::from(world)),
            b"{\"ref\":\"r\",\"revision\":2,\"stateRoot\":\"s\",\"logHead\":\"l\"}\n"
        );
        let receipt =
            ReceiptBody { invocation_id: "rest:nope".into(), state: "not-started".into(), result_ref: String::new() };
        assert_eq!(json::encode(&receipt), b"{\"invocationId\":\"rest:nope\",\"state\":\"not-started\"}\n");
        let health = HealthBody {
            status: "ok".into(),
            daemon_version: "0.1.0".into(),
            db_path: "/tmp/x.db".into(),
            interpreter_ref: String::new(),
            interpreter_version: String::new(),
        };
        assert_eq!(
            json::encode(&health),
            b"{\"status\":\"ok\",\"daemon_version\":\"0.1.0\",\"db_path\":\"/tmp/x.db\",\"interpreter_ref\":\"\",\"interpreter_version\":\"\"}\n"
        );
        assert_eq!(
            json::encode(&RegistryBody { name: "world/transition-registry/v1".into(), head: "h".into() }),
            b"{\"name\":\"world/transition-registry/v1\",\"head\":\"h\"}\n"
        );
    }
}
