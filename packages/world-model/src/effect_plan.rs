//! The effect plan law, the finish law and output composition (reference-core §3.5): what
//! an effectful transition's plan may say, and how its caller-visible output is made.
//!
//! Every JSON here is canonical: the plan and finish outputs are canonicalised before any
//! check, the phase inputs and the composed output are built from canonical pieces and
//! canonicalised again, so the bytes hashed into the log never depend on how a transition
//! spaced or ordered its output.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::value::RawValue;

use crate::canonical::{canonical_value, canonicalize};
use crate::grant::AccessTriple;
use crate::hashref::HashRef;

pub const EFFECT_PLAN: &str = "world/effect-plan/v1";
/// Largest raw phase output the laws read.
pub const MAX_PHASE_OUTPUT: usize = 4 * 1024 * 1024;
/// Largest canonical effect payload.
pub const MAX_PAYLOAD: usize = 1024 * 1024;
/// Effects one plan may request (L1).
pub const MAX_EFFECTS: usize = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Law {
    Shape,
    L1,
    L2,
    L3,
    L4,
    L6,
    L7,
}

impl fmt::Display for Law {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Law::Shape => "shape",
            Law::L1 => "L1",
            Law::L2 => "L2",
            Law::L3 => "L3",
            Law::L4 => "L4",
            Law::L6 => "L6",
            Law::L7 => "L7",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("plan law {law}: {reason}")]
pub struct PlanLawError {
    pub law: Law,
    pub reason: String,
}

