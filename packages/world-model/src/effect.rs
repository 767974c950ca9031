//! The broker's objects (reference-core §6.1, §1.7): the effect request, the effect record
//! and its consistency law, and the effect journal's intents and outcomes.
//!
//! Every JSON object here is in the one canonical encoding (the reference writes E1/E2;
//! World hashes one encoding everywhere), so a record's ref is the same whoever writes it.

use serde_json::json;

use crate::canonical::canonical_value;
use crate::effect_plan::EffectStatus;
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

    /// An allowed effect whose handler refused or failed: debited all the same. Its result,
    /// when there is one, holds the handler's reason (`{"ok":false,"refused":…}`).
    pub fn failed(
        requirement: &AccessTriple,
        budget_before: i64,
        request_ref: HashRef,
        result_ref: Option<HashRef>,
    ) -> Self {
        let mut record = EffectRecord::allowed(requirement, budget_before, request_ref);
        record.failed = true;
        record.result_ref = result_ref;
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

    /// The effect's status in the `world` block.
    pub fn status(&self) -> EffectStatus {
        match (self.allowed, self.failed) {
            (true, false) => EffectStatus::Ok,
            (true, true) => EffectStatus::Failed,
            (false, _) => EffectStatus::Denied,
        }
    }

    /// The consistency law (§6.1), one row per kind of record:
    /// allowed ∧ ¬failed ⇒ no denial, after = before − cost, a result;
    /// allowed ∧ failed ⇒ no denial, after = before − cost, a result or none (the reason);
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
            // A failed effect's result, when present, is the handler's reason; records written
            // before reasons were kept have none, and both stay valid.
            law(self.failed || self.result_ref.is_some(), "a succeeded effect has a resultRef".into())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read() -> AccessTriple {
        AccessTriple { effect: "Workspace.Read".into(), scope: "worktree".into(), cost: 1 }
    }

    fn r(name: &str) -> HashRef {
        HashRef::of(name.as_bytes())
    }

    #[test]
    fn a_request_payload_is_the_length_prefixed_triple_the_time_and_the_payload() {
        let rows: [(AccessTriple, i64, &[u8], &[u8]); 3] = [
            (
                read(),
                1_700_000_000,
                br#"{"op":"read","path":"a"}"#,
                br#"14:Workspace.Read8:worktree1:1700000000:{"op":"read","path":"a"}"#,
            ),
            // Lengths count bytes, not characters.
            (AccessTriple { effect: "É".into(), scope: "wt:1".into(), cost: 0 }, 0, b"{}", b"2:\xc3\x894:wt:10:0:{}"),
            (AccessTriple { effect: String::new(), scope: String::new(), cost: 12 }, -5, b"", b"0:0:12:-5:"),
        ];
        for (requirement, now, payload, expected) in rows {
            assert_eq!(request_payload(&requirement, now, payload), expected, "{requirement:?}");
        }
    }

    #[test]
    fn effect_journal_ids_round_trip_and_nothing_else_parses() {
        assert_eq!(invocation_id("ep1", 0), "effect:ep1:0");
        assert_eq!(invocation_id("ep1", 42), "effect:ep1:42");
        assert_eq!(parse_invocation_id("effect:ep1:42"), Ok(("ep1", 42)));
        assert_eq!(parse_invocation_id("effect:a:b:7"), Ok(("a:b", 7)));
        assert_eq!(parse_invocation_id(&invocation_id("ep1", u64::MAX)), Ok(("ep1", u64::MAX)));
        for id in [
            "",
            "effect:",
            "effect:ep1",
            "effect:ep1:",
            "effect::1",
            "effect:ep1:01",
            "effect:ep1:-1",
            "effect:ep1:+1",
            "effect:ep1:1x",
            "effect:ep1:18446744073709551616",
            "a2a:ep1:1",
            "Effect:ep1:1",
        ] {
            let error = parse_invocation_id(id).expect_err(id);
            assert_eq!(error, EffectJournalError::InvocationId { id: id.to_owned() });
        }
        assert_eq!(
            parse_invocation_id("effect:ep1:01").unwrap_err().to_string(),
            "effect journal id \"effect:ep1:01\" is not effect:<episode>:<ordinal> (a decimal ordinal without leading zeros)"
        );
    }

    #[test]
    fn the_constructors_obey_the_consistency_law() {
        let ok = EffectRecord::ok(&read(), 3, r("req"), r("res"));
        let failed = EffectRecord::failed(&read(), 3, r("req"), None);
        let refused = EffectRecord::failed(&read(), 3, r("req"), Some(r("why")));
        let denied = EffectRecord::denied(&read(), 0, Denial::Budget, r("req"));
        for record in [&ok, &failed, &refused, &denied] {
            assert_eq!(record.check(), Ok(()), "{record:?}");
        }
        assert_eq!(
            (refused.budget_after, refused.status(), refused.result_ref),
            (2, EffectStatus::Failed, Some(r("why")))
        );
        assert_eq!((ok.budget_after, ok.allowed, ok.failed, ok.result_ref), (2, true, false, Some(r("res"))));
        assert_eq!((failed.budget_after, failed.allowed, failed.failed, failed.result_ref), (2, true, true, None));
        assert_eq!(
            (denied.budget_after, denied.allowed, denied.failed, denied.denial.as_str()),
            (0, false, false, "denied:budget")
        );
    }

    /// One row per clause of the consistency law (§6.1): each breach is refused by `encode`
    /// and by `decode`, naming the row and the clause.
    #[test]
    fn every_breach_of_the_consistency_law_is_refused() {
        let ok = EffectRecord::ok(&read(), 3, r("req"), r("res"));
        let failed = EffectRecord::failed(&read(), 3, r("req"), None);
        let denied = EffectRecord::denied(&read(), 3, Denial::Scope, r("req"));
        let rows: Vec<(&str, EffectRecord, &str, &str)> = vec![
            (
                "succeeded with a denial",
                EffectRecord { denial: "denied:budget".into(), ..ok.clone() },
                "succeeded",
                "an allowed effect has no denial, not \"denied:budget\"",
            ),
            (
                "succeeded without the debit",
                EffectRecord { budget_after: 3, ..ok.clone() },
                "succeeded",
                "budgetAfter must be budgetBefore 3 minus cost 1, not 3",
            ),
            (
                "succeeded debiting twice",
                EffectRecord { budget_after: 1, ..ok.clone() },
                "succeeded",
                "budgetAfter must be budgetBefore 3 minus cost 1, not 1",
            ),
            (
                "succeeded without a result",
                EffectRecord { result_ref: None, ..ok.clone() },
                "succeeded",
                "a succeeded effect has a resultRef",
            ),
            (
                "succeeded overflowing the debit",
                EffectRecord { budget_before: i64::MIN, cost: 1, budget_after: i64::MAX, ..ok.clone() },
                "succeeded",
                "budgetAfter must be budgetBefore -9223372036854775808 minus cost 1, not 9223372036854775807",
            ),
            (
                "failed with a denial",
                EffectRecord { denial: "denied:scope".into(), ..failed.clone() },
                "failed",
                "an allowed effect has no denial, not \"denied:scope\"",
            ),
            (
                "failed without the debit",
                EffectRecord { budget_after: 3, ..failed.clone() },
                "failed",
                "budgetAfter must be budgetBefore 3 minus cost 1, not 3",
            ),
            (
                "denied and failed",
                EffectRecord { failed: true, ..denied.clone() },
                "denied",
                "a denied effect never ran, so it cannot have failed",
            ),
            (
                "denied without a label",
                EffectRecord { denial: String::new(), ..denied.clone() },
                "denied",
                "a denied effect names its denial",
            ),
            (
                "denied with a debit",
                EffectRecord { budget_after: 2, ..denied.clone() },
                "denied",
                "a denied effect debits nothing: budgetAfter 2 must equal budgetBefore 3",
            ),
            (
                "denied with a result",
                EffectRecord { result_ref: Some(r("res")), ..denied.clone() },
                "denied",
                "a denied effect has no resultRef",
            ),
        ];
        for (name, record, row, rule) in rows {
            let expected = RecordLawError::Law { row, rule: rule.to_owned() };
            assert_eq!(record.encode(), Err(expected.clone()), "{name}");
            // The same record written by someone else is refused on the way in.
            let mut wire: serde_json::Value = serde_json::from_slice(&ok.encode().unwrap()).unwrap();
            wire["budgetBefore"] = record.budget_before.into();
            wire["budgetAfter"] = record.budget_after.into();
            wire["cost"] = record.cost.into();
            wire["allowed"] = record.allowed.into();
            wire["failed"] = record.failed.into();
            wire["denial"] = record.denial.clone().into();
            wire["resultRef"] = HashRef::optional_text(record.result_ref.as_ref()).into();
            assert_eq!(EffectRecord::decode(&canonical_value(&wire)), Err(expected), "{name}: decode");
        }
        assert_eq!(
            EffectRecord { budget_after: 3, ..ok }.encode().unwrap_err().to_string(),
            "effect record breaks the consistency law for succeeded effects: budgetAfter must be budgetBefore 3 minus cost 1, not 3"
        );
    }

    #[test]
    fn a_record_encodes_to_exact_canonical_bytes_and_decodes_back() {
        let (req, res) = (r("req"), r("res"));
        let rows = [
            (
                EffectRecord::ok(&read(), 3, req, res),
                format!(
                    r#"{{"allowed":true,"budgetAfter":2,"budgetBefore":3,"cost":1,"denial":"","effect":"Workspace.Read","failed":false,"requestRef":"{req}","resultRef":"{res}","scope":"worktree"}}"#
                ),
            ),
            (
                EffectRecord::failed(&read(), 3, req, None),
                format!(
                    r#"{{"allowed":true,"budgetAfter":2,"budgetBefore":3,"cost":1,"denial":"","effect":"Workspace.Read","failed":true,"requestRef":"{req}","resultRef":"","scope":"worktree"}}"#
                ),
            ),
            (
                EffectRecord::failed(&read(), 3, req, Some(res)),
                format!(
                    r#"{{"allowed":true,"budgetAfter":2,"budgetBefore":3,"cost":1,"denial":"","effect":"Workspace.Read","failed":true,"requestRef":"{req}","resultRef":"{res}","scope":"worktree"}}"#
                ),
            ),
            (
                EffectRecord::denied(&read(), 0, Denial::Budget, req),
                format!(
                    r#"{{"allowed":false,"budgetAfter":0,"budgetBefore":0,"cost":1,"denial":"denied:budget","effect":"Workspace.Read","failed":false,"requestRef":"{req}","resultRef":"","scope":"worktree"}}"#
                ),
            ),
        ];
        for (record, expected) in rows {
            let bytes = record.encode().unwrap();
            assert_eq!(String::from_utf8(bytes.clone()).unwrap(), expected);
            assert_eq!(EffectRecord::decode(&bytes), Ok(record));
        }
    }

    #[test]
    fn decoding_refuses_what_is_not_a_record() {
        let good: serde_json::Value =
            serde_json::from_slice(&EffectRecord::failed(&read(), 3, r("req"), None).encode().unwrap()).unwrap();
        let edit = |key: &str, value: Option<serde_json::Value>| {
            let mut wire = good.clone();
            match value {
                Some(value) => wire[key] = value,
                None => {
                    wire.as_object_mut().map(|o| o.remove(key));
                }
            }
            canonical_value(&wire)
        };
        let rows: Vec<(&str, Vec<u8>, &str)> = vec![
            ("unknown field", edit("note", Some("x".into())), "effect record cannot be decoded: unknown field `note`"),
            ("missing field", edit("denial", None), "effect record cannot be decoded: missing field `denial`"),
            (
                "requestRef not a ref",
                edit("requestRef", Some("sha256:AB".into())),
                "effect record cannot be decoded: requestRef: hashref: digest is not lowercase hexadecimal: \"AB\"",
            ),
            (
                "requestRef empty",
                edit("requestRef", Some("".into())),
                "effect record cannot be decoded: requestRef: hashref: empty hashref text",
            ),
            (
                "resultRef not a ref",
                edit("resultRef", Some("nope".into())),
                "effect record cannot be decoded: resultRef: hashref: missing algorithm tag (expected algo:digest): \"nope\"",
            ),
            (
                "cost not an integer",
                edit("cost", Some(1.5.into())),
                "effect record cannot be decoded: invalid type: floating point `1.5`, expected i64",
            ),
            (
                "not JSON",
                b"{".to_vec(),
                "effect record cannot be decoded: EOF while parsing an object at line 1 column 1",
            ),
        ];
        // serde_json's own wording continues after these prefixes (expected fields, position).
        for (name, bytes, message) in rows {
            let error = EffectRecord::decode(&bytes).unwrap_err().to_string();
            assert!(error.starts_with(message), "{name}: {error}");
        }
    }

    #[test]
    fn intents_and_outcomes_encode_to_exact_canonical_bytes_and_decode_back() {
        let req = r("req");
        let intent = EffectIntent::new("ep1", 0, &read(), req, 1_700_000_000);
        assert_eq!(intent.invocation_id, "effect:ep1:0");
        let expected = format!(
            r#"{{"cost":1,"effect":"Workspace.Read","episodeId":"ep1","invocationId":"effect:ep1:0","logicalTime":1700000000,"ordinal":0,"requestRef":"{req}","scope":"worktree"}}"#
        );
        assert_eq!(String::from_utf8(intent.payload()).unwrap(), expected);
        assert_eq!(EffectIntent::decode(&intent.payload()), Ok(intent));

        let rec = r("record");
        for (status, word) in [(EffectOutcomeStatus::Succeeded, "succeeded"), (EffectOutcomeStatus::Failed, "failed")] {
            let outcome =
                EffectOutcome { invocation_id: "effect:ep1:0".into(), status, record_ref: rec, logical_time: 7 };
            let expected =
                format!(r#"{{"invocationId":"effect:ep1:0","logicalTime":7,"recordRef":"{rec}","status":"{word}"}}"#);
            assert_eq!(String::from_utf8(outcome.payload()).unwrap(), expected);
            assert_eq!(EffectOutcome::decode(&outcome.payload()), Ok(outcome));
            assert_eq!(EffectOutcomeStatus::parse(word), Some(status));
        }
    }

    #[test]
    fn journal_decoding_refuses_inconsistent_entries() {
        let intent = EffectIntent::new("ep1", 3, &read(), r("req"), 1);
        let edited = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut wire: serde_json::Value = serde_json::from_slice(&intent.payload()).unwrap();
            edit(&mut wire);
            canonical_value(&wire)
        };
        let rows: Vec<(&str, Vec<u8>, &str)> = vec![
            (
                "another ordinal",
                edited(&|w| w["ordinal"] = 4.into()),
                "effect intent cannot be decoded: invocationId effect:ep1:3 does not name episodeId \"ep1\" and ordinal 4",
            ),
            (
                "another episode",
                edited(&|w| w["episodeId"] = "ep2".into()),
                "effect intent cannot be decoded: invocationId effect:ep1:3 does not name episodeId \"ep2\" and ordinal 3",
            ),
            (
                "a commit journal id",
                edited(&|w| w["invocationId"] = "a2a:ep1:3".into()),
                "effect journal id \"a2a:ep1:3\" is not effect:<episode>:<ordinal> (a decimal ordinal without leading zeros)",
            ),
            (
                "an empty scope",
                edited(&|w| w["scope"] = "".into()),
                "effect intent cannot be decoded: effect and scope must be non-empty",
            ),
            (
                "an unknown field",
                edited(&|w| w["extra"] = 1.into()),
                "effect intent cannot be decoded: unknown field `extra`",
            ),
            (
                "a bad requestRef",
                edited(&|w| w["requestRef"] = "".into()),
                "effect intent cannot be decoded: requestRef: hashref: empty hashref text",
            ),
        ];
        for (name, bytes, message) in rows {
            let error = EffectIntent::decode(&bytes).unwrap_err().to_string();
            assert!(error.starts_with(message), "{name}: {error}");
        }

        let outcome = EffectOutcome {
            invocation_id: "effect:ep1:3".into(),
            status: EffectOutcomeStatus::Failed,
            record_ref: r("record"),
            logical_time: 1,
        };
        let edited = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut wire: serde_json::Value = serde_json::from_slice(&outcome.payload()).unwrap();
            edit(&mut wire);
            canonical_value(&wire)
        };
        let rows: Vec<(&str, Vec<u8>, &str)> = vec![
            (
                "an indeterminate status",
                edited(&|w| w["status"] = "indeterminate".into()),
                "effect outcome cannot be decoded: status \"indeterminate\" is neither succeeded nor failed",
            ),
            (
                "a commit journal id",
                edited(&|w| w["invocationId"] = "rest:x".into()),
                "effect journal id \"rest:x\" is not effect:<episode>:<ordinal> (a decimal ordinal without leading zeros)",
            ),
            (
                "no recordRef",
                edited(&|w| w["recordRef"] = "".into()),
                "effect outcome cannot be decoded: recordRef: hashref: empty hashref text",
            ),
            (
                "a resultRef",
                edited(&|w| w["resultRef"] = "".into()),
                "effect outcome cannot be decoded: unknown field `resultRef`",
            ),
        ];
        for (name, bytes, message) in rows {
            let error = EffectOutcome::decode(&bytes).unwrap_err().to_string();
            assert!(error.starts_with(message), "{name}: {error}");
        }
    }
}
