//! Effectful transitions (reference-core §3.5): plan → broker → finish → compose → commit.
//!
//! The episode's effect turn is held from before the plan runs until the call ends, so one
//! episode's effects never interleave and its budget is seeded from a spend no other call
//! is changing. Everything after an effect ran runs on a budget of its own, detached from
//! the caller's deadline, and any failure there is EffectsUnrecorded naming the records:
//! the effect happened and is recorded, the call is not committed, nothing is retried.

use std::time::Instant;

use world_model::{
    AdmittedPlan, EffectResult, FailureCode, HashRef, admit_finish, admit_plan, compose_output, finish_input,
    plan_input, seed_grants,
};

use super::commit_plan::{Effects, Produced};
use super::refusal::{self, Refusal, unrecorded};
use super::{Coordinator, Invoked, Running, pure};
use crate::effects::broker::{self, EffectCall, PendingOutcome};
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
            let output = compose(&plan, &plan_ref, &[], None, self.limits.max_output)
                .map_err(|cause| Refusal::because(FailureCode::OutputNotObject, cause))?;
            let produced = Produced {
                input: running.input.to_vec(),
                output,
                effects: Some(Effects { plan: plan.canonical.clone(), records: Vec::new(), outcomes: Vec::new() }),
            };
            let remaining = running.deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(Refusal::of(FailureCode::Deadline));
            }
            return self.commit(running, produced, now, remaining).await;
        }

        let mut results = Vec::with_capacity(plan.effects.len());
        let mut record_objects = Vec::with_capacity(plan.effects.len());
        let mut pending = Vec::with_capacity(plan.effects.len());
        for planned in &plan.effects {
            // The handler leaves the call's tail its share (`Limits::after_handler`), and runs
            // at most its own bound.
            let left = running.deadline.saturating_duration_since(Instant::now());
            let handler_timeout = self.limits.handler.min(left.saturating_sub(self.limits.after_handler()));
            if handler_timeout.is_zero() {
                // Too late to run an effect and still record it: refuse before the intent.
                return Err(Refusal::because(FailureCode::Deadline, "no time left for the effect's handler"));
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
                write_budget: self.limits.post_effect,
            };
            let span = tracing::info_span!("effect", world.effect = %planned.requirement.effect);
            let dispatched = tracing::Instrument::instrument(broker::dispatch(&mut ledger, call), span).await;
            match dispatched {
                Ok(done) => {
                    results.push(EffectResult {
                        id: planned.id.clone(),
                        effect: planned.requirement.effect.clone(),
                        status: done.status,
                        record: done.record.hash,
                        output: done.output,
                        denial: done.denial,
                    });
                    record_objects.push(done.record);
                    pending.extend(done.pending);
                }
                Err(error) => {
                    let cause = refusal::dispatch_failure(error, !pending.is_empty())?;
                    let records = results.iter().map(|r| r.record).collect();
                    let cause = self.settle(&pending, cause).await;
                    return Err(unrecorded(records, cause));
                }
            }
        }
        let records: Vec<HashRef> = results.iter().map(|r| r.record).collect();

        // The tail: its own budget, whatever is left of the caller's.
        let tail_started = Instant::now();
        let budget = self.limits.post_effect;
        let tail = async {
            let finish_output = if plan.finish {
                let timeout = self.limits.finish_phase.min(budget);
                let span = tracing::info_span!("finish");
                let raw = tracing::Instrument::instrument(
                    pure::run(
                        &*self.runner,
                        &source,
                        &finish_input(running.input, &results).map_err(|e| e.to_string())?,
                        timeout,
                        self.limits.max_output,
                    ),
                    span,
                )
                .await
                .map_err(|refusal| refusal.cause.unwrap_or(refusal.failure.message))?;
                Some(admit_finish(&raw).map_err(|e| e.to_string())?)
            } else {
                None
            };
            let output = compose(&plan, &plan_ref, &results, finish_output.as_deref(), self.limits.max_output)?;
            crate::fault::point("before-commit");
            let produced = Produced {
                input: running.input.to_vec(),
                output,
                effects: Some(Effects {
                    plan: plan.canonical.clone(),
                    records: record_objects.clone(),
                    outcomes: pending.clone(),
                }),
            };
            let remaining = budget.saturating_sub(tail_started.elapsed());
            self.commit(running, produced, now, remaining)
                .await
                .map_err(|refusal| refusal.cause.unwrap_or_else(|| refusal.failure.code.as_str().to_owned()))
        };
        match tail.await {
            Ok(invoked) => Ok(invoked),
            Err(cause) => {
                let cause = self.settle(&pending, cause).await;
                Err(unrecorded(records, cause))
            }
        }
    }

    /// Makes the outcomes of effects that ran durable when the call will not commit them,
    /// before anyone is told; returns `cause` with any write that failed added.
    async fn settle(&self, pending: &[PendingOutcome], cause: String) -> String {
        let mut cause = cause;
        for outcome in pending {
            if let Err(error) = broker::record_outcome(&self.store, outcome, self.limits.post_effect).await {
                cause = format!("{cause}; {error}");
            }
        }
        cause
    }
}

fn compose(
    plan: &AdmittedPlan,
    plan_ref: &HashRef,
    results: &[EffectResult],
    finish_output: Option<&[u8]>,
    max_output: usize,
) -> Result<Vec<u8>, String> {
    compose_output(plan, plan_ref, results, finish_output, max_output).map_err(|e| e.to_string())
}
