//! The effect broker: one planned effect through the grant law, the durable intent (the
//! debit), the handler, and the durable outcome and record — in that order, so nobody is
//! told anything about an effect that is not recorded.

use std::time::Duration;

use serde_json::json;
use world_model::{
    AccessTriple, DenialDetail, EffectIntent, EffectOutcome, EffectOutcomeStatus, EffectRecord, EffectStatus, Grant,
    HashRef, PlannedEffect, canonical_value, effect, request_payload, select_grant,
};

use super::handlers::{Bound, Effects, HandlerFailure};
use crate::store::{Store, StoreError, StoredObject};

/// Provenance of every object the broker writes.
const PROVENANCE: &str = "host/broker";

/// An effect that ran (or was denied) and whose record is durable.
#[derive(Debug)]
pub struct Dispatched {
    pub status: EffectStatus,
    /// The durable effect record; the commit carries it too, so the log indexes it.
    pub record: StoredObject,
    /// The handler's output (canonical JSON) when it ran: what it answered, or for a failed
    /// effect its reason.
    pub output: Option<Vec<u8>>,
    /// Why a denied effect was denied, with the grant's numbers.
    pub denial: Option<DenialDetail>,
    /// The outcome of an effect that ran, still to be made durable: inside the call's commit
    /// when it commits (one durable write fewer), by [`record_outcome`] when it does not.
    pub pending: Option<PendingOutcome>,
}

/// An effect's outcome journal entry and the objects it names (result, record).
#[derive(Clone, Debug)]
pub struct PendingOutcome {
    pub effect_id: String,
    pub objects: Vec<StoredObject>,
    pub outcome: StoredObject,
}

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    /// Nothing ran and nothing was debited.
    #[error("the effect was not dispatched: {0}")]
    NotRun(String),
    /// The handler ran (or may have), and its outcome could not be made durable.
    #[error("effect {effect_id} ran but its outcome is not recorded: {cause}")]
    Unrecorded { effect_id: String, records: Vec<HashRef>, cause: String },
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
    /// Bounds the writes after the handler: an ended call never strands an executed effect.
    pub write_budget: Duration,
}

