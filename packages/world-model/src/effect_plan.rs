//! Calling convention v2 (reference-core §3.5): the phase inputs an effectful transition
//! receives, the plan law its plan must obey (§3.5.1), the finish law, and the composition of
//! the caller-visible output with its `world` block (§3.5.2).
//!
//! Every JSON here is canonical: plan and finish outputs are canonicalised before any check,
//! and the phase inputs and the composed output are assembled from canonical pieces, so the
//! bytes hashed into the log never depend on how a transition spaced or ordered its output.

use std::fmt;

use crate::canonical::{CanonicalError, canonicalize};
use crate::canonical_parts::{self, Member, elements, has_member, kind, members};
use crate::grant::AccessTriple;
use crate::hashref::HashRef;

/// The `plan` value every plan carries, and the semantic id of the stored plan object.
pub const EFFECT_PLAN: &str = "world/effect-plan/v1";
/// Largest raw phase output (plan or finish) the laws read.
pub const MAX_PHASE_OUTPUT: usize = 4 * 1024 * 1024;
/// Largest canonical effect payload (L4).
pub const MAX_PAYLOAD: usize = 1024 * 1024;
/// Effects one plan may request (L1; L5 is reserved for ordering several).
pub const MAX_EFFECTS: usize = 1;
/// Longest effect id (L2).
pub const MAX_EFFECT_ID: usize = 16;

/// The plan's closed key set, in canonical (sorted) order.
const PLAN_KEYS: [&str; 4] = ["effects", "finish", "plan", "result"];
/// An effect's closed key set, in canonical (sorted) order.
const EFFECT_KEYS: [&str; 5] = ["cost", "effect", "id", "payload", "scope"];

/// Which rule a plan or finish output broke. `Shape` is everything the numbered laws do not
/// name: JSON that does not canonicalise, wrong keys, wrong value types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Law {
    Shape,
    /// At most one effect.
    L1,
    /// Effect ids: `[a-z0-9]{1,16}`, pairwise distinct.
    L2,
    /// Every effect is one of the transition's declared triples.
    L3,
    /// Payloads: JSON objects of at most 1 MiB canonical.
    L4,
    /// `world` is World's: no plan, result, finish output or body may carry it.
    L6,
    /// `result`, `finish` and the effect count agree.
    L7,
}

impl Law {
    pub fn as_str(&self) -> &'static str {
        match self {
            Law::Shape => "shape",
            Law::L1 => "L1",
            Law::L2 => "L2",
            Law::L3 => "L3",
            Law::L4 => "L4",
            Law::L6 => "L6",
            Law::L7 => "L7",
        }
    }
}

impl fmt::Display for Law {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The first rule a plan (or finish output) breaks, and how.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("plan law {law}: {reason}")]
pub struct PlanLawError {
    pub law: Law,
    pub reason: String,
}

fn broken(law: Law, reason: impl Into<String>) -> PlanLawError {
    PlanLawError { law, reason: reason.into() }
}

/// One effect of an admitted plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEffect {
    pub id: String,
    /// Exactly one of the transition's declared triples (L3).
    pub requirement: AccessTriple,
    /// Canonical JSON of the payload object.
    pub payload: Vec<u8>,
}

/// A plan that passed the plan law.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmittedPlan {
    pub effects: Vec<PlannedEffect>,
    pub finish: bool,
    /// Canonical JSON of the result object: present exactly when there are no effects (L7).
    pub result: Option<Vec<u8>>,
    /// Canonical bytes of the whole plan: the plan object's payload; its sha256 is the
    /// `plan` ref of the world block.
    pub canonical: Vec<u8>,
}

/// Admits a plan phase's output under the plan law (§3.5.1), checking in the reference's
/// order so the first violation reported is the reference's.
pub fn admit_plan(raw: &[u8], declared: &[AccessTriple]) -> Result<AdmittedPlan, PlanLawError> {
    let canonical = canonicalize(raw, MAX_PHASE_OUTPUT).map_err(|e| not_json("the plan", &e))?;
    let top = members(&canonical)
        .ok_or_else(|| broken(Law::Shape, format!("the plan must be a JSON object, not {}", kind(&canonical))))?;
    if top.iter().any(|m| m.name == "world") {
        return Err(broken(Law::L6, "the plan has a top-level \"world\" key; World adds the world block itself"));
    }
    closed_keys("the plan", &top, &PLAN_KEYS)?;
    // The key set is exactly PLAN_KEYS and members are sorted, so each is at its index.
    let [effects, finish, plan, result] = [0, 1, 2, 3].map(|i| top.get(i).map_or(&b""[..], |m| m.value));

    if canonical_parts::string(plan).as_deref() != Some(EFFECT_PLAN) {
        return Err(broken(Law::Shape, format!("plan must be the string \"{EFFECT_PLAN}\", not {}", preview(plan))));
    }
    let finish = match finish {
        b"true" => true,
        b"false" => false,
        other => return Err(broken(Law::Shape, format!("finish must be a boolean, not {}", kind(other)))),
    };
    let listed = elements(effects)
        .ok_or_else(|| broken(Law::Shape, format!("effects must be an array, not {}", kind(effects))))?;
    if listed.len() > MAX_EFFECTS {
        return Err(broken(
            Law::L1,
            format!("the plan requests {} effects; at most {MAX_EFFECTS} is allowed", listed.len()),
        ));
    }
    let effects = listed
        .iter()
        .enumerate()
        .map(|(index, raw)| planned_effect(index, raw, declared))
        .collect::<Result<Vec<_>, _>>()?;
    for (index, effect) in effects.iter().enumerate() {
        if effects[..index].iter().any(|earlier| earlier.id == effect.id) {
            return Err(broken(Law::L2, format!("effect id {} is used by more than one effect", effect.id)));
        }
    }

    let result = match result {
        b"null" => None,
        object if object.first() == Some(&b'{') => Some(object.to_vec()),
        other => return Err(broken(Law::L7, format!("result must be null or a JSON object, not {}", kind(other)))),
    };
    match (effects.is_empty(), &result) {
        (true, None) => {
            return Err(broken(
                Law::L7,
                "a plan without effects must carry a result object: it is what the caller receives",
            ));
        }
        (false, Some(_)) => {
            return Err(broken(
                Law::L7,
                "a plan with effects must have a null result: the effect's output or the finish phase makes the body",
            ));
        }
        _ => {}
    }
    if finish && effects.is_empty() {
        return Err(broken(Law::L7, "finish is true but the plan has no effect whose results it could finish"));
    }
    if let Some(result) = &result
        && has_member(result, "world")
    {
        return Err(broken(Law::L6, "the result has a top-level \"world\" key; World adds the world block itself"));
    }
    Ok(AdmittedPlan { effects, finish, result, canonical })
}