fn broken(law: Law, reason: impl Into<String>) -> PlanLawError {
    PlanLawError { law, reason: reason.into() }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEffect {
    pub id: String,
    pub requirement: AccessTriple,
    /// Canonical JSON of the payload object.
    pub payload: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmittedPlan {
    pub effects: Vec<PlannedEffect>,
    pub finish: bool,
    /// Canonical JSON of the result object (zero-effect plans only).
    pub result: Option<Vec<u8>>,
    /// Canonical bytes of the whole plan: the plan object's payload.
    pub canonical: Vec<u8>,
}

type Members = BTreeMap<String, Box<RawValue>>;

/// The canonical form of `raw` and its top-level members, when it is an object.
fn object(raw: &[u8]) -> Result<(Vec<u8>, Option<Members>), PlanLawError> {
    let canonical = canonicalize(raw, MAX_PHASE_OUTPUT).map_err(|e| broken(Law::Shape, e.to_string()))?;
    let members = if canonical.first() == Some(&b'{') {
        Some(serde_json::from_slice::<Members>(&canonical).map_err(|e| broken(Law::Shape, e.to_string()))?)
    } else {
        None
    };
    Ok((canonical, members))
}

fn text(raw: &RawValue) -> &str {
    raw.get()
}

fn string(raw: &RawValue) -> Option<String> {
    serde_json::from_str::<String>(raw.get()).ok()
}

/// Admits a plan phase's output under the plan law, or says which law it breaks.
pub fn admit_plan(raw: &[u8], declared: &[AccessTriple]) -> Result<AdmittedPlan, PlanLawError> {
    let (canonical, members) = object(raw)?;
    let members = members.ok_or_else(|| broken(Law::Shape, "the plan is not a JSON object"))?;
    if members.contains_key("world") {
        return Err(broken(Law::L6, "the plan must not carry a world key; World adds it"));
    }
    let keys: Vec<&str> = members.keys().map(String::as_str).collect();
    if keys != ["effects", "finish", "plan", "result"] {
        return Err(broken(
            Law::Shape,
            format!("the plan's keys must be exactly effects, finish, plan, result; it has {}", keys.join(", ")),
        ));
    }
    let member = |key: &str| members.get(key).map(|raw| raw.as_ref());
    if member("plan").and_then(string).as_deref() != Some(EFFECT_PLAN) {
        return Err(broken(Law::Shape, format!("plan must be the string \"{EFFECT_PLAN}\"")));
    }
    let finish = match member("finish").map(text) {
        Some("true") => true,
        Some("false") => false,
        _ => return Err(broken(Law::Shape, "finish must be a boolean")),
    };
    let listed = member("effects")
        .and_then(|raw| serde_json::from_str::<Vec<Box<RawValue>>>(raw.get()).ok())
        .ok_or_else(|| broken(Law::Shape, "effects must be an array"))?;
    if listed.len() > MAX_EFFECTS {
        return Err(broken(
            Law::L1,
            format!("the plan requests {} effects; at most {MAX_EFFECTS} is allowed", listed.len()),
        ));
    }
    let mut effects: Vec<PlannedEffect> = Vec::with_capacity(listed.len());
    for (index, raw) in listed.iter().enumerate() {
        let effect = planned_effect(index, raw, declared)?;
        if effects.iter().any(|e| e.id == effect.id) {
            return Err(broken(Law::L2, format!("effect id {} is used twice", effect.id)));
        }
        effects.push(effect);
    }
    let result = match member("result").map(text) {
        Some("null") | None => None,
        Some(object) if object.starts_with('{') => Some(object.as_bytes().to_vec()),
        Some(_) => return Err(broken(Law::L7, "result must be null or a JSON object")),
    };
    match (effects.is_empty(), &result) {
        (true, None) => return Err(broken(Law::L7, "a plan without effects must carry a result object")),
        (false, Some(_)) => return Err(broken(Law::L7, "a plan with effects must have a null result")),
        _ => {}
    }
    if finish && effects.is_empty() {
        return Err(broken(Law::L7, "finish needs an effect whose result it finishes"));
    }
    if let Some(result) = &result
        && has_key(result, "world")
    {
        return Err(broken(Law::L6, "the result must not carry a world key; World adds it"));
    }
    Ok(AdmittedPlan { effects, finish, result, canonical })
}

fn planned_effect(index: usize, raw: &RawValue, declared: &[AccessTriple]) -> Result<PlannedEffect, PlanLawError> {
    let at = |reason: &str| broken(Law::Shape, format!("effects[{index}] {reason}"));
    let members: Members = serde_json::from_str(raw.get()).map_err(|_| at("is not an object"))?;
    let keys: Vec<&str> = members.keys().map(String::as_str).collect();
    if keys != ["cost", "effect", "id", "payload", "scope"] {
        return Err(at("must have exactly the keys cost, effect, id, payload, scope"));
    }
    let field = |key: &str| members.get(key).map(|raw| raw.as_ref());
    let id = field("id").and_then(string).ok_or_else(|| at("id must be a string"))?;
    let effect = field("effect").and_then(string).ok_or_else(|| at("effect must be a string"))?;
    let scope = field("scope").and_then(string).ok_or_else(|| at("scope must be a string"))?;
    // Canonical numbers are plain decimals: an integer has neither a point nor an exponent.
    let cost = field("cost")
        .map(text)
        .filter(|t| !t.contains('.'))
        .and_then(|t| t.parse::<i64>().ok())
        .ok_or_else(|| at("cost must be an integer"))?;
    if id.is_empty() || id.len() > 16 || !id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
        return Err(broken(Law::L2, format!("effect id {id:?} must be 1 to 16 of a-z and 0-9")));
    }
    let payload = field("payload").map(text).unwrap_or_default();
    if !payload.starts_with('{') {
        return Err(broken(Law::L4, format!("the payload of effect {id} must be a JSON object")));
    }
    let requirement = AccessTriple { effect, scope, cost };
    if !declared.contains(&requirement) {
        return Err(broken(
            Law::L3,
            format!(
                "effect {id} ({}, {}, {}) is not one of the transition's declared effects",
                requirement.effect, requirement.scope, requirement.cost
            ),
        ));
    }
    if payload.len() > MAX_PAYLOAD {
        return Err(broken(Law::L4, format!("the payload of effect {id} is over {MAX_PAYLOAD} bytes")));
    }
    Ok(PlannedEffect { id, requirement, payload: payload.as_bytes().to_vec() })
}

/// Whether the canonical object `object` has the top-level key `key`.
fn has_key(object: &[u8], key: &str) -> bool {
    serde_json::from_slice::<Members>(object).is_ok_and(|members| members.contains_key(key))
}

/// Admits a finish phase's output: a canonical object without `world` or `effects`.
pub fn admit_finish(raw: &[u8]) -> Result<Vec<u8>, PlanLawError> {
    let (canonical, members) = object(raw)?;
    let members = members.ok_or_else(|| broken(Law::L6, "the finish output is not a JSON object"))?;
    for key in ["effects", "world"] {
        if members.contains_key(key) {
            return Err(broken(Law::L6, format!("the finish output must not carry a {key} key")));
        }
    }
    Ok(canonical)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EffectStatus {
    Ok,
    Failed,
    Denied,
    Skipped,
}

impl EffectStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            EffectStatus::Ok => "ok",
            EffectStatus::Failed => "failed",
            EffectStatus::Denied => "denied",
            EffectStatus::Skipped => "skipped",
        }
    }
}

