//! The effect broker: one planned effect through the grant law, the durable intent, the
//! handler and its record; and [`Unsettled`], the one owner of an effect's outcome until it
//! is durable.
//!
//! The crash-safety rule of effects is kept here, and only here:
//! * an effect's intent is durable before its handler runs. It is the debit of the budget,
//!   so no crash can run an effect twice or give its cost back. An effect that only reads
//!   ([`Effects::changes_nothing`]) may run while its intent is written, since a crash before
//!   the intent is durable leaves nothing changed; its result is used, and its outcome
//!   written, only once the intent is durable ([`Unsettled::confirm`]).
//! * an effect's outcome and record are durable before the caller is told anything. The
//!   call's commit writes them in its own transaction; a call that does not commit writes
//!   them alone ([`Unsettled::settle`]) first, and its caller is told EffectsUnrecorded with
//!   the records.
//! * when whether a handler changed anything is unknown, the effect gets no outcome: its
//!   intent stays indeterminate, nothing runs it again, and recovery reports it.

use std::time::Duration;

use serde_json::json;
use world_model::{
    AccessTriple, DenialDetail, EffectIntent, EffectOutcome, EffectOutcomeStatus, EffectRecord, EffectResult,
    EffectStatus, Grant, HashRef, PlannedEffect, canonical_value, effect, request_payload, select_grant,
};

use super::answer::HandlerFailure;
use super::handlers::{Bound, Effects};
use crate::store::{Store, StoreError, StoredObject};

/// Provenance of every object the broker writes.
const PROVENANCE: &str = "host/broker";

/// The effects one call dispatched, in plan order: each one's record and, for those that
/// ran, the outcome, none of it durable yet. The call's commit carries them
/// ([`Self::for_commit`], then [`Self::committed`] once it is durable); a call that will not
/// commit them writes them with [`Self::settle`] before it answers. Dropped any other way,
/// the effects that ran stay indeterminate, and that is logged.
#[must_use = "the outcomes of effects that ran must be durable before the caller is told"]
pub struct Unsettled {
    episode: String,
    effects: Vec<Dispatched>,
}

/// One dispatched effect: its record and, when it ran, its outcome, or the intent that an
/// effect which changes nothing still waits for.
struct Dispatched {
    record: StoredObject,
    ran: Option<Ran>,
    pending: Option<Pending>,
}

/// A read that ran beside its intent's write: what its outcome needs once the intent is
/// durable and has its ordinal.
struct Pending {
    intent: IntentWrite,
    result: StoredObject,
    failed: bool,
    now: i64,
}

/// The journal's outcome of an effect that ran, and its result object.
struct Ran {
    effect_id: String,
    result: StoredObject,
    outcome: StoredObject,
}

/// What a call's commit writes of its effects, in its own transaction.
#[derive(Default)]
pub struct ForCommit {
    /// Every effect's record, in plan order: committed with the entry, so the log's object
    /// index leads from an effect record back to its entry.
    pub records: Vec<StoredObject>,
    /// The results of the effects that ran.
    pub results: Vec<StoredObject>,
    /// Their outcomes' journal rows: (effect id, outcome object).
    pub outcomes: Vec<(String, StoredObject)>,
}

impl Unsettled {
    pub fn new(episode: &str) -> Self {
        Self { episode: episode.to_owned(), effects: Vec::new() }
    }

    /// Whether any effect ran, so that a failure now leaves an outcome to record.
    pub fn any_ran(&self) -> bool {
        self.effects.iter().any(|effect| effect.ran.is_some())
    }

