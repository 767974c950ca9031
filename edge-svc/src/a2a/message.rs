//! The two message-shaped A2A vocabularies beside the seed's `tasks/send` (DESIGN "Edge",
//! deliberate difference 4): A2A 0.3's `message/send` (`kind` discriminators, lower-case
//! states, `kind: "task"` results) and A2A 1.0's JSON-RPC binding (`SendMessage`, `GetTask`,
//! `CancelTask`: kind-less parts, `TASK_STATE_*` states, `SendMessage` answering
//! `{"task": …}`). Both carry the arguments as one data part, name the skill (and the optional
//! `transition_fn` pin) in the request's or the message's `metadata`, and use the message's
//! `messageId` as the task id: the idempotency key within the episode that `params.id` is for
//! `tasks/send`. A task's `contextId` is the session's episode, the scope its id lives in.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use world_model::{Failure, HashRef};
use world_proto::v1 as pb;

use super::{TaskMetadata, TaskStatus, sorted_output};
use crate::json;

/// Which message-shaped vocabulary a request speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// A2A 0.3 `message/send`.
    V03,
    /// A2A 1.0 `SendMessage`.
    V1,
}

type Metadata<'a> = BTreeMap<String, &'a RawValue>;

#[derive(Deserialize)]
struct SendParams<'a> {
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(borrow, default)]
    metadata: Option<Metadata<'a>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(rename = "messageId", default)]
    message_id: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(borrow, default)]
    parts: Option<Vec<&'a RawValue>>,
    #[serde(borrow, default)]
    metadata: Option<Metadata<'a>>,
}

#[derive(Deserialize)]
struct PartFields<'a> {
    #[serde(default)]
    kind: Option<String>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    // A 1.0 part is a oneof: any other content next to `data` makes it something else.
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
    #[serde(borrow, default)]
    url: Option<&'a RawValue>,
    #[serde(borrow, default)]
    raw: Option<&'a RawValue>,
    #[serde(borrow, default)]
    file: Option<&'a RawValue>,
}

/// A decoded `message/send` (0.3) or `SendMessage` (1.0).
#[derive(Debug)]
pub struct Send<'a> {
    /// The message's `messageId`; empty when absent, which the core refuses as `invalid params`
    /// by the task-id grammar, as it does an empty `params.id`.
    pub task_id: String,
    /// `skill_id` from the request's `metadata`, else the message's; empty when neither holds
    /// a string (then nothing on the surface matches: `not authorized`).
    pub skill: String,
    /// The one data part's object and the optional pin; `None` when either is malformed.
    pub call: Option<(&'a RawValue, Option<HashRef>)>,
}

/// The params, or `Err` when they are absent, `null` or do not decode (`invalid params`,
/// before the skill is looked at, as for `tasks/send`).
pub fn parse_send(raw: Option<&RawValue>, dialect: Dialect) -> Result<Send<'_>, serde_json::Error> {
    let params: SendParams<'_> = object(raw)?;
    let message: Option<Message<'_>> =
        params.message.filter(|message| !json::is_null(message)).map(|message| object(Some(message))).transpose()?;
    let request_metadata = params.metadata.unwrap_or_default();
    let message_metadata = message.as_ref().and_then(|m| m.metadata.clone()).unwrap_or_default();
    // The request's metadata wins over the message's, member by member.
    let lookup = |key: &str| {
        request_metadata
            .get(key)
            .filter(|value| value.get() != "null")
            .or_else(|| message_metadata.get(key))
            .copied()
            .filter(|value| value.get() != "null")
    };
    let skill = lookup("skill_id").and_then(|raw| serde_json::from_str::<String>(raw.get()).ok()).unwrap_or_default();
    let pin = match lookup("transition_fn") {
        None => Ok(None),
        Some(raw) => serde_json::from_str::<String>(raw.get())
            .ok()
            .and_then(|text| HashRef::parse(&text).ok())
            .map(Some)
            .ok_or(()),
    };
    let (task_id, data) = match message {
        Some(message) => {
            let data = data_part(&message, dialect)?;
            (message.message_id.unwrap_or_default(), data)
        }
        None => (String::new(), None),
    };
    let call = match (data, pin) {
        (Some(data), Ok(pin)) => Some((data, pin)),
        _ => None,
    };
    Ok(Send { task_id, skill, call })
}

