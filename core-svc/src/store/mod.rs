//! The world store: objects, worlds, the log and heads (`objects`), the commit journal
//! (`journal`, `commit`), the effect journal (`effects`), the writer's queue that commits and
//! effect intents share (`batch`), sessions, invocation claims and episode leases (`leases`),
//! which core is alive (`liveness`), OAuth sign-in's clients, approvals and refresh tokens
//! (`oauth`), behind one API over two backends (SQLite in WAL mode, or PostgreSQL); `tx` is
//! the one write transaction over both. Every guard that matters for correctness is enforced
//! inside a database transaction, never in process memory, so several cores and CLIs can
//! share one store.

mod batch;
mod checkpoint;
mod commit;
mod direct;
mod effects;
mod error;
mod journal;
mod leases;
mod liveness;
mod location;
mod oauth;
mod objects;
mod reads;
mod records;
mod rows;
mod schema;
mod script;
mod serving_lock;
mod sessions;
mod tx;
mod watch;

use std::ops::{Deref, DerefMut};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyConnection, AnyPool, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard};

use direct::Direct;
use objects::{ObjectWrite, insert_objects, registry_key, set_head};
use rows::{Columns, optional_column_ref, world_from_row};

pub use commit::Planner;
pub use effects::{EFFECT_NAMESPACE, PendingIntent};
pub use error::StoreError;
pub use leases::Claim;
pub use liveness::{FENCE, Liveness, LivenessError};
pub use location::{StoreLocation, redact_url_password};
pub use oauth::{Approval, ApprovalRow, ApprovalStatus, ClientRow, NewApproval, RefreshRow, Rotation, SessionOrigin};
pub use reads::{Reader, Reads};
pub use records::{Commit, Committed, LogEntry, Receipt, SessionRow, StoredObject, WorldRow};
pub use schema::SCHEMA_VERSION;
pub use serving_lock::{LockError, LockMode, ServingLock};
pub use watch::{StoreFiles, StoreGone, WATCH_INTERVAL};

/// The head row naming the selected world.
const SELECTED_WORLD_HEAD: &str = "selected_world_head";
/// Registry heads share the `heads` table under this prefix.
const REGISTRY_PREFIX: &str = "registry:";
/// Every SQLite connection's settings. WAL lets readers run beside the one writer; a writer
/// waits (bounded) for another process's transaction. Statement journals stay in memory: a
/// commit batch's multi-row inserts journal every page they touch again, which on a file
/// cost a temporary file's writes, opening and closing per batch. The log is checkpointed
/// by a thread of its own (`checkpoint`); a connection checkpoints it after its commit only
/// once it is 64 MiB (16,384 frames of 4 KiB), the writer's own limit.
const SQLITE_PRAGMAS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; \
                              PRAGMA busy_timeout = 15000; PRAGMA temp_store = MEMORY; \
                              PRAGMA wal_autocheckpoint = 16384;";
/// Key of the PostgreSQL advisory lock that serialises writers.
const PG_WRITE_LOCK: i64 = 0x776f_726c_6400;

pub const DEFAULT_PAGE: u32 = 100;
pub const MAX_PAGE: u32 = 500;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Whether opening may create a new store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    CreateIfMissing,
    MustExist,
}

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    location: StoreLocation,
    /// This process's writers queue here for their turn at the database's write lock. SQLite's
    /// busy handler retries a taken lock by sleeping (1 ms, 2 ms, … 100 ms), so connections
    /// of one process contending for it would mostly sleep; a FIFO queue in front hands the
    /// lock over the moment it is free. The database lock still decides everything: other
    /// processes and cores wait on it as before.
    writers: Arc<Mutex<()>>,
    /// Commits and effect intents waiting for the writer turn; whoever gets it next writes
    /// them together.
    pending: batch::Pending,
    /// SQLite only: the connections the session read and commit batches run on.
    direct: Option<Arc<Direct>>,
    /// `<core>/<incarnation>`: how this process names itself in the claims, leases and
    /// intents it writes (see `liveness`).
    owner: Arc<std::sync::OnceLock<String>>,
}

