//! `POST /v1/commit` (reference-edge §3.10): session, body cap, strict decode, refs in the
//! reference's field order, the `rest:<id>` rule, then the core's compare-and-append.

use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use http::HeaderMap;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use world_model::{Failure, FailureCode};
use world_proto::v1 as pb;

use super::{BadInput, credential, is_rest_id, parse_optional_ref, parse_ref, probe_passed, try_response};
use crate::body::{BodyError, COMMIT_LIMIT, read_capped};
use crate::core::CoreClient;
use crate::wire;

/// Go leaves a field at its zero value when the JSON says `null`; serde would refuse it.
fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

/// Go decodes a `[]byte` field from standard, padded base64; `null` is a nil slice.
fn base64_bytes<'de, D>(deserializer: D) -> Result<Option<Vec<u8>>, D::Error>
where
    D: Deserializer<'de>,
{
    match Option::<String>::deserialize(deserializer)? {
        None => Ok(None),
        Some(text) => BASE64
            .decode(text.as_bytes())
            .map(Some)
            .map_err(|error| serde::de::Error::custom(format!("illegal base64 data: {error}"))),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitBody {
    #[serde(rename = "invocationId", default, deserialize_with = "nullable")]
    pub invocation_id: String,
    #[serde(rename = "observedHead", default, deserialize_with = "nullable")]
    pub observed_head: String,
    #[serde(default, deserialize_with = "nullable")]
    pub objects: Vec<ObjectIn>,
    #[serde(rename = "nextWorld", default, deserialize_with = "nullable")]
    pub next_world: WorldIn,
    #[serde(default, deserialize_with = "nullable")]
    pub entry: EntryIn,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObjectIn {
    #[serde(default, deserialize_with = "nullable")]
    pub hash: String,
    #[serde(rename = "interfaceHash", default, deserialize_with = "nullable")]
    pub interface_hash: String,
    #[serde(rename = "semanticId", default, deserialize_with = "nullable")]
    pub semantic_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub provenance: String,
    #[serde(default, deserialize_with = "base64_bytes")]
    pub payload: Option<Vec<u8>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorldIn {
    #[serde(rename = "ref", default, deserialize_with = "nullable")]
    pub reference: String,
    #[serde(default, deserialize_with = "nullable")]
    pub revision: i64,
    #[serde(rename = "stateRoot", default, deserialize_with = "nullable")]
    pub state_root: String,
    #[serde(rename = "logHead", default, deserialize_with = "nullable")]
    pub log_head: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryIn {
    #[serde(default, deserialize_with = "nullable")]
    pub header: HeaderIn,
    #[serde(rename = "entryHash", default, deserialize_with = "nullable")]
    pub entry_hash: String,
    #[serde(rename = "transitionRef", default, deserialize_with = "nullable")]
    pub transition_ref: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderIn {
    #[serde(rename = "entryIndex", default, deserialize_with = "nullable")]
    pub entry_index: i64,
    #[serde(rename = "semanticsEpoch", default, deserialize_with = "nullable")]
    pub semantics_epoch: i64,
    #[serde(rename = "transitionFn", default, deserialize_with = "nullable")]
    pub transition_fn: String,
    #[serde(default, deserialize_with = "nullable")]
    pub interpreter: String,
    #[serde(rename = "prevEntryHash", default, deserialize_with = "nullable")]
    pub prev_entry_hash: String,
    #[serde(rename = "writtenBy", default, deserialize_with = "nullable")]
    pub written_by: String,
}

/// Strict decode: one JSON object, unknown fields refused, nothing but whitespace after it.
///
/// The body goes through a JSON value first so that decoding follows Go rather than serde's
/// defaults: a repeated key keeps its last value, `null` leaves a struct at its zero value, and
/// an array is never accepted where the reference expects an object.
pub fn decode_commit(bytes: &[u8]) -> Result<CommitBody, BadInput> {
    let invalid = |detail: String| BadInput(format!("invalid commit JSON: {detail}"));
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = Value::deserialize(&mut deserializer).map_err(|error| invalid(error.to_string()))?;
    if deserializer.end().is_err() {
        return Err(invalid("multiple values".into()));
    }
    for (pointer, label) in OBJECT_FIELDS {
        if let Some(found) = value.pointer(pointer)
            && !(found.is_object() || found.is_null())
        {
            return Err(invalid(format!("{label} must be a JSON object")));
        }
    }
    if let Some(Value::Array(objects)) = value.get("objects")
        && let Some(i) = objects.iter().position(|o| !(o.is_object() || o.is_null()))
    {
        return Err(invalid(format!("objects[{i}] must be a JSON object")));
    }
    if value.is_null() {
        return Ok(CommitBody::default());
    }
    serde_json::from_value(value).map_err(|error| invalid(error.to_string()))
}

/// Where the commit body holds a struct (checked parent first, so the pointer lookups are
/// meaningful only below an object).
const OBJECT_FIELDS: [(&str, &str); 4] =
    [("", "the commit"), ("/nextWorld", "nextWorld"), ("/entry", "entry"), ("/entry/header", "entry.header")];

/// Every ref in the reference's order, so the first bad field is the one named; then the
/// `invocationId` rule. Returns the request the core receives.
pub fn validate_commit(body: CommitBody) -> Result<pb::CommitRequest, BadInput> {
    let observed = parse_optional_ref("observedHead", &body.observed_head)?;
    let world = &body.next_world;
    let reference = parse_ref("nextWorld.ref", &world.reference)?;
    let state_root = parse_ref("nextWorld.stateRoot", &world.state_root)?;
    let log_head = parse_ref("nextWorld.logHead", &world.log_head)?;
    let entry = &body.entry;
    let entry_hash = parse_ref("entry.entryHash", &entry.entry_hash)?;
    let transition_ref = parse_ref("entry.transitionRef", &entry.transition_ref)?;
    let transition_fn = parse_ref("entry.header.transitionFn", &entry.header.transition_fn)?;
    let interpreter = parse_ref("entry.header.interpreter", &entry.header.interpreter)?;
    let prev_entry_hash = parse_ref("entry.header.prevEntryHash", &entry.header.prev_entry_hash)?;
    let mut objects = Vec::with_capacity(body.objects.len());
    for (i, object) in body.objects.into_iter().enumerate() {
        let hash = parse_ref(&format!("objects[{i}].hash"), &object.hash)?;
        let interface_hash = parse_ref(&format!("objects[{i}].interfaceHash"), &object.interface_hash)?;
        objects.push(pb::StoredObject {
            hash: hash.to_string(),
            interface_hash: interface_hash.to_string(),
            semantic_id: object.semantic_id,
            provenance: object.provenance,
            payload: Some(object.payload.unwrap_or_default()),
        });
    }
    if !body.invocation_id.is_empty() && !is_rest_id(&body.invocation_id) {
        return Err(BadInput("invocationId must be rest:<id>".into()));
    }
    Ok(pb::CommitRequest {
        invocation_id: body.invocation_id,
        observed_head: observed.map(|r| r.to_string()).unwrap_or_default(),
        objects,
        next_world: Some(pb::World {
            r#ref: reference.to_string(),
            revision: world.revision,
            state_root: state_root.to_string(),
            log_head: log_head.to_string(),
        }),
        entry: Some(pb::LogEntry {
            entry_index: entry.header.entry_index,
            semantics_epoch: entry.header.semantics_epoch,
            transition_fn: transition_fn.to_string(),
            interpreter: interpreter.to_string(),
            prev_entry_hash: prev_entry_hash.to_string(),
            written_by: entry.header.written_by.clone(),
            entry_hash: entry_hash.to_string(),
            transition_ref: transition_ref.to_string(),
        }),
    })
}

/// How to find out whether an uncertain commit landed (reference-edge §3.10).
pub fn uncertain_message(request: &pb::CommitRequest) -> String {
    if request.invocation_id.is_empty() {
        let index = request.entry.as_ref().map(|e| e.entry_index).unwrap_or_default();
        format!(
            "commit outcome unknown: reconcile with GET /v1/log/{index} before any resend: a row equal to your entry means it landed; absent or different means it did not; a different head does not mean it failed"
        )
    } else {
        format!(
            "commit outcome unknown: reconcile with GET /v1/receipts/{} before any resend: resolved means it landed; not-started or indeterminate means it did not",
            request.invocation_id
        )
    }
}

#[derive(Serialize)]
struct SelectedHead {
    #[serde(rename = "selectedHead")]
    selected_head: String,
}

pub async fn commit(core: &CoreClient, headers: &HeaderMap, body: Body, body_read_timeout: Duration) -> Response {
    let credential = try_response!(credential(headers).map_err(wire::rest_denial));
    // The reference resolves the session before touching the body; the core decides unknown
    // and expired, so ask it with the cheapest gated read before reading up to 8 MiB.
    if let Err(failure) = core.head(&credential).await
        && !probe_passed(&failure)
    {
        return wire::rest_failure(&failure);
    }
    let bytes = match read_capped(body, COMMIT_LIMIT, body_read_timeout).await {
        Ok(bytes) => bytes,
        Err(BodyError::TooLarge { .. }) => {
            return wire::rest_failure(&Failure::of(FailureCode::PayloadTooLarge));
        }
        Err(error @ (BodyError::Read(_) | BodyError::TooSlow { .. })) => {
            return wire::rest_bad_request(&format!("cannot read commit body: {error}"));
        }
    };
    let request = try_response!(
        decode_commit(&bytes).and_then(validate_commit).map_err(|input| wire::rest_bad_request(&input.0))
    );
    let uncertain = uncertain_message(&request);
    match core.commit(&credential, request).await {
        Ok(selected_head) => wire::rest_ok(&SelectedHead { selected_head }),
        Err(mut failure) => {
            if failure.code == FailureCode::CommitUncertain {
                failure.message = uncertain;
            }
            wire::rest_failure(&failure)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn r(n: u8) -> String {
        format!("sha256:{}", format!("{n:02x}").repeat(32))
    }

    fn valid() -> Value {
        json!({
            "invocationId": "rest:a",
            "observedHead": r(1),
            "objects": [{"hash": r(2), "interfaceHash": r(3), "semanticId": "s", "provenance": "p", "payload": "aGk="}],
            "nextWorld": {"ref": r(4), "revision": 2, "stateRoot": r(5), "logHead": r(6)},
            "entry": {"header": {"entryIndex": 2, "semanticsEpoch": 1, "transitionFn": r(7),
                                 "interpreter": r(8), "prevEntryHash": r(9), "writtenBy": "me"},
                      "entryHash": r(10), "transitionRef": r(11)}
        })
    }

    fn check(body: &Value) -> Result<pb::CommitRequest, BadInput> {
        decode_commit(body.to_string().as_bytes()).and_then(validate_commit)
    }

    fn message(body: &Value) -> String {
        check(body).unwrap_err().0
    }

    #[test]
    fn a_valid_commit_becomes_the_core_request() {
        let request = check(&valid()).unwrap();
        assert_eq!(request.invocation_id, "rest:a");
        assert_eq!(request.observed_head, r(1));
        assert_eq!(request.objects[0].payload.as_deref(), Some(&b"hi"[..]));
        assert_eq!(request.next_world.as_ref().unwrap().revision, 2);
        assert_eq!(request.entry.as_ref().unwrap().written_by, "me");
        let mut genesis = valid();
        genesis["observedHead"] = json!("");
        genesis.as_object_mut().unwrap().remove("invocationId");
        let request = check(&genesis).unwrap();
        assert_eq!(request.observed_head, "");
        assert_eq!(request.invocation_id, "");
    }

    #[test]
    fn refs_are_checked_in_the_reference_order() {
        // Break every ref, then repair them one by one: each step names the next field.
        let order = [
            ("observedHead", "/observedHead"),
            ("nextWorld.ref", "/nextWorld/ref"),
            ("nextWorld.stateRoot", "/nextWorld/stateRoot"),
            ("nextWorld.logHead", "/nextWorld/logHead"),
            ("entry.entryHash", "/entry/entryHash"),
            ("entry.transitionRef", "/entry/transitionRef"),
            ("entry.header.transitionFn", "/entry/header/transitionFn"),
            ("entry.header.interpreter", "/entry/header/interpreter"),
            ("entry.header.prevEntryHash", "/entry/header/prevEntryHash"),
            ("objects[0].hash", "/objects/0/hash"),
            ("objects[0].interfaceHash", "/objects/0/interfaceHash"),
        ];
        let good = valid();
        let mut body = valid();
        for (_, pointer) in order {
            *body.pointer_mut(pointer).unwrap() = json!("bad");
        }
        for (field, pointer) in order {
            assert_eq!(
                message(&body),
                format!("{field}: hashref: missing algorithm tag (expected algo:digest): \"bad\"")
            );
            *body.pointer_mut(pointer).unwrap() = good.pointer(pointer).unwrap().clone();
        }
        assert!(check(&body).is_ok());
        // A missing section is all zero values, so its first ref is the empty one.
        let mut missing = valid();
        missing.as_object_mut().unwrap().remove("nextWorld");
        assert_eq!(message(&missing), "nextWorld.ref: hashref: empty hashref text");
    }

    #[test]
    fn invocation_id_rule() {
        for (id, ok) in [("rest:x", true), ("", true), ("rest:", false), ("a2a:e:t", false), ("effect:x", false)] {
            let mut body = valid();
            body["invocationId"] = json!(id);
            assert_eq!(check(&body).is_ok(), ok, "{id:?}");
            if !ok {
                assert_eq!(message(&body), "invocationId must be rest:<id>");
            }
        }
        // Refs are checked before the id.
        let mut body = valid();
        body["invocationId"] = json!("a2a:x");
        body["observedHead"] = json!("x");
        assert!(message(&body).starts_with("observedHead: "));
    }

    #[test]
    fn strict_decoding() {
        let prefix = "invalid commit JSON: ";
        let mut unknown = valid();
        unknown["extra"] = json!(1);
        assert!(message(&unknown).starts_with(prefix));
        assert!(message(&unknown).contains("extra"));
        let mut nested = valid();
        nested["nextWorld"]["extra"] = json!(1);
        assert!(message(&nested).starts_with(prefix));
        let two = format!("{} {}", valid(), valid());
        assert_eq!(decode_commit(two.as_bytes()).unwrap_err().0, "invalid commit JSON: multiple values");
        assert!(decode_commit(format!("{} \n\t", valid()).as_bytes()).is_ok());
        // Go keeps the last of repeated keys.
        let repeated = format!("{{\"observedHead\":\"x\",{}", &valid().to_string()[1..]);
        assert!(decode_commit(repeated.as_bytes()).is_ok());
        for bad in [
            "",
            "[]",
            "{\"nextWorld\":[]}",
            "{\"entry\":{\"header\":[1]}}",
            "{\"objects\":[1]}",
            "null x",
            "{",
            "{\"objects\":{}}",
            "{\"nextWorld\":{\"revision\":1.5}}",
        ] {
            let got = decode_commit(bad.as_bytes());
            assert!(got.as_ref().is_err_and(|e| e.0.starts_with(prefix)), "{bad:?} {got:?}");
        }
        let mut payload = valid();
        payload["objects"][0]["payload"] = json!("not base64!");
        assert!(message(&payload).starts_with(prefix));
        // JSON null leaves Go's zero value in place.
        let nulls = json!({"observedHead": null, "objects": null, "nextWorld": null});
        assert_eq!(message(&nulls), "nextWorld.ref: hashref: empty hashref text");
    }

    #[test]
    fn uncertain_messages_say_how_to_reconcile() {
        let request = check(&valid()).unwrap();
        assert!(uncertain_message(&request).contains("GET /v1/receipts/rest:a"));
        let mut body = valid();
        body.as_object_mut().unwrap().remove("invocationId");
        let request = check(&body).unwrap();
        assert!(
            uncertain_message(&request)
                .starts_with("commit outcome unknown: reconcile with GET /v1/log/2 before any resend")
        );
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(256))]

        #[test]
        fn commit_decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_commit(&bytes).and_then(validate_commit);
        }

        #[test]
        fn commit_decoding_never_panics_on_jsonish_text(text in "[\\[\\]{}\":,a-zA-Z0-9 ]{0,128}") {
            let _ = decode_commit(text.as_bytes()).and_then(validate_commit);
        }
    }
}
