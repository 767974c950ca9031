//! An episode's effect turn: effectful calls of one episode run one at a time.
//!
//! On PostgreSQL, which several cores may serve, the database decides: a lease row per
//! episode, taken by whichever core serves the call, and taken over once it expires or its
//! core is dead. A SQLite store has exactly one serving core (its serving lock is an
//! exclusive file lock the kernel drops with a dead process), so there the queue below is
//! the whole rule and no lease row is written. Either way this
//! process queues its own callers for an episode in arrival order, so only the head of the
//! queue polls the database and a turn is handed over as soon as it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OwnedMutexGuard;

use crate::session::{now_unix, random_bytes};
use crate::store::{Backend, Store, StoreError};

/// First and longest pause between two attempts at a lease another core holds.
const FIRST_RETRY: Duration = Duration::from_millis(2);
const LONGEST_RETRY: Duration = Duration::from_millis(50);
/// How often a waiting caller asks whether the lease's holder is dead (a costlier question).
const ASK_HOLDER_EVERY: Duration = Duration::from_millis(500);

#[derive(Default)]
pub struct EpisodeTurns {
    queues: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// An episode's turn, held until [`Turn::end`].
pub struct Turn {
    episode: String,
    owner: String,
    _local: OwnedMutexGuard<()>,
    /// Whether a lease row stands for this turn in the database.
    leased: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("episode {0}: the invocation deadline ended while waiting for its effect turn")]
    Deadline(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EpisodeTurns {
    /// Waits (until `deadline`) for `episode`'s turn; the lease it takes lasts `lease` at most.
    pub async fn take(
        &self,
        store: &Store,
        episode: &str,
        lease: Duration,
        deadline: Instant,
    ) -> Result<Turn, TurnError> {
        let queue = {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(queues.entry(episode.to_owned()).or_default())
        };
        let late = || TurnError::Deadline(episode.to_owned());
        let local = tokio::time::timeout_at(deadline.into(), queue.lock_owned()).await.map_err(|_| late())?;
        let owner = hex::encode(&random_bytes()[..12]);
        if store.backend() == Backend::Sqlite {
            return Ok(Turn { episode: episode.to_owned(), owner, _local: local, leased: false });
        }
        let mut pause = FIRST_RETRY;
        let mut asked = Instant::now();
        loop {
            let now = now_unix();
            let expires = now + lease.as_secs() as i64;
            let ask_holder = asked.elapsed() >= ASK_HOLDER_EVERY;
            if ask_holder {
                asked = Instant::now();
            }
            if store.acquire_episode_lease(episode, &owner, now, expires, ask_holder).await? {
                return Ok(Turn { episode: episode.to_owned(), owner, _local: local, leased: true });
            }
            if Instant::now() + pause >= deadline {
                return Err(late());
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_RETRY);
        }
    }

    /// Ends a turn: the lease goes back and the next local caller goes on.
    pub async fn end(&self, store: &Store, turn: Turn) {
        if turn.leased
            && let Err(error) = store.release_episode_lease(&turn.episode, &turn.owner).await
        {
            tracing::warn!(%error, episode = %turn.episode, "releasing the episode lease failed; it expires on its own");
        }
        let episode = turn.episode.clone();
        drop(turn);
        // Forget an episode nobody waits for, so the map does not grow with every episode seen.
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        if queues.get(&episode).is_some_and(|queue| Arc::strong_count(queue) == 1) {
            queues.remove(&episode);
        }
    }
}
