//! The invocation coordinator: validate → claim → reconcile → bind → verify → execute →
//! commit, for pure and effectful transitions.
//!
//! Every guard is in the database: the claim row is the in-flight guard and names the call
//! an id was used for; the journal makes a commit single per invocation id; the entry is
//! planned inside the commit transaction against the head current at that moment, so
//! concurrent calls all commit.

// Refusals travel only on the failure path of one call; boxing them buys nothing.
#![allow(clippy::result_large_err)]

mod commit_plan;
mod effectful;
mod pure;
pub(crate) mod reconcile;
pub(crate) mod refusal;
mod sources;
mod validate;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tracing::Instrument as _;
use world_model::{Descriptor, Failure, FailureCode, HashRef, Surface, TaskId, canonical_value};
use world_telemetry::attr;

use commit_plan::Produced;
pub use commit_plan::{INPUT_SEMANTIC_ID, OUTPUT_SEMANTIC_ID, RECORD_SEMANTIC_ID, RECORD_V2_SEMANTIC_ID};
use refusal::Refusal;

use crate::capsule::Runner;
use crate::effects::episodes::EpisodeTurns;
use crate::effects::handlers::Effects;
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::registry::RegistryReader;
use crate::session::{SessionBinding, now_unix};
use crate::store::{Claim, Store, StoreError};

/// One call as it reaches the coordinator.
pub struct Call {
    pub surface: Surface,
    pub session: SessionBinding,
    pub transition_id: String,
    /// `None` mints a fresh random id (MCP).
    pub task_id: Option<String>,
    pub arguments: Vec<u8>,
    pub pin: Option<String>,
}

/// A committed call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invoked {
    pub output: Vec<u8>,
    pub invocation_id: String,
    pub task_id: String,
    pub world_ref: HashRef,
    pub entry_index: i64,
    pub reconciled: bool,
}

pub struct Coordinator {
    store: Store,
    runner: Arc<dyn Runner>,
    limits: Limits,
    /// Names this process in claim rows (`<core>/<incarnation>`).
    owner: String,
    metrics: Arc<Metrics>,
    schemas: validate::Schemas,
    sources: sources::Sources,
    /// A world has been selected. Heads only ever move forward, so once seen this stays true
    /// and R7 needs no read per call.
    world_selected: AtomicBool,
    /// The effect handlers, when the core serves a workspace root.
    effects: Option<Arc<Effects>>,
    turns: EpisodeTurns,
}

/// One validated call on its way through the coordinator.
struct Running<'a> {
    descriptor: &'a Descriptor,
    id: &'a str,
    task: &'a TaskId,
    call: &'a Call,
    input: &'a [u8],
    deadline: Instant,
    claimed: bool,
}

impl Coordinator {
    pub fn new(store: Store, runner: Arc<dyn Runner>, limits: Limits, metrics: Arc<Metrics>) -> Self {
        let owner = store.owner().to_owned();
        Self {
            store,
            runner,
            limits,
            owner,
            metrics,
            schemas: Default::default(),
            sources: Default::default(),
            world_selected: Default::default(),
            effects: None,
            turns: Default::default(),
        }
    }

    /// Serves effectful transitions with these handlers (without them R8 refuses every one).
    pub fn with_effects(mut self, effects: Arc<Effects>) -> Self {
        self.effects = Some(effects);
        self
    }

    pub fn slots_in_use(&self) -> usize {
        self.runner.slots_in_use()
    }

    pub fn interpreter_ref(&self) -> HashRef {
        self.runner.interpreter_ref()
    }