/// The message's one data part holding an object, or `None` when the message is not that
/// shape; `Err` when a part does not decode at all.
fn data_part<'a>(message: &Message<'a>, dialect: Dialect) -> Result<Option<&'a RawValue>, serde_json::Error> {
    let [part] = message.parts.as_deref().unwrap_or_default() else { return Ok(None) };
    let part: PartFields<'a> = object(Some(part))?;
    let shaped = match dialect {
        Dialect::V03 => message.kind.as_deref() == Some("message") && part.kind.as_deref() == Some("data"),
        Dialect::V1 => part.text.is_none() && part.url.is_none() && part.raw.is_none() && part.file.is_none(),
    };
    Ok(part.data.filter(|data| shaped && json::kind(data) == "object"))
}

/// A JSON object decoded into `T`; serde would also take an array for a struct, and A2A's
/// params, messages and parts are objects.
fn object<'a, T: Deserialize<'a>>(raw: Option<&'a RawValue>) -> Result<T, serde_json::Error> {
    match raw {
        Some(raw) if json::kind(raw) == "object" => serde_json::from_str(raw.get()),
        Some(raw) => Err(serde::de::Error::invalid_type(serde::de::Unexpected::Other(json::kind(raw)), &"an object")),
        None => Err(serde::de::Error::missing_field("params")),
    }
}

/// Whether a `message/send` speaks A2A 0.3 rather than the seed's shape that the alias has
/// always accepted: its message carries a `messageId` or a `kind`, which the seed's never does.
pub fn is_v03(raw: Option<&RawValue>) -> bool {
    #[derive(Deserialize)]
    struct Probe<'a> {
        #[serde(borrow, default)]
        message: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct ProbeMessage<'a> {
        #[serde(rename = "messageId", borrow, default)]
        message_id: Option<&'a RawValue>,
        #[serde(borrow, default)]
        kind: Option<&'a RawValue>,
    }
    let Some(raw) = raw else { return false };
    let Ok(Probe { message: Some(message) }) = serde_json::from_str::<Probe<'_>>(raw.get()) else { return false };
    matches!(serde_json::from_str::<ProbeMessage<'_>>(message.get()),
        Ok(probe) if probe.message_id.is_some() || probe.kind.is_some())
}

/// `GetTask` / `CancelTask` params: `{"id": <task id>, …}`; `None` (`invalid params`) unless
/// `id` is a non-empty string.
pub fn parse_task_query(raw: Option<&RawValue>) -> Option<String> {
    #[derive(Deserialize)]
    struct Query {
        #[serde(default)]
        id: Option<String>,
    }
    let query: Query = object(raw).ok()?;
    query.id.filter(|id| !id.is_empty())
}

// Keys in bytewise order, as every other body on /a2a/.

/// A completed task in either vocabulary: 0.3 adds `kind` discriminators and lower-case
/// states; 1.0 has neither and spells states `TASK_STATE_*`.
#[derive(Serialize)]
pub struct Task<'a> {
    pub artifacts: [Artifact; 1],
    #[serde(rename = "contextId")]
    pub context_id: &'a str,
    pub id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub metadata: TaskMetadata<'a>,
    pub status: TaskStatus,
}

#[derive(Serialize)]
pub struct Artifact {
    #[serde(rename = "artifactId")]
    pub artifact_id: &'static str,
    pub parts: [Part; 1],
}

#[derive(Serialize)]
pub struct Part {
    pub data: Box<RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
}

/// `SendMessage`'s result: A2A 1.0's `SendMessageResponse` holding the task.
#[derive(Serialize)]
pub struct SendMessageResult<'a> {
    pub task: Task<'a>,
}

/// The one artifact's id: a task has exactly one output.
pub const ARTIFACT_ID: &str = "output";

/// The committed call as a task of `dialect`, in the episode that scopes its id.
pub fn task<'a>(dialect: Dialect, task_id: &'a str, invoked: &'a pb::Invoked) -> Result<Task<'a>, Failure> {
    let (kind, part_kind, state) = match dialect {
        Dialect::V03 => (Some("task"), Some("data"), "completed"),
        Dialect::V1 => (None, None, "TASK_STATE_COMPLETED"),
    };
    Ok(Task {
        artifacts: [Artifact {
            artifact_id: ARTIFACT_ID,
            parts: [Part { data: sorted_output(&invoked.output)?, kind: part_kind }],
        }],
        context_id: &invoked.episode,
        id: task_id,
        kind,
        metadata: TaskMetadata {
            entry_index: invoked.entry_index,
            invocation_id: &invoked.invocation_id,
            world_ref: &invoked.world_ref,
        },
        status: TaskStatus { state },
    })
}