/// One element of `effects`, checked in the reference's order: shape, L2 id, L4 object
/// payload, L3 declared triple, L4 payload size.
fn planned_effect(index: usize, raw: &[u8], declared: &[AccessTriple]) -> Result<PlannedEffect, PlanLawError> {
    let what = format!("effects[{index}]");
    let fields =
        members(raw).ok_or_else(|| broken(Law::Shape, format!("{what} must be a JSON object, not {}", kind(raw))))?;
    closed_keys(&what, &fields, &EFFECT_KEYS)?;
    let [cost, effect, id, payload, scope] = [0, 1, 2, 3, 4].map(|i| fields.get(i).map_or(&b""[..], |m| m.value));
    let text = |name: &str, value: &[u8]| {
        canonical_parts::string(value)
            .ok_or_else(|| broken(Law::Shape, format!("{what}.{name} must be a string, not {}", kind(value))))
    };
    let id = text("id", id)?;
    let effect = text("effect", effect)?;
    let scope = text("scope", scope)?;
    let cost = integer(cost).map_err(|reason| broken(Law::Shape, format!("{what}.cost {reason}")))?;

    let id_ok =
        (1..=MAX_EFFECT_ID).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !id_ok {
        return Err(broken(
            Law::L2,
            format!("effect id {id:?} must be 1 to {MAX_EFFECT_ID} characters of a-z and 0-9"),
        ));
    }
    if payload.first() != Some(&b'{') {
        return Err(broken(
            Law::L4,
            format!("the payload of effect {id} must be a JSON object, not {}", kind(payload)),
        ));
    }
    let requirement = AccessTriple { effect, scope, cost };
    if !declared.contains(&requirement) {
        let listed: Vec<String> = declared.iter().map(triple).collect();
        let declares = if listed.is_empty() {
            "declares no effects".to_owned()
        } else {
            format!("declares {}", listed.join(", "))
        };
        return Err(broken(
            Law::L3,
            format!("effect {id} {} is not declared; the transition {declares}", triple(&requirement)),
        ));
    }
    if payload.len() > MAX_PAYLOAD {
        return Err(broken(
            Law::L4,
            format!(
                "the payload of effect {id} is {} canonical bytes; at most {MAX_PAYLOAD} are allowed",
                payload.len()
            ),
        ));
    }
    Ok(PlannedEffect { id, requirement, payload: payload.to_vec() })
}

/// `(effect, scope, cost)`, the way plan-law messages name a triple.
fn triple(access: &AccessTriple) -> String {
    format!("({}, {}, {})", access.effect, access.scope, access.cost)
}

/// A canonical number that is an integer: canonical numbers are plain decimals, so `1.0` is
/// already `1` and an integer has no point. The exact decimal is kept, so a value beyond i64
/// is refused, never rounded.
fn integer(value: &[u8]) -> Result<i64, String> {
    let text = std::str::from_utf8(value).unwrap_or_default();
    let numeric = matches!(value.first(), Some(b'-' | b'0'..=b'9'));
    if !numeric || text.contains('.') {
        return Err(format!("must be an integer, not {}", preview(value)));
    }
    text.parse().map_err(|_| format!("{text} is outside the 64-bit integer range"))
}

/// Requires exactly `expected` (sorted) as the member names of a canonical object.
fn closed_keys(what: &str, found: &[Member<'_>], expected: &[&str]) -> Result<(), PlanLawError> {
    let names: Vec<&str> = found.iter().map(|m| m.name.as_str()).collect();
    if names == expected {
        return Ok(());
    }
    let missing: Vec<&str> = expected.iter().copied().filter(|k| !names.contains(k)).collect();
    let extra: Vec<String> = names.iter().filter(|k| !expected.contains(k)).map(|k| format!("{k:?}")).collect();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!("missing {}", missing.join(", ")));
    }
    if !extra.is_empty() {
        problems.push(format!("unexpected {}", extra.join(", ")));
    }
    Err(broken(
        Law::Shape,
        format!("{what} must have exactly the keys {}; {}", expected.join(", "), problems.join("; ")),
    ))
}

fn not_json(what: &str, error: &CanonicalError) -> PlanLawError {
    broken(Law::Shape, format!("{what} is not canonicalisable JSON: {error}"))
}

/// A short rendering of a canonical value for a message: values can be megabytes.
fn preview(value: &[u8]) -> String {
    const MAX: usize = 64;
    let text = String::from_utf8_lossy(value);
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.into_owned(),
    }
}

/// Admits a finish phase's output under the finish law: canonical JSON (`shape`), an object
/// (L6) without a top-level `effects` or `world` key (L6, checked in sorted order). Applying
/// it to an already admitted output returns the same bytes.
pub fn admit_finish(raw: &[u8]) -> Result<Vec<u8>, PlanLawError> {
    let canonical = canonicalize(raw, MAX_PHASE_OUTPUT).map_err(|e| not_json("the finish output", &e))?;
    let top = members(&canonical)
        .ok_or_else(|| broken(Law::L6, format!("the finish output must be a JSON object, not {}", kind(&canonical))))?;
    for reserved in ["effects", "world"] {
        if top.iter().any(|m| m.name == reserved) {
            return Err(broken(
                Law::L6,
                format!("the finish output has a top-level {reserved:?} key; World adds the world block itself"),
            ));
        }
    }
    Ok(canonical)
}

/// What became of one planned effect, as the finish phase and the world block report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EffectStatus {
    Ok,
    Failed,
    Denied,
    /// Reserved for multi-effect plans (an effect not run because an earlier one did not
    /// succeed); a v1 plan never has one.
    Skipped,
}

impl EffectStatus {
    /// The wire word.
    pub fn as_str(&self) -> &'static str {
        match self {
            EffectStatus::Ok => "ok",
            EffectStatus::Failed => "failed",
            EffectStatus::Denied => "denied",
            EffectStatus::Skipped => "skipped",
        }
    }

    pub fn parse(word: &str) -> Option<EffectStatus> {
        [EffectStatus::Ok, EffectStatus::Failed, EffectStatus::Denied, EffectStatus::Skipped]
            .into_iter()
            .find(|status| status.as_str() == word)
    }
}

impl fmt::Display for EffectStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One dispatched effect: its plan id, effect name, status, durable record and, when it
/// succeeded, the handler's output (JSON; canonicalised wherever it is used).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectResult {
    pub id: String,
    pub effect: String,
    pub status: EffectStatus,
    pub record: HashRef,
    /// The handler's output: what it answered for an `ok` effect, its reason
    /// (`{"ok":false,"refused":…}`) for a `failed` one; none for a denied effect.
    pub output: Option<Vec<u8>>,
    /// Why a `denied` effect was denied, so the finish phase can say so.
    pub denial: Option<DenialDetail>,
}

/// A denial as the finish phase reads it: the record's label (`denied:budget`, …), the
/// chosen grant's budget and what this episode has spent of it, and the episode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DenialDetail {
    pub reason: String,
    pub budget: i64,
    pub spent: i64,
    pub episode: String,
}

impl DenialDetail {
    /// Canonical JSON of `{budget, episode, reason, spent}`.
    pub fn encode(&self) -> Vec<u8> {
        crate::canonical::canonical_value(&serde_json::json!({
            "budget": self.budget,
            "episode": self.episode,
            "reason": self.reason,
            "spent": self.spent,
        }))
    }
}

/// Why an effectful call's output (or its finish input) could not be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ComposeError {
    /// The finish output or the body broke the finish law or L6.
    #[error(transparent)]
    Law(#[from] PlanLawError),
    #[error("the output of effect {id} is not JSON: {reason}")]
    OutputNotJson { id: String, reason: String },
    #[error("the output of effect {id} is not a JSON object: it is {found}")]
    OutputNotObject { id: String, found: &'static str },
    #[error("the composed output is {len} bytes; at most {max} are allowed")]
    TooLarge { len: usize, max: usize },
    /// The caller passed results or a finish output that do not belong to the plan: a bug in
    /// the caller, reported rather than composed into a misleading world block.
    #[error("output composition: {0}")]
    Mismatch(String),
}

/// The plan phase's input, `{"args":<args>,"phase":"plan"}`. `args` must be the canonical
/// JSON of the caller's arguments (the call's input bytes), so the result is canonical too.
pub fn plan_input(args: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(args.len() + 24);
    out.extend_from_slice(b"{\"args\":");
    out.extend_from_slice(args);
    out.extend_from_slice(b",\"phase\":\"plan\"}");
    out
}

/// The finish phase's input, `{"args":…,"phase":"finish","results":[{"denial"?,"effect","id",
/// "output","record","status"}…]}` in plan order; `output` is the canonical handler output
/// (for a `failed` effect, the handler's reason), `null` when there is none; `denial`
/// (`{budget, episode, reason, spent}`) only for a denied effect. `args` must be canonical,
/// as for [`plan_input`].
/// The list is written even when empty (the reference omits it then, but L7 means a finish
/// phase always follows at least one effect).
pub fn finish_input(args: &[u8], results: &[EffectResult]) -> Result<Vec<u8>, ComposeError> {
    let mut out = Vec::with_capacity(args.len() + 64 + 256 * results.len());
    out.extend_from_slice(b"{\"args\":");
    out.extend_from_slice(args);
    out.extend_from_slice(b",\"phase\":\"finish\",\"results\":[");
    for (index, result) in results.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        let output = match (&result.status, &result.output) {
            (EffectStatus::Ok | EffectStatus::Failed, Some(output)) => canonical_output(&result.id, output)?,
            _ => b"null".to_vec(),
        };
        out.push(b'{');
        if let (EffectStatus::Denied, Some(denial)) = (&result.status, &result.denial) {
            out.extend_from_slice(b"\"denial\":");
            out.extend_from_slice(&denial.encode());
            out.push(b',');
        }
        out.extend_from_slice(b"\"effect\":");
        out.extend_from_slice(&json_string(&result.effect));
        out.extend_from_slice(b",\"id\":");
        out.extend_from_slice(&json_string(&result.id));
        out.extend_from_slice(b",\"output\":");
        out.extend_from_slice(&output);
        out.extend_from_slice(
            format!(",\"record\":\"{}\",\"status\":\"{}\"}}", result.record, result.status).as_bytes(),
        );
    }
    out.extend_from_slice(b"]}");
    Ok(out)
}

