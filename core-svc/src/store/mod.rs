//! The world store: objects, worlds, the log, heads, the journal, sessions and
//! invocation claims, behind one API over two backends (SQLite in WAL mode, or
//! PostgreSQL). Every guard that matters for correctness is enforced inside a
//! database transaction, never in process memory, so several cores and CLIs
//! can share one store.

mod claims;
mod commit;
mod direct;
mod effects;
mod error;
mod journal;
mod location;
mod records;
mod schema;
mod script;
mod serving_lock;
mod sessions;

use std::ops::{Deref, DerefMut};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions, AnyRow};
use sqlx::{AnyConnection, AnyPool, Row, Transaction};
use tokio::sync::{Mutex, OwnedMutexGuard};
use world_model::HashRef;

use direct::Direct;
use script::Script;

pub use claims::Claim;
pub use commit::Planner;
pub use effects::{EFFECT_NAMESPACE, PendingIntent};
pub use error::StoreError;
pub use location::{StoreLocation, redact_url_password};
pub use records::{Commit, Committed, LogEntry, Receipt, SessionRow, StoredObject, WorldRow};
pub use schema::SCHEMA_VERSION;
pub use serving_lock::{LockError, LockMode, ServingLock};

/// The head row naming the selected world.
const SELECTED_WORLD_HEAD: &str = "selected_world_head";
/// Registry heads share the `heads` table under this prefix.
const REGISTRY_PREFIX: &str = "registry:";
/// Every SQLite connection's settings. WAL lets readers run beside the one writer; a writer
/// waits (bounded) for another process's transaction.
const SQLITE_PRAGMAS: &str =
    "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 15000;";
/// Key of the PostgreSQL advisory lock that serialises writers.
const PG_WRITE_LOCK: i64 = 0x776f_726c_6400;

