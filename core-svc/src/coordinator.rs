//! The invocation coordinator for pure transitions: validate → claim →
//! reconcile → bind → verify → execute → commit.
//!
//! Every guard is in the database: the claim row is the in-flight guard and
//! names the call an id was used for; the journal makes a commit single per
//! invocation id; the entry is planned inside the commit transaction against
//! the head current at that moment, so concurrent calls all commit.

// Refusals travel only on the failure path of one call; boxing them buys nothing.
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use world_model::registry::TRANSITION_SOURCE;
use world_model::{
    Descriptor, EntryHeader, Episode, Failure, FailureCode, HashRef, Surface, TaskId, canonical_value, entry_hash,
    invocation_id, world_ref,
};

use crate::capsule::{self, CapsuleError, VerifiedInterpreter};
use crate::metrics::Metrics;
use crate::registry::{Current, RegistryReader};
use crate::session::{SessionBinding, now_unix, random_bytes};
use crate::store::{Claim, Commit, LogEntry, Planner, Store, StoreError, StoredObject, WorldRow};
use crate::subprocess::{RunError, Slots};
use tracing::Instrument as _;
use world_telemetry::attr;

pub const INPUT_SEMANTIC_ID: &str = "world/invocation-input/v1";
pub const OUTPUT_SEMANTIC_ID: &str = "world/invocation-output/v1";
pub const RECORD_SEMANTIC_ID: &str = "world/invocation-record/v1";

/// Limits of one invocation (the reference's defaults).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub invocation: Duration,
    pub max_input: usize,
    pub max_output: usize,
    /// A running claim older than this belongs to a dead owner.
    pub stale_claim: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            invocation: Duration::from_secs(20),
            max_input: 1024 * 1024,
            max_output: 1024 * 1024,
            stale_claim: Duration::from_secs(120),
        }
    }
}

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
    interpreter: VerifiedInterpreter,
    slots: Slots,
    limits: Limits,
    /// Names this process in claim rows.
    owner: String,
    metrics: Arc<Metrics>,
    /// Compiled input schemas by the hash of their canonical text: a schema
    /// compiles once, not per call.
    validators: std::sync::Mutex<std::collections::HashMap<HashRef, Arc<jsonschema::Validator>>>,
    /// Verified transition sources by their ref: content-addressed, so never stale.
    sources: std::sync::Mutex<SourceCache>,
    /// A world has been selected. Heads only ever move forward, so once seen this stays true
    /// and R7 needs no read per call.
    world_selected: std::sync::atomic::AtomicBool,
}

/// Bound on the bytes of cached sources; past it the cache starts over.
const SOURCE_CACHE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Default)]
struct SourceCache {
    sources: std::collections::HashMap<HashRef, Arc<[u8]>>,
    bytes: usize,
}

/// Bound on the compiled-schema cache; past it the cache starts over.
const VALIDATOR_CACHE: usize = 4096;

/// A call that passed validation.
struct Validated {
    task: TaskId,
    /// Canonical JSON of the arguments.
    input: Vec<u8>,
    pin: Option<HashRef>,
    id: String,
    descriptor: Descriptor,
}

/// A failure plus the internal cause the core logs once (callers never see it).
struct Refusal {
    failure: Failure,
    cause: Option<String>,
}

impl Refusal {
    fn of(code: FailureCode) -> Self {
        Self { failure: Failure::of(code), cause: None }
    }

    fn because(code: FailureCode, cause: impl ToString) -> Self {
        Self { failure: Failure::of(code), cause: Some(cause.to_string()) }
    }
}

impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::WorldAbsent => Refusal::of(FailureCode::WorldAbsent),
            StoreError::Uncertain(cause) => Refusal::because(FailureCode::Unconfirmed, cause),
            StoreError::Deadline => Refusal::of(FailureCode::Deadline),
            StoreError::DuplicateInvocation { .. } => Refusal::of(FailureCode::TaskIdUsed),
            StoreError::Conflict { .. } => Refusal::of(FailureCode::HeadMoved),
            other => Refusal::because(FailureCode::Unavailable, other),
        }
    }
}