/// Whether an `A2A-Version` value is 1.0 (a patch level is ignored, as A2A says).
pub fn speaks_1_0(version: &str) -> bool {
    let parts: Vec<&str> = version.trim().split('.').collect();
    let numeric = |part: &&str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    if parts.is_empty() || parts.len() > 3 || !parts.iter().all(numeric) {
        return false;
    }
    let number = |i: usize| parts.get(i).map(|part| part.parse::<u64>().ok());
    number(0) == Some(Some(1)) && matches!(number(1), None | Some(Some(0)))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    /// (params, decodes, task id, skill, well-formed call)
    fn send_row(params: Option<&str>, dialect: Dialect) -> String {
        let params = params.map(raw);
        match parse_send(params.as_deref(), dialect) {
            Err(_) => "undecodable".to_owned(),
            Ok(send) => format!(
                "task={} skill={} call={}",
                send.task_id,
                send.skill,
                send.call.map_or("none".to_owned(), |(data, pin)| format!(
                    "{}{}",
                    data.get(),
                    pin.map_or("", |_| "+pin")
                ))
            ),
        }
    }

    #[test]
    fn send_message_params_follow_a2a_1_0() {
        let pin = HashRef::of(b"x");
        let table: Vec<(String, &str)> = vec![
            (
                r#"{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"data":{"a":1.0}}]},"metadata":{"skill_id":"tools.echo"}}"#.into(),
                "task=m-1 skill=tools.echo call={\"a\":1.0}",
            ),
            // The message's metadata names the skill when the request's does not; the request's wins.
            (
                r#"{"message":{"messageId":"m","parts":[{"data":{}}],"metadata":{"skill_id":"a.b"}}}"#.into(),
                "task=m skill=a.b call={}",
            ),
            (
                r#"{"message":{"messageId":"m","parts":[{"data":{}}],"metadata":{"skill_id":"a.b"}},"metadata":{"skill_id":"c.d"}}"#.into(),
                "task=m skill=c.d call={}",
            ),
            (
                r#"{"message":{"messageId":"m","parts":[{"data":{}}],"metadata":{"skill_id":"a.b"}},"metadata":{"skill_id":null}}"#.into(),
                "task=m skill=a.b call={}",
            ),
            // Unknown members (configuration, tenant, mediaType) are not the call's business.
            (
                r#"{"tenant":"","configuration":{"acceptedOutputModes":[]},"message":{"messageId":"m","parts":[{"data":{},"mediaType":"application/json"}]}}"#.into(),
                "task=m skill= call={}",
            ),
            (format!(r#"{{"message":{{"messageId":"m","parts":[{{"data":{{}}}}]}},"metadata":{{"transition_fn":"{pin}"}}}}"#), "task=m skill= call={}+pin"),
            // Shapes that decode but are not one data part holding an object, or a bad pin.
            (r#"{"message":{"messageId":"m","parts":[{"text":"hi"}]}}"#.into(), "task=m skill= call=none"),
            (r#"{"message":{"messageId":"m","parts":[{"data":{},"text":"hi"}]}}"#.into(), "task=m skill= call=none"),
            (r#"{"message":{"messageId":"m","parts":[{"data":[1]}]}}"#.into(), "task=m skill= call=none"),
            (r#"{"message":{"messageId":"m","parts":[{"data":{}},{"data":{}}]}}"#.into(), "task=m skill= call=none"),
            (r#"{"message":{"messageId":"m","parts":[]}}"#.into(), "task=m skill= call=none"),
            (r#"{"message":{"messageId":"m","parts":[{"data":{}}]},"metadata":{"transition_fn":"nope"}}"#.into(), "task=m skill= call=none"),
            (r#"{"message":{"parts":[{"data":{}}]}}"#.into(), "task= skill= call={}"),
            ("{}".into(), "task= skill= call=none"),
            // Params that are absent, null or of a wrong type do not decode.
            ("null".into(), "undecodable"),
            (r#"{"message":{"messageId":7,"parts":[{"data":{}}]}}"#.into(), "undecodable"),
            (r#"{"message":{"messageId":"m","parts":{}}}"#.into(), "undecodable"),
            (r#"{"message":{"messageId":"m","parts":[7]}}"#.into(), "undecodable"),
            (r#"{"metadata":[]}"#.into(), "undecodable"),
            (r#"{"message":[]}"#.into(), "undecodable"),
            (r#"{"message":{"messageId":"m","parts":[[]]}}"#.into(), "undecodable"),
            (r#"{"message":null}"#.into(), "task= skill= call=none"),
            ("[]".into(), "undecodable"),
        ];
        for (params, want) in &table {
            assert_eq!(send_row(Some(params), Dialect::V1), *want, "{params}");
        }
        assert_eq!(send_row(None, Dialect::V1), "undecodable");
    }

    #[test]
    fn message_send_params_follow_a2a_0_3() {
        let table: &[(&str, &str)] = &[
            (
                r#"{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"data","data":{"n":1}}]},"metadata":{"skill_id":"tools.echo"}}"#,
                "task=m skill=tools.echo call={\"n\":1}",
            ),
            // 0.3 names every part's kind and the message's.
            (r#"{"message":{"kind":"message","messageId":"m","parts":[{"data":{}}]}}"#, "task=m skill= call=none"),
            (r#"{"message":{"messageId":"m","parts":[{"kind":"data","data":{}}]}}"#, "task=m skill= call=none"),
            (
                r#"{"message":{"kind":"task","messageId":"m","parts":[{"kind":"data","data":{}}]}}"#,
                "task=m skill= call=none",
            ),
            (
                r#"{"message":{"kind":"message","messageId":"m","parts":[{"kind":"text","text":"hi"}]}}"#,
                "task=m skill= call=none",
            ),
        ];
        for (params, want) in table {
            assert_eq!(send_row(Some(params), Dialect::V03), *want, "{params}");
        }
    }

    #[test]
    fn only_a_message_with_an_a2a_0_3_member_leaves_the_seed_shape() {
        let table: &[(Option<&str>, bool)] = &[
            (Some(r#"{"message":{"messageId":"m"}}"#), true),
            (Some(r#"{"message":{"kind":"message"}}"#), true),
            (Some(r#"{"id":"t","message":{"role":"user","parts":[{"type":"data","data":{}}]}}"#), false),
            (Some(r#"{"id":"t","message":{"role":"user","parts":[{"kind":"data","data":{}}]}}"#), false),
            (Some(r#"{"message":null}"#), false),
            (Some(r#"{"message":7}"#), false),
            (Some("[]"), false),
            (None, false),
        ];
        for (params, want) in table {
            let params = params.map(raw);
            assert_eq!(is_v03(params.as_deref()), *want, "{params:?}");
        }
    }

    #[test]
    fn task_queries_need_a_task_id() {
        let table: &[(Option<&str>, Option<&str>)] = &[
            (Some(r#"{"id":"t-1"}"#), Some("t-1")),
            (Some(r#"{"id":"t-1","historyLength":3,"tenant":""}"#), Some("t-1")),
            (Some(r#"{"id":""}"#), None),
            (Some(r#"{"id":7}"#), None),
            (Some("{}"), None),
            (Some("null"), None),
            (Some(r#"["t-1"]"#), None),
            (None, None),
        ];
        for (params, want) in table {
            let params = params.map(raw);
            assert_eq!(parse_task_query(params.as_deref()).as_deref(), want.as_deref(), "{params:?}");
        }
    }

    #[test]
    fn a2a_1_0_is_major_one_minor_zero_with_any_patch() {
        for yes in ["1.0", "1", "1.0.0", "1.0.7", " 1.0 "] {
            assert!(speaks_1_0(yes), "{yes}");
        }
        for no in ["", "0.3", "0.3.0", "1.1", "2.0", "1.0.0.0", "1.x", "v1.0", "1..0", "01.0x"] {
            assert!(!speaks_1_0(no), "{no}");
        }
    }

    #[test]
    fn tasks_are_sorted_with_each_vocabulary_s_kinds_and_states() {
        let invoked = pb::Invoked {
            output: br#"{"z":1.50,"a":"<b>"}"#.to_vec(),
            invocation_id: "a2a:ep1:m-1".into(),
            world_ref: "sha256:00".into(),
            entry_index: 3,
            task_id: "m-1".into(),
            reconciled: false,
            episode: "ep1".into(),
        };
        let v1 = json::marshal(&SendMessageResult { task: task(Dialect::V1, "m-1", &invoked).unwrap() });
        assert_eq!(
            String::from_utf8(v1).unwrap(),
            r#"{"task":{"artifacts":[{"artifactId":"output","parts":[{"data":{"a":"\u003cb\u003e","z":1.5}}]}],"contextId":"ep1","id":"m-1","metadata":{"entry_index":3,"invocation_id":"a2a:ep1:m-1","world_ref":"sha256:00"},"status":{"state":"TASK_STATE_COMPLETED"}}}"#
        );
        let v03 = json::marshal(&task(Dialect::V03, "m-1", &invoked).unwrap());
        assert_eq!(
            String::from_utf8(v03).unwrap(),
            r#"{"artifacts":[{"artifactId":"output","parts":[{"data":{"a":"\u003cb\u003e","z":1.5},"kind":"data"}]}],"contextId":"ep1","id":"m-1","kind":"task","metadata":{"entry_index":3,"invocation_id":"a2a:ep1:m-1","world_ref":"sha256:00"},"status":{"state":"completed"}}"#
        );
    }

    /// A member value of the kind named, for the generated shapes below.
    fn of_kind(kind: &str, object: Value) -> Option<Value> {
        match kind {
            "absent" => None,
            "null" => Some(Value::Null),
            "object" => Some(object),
            "array" => Some(json!([])),
            "number" => Some(json!(3)),
            _ => Some(json!("x")),
        }
    }

    fn kinds(weighted: &'static str) -> impl Strategy<Value = &'static str> {
        prop_oneof![
            6 => Just(weighted),
            1 => prop::sample::select(vec!["absent", "null", "object", "array", "number", "string"]),
        ]
    }

    /// The value `lookup` finds: the request's member unless absent or null, else the message's.
    fn looked_up<'a>(request: Option<&'a Value>, message: Option<&'a Value>, key: &str) -> Option<&'a Value> {
        let member = |metadata: Option<&'a Value>| metadata.and_then(|m| m.get(key)).filter(|v| !v.is_null());
        member(request).or_else(|| member(message))
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(512))]

        /// `message/send` and `SendMessage` params decode as their serde shapes say, and the call
        /// is well formed exactly when the message holds one data part of its dialect's shape
        /// whose data is an object, with a pin (request metadata first) that is a ref if present.
        #[test]
        fn send_params_decode_by_their_shape(
            v1 in any::<bool>(),
            params_kind in kinds("object"),
            message_kind in kinds("object"),
            message_id in kinds("string"),
            message_word in prop::option::of(prop::sample::select(vec![json!("message"), json!("message"), json!("task"), json!(5), Value::Null])),
            parts_kind in kinds("array"),
            parts in prop::collection::vec(
                (
                    kinds("object"),
                    prop::option::of(prop::sample::select(vec![json!("data"), json!("data"), json!("text"), json!(5), Value::Null])),
                    prop::option::of(prop::sample::select(vec![json!({}), json!({"a": [1]}), json!([1]), json!("x"), Value::Null])),
                    prop::option::weighted(0.2, prop::sample::select(vec![json!("hi"), Value::Null])),
                ),
                0..3,
            ),
            request_metadata in (kinds("object"), prop::option::of(prop::sample::select(vec![json!("s1"), json!(7), Value::Null])), prop::option::weighted(0.3, prop::sample::select(vec![json!(HashRef::of(b"x").to_string()), json!("nope"), Value::Null]))),
            message_metadata in (kinds("object"), prop::option::of(prop::sample::select(vec![json!("s2"), json!(7), Value::Null])), prop::option::weighted(0.3, prop::sample::select(vec![json!(HashRef::of(b"y").to_string()), json!("nope"), Value::Null]))),
        ) {
            let dialect = if v1 { Dialect::V1 } else { Dialect::V03 };
            let metadata = |(kind, skill, pin): &(&str, Option<Value>, Option<Value>)| {
                let mut object = json!({});
                if let Some(skill) = skill { object["skill_id"] = skill.clone(); }
                if let Some(pin) = pin { object["transition_fn"] = pin.clone(); }
                of_kind(kind, object)
            };
            let part_values: Vec<Value> = parts.iter().map(|(kind, word, data, text)| {
                let mut object = json!({});
                if let Some(word) = word { object["kind"] = word.clone(); }
                if let Some(data) = data { object["data"] = data.clone(); }
                if let Some(text) = text { object["text"] = text.clone(); }
                of_kind(kind, object).unwrap_or(Value::Null)
            }).collect();
            let mut message = json!({"role": "user"});
            if let Some(id) = of_kind(message_id, Value::Null).map(|v| if v.is_string() { json!("m-1") } else { v }) { message["messageId"] = id; }
            if let Some(word) = &message_word { message["kind"] = word.clone(); }
            if let Some(parts) = of_kind(parts_kind, Value::Null).map(|v| if v == json!([]) { Value::Array(part_values.clone()) } else { v }) { message["parts"] = parts; }
            let message_meta = metadata(&message_metadata);
            if let Some(meta) = &message_meta { message["metadata"] = meta.clone(); }
            let message = of_kind(message_kind, message);
            let request_meta = metadata(&request_metadata);
            let mut params = json!({});
            if let Some(message) = &message { params["message"] = message.clone(); }
            if let Some(meta) = &request_meta { params["metadata"] = meta.clone(); }
            let params = of_kind(params_kind, params);

            // What the shapes say.
            let is = |v: &Option<Value>, ok: &dyn Fn(&Value) -> bool| v.as_ref().is_none_or(|v| v.is_null() || ok(v));
            let message_object = message.as_ref().filter(|m| m.is_object());
            let one_part = match (message_object, parts_kind) {
                (Some(_), "array") => parts.len() == 1,
                _ => false,
            };
            let decodes = params.as_ref().is_some_and(Value::is_object)
                && is(&request_meta, &Value::is_object)
                && is(&message, &Value::is_object)
                && (message_object.is_none() || (
                    is(&message_object.and_then(|m| m.get("messageId")).cloned(), &Value::is_string)
                    && is(&message_word, &Value::is_string)
                    && is(&message_object.and_then(|m| m.get("parts")).cloned(), &Value::is_array)
                    && is(&message_meta, &Value::is_object)
                    && (!one_part || (part_values[0].is_object() && is(&parts[0].1, &Value::is_string)))
                ));
            let raw_params = params.as_ref().map(|p| RawValue::from_string(p.to_string()).unwrap());
            let parsed = parse_send(raw_params.as_deref(), dialect);
            prop_assert_eq!(parsed.is_ok(), decodes, "{:?}", params);
            let Ok(send) = parsed else { return Ok(()) };

            let request_metadata_value = request_meta.as_ref().filter(|m| m.is_object());
            let message_metadata_value = message_object.and(message_meta.as_ref()).filter(|m| m.is_object());
            let skill = looked_up(request_metadata_value, message_metadata_value, "skill_id").and_then(Value::as_str).unwrap_or_default();
            prop_assert_eq!(send.skill.as_str(), skill);
            let pin_ok = match looked_up(request_metadata_value, message_metadata_value, "transition_fn") {
                None => true,
                Some(pin) => pin.as_str().is_some_and(|text| HashRef::parse(text).is_ok()),
            };
            let (part_kind, data, text) = (&parts.first().and_then(|p| p.1.clone()), parts.first().and_then(|p| p.2.clone()), parts.first().and_then(|p| p.3.clone()));
            let shaped = match dialect {
                Dialect::V03 => message_word == Some(json!("message")) && *part_kind == Some(json!("data")),
                Dialect::V1 => text.is_none_or(|t| t.is_null()),
            };
            let well_formed = one_part && shaped && data.is_some_and(|d| d.is_object()) && pin_ok;
            prop_assert_eq!(send.call.is_some(), well_formed, "{:?}", params);
            let task_id = message_object.and_then(|m| m.get("messageId")).and_then(Value::as_str).unwrap_or_default();
            prop_assert_eq!(send.task_id.as_str(), task_id);
        }
    }
}
