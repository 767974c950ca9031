//! Compare-and-append: the one mutation of world state. A commit is checked here against the
//! world the commits before it in its batch leave, and its writes are made here; the batch
//! (`batch`) gives it its transaction.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use sqlx::Row;

use world_model::HashRef;

use super::journal::{self, IntentKey, JournalState};
use super::script::{Script, placeholders};
use super::tx::Tx;
use super::{
    Commit, Committed, ObjectWrite, Receipt, SELECTED_WORLD_HEAD, Store, StoreError, StoredObject, WorldRow,
    insert_objects, set_head,
};

/// How far a queued commit has got, shared by the caller waiting for it and the batch
/// checking it: it leaves `WORKING` once, either way, whichever side is first.
#[derive(Clone, Default)]
pub(super) struct Progress(Arc<AtomicU8>);

const WORKING: u8 = 0;
const GAVE_UP: u8 = 1;
const COMMITTING: u8 = 2;

impl Progress {
    /// The caller's budget ended: a commit not yet past its checks is given up, a definite
    /// "not committed"; one past them commits with its batch or not, which is uncertain.
    pub(super) fn give_up(&self) -> StoreError {
        match self.0.compare_exchange(WORKING, GAVE_UP, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) | Err(GAVE_UP) => StoreError::Deadline,
            Err(_) => StoreError::Uncertain("the commit budget ended after the commit passed its checks".into()),
        }
    }

    /// The commit passed its checks: from here on it commits with its batch, unless its
    /// caller gave up first.
    fn start_committing(&self) -> Result<(), StoreError> {
        match self.0.compare_exchange(WORKING, COMMITTING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) | Err(COMMITTING) => Ok(()),
            Err(_) => Err(StoreError::Deadline),
        }
    }
}

/// Plans a commit against the world that is the selected head when the
/// commit transaction runs.
pub type Planner = Box<dyn FnOnce(&WorldRow) -> Commit + Send>;

/// What to commit: a commit fixed by its caller (REST, genesis), or one
/// planned inside the transaction (invocations), which therefore never
/// loses a race to another commit.
pub(super) enum Proposal {
    Fixed(Box<Commit>),
    /// `claimed`: the call holds an invocation claim, which turns committed with the commit.
    Planned {
        invocation_id: String,
        planner: Planner,
        claimed: bool,
    },
}

/// What the batch's transaction holds beyond what it has written: the world its accepted
/// commits lead to, the journal as they leave it, and the entries they log.
#[derive(Default)]
pub(super) struct BatchView {
    world: Option<WorldRow>,
    journal: HashMap<String, JournalState>,
    entry_indexes: HashSet<i64>,
    entry_hashes: HashSet<HashRef>,
}

/// A commit that passed every check, written together with the rest of its batch.
pub(super) struct Accepted {
    pub(super) commit: Commit,
    /// The same call committed this very commit before: nothing to write.
    pub(super) replayed: bool,
    journal_rows: Vec<(&'static str, StoredObject)>,
    claimed: bool,
}

impl Accepted {
    /// The episode its entry and objects are written for.
    fn episode(&self) -> &str {
        self.commit.episode.as_ref().map_or(super::reads::NO_EPISODE, |episode| episode.as_str())
    }

    pub(super) fn committed(&self) -> Committed {
        Committed { selected_head: self.commit.next_world.reference, replayed: self.replayed }
    }
}

impl Proposal {
    pub(super) fn invocation_id(&self) -> Option<&str> {
        match self {
            Proposal::Fixed(commit) => commit.invocation_id.as_deref(),
            Proposal::Planned { invocation_id, .. } => Some(invocation_id),
        }
    }
}

impl Store {
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

/// The journal of the batch's invocation ids and the selected world, in two reads.
pub(super) async fn read_view(tx: &mut Tx<'_>, ids: &[&str]) -> Result<BatchView, StoreError> {
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
pub(super) async fn check(
    tx: &mut Tx<'_>,
    proposal: Proposal,
    progress: &Progress,
    view: &mut BatchView,
) -> Result<Accepted, StoreError> {
    // `on_current`: the commit was planned on the world the view holds.
    let (commit, on_current, claimed, fixed) = match proposal {
        Proposal::Fixed(commit) => (*commit, false, false, true),
        Proposal::Planned { invocation_id, planner, claimed } => {
            if let Some(result_ref) = view.journal.get(&invocation_id).and_then(|state| state.outcome_ref) {
                return Err(StoreError::AlreadyCommitted { invocation_id, result_ref });
            }
            let world = view.world.as_ref().ok_or(StoreError::WorldAbsent)?;
            let commit = planner(world);
            validate(&commit)?;
            if commit.invocation_id.as_deref() != Some(invocation_id.as_str()) {
                return Err(StoreError::invalid("invocationId", "the planned commit names another invocation"));
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
                return Err(StoreError::DuplicateInvocation { invocation_id: id.clone(), kind });
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
            return Err(StoreError::Conflict { observed: commit.observed_head, selected: current });
        }
    }
    // A planned entry continues the chain the view holds; one fixed by its caller may name
    // an index or a hash already logged.
    let entry = &commit.entry;
    let logged = view.entry_indexes.contains(&entry.entry_index)
        || view.entry_hashes.contains(&entry.entry_hash)
        || (fixed && tx.entry_logged(entry.entry_index, &entry.entry_hash).await?);
    if logged {
        return Err(StoreError::EntryExists(entry.entry_index));
    }
    progress.start_committing()?;

    if let Some(id) = &commit.invocation_id {
        let state = JournalState { intent: Some(IntentKey::of(&commit, id)), outcome_ref: Some(next) };
        view.journal.insert(id.clone(), state);
    }
    view.entry_indexes.insert(entry.entry_index);
    view.entry_hashes.insert(entry.entry_hash);
    view.world = Some(commit.next_world);
    Ok(Accepted { commit, replayed: false, journal_rows, claimed })
}

/// The writes of a batch's accepted commits, in order: one statement per table (none when
/// there is nothing to write).
pub(super) fn write_commits(script: &mut Script, commits: &[&Accepted]) {
    let Some(last) = commits.last() else { return };
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

    // Objects name the entry whose commit carries them (an entry's journal rows and effect
    // outcomes ride its commit, but are not among its objects).
    let mut objects = Vec::new();
    for accepted in commits {
        let (episode, entry) = (accepted.episode(), accepted.commit.entry.entry_index);
        // Verified when the commit was validated; journal objects are hashed as they are made.
        let carried = accepted
            .commit
            .objects
            .iter()
            .map(|object| ObjectWrite { entry: Some(entry), ..ObjectWrite::of(object, episode) });
        let journal = accepted.journal_rows.iter().map(|(_, object)| object);
        let outcomes = accepted.commit.effect_outcomes.iter().map(|(_, object)| object);
        objects.extend(carried.chain(journal.chain(outcomes).map(|object| ObjectWrite::of(object, episode))));
    }
    insert_objects(script, &objects);

    let worlds: Vec<_> = commits.iter().map(|accepted| &accepted.commit.next_world).collect();
    let insert = "INSERT INTO worlds (world_ref, revision, state_root, log_head)";
    script.insert_rows(insert, 4, "ON CONFLICT (world_ref) DO NOTHING", &worlds, |script, world| {
        script
            .bind(world.reference.to_string())
            .bind(world.revision)
            .bind(world.state_root.to_string())
            .bind(world.log_head.to_string());
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
    journal::append_rows(script, &rows);
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
    set_head(script, SELECTED_WORLD_HEAD, &last.commit.next_world.reference);
}

pub(super) fn validate(commit: &Commit) -> Result<(), StoreError> {
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