/// `SELECT <every log entry column> FROM log_entries` followed by the given clauses.
macro_rules! select_entries {
    ($($clause:literal),*) => {
        concat!(
            "SELECT entry_index, semantics_epoch, transition_fn, interpreter, prev_entry_hash, ",
            "written_by, entry_hash, transition_ref FROM log_entries ",
            $($clause),*
        )
    };
}

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
    /// Commits waiting for the writer turn; whoever gets it next commits them together.
    pending: commit::Pending,
    /// SQLite only: the connections the session read and commit batches run on.
    direct: Option<Arc<Direct>>,
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
        if let Some(direct) = &self.direct {
            direct.close();
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

    // ----- objects -------------------------------------------------------

    /// Stores an object after checking its payload hashes to its ref;
    /// identical objects are kept once (the first writer's provenance wins).
    pub async fn put_object(&self, object: &StoredObject) -> Result<(), StoreError> {
        let payload = object.verify("object")?;
        let mut script = Script::new();
        insert_objects(&mut script, &[(object, payload)]);
        let _turn = self.writer_turn().await;
        script.run(&mut *self.pool.acquire().await?).await
    }

    pub async fn get_object(&self, hash: &HashRef, with_payload: bool) -> Result<Option<StoredObject>, StoreError> {
        let sql = if with_payload {
            "SELECT hash, interface_hash, semantic_id, provenance, payload FROM objects WHERE hash = $1"
        } else {
            "SELECT hash, interface_hash, semantic_id, provenance FROM objects WHERE hash = $1"
        };
        let row = sqlx::query(sql).bind(hash.to_string()).fetch_optional(&self.pool).await?;
        row.map(|row| object_from_row(&row, with_payload)).transpose()
    }

    /// Objects with this semantic id in ascending hash order, strictly after
    /// `after`, without payloads.
    pub async fn objects_by_semantic_id(
        &self,
        semantic_id: &str,
        after: Option<&HashRef>,
        limit: u32,
    ) -> Result<Vec<StoredObject>, StoreError> {
        let after = after.map(|a| a.to_string()).unwrap_or_default();
        let rows = sqlx::query(
            "SELECT hash, interface_hash, semantic_id, provenance FROM objects \
             WHERE semantic_id = $1 AND hash > $2 ORDER BY hash LIMIT $3",
        )
        .bind(semantic_id)
        .bind(after)
        .bind(i64::from(clamp_page(limit)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|row| object_from_row(row, false)).collect()
    }

    // ----- worlds, log, heads --------------------------------------------

    pub async fn selected_head(&self) -> Result<Option<HashRef>, StoreError> {
        head(&mut *self.pool.acquire().await?, SELECTED_WORLD_HEAD).await
    }

    pub async fn world(&self, reference: &HashRef) -> Result<Option<WorldRow>, StoreError> {
        let row = sqlx::query("SELECT world_ref, revision, state_root, log_head FROM worlds WHERE world_ref = $1")
            .bind(reference.to_string())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| world_from_row(&row)).transpose()
    }

    pub async fn log_entry(&self, index: i64) -> Result<Option<LogEntry>, StoreError> {
        let row = sqlx::query(select_entries!("WHERE entry_index = $1")).bind(index).fetch_optional(&self.pool).await?;
        row.map(|row| entry_from_row(&row)).transpose()
    }

    /// Consecutive entries from `from` upward, stopping at the first absent index.
    pub async fn log_page(&self, from: i64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let limit = clamp_page(limit);
        let Some(last) = from.checked_add(i64::from(limit) - 1) else {
            return Ok(Vec::new());
        };
        let rows = sqlx::query(select_entries!("WHERE entry_index >= $1 AND entry_index <= $2 ORDER BY entry_index"))
            .bind(from)
            .bind(last)
            .fetch_all(&self.pool)
            .await?;
        let mut page = Vec::with_capacity(rows.len());
        for (expected, row) in (from..).zip(rows.iter()) {
            let entry = entry_from_row(row)?;
            if entry.entry_index != expected {
                break;
            }
            page.push(entry);
        }
        Ok(page)
    }

    // ----- registry heads ------------------------------------------------

    pub async fn registry_head(&self, name: &str) -> Result<Option<HashRef>, StoreError> {
        head(&mut *self.pool.acquire().await?, &registry_key(name)).await
    }

    /// Moves a registry head from `expected` (`None`: must be absent) to
    /// `next`, which must be a stored object.
    pub async fn compare_and_set_registry_head(
        &self,
        name: &str,
        expected: Option<&HashRef>,
        next: &HashRef,
    ) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        if !object_exists(&mut tx, next).await? {
            return Err(StoreError::invalid("registry head", format!("{next} is not a stored object")));
        }
        let key = registry_key(name);
        let actual = head(&mut tx, &key).await?;
        if actual.as_ref() != expected {
            return Err(StoreError::RegistryConflict { name: name.to_owned(), expected: expected.copied(), actual });
        }
        let mut script = Script::new();
        set_head(&mut script, &key, next);
        script.run(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }
}

fn registry_key(name: &str) -> String {
    format!("{REGISTRY_PREFIX}{name}")
}

/// A result row's columns by name, read the same from a sqlx row and a direct SQLite row.
trait Columns {
    fn text(&self, column: &str) -> Result<String, StoreError>;
    fn optional_text(&self, column: &str) -> Result<Option<String>, StoreError>;
    fn int(&self, column: &str) -> Result<i64, StoreError>;
    fn blob(&self, column: &str) -> Result<Vec<u8>, StoreError>;
}

/// Implements [`Columns`] for a row type through its by-name getter (`try_get` on sqlx rows,
/// `get` on rusqlite rows): the two getters take different trait bounds, so one generic body
/// cannot serve both.
macro_rules! columns_through {
    ($row:ty, $get:ident) => {
        impl Columns for $row {
            fn text(&self, column: &str) -> Result<String, StoreError> {
                Ok(self.$get(column)?)
            }

            fn optional_text(&self, column: &str) -> Result<Option<String>, StoreError> {
                Ok(self.$get(column)?)
            }

            fn int(&self, column: &str) -> Result<i64, StoreError> {
                Ok(self.$get(column)?)
            }

            fn blob(&self, column: &str) -> Result<Vec<u8>, StoreError> {
                Ok(self.$get(column)?)
            }
        }
    };
}