impl Coordinator {
    pub fn new(
        store: Store,
        interpreter: VerifiedInterpreter,
        slots: Slots,
        limits: Limits,
        metrics: Arc<Metrics>,
    ) -> Self {
        let owner = format!("core-{}-{}", std::process::id(), hex::encode(&random_bytes()[..4]));
        Self {
            store,
            interpreter,
            slots,
            limits,
            owner,
            metrics,
            validators: Default::default(),
            sources: Default::default(),
            world_selected: Default::default(),
        }
    }

    pub fn slots_in_use(&self) -> usize {
        self.slots.in_use()
    }

    pub fn interpreter_ref(&self) -> HashRef {
        self.interpreter.interpreter.reference
    }

    /// Runs `call` to its end on its own task, so a caller that goes away
    /// can never leave a claim held or a commit half-made.
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
                let outcome = match &result {
                    Ok(_) => "committed",
                    Err(refusal) => refusal.failure.code.as_str(),
                };
                // Only a bound transition names its series: ids callers make up
                // must not grow the metrics without bound.
                let bound = !matches!(
                    &result,
                    Err(refusal) if matches!(refusal.failure.code, FailureCode::NotAuthorized | FailureCode::InvalidParams)
                );
                this.metrics.invocation(if bound { &transition } else { "-" }, outcome);
                let span = tracing::Span::current();
                span.record(attr::OUTCOME, outcome);
                match &result {
                    Ok(invoked) => {
                        span.record(attr::ENTRY_INDEX, invoked.entry_index);
                    }
                    Err(_) => {
                        // The failure code only: never an internal cause.
                        span.record("otel.status_code", "ERROR");
                        span.record("otel.status_message", outcome);
                    }
                }
                result.map_err(|refusal| {
                    if let Some(cause) = refusal.cause {
                        // The reference's operator line; the cause never reaches the caller.
                        let method = match surface {
                            Surface::A2a => "tasks/send",
                            Surface::Mcp => "tools/call",
                        };
                        let id = id.as_deref().unwrap_or("-");
                        tracing::error!(
                            code = refusal.failure.code.as_str(),
                            "{surface} refusal: {method} {id}: {cause:?}"
                        );
                    }
                    refusal.failure
                })
            }
            .instrument(span),
        );
        match task.await {
            Ok(result) => result,
            Err(error) => {
                tracing::error!(%error, "invocation task ended abnormally");
                Err(Failure::of(FailureCode::Unavailable))
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
        let validate = tracing::info_span!("validate");
        let validated = self.validate(registry, &call).instrument(validate).await?;
        let Validated { task, input, pin, id, descriptor } = validated;
        tracing::Span::current().record(attr::INVOCATION_ID, id.as_str());
        *invocation = Some(id.clone());
        let episode = &call.session.episode;

        // A task id the core minted just now (MCP) cannot name an earlier or a
        // concurrent call, so it needs no claim: one write fewer per call.
        let minted = call.task_id.is_none();
        if !minted {
            // R17 + reconcile: the claim says whether this id is free, running,
            // or already committed for this very call.
            let input_ref = HashRef::of(&input);
            let digest = call_digest(&descriptor, &input_ref, pin.as_ref());
            let now = now_unix();
            let stale = now.saturating_sub(self.limits.stale_claim.as_secs() as i64);
            let claim_started = Instant::now();
            let claim = self
                .store
                .claim_invocation(&id, &digest, &self.owner, now, stale)
                .instrument(tracing::info_span!("reconcile"))
                .await;
            self.metrics.store_operation("claim", claim_started.elapsed());
            match claim? {
                Claim::Acquired => {}
                Claim::Committed => return self.reconcile(&id, &task).await,
                Claim::InFlight | Claim::DifferentCall => return Err(Refusal::of(FailureCode::TaskIdUsed)),
            }
        }
        let result =
            self.execute_and_commit(&descriptor, &id, &task, episode, &input, deadline, call.surface, !minted).await;
        // A commit marks its claim committed inside the commit transaction;
        // only a call that did not commit has a claim to free.
        if result.is_err()
            && !minted
            && let Err(error) = self.store.release_invocation(&id, false).await
        {
            tracing::warn!(%error, invocation = %id, "releasing the invocation claim failed; it expires on its own");
        }
        result
    }

    /// R1–R5: the call's shape, its binding to a visible descriptor, the pin
    /// and the arguments against the input schema.
    async fn validate(&self, registry: &RegistryReader, call: &Call) -> Result<Validated, Refusal> {
        // R1: the call's shape.
        let task = match &call.task_id {
            Some(text) => TaskId::parse(text).map_err(|e| Refusal::because(FailureCode::InvalidParams, e))?,
            None => TaskId::mint(random_bytes()),
        };
        let arguments: serde_json::Value =
            serde_json::from_slice(&call.arguments).map_err(|e| Refusal::because(FailureCode::InvalidParams, e))?;
        if !arguments.is_object() {
            return Err(Refusal::because(FailureCode::InvalidParams, "arguments are not a JSON object"));
        }
        let input = canonical_value(&arguments);
        if input.len() > self.limits.max_input {
            return Err(Refusal::because(FailureCode::InvalidParams, "canonical input exceeds the input cap"));
        }
        let pin = match call.pin.as_deref() {
            None | Some("") => None,
            Some(text) => Some(HashRef::parse(text).map_err(|e| Refusal::because(FailureCode::InvalidParams, e))?),
        };
        let id = invocation_id(call.surface, &call.session.episode, &task);

        // R2–R5: bind against the session's live grants and verify the pin.
        let current = registry
            .at(&self.store, call.session.registry_head)
            .await
            .map_err(|e| Refusal::because(FailureCode::Unavailable, e))?;
        let descriptor = bind(&current, call, now_unix())?;
        if let Some(pin) = pin
            && pin != descriptor.transition_fn
        {
            return Err(Refusal::of(FailureCode::ProposalMismatch));
        }
        if !descriptor.declared_effects.is_empty() {
            return Err(Refusal::of(FailureCode::EffectsUnsupported));
        }
        self.validate_arguments(&descriptor, &arguments)?;
        Ok(Validated { task, input, pin, id, descriptor })
    }

    #[allow(clippy::too_many_arguments)]
    async fn execute_and_commit(
        &self,
        descriptor: &Descriptor,
        id: &str,
        task: &TaskId,
        episode: &Episode,
        input: &[u8],
        deadline: Instant,
        surface: Surface,
        claimed: bool,
    ) -> Result<Invoked, Refusal> {
        let source = self.source(&descriptor.transition_fn).await?;
        // R7: a world must exist before anything runs.
        if !self.world_selected.load(std::sync::atomic::Ordering::Acquire) {
            if self.store.selected_head().await?.is_none() {
                return Err(Refusal::of(FailureCode::WorldAbsent));
            }
            self.world_selected.store(true, std::sync::atomic::Ordering::Release);
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

        let input_text = std::str::from_utf8(input).map_err(|e| Refusal::because(FailureCode::InvalidParams, e))?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        let run_started = Instant::now();
        let finished = capsule::run(&self.interpreter, &source, input_text, &self.slots, remaining)
            .await
            .map_err(classify_capsule_error)?;
        self.metrics.capsule_run(run_started.elapsed());
        if !finished.success() {
            let stderr = String::from_utf8_lossy(&finished.stderr);
            let code = if stderr.contains("ARG_DECODE_MISMATCH") || stderr.contains("entrypoint 'main' not found") {
                FailureCode::Incompatible
            } else {
                FailureCode::ExecutionFailed
            };
            return Err(Refusal::because(code, format!("interpreter exit {}: {}", finished.status, stderr.trim())));
        }
        // R12: one trailing newline stripped, capped, a JSON object.
        let mut output = finished.stdout;
        if output.last() == Some(&b'\n') {
            output.pop();
        }
        if output.len() > self.limits.max_output {
            return Err(Refusal::because(FailureCode::OutputNotObject, "the output exceeds the output cap"));
        }
        match serde_json::from_slice::<serde_json::Value>(&output) {
            Ok(serde_json::Value::Object(_)) => {}
            _ => return Err(Refusal::because(FailureCode::OutputNotObject, "the output is not a JSON object")),
        }

        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(Refusal::of(FailureCode::Deadline));
        }
        let planner = plan(descriptor, id, episode, surface, input.to_vec(), output.clone(), now_unix());
        let commit_span = tracing::info_span!("commit", world.entry.index = tracing::field::Empty);
        let commit_started = Instant::now();
        let committed = self
            .store
            // The invocation deadline bounds the commit too: a commit waiting its
            // turn behind others is still on time until the call is not.
            .commit_next(id, planner, claimed, remaining)
            .instrument(commit_span.clone())
            .await;
        self.metrics.store_operation("commit", commit_started.elapsed());
        if let Ok((_, commit)) = &committed {
            commit_span.record(attr::ENTRY_INDEX, commit.entry.entry_index);
        }
        let (_, commit) = match committed {
            Ok(done) => done,
            Err(StoreError::AlreadyCommitted { .. }) => {
                // An earlier owner committed this call; the claim we took over says so too.
                if let Err(error) = self.store.release_invocation(id, true).await {
                    tracing::warn!(%error, invocation = %id, "marking the invocation claim committed failed");
                }
                return self.reconcile(id, task).await;
            }
            Err(error) => return Err(error.into()),
        };
        Ok(Invoked {
            output,
            invocation_id: id.to_owned(),
            task_id: task.as_str().to_owned(),
            world_ref: commit.next_world.reference,
            entry_index: commit.entry.entry_index,
            reconciled: false,
        })
    }

    /// R6: the source object exists and hashes to its ref.
    async fn source(&self, reference: &HashRef) -> Result<Arc<[u8]>, Refusal> {
        if let Some(source) = self.sources.lock().unwrap_or_else(|p| p.into_inner()).sources.get(reference) {
            return Ok(Arc::clone(source));
        }
        let source: Arc<[u8]> = self
            .store
            .get_object(reference, true)
            .await?
            .filter(|o| o.semantic_id == TRANSITION_SOURCE)
            .and_then(|o| o.payload)
            .ok_or_else(|| Refusal::because(FailureCode::Unavailable, "the transition source object is absent"))?
            .into();
        if HashRef::of(&source) != *reference {
            return Err(Refusal::because(FailureCode::Unavailable, "the transition source object is corrupt"));
        }
        let mut cache = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        if cache.bytes + source.len() > SOURCE_CACHE_BYTES {
            *cache = SourceCache::default();
        }
        cache.bytes += source.len();
        cache.sources.insert(*reference, Arc::clone(&source));
        Ok(source)
    }

    fn validate_arguments(&self, descriptor: &Descriptor, arguments: &serde_json::Value) -> Result<(), Refusal> {
        let key = HashRef::of(descriptor.input_schema.as_str().as_bytes());
        let cached = self.validators.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        let validator = match cached {
            Some(validator) => validator,
            None => {
                let schema: serde_json::Value = serde_json::from_str(descriptor.input_schema.as_str())
                    .map_err(|e| Refusal::because(FailureCode::Unavailable, e))?;
                let validator = Arc::new(
                    jsonschema::validator_for(&schema).map_err(|e| Refusal::because(FailureCode::Unavailable, e))?,
                );
                let mut cache = self.validators.lock().unwrap_or_else(|p| p.into_inner());
                if cache.len() >= VALIDATOR_CACHE {
                    cache.clear();
                }
                cache.insert(key, Arc::clone(&validator));
                validator
            }
        };
        match validator.iter_errors(arguments).next() {
            None => Ok(()),
            Some(error) => Err(Refusal {
                failure: Failure::new(
                    FailureCode::InvalidParams,
                    format!("arguments do not match the input schema: {error}"),
                ),
                cause: None,
            }),
        }
    }

    /// The committed result of `id`, read back and verified (nothing runs).
    async fn reconcile(&self, id: &str, task: &TaskId) -> Result<Invoked, Refusal> {
        let integrity = |what: &str| Refusal::because(FailureCode::Unavailable, format!("reconcile {id}: {what}"));
        let receipt = self.store.receipt(id).await?;
        let crate::store::Receipt::Resolved { result_ref } = receipt else {
            return Err(Refusal::of(FailureCode::NotCommitted));
        };
        let world = self.store.world(&result_ref).await?.ok_or_else(|| integrity("the committed world is absent"))?;
        if world_ref(world.revision, &world.state_root, &world.log_head) != world.reference {
            return Err(integrity("the committed world does not hash to its ref"));
        }
        let output = self
            .store
            .get_object(&world.state_root, true)
            .await?
            .and_then(|o| o.payload)
            .filter(|payload| HashRef::of(payload) == world.state_root)
            .ok_or_else(|| integrity("the committed output is absent or corrupt"))?;
        Ok(Invoked {
            output,
            invocation_id: id.to_owned(),
            task_id: task.as_str().to_owned(),
            world_ref: world.reference,
            entry_index: world.revision,
            reconciled: true,
        })
    }
}

