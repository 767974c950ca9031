//! Group commit: the writer's queue. Commits and effect intents join it, and every turn at
//! the write lock writes all that are pending, in order, in one transaction, so they share
//! its BEGIN, one read of the head and the journal, and its durable COMMIT (the fsync that
//! bounds a lone write).
//! Each commit is checked in full (`commit`) against the world the ones before it left,
//! exactly as if it ran alone; each intent is given the next ordinal of its episode
//! (`effects`).
//!
//! The transaction runs on a task of its own (on the commit thread), so a caller giving up
//! (a client disconnect, a deadline) can never abandon it half-way: until its commit has
//! passed its checks in a batch a give-up is a definite "not committed"; from then on the
//! outcome is `Uncertain` until reconciled.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedMutexGuard, oneshot};
use world_model::AccessTriple;

use super::commit::{Accepted, BatchView, Planner, Progress, Proposal, check, read_view, validate, write_commits};
use super::effects::{NewIntent, StagedIntent, stage_intent, write_intents};
use super::script::Script;
use super::tx::committer;
use super::{Commit, Committed, Store, StoreError, StoredObject};

/// Work waiting for the writer turn: a commit, or an effect intent.
pub(super) enum Queued {
    Commit { proposal: Proposal, progress: Progress, reply: oneshot::Sender<CommitAnswer> },
    Intent { intent: NewIntent, reply: oneshot::Sender<IntentAnswer> },
}

type CommitAnswer = Result<(Committed, Commit), StoreError>;
/// The intent's ordinal and object, once durable.
type IntentAnswer = Result<(i64, StoredObject), StoreError>;

pub(super) type Pending = Arc<Mutex<Queue>>;

/// What waits for the writer turn, and whether a task already waits for the turn to write it.
#[derive(Default)]
pub(super) struct Queue {
    items: VecDeque<Queued>,
    waiter: bool,
}

