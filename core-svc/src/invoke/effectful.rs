//! Effectful transitions (reference-core §3.5): plan → broker → finish → compose → commit,
//! and the phases' deadlines.
//!
//! The episode's effect turn is held from before the plan runs until the call ends, so one
//! episode's effects never interleave and its budget is seeded from a spend no other call
//! is changing. Everything after an effect ran runs on a budget of its own, detached from
//! the caller's deadline; a failure there settles the effects' outcomes and answers
//! EffectsUnrecorded naming the records (the rule is kept in `effects::broker`). Nothing is
//! retried.

use std::time::Instant;

use world_model::{
    AdmittedPlan, EffectResult, FailureCode, HashRef, admit_finish, admit_plan, compose_output, finish_input,
    plan_input, seed_grants,
};

use super::commit_plan::{Effects, Produced};
use super::refusal::{self, Refusal, unrecorded};
use super::{Coordinator, Invoked, Running, pure};
use crate::effects::broker::{self, EffectCall, ForCommit, Unsettled};
use crate::session::now_unix;

impl Coordinator {
    pub(super) async fn effectful(&self, running: &Running<'_>) -> Result<Invoked, Refusal> {
        let episode = running.call.session.episode.as_str();
        let lease = self.limits.episode_lease();
        let turn = self.turns.take(&self.store, episode, lease, running.deadline).await.map_err(Refusal::coded)?;
        let result = self.effectful_in_turn(running).await;
        self.turns.end(&self.store, turn).await;
        result
    }

    async fn effectful_in_turn(&self, running: &Running<'_>) -> Result<Invoked, Refusal> {
        let descriptor = running.descriptor;
        let session = &running.call.session;
        // A resent task id whose first attempt reached an effect is spent (R15): its
        // effects are never run again, whatever became of that attempt.
        if running.claimed && self.store.call_requested_effects(running.id).await? {
            return Err(Refusal::of(FailureCode::NotCommitted));
        }
        // R8: every declared effect needs a handler for this episode, before the plan runs.
        let bound = self.effects.as_ref().and_then(|effects| {
            let bound = effects.bind(&session.episode)?;
            descriptor.declared_effects.iter().all(|d| effects.handles(&d.effect)).then_some((effects, bound))
        });
        let Some((effects, bound)) = bound else {
            let names: Vec<&str> = descriptor.declared_effects.iter().map(|d| d.effect.as_str()).collect();
            return Err(Refusal::because(
                FailureCode::EffectsUnsupported,
                format!("no handler for {} in episode {}", names.join(", "), session.episode),
            ));
        };
        let source = self.prelude(descriptor).await?;
        let now = now_unix();
        let spend = self.store.effect_spend(session.episode.as_str()).await?;
        let mut ledger = seed_grants(&session.grants, &spend);

        let plan_span = tracing::info_span!("plan");
        let timeout = self.limits.plan_phase.min(running.deadline.saturating_duration_since(Instant::now()));
        let started = Instant::now();
        let raw = tracing::Instrument::instrument(
            pure::run(&*self.runner, &source, &plan_input(running.input), timeout, self.limits.max_output),
            plan_span,
        )
        .await?;
        self.metrics.capsule_run(started.elapsed());
        let plan = admit_plan(&raw, &descriptor.declared_effects).map_err(refusal::plan_refused)?;
        let plan_ref = HashRef::of(&plan.canonical);

        if plan.effects.is_empty() {
            // A refusal plan commits too, under the caller's deadline.
            let output = compose(&plan, &plan_ref, &[], None, self.limits.max_output)?;
            let produced = Produced {
                input: running.input.to_vec(),
                output,
                effects: Some(Effects { plan: plan.canonical.clone(), effects: ForCommit::default() }),
            };
            let remaining = running.deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(Refusal::of(FailureCode::Deadline));
            }
            return self.commit(running, produced, now, remaining).await;
        }

