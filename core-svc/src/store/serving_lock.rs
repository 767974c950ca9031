//! The serving lock: a serving core holds it for as long as it serves, and
//! the offline registry writer (`world-publish`) refuses while anyone does.
//!
//! SQLite: an exclusive, non-blocking POSIX record lock on `<canonical store>.serving.lock`
//! (the file's existence means nothing). It belongs to the process and ends with it, unlike
//! a `flock`, which lives as long as any copy of its descriptor: an interpreter the core is
//! starting holds copies of them all until it execs, so a killed core's `flock` could outlive
//! it and refuse the core restarted in its place. PostgreSQL: session-level advisory locks on
//! one dedicated connection; serving cores share the lock (several may serve one database),
//! the publisher needs it exclusively.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
    File(LockFile),
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
                match LockFile::take(lock_path) {
                    Ok(Some(file)) => Ok(Self { _held: Held::File(file) }),
                    Ok(None) => Err(LockError::Held(shown)),
                    Err(cause) => Err(failed(cause)),
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

impl ServingLock {
    /// The lock file held, with its path: `None` for PostgreSQL's advisory lock.
    pub fn file(&self) -> Option<(&Path, &File)> {
        match &self._held {
            Held::File(LockFile { file: Some(file), path }) => Some((path, file)),
            _ => None,
        }
    }
}

/// Lock files this process holds. A POSIX record lock never excludes its own process, and
/// closing any descriptor of the file drops it, so a second taker here is refused before it
/// opens the file.
static HELD_HERE: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// An open lock file whose whole-file write lock this process holds.
struct LockFile {
    file: Option<File>,
    path: PathBuf,
}

impl LockFile {
    /// The lock, or `None` when another holder has it.
    fn take(path: PathBuf) -> Result<Option<Self>, String> {
        let mut held_here = HELD_HERE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if held_here.contains(&path) {
            return Ok(None);
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: a zeroed flock is a valid value; the fields that matter are set below.
        let mut whole_file: libc::flock = unsafe { std::mem::zeroed() };
        whole_file.l_type = libc::F_WRLCK as libc::c_short;
        whole_file.l_whence = libc::SEEK_SET as libc::c_short;
        // SAFETY: F_SETLK on a descriptor we own with a valid flock; it neither blocks nor keeps the pointer.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &whole_file) } != 0 {
            let error = std::io::Error::last_os_error();
            return match error.raw_os_error() {
                Some(libc::EACCES | libc::EAGAIN) => Ok(None),
                _ => Err(format!("{}: {error}", path.display())),
            };
        }
        held_here.insert(path.clone());
        Ok(Some(Self { file: Some(file), path }))
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        let mut held_here = HELD_HERE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Closed (so unlocked) before another taker in this process may open it.
        drop(self.file.take());
        held_here.remove(&self.path);
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