/// The world block, `{"effects":[{"id","record","status"}…],"plan":"sha256:…"}` (canonical).
pub fn world_block(plan_ref: &HashRef, results: &[EffectResult]) -> Vec<u8> {
    let mut out = b"{\"effects\":[".to_vec();
    for (index, result) in results.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"id\":");
        out.extend_from_slice(&json_string(&result.id));
        out.extend_from_slice(
            format!(",\"record\":\"{}\",\"status\":\"{}\"}}", result.record, result.status).as_bytes(),
        );
    }
    out.extend_from_slice(format!("],\"plan\":\"{plan_ref}\"}}").as_bytes());
    out
}

/// The caller-visible output of an effectful call (§3.5.2): the body plus the world block,
/// canonical, at most `max_output` bytes.
///
/// The body is the plan's `result` when it has no effects; the finish output when it asks
/// for a finish phase (`finish_output` is that phase's output, raw or already admitted: the
/// finish law is applied here either way); otherwise the handler's output for an `ok` effect
/// (an object), its reason for a `failed` one that has it, and `{}` otherwise. `results` are the plan's effects
/// in plan order.
pub fn compose_output(
    plan: &AdmittedPlan,
    plan_ref: &HashRef,
    results: &[EffectResult],
    finish_output: Option<&[u8]>,
    max_output: usize,
) -> Result<Vec<u8>, ComposeError> {
    check_results(plan, results)?;
    let body = match (plan.effects.is_empty(), plan.finish, finish_output) {
        (true, _, None) => plan
            .result
            .clone()
            .ok_or_else(|| ComposeError::Mismatch("a plan without effects has no result object".into()))?,
        (false, true, Some(output)) => admit_finish(output)?,
        (false, false, None) => match results.first() {
            Some(EffectResult { status: EffectStatus::Failed, id, output: Some(output), .. }) => {
                let canonical = canonical_output(id, output)?;
                if canonical.first() != Some(&b'{') {
                    return Err(ComposeError::OutputNotObject { id: id.clone(), found: kind(&canonical) });
                }
                canonical
            }
            Some(EffectResult { status: EffectStatus::Ok, id, output, .. }) => {
                let output = output
                    .as_deref()
                    .ok_or_else(|| ComposeError::Mismatch(format!("effect {id} succeeded without an output")))?;
                let canonical = canonical_output(id, output)?;
                if canonical.first() != Some(&b'{') {
                    return Err(ComposeError::OutputNotObject { id: id.clone(), found: kind(&canonical) });
                }
                canonical
            }
            _ => b"{}".to_vec(),
        },
        (_, true, None) => {
            return Err(ComposeError::Mismatch(
                "the plan asks for a finish phase and no finish output was given".into(),
            ));
        }
        (_, _, Some(_)) => {
            return Err(ComposeError::Mismatch("a finish output was given for a plan without a finish phase".into()));
        }
    };
    let output = with_world_block(&body, &world_block(plan_ref, results))?;
    if output.len() > max_output {
        return Err(ComposeError::TooLarge { len: output.len(), max: max_output });
    }
    Ok(output)
}

/// The results must be the plan's effects, one each, in plan order.
fn check_results(plan: &AdmittedPlan, results: &[EffectResult]) -> Result<(), ComposeError> {
    let planned: Vec<(&str, &str)> =
        plan.effects.iter().map(|e| (e.id.as_str(), e.requirement.effect.as_str())).collect();
    let reported: Vec<(&str, &str)> = results.iter().map(|r| (r.id.as_str(), r.effect.as_str())).collect();
    if planned != reported {
        return Err(ComposeError::Mismatch(format!(
            "the results {reported:?} are not the plan's effects {planned:?} in plan order"
        )));
    }
    Ok(())
}

/// Inserts `"world":<block>` into the canonical object `body` at its sorted place.
fn with_world_block(body: &[u8], block: &[u8]) -> Result<Vec<u8>, ComposeError> {
    let parts = members(body).ok_or_else(|| ComposeError::Mismatch(format!("the body is {}", kind(body))))?;
    if parts.iter().any(|m| m.name == "world") {
        return Err(
            broken(Law::L6, "the output has a top-level \"world\" key; World adds the world block itself").into()
        );
    }
    // Canonical members sort by the bytes of their decoded names.
    let at = parts.iter().position(|m| m.name.as_bytes() > b"world".as_slice()).unwrap_or(parts.len());
    let world = Member { name: "world".into(), raw_name: b"\"world\"", value: block };
    let mut out = Vec::with_capacity(body.len() + block.len() + 9);
    out.push(b'{');
    for (index, member) in parts[..at].iter().chain([&world]).chain(&parts[at..]).enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(member.raw_name);
        out.push(b':');
        out.extend_from_slice(member.value);
    }
    out.push(b'}');
    Ok(out)
}

/// A handler's output in canonical form.
fn canonical_output(id: &str, output: &[u8]) -> Result<Vec<u8>, ComposeError> {
    canonicalize(output, MAX_PHASE_OUTPUT)
        .map_err(|e| ComposeError::OutputNotJson { id: id.to_owned(), reason: e.to_string() })
}