        let mut results = Vec::with_capacity(plan.effects.len());
        let mut unsettled = Unsettled::new(session.episode.as_str());
        for planned in &plan.effects {
            // The handler leaves the call's tail its share (`Limits::after_handler`), and runs
            // at most its own bound.
            let left = running.deadline.saturating_duration_since(Instant::now());
            let handler_timeout = self.limits.handler.min(left.saturating_sub(self.limits.after_handler()));
            if handler_timeout.is_zero() {
                // Too late to run an effect and still record it: refuse before its intent.
                let cause = "no time left for the effect's handler";
                if !unsettled.any_ran() {
                    return Err(Refusal::because(FailureCode::Deadline, cause));
                }
                return Err(self.unrecorded(unsettled, cause.to_owned()).await);
            }
            let call = EffectCall {
                store: &self.store,
                effects,
                bound: &bound,
                episode: session.episode.as_str(),
                grants: &session.grants,
                call_id: running.id,
                effect: planned,
                now,
                handler_timeout,
            };
            let span = tracing::info_span!("effect", world.effect = %planned.requirement.effect);
            let dispatched =
                tracing::Instrument::instrument(broker::dispatch(&mut ledger, &mut unsettled, call), span).await;
            match dispatched {
                Ok(result) => results.push(result),
                Err(error) => {
                    let cause = refusal::dispatch_failure(error, unsettled.any_ran())?;
                    return Err(self.unrecorded(unsettled, cause).await);
                }
            }
        }

        // The tail: its own budget, whatever is left of the caller's.
        let tail_started = Instant::now();
        let budget = self.limits.post_effect;
        let finish_output: Result<Option<Vec<u8>>, Refusal> = async {
            if !plan.finish {
                return Ok(None);
            }
            let timeout = self.limits.finish_phase.min(budget);
            let input =
                finish_input(running.input, &results).map_err(|e| Refusal::because(FailureCode::ExecutionFailed, e))?;
            let span = tracing::info_span!("finish");
            let raw = tracing::Instrument::instrument(
                pure::run(&*self.runner, &source, &input, timeout, self.limits.max_output),
                span,
            )
            .await?;
            Ok(Some(admit_finish(&raw).map_err(|e| Refusal::because(FailureCode::ExecutionFailed, e))?))
        }
        .await;
        // A read ran beside its intent, and counts from the moment the intent is durable.
        if let Err(error) = unsettled.confirm().await {
            let cause = refusal::dispatch_failure(error, unsettled.any_ran())?;
            return Err(self.unrecorded(unsettled, cause).await);
        }
        let tail = async {
            let finish_output = finish_output?;
            let output = compose(&plan, &plan_ref, &results, finish_output.as_deref(), self.limits.max_output)?;
            crate::fault::point("before-commit");
            let produced = Produced {
                input: running.input.to_vec(),
                output,
                effects: Some(Effects { plan: plan.canonical.clone(), effects: unsettled.for_commit() }),
            };
            let remaining = budget.saturating_sub(tail_started.elapsed());
            self.commit(running, produced, now, remaining).await
        };
        match tail.await {
            // The commit carried the outcomes and is durable.
            Ok(invoked) if !invoked.reconciled => {
                unsettled.committed();
                Ok(invoked)
            }
            // Another attempt committed this call, without these outcomes.
            Ok(invoked) => match unsettled.settle(&self.store, self.limits.post_effect).await {
                (_, Ok(())) => Ok(invoked),
                (records, Err(failed)) => Err(unrecorded(records, failed)),
            },
            Err(refusal) => Err(self.unrecorded(unsettled, refusal.cause.unwrap_or(refusal.failure.message)).await),
        }
    }

    /// The answer of a call that will not commit the effects that ran: their outcomes are
    /// written first, then EffectsUnrecorded names the records. `cause` (with any write that
    /// failed) is for the core's log.
    async fn unrecorded(&self, unsettled: Unsettled, cause: String) -> Refusal {
        match unsettled.settle(&self.store, self.limits.post_effect).await {
            (records, Ok(())) => unrecorded(records, cause),
            (records, Err(failed)) => unrecorded(records, format!("{cause}; {failed}")),
        }
    }
}

/// The call's output; one that is not an object is refused.
fn compose(
    plan: &AdmittedPlan,
    plan_ref: &HashRef,
    results: &[EffectResult],
    finish_output: Option<&[u8]>,
    max_output: usize,
) -> Result<Vec<u8>, Refusal> {
    compose_output(plan, plan_ref, results, finish_output, max_output)
        .map_err(|e| Refusal::because(FailureCode::OutputNotObject, e))
}
