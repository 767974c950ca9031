//! Compare-and-append: the one mutation of world state, in one transaction.
//!
//! Commits are group-committed: a commit joins the queue of pending commits
//! and every turn at the write lock commits all that are pending, in order,
//! in one transaction, so they share its BEGIN, its head read and its durable
//! COMMIT (the fsync that bounds a lone commit). Each is checked in full
//! against the world the ones before it left, exactly as if it ran alone.
//!
//! The transaction runs on a task of its own (on the commit thread), so a caller
//! giving up (a client disconnect, a deadline) can never abandon it half-way:
//! until its commit has passed its checks in a batch a give-up is a definite
//! "not committed"; from then on the outcome is `Uncertain` until reconciled.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::Row;
use tokio::sync::{OwnedMutexGuard, oneshot};

use world_model::HashRef;

use super::effects::{NewIntent, StagedIntent, stage_intent, write_intents};
use super::journal::{self, IntentKey, JournalState};
use super::script::{Script, placeholders};
use super::tx::Tx;
use super::{
    Commit, Committed, Receipt, SELECTED_WORLD_HEAD, Store, StoreError, StoredObject, WorldRow, insert_objects,
    set_head,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Working,
    GaveUp,
    Committing,
}

/// Plans a commit against the world that is the selected head when the
/// commit transaction runs.
pub type Planner = Box<dyn FnOnce(&WorldRow) -> Commit + Send>;

/// What to commit: a commit fixed by its caller (REST, genesis), or one
/// planned inside the transaction (invocations), which therefore never
/// loses a race to another commit.
enum Proposal {
    Fixed(Box<Commit>),
    /// `claimed`: the call holds an invocation claim, which turns committed with the commit.
    Planned {
        invocation_id: String,
        planner: Planner,
        claimed: bool,
    },
}

type Outcome = Result<(Committed, Commit), StoreError>;

/// Work waiting for the writer turn: a commit, or an effect intent, which shares the
/// transaction (and the durable COMMIT) of the commits queued beside it.
pub(super) enum Queued {
    Commit(QueuedCommit),
    Intent(QueuedIntent),
}

pub(super) struct QueuedCommit {
    proposal: Proposal,
    phase: Arc<Mutex<Phase>>,
    reply: oneshot::Sender<Outcome>,
}

pub(super) struct QueuedIntent {
    pub(super) intent: NewIntent,
    pub(super) reply: oneshot::Sender<Result<(i64, StoredObject), StoreError>>,
}

pub(super) type Pending = Arc<Mutex<VecDeque<Queued>>>;

/// At most this many commits and intents share one transaction, so one turn stays short.
const MAX_BATCH: usize = 64;

/// What the batch's transaction holds beyond what it has written: the world its accepted
/// commits lead to, the journal as they leave it, and the entries they log.
struct BatchView {
    world: Option<WorldRow>,
    journal: HashMap<String, JournalState>,
    entry_indexes: HashSet<i64>,
    entry_hashes: HashSet<HashRef>,
}

/// A commit that passed every check, written together with the rest of its batch.
struct Accepted {
    commit: Commit,
    /// The same call committed this very commit before: nothing to write.
    replayed: bool,
    journal_rows: Vec<(&'static str, StoredObject)>,
    claimed: bool,
}

impl Accepted {
    /// The episode its entry and objects are written for.
    fn episode(&self) -> &str {
        self.commit.episode.as_ref().map_or(super::reads::NO_EPISODE, |episode| episode.as_str())
    }

    fn committed(&self) -> Committed {
        Committed { selected_head: self.commit.next_world.reference, replayed: self.replayed }
    }
}

impl Proposal {
    fn invocation_id(&self) -> Option<&str> {
        match self {
            Proposal::Fixed(commit) => commit.invocation_id.as_deref(),
            Proposal::Planned { invocation_id, .. } => Some(invocation_id),
        }
    }
}

/// Why one commit of a batch failed: refused with nothing written (the batch
/// goes on), or a database error that ends the whole transaction.
enum Failed {
    Refused(StoreError),
    Broken(StoreError),
}

impl From<StoreError> for Failed {
    fn from(error: StoreError) -> Self {
        match error {
            // On PostgreSQL any failed statement aborts the transaction.
            error @ (StoreError::Database(_) | StoreError::Sqlite(_)) => Failed::Broken(error),
            error => Failed::Refused(error),
        }
    }
}

impl Store {
    /// Commits `commit` if the selected head is still `commit.observed_head`.
    /// `budget` bounds the work before the durable step.
    pub async fn commit(&self, commit: Commit, budget: Duration) -> Result<Committed, StoreError> {
        validate(&commit)?;
        self.run_commit(Proposal::Fixed(Box::new(commit)), budget).await.map(|(committed, _)| committed)
    }

