//! The broker's objects (reference-core §6.1, §1.7): the effect request, the effect record
//! and its consistency law, and the effect journal's intents and outcomes.
//!
//! Every JSON object here is in the one canonical encoding (the reference writes E1/E2;
//! World hashes one encoding everywhere), so a record's ref is the same whoever writes it.

use serde_json::json;

use crate::canonical::canonical_value;
use crate::grant::{AccessTriple, Denial};
use crate::hashref::HashRef;

/// Semantic ids of the broker's objects and the effect journal's entries.
pub const REQUEST: &str = "world/effect-request/v1";
pub const RESULT: &str = "world/effect-result/v1";
pub const RECORD: &str = "world/effect-record/v1";
pub const INTENT: &str = "world/effect-intent/v1";
pub const OUTCOME: &str = "world/effect-outcome/v1";

/// The effect journal's namespace; commit journal ids never use it.
const NAMESPACE: &str = "effect:";

/// The journal id of an episode's `ordinal`-th effect (0-based): `effect:<episode>:<ordinal>`.
pub fn invocation_id(episode: &str, ordinal: u64) -> String {
    format!("{NAMESPACE}{episode}:{ordinal}")
}

/// The episode and ordinal of an effect journal id. Only the form [`invocation_id`] writes
/// is accepted (a non-empty episode, a decimal ordinal without leading zeros), so parsing and
/// formatting round-trip and one effect never has two ids.
pub fn parse_invocation_id(id: &str) -> Result<(&str, u64), EffectJournalError> {
    let refuse = || EffectJournalError::InvocationId { id: id.to_owned() };
    let (episode, ordinal) = id.strip_prefix(NAMESPACE).and_then(|rest| rest.rsplit_once(':')).ok_or_else(refuse)?;
    let digits = !ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit());
    let leading_zero = ordinal.len() > 1 && ordinal.starts_with('0');
    if episode.is_empty() || !digits || leading_zero {
        return Err(refuse());
    }
    Ok((episode, ordinal.parse().map_err(|_| refuse())?))
}