    /// Runs `call` to its end on its own task, so a caller that goes away can never leave a
    /// claim held or a commit half-made.
    pub async fn invoke(self: &Arc<Self>, registry: Arc<RegistryReader>, call: Call) -> Result<Invoked, Failure> {
        let started = Instant::now();
        let this = Arc::clone(self);
        let span = tracing::info_span!(
            "invoke",
            world.transition.id = %call.transition_id,
            world.episode = %call.session.episode,
            world.invocation.id = tracing::field::Empty,
            world.entry.index = tracing::field::Empty,
            world.outcome = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            otel.status_message = tracing::field::Empty,
        );
        let task = tokio::spawn(
            async move {
                let surface = call.surface;
                let transition = call.transition_id.clone();
                let mut id = None;
                let result = this.invoke_inner(&registry, call, started, &mut id).await;
                this.observe(&transition, &result);
                result.map_err(|refusal| {
                    if let Some(cause) = refusal.cause {
                        // The reference's operator line; the cause never reaches the caller.
                        let method = match surface {
                            Surface::A2a => "tasks/send",
                            Surface::Mcp => "tools/call",
                        };
                        let id = id.as_deref().unwrap_or("-");
                        refusal::log_refusal(
                            refusal.failure.code,
                            format_args!("{surface} refusal: {method} {id}"),
                            &cause,
                        );
                    }
                    refusal.failure
                })
            }
            .instrument(span),
        );
        task.await.map_err(|error| refusal::logged(error, format_args!("invocation task ended abnormally")))?
    }

    /// Metrics and span attributes of a finished call.
    fn observe(&self, transition: &str, result: &Result<Invoked, Refusal>) {
        let outcome = match result {
            Ok(_) => "committed",
            Err(refusal) => refusal.failure.code.as_str(),
        };
        // Only a bound transition names its series: ids callers make up must not grow the
        // metrics without bound.
        let bound = !matches!(
            result,
            Err(refusal) if matches!(refusal.failure.code, FailureCode::NotAuthorized | FailureCode::InvalidParams)
        );
        self.metrics.invocation(if bound { transition } else { "-" }, outcome);
        let span = tracing::Span::current();
        span.record(attr::OUTCOME, outcome);
        match result {
            Ok(invoked) => {
                span.record(attr::ENTRY_INDEX, invoked.entry_index);
            }
            Err(_) => {
                // The failure code only: never an internal cause.
                span.record("otel.status_code", "ERROR");
                span.record("otel.status_message", outcome);
            }
        }
    }

    async fn invoke_inner(
        &self,
        registry: &RegistryReader,
        call: Call,
        started: Instant,
        invocation: &mut Option<String>,
    ) -> Result<Invoked, Refusal> {
        let deadline = started + self.limits.invocation;
        let validated = async {
            let current = registry.at(&self.store, call.session.registry_head).await.map_err(Refusal::coded)?;
            validate::call(&call, &current, &self.schemas, self.limits.max_input, now_unix())
        }
        .instrument(tracing::info_span!("validate"))
        .await?;
        let validate::Validated { task, input, pin, id, descriptor } = validated;
        tracing::Span::current().record(attr::INVOCATION_ID, id.as_str());
        *invocation = Some(id.clone());

        // A task id the core minted just now (MCP) cannot name an earlier or a concurrent
        // call, so it needs no claim: one write fewer per call.
        let claimed = call.task_id.is_some();
        if claimed {
            // R17 + reconcile: the claim says whether this id is free, running, or already
            // committed for this very call.
            let digest = call_digest(&descriptor, &HashRef::of(&input), pin.as_ref());
            let now = now_unix();
            // Held no longer than the episode lease the call may take: it ends with it.
            let expires = now + self.limits.episode_lease().as_secs() as i64;
            let claim_started = Instant::now();
            let claim = self
                .store
                .claim_invocation(&id, &digest, &self.owner, now, expires)
                .instrument(tracing::info_span!("reconcile"))
                .await;
            self.metrics.store_operation("claim", claim_started.elapsed());
            match claim? {
                Claim::Acquired => {}
                Claim::Committed => return reconcile::committed(&self.store, &id, &task).await,
                Claim::InFlight | Claim::DifferentCall => return Err(Refusal::of(FailureCode::TaskIdUsed)),
            }
        }
        let running =
            Running { descriptor: &descriptor, id: &id, task: &task, call: &call, input: &input, deadline, claimed };
        let result = if descriptor.declared_effects.is_empty() {
            self.pure(&running).await
        } else {
            self.effectful(&running).await
        };
        // A commit marks its claim committed inside the commit transaction; only a call that
        // did not commit has a claim to free.
        if result.is_err()
            && claimed
            && let Err(error) = self.store.release_invocation(&id, false).await
        {
            tracing::warn!(%error, invocation = %id, "releasing the invocation claim failed; it expires on its own");
        }
        result
    }