    /// Plans and commits the next entry on whatever head is selected when
    /// the transaction holds the write lock. An invocation id that already
    /// committed is reported as `AlreadyCommitted`, never planned again.
    /// `claimed` says the call holds an invocation claim to mark committed.
    pub async fn commit_next(
        &self,
        invocation_id: &str,
        planner: Planner,
        claimed: bool,
        budget: Duration,
    ) -> Result<(Committed, Commit), StoreError> {
        let proposal = Proposal::Planned { invocation_id: invocation_id.to_owned(), planner, claimed };
        self.run_commit(proposal, budget).await
    }

    /// Queues `work` for the writer turn.
    pub(super) fn enqueue(&self, work: Queued) {
        lock(&self.pending).push_back(work);
        // Every queued item brings a turn at the write lock and every turn writes what is
        // pending, so an item is in the first batch after it was queued.
        committer().spawn({
            let store = self.clone();
            async move {
                let turn = store.writer_turn().await;
                let batch: Vec<Queued> = {
                    let mut pending = lock(&store.pending);
                    let n = pending.len().min(MAX_BATCH);
                    pending.drain(..n).collect()
                };
                if !batch.is_empty() {
                    store.commit_batch(turn, batch).await;
                }
            }
        });
    }

    async fn run_commit(&self, proposal: Proposal, budget: Duration) -> Outcome {
        let phase = Arc::new(Mutex::new(Phase::Working));
        let (reply, outcome) = oneshot::channel();
        self.enqueue(Queued::Commit(QueuedCommit { proposal, phase: Arc::clone(&phase), reply }));
        match tokio::time::timeout(budget, outcome).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(StoreError::Uncertain("the commit task ended abnormally".into())),
            Err(_elapsed) => {
                let mut phase = lock(&phase);
                if *phase == Phase::Committing {
                    Err(StoreError::Uncertain("the commit budget ended after the commit passed its checks".into()))
                } else {
                    *phase = Phase::GaveUp;
                    Err(StoreError::Deadline)
                }
            }
        }
    }

    /// One transaction for the whole batch: each commit is checked against the world the
    /// commits before it leave and each intent is given the next ordinal of its episode, then
    /// all are written together (a handful of statements whatever the batch holds), then one
    /// reply each once COMMIT returns.
    async fn commit_batch(&self, turn: OwnedMutexGuard<()>, batch: Vec<Queued>) {
        let mut tx = match self.begin(turn).await {
            Ok(tx) => tx,
            Err(error) => return Replies::from_queue(batch).fail(&error.to_string()),
        };
        let ids: Vec<&str> = batch
            .iter()
            .filter_map(|queued| match queued {
                Queued::Commit(commit) => commit.proposal.invocation_id(),
                Queued::Intent(_) => None,
            })
            .collect();
        let mut view = match read_view(&mut tx, &ids).await {
            Ok(view) => view,
            Err(error) => return Replies::from_queue(batch).fail(&error.to_string()),
        };
        let mut accepted = Vec::with_capacity(batch.len());
        let mut intents = Vec::new();
        let mut last_ordinals = HashMap::new();
        let mut queue = batch.into_iter();
        while let Some(queued) = queue.next() {
            let broken = match queued {
                Queued::Commit(QueuedCommit { proposal, phase, reply }) => {
                    match check(&mut tx, proposal, &phase, &mut view).await {
                        Ok(commit) => {
                            accepted.push((reply, commit));
                            continue;
                        }
                        Err(Failed::Refused(error)) => {
                            let _ = reply.send(Err(error));
                            continue;
                        }
                        Err(Failed::Broken(error)) => {
                            let cause = error.to_string();
                            let _ = reply.send(Err(error));
                            cause
                        }
                    }
                }
                Queued::Intent(QueuedIntent { intent, reply }) => {
                    match stage_intent(&mut tx, intent, &mut last_ordinals).await.map_err(Failed::from) {
                        Ok(staged) => {
                            intents.push((reply, staged));
                            continue;
                        }
                        Err(Failed::Refused(error)) => {
                            let _ = reply.send(Err(error));
                            continue;
                        }
                        Err(Failed::Broken(error)) => {
                            let cause = error.to_string();
                            let _ = reply.send(Err(error));
                            cause
                        }
                    }
                }
            };
            // Dropping the transaction rolls back everything the batch staged.
            let mut rest = Replies::from_queue(queue.collect());
            rest.commits.extend(accepted.into_iter().map(|(reply, _)| reply));
            rest.intents.extend(intents.into_iter().map(|(reply, _)| reply));
            return rest.fail(&broken);
        }
        let commits: Vec<&Accepted> = accepted.iter().map(|(_, commit)| commit).filter(|c| !c.replayed).collect();
        let staged: Vec<&StagedIntent> = intents.iter().map(|(_, staged)| staged).collect();
        let written = tx.write(batch_writes(&commits, &staged, self.owner())).await;
        let committed = match written {
            Ok(()) => tx.commit().await.map_err(|e| e.to_string()),
            Err(error) => {
                drop(tx);
                let replies = Replies {
                    commits: accepted.into_iter().map(|(reply, _)| reply).collect(),
                    intents: intents.into_iter().map(|(reply, _)| reply).collect(),
                };
                return replies.fail(&error.to_string());
            }
        };
        for (reply, accepted) in accepted {
            let _ = reply.send(match &committed {
                Ok(()) => Ok((accepted.committed(), accepted.commit)),
                Err(cause) => Err(StoreError::Uncertain(cause.clone())),
            });
        }
        for (reply, staged) in intents {
            let _ = reply.send(match &committed {
                Ok(()) => Ok((staged.ordinal, staged.intent)),
                Err(cause) => Err(StoreError::Uncertain(cause.clone())),
            });
        }
    }

