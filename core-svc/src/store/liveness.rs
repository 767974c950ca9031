//! Which cores are alive, so a dead core's claims and leases can end before they expire.
//!
//! Every claim, lease and effect intent names the process that wrote it as
//! `<core>/<incarnation>`: the core's identity (`--core-id`) and a random name for this run
//! of it. On PostgreSQL a serving core registers its identity in `cores` and holds, on a
//! connection of its own, a session-level advisory lock keyed by the identity's `lock_key`
//! for as long as it runs. The database drops that lock when the session ends, so a dead
//! core's lock is free. A core that loses the session while it runs stops at once (see
//! [`Liveness::start`]), and others wait [`FENCE`] after they first find the lock free
//! before they treat the core as dead, so no handler of it can still run by then.
//!
//! A SQLite store has one serving core (its serving lock is exclusive): there nothing needs
//! telling apart, and a starting core frees everything it finds.

use std::time::Duration;

use sqlx::{AnyConnection, Connection, Row};

use super::{Backend, Store, StoreError, StoreLocation};
use crate::session::random_bytes;

/// How long a core's liveness lock must have been seen free (or a newer run of it have
/// started) before its claims and leases end: longer than a core takes to notice a lost
/// session and stop ([`PROBE_EVERY`] + [`PROBE_TIMEOUT`]).
pub const FENCE: Duration = Duration::from_secs(3);
/// How often a serving core checks its liveness session, and how long one check may take.
const PROBE_EVERY: Duration = Duration::from_millis(500);
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a starting core waits for its identity's lock: a dead run's session may take
/// that long to end on the server (the keepalives below).
const LOCK_WAIT: Duration = Duration::from_secs(30);
/// Liveness locks are `LOCK_BASE + lock_key`, apart from the store's other advisory locks.
const LOCK_BASE: i64 = 0x776f_726c_6500_0000;
/// The database's clock, in Unix seconds: every core compares against the same one.
macro_rules! db_now {
    () => {
        "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS BIGINT)"
    };
}

#[derive(Debug, thiserror::Error)]
pub enum LivenessError {
    #[error(
        "another world-core serves {store} as core {core:?} (its liveness lock is held): give each core its own \
         --core-id"
    )]
    Held { core: String, store: String },
    #[error("cannot register core {core:?} in {store}: {cause}")]
    Failed { core: String, store: String, cause: String },
}

/// A serving core's registration: its liveness session lasts as long as this value (for a
/// serving core, as long as the process).
pub struct Liveness {
    probe: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Liveness {
    fn drop(&mut self) {
        // The session, and with it the lock, ends with the probe that holds it.
        if let Some(probe) = &self.probe {
            probe.abort();
        }
    }
}

impl Store {
    /// `<core>/<incarnation>` of this process (a name of its own when it serves no core id).
    pub fn owner(&self) -> &str {
        self.owner.get_or_init(|| owner_key(&format!("process-{}", std::process::id())))
    }
}

/// A fresh incarnation of `core`.
fn owner_key(core: &str) -> String {
    format!("{core}/{}", hex::encode(&random_bytes()[..6]))
}

impl Liveness {
    /// Makes this process core `core` of `store`. On PostgreSQL: registers the identity,
    /// takes its liveness lock on a connection of its own (waiting up to [`LOCK_WAIT`] for a
    /// dead run's session to end, refusing when a live core holds it), and probes that
    /// connection every [`PROBE_EVERY`]; when the session is lost the process exits, so no
    /// handler of it runs once others may take its claims and leases.
    pub async fn start(store: &Store, core: &str) -> Result<Self, LivenessError> {
        let owner = owner_key(core);
        let shown = store.location().redacted();
        let failed = |cause: String| LivenessError::Failed { core: core.to_owned(), store: shown.clone(), cause };
        if store.owner.get().is_some() {
            return Err(failed("this store handle already wrote in another name".into()));
        }
        let StoreLocation::Postgres(url) = store.location() else {
            let _ = store.owner.set(owner);
            return Ok(Self { probe: None });
        };
        let mut conn = AnyConnection::connect(url).await.map_err(|e| failed(e.to_string()))?;
        // The server ends a session whose client vanished (a host lost, a cable cut) after
        // about 11 s instead of hours, which frees a dead core's lock in time.
        sqlx::raw_sql("SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3")
            .execute(&mut conn)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let lock_key = register(store, core).await.map_err(|e| failed(e.to_string()))?;
        let waited = std::time::Instant::now();
        loop {
            let row = sqlx::query("SELECT pg_try_advisory_lock($1) AS taken")
                .bind(LOCK_BASE + lock_key)
                .fetch_one(&mut conn)
                .await
                .map_err(|e| failed(e.to_string()))?;
            if row.try_get::<bool, _>("taken").map_err(|e| failed(e.to_string()))? {
                break;
            }
            if waited.elapsed() >= LOCK_WAIT {
                return Err(LivenessError::Held { core: core.to_owned(), store: shown });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let incarnation = owner.rsplit_once('/').map_or("", |(_, incarnation)| incarnation);
        let begin = async {
            let mut tx = store.write_tx().await?;
            sqlx::query(concat!(
                "UPDATE cores SET incarnation = $2, started_at = ",
                db_now!(),
                ", gone_since = NULL WHERE core = $1"
            ))
            .bind(core)
            .bind(incarnation)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok::<_, StoreError>(())
        };
        begin.await.map_err(|e| failed(e.to_string()))?;
        let _ = store.owner.set(owner);
        let probe = tokio::spawn(probe(conn, core.to_owned()));
        Ok(Self { probe: Some(probe) })
    }
}

/// The row of `core`, added with the next free lock key when it is new; returns the key.
async fn register(store: &Store, core: &str) -> Result<i64, StoreError> {
    let mut tx = store.write_tx().await?;
    sqlx::query(concat!(
        "INSERT INTO cores (core, lock_key, incarnation, started_at) SELECT $1, COALESCE(MAX(lock_key), 0) + 1, '', ",
        db_now!(),
        " FROM cores ON CONFLICT (core) DO NOTHING"
    ))
    .bind(core)
    .execute(&mut *tx)
    .await?;
    let key: i64 = sqlx::query("SELECT lock_key FROM cores WHERE core = $1")
        .bind(core)
        .fetch_one(&mut *tx)
        .await?
        .try_get("lock_key")?;
    tx.commit().await?;
    Ok(key)
}

/// Checks the liveness session until it fails, then ends the process.
async fn probe(mut conn: AnyConnection, core: String) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let error = match tokio::time::timeout(PROBE_TIMEOUT, sqlx::query("SELECT 1").execute(&mut conn)).await {
            Ok(Ok(_)) => continue,
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {PROBE_TIMEOUT:?}"),
        };
        // Exiting takes every handler of this process with it (interpreters die with their
        // parent), before any other core can treat this one as dead.
        tracing::error!(core, %error, "the liveness session with the store was lost; stopping at once");
        eprintln!(
            "world-core: the liveness session of core {core:?} with the store was lost ({error}); stopping at once so \
             other cores can take over its calls"
        );
        std::process::exit(1);
    }
}

/// What the store knows of a core's liveness.
struct CoreRow {
    lock_key: i64,
    incarnation: String,
    started_at: i64,
    gone_since: Option<i64>,
    now: i64,
}

async fn core_row(conn: &mut AnyConnection, core: &str) -> Result<Option<CoreRow>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT lock_key, incarnation, started_at, gone_since, ",
        db_now!(),
        " AS now FROM cores WHERE core = $1"
    ))
    .bind(core)
    .fetch_optional(conn)
    .await?;
    row.map(|row| {
        Ok(CoreRow {
            lock_key: row.try_get("lock_key")?,
            incarnation: row.try_get("incarnation")?,
            started_at: row.try_get("started_at")?,
            gone_since: row.try_get("gone_since")?,
            now: row.try_get("now")?,
        })
    })
    .transpose()
}