    /// R6 and R7: the source, and a selected world, before anything runs.
    async fn prelude(&self, descriptor: &Descriptor) -> Result<Arc<[u8]>, Refusal> {
        let source = self.sources.get(&self.store, &descriptor.transition_fn).await?;
        if !self.world_selected.load(Ordering::Acquire) {
            if self.store.selected_head().await?.is_none() {
                return Err(Refusal::of(FailureCode::WorldAbsent));
            }
            self.world_selected.store(true, Ordering::Release);
        }
        if descriptor.interpreter != self.interpreter_ref() {
            return Err(Refusal::because(
                FailureCode::Unavailable,
                format!(
                    "the descriptor pins interpreter {} but this core serves {}",
                    descriptor.interpreter,
                    self.interpreter_ref()
                ),
            ));
        }
        Ok(source)
    }

    /// A pure transition: one run, its output committed.
    async fn pure(&self, running: &Running<'_>) -> Result<Invoked, Refusal> {
        let source = self.prelude(running.descriptor).await?;
        let remaining = running.deadline.saturating_duration_since(Instant::now());
        let run_started = Instant::now();
        let output = pure::run(&*self.runner, &source, running.input, remaining, self.limits.max_output).await?;
        self.metrics.capsule_run(run_started.elapsed());
        let produced = Produced { input: running.input.to_vec(), output, effects: None };
        let remaining = running.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(Refusal::of(FailureCode::Deadline));
        }
        // The invocation deadline bounds the commit too: a commit waiting its turn behind
        // others is still on time until the call is not.
        self.commit(running, produced, now_unix(), remaining).await
    }

    /// Commits what a call produced, on whatever head is current.
    async fn commit(
        &self,
        running: &Running<'_>,
        produced: Produced,
        now: i64,
        budget: Duration,
    ) -> Result<Invoked, Refusal> {
        let output = produced.output.clone();
        let planner = commit_plan::planner(
            running.descriptor,
            running.id,
            &running.call.session.episode,
            running.call.surface,
            produced,
            now,
        );
        let commit_span = tracing::info_span!("commit", world.entry.index = tracing::field::Empty);
        let commit_started = Instant::now();
        let committed =
            self.store.commit_next(running.id, planner, running.claimed, budget).instrument(commit_span.clone()).await;
        self.metrics.store_operation("commit", commit_started.elapsed());
        let (_, commit) = match committed {
            Ok(done) => done,
            Err(StoreError::AlreadyCommitted { .. }) => {
                // An earlier owner committed this call; the claim we took over says so too.
                if let Err(error) = self.store.release_invocation(running.id, true).await {
                    tracing::warn!(%error, invocation = %running.id, "marking the invocation claim committed failed");
                }
                return reconcile::committed(&self.store, running.id, running.task).await;
            }
            Err(error) => return Err(error.into()),
        };
        commit_span.record(attr::ENTRY_INDEX, commit.entry.entry_index);
        Ok(Invoked {
            output,
            invocation_id: running.id.to_owned(),
            task_id: running.task.as_str().to_owned(),
            world_ref: commit.next_world.reference,
            entry_index: commit.entry.entry_index,
            reconciled: false,
        })
    }
}

/// What makes two calls under one id "the same call".
fn call_digest(descriptor: &Descriptor, input: &HashRef, pin: Option<&HashRef>) -> String {
    let text = canonical_value(&json!({
        "transition": descriptor.id.as_str(),
        "input": input.to_string(),
        "pin": HashRef::optional_text(pin),
    }));
    HashRef::of(&text).to_string()
}