columns_through!(AnyRow, try_get);
columns_through!(rusqlite::Row<'_>, get);

fn column_ref(row: &(impl Columns + ?Sized), column: &str) -> Result<HashRef, StoreError> {
    parse_column_ref(column, &row.text(column)?)
}

fn optional_column_ref(row: &(impl Columns + ?Sized), column: &str) -> Result<Option<HashRef>, StoreError> {
    row.optional_text(column)?.map(|text| parse_column_ref(column, &text)).transpose()
}

fn parse_column_ref(column: &str, text: &str) -> Result<HashRef, StoreError> {
    HashRef::parse(text).map_err(|e| StoreError::Damaged(format!("{column} {text:?}: {e}")))
}

fn object_from_row(row: &(impl Columns + ?Sized), with_payload: bool) -> Result<StoredObject, StoreError> {
    Ok(StoredObject {
        hash: column_ref(row, "hash")?,
        interface_hash: column_ref(row, "interface_hash")?,
        semantic_id: row.text("semantic_id")?,
        provenance: row.text("provenance")?,
        payload: if with_payload { Some(row.blob("payload")?) } else { None },
    })
}

fn world_from_row(row: &(impl Columns + ?Sized)) -> Result<WorldRow, StoreError> {
    Ok(WorldRow {
        reference: column_ref(row, "world_ref")?,
        revision: row.int("revision")?,
        state_root: column_ref(row, "state_root")?,
        log_head: column_ref(row, "log_head")?,
    })
}

fn entry_from_row(row: &(impl Columns + ?Sized)) -> Result<LogEntry, StoreError> {
    Ok(LogEntry {
        entry_index: row.int("entry_index")?,
        semantics_epoch: row.int("semantics_epoch")?,
        transition_fn: column_ref(row, "transition_fn")?,
        interpreter: column_ref(row, "interpreter")?,
        prev_entry_hash: column_ref(row, "prev_entry_hash")?,
        written_by: row.text("written_by")?,
        entry_hash: column_ref(row, "entry_hash")?,
        transition_ref: column_ref(row, "transition_ref")?,
    })
}

/// Adds verified objects (each with its payload) to `script` in as few statements as
/// possible; a hash already stored, or repeated in `objects`, keeps its first row.
fn insert_objects(script: &mut Script, objects: &[(&StoredObject, &[u8])]) {
    let mut seen = std::collections::HashSet::with_capacity(objects.len());
    let unique: Vec<_> = objects.iter().filter(|(object, _)| seen.insert(object.hash)).collect();
    let insert = "INSERT INTO objects (hash, interface_hash, semantic_id, provenance, payload)";
    script.insert_rows(insert, 5, "ON CONFLICT (hash) DO NOTHING", &unique, |script, (object, payload)| {
        script
            .bind(object.hash.to_string())
            .bind(object.interface_hash.to_string())
            .bind(object.semantic_id.as_str())
            .bind(object.provenance.as_str())
            .bind(*payload);
    });
}

async fn object_exists(conn: &mut AnyConnection, hash: &HashRef) -> Result<bool, StoreError> {
    Ok(sqlx::query("SELECT 1 AS present FROM objects WHERE hash = $1")
        .bind(hash.to_string())
        .fetch_optional(conn)
        .await?
        .is_some())
}

async fn head(conn: &mut AnyConnection, name: &str) -> Result<Option<HashRef>, StoreError> {
    let row = sqlx::query("SELECT ref FROM heads WHERE name = $1").bind(name).fetch_optional(conn).await?;
    row.map(|row| column_ref(&row, "ref")).transpose()
}

fn set_head(script: &mut Script, name: &str, value: &HashRef) {
    script
        .statement("INSERT INTO heads (name, ref) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET ref = excluded.ref")
        .bind(name)
        .bind(value.to_string());
}
