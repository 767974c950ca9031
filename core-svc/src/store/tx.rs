//! The store's write transaction: one type over a pooled sqlx transaction and SQLite's
//! direct writer connection, so every multi-statement write (commit batches, the effect
//! journal) runs the same on both backends and skips sqlx's worker hand-offs on SQLite;
//! and the commit thread those transactions run on.

use std::collections::HashMap;

use sqlx::Row;
use tokio::sync::OwnedMutexGuard;
use world_model::HashRef;

use super::direct::DirectTx;
use super::journal::{self, JournalState};
use super::script::Script;
use super::{Columns, SELECTED_WORLD_HEAD, Store, StoreError, WorldRow, WriteTx};

impl Store {
    /// Begins a write transaction; the caller holds the writer turn, which the transaction
    /// keeps until it ends.
    pub(super) async fn begin(&self, turn: OwnedMutexGuard<()>) -> Result<Tx<'_>, StoreError> {
        match &self.direct {
            Some(direct) => Ok(Tx::Direct { tx: direct.begin()?, _turn: turn }),
            None => Ok(Tx::Pooled(self.write_tx_on(turn).await?)),
        }
    }
}

/// A write transaction holding this process's writer turn: a pooled one, or on SQLite the
/// direct writer connection.
pub(super) enum Tx<'a> {
    Pooled(WriteTx),
    Direct {
        // Declared first, so dropped first: a rollback ends before the turn passes on.
        tx: DirectTx<'a>,
        _turn: OwnedMutexGuard<()>,
    },
}

impl Tx<'_> {
    pub(super) async fn journal_states(&mut self, ids: &[&str]) -> Result<HashMap<String, JournalState>, StoreError> {
        match self {
            Tx::Pooled(tx) => journal::states(tx, ids).await,
            Tx::Direct { tx, .. } => journal::states_direct(tx.conn(), ids),
        }
    }

    /// The selected head's world row in one read; `None` when no world is selected.
    pub(super) async fn selected_world(&mut self) -> Result<Option<WorldRow>, StoreError> {
        const SQL: &str = "SELECT h.ref, w.world_ref, w.revision, w.state_root, w.log_head FROM heads h \
                           LEFT JOIN worlds w ON w.world_ref = h.ref WHERE h.name = $1";
        let decode = |row: &dyn Columns| -> Result<WorldRow, StoreError> {
            if row.optional_text("world_ref")?.is_none() {
                let head = row.text("ref")?;
                return Err(StoreError::Damaged(format!("the selected head {head} has no world row")));
            }
            super::world_from_row(row)
        };
        match self {
            Tx::Pooled(tx) => {
                let row = sqlx::query(SQL).bind(SELECTED_WORLD_HEAD).fetch_optional(&mut **tx).await?;
                row.map(|row| decode(&row)).transpose()
            }
            Tx::Direct { tx, .. } => {
                let mut statement = tx.conn().prepare_cached(SQL)?;
                let mut rows = statement.query([SELECTED_WORLD_HEAD])?;
                rows.next()?.map(|row| decode(row)).transpose()
            }
        }
    }

    /// Whether the log holds an entry at `index` or with `hash`.
    pub(super) async fn entry_logged(&mut self, index: i64, hash: &HashRef) -> Result<bool, StoreError> {
        const SQL: &str = "SELECT 1 AS present FROM log_entries WHERE entry_index = $1 OR entry_hash = $2";
        match self {
            Tx::Pooled(tx) => {
                Ok(sqlx::query(SQL).bind(index).bind(hash.to_string()).fetch_optional(&mut **tx).await?.is_some())
            }
            Tx::Direct { tx, .. } => {
                let mut statement = tx.conn().prepare_cached(SQL)?;
                Ok(statement.exists(rusqlite::params![index, hash.to_string()])?)
            }
        }
    }

    pub(super) async fn write(&mut self, script: Script) -> Result<(), StoreError> {
        match self {
            Tx::Pooled(tx) => script.run(tx).await,
            Tx::Direct { tx, .. } => script.run_direct(tx.conn()),
        }
    }

    /// The one integer the query `sql` (with one text parameter) answers.
    pub(super) async fn integer(&mut self, sql: &str, parameter: &str) -> Result<i64, StoreError> {
        match self {
            Tx::Pooled(tx) => {
                Ok(sqlx::query(sqlx::AssertSqlSafe(sql)).bind(parameter).fetch_one(&mut **tx).await?.try_get(0)?)
            }
            Tx::Direct { tx, .. } => Ok(tx.conn().prepare_cached(sql)?.query_row([parameter], |row| row.get(0))?),
        }
    }

    /// The text column of every row the query `sql` (with one text parameter) answers.
    pub(super) async fn texts(&mut self, sql: &str, parameter: &str) -> Result<Vec<String>, StoreError> {
        match self {
            Tx::Pooled(tx) => sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(parameter)
                .fetch_all(&mut **tx)
                .await?
                .iter()
                .map(|row| Ok(row.try_get(0)?))
                .collect(),
            Tx::Direct { tx, .. } => {
                let mut statement = tx.conn().prepare_cached(sql)?;
                let rows = statement.query_map([parameter], |row| row.get(0))?;
                Ok(rows.collect::<Result<_, _>>()?)
            }
        }
    }

    pub(super) async fn commit(self) -> Result<(), StoreError> {
        match self {
            Tx::Pooled(tx) => Ok(tx.commit().await?),
            Tx::Direct { tx, .. } => tx.commit(),
        }
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
pub(super) fn committer() -> &'static tokio::runtime::Handle {
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
