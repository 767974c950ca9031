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
    pub output: Option<Vec<u8>>,
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

/// The finish phase's input, `{"args":…,"phase":"finish","results":[{"effect","id","output",
/// "record","status"}…]}` in plan order; `output` is the canonical handler output, `null`
/// for an effect that did not succeed. `args` must be canonical, as for [`plan_input`].
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
            (EffectStatus::Ok, Some(output)) => canonical_output(&result.id, output)?,
            _ => b"null".to_vec(),
        };
        out.extend_from_slice(b"{\"effect\":");
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
/// (an object) and `{}` for one that was denied or failed. `results` are the plan's effects
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