/// A JSON string in the canonical encoding.
fn json_string(text: &str) -> Vec<u8> {
    crate::canonical::canonical_value(&serde_json::Value::String(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    fn declared() -> Vec<AccessTriple> {
        ["Workspace.Read", "Workspace.Write"]
            .map(|effect| AccessTriple { effect: effect.into(), scope: "worktree".into(), cost: 1 })
            .to_vec()
    }

    fn read(id: &str) -> Value {
        json!({"id": id, "effect": "Workspace.Read", "scope": "worktree", "cost": 1, "payload": {"op": "read", "path": "a"}})
    }

    fn plan(effects: Value, finish: bool, result: Value) -> Value {
        json!({"plan": EFFECT_PLAN, "effects": effects, "finish": finish, "result": result})
    }

    /// `value` with the member at `pointer` set (added when absent).
    fn with(mut value: Value, pointer: &str, replacement: Value) -> Value {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        value.pointer_mut(parent).and_then(Value::as_object_mut).unwrap().insert(key.into(), replacement);
        value
    }

    fn without(mut value: Value, key: &str) -> Value {
        value.as_object_mut().map(|object| object.remove(key));
        value
    }

    fn one(effect: Value) -> Value {
        plan(json!([effect]), false, Value::Null)
    }

    fn bytes(value: &Value) -> Vec<u8> {
        serde_json::to_vec(value).unwrap()
    }

    /// One row per law and reason of §3.5.1, in the law's check order. Each row is refused
    /// with exactly this law and message.
    #[test]
    fn every_plan_law_refuses_with_its_law_and_reason() {
        let big = "x".repeat(MAX_PAYLOAD);
        let rows: Vec<(&str, Vec<u8>, Law, &str)> = vec![
            ("not json", b"{\"plan\":".to_vec(), Law::Shape, "the plan is not canonicalisable JSON: canonical JSON: unexpected end of input at byte 8; expected a JSON value"),
            ("over 4 MiB raw", vec![b' '; MAX_PHASE_OUTPUT + 1], Law::Shape, "the plan is not canonicalisable JSON: canonical JSON: input is 4194305 bytes; at most 4194304 are allowed here"),
            ("duplicate member", b"{\"plan\":1,\"plan\":2}".to_vec(), Law::Shape, "the plan is not canonicalisable JSON: canonical JSON: duplicate object member name \"plan\" at byte 10"),
            ("not an object", b"[]".to_vec(), Law::Shape, "the plan must be a JSON object, not an array"),
            ("world before the key set", bytes(&json!({"world": {}})), Law::L6, "the plan has a top-level \"world\" key; World adds the world block itself"),
            ("world beside the keys", bytes(&with(plan(json!([]), false, json!({})), "/world", json!(1))), Law::L6, "the plan has a top-level \"world\" key; World adds the world block itself"),
            ("missing key", bytes(&without(plan(json!([]), false, json!({})), "result")), Law::Shape, "the plan must have exactly the keys effects, finish, plan, result; missing result"),
            ("extra key", bytes(&json!({"plan": EFFECT_PLAN, "effects": [], "finish": false, "result": {}, "note": 1})), Law::Shape, "the plan must have exactly the keys effects, finish, plan, result; unexpected \"note\""),
            ("wrong plan version", bytes(&with(plan(json!([]), false, json!({})), "/plan", json!("world/effect-plan/v2"))), Law::Shape, "plan must be the string \"world/effect-plan/v1\", not \"world/effect-plan/v2\""),
            ("plan not a string", bytes(&with(plan(json!([]), false, json!({})), "/plan", json!(1))), Law::Shape, "plan must be the string \"world/effect-plan/v1\", not 1"),
            ("finish not a boolean", bytes(&with(plan(json!([]), false, json!({})), "/finish", json!("yes"))), Law::Shape, "finish must be a boolean, not a string"),
            ("effects not an array", bytes(&with(plan(json!([]), false, json!({})), "/effects", json!({}))), Law::Shape, "effects must be an array, not an object"),
            ("L1 two effects", bytes(&plan(json!([read("a"), read("b")]), false, Value::Null)), Law::L1, "the plan requests 2 effects; at most 1 is allowed"),
            ("L1 before the effects' shape", bytes(&plan(json!([1, 2]), false, Value::Null)), Law::L1, "the plan requests 2 effects; at most 1 is allowed"),
            ("effect not an object", bytes(&plan(json!(["e1"]), false, Value::Null)), Law::Shape, "effects[0] must be a JSON object, not a string"),
            ("effect missing a key", bytes(&one(without(read("e1"), "scope"))), Law::Shape, "effects[0] must have exactly the keys cost, effect, id, payload, scope; missing scope"),
            ("effect with an extra key", bytes(&one(with(read("e1"), "/after", json!("e0")))), Law::Shape, "effects[0] must have exactly the keys cost, effect, id, payload, scope; unexpected \"after\""),
            ("id not a string", bytes(&one(with(read("e1"), "/id", json!(1)))), Law::Shape, "effects[0].id must be a string, not a number"),
            ("effect not a string", bytes(&one(with(read("e1"), "/effect", Value::Null))), Law::Shape, "effects[0].effect must be a string, not null"),
            ("scope not a string", bytes(&one(with(read("e1"), "/scope", json!(["worktree"])))), Law::Shape, "effects[0].scope must be a string, not an array"),
            ("cost a fraction", b"{\"plan\":\"world/effect-plan/v1\",\"effects\":[{\"id\":\"e1\",\"effect\":\"Workspace.Read\",\"scope\":\"worktree\",\"cost\":1.5,\"payload\":{}}],\"finish\":false,\"result\":null}".to_vec(), Law::Shape, "effects[0].cost must be an integer, not 1.5"),
            ("cost a string", bytes(&one(with(read("e1"), "/cost", json!("1")))), Law::Shape, "effects[0].cost must be an integer, not \"1\""),
            ("cost beyond i64", b"{\"plan\":\"world/effect-plan/v1\",\"effects\":[{\"id\":\"e1\",\"effect\":\"Workspace.Read\",\"scope\":\"worktree\",\"cost\":1e19,\"payload\":{}}],\"finish\":false,\"result\":null}".to_vec(), Law::Shape, "effects[0].cost 10000000000000000000 is outside the 64-bit integer range"),
            ("L2 upper case id", bytes(&one(read("E1"))), Law::L2, "effect id \"E1\" must be 1 to 16 characters of a-z and 0-9"),
            ("L2 empty id", bytes(&one(read(""))), Law::L2, "effect id \"\" must be 1 to 16 characters of a-z and 0-9"),
            ("L2 id of 17", bytes(&one(read("abcdefghijklmnopq"))), Law::L2, "effect id \"abcdefghijklmnopq\" must be 1 to 16 characters of a-z and 0-9"),
            ("L2 id with a dash", bytes(&one(read("e-1"))), Law::L2, "effect id \"e-1\" must be 1 to 16 characters of a-z and 0-9"),
            ("L2 before L4", bytes(&one(with(read("E1"), "/payload", json!([])))), Law::L2, "effect id \"E1\" must be 1 to 16 characters of a-z and 0-9"),
            ("L4 payload not an object", bytes(&one(with(read("e1"), "/payload", json!("read a")))), Law::L4, "the payload of effect e1 must be a JSON object, not a string"),
            ("L4 object before L3", bytes(&one(with(with(read("e1"), "/payload", json!([])), "/cost", json!(2)))), Law::L4, "the payload of effect e1 must be a JSON object, not an array"),
            ("L3 undeclared cost", bytes(&one(with(read("e1"), "/cost", json!(2)))), Law::L3, "effect e1 (Workspace.Read, worktree, 2) is not declared; the transition declares (Workspace.Read, worktree, 1), (Workspace.Write, worktree, 1)"),
            ("L3 undeclared scope", bytes(&one(with(read("e1"), "/scope", json!("repo")))), Law::L3, "effect e1 (Workspace.Read, repo, 1) is not declared; the transition declares (Workspace.Read, worktree, 1), (Workspace.Write, worktree, 1)"),
            ("L3 before L4 size", bytes(&one(with(with(read("e1"), "/cost", json!(0)), "/payload", json!({"text": big})))), Law::L3, "effect e1 (Workspace.Read, worktree, 0) is not declared; the transition declares (Workspace.Read, worktree, 1), (Workspace.Write, worktree, 1)"),
            ("L4 payload over 1 MiB", bytes(&one(with(read("e1"), "/payload", json!({"text": big})))), Law::L4, "the payload of effect e1 is 1048587 canonical bytes; at most 1048576 are allowed"),
            ("L7 result not null or object", bytes(&plan(json!([]), false, json!("refused"))), Law::L7, "result must be null or a JSON object, not a string"),
            ("L7 no effects and no result", bytes(&plan(json!([]), false, Value::Null)), Law::L7, "a plan without effects must carry a result object: it is what the caller receives"),
            ("L7 effects and a result", bytes(&plan(json!([read("e1")]), false, json!({}))), Law::L7, "a plan with effects must have a null result: the effect's output or the finish phase makes the body"),
            ("L7 finish without effects", bytes(&plan(json!([]), true, json!({}))), Law::L7, "finish is true but the plan has no effect whose results it could finish"),
            ("L6 world in the result", bytes(&plan(json!([]), false, json!({"ok": false, "world": 1}))), Law::L6, "the result has a top-level \"world\" key; World adds the world block itself"),
        ];
        for (name, raw, law, reason) in rows {
            let error = admit_plan(&raw, &declared()).expect_err(name);
            assert_eq!((error.law, error.reason.as_str()), (law, reason), "{name}");
            assert_eq!(error.to_string(), format!("plan law {law}: {reason}"), "{name}");
        }
    }

    #[test]
    fn a_transition_without_declared_effects_is_told_so() {
        let error = admit_plan(&bytes(&one(read("e1"))), &[]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "plan law L3: effect e1 (Workspace.Read, worktree, 1) is not declared; the transition declares no effects"
        );
    }

    #[test]
    fn an_admitted_plan_keeps_canonical_bytes_of_the_plan_its_payload_and_its_result() {
        let raw = br#" { "result" : null, "plan" : "world/effect-plan/v1", "finish" : true,
            "effects" : [ { "payload" : { "path" : "a", "op" : "read" }, "cost" : 1.0, "scope" : "worktree",
            "id" : "e1", "effect" : "Workspace.Read" } ] } "#;
        let plan = admit_plan(raw, &declared()).unwrap();
        assert_eq!(
            String::from_utf8(plan.canonical).unwrap(),
            r#"{"effects":[{"cost":1,"effect":"Workspace.Read","id":"e1","payload":{"op":"read","path":"a"},"scope":"worktree"}],"finish":true,"plan":"world/effect-plan/v1","result":null}"#
        );
        assert!(plan.finish);
        assert_eq!(plan.result, None);
        assert_eq!(
            plan.effects,
            vec![PlannedEffect {
                id: "e1".into(),
                requirement: declared()[0].clone(),
                payload: br#"{"op":"read","path":"a"}"#.to_vec(),
            }]
        );

        let refusal = admit_plan(
            br#"{"effects":[],"finish":false,"plan":"world/effect-plan/v1","result":{"ok":false, "why":"no"}}"#,
            &[],
        )
        .unwrap();
        assert_eq!(refusal.effects, Vec::new());
        assert_eq!(refusal.result.as_deref(), Some(&br#"{"ok":false,"why":"no"}"#[..]));
    }

    #[test]
    fn a_payload_at_the_size_limit_and_deeply_nested_is_admitted() {
        // {"t":"…"} is 8 bytes around the text.
        let exact = one(with(read("e1"), "/payload", json!({"t": "x".repeat(MAX_PAYLOAD - 8)})));
        assert_eq!(admit_plan(&bytes(&exact), &declared()).unwrap().effects[0].payload.len(), MAX_PAYLOAD);
        // Deeper than serde_json's limit of 128 for a parsed Value, within the canonical parser's 500.
        let deep = format!("{}1{}", "[".repeat(400), "]".repeat(400));
        let raw = format!(
            r#"{{"effects":[{{"cost":1,"effect":"Workspace.Read","id":"e1","payload":{{"d":{deep}}},"scope":"worktree"}}],"finish":false,"plan":"world/effect-plan/v1","result":null}}"#
        );
        assert!(admit_plan(raw.as_bytes(), &declared()).is_ok());
    }

    #[test]
    fn the_finish_law_refuses_with_its_law_and_reason() {
        let rows: Vec<(&str, &[u8], Law, &str)> = vec![
            (
                "not json",
                b"{",
                Law::Shape,
                "the finish output is not canonicalisable JSON: canonical JSON: unexpected end of input at byte 1; expected a member name string",
            ),
            ("not an object", b"[1]", Law::L6, "the finish output must be a JSON object, not an array"),
            ("a string", b"\"done\"", Law::L6, "the finish output must be a JSON object, not a string"),
            (
                "effects key",
                br#"{"effects":[]}"#,
                Law::L6,
                "the finish output has a top-level \"effects\" key; World adds the world block itself",
            ),
            (
                "world key",
                br#"{"world":{}}"#,
                Law::L6,
                "the finish output has a top-level \"world\" key; World adds the world block itself",
            ),
            (
                "both, effects first",
                br#"{"world":1,"effects":1}"#,
                Law::L6,
                "the finish output has a top-level \"effects\" key; World adds the world block itself",
            ),
        ];
        for (name, raw, law, reason) in rows {
            let error = admit_finish(raw).expect_err(name);
            assert_eq!((error.law, error.reason.as_str()), (law, reason), "{name}");
        }
    }

    #[test]
    fn an_admitted_finish_output_is_canonical_and_admitting_it_again_changes_nothing() {
        let admitted =
            admit_finish(br#" { "summary" : "read 1.50 lines", "n" : 1.50, "nested": {"world": 1} } "#).unwrap();
        assert_eq!(admitted, br#"{"n":1.5,"nested":{"world":1},"summary":"read 1.50 lines"}"#);
        assert_eq!(admit_finish(&admitted).unwrap(), admitted);
    }

    fn record(name: &str) -> HashRef {
        HashRef::of(name.as_bytes())
    }

    fn result(id: &str, status: EffectStatus, output: Option<&str>) -> EffectResult {
        EffectResult {
            id: id.into(),
            effect: "Workspace.Read".into(),
            status,
            record: record(id),
            output: output.map(|o| o.as_bytes().to_vec()),
            denial: None,
        }
    }

    #[test]
    fn the_phase_inputs_are_canonical_calling_convention_v2() {
        let args = br#"{"path":"a"}"#;
        assert_eq!(plan_input(args), br#"{"args":{"path":"a"},"phase":"plan"}"#);
        let results = [result("e1", EffectStatus::Ok, Some(r#"{ "ok": true, "content": "hi\u0021" }"#))];
        let input = finish_input(args, &results).unwrap();
        let expected = format!(
            r#"{{"args":{{"path":"a"}},"phase":"finish","results":[{{"effect":"Workspace.Read","id":"e1","output":{{"content":"hi!","ok":true}},"record":"{}","status":"ok"}}]}}"#,
            record("e1")
        );
        assert_eq!(String::from_utf8(input.clone()).unwrap(), expected);
        assert_eq!(canonicalize(&input, usize::MAX).unwrap(), input);

        for status in [EffectStatus::Denied, EffectStatus::Failed] {
            let input = finish_input(b"{}", &[result("e1", status, None)]).unwrap();
            let expected = format!(
                r#"{{"args":{{}},"phase":"finish","results":[{{"effect":"Workspace.Read","id":"e1","output":null,"record":"{}","status":"{status}"}}]}}"#,
                record("e1")
            );
            assert_eq!(String::from_utf8(input).unwrap(), expected);
        }
    }

    #[test]
    fn a_finish_input_carries_a_failed_effects_reason_and_a_denials_numbers() {
        let failed = result("e1", EffectStatus::Failed, Some(r#"{"refused":"no such file","ok":false}"#));
        let input = finish_input(b"{}", &[failed]).unwrap();
        assert_eq!(
            String::from_utf8(input).unwrap(),
            format!(
                r#"{{"args":{{}},"phase":"finish","results":[{{"effect":"Workspace.Read","id":"e1","output":{{"ok":false,"refused":"no such file"}},"record":"{}","status":"failed"}}]}}"#,
                record("e1")
            )
        );
        let denial = DenialDetail { reason: "denied:budget".into(), budget: 3, spent: 3, episode: "ep1".into() };
        let denied = EffectResult { denial: Some(denial), ..result("e1", EffectStatus::Denied, None) };
        let input = finish_input(b"{}", &[denied]).unwrap();
        assert_eq!(
            String::from_utf8(input.clone()).unwrap(),
            format!(
                r#"{{"args":{{}},"phase":"finish","results":[{{"denial":{{"budget":3,"episode":"ep1","reason":"denied:budget","spent":3}},"effect":"Workspace.Read","id":"e1","output":null,"record":"{}","status":"denied"}}]}}"#,
                record("e1")
            )
        );
        assert_eq!(canonicalize(&input, usize::MAX).unwrap(), input);
    }

    #[test]
    fn a_finish_input_refuses_a_handler_output_that_is_not_json() {
        let error = finish_input(b"{}", &[result("e1", EffectStatus::Ok, Some("{oops"))]).unwrap_err();
        assert!(matches!(&error, ComposeError::OutputNotJson { id, .. } if id == "e1"), "{error}");
        assert!(error.to_string().starts_with("the output of effect e1 is not JSON: canonical JSON:"), "{error}");
    }

    #[test]
    fn effect_statuses_use_their_wire_words() {
        for (status, word) in [
            (EffectStatus::Ok, "ok"),
            (EffectStatus::Failed, "failed"),
            (EffectStatus::Denied, "denied"),
            (EffectStatus::Skipped, "skipped"),
        ] {
            assert_eq!((status.as_str(), status.to_string()), (word, word.to_owned()));
            assert_eq!(EffectStatus::parse(word), Some(status));
        }
        assert_eq!(EffectStatus::parse("OK"), None);
    }

    /// A composition row: name, plan, results, finish output, expected output or message.
    type Composition<'a, P, E> = (&'a str, P, Vec<EffectResult>, Option<&'a [u8]>, E);

    fn admitted(value: Value) -> AdmittedPlan {
        admit_plan(&bytes(&value), &declared()).unwrap()
    }

    #[test]
    fn composition_makes_the_body_and_adds_the_world_block() {
        let plan_ref = HashRef::of(b"plan");
        let r = record("e1");
        let block = |status: &str| {
            format!(r#"{{"effects":[{{"id":"e1","record":"{r}","status":"{status}"}}],"plan":"{plan_ref}"}}"#)
        };
        let rows: Vec<Composition<'_, AdmittedPlan, String>> = vec![
            (
                "zero effects: the plan's result",
                admitted(plan(json!([]), false, json!({"ok": false, "refused": "no"}))),
                vec![],
                None,
                format!(r#"{{"ok":false,"refused":"no","world":{{"effects":[],"plan":"{plan_ref}"}}}}"#),
            ),
            (
                "ok, no finish: the handler's output, canonicalised",
                admitted(one(read("e1"))),
                vec![result("e1", EffectStatus::Ok, Some(r#"{"tool":"t", "ok":true, "content":"a"}"#))],
                None,
                format!(r#"{{"content":"a","ok":true,"tool":"t","world":{}}}"#, block("ok")),
            ),
            (
                "ok, no finish: world sorts among the output's keys",
                admitted(one(read("e1"))),
                vec![result("e1", EffectStatus::Ok, Some(r#"{"zeta":1,"é":2,"a\"b":3,"worlds":4}"#))],
                None,
                format!(r#"{{"a\"b":3,"world":{},"worlds":4,"zeta":1,"é":2}}"#, block("ok")),
            ),
            (
                "denied, no finish: an empty body",
                admitted(one(read("e1"))),
                vec![result("e1", EffectStatus::Denied, None)],
                None,
                format!(r#"{{"world":{}}}"#, block("denied")),
            ),
            (
                "failed, no finish: an empty body",
                admitted(one(read("e1"))),
                vec![result("e1", EffectStatus::Failed, None)],
                None,
                format!(r#"{{"world":{}}}"#, block("failed")),
            ),
            (
                "failed with the handler's reason, no finish: the reason is the body",
                admitted(one(read("e1"))),
                vec![result("e1", EffectStatus::Failed, Some(r#"{"refused":"gone","ok":false}"#))],
                None,
                format!(r#"{{"ok":false,"refused":"gone","world":{}}}"#, block("failed")),
            ),
            (
                "finish: the finish output, law-checked and canonicalised",
                admitted(plan(json!([read("e1")]), true, Value::Null)),
                vec![result("e1", EffectStatus::Ok, Some(r#"{"content":"a"}"#))],
                Some(br#"{ "summary": "1 line" }"#),
                format!(r#"{{"summary":"1 line","world":{}}}"#, block("ok")),
            ),
            (
                "finish after a denial",
                admitted(plan(json!([read("e1")]), true, Value::Null)),
                vec![result("e1", EffectStatus::Denied, None)],
                Some(br#"{"ok":false}"#),
                format!(r#"{{"ok":false,"world":{}}}"#, block("denied")),
            ),
        ];
        for (name, plan, results, finish, expected) in rows {
            let output = compose_output(&plan, &plan_ref, &results, finish, 1 << 20).expect(name);
            assert_eq!(String::from_utf8(output.clone()).unwrap(), expected, "{name}");
            assert_eq!(canonicalize(&output, usize::MAX).unwrap(), output, "{name}: canonical");
        }
    }

    #[test]
    fn composition_refuses_with_its_reason() {
        let plan_ref = HashRef::of(b"plan");
        let read_plan = admitted(one(read("e1")));
        let finish_plan = admitted(plan(json!([read("e1")]), true, Value::Null));
        let ok = |output: &str| vec![result("e1", EffectStatus::Ok, Some(output))];
        let rows: Vec<Composition<'_, &AdmittedPlan, &str>> = vec![
            (
                "handler output an array",
                &read_plan,
                ok("[1]"),
                None,
                "the output of effect e1 is not a JSON object: it is an array",
            ),
            (
                "handler output not JSON",
                &read_plan,
                ok("{"),
                None,
                "the output of effect e1 is not JSON: canonical JSON: unexpected end of input at byte 1; expected a member name string",
            ),
            (
                "handler output with world (L6)",
                &read_plan,
                ok(r#"{"world":1}"#),
                None,
                "plan law L6: the output has a top-level \"world\" key; World adds the world block itself",
            ),
            (
                "finish output with world (L6)",
                &finish_plan,
                ok("{}"),
                Some(br#"{"world":1}"#),
                "plan law L6: the finish output has a top-level \"world\" key; World adds the world block itself",
            ),
            (
                "finish output with effects (L6)",
                &finish_plan,
                ok("{}"),
                Some(br#"{"effects":[]}"#),
                "plan law L6: the finish output has a top-level \"effects\" key; World adds the world block itself",
            ),
            (
                "finish output not an object (L6)",
                &finish_plan,
                ok("{}"),
                Some(b"true"),
                "plan law L6: the finish output must be a JSON object, not a boolean",
            ),
            (
                "finish output not JSON (shape)",
                &finish_plan,
                ok("{}"),
                Some(b"nope"),
                "plan law shape: the finish output is not canonicalisable JSON: canonical JSON: unexpected \"o\" at byte 1; expected null",
            ),
            (
                "no finish output for a finish plan",
                &finish_plan,
                ok("{}"),
                None,
                "output composition: the plan asks for a finish phase and no finish output was given",
            ),
            (
                "a finish output without a finish phase",
                &read_plan,
                ok("{}"),
                Some(b"{}"),
                "output composition: a finish output was given for a plan without a finish phase",
            ),
            (
                "results missing",
                &read_plan,
                vec![],
                None,
                "output composition: the results [] are not the plan's effects [(\"e1\", \"Workspace.Read\")] in plan order",
            ),
            (
                "results of another effect",
                &read_plan,
                vec![result("e2", EffectStatus::Ok, Some("{}"))],
                None,
                "output composition: the results [(\"e2\", \"Workspace.Read\")] are not the plan's effects [(\"e1\", \"Workspace.Read\")] in plan order",
            ),
            (
                "ok without an output",
                &read_plan,
                vec![result("e1", EffectStatus::Ok, None)],
                None,
                "output composition: effect e1 succeeded without an output",
            ),
        ];
        for (name, plan, results, finish, message) in rows {
            let error = compose_output(plan, &plan_ref, &results, finish, 1 << 20).expect_err(name);
            assert_eq!(error.to_string(), message, "{name}");
        }
    }

    #[test]
    fn the_composed_output_is_capped_at_the_output_limit() {
        let plan_ref = HashRef::of(b"plan");
        let plan = admitted(plan(json!([]), false, json!({"ok": true})));
        let exact = compose_output(&plan, &plan_ref, &[], None, usize::MAX).unwrap().len();
        assert_eq!(compose_output(&plan, &plan_ref, &[], None, exact).unwrap().len(), exact);
        let error = compose_output(&plan, &plan_ref, &[], None, exact - 1).unwrap_err();
        assert_eq!(error, ComposeError::TooLarge { len: exact, max: exact - 1 });
        assert_eq!(
            error.to_string(),
            format!("the composed output is {exact} bytes; at most {} are allowed", exact - 1)
        );
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzzing::config(256))]

        /// Whatever the body's keys, adding the world block gives exactly the canonical
        /// encoding of the body with a `world` member.
        #[test]
        fn the_world_block_lands_where_canonical_order_puts_it(
            body in proptest::collection::btree_map("(wor|worlds|worle|x\"|[a-zé]{0,6}|[A-Z]{1,3})", 0u8..3, 0..8)
        ) {
            let mut value: serde_json::Map<String, Value> = body.into_iter().map(|(k, v)| (k, json!(v))).collect();
            value.remove("world");
            let text = crate::canonical::canonical_value(&Value::Object(value.clone()));
            let composed = with_world_block(&text, br#"{"plan":"p"}"#).unwrap();
            value.insert("world".into(), json!({"plan": "p"}));
            proptest::prop_assert_eq!(composed, crate::canonical::canonical_value(&Value::Object(value)));
        }
    }

    /// One way to break a plan, or none. Each names the law the refusal must cite.
    #[derive(Clone, Copy, Debug)]
    enum Breach {
        None,
        NotAnObject,
        WorldOnTop,
        MissingKey,
        ExtraKey,
        WrongVersion,
        FinishNotBoolean,
        EffectsNotArray,
        TwoEffects,
        EffectNotObject,
        EffectKeys,
        IdNotString,
        CostFraction,
        CostBeyondI64,
        BadId,
        PayloadNotObject,
        Undeclared,
        PayloadTooLarge,
        ResultNotObject,
        NoResult,
        ResultWithEffects,
        FinishWithoutEffects,
        WorldInResult,
    }

    impl Breach {
        const ALL: [Breach; 23] = [
            Breach::None,
            Breach::NotAnObject,
            Breach::WorldOnTop,
            Breach::MissingKey,
            Breach::ExtraKey,
            Breach::WrongVersion,
            Breach::FinishNotBoolean,
            Breach::EffectsNotArray,
            Breach::TwoEffects,
            Breach::EffectNotObject,
            Breach::EffectKeys,
            Breach::IdNotString,
            Breach::CostFraction,
            Breach::CostBeyondI64,
            Breach::BadId,
            Breach::PayloadNotObject,
            Breach::Undeclared,
            Breach::PayloadTooLarge,
            Breach::ResultNotObject,
            Breach::NoResult,
            Breach::ResultWithEffects,
            Breach::FinishWithoutEffects,
            Breach::WorldInResult,
        ];

        fn law(self) -> Option<Law> {
            Some(match self {
                Breach::None => return None,
                Breach::NotAnObject
                | Breach::MissingKey
                | Breach::ExtraKey
                | Breach::WrongVersion
                | Breach::FinishNotBoolean
                | Breach::EffectsNotArray
                | Breach::EffectNotObject
                | Breach::EffectKeys
                | Breach::IdNotString
                | Breach::CostFraction
                | Breach::CostBeyondI64 => Law::Shape,
                Breach::TwoEffects => Law::L1,
                Breach::BadId => Law::L2,
                Breach::Undeclared => Law::L3,
                Breach::PayloadNotObject | Breach::PayloadTooLarge => Law::L4,
                Breach::WorldOnTop | Breach::WorldInResult => Law::L6,
                Breach::ResultNotObject
                | Breach::NoResult
                | Breach::ResultWithEffects
                | Breach::FinishWithoutEffects => Law::L7,
            })
        }

        /// Whether the breach is about an effect (so the plan gets one) or about a plan
        /// without effects (so it gets none).
        fn effects(self) -> Option<bool> {
            match self {
                Breach::EffectNotObject
                | Breach::EffectKeys
                | Breach::IdNotString
                | Breach::CostFraction
                | Breach::CostBeyondI64
                | Breach::BadId
                | Breach::PayloadNotObject
                | Breach::Undeclared
                | Breach::PayloadTooLarge
                | Breach::ResultWithEffects => Some(true),
                Breach::NoResult | Breach::FinishWithoutEffects | Breach::WorldInResult => Some(false),
                _ => None,
            }
        }
    }

    /// A lawful plan's parts: the declared triples, maybe one effect of them, and the body.
    #[derive(Clone, Debug)]
    struct Lawful {
        declared: Vec<AccessTriple>,
        effect: Option<(String, usize, Value)>,
        finish: bool,
        result: Value,
    }

    fn object() -> impl Strategy<Value = Value> {
        prop::collection::btree_map("[a-z]{1,6}", crate::fuzzing::json_value(), 0..4)
            .prop_map(|members| Value::Object(members.into_iter().collect()))
    }

    fn lawful() -> impl Strategy<Value = Lawful> {
        let triple = (
            prop::sample::select(vec!["Workspace.Read", "Workspace.Write", "Ailang.Run"]),
            prop::sample::select(vec!["worktree", "repo"]),
            0i64..4,
        )
            .prop_map(|(effect, scope, cost)| AccessTriple {
                effect: effect.into(),
                scope: scope.into(),
                cost,
            });
        (
            prop::collection::vec(triple, 1..4),
            prop::option::of(("[a-z0-9]{1,16}", any::<prop::sample::Index>(), object())),
            any::<bool>(),
            object(),
        )
            .prop_map(|(declared, effect, finish, result)| {
                let effect = effect.map(|(id, index, payload)| (id, index.index(declared.len()), payload));
                let result = result
                    .as_object()
                    .map(|o| o.iter().filter(|(k, _)| *k != "world"))
                    .map_or(Value::Null, |members| {
                        Value::Object(members.map(|(k, v)| (k.clone(), v.clone())).collect())
                    });
                Lawful { finish: finish && effect.is_some(), declared, effect, result }
            })
    }

    fn effect_value(lawful: &Lawful) -> Value {
        let (id, index, payload) = lawful.effect.clone().unwrap_or_else(|| ("e1".into(), 0, json!({})));
        let triple = &lawful.declared[index];
        json!({"id": id, "effect": triple.effect, "scope": triple.scope, "cost": triple.cost, "payload": payload})
    }

    /// The plan `lawful` describes, broken by `breach`.
    fn breached(lawful: &Lawful, breach: Breach, pick: usize) -> Value {
        let mut lawful = lawful.clone();
        match breach.effects() {
            Some(true) if lawful.effect.is_none() => lawful.effect = Some(("e1".into(), 0, json!({}))),
            Some(false) => {
                lawful.effect = None;
                lawful.finish = false;
            }
            _ => {}
        }
        let effects = if lawful.effect.is_some() { vec![effect_value(&lawful)] } else { vec![] };
        let result = if lawful.effect.is_some() { Value::Null } else { lawful.result.clone() };
        let mut value = plan(Value::Array(effects), lawful.finish, result);
        let choose = |options: Vec<Value>| options[pick % options.len()].clone();
        match breach {
            Breach::None => {}
            Breach::NotAnObject => value = choose(vec![json!([value]), json!("plan"), json!(1), Value::Null]),
            Breach::WorldOnTop => value = with(value, "/world", choose(vec![json!({}), json!(null)])),
            Breach::MissingKey => value = without(value, ["effects", "finish", "plan", "result"][pick % 4]),
            Breach::ExtraKey => value = with(value, "/note", json!(1)),
            Breach::WrongVersion => value = with(value, "/plan", choose(vec![json!("world/effect-plan/v2"), json!(1)])),
            Breach::FinishNotBoolean => {
                value = with(value, "/finish", choose(vec![json!("true"), json!(1), Value::Null]))
            }
            Breach::EffectsNotArray => {
                value = with(value, "/effects", choose(vec![json!({}), json!("e1"), Value::Null]))
            }
            Breach::TwoEffects => {
                let second = choose(vec![effect_value(&lawful), json!(1)]);
                value["effects"].as_array_mut().unwrap().extend([effect_value(&lawful), second]);
                value["effects"].as_array_mut().unwrap().truncate(2);
                value["result"] = Value::Null;
            }
            Breach::EffectNotObject => value["effects"][0] = choose(vec![json!("e1"), json!([]), json!(null)]),
            Breach::EffectKeys => {
                value["effects"][0] = if pick.is_multiple_of(2) {
                    without(value["effects"][0].clone(), ["cost", "effect", "id", "payload", "scope"][pick % 5])
                } else {
                    with(value["effects"][0].clone(), "/after", json!("e0"))
                }
            }
            Breach::IdNotString => value["effects"][0]["id"] = choose(vec![json!(1), json!(null), json!(["e1"])]),
            Breach::CostFraction => value["effects"][0]["cost"] = json!(1.5),
            Breach::CostBeyondI64 => value["effects"][0]["cost"] = json!(u64::MAX),
            Breach::BadId => {
                value["effects"][0]["id"] =
                    choose(vec![json!(""), json!("E1"), json!("e-1"), json!("é"), json!("a".repeat(17))])
            }
            Breach::PayloadNotObject => {
                value["effects"][0]["payload"] = choose(vec![json!([]), json!("read"), json!(null)])
            }
            Breach::Undeclared => {
                if pick.is_multiple_of(2) {
                    value["effects"][0]["cost"] = json!(1000 + pick as i64);
                } else {
                    value["effects"][0]["effect"] = json!("Net.Fetch");
                }
            }
            Breach::PayloadTooLarge => value["effects"][0]["payload"] = json!({"t": "x".repeat(MAX_PAYLOAD)}),
            Breach::ResultNotObject => {
                value["result"] = choose(vec![json!("refused"), json!([]), json!(false), json!(0)])
            }
            Breach::NoResult => value["result"] = Value::Null,
            Breach::ResultWithEffects => value["result"] = json!({}),
            Breach::FinishWithoutEffects => value["finish"] = json!(true),
            Breach::WorldInResult => value["result"]["world"] = json!(1),
        }
        value
    }

    /// What every admitted plan guarantees, whatever it was admitted from.
    fn assert_lawful(plan: &AdmittedPlan, raw: &[u8], declared: &[AccessTriple]) {
        assert_eq!(plan.canonical, canonicalize(raw, MAX_PHASE_OUTPUT).unwrap(), "the plan's bytes are canonical");
        assert!(plan.effects.len() <= MAX_EFFECTS, "L1");
        for effect in &plan.effects {
            assert!((1..=MAX_EFFECT_ID).contains(&effect.id.len()), "L2");
            assert!(effect.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()), "L2");
            assert!(declared.contains(&effect.requirement), "L3");
            assert!(effect.payload.starts_with(b"{") && effect.payload.len() <= MAX_PAYLOAD, "L4");
            assert_eq!(canonicalize(&effect.payload, usize::MAX).unwrap(), effect.payload);
        }
        assert_eq!(plan.result.is_some(), plan.effects.is_empty(), "L7: a result exactly without effects");
        assert!(!plan.finish || !plan.effects.is_empty(), "L7: a finish follows an effect");
        if let Some(result) = &plan.result {
            assert!(result.starts_with(b"{") && !has_member(result, "world"), "L6");
        }
        assert_eq!(admit_plan(&plan.canonical, declared).as_ref(), Ok(plan), "admitting the canonical bytes again");
    }

    proptest::proptest! {
        #![proptest_config(crate::fuzzing::config(512))]

        /// A lawful plan, spelled any way, is admitted; broken one way, it is refused citing
        /// that way's law, with a reason.
        #[test]
        fn each_breach_of_the_plan_law_is_refused_with_its_law(
            lawful in lawful(),
            breach in prop::sample::select(Breach::ALL.to_vec()),
            pick in 0usize..64,
            seed in any::<u64>(),
            spaced in any::<bool>(),
        ) {
            let raw = crate::fuzzing::spelled(&breached(&lawful, breach, pick), seed, spaced);
            match (admit_plan(&raw, &lawful.declared), breach.law()) {
                (Ok(plan), None) => assert_lawful(&plan, &raw, &lawful.declared),
                (Err(error), Some(law)) => {
                    prop_assert_eq!(error.law, law, "{:?}: {}", breach, error);
                    prop_assert!(!error.reason.is_empty());
                    prop_assert_eq!(error.to_string(), format!("plan law {law}: {}", error.reason));
                }
                (outcome, want) => prop_assert!(false, "{:?}: got {:?}, want {:?}", breach, outcome.map(|_| ()), want),
            }
        }

        /// Any JSON at all, or plan-shaped objects of random member types: never a panic, and
        /// whatever is admitted keeps every invariant.
        #[test]
        fn the_plan_law_never_panics_and_admits_only_lawful_plans(
            value in prop_oneof![
                crate::fuzzing::json_value(),
                prop::collection::btree_map(
                    prop::sample::select(vec!["effects", "finish", "plan", "result", "world", "note"]),
                    prop_oneof![crate::fuzzing::json_value(), Just(json!(EFFECT_PLAN)), Just(json!([read("e1")]))],
                    0..6,
                ).prop_map(|members| Value::Object(members.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            ],
            garbage in prop::collection::vec(any::<u8>(), 0..64),
        ) {
            let raw = bytes(&value);
            if let Ok(plan) = admit_plan(&raw, &declared()) {
                assert_lawful(&plan, &raw, &declared());
            }
            if let Ok(plan) = admit_plan(&garbage, &declared()) {
                assert_lawful(&plan, &garbage, &declared());
            }
        }

        /// The finish law: an object without a top-level `effects` or `world` is admitted as
        /// its canonical bytes, idempotently; anything else is refused, naming the law.
        #[test]
        fn the_finish_law_admits_exactly_objects_without_reserved_keys(
            value in crate::fuzzing::json_value(),
            reserved in prop::option::of(prop::sample::select(vec!["effects", "world"])),
            seed in any::<u64>(),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut value = value;
            if let (Some(key), Some(object)) = (reserved, value.as_object_mut()) {
                object.insert(key.to_owned(), json!(1));
            }
            let raw = crate::fuzzing::spelled(&value, seed, true);
            let lawful = value.as_object().is_some_and(|o| !o.contains_key("effects") && !o.contains_key("world"));
            match admit_finish(&raw) {
                Ok(admitted) => {
                    prop_assert!(lawful, "{}", String::from_utf8_lossy(&raw));
                    prop_assert_eq!(&admitted, &crate::canonical::canonical_value(&value));
                    prop_assert_eq!(admit_finish(&admitted), Ok(admitted.clone()));
                }
                Err(error) => {
                    prop_assert!(!lawful, "{}", error);
                    prop_assert_eq!(error.law, Law::L6);
                }
            }
            // Cut short, the same text is not JSON: a shape refusal, never a panic.
            let cut = cut.index(raw.len().max(1));
            if let Err(error) = admit_finish(&raw[..cut]) {
                prop_assert!(matches!(error.law, Law::Shape | Law::L6), "{}", error);
            }
        }
    }

    #[test]
    fn law_names_are_the_reference_words() {
        let words: Vec<String> =
            [Law::Shape, Law::L1, Law::L2, Law::L3, Law::L4, Law::L6, Law::L7].iter().map(Law::to_string).collect();
        assert_eq!(words, ["shape", "L1", "L2", "L3", "L4", "L6", "L7"]);
    }
}
