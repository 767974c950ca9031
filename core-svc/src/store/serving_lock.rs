//! The serving lock: a serving core holds it for as long as it serves, and
//! the offline registry writer (`world-publish`) refuses while anyone does.
//!
//! SQLite: an exclusive, non-blocking OS file lock on `<canonical store>.serving.lock`
//! (tied to the open file, so a crashed holder frees it; the file's existence
//! means nothing). PostgreSQL: session-level advisory locks on one dedicated
//! connection; serving cores share the lock (several may serve one database),
//! the publisher needs it exclusively.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use sqlx::{Connection, Row};

use super::StoreLocation;

const PG_SERVING_LOCK: i64 = 0x776f_726c_6401;

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another world-core already serves {0} (its serving lock is held); stop it first")]
    Held(String),
    #[error("cannot take the serving lock for {location}: {cause}")]
    Failed { location: String, cause: String },
}

/// Held while the value lives; dropping it releases the lock.
pub struct ServingLock {
    _held: Held,
}

enum Held {
    File(#[allow(dead_code)] File),
    Postgres(#[allow(dead_code)] sqlx::AnyConnection),
}

/// Who asks for the lock: serving cores share it on PostgreSQL; a writer
/// that needs the store to itself takes it exclusively.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    Serve,
    Exclusive,
}

impl ServingLock {
    pub async fn acquire(location: &StoreLocation, mode: LockMode) -> Result<Self, LockError> {
        let shown = location.redacted();
        let failed = |cause: String| LockError::Failed { location: shown.clone(), cause };
        match location {
            StoreLocation::Sqlite(path) => {
                let lock_path = lock_file_path(path).map_err(|e| failed(e.to_string()))?;
                let file = OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&lock_path)
                    .map_err(|e| failed(format!("{}: {e}", lock_path.display())))?;
                match file.try_lock() {
                    Ok(()) => Ok(Self { _held: Held::File(file) }),
                    Err(TryLockError::WouldBlock) => Err(LockError::Held(shown)),
                    Err(TryLockError::Error(e)) => Err(failed(e.to_string())),
                }
            }
            StoreLocation::Postgres(url) => {
                sqlx::any::install_default_drivers();
                let mut conn = sqlx::AnyConnection::connect(url).await.map_err(|e| failed(e.to_string()))?;
                let sql = match mode {
                    LockMode::Serve => "SELECT pg_try_advisory_lock_shared($1) AS taken",
                    LockMode::Exclusive => "SELECT pg_try_advisory_lock($1) AS taken",
                };
                let row = sqlx::query(sql)
                    .bind(PG_SERVING_LOCK)
                    .fetch_one(&mut conn)
                    .await
                    .map_err(|e| failed(e.to_string()))?;
                let taken: bool = row.try_get("taken").map_err(|e| failed(e.to_string()))?;
                if taken { Ok(Self { _held: Held::Postgres(conn) }) } else { Err(LockError::Held(shown)) }
            }
        }
    }
}

/// `<canonical absolute store path>.serving.lock`; the store's directory must
/// exist, the store itself need not yet.
fn lock_file_path(store: &Path) -> std::io::Result<PathBuf> {
    let absolute = if store.is_absolute() { store.to_path_buf() } else { std::env::current_dir()?.join(store) };
    let canonical = match absolute.canonicalize() {
        Ok(path) => path,
        Err(_) => {
            let parent = absolute.parent().unwrap_or(Path::new("/")).canonicalize()?;
            let name = absolute.file_name().ok_or_else(|| std::io::Error::other("the store path has no file name"))?;
            parent.join(name)
        }
    };
    let mut name = canonical.into_os_string();
    name.push(".serving.lock");
    Ok(PathBuf::from(name))
}