    /// Waits for the intents of the reads that ran beside them. A read whose intent failed
    /// is dropped: it changed nothing and is not debited, and the error says so.
    pub async fn confirm(&mut self) -> Result<(), DispatchError> {
        let mut failure = None;
        for index in (0..self.effects.len()).rev() {
            let Some(pending) = self.effects[index].pending.take() else { continue };
            match written(pending.intent).await {
                Ok(ordinal) => {
                    let effect_id = effect::invocation_id(&self.episode, ordinal as u64);
                    let record = self.effects[index].record.hash;
                    let outcome = outcome_object(&effect_id, pending.failed, record, pending.now);
                    self.effects[index].ran = Some(Ran { effect_id, result: pending.result, outcome });
                }
                Err(error) => {
                    self.effects.remove(index);
                    failure = Some(DispatchError::NotRun(format!("effect intent: {error}")));
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// What the call's commit carries, so that its COMMIT settles them.
    pub fn for_commit(&self) -> ForCommit {
        let ran = || self.effects.iter().filter_map(|effect| effect.ran.as_ref());
        ForCommit {
            records: self.effects.iter().map(|effect| effect.record.clone()).collect(),
            results: ran().map(|ran| ran.result.clone()).collect(),
            outcomes: ran().map(|ran| (ran.effect_id.clone(), ran.outcome.clone())).collect(),
        }
    }

    /// The call's commit is durable, and with it every outcome it carried.
    pub fn committed(mut self) {
        self.effects.clear();
    }

    /// Writes the outcome of each effect that ran, with its result and record, and the
    /// records of the denied ones, each write on `budget`, for a call that will not commit
    /// them; an outcome already journaled (by a commit whose answer was lost) counts as
    /// written. Answers the records of the effects it settled (what EffectsUnrecorded names:
    /// a read whose intent never landed is not among them) and which writes failed.
    pub async fn settle(mut self, store: &Store, budget: Duration) -> (Vec<HashRef>, Result<(), String>) {
        let mut failed = Vec::new();
        let mut denied = Vec::new();
        if let Err(error) = self.confirm().await {
            failed.push(error.to_string());
        }
        let records = self.effects.iter().map(|effect| effect.record.hash).collect();
        for Dispatched { record, ran, .. } in std::mem::take(&mut self.effects) {
            let Some(Ran { effect_id, result, outcome }) = ran else {
                denied.push(record);
                continue;
            };
            let objects = [&result, &record];
            match tokio::time::timeout(budget, store.append_effect_outcome(&effect_id, &objects, &outcome)).await {
                Ok(Ok(())) | Ok(Err(StoreError::DuplicateInvocation { .. })) => {}
                Ok(Err(error)) => failed.push(format!("writing the outcome of {effect_id}: {error}")),
                Err(_) => failed.push(format!("writing the outcome of {effect_id} ran past its budget")),
            }
        }
        if !denied.is_empty() {
            let records: Vec<&StoredObject> = denied.iter().collect();
            match tokio::time::timeout(budget, store.put_objects(&self.episode, &records)).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => failed.push(format!("writing the denied effects' records: {error}")),
                Err(_) => failed.push("writing the denied effects' records ran past its budget".to_owned()),
            }
        }
        (records, if failed.is_empty() { Ok(()) } else { Err(failed.join("; ")) })
    }
}

impl Drop for Unsettled {
    fn drop(&mut self) {
        for ran in self.effects.iter().filter_map(|effect| effect.ran.as_ref()) {
            tracing::error!(effect = %ran.effect_id, "an effect's outcome was never written; it stays indeterminate");
        }
        if self.effects.iter().any(|effect| effect.pending.is_some()) {
            tracing::error!(episode = %self.episode, "a read's intent was never confirmed; if it landed, it stays indeterminate");
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// Nothing ran and nothing was debited.
    #[error("the effect was not dispatched: {0}")]
    NotRun(String),
    /// The handler ran (or may have), and whether it changed anything is unknown: no
    /// outcome is written, the intent stays indeterminate.
    #[error("effect {effect_id} ran but its outcome is not recorded: {cause}")]
    Unrecorded { effect_id: String, cause: String },
}

/// One effect of one call.
pub struct EffectCall<'a> {
    pub store: &'a Store,
    pub effects: &'a Effects,
    pub bound: &'a Bound,
    pub episode: &'a str,
    /// The session's grants as minted, in ledger order: a denial reports the chosen grant's
    /// budget and what the episode has spent of it.
    pub grants: &'a [Grant],
    /// The invocation that planned the effect.
    pub call_id: &'a str,
    pub effect: &'a PlannedEffect,
    /// The call's logical time, the same for every request and its commit.
    pub now: i64,
    pub handler_timeout: Duration,
}

/// Decides `call.effect` over `ledger` (the session's grants seeded from the episode's
/// spend) and, when allowed, runs it; the chosen grant is debited once the intent is durable.
/// The effect's record, and its outcome when it ran, join `unsettled`; the answer is what
/// the finish phase reads.
pub async fn dispatch(
    ledger: &mut [Grant],
    unsettled: &mut Unsettled,
    call: EffectCall<'_>,
) -> Result<EffectResult, DispatchError> {
    let requirement: &AccessTriple = &call.effect.requirement;
    let selection = select_grant(ledger, requirement, call.now);
    let budget_before = selection.grant_index.and_then(|i| ledger.get(i)).map_or(0, |g| g.budget);
    let request =
        StoredObject::new(effect::REQUEST, PROVENANCE, request_payload(requirement, call.now, &call.effect.payload));
    let not_run = |what: &str, cause: &dyn std::fmt::Display| DispatchError::NotRun(format!("{what}: {cause}"));
    let answer = |status, record: &StoredObject, output, denial| EffectResult {
        id: call.effect.id.clone(),
        effect: requirement.effect.clone(),
        status,
        record: record.hash,
        output,
        denial,
    };

    let index = match (selection.decision, selection.grant_index) {
        (world_model::Decision::Allowed { remaining }, Some(index)) => (index, remaining),
        (decision, _) => {
            // A denial has a record only: no request object, no intent, no debit. The record
            // is written with the rest (the commit, or settle).
            let denial = match decision {
                world_model::Decision::Denied(denial) => denial,
                world_model::Decision::Allowed { .. } => world_model::Denial::EffectName,
            };
            let detail = denial_detail(ledger, call.grants, selection.grant_index, requirement, denial, call.episode);
            let record = EffectRecord::denied(requirement, budget_before, denial, request.hash);
            let record = record_object(&record).map_err(|e| not_run("denial record", &e))?;
            let result = answer(EffectStatus::Denied, &record, None, Some(detail));
            unsettled.effects.push(Dispatched { record, ran: None, pending: None });
            return Ok(result);
        }
    };
    let (grant_index, remaining) = index;

    let (episode, owned, request_ref, now) = (call.episode.to_owned(), requirement.clone(), request.hash, call.now);
    let intent = move |ordinal: i64| {
        let intent = EffectIntent::new(&episode, ordinal as u64, &owned, request_ref, now);
        StoredObject::new(effect::INTENT, PROVENANCE, intent.payload())
    };
    let handle = || {
        let handled = call.effects.handle(call.bound, &requirement.effect, &requirement.scope, &call.effect.payload);
        tokio::time::timeout(call.handler_timeout, handled)
    };
    let (intent, handled) = if call.effects.changes_nothing(&requirement.effect) {
        // The write goes on while the read runs, and the call's finish phase after it.
        let (store, episode, call_id, owned) =
            (call.store.clone(), call.episode.to_owned(), call.call_id.to_owned(), requirement.clone());
        let request = request.clone();
        let write = tokio::spawn(async move {
            crate::fault::hold("read-intent").await;
            store.append_effect_intent(&episode, &call_id, &owned, &request, intent).await
        });
        (Intent::Writing(write), handle().await)
    } else {
        let (ordinal, _) = call
            .store
            .append_effect_intent(call.episode, call.call_id, requirement, &request, intent)
            .await
            .map_err(|e| not_run("effect intent", &e))?;
        crate::fault::point("after-intent");
        crate::fault::hold("after-intent").await;
        (Intent::Durable(effect::invocation_id(call.episode, ordinal as u64)), handle().await)
    };
    // The intent is the durable debit; this is its in-memory counterpart for the rest of
    // the call (a read whose intent fails fails the call).
    if let Some(grant) = ledger.get_mut(grant_index) {
        grant.budget = remaining;
    }
    crate::fault::point("after-handler");
    let (output, failed) = match handled {
        Ok(Ok(output)) => (output.bytes, output.refused),
        // The reason is the failed effect's result, so the caller and the log see it.
        Ok(Err(HandlerFailure::Failed(cause))) => (canonical_value(&json!({"ok": false, "refused": cause})), true),
        // Whether the handler changed anything is unknown: no record, no outcome; the
        // receipt stays indeterminate and the budget stays debited.
        Ok(Err(HandlerFailure::Indeterminate(cause))) => return Err(intent.unrecorded(call.episode, cause).await),
        Err(_) => {
            let cause = format!("the handler ran past {:?}", call.handler_timeout);
            return Err(intent.unrecorded(call.episode, cause).await);
        }
    };

    let result = StoredObject::new(effect::RESULT, PROVENANCE, output.clone());
    let record = if failed {
        // A handler's refusal is the caller's to act on, and its reason may quote the request.
        let reason = String::from_utf8_lossy(&output);
        tracing::info!(effect = %requirement.effect, invocation = %call.call_id, reason = %world_model::quote_for_log(&reason), "effect failed");
        EffectRecord::failed(requirement, budget_before, request.hash, Some(result.hash))
    } else {
        EffectRecord::ok(requirement, budget_before, request.hash, result.hash)
    };
    let record = match record_object(&record) {
        Ok(record) => record,
        Err(error) => return Err(intent.unrecorded(call.episode, error.to_string()).await),
    };
    let status = if failed { EffectStatus::Failed } else { EffectStatus::Ok };
    let answer = answer(status, &record, Some(output), None);
    let dispatched = match intent {
        Intent::Durable(effect_id) => {
            let outcome = outcome_object(&effect_id, failed, record.hash, call.now);
            Dispatched { record, ran: Some(Ran { effect_id, result, outcome }), pending: None }
        }
        Intent::Writing(intent) => {
            Dispatched { record, ran: None, pending: Some(Pending { intent, result, failed, now: call.now }) }
        }
    };
    unsettled.effects.push(dispatched);
    Ok(answer)
}

type IntentWrite = tokio::task::JoinHandle<Result<(i64, StoredObject), StoreError>>;

/// An effect's intent: durable (its effect id), or still being written beside a read.
enum Intent {
    Durable(String),
    Writing(IntentWrite),
}

impl Intent {
    /// The error of an effect whose handler may have changed something and has no outcome;
    /// a read whose intent never landed ran for nothing and was not dispatched.
    async fn unrecorded(self, episode: &str, cause: String) -> DispatchError {
        let effect_id = match self {
            Intent::Durable(effect_id) => effect_id,
            Intent::Writing(write) => match written(write).await {
                Ok(ordinal) => effect::invocation_id(episode, ordinal as u64),
                Err(error) => return DispatchError::NotRun(format!("effect intent: {error}")),
            },
        };
        DispatchError::Unrecorded { effect_id, cause }
    }
}

/// The ordinal of an intent written beside its read.
async fn written(write: IntentWrite) -> Result<i64, StoreError> {
    let written =
        write.await.map_err(|e| StoreError::Uncertain(format!("the intent's write ended abnormally: {e}")))?;
    Ok(written?.0)
}

/// The journal's outcome of the effect `effect_id` that ran.
fn outcome_object(effect_id: &str, failed: bool, record: HashRef, now: i64) -> StoredObject {
    let outcome = EffectOutcome {
        invocation_id: effect_id.to_owned(),
        status: if failed { EffectOutcomeStatus::Failed } else { EffectOutcomeStatus::Succeeded },
        record_ref: record,
        logical_time: now,
    };
    StoredObject::new(effect::OUTCOME, PROVENANCE, outcome.payload())
}

/// The denial as the finish phase reads it. The numbers are the chosen grant's when it is a
/// grant for this effect (budget as minted, spent in this episode so far); otherwise 0.
fn denial_detail(
    ledger: &[Grant],
    minted: &[Grant],
    index: Option<usize>,
    requirement: &AccessTriple,
    denial: world_model::Denial,
    episode: &str,
) -> DenialDetail {
    let chosen = index.and_then(|i| Some((minted.get(i)?, ledger.get(i)?)));
    let (budget, spent) = match chosen {
        Some((grant, left)) if grant.effect == requirement.effect => {
            (grant.budget, grant.budget.saturating_sub(left.budget).max(0))
        }
        _ => (0, 0),
    };
    DenialDetail { reason: denial.label().to_owned(), budget, spent, episode: episode.to_owned() }
}

fn record_object(record: &EffectRecord) -> Result<StoredObject, world_model::RecordLawError> {
    Ok(StoredObject::new(effect::RECORD, PROVENANCE, record.encode()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use world_model::{Denial, seed_grants};

    fn grant(effect: &str, budget: i64) -> Grant {
        Grant { effect: effect.into(), scope: "worktree".into(), budget, expires_at: i64::MAX }
    }

    #[test]
    fn a_denial_reports_the_chosen_grants_budget_and_the_episodes_spend_of_it() {
        let minted = [grant("Workspace.Write", 5), grant("Workspace.Read", 3)];
        let spend = [("Workspace.Read".to_owned(), "worktree".to_owned(), 3)];
        let ledger = seed_grants(&minted, &spend);
        let read = AccessTriple { effect: "Workspace.Read".into(), scope: "worktree".into(), cost: 1 };
        let selection = select_grant(&ledger, &read, 0);
        assert_eq!(selection.decision, world_model::Decision::Denied(Denial::Budget));
        let detail = denial_detail(&ledger, &minted, selection.grant_index, &read, Denial::Budget, "ep1");
        assert_eq!(detail, DenialDetail { reason: "denied:budget".into(), budget: 3, spent: 3, episode: "ep1".into() });
        // No grant for the effect: the reason alone, no numbers of another effect's grant.
        let check = AccessTriple { effect: "Ailang.Check".into(), ..read };
        let selection = select_grant(&ledger, &check, 0);
        let detail = denial_detail(&ledger, &minted, selection.grant_index, &check, Denial::EffectName, "ep1");
        assert_eq!((detail.reason.as_str(), detail.budget, detail.spent), ("denied:effect-name", 0, 0));
    }
}