/// Whether some session of this database holds the liveness lock with `lock_key`.
async fn lock_held(conn: &mut AnyConnection, lock_key: i64) -> Result<bool, StoreError> {
    let key = LOCK_BASE + lock_key;
    // A bigint advisory key shows in pg_locks as its high and low 32 bits.
    let row = sqlx::query(
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 \
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
         AND classid::bigint = $1 AND objid::bigint = $2) AS held",
    )
    .bind(key >> 32)
    .bind(key & 0xffff_ffff)
    .fetch_one(conn)
    .await?;
    Ok(row.try_get("held")?)
}

/// Whether `owner` (`<core>/<incarnation>`) is dead for certain, inside a write
/// transaction: a newer run of its core started at least [`FENCE`] ago, or its core's lock
/// has been free for at least [`FENCE`] (the first look notes when it was found free).
/// Unregistered owners (another backend's, or written before cores registered) are never
/// dead this way: only their expiry ends what they hold.
pub(super) async fn owner_gone(conn: &mut AnyConnection, backend: Backend, owner: &str) -> Result<bool, StoreError> {
    let Some((core, incarnation)) = owner.rsplit_once('/') else { return Ok(false) };
    if backend != Backend::Postgres {
        return Ok(false);
    }
    let Some(row) = core_row(conn, core).await? else { return Ok(false) };
    let fenced = row.now - FENCE.as_secs() as i64;
    if row.incarnation != incarnation && row.started_at <= fenced {
        return Ok(true);
    }
    if lock_held(conn, row.lock_key).await? {
        return Ok(false);
    }
    match row.gone_since {
        Some(since) => Ok(since <= fenced),
        None => {
            sqlx::query("UPDATE cores SET gone_since = $2 WHERE core = $1 AND gone_since IS NULL")
                .bind(core)
                .bind(row.now)
                .execute(conn)
                .await?;
            Ok(false)
        }
    }
}

impl Store {
    /// Whether `owner` (`<core>/<incarnation>`) is a live core's current run: on PostgreSQL
    /// its core's lock is held and no newer run has registered. On SQLite no other core
    /// serves beside this one, so every other owner is dead.
    pub async fn owner_alive(&self, owner: &str) -> Result<bool, StoreError> {
        if owner == self.owner() {
            return Ok(true);
        }
        let Some((core, incarnation)) = owner.rsplit_once('/') else { return Ok(false) };
        if self.backend != Backend::Postgres {
            return Ok(false);
        }
        let mut conn = self.pool.acquire().await?;
        let Some(row) = core_row(&mut conn, core).await? else { return Ok(false) };
        Ok(row.incarnation == incarnation && lock_held(&mut conn, row.lock_key).await?)
    }
}
