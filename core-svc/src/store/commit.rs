//! Compare-and-append: the one mutation of world state, in one transaction.
//!
//! The transaction runs on its own task so that a caller giving up (a client
//! disconnect, a deadline) can never abandon it half-way: before the durable
//! COMMIT a give-up rolls back and is a definite "not committed"; once COMMIT
//! has been sent the outcome is `Uncertain` until reconciled.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::Row;

use super::journal::{self, IntentKey};
use super::{
    Commit, Committed, Receipt, SELECTED_WORLD_HEAD, Store, StoreError, WorldRow, head, insert_object, set_head,
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
    Planned { invocation_id: String, planner: Planner },
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
    pub async fn commit_next(
        &self,
        invocation_id: &str,
        planner: Planner,
        budget: Duration,
    ) -> Result<(Committed, Commit), StoreError> {
        let proposal = Proposal::Planned { invocation_id: invocation_id.to_owned(), planner };
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

    async fn commit_in_tx(&self, proposal: Proposal, phase: &Mutex<Phase>) -> Result<(Committed, Commit), StoreError> {
        let mut tx = self.write_tx().await?;
        let planned = matches!(proposal, Proposal::Planned { .. });
        let commit = match proposal {
            Proposal::Fixed(commit) => *commit,
            Proposal::Planned { invocation_id, planner } => {
                let state = journal::state(&mut tx, &invocation_id).await?;
                if let Some(result_ref) = state.outcome_ref {
                    return Err(StoreError::AlreadyCommitted { invocation_id, result_ref });
                }
                let head = head(&mut tx, SELECTED_WORLD_HEAD).await?.ok_or(StoreError::WorldAbsent)?;
                let world = world_in(&mut tx, &head).await?;
                let commit = planner(&world);
                validate(&commit)?;
                if commit.invocation_id.as_deref() != Some(invocation_id.as_str()) {
                    return Err(StoreError::invalid("invocationId", "the planned commit names another invocation"));
                }
                commit
            }
        };
        let commit = &commit;
        let next = commit.next_world.reference;

        let mut journal_intent_exists = false;
        if let Some(id) = &commit.invocation_id {
            let state = journal::state(&mut tx, id).await?;
            if let Some(existing) = state.intent {
                if existing != IntentKey::of(commit, id) {
                    return Err(StoreError::DuplicateInvocation { invocation_id: id.clone(), kind: "commit" });
                }
                if state.outcome_ref.is_some() {
                    return Ok((Committed { selected_head: next, replayed: true }, commit.clone()));
                }
                journal_intent_exists = true;
            }
        }

        let selected = head(&mut tx, SELECTED_WORLD_HEAD).await?;
        if selected != commit.observed_head {
            return Err(StoreError::Conflict { observed: commit.observed_head, selected });
        }

        for object in &commit.objects {
            let payload = object.verify("object")?;
            insert_object(&mut tx, object, payload).await?;
        }
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
        for object in &commit.objects {
            sqlx::query(
                "INSERT INTO commit_objects (object_ref, entry_index) VALUES ($1, $2) \
                 ON CONFLICT (object_ref, entry_index) DO NOTHING",
            )
            .bind(object.hash.to_string())
            .bind(entry.entry_index)
            .execute(&mut *tx)
            .await?;
        }
        set_head(&mut tx, SELECTED_WORLD_HEAD, &next).await?;

        if let Some(id) = &commit.invocation_id {
            if !journal_intent_exists {
                journal::append_intent(&mut tx, &IntentKey::of(commit, id), commit.logical_time).await?;
            }
            journal::append_committed_outcome(&mut tx, id, &next, commit.logical_time).await?;
            if planned {
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

async fn world_in(conn: &mut sqlx::AnyConnection, reference: &world_model::HashRef) -> Result<WorldRow, StoreError> {
    let row = sqlx::query("SELECT world_ref, revision, state_root, log_head FROM worlds WHERE world_ref = $1")
        .bind(reference.to_string())
        .fetch_optional(conn)
        .await?
        .ok_or_else(|| StoreError::Damaged(format!("the selected head {reference} has no world row")))?;
    super::world_from_row(&row)
}