/// The request object's payload (§6.1): `<len(effect)>:<effect><len(scope)>:<scope><cost>:<now>:`
/// then the payload bytes, lengths in bytes. The length prefixes keep the framing unambiguous
/// whatever the effect and scope contain.
pub fn request_payload(requirement: &AccessTriple, now: i64, payload: &[u8]) -> Vec<u8> {
    let head = format!(
        "{}:{}{}:{}{}:{}:",
        requirement.effect.len(),
        requirement.effect,
        requirement.scope.len(),
        requirement.scope,
        requirement.cost,
        now
    );
    let mut bytes = Vec::with_capacity(head.len() + payload.len());
    bytes.extend_from_slice(head.as_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// A record that breaks the consistency law, or bytes that are no record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordLawError {
    #[error("effect record breaks the consistency law for {row} effects: {rule}")]
    Law { row: &'static str, rule: String },
    #[error("effect record cannot be decoded: {0}")]
    Decode(String),
}

/// What the broker decided for one effect and what came of it (§6.1). Built through
/// [`EffectRecord::ok`], [`EffectRecord::failed`] or [`EffectRecord::denied`], which obey the
/// consistency law by construction; [`EffectRecord::encode`] checks it again, so a record
/// assembled by hand that breaks it is never written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectRecord {
    pub effect: String,
    pub scope: String,
    pub cost: i64,
    /// The chosen grant's budget before this effect (0 when no grant was chosen).
    pub budget_before: i64,
    pub budget_after: i64,
    pub allowed: bool,
    /// The handler ran and failed (only for allowed effects).
    pub failed: bool,
    /// The denial label (`denied:budget`, …); empty unless denied.
    pub denial: String,
    pub request_ref: HashRef,
    /// The result object of a succeeded effect.
    pub result_ref: Option<HashRef>,
}

impl EffectRecord {
    /// An allowed effect whose handler succeeded: the chosen grant is debited `cost`.
    pub fn ok(requirement: &AccessTriple, budget_before: i64, request_ref: HashRef, result_ref: HashRef) -> Self {
        let mut record = EffectRecord::allowed(requirement, budget_before, request_ref);
        record.result_ref = Some(result_ref);
        record
    }

    /// An allowed effect whose handler failed: debited all the same, no result.
    pub fn failed(requirement: &AccessTriple, budget_before: i64, request_ref: HashRef) -> Self {
        let mut record = EffectRecord::allowed(requirement, budget_before, request_ref);
        record.failed = true;
        record
    }

    /// A denied effect: nothing ran and nothing was debited.
    pub fn denied(requirement: &AccessTriple, budget_before: i64, denial: Denial, request_ref: HashRef) -> Self {
        EffectRecord {
            effect: requirement.effect.clone(),
            scope: requirement.scope.clone(),
            cost: requirement.cost,
            budget_before,
            budget_after: budget_before,
            allowed: false,
            failed: false,
            denial: denial.label().to_owned(),
            request_ref,
            result_ref: None,
        }
    }

    fn allowed(requirement: &AccessTriple, budget_before: i64, request_ref: HashRef) -> Self {
        EffectRecord {
            effect: requirement.effect.clone(),
            scope: requirement.scope.clone(),
            cost: requirement.cost,
            budget_before,
            // An allowed decision has 0 <= cost <= budget, so this does not saturate; if a
            // caller passes anything else, `check` refuses the record.
            budget_after: budget_before.saturating_sub(requirement.cost),
            allowed: true,
            failed: false,
            denial: String::new(),
            request_ref,
            result_ref: None,
        }
    }

    /// The consistency law (§6.1), one row per kind of record:
    /// allowed ∧ ¬failed ⇒ no denial, after = before − cost, a result;
    /// allowed ∧ failed ⇒ no denial, after = before − cost, no result;
    /// ¬allowed ⇒ ¬failed, a denial label, after = before, no result.
    pub fn check(&self) -> Result<(), RecordLawError> {
        let row = match (self.allowed, self.failed) {
            (true, false) => "succeeded",
            (true, true) => "failed",
            (false, _) => "denied",
        };
        let law = |holds: bool, rule: String| if holds { Ok(()) } else { Err(RecordLawError::Law { row, rule }) };
        if self.allowed {
            law(self.denial.is_empty(), format!("an allowed effect has no denial, not {:?}", self.denial))?;
            let debited = self.budget_before.checked_sub(self.cost);
            law(
                debited == Some(self.budget_after),
                format!(
                    "budgetAfter must be budgetBefore {} minus cost {}, not {}",
                    self.budget_before, self.cost, self.budget_after
                ),
            )?;
            if self.failed {
                law(self.result_ref.is_none(), "a failed effect has no resultRef".into())
            } else {
                law(self.result_ref.is_some(), "a succeeded effect has a resultRef".into())
            }
        } else {
            law(!self.failed, "a denied effect never ran, so it cannot have failed".into())?;
            law(!self.denial.is_empty(), "a denied effect names its denial".into())?;
            law(
                self.budget_after == self.budget_before,
                format!(
                    "a denied effect debits nothing: budgetAfter {} must equal budgetBefore {}",
                    self.budget_after, self.budget_before
                ),
            )?;
            law(self.result_ref.is_none(), "a denied effect has no resultRef".into())
        }
    }

    /// The record object's payload: canonical JSON of `{effect, scope, cost, budgetBefore,
    /// budgetAfter, allowed, failed, denial, requestRef, resultRef}`, `resultRef` `""` when
    /// absent. Refused when the record breaks the consistency law.
    pub fn encode(&self) -> Result<Vec<u8>, RecordLawError> {
        self.check()?;
        Ok(canonical_value(&json!({
            "effect": self.effect,
            "scope": self.scope,
            "cost": self.cost,
            "budgetBefore": self.budget_before,
            "budgetAfter": self.budget_after,
            "allowed": self.allowed,
            "failed": self.failed,
            "denial": self.denial,
            "requestRef": self.request_ref.to_string(),
            "resultRef": HashRef::optional_text(self.result_ref.as_ref()),
        })))
    }

    /// Reads a record object's payload: every field required, unknown fields refused, refs
    /// parsed, and the consistency law checked, so a decoded record is one World could write.
    pub fn decode(bytes: &[u8]) -> Result<EffectRecord, RecordLawError> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        struct Wire {
            effect: String,
            scope: String,
            cost: i64,
            budget_before: i64,
            budget_after: i64,
            allowed: bool,
            failed: bool,
            denial: String,
            request_ref: String,
            result_ref: String,
        }
        let wire: Wire = serde_json::from_slice(bytes).map_err(|e| RecordLawError::Decode(e.to_string()))?;
        let request_ref =
            HashRef::parse(&wire.request_ref).map_err(|e| RecordLawError::Decode(format!("requestRef: {e}")))?;
        let result_ref =
            HashRef::parse_optional(&wire.result_ref).map_err(|e| RecordLawError::Decode(format!("resultRef: {e}")))?;
        let record = EffectRecord {
            effect: wire.effect,
            scope: wire.scope,
            cost: wire.cost,
            budget_before: wire.budget_before,
            budget_after: wire.budget_after,
            allowed: wire.allowed,
            failed: wire.failed,
            denial: wire.denial,
            request_ref,
            result_ref,
        };
        record.check()?;
        Ok(record)
    }
}

/// An effect journal entry that is malformed or inconsistent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EffectJournalError {
    #[error("effect journal id {id:?} is not effect:<episode>:<ordinal> (a decimal ordinal without leading zeros)")]
    InvocationId { id: String },
    #[error("effect {entry} cannot be decoded: {reason}")]
    Decode { entry: &'static str, reason: String },
}

fn journal_error(entry: &'static str) -> impl Fn(String) -> EffectJournalError {
    move |reason| EffectJournalError::Decode { entry, reason }
}