/// Decides `call.effect` over `ledger` (the session's grants seeded from the episode's
/// spend) and, when allowed, runs it; the chosen grant is debited once the intent is durable.
pub async fn dispatch(ledger: &mut [Grant], call: EffectCall<'_>) -> Result<Dispatched, DispatchError> {
    let requirement: &AccessTriple = &call.effect.requirement;
    let selection = select_grant(ledger, requirement, call.now);
    let budget_before = selection.grant_index.and_then(|i| ledger.get(i)).map_or(0, |g| g.budget);
    let request =
        StoredObject::new(effect::REQUEST, PROVENANCE, request_payload(requirement, call.now, &call.effect.payload));
    let not_run = |what: &str, cause: &dyn std::fmt::Display| DispatchError::NotRun(format!("{what}: {cause}"));

    let index = match (selection.decision, selection.grant_index) {
        (world_model::Decision::Allowed { remaining }, Some(index)) => (index, remaining),
        (decision, _) => {
            // A denial writes its record only: no request object, no intent, no debit.
            let denial = match decision {
                world_model::Decision::Denied(denial) => denial,
                world_model::Decision::Allowed { .. } => world_model::Denial::EffectName,
            };
            let detail = denial_detail(ledger, call.grants, selection.grant_index, requirement, denial, call.episode);
            let record = EffectRecord::denied(requirement, budget_before, denial, request.hash);
            let record = record_object(&record).map_err(|e| not_run("denial record", &e))?;
            tokio::time::timeout(call.write_budget, call.store.put_objects(call.episode, &[&record]))
                .await
                .map_err(|_| not_run("denial record", &"the write budget ended"))?
                .map_err(|e| not_run("denial record", &e))?;
            return Ok(Dispatched {
                status: EffectStatus::Denied,
                record,
                output: None,
                denial: Some(detail),
                pending: None,
            });
        }
    };
    let (grant_index, remaining) = index;

    let (episode, owned, request_ref, now) = (call.episode.to_owned(), requirement.clone(), request.hash, call.now);
    let intent = move |ordinal: i64| {
        let intent = EffectIntent::new(&episode, ordinal as u64, &owned, request_ref, now);
        StoredObject::new(effect::INTENT, PROVENANCE, intent.payload())
    };
    let (ordinal, _) = call
        .store
        .append_effect_intent(call.episode, call.call_id, requirement, &request, intent)
        .await
        .map_err(|e| not_run("effect intent", &e))?;
    let effect_id = effect::invocation_id(call.episode, ordinal as u64);
    crate::fault::point("after-intent");
    crate::fault::hold("after-intent").await;
    // The intent is the durable debit; this is its in-memory counterpart for the rest of
    // the call.
    if let Some(grant) = ledger.get_mut(grant_index) {
        grant.budget = remaining;
    }

    let handled = tokio::time::timeout(
        call.handler_timeout,
        call.effects.handle(call.bound, &requirement.effect, &requirement.scope, &call.effect.payload),
    )
    .await;
    crate::fault::point("after-handler");
    let unrecorded = |records: Vec<HashRef>, cause: String| DispatchError::Unrecorded {
        effect_id: effect_id.clone(),
        records,
        cause,
    };
    let (output, failed) = match handled {
        Ok(Ok(output)) => (output.bytes, output.refused),
        // The reason is the failed effect's result, so the caller and the log see it.
        Ok(Err(HandlerFailure::Failed(cause))) => (canonical_value(&json!({"ok": false, "refused": cause})), true),
        // Whether the handler changed anything is unknown: no record, no outcome; the
        // receipt stays indeterminate and the budget stays debited.
        Ok(Err(HandlerFailure::Indeterminate(cause))) => return Err(unrecorded(Vec::new(), cause)),
        Err(_) => return Err(unrecorded(Vec::new(), format!("the handler ran past {:?}", call.handler_timeout))),
    };

    let result = StoredObject::new(effect::RESULT, PROVENANCE, output.clone());
    let record = if failed {
        // A handler's refusal is the caller's to act on, and its reason may quote the request.
        let reason = String::from_utf8_lossy(&output);
        tracing::info!(effect = %effect_id, reason = %world_model::quote_for_log(&reason), "effect failed");
        EffectRecord::failed(requirement, budget_before, request.hash, Some(result.hash))
    } else {
        EffectRecord::ok(requirement, budget_before, request.hash, result.hash)
    };
    let record = record_object(&record).map_err(|e| unrecorded(Vec::new(), e.to_string()))?;
    let outcome = EffectOutcome {
        invocation_id: effect_id.clone(),
        status: if failed { EffectOutcomeStatus::Failed } else { EffectOutcomeStatus::Succeeded },
        record_ref: record.hash,
        logical_time: call.now,
    };
    let outcome = StoredObject::new(effect::OUTCOME, PROVENANCE, outcome.payload());
    let status = if failed { EffectStatus::Failed } else { EffectStatus::Ok };
    let pending = PendingOutcome { effect_id, objects: vec![result, record.clone()], outcome };
    Ok(Dispatched { status, record, output: Some(output), denial: None, pending: Some(pending) })
}

/// Writes an outcome the call will not commit (it failed after the effect ran), on its own
/// budget, before anyone is told.
pub async fn record_outcome(store: &Store, pending: &PendingOutcome, budget: Duration) -> Result<(), String> {
    let objects: Vec<&StoredObject> = pending.objects.iter().collect();
    match tokio::time::timeout(budget, store.append_effect_outcome(&pending.effect_id, &objects, &pending.outcome))
        .await
    {
        Ok(Ok(())) | Ok(Err(StoreError::DuplicateInvocation { .. })) => Ok(()),
        Ok(Err(error)) => Err(format!("writing the outcome of {}: {error}", pending.effect_id)),
        Err(_) => Err(format!("writing the outcome of {} ran past its budget", pending.effect_id)),
    }
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
