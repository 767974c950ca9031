//! The broker's objects (reference-core §6.1, §1.7): effect requests, records and their
//! consistency law, the effect journal's intents and outcomes, and budget seeding (§2.5).

use serde_json::json;

use crate::canonical::canonical_value;
use crate::grant::{AccessTriple, Grant};
use crate::hashref::HashRef;

pub const REQUEST: &str = "world/effect-request/v1";
pub const RESULT: &str = "world/effect-result/v1";
pub const RECORD: &str = "world/effect-record/v1";
pub const INTENT: &str = "world/effect-intent/v1";
pub const OUTCOME: &str = "world/effect-outcome/v1";

/// The journal id of an episode's `ordinal`-th effect.
pub fn invocation_id(episode: &str, ordinal: u64) -> String {
    format!("effect:{episode}:{ordinal}")
}

/// The episode and ordinal of an effect journal id.
pub fn parse_invocation_id(id: &str) -> Option<(&str, u64)> {
    let rest = id.strip_prefix("effect:")?;
    let (episode, ordinal) = rest.rsplit_once(':')?;
    if episode.is_empty() || ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((episode, ordinal.parse().ok()?))
}

/// The request object's payload: the triple and time, length-prefixed, then the payload.
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
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(payload);
    bytes
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordLawError {
    #[error("effect record: {0}")]
    Law(&'static str),
    #[error("effect record: {0}")]
    Decode(String),
}

/// What the broker decided and what came of it, for one effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectRecord {
    pub effect: String,
    pub scope: String,
    pub cost: i64,
    pub budget_before: i64,
    pub budget_after: i64,
    pub allowed: bool,
    pub failed: bool,
    /// The denial label (`denied:budget`, …); empty unless denied.
    pub denial: String,
    pub request_ref: HashRef,
    pub result_ref: Option<HashRef>,
}

impl EffectRecord {
    /// The consistency law: a record that breaks it is never written.
    pub fn check(&self) -> Result<(), RecordLawError> {
        let law = |holds: bool, what: &'static str| if holds { Ok(()) } else { Err(RecordLawError::Law(what)) };
        if self.allowed {
            law(self.denial.is_empty(), "an allowed effect has no denial")?;
            law(self.budget_after == self.budget_before - self.cost, "an allowed effect debits its cost")?;
            if self.failed {
                law(self.result_ref.is_none(), "a failed effect has no result")
            } else {
                law(self.result_ref.is_some(), "a succeeded effect has a result")
            }
        } else {
            law(!self.failed, "a denied effect did not run, so it did not fail")?;
            law(!self.denial.is_empty(), "a denied effect names its denial")?;
            law(self.budget_after == self.budget_before, "a denied effect debits nothing")?;
            law(self.result_ref.is_none(), "a denied effect has no result")
        }
    }

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
        let record = EffectRecord {
            effect: wire.effect,
            scope: wire.scope,
            cost: wire.cost,
            budget_before: wire.budget_before,
            budget_after: wire.budget_after,
            allowed: wire.allowed,
            failed: wire.failed,
            denial: wire.denial,
            request_ref: HashRef::parse(&wire.request_ref).map_err(|e| RecordLawError::Decode(e.to_string()))?,
            result_ref: HashRef::parse_optional(&wire.result_ref).map_err(|e| RecordLawError::Decode(e.to_string()))?,
        };
        record.check()?;
        Ok(record)
    }
}

/// An effect intent: durable before its handler runs, and the debit of its budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectIntent {
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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EffectOutcomeStatus {
    Succeeded,
    Failed,
}

/// An effect's outcome, written with its record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectOutcome {
    pub invocation_id: String,
    pub status: EffectOutcomeStatus,
    pub record_ref: HashRef,
    pub logical_time: i64,
}

impl EffectOutcome {
    pub fn payload(&self) -> Vec<u8> {
        let status = match self.status {
            EffectOutcomeStatus::Succeeded => "succeeded",
            EffectOutcomeStatus::Failed => "failed",
        };
        canonical_value(&json!({
            "invocationId": self.invocation_id,
            "status": status,
            "recordRef": self.record_ref.to_string(),
            "logicalTime": self.logical_time,
        }))
    }
}

/// The session's grants as the broker sees them: each grant of an (effect, scope) reduced by
/// everything the episode has spent on it, never below zero.
pub fn seed_grants(grants: &[Grant], spend: &[(String, String, i64)]) -> Vec<Grant> {
    grants
        .iter()
        .map(|grant| {
            let spent: i64 = spend
                .iter()
                .filter(|(effect, scope, _)| *effect == grant.effect && *scope == grant.scope)
                .map(|(_, _, n)| *n)
                .sum();
            Grant { budget: grant.budget.saturating_sub(spent).max(0), ..grant.clone() }
        })
        .collect()
}