/// An effect intent (§1.7): durable before its handler runs, and the durable debit of its
/// budget (the episode's spend is the sum of its intents' costs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectIntent {
    /// `effect:<episode>:<ordinal>`.
    pub invocation_id: String,
    pub episode_id: String,
    pub ordinal: u64,
    pub effect: String,
    pub scope: String,
    pub cost: i64,
    pub request_ref: HashRef,
    pub logical_time: i64,
}

impl EffectIntent {
    /// The intent of the episode's `ordinal`-th effect, its journal id derived from both.
    pub fn new(
        episode: &str,
        ordinal: u64,
        requirement: &AccessTriple,
        request_ref: HashRef,
        logical_time: i64,
    ) -> Self {
        EffectIntent {
            invocation_id: invocation_id(episode, ordinal),
            episode_id: episode.to_owned(),
            ordinal,
            effect: requirement.effect.clone(),
            scope: requirement.scope.clone(),
            cost: requirement.cost,
            request_ref,
            logical_time,
        }
    }

    /// Canonical JSON of `{invocationId, episodeId, ordinal, effect, scope, cost, requestRef,
    /// logicalTime}`.
    pub fn payload(&self) -> Vec<u8> {
        canonical_value(&json!({
            "invocationId": self.invocation_id,
            "episodeId": self.episode_id,
            "ordinal": self.ordinal,
            "effect": self.effect,
            "scope": self.scope,
            "cost": self.cost,
            "requestRef": self.request_ref.to_string(),
            "logicalTime": self.logical_time,
        }))
    }

    /// Reads an intent's payload: unknown fields refused, the id must be the one its episode
    /// and ordinal give, effect and scope non-empty (the store's own rules for an intent).
    pub fn decode(bytes: &[u8]) -> Result<EffectIntent, EffectJournalError> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        struct Wire {
            invocation_id: String,
            episode_id: String,
            ordinal: u64,
            effect: String,
            scope: String,
            cost: i64,
            request_ref: String,
            logical_time: i64,
        }
        let error = journal_error("intent");
        let wire: Wire = serde_json::from_slice(bytes).map_err(|e| error(e.to_string()))?;
        let (episode, ordinal) = parse_invocation_id(&wire.invocation_id)?;
        if episode != wire.episode_id || ordinal != wire.ordinal {
            return Err(error(format!(
                "invocationId {} does not name episodeId {:?} and ordinal {}",
                wire.invocation_id, wire.episode_id, wire.ordinal
            )));
        }
        if wire.effect.is_empty() || wire.scope.is_empty() {
            return Err(error("effect and scope must be non-empty".into()));
        }
        let request_ref = HashRef::parse(&wire.request_ref).map_err(|e| error(format!("requestRef: {e}")))?;
        Ok(EffectIntent {
            invocation_id: wire.invocation_id,
            episode_id: wire.episode_id,
            ordinal: wire.ordinal,
            effect: wire.effect,
            scope: wire.scope,
            cost: wire.cost,
            request_ref,
            logical_time: wire.logical_time,
        })
    }
}

/// How an effect's handler ended. An effect whose end is unknown has no outcome at all: its
/// receipt stays indeterminate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EffectOutcomeStatus {
    Succeeded,
    Failed,
}

impl EffectOutcomeStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            EffectOutcomeStatus::Succeeded => "succeeded",
            EffectOutcomeStatus::Failed => "failed",
        }
    }

    pub fn parse(word: &str) -> Option<EffectOutcomeStatus> {
        match word {
            "succeeded" => Some(EffectOutcomeStatus::Succeeded),
            "failed" => Some(EffectOutcomeStatus::Failed),
            _ => None,
        }
    }
}

/// An effect's outcome (§1.7), written with its record; at most one per intent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectOutcome {
    pub invocation_id: String,
    pub status: EffectOutcomeStatus,
    pub record_ref: HashRef,
    pub logical_time: i64,
}

impl EffectOutcome {
    /// Canonical JSON of `{invocationId, status, recordRef, logicalTime}`.
    pub fn payload(&self) -> Vec<u8> {
        canonical_value(&json!({
            "invocationId": self.invocation_id,
            "status": self.status.as_str(),
            "recordRef": self.record_ref.to_string(),
            "logicalTime": self.logical_time,
        }))
    }

    /// Reads an outcome's payload: unknown fields refused, an effect journal id, a status of
    /// `succeeded` or `failed`, a parsable record ref.
    pub fn decode(bytes: &[u8]) -> Result<EffectOutcome, EffectJournalError> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        struct Wire {
            invocation_id: String,
            status: String,
            record_ref: String,
            logical_time: i64,
        }
        let error = journal_error("outcome");
        let wire: Wire = serde_json::from_slice(bytes).map_err(|e| error(e.to_string()))?;
        parse_invocation_id(&wire.invocation_id)?;
        let status = EffectOutcomeStatus::parse(&wire.status)
            .ok_or_else(|| error(format!("status {:?} is neither succeeded nor failed", wire.status)))?;
        let record_ref = HashRef::parse(&wire.record_ref).map_err(|e| error(format!("recordRef: {e}")))?;
        Ok(EffectOutcome { invocation_id: wire.invocation_id, status, record_ref, logical_time: wire.logical_time })
    }
}
