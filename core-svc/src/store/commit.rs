//! Compare-and-append: the one mutation of world state, in one transaction.
//!
//! The transaction runs on its own task so that a caller giving up (a client
//! disconnect, a deadline) can never abandon it half-way: before the durable
//! COMMIT a give-up rolls back and is a definite "not committed"; once COMMIT
//! has been sent the outcome is `Uncertain` until reconciled.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::{AnyConnection, Row};

use super::journal::{self, IntentKey};
use super::{
    Commit, Committed, Receipt, SELECTED_WORLD_HEAD, Store, StoreError, WorldRow, head, insert_objects, placeholders,
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
        let (committed, commit) = self.run_commit(proposal, budget).await?;
        Ok((committed, commit))
    }

    async fn run_commit(&self, proposal: Proposal, budget: Duration) -> Result<(Committed, Commit), StoreError> {
        let phase = Arc::new(Mutex::new(Phase::Working));
        let task = tokio::spawn({
            let store = self.clone();
            let phase = Arc::clone(&phase);
            async move { store.commit_in_tx(proposal, &phase).await }
        });
        match tokio::time::timeout(budget, task).await {
            Ok(Ok(result)) => result,
            Ok(Err(join)) => Err(StoreError::Uncertain(format!("commit task ended abnormally: {join}"))),
            Err(_elapsed) => {
                let mut phase = phase.lock().unwrap_or_else(|p| p.into_inner());
                if *phase == Phase::Committing {
                    Err(StoreError::Uncertain("the commit budget ended after the durable step began".into()))
                } else {
                    *phase = Phase::GaveUp;
                    Err(StoreError::Deadline)
                }
            }
        }
    }

    /// The transaction is a handful of statements whatever the commit holds: each round trip
    /// here is made while the store's one write lock is held.
    async fn commit_in_tx(&self, proposal: Proposal, phase: &Mutex<Phase>) -> Result<(Committed, Commit), StoreError> {
        let mut tx = self.write_tx().await?;
        // `on_current`: the commit was planned on the head read in this transaction.
        let (commit, on_current, claimed, journaled) = match proposal {
            Proposal::Fixed(commit) => {
                let journaled = match &commit.invocation_id {
                    Some(id) => Some(journal::state(&mut tx, id).await?),
                    None => None,
                };
                (*commit, false, false, journaled)
            }
            Proposal::Planned { invocation_id, planner, claimed } => {
                let state = journal::state(&mut tx, &invocation_id).await?;
                if let Some(result_ref) = state.outcome_ref {
                    return Err(StoreError::AlreadyCommitted { invocation_id, result_ref });
                }
                let world = selected_world(&mut tx).await?.ok_or(StoreError::WorldAbsent)?;
                let commit = planner(&world);
                validate(&commit)?;
                if commit.invocation_id.as_deref() != Some(invocation_id.as_str()) {
                    return Err(StoreError::invalid("invocationId", "the planned commit names another invocation"));
                }
                let on_current = commit.observed_head == Some(world.reference);
                (commit, on_current, claimed, Some(state))
            }
        };
        let commit = &commit;
        let next = commit.next_world.reference;

        // The journal rows this commit adds: its intent unless one is journaled, and its outcome.
        let mut journal_rows = Vec::new();
        if let (Some(id), Some(state)) = (&commit.invocation_id, journaled) {
            match state.intent {
                Some(existing) if existing != IntentKey::of(commit, id) => {
                    return Err(StoreError::DuplicateInvocation { invocation_id: id.clone(), kind: "commit" });
                }
                Some(_) if state.outcome_ref.is_some() => {
                    return Ok((Committed { selected_head: next, replayed: true }, commit.clone()));
                }
                Some(_) => {}
                None => journal_rows.push(("intent", IntentKey::of(commit, id).object(commit.logical_time))),
            }
            journal_rows.push(("outcome", journal::committed_outcome_object(id, &next, commit.logical_time)));
        }

        if !on_current {
            let selected = head(&mut tx, SELECTED_WORLD_HEAD).await?;
            if selected != commit.observed_head {
                return Err(StoreError::Conflict { observed: commit.observed_head, selected });
            }
        }

        let mut objects = Vec::with_capacity(commit.objects.len() + journal_rows.len());
        for object in commit.objects.iter().chain(journal_rows.iter().map(|(_, object)| object)) {
            objects.push((object, object.verify("object")?));
        }
        insert_objects(&mut tx, &objects).await?;
        let world = &commit.next_world;
        sqlx::query(
            "INSERT INTO worlds (world_ref, revision, state_root, log_head) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (world_ref) DO NOTHING",
        )
        .bind(world.reference.to_string())
        .bind(world.revision)
        .bind(world.state_root.to_string())
        .bind(world.log_head.to_string())
        .execute(&mut *tx)
        .await?;

        let entry = &commit.entry;
        let taken = sqlx::query("SELECT 1 AS present FROM log_entries WHERE entry_index = $1 OR entry_hash = $2")
            .bind(entry.entry_index)
            .bind(entry.entry_hash.to_string())
            .fetch_optional(&mut *tx)
            .await?;
        if taken.is_some() {
            return Err(StoreError::EntryExists(entry.entry_index));
        }
        sqlx::query(
            "INSERT INTO log_entries (entry_index, entry_hash, semantics_epoch, transition_fn, interpreter, \
             prev_entry_hash, written_by, transition_ref) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(entry.entry_index)
        .bind(entry.entry_hash.to_string())
        .bind(entry.semantics_epoch)
        .bind(entry.transition_fn.to_string())
        .bind(entry.interpreter.to_string())
        .bind(entry.prev_entry_hash.to_string())
        .bind(entry.written_by.as_str())
        .bind(entry.transition_ref.to_string())
        .execute(&mut *tx)
        .await?;
        insert_commit_objects(&mut tx, commit).await?;
        set_head(&mut tx, SELECTED_WORLD_HEAD, &next).await?;

        if let Some(id) = &commit.invocation_id {
            journal::append_rows(&mut tx, id, &journal_rows).await?;
            if claimed {
                // The claim turns committed with the commit itself, so no crash
                // can leave a committed call looking unfinished.
                sqlx::query("UPDATE invocation_claims SET state = 'committed' WHERE invocation_id = $1")
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
        }

        {
            let mut phase = phase.lock().unwrap_or_else(|p| p.into_inner());
            if *phase == Phase::GaveUp {
                // Dropping the transaction rolls it back: the caller was told "not committed".
                return Err(StoreError::Deadline);
            }
            *phase = Phase::Committing;
        }
        tx.commit().await.map_err(|e| StoreError::Uncertain(e.to_string()))?;
        Ok((Committed { selected_head: next, replayed: false }, commit.clone()))
    }

    pub async fn receipt(&self, invocation_id: &str) -> Result<Receipt, StoreError> {
        journal::receipt(&mut *self.pool.acquire().await?, invocation_id).await
    }

    /// The number of journal rows, for tests and operators.
    pub async fn journal_len(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM journal").fetch_one(&self.pool).await?;
        Ok(row.try_get::<i64, _>("n")?)
    }
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
    Ok(())
}

/// The selected head's world row in one read; `None` when no world is selected.
async fn selected_world(conn: &mut AnyConnection) -> Result<Option<WorldRow>, StoreError> {
    let Some(row) = sqlx::query(
        "SELECT h.ref, w.world_ref, w.revision, w.state_root, w.log_head FROM heads h \
         LEFT JOIN worlds w ON w.world_ref = h.ref WHERE h.name = $1",
    )
    .bind(SELECTED_WORLD_HEAD)
    .fetch_optional(conn)
    .await?
    else {
        return Ok(None);
    };
    if row.try_get::<Option<String>, _>("world_ref")?.is_none() {
        let head: String = row.try_get("ref")?;
        return Err(StoreError::Damaged(format!("the selected head {head} has no world row")));
    }
    super::world_from_row(&row).map(Some)
}

/// Records which entry committed each of the commit's objects.
async fn insert_commit_objects(conn: &mut AnyConnection, commit: &Commit) -> Result<(), StoreError> {
    let mut seen = std::collections::HashSet::with_capacity(commit.objects.len());
    let refs: Vec<_> = commit.objects.iter().map(|object| object.hash).filter(|hash| seen.insert(*hash)).collect();
    for chunk in refs.chunks(super::ROWS_PER_INSERT) {
        let sql = format!(
            "INSERT INTO commit_objects (object_ref, entry_index) VALUES {} \
             ON CONFLICT (object_ref, entry_index) DO NOTHING",
            placeholders(chunk.len(), 2)
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for hash in chunk {
            query = query.bind(hash.to_string()).bind(commit.entry.entry_index);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}