/// R2/R3: the transition must be in the registry and visible to the session.
fn bind(current: &Current, call: &Call, now: i64) -> Result<Descriptor, Refusal> {
    let Some((_, revision)) = current else { return Err(Refusal::of(FailureCode::NotAuthorized)) };
    revision
        .entry(&call.transition_id)
        .filter(|d| d.visible_to(&call.session.grants, now))
        .cloned()
        .ok_or_else(|| Refusal::of(FailureCode::NotAuthorized))
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

fn classify_capsule_error(error: CapsuleError) -> Refusal {
    match error {
        CapsuleError::Run(RunError::NoSlot(_)) => Refusal::of(FailureCode::CapacityExceeded),
        CapsuleError::Run(RunError::Timeout(_)) => Refusal::of(FailureCode::Deadline),
        error @ CapsuleError::Integrity { .. } => Refusal::because(FailureCode::Unavailable, error),
        error => Refusal::because(FailureCode::ExecutionFailed, error),
    }
}

/// The commit of one pure call, planned against the head world `w`
/// (reference-core §3.6).
fn plan(
    descriptor: &Descriptor,
    id: &str,
    episode: &Episode,
    surface: Surface,
    input: Vec<u8>,
    output: Vec<u8>,
    now: i64,
) -> Planner {
    let by = surface.written_by();
    let id = id.to_owned();
    let episode = episode.as_str().to_owned();
    let skill = descriptor.id.as_str().to_owned();
    let (transition_fn, interpreter, epoch) =
        (descriptor.transition_fn, descriptor.interpreter, descriptor.semantics_epoch);
    Box::new(move |w: &WorldRow| {
        let input = StoredObject::new(INPUT_SEMANTIC_ID, by, input);
        let output = StoredObject::new(OUTPUT_SEMANTIC_ID, by, output);
        let record = StoredObject::new(
            RECORD_SEMANTIC_ID,
            by,
            canonical_value(&json!({
                "invocationId": id,
                "episodeId": episode,
                "skillId": skill,
                "transitionFn": transition_fn.to_string(),
                "interpreter": interpreter.to_string(),
                "semanticsEpoch": epoch,
                "input": input.hash.to_string(),
                "output": output.hash.to_string(),
            })),
        );
        let index = w.revision + 1;
        let header = EntryHeader {
            entry_index: index,
            semantics_epoch: epoch,
            transition_fn: &transition_fn,
            interpreter: &interpreter,
            prev_entry_hash: &w.log_head,
            written_by: by,
        };
        let hash = entry_hash(&header, &record.hash);
        let next_world = WorldRow {
            reference: world_ref(index, &output.hash, &hash),
            revision: index,
            state_root: output.hash,
            log_head: hash,
        };
        let entry = LogEntry {
            entry_index: index,
            semantics_epoch: epoch,
            transition_fn,
            interpreter,
            prev_entry_hash: w.log_head,
            written_by: by.to_owned(),
            entry_hash: hash,
            transition_ref: record.hash,
        };
        Commit {
            invocation_id: Some(id),
            observed_head: Some(w.reference),
            objects: vec![input, output, record],
            next_world,
            entry,
            logical_time: now,
        }
    })
}