    pub async fn receipt(&self, invocation_id: &str) -> Result<Receipt, StoreError> {
        journal::receipt(&mut *self.pool.acquire().await?, invocation_id).await
    }

    /// When each of `invocation_ids` committed (its journal outcome's logical time, Unix
    /// seconds); ids without an outcome are absent.
    pub async fn commit_times(&self, invocation_ids: &[&str]) -> Result<HashMap<String, i64>, StoreError> {
        journal::commit_times(&mut *self.pool.acquire().await?, invocation_ids).await
    }

    /// The number of journal rows, for tests and operators.
    pub async fn journal_len(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM journal").fetch_one(&self.pool).await?;
        Ok(row.try_get::<i64, _>("n")?)
    }
}

/// Runs `work` (a write transaction) on the commit thread and waits for it: on SQLite the
/// direct connection's statements and fsync then never block an async worker.
pub(super) async fn on_writer<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
) -> Result<T, StoreError> {
    committer().spawn(work).await.map_err(|e| StoreError::Uncertain(format!("the write task ended abnormally: {e}")))?
}

/// The thread commits run on, with its own runtime: a commit's many short waits on the
/// database are then answered at once, not after every other task the core has queued.
fn committer() -> &'static tokio::runtime::Handle {
    static COMMITTER: std::sync::OnceLock<tokio::runtime::Handle> = std::sync::OnceLock::new();
    COMMITTER.get_or_init(|| {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("the commit runtime starts");
        let handle = runtime.handle().clone();
        std::thread::Builder::new()
            .name("world-commit".into())
            .spawn(move || runtime.block_on(std::future::pending::<()>()))
            .expect("the commit thread starts");
        handle
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The callers of a batch still waiting for an answer.
#[derive(Default)]
struct Replies {
    commits: Vec<oneshot::Sender<Outcome>>,
    intents: Vec<oneshot::Sender<Result<(i64, StoredObject), StoreError>>>,
}

impl Replies {
    fn from_queue(queue: Vec<Queued>) -> Self {
        let mut replies = Replies::default();
        for queued in queue {
            match queued {
                Queued::Commit(commit) => replies.commits.push(commit.reply),
                Queued::Intent(intent) => replies.intents.push(intent.reply),
            }
        }
        replies
    }

    /// Tells each caller that the batch's transaction ended without writing anything.
    fn fail(self, cause: &str) {
        for reply in self.commits {
            let _ = reply.send(Err(StoreError::RolledBack(cause.to_owned())));
        }
        for reply in self.intents {
            let _ = reply.send(Err(StoreError::RolledBack(cause.to_owned())));
        }
    }
}

/// The journal of the batch's invocation ids and the selected world, in two reads.
async fn read_view(tx: &mut Tx<'_>, ids: &[&str]) -> Result<BatchView, StoreError> {
    Ok(BatchView {
        journal: tx.journal_states(ids).await?,
        world: tx.selected_world().await?,
        entry_indexes: HashSet::new(),
        entry_hashes: HashSet::new(),
    })
}

/// Checks one commit against the batch's view (and, for a commit fixed by its caller, the
/// log); an accepted commit moves the view on. Nothing is written here, so a refusal leaves
/// the transaction as it was and the batch goes on.
async fn check(
    tx: &mut Tx<'_>,
    proposal: Proposal,
    phase: &Mutex<Phase>,
    view: &mut BatchView,
) -> Result<Accepted, Failed> {
    // `on_current`: the commit was planned on the world the view holds.
    let (commit, on_current, claimed, fixed) = match proposal {
        Proposal::Fixed(commit) => (*commit, false, false, true),
        Proposal::Planned { invocation_id, planner, claimed } => {
            if let Some(result_ref) = view.journal.get(&invocation_id).and_then(|state| state.outcome_ref) {
                return Err(Failed::Refused(StoreError::AlreadyCommitted { invocation_id, result_ref }));
            }
            let world = view.world.as_ref().ok_or(StoreError::WorldAbsent)?;
            let commit = planner(world);
            validate(&commit)?;
            if commit.invocation_id.as_deref() != Some(invocation_id.as_str()) {
                return Err(Failed::Refused(StoreError::invalid(
                    "invocationId",
                    "the planned commit names another invocation",
                )));
            }
            let on_current = commit.observed_head == Some(world.reference);
            (commit, on_current, claimed, false)
        }
    };
    let next = commit.next_world.reference;

    // The journal rows this commit adds: its intent unless one is journaled, and its outcome.
    let mut journal_rows = Vec::new();
    if let Some(id) = &commit.invocation_id {
        let state = view.journal.get(id);
        match state.and_then(|state| state.intent.as_ref()) {
            Some(existing) if *existing != IntentKey::of(&commit, id) => {
                let kind = "commit";
                return Err(Failed::Refused(StoreError::DuplicateInvocation { invocation_id: id.clone(), kind }));
            }
            Some(_) if state.is_some_and(|state| state.outcome_ref.is_some()) => {
                return Ok(Accepted { commit, replayed: true, journal_rows, claimed: false });
            }
            Some(_) => {}
            None => journal_rows.push(("intent", IntentKey::of(&commit, id).object(commit.logical_time))),
        }
        journal_rows.push(("outcome", journal::committed_outcome_object(id, &next, commit.logical_time)));
    }

    if !on_current {
        let current = view.world.as_ref().map(|world| world.reference);
        if current != commit.observed_head {
            return Err(Failed::Refused(StoreError::Conflict { observed: commit.observed_head, selected: current }));
        }
    }
    // A planned entry continues the chain the view holds; one fixed by its caller may name
    // an index or a hash already logged.
    let entry = &commit.entry;
    let logged = view.entry_indexes.contains(&entry.entry_index)
        || view.entry_hashes.contains(&entry.entry_hash)
        || (fixed && tx.entry_logged(entry.entry_index, &entry.entry_hash).await?);
    if logged {
        return Err(Failed::Refused(StoreError::EntryExists(entry.entry_index)));
    }
    {
        let mut phase = lock(phase);
        if *phase == Phase::GaveUp {
            return Err(Failed::Refused(StoreError::Deadline));
        }
        *phase = Phase::Committing;
    }

    if let Some(id) = &commit.invocation_id {
        let state = JournalState { intent: Some(IntentKey::of(&commit, id)), outcome_ref: Some(next) };
        view.journal.insert(id.clone(), state);
    }
    view.entry_indexes.insert(entry.entry_index);
    view.entry_hashes.insert(entry.entry_hash);
    view.world = Some(commit.next_world);
    Ok(Accepted { commit, replayed: false, journal_rows, claimed })
}

/// The writes of a batch's accepted commits (in order) and staged intents (this process's,
/// written as `core`): one statement per table, one script for all of them (empty when
/// there is nothing to write).
fn batch_writes(commits: &[&Accepted], intents: &[&StagedIntent], core: &str) -> Script {
    let mut script = Script::new();
    write_intents(&mut script, intents, core);
    let Some(last) = commits.last() else { return script };
    let entries: Vec<_> = commits.iter().map(|accepted| (&accepted.commit.entry, accepted.episode())).collect();
    let insert = "INSERT INTO log_entries (entry_index, entry_hash, semantics_epoch, transition_fn, interpreter, \
                  prev_entry_hash, written_by, transition_ref, episode)";
    script.insert_rows(insert, 9, "", &entries, |script, (entry, episode)| {
        script
            .bind(entry.entry_index)
            .bind(entry.entry_hash.to_string())
            .bind(entry.semantics_epoch)
            .bind(entry.transition_fn.to_string())
            .bind(entry.interpreter.to_string())
            .bind(entry.prev_entry_hash.to_string())
            .bind(entry.written_by.as_str())
            .bind(entry.transition_ref.to_string())
            .bind(*episode);
    });

    let mut objects = Vec::new();
    for accepted in commits {
        let journal = accepted.journal_rows.iter().map(|(_, object)| object);
        let outcomes = accepted.commit.effect_outcomes.iter().map(|(_, object)| object);
        for object in accepted.commit.objects.iter().chain(journal).chain(outcomes) {
            // Verified when the commit was validated; journal objects are hashed as they are made.
            objects.push((object, object.payload.as_deref().unwrap_or_default(), accepted.episode()));
        }
    }
    insert_objects(&mut script, &objects);

    let worlds: Vec<_> = commits.iter().map(|accepted| &accepted.commit.next_world).collect();
    let insert = "INSERT INTO worlds (world_ref, revision, state_root, log_head)";
    script.insert_rows(insert, 4, "ON CONFLICT (world_ref) DO NOTHING", &worlds, |script, world| {
        script
            .bind(world.reference.to_string())
            .bind(world.revision)
            .bind(world.state_root.to_string())
            .bind(world.log_head.to_string());
    });

    // Which entry committed each object; an object repeated within one commit is recorded once.
    let mut seen = HashSet::new();
    let committed_objects: Vec<(HashRef, i64)> = commits
        .iter()
        .flat_map(|accepted| {
            let index = accepted.commit.entry.entry_index;
            accepted.commit.objects.iter().map(move |object| (object.hash, index))
        })
        .filter(|pair| seen.insert(*pair))
        .collect();
    let insert = "INSERT INTO commit_objects (object_ref, entry_index)";
    let tail = "ON CONFLICT (object_ref, entry_index) DO NOTHING";
    script.insert_rows(insert, 2, tail, &committed_objects, |script, (hash, index)| {
        script.bind(hash.to_string()).bind(*index);
    });

    let mut rows = Vec::new();
    let mut claimed = Vec::new();
    for accepted in commits {
        if let Some(id) = &accepted.commit.invocation_id {
            rows.extend(accepted.journal_rows.iter().map(|(kind, object)| (id.as_str(), *kind, object)));
            rows.extend(
                accepted.commit.effect_outcomes.iter().map(|(effect, object)| (effect.as_str(), "outcome", object)),
            );
            if accepted.claimed {
                claimed.push(id.as_str());
            }
        }
    }
    journal::append_rows(&mut script, &rows);
    if !claimed.is_empty() {
        // Claims turn committed with their commits, so no crash can leave a committed call
        // looking unfinished.
        script.statement(&format!(
            "UPDATE invocation_claims SET state = 'committed' WHERE invocation_id IN {}",
            placeholders(1, claimed.len())
        ));
        for id in claimed {
            script.bind(id);
        }
    }
    set_head(&mut script, SELECTED_WORLD_HEAD, &last.commit.next_world.reference);
    script
}

fn validate(commit: &Commit) -> Result<(), StoreError> {
    if commit.entry.entry_index < 0 {
        return Err(StoreError::invalid("entry.header.entryIndex", "must be non-negative"));
    }
    if commit.next_world.revision != commit.entry.entry_index {
        return Err(StoreError::invalid(
            "nextWorld.revision",
            format!("revision {} does not match entry index {}", commit.next_world.revision, commit.entry.entry_index),
        ));
    }
    if commit.invocation_id.as_deref() == Some("") {
        return Err(StoreError::invalid("invocationId", "must not be empty"));
    }
    for (i, object) in commit.objects.iter().enumerate() {
        object.verify(&format!("objects[{i}]"))?;
    }
    for (id, outcome) in &commit.effect_outcomes {
        if !id.starts_with(super::EFFECT_NAMESPACE) {
            return Err(StoreError::invalid("effectOutcomes", format!("{id} is not an effect id")));
        }
        outcome.verify("effectOutcomes")?;
    }
    Ok(())
}