/// At most this many commits and intents share one transaction, so one turn stays short.
const MAX_BATCH: usize = 64;

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

    /// Appends the next effect intent of `episode` with its request object: the ordinal is
    /// one past the episode's last, assigned in the batch's transaction, and `intent` builds
    /// the intent object once it is known. Returns the ordinal and the intent's object once
    /// both are durable.
    pub async fn append_effect_intent(
        &self,
        episode: &str,
        call_id: &str,
        requirement: &AccessTriple,
        request: &StoredObject,
        intent: impl FnOnce(i64) -> StoredObject + Send + 'static,
    ) -> Result<(i64, StoredObject), StoreError> {
        request.verify("request")?;
        let (reply, answer) = oneshot::channel();
        let intent = NewIntent::new(episode, call_id, requirement, request, intent);
        self.enqueue(Queued::Intent { intent, reply });
        answer.await.map_err(|_| StoreError::Uncertain("the write task ended abnormally".into()))?
    }

    async fn run_commit(&self, proposal: Proposal, budget: Duration) -> CommitAnswer {
        let progress = Progress::default();
        let (reply, answer) = oneshot::channel();
        self.enqueue(Queued::Commit { proposal, progress: progress.clone(), reply });
        match tokio::time::timeout(budget, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(StoreError::Uncertain("the commit task ended abnormally".into())),
            Err(_elapsed) => Err(progress.give_up()),
        }
    }

    /// Queues `work` for the writer turn.
    fn enqueue(&self, work: Queued) {
        let mut queue = lock(&self.pending);
        queue.items.push_back(work);
        // One task at a time waits for the turn and writes what is pending when it gets it, so
        // an item is in the first batch after it was queued, and the turn's line holds one
        // writer of batches, not one per item (which would queue claims and leases behind
        // tasks with nothing left to write).
        if !std::mem::replace(&mut queue.waiter, true) {
            drop(queue);
            self.wait_for_turn();
        }
    }

    fn wait_for_turn(&self) {
        committer().spawn({
            let store = self.clone();
            async move {
                let turn = store.writer_turn().await;
                let (batch, more) = {
                    let mut queue = lock(&store.pending);
                    let n = queue.items.len().min(MAX_BATCH);
                    let batch: Vec<Queued> = queue.items.drain(..n).collect();
                    // Items queued from here on bring a waiter of their own; items left over
                    // past the batch's limit get the next one now.
                    queue.waiter = !queue.items.is_empty();
                    (batch, queue.waiter)
                };
                if more {
                    store.wait_for_turn();
                }
                if !batch.is_empty() {
                    store.write_batch(turn, batch).await;
                }
            }
        });
    }

    /// One transaction for the whole batch: each commit is checked against the world the
    /// commits before it leave and each intent is given the next ordinal of its episode, then
    /// all are written together (a handful of statements whatever the batch holds), then one
    /// reply each once COMMIT returns.
    async fn write_batch(&self, turn: OwnedMutexGuard<()>, batch: Vec<Queued>) {
        let mut tx = match self.begin(turn).await {
            Ok(tx) => tx,
            Err(error) => return Replies::from_queue(batch).fail(&error.to_string()),
        };
        // Intents alone need neither the head nor the journal.
        let mut view = BatchView::default();
        if batch.iter().any(|queued| matches!(queued, Queued::Commit { .. })) {
            let ids: Vec<&str> = batch
                .iter()
                .filter_map(|queued| match queued {
                    Queued::Commit { proposal, .. } => proposal.invocation_id(),
                    Queued::Intent { .. } => None,
                })
                .collect();
            view = match read_view(&mut tx, &ids).await {
                Ok(view) => view,
                Err(error) => return Replies::from_queue(batch).fail(&error.to_string()),
            };
        }
        let mut accepted: Vec<(oneshot::Sender<CommitAnswer>, Accepted)> = Vec::with_capacity(batch.len());
        let mut intents: Vec<(oneshot::Sender<IntentAnswer>, StagedIntent)> = Vec::new();
        let mut last_ordinals = HashMap::new();
        let mut queue = batch.into_iter();
        while let Some(queued) = queue.next() {
            let broken = match queued {
                Queued::Commit { proposal, progress, reply } => {
                    let checked = check(&mut tx, proposal, &progress, &mut view).await;
                    keep(checked, reply, &mut accepted)
                }
                Queued::Intent { intent, reply } => {
                    let staged = stage_intent(&mut tx, intent, &mut last_ordinals).await;
                    keep(staged, reply, &mut intents)
                }
            };
            let Some(broken) = broken else { continue };
            // Dropping the transaction rolls back everything the batch staged.
            let mut rest = Replies::from_queue(queue.collect());
            rest.commits.extend(accepted.into_iter().map(|(reply, _)| reply));
            rest.intents.extend(intents.into_iter().map(|(reply, _)| reply));
            return rest.fail(&broken);
        }
        let mut script = Script::new();
        let staged: Vec<&StagedIntent> = intents.iter().map(|(_, staged)| staged).collect();
        write_intents(&mut script, &staged, self.owner());
        let commits: Vec<&Accepted> = accepted.iter().map(|(_, commit)| commit).filter(|c| !c.replayed).collect();
        write_commits(&mut script, &commits);
        let committed = match tx.write(script).await {
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
}

/// Keeps an item that passed its checks for the batch's writes, or answers a refused one at
/// once (the batch goes on); a database error ends the whole transaction, and its cause is
/// returned.
fn keep<T, A>(
    checked: Result<T, StoreError>,
    reply: oneshot::Sender<Result<A, StoreError>>,
    kept: &mut Vec<(oneshot::Sender<Result<A, StoreError>>, T)>,
) -> Option<String> {
    match checked {
        Ok(item) => {
            kept.push((reply, item));
            None
        }
        // On PostgreSQL any failed statement aborts the transaction.
        Err(error @ (StoreError::Database(_) | StoreError::Sqlite(_))) => {
            let cause = error.to_string();
            let _ = reply.send(Err(error));
            Some(cause)
        }
        Err(error) => {
            let _ = reply.send(Err(error));
            None
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The callers of a batch still waiting for an answer.
#[derive(Default)]
struct Replies {
    commits: Vec<oneshot::Sender<CommitAnswer>>,
    intents: Vec<oneshot::Sender<IntentAnswer>>,
}

impl Replies {
    fn from_queue(queue: Vec<Queued>) -> Self {
        let mut replies = Replies::default();
        for queued in queue {
            match queued {
                Queued::Commit { reply, .. } => replies.commits.push(reply),
                Queued::Intent { reply, .. } => replies.intents.push(reply),
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