/// One effect as the finish phase and the world block see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectResult {
    pub id: String,
    pub effect: String,
    pub status: EffectStatus,
    pub record: HashRef,
    /// The handler's canonical output, for an `ok` effect.
    pub output: Option<Vec<u8>>,
}

fn quoted(text: &str) -> String {
    String::from_utf8(canonical_value(&serde_json::Value::String(text.to_owned()))).unwrap_or_default()
}

fn finalize(text: String) -> Vec<u8> {
    // Built from canonical pieces in sorted key order; canonicalising again is a cheap guard.
    canonicalize(text.as_bytes(), usize::MAX).unwrap_or_else(|_| text.into_bytes())
}

/// The plan phase's input: `{"args":…,"phase":"plan"}` (`args` is canonical JSON).
pub fn plan_input(args: &[u8]) -> Vec<u8> {
    finalize(format!("{{\"args\":{},\"phase\":\"plan\"}}", String::from_utf8_lossy(args)))
}

/// The finish phase's input: the arguments and each effect's result.
pub fn finish_input(args: &[u8], results: &[EffectResult]) -> Vec<u8> {
    let results: Vec<String> = results
        .iter()
        .map(|r| {
            let output = r.output.as_deref().map_or("null".into(), String::from_utf8_lossy);
            format!(
                "{{\"effect\":{},\"id\":{},\"output\":{output},\"record\":\"{}\",\"status\":\"{}\"}}",
                quoted(&r.effect),
                quoted(&r.id),
                r.record,
                r.status.as_str()
            )
        })
        .collect();
    finalize(format!(
        "{{\"args\":{},\"phase\":\"finish\",\"results\":[{}]}}",
        String::from_utf8_lossy(args),
        results.join(",")
    ))
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ComposeError {
    #[error(transparent)]
    Law(#[from] PlanLawError),
    #[error("{0}")]
    NotAnObject(String),
    #[error("the composed output is {len} bytes; at most {max} are allowed")]
    TooLarge { len: usize, max: usize },
}

/// The world block: each effect's id, status and record, and the plan's ref.
pub fn world_block(plan_ref: &HashRef, results: &[EffectResult]) -> String {
    let effects: Vec<String> = results
        .iter()
        .map(|r| {
            format!("{{\"id\":{},\"record\":\"{}\",\"status\":\"{}\"}}", quoted(&r.id), r.record, r.status.as_str())
        })
        .collect();
    format!("{{\"effects\":[{}],\"plan\":\"{plan_ref}\"}}", effects.join(","))
}

/// The caller-visible output of an effectful call: its body plus the world block.
pub fn compose_output(
    plan: &AdmittedPlan,
    plan_ref: &HashRef,
    results: &[EffectResult],
    finish_output: Option<&[u8]>,
    max_output: usize,
) -> Result<Vec<u8>, ComposeError> {
    let body: Vec<u8> = match (finish_output, &plan.result, results.first()) {
        (Some(finish), _, _) => finish.to_vec(),
        (None, Some(result), _) => result.clone(),
        (None, None, Some(EffectResult { status: EffectStatus::Ok, output, id, .. })) => {
            let output = output.as_deref().unwrap_or_default();
            let canonical = canonicalize(output, MAX_PHASE_OUTPUT)
                .ok()
                .filter(|c| c.first() == Some(&b'{'))
                .ok_or_else(|| ComposeError::NotAnObject(format!("the output of effect {id} is not a JSON object")))?;
            canonical
        }
        (None, None, _) => b"{}".to_vec(),
    };
    let mut members: Members = serde_json::from_slice(&body)
        .map_err(|_| ComposeError::NotAnObject("the output body is not a JSON object".into()))?;
    if members.contains_key("world") {
        return Err(broken(Law::L6, "the output must not carry a world key; World adds it").into());
    }
    let block =
        RawValue::from_string(world_block(plan_ref, results)).map_err(|e| ComposeError::NotAnObject(e.to_string()))?;
    members.insert("world".to_owned(), block);
    let text = serde_json::to_string(&members).map_err(|e| ComposeError::NotAnObject(e.to_string()))?;
    let output = canonicalize(text.as_bytes(), usize::MAX).map_err(|e| ComposeError::NotAnObject(e.to_string()))?;
    if output.len() > max_output {
        return Err(ComposeError::TooLarge { len: output.len(), max: max_output });
    }
    Ok(output)
}