/// A write transaction holding this process's writer turn until it ends.
pub(crate) struct WriteTx {
    // Declared first, so dropped first: an unfinished transaction's rollback is on its way
    // before the turn passes on (if it is still running, the next BEGIN waits in SQLite).
    tx: Transaction<'static, sqlx::Any>,
    _turn: OwnedMutexGuard<()>,
}

impl WriteTx {
    async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx.commit().await
    }
}

impl Deref for WriteTx {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        &self.tx
    }
}

impl DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.tx
    }
}

/// Clamps a requested page size: 0 means the default; at most [`MAX_PAGE`].
pub fn clamp_page(limit: u32) -> u32 {
    match limit {
        0 => DEFAULT_PAGE,
        n => n.min(MAX_PAGE),
    }
}

impl Store {
    /// Opens (and if allowed creates) the store and brings its schema up to date.
    pub async fn open(location: &StoreLocation, mode: OpenMode) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let (url, backend) = match location {
            StoreLocation::Sqlite(path) => {
                if mode == OpenMode::MustExist && !path.is_file() {
                    return Err(StoreError::Missing(path.display().to_string()));
                }
                let rwc = if mode == OpenMode::CreateIfMissing { "rwc" } else { "rw" };
                (format!("sqlite://{}?mode={rwc}", path.display()), Backend::Sqlite)
            }
            StoreLocation::Postgres(url) => (url.clone(), Backend::Postgres),
        };
        let options = AnyConnectOptions::from_str(&url)?;
        let pool = AnyPoolOptions::new()
            .max_connections(if backend == Backend::Sqlite { 8 } else { 16 })
            .acquire_timeout(Duration::from_secs(10))
            // A SQLite connection is a file handle in this process: a ping before each use
            // finds nothing and costs a round trip to its worker thread on every query.
            .test_before_acquire(backend == Backend::Postgres)
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == Backend::Sqlite {
                        sqlx::raw_sql(SQLITE_PRAGMAS).execute(conn).await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        let direct = match location {
            StoreLocation::Sqlite(path) => Some(Arc::new(Direct::new(path))),
            StoreLocation::Postgres(_) => None,
        };
        let store = Self {
            pool,
            backend,
            location: location.clone(),
            writers: Arc::default(),
            pending: Arc::default(),
            direct,
            owner: Arc::default(),
        };
        let mut tx = store.write_tx().await?;
        schema::migrate(&mut tx, backend, &location.redacted()).await?;
        tx.commit().await?;
        Ok(store)
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub fn location(&self) -> &StoreLocation {
        &self.location
    }

    pub async fn close(&self) {
        if let Some(checkpointer) = self.direct.as_ref().and_then(|direct| direct.close()) {
            // It ends once a checkpoint it is running ends.
            let _ = tokio::task::spawn_blocking(move || checkpointer.join()).await;
        }
        self.pool.close().await;
    }

    /// A transaction that holds the store's single write lock from its first
    /// statement, so read-check-write sequences (head compare, journal
    /// ordinals, registry CAS) are serialised across processes.
    async fn write_tx(&self) -> Result<WriteTx, StoreError> {
        let turn = self.writer_turn().await;
        self.write_tx_on(turn).await
    }

    /// [`Self::write_tx`] for a caller that already holds its writer turn.
    async fn write_tx_on(&self, turn: OwnedMutexGuard<()>) -> Result<WriteTx, StoreError> {
        let tx = match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => {
                let mut tx = self.pool.begin().await?;
                sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(PG_WRITE_LOCK).execute(&mut *tx).await?;
                tx
            }
        };
        Ok(WriteTx { tx, _turn: turn })
    }

    /// This process's turn to write; single-statement writes take it too.
    async fn writer_turn(&self) -> OwnedMutexGuard<()> {
        Arc::clone(&self.writers).lock_owned().await
    }
}
