//! SQLite connections driven from the calling thread.
//!
//! sqlx runs each SQLite connection on a worker thread of its own, so every statement is a
//! hand-off to that thread and back: two wake-ups that on a busy machine cost more than the
//! statement itself. The two paths every call takes use these connections instead:
//! admission's session read (one primary-key read, which in WAL mode never waits for the
//! writer) runs inline on the request's thread, and a commit batch runs whole on the commit
//! thread. Everything else goes through the sqlx pool. Both link the one SQLite library, so
//! locks and the WAL are shared as between any two connections of a process.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OpenFlags};

use super::{SQLITE_PRAGMAS, StoreError};

/// Idle read connections kept for reuse; more are opened when needed and closed after.
const IDLE_READERS: usize = 8;

/// The writer's page cache, in KiB (SQLite's default is 2 MiB). Every commit inserts into
/// indexes keyed by content hashes, at random places; a cache that holds their inner pages
/// keeps a commit from reading them back from disk.
const WRITER_CACHE_KIB: i64 = 64 * 1024;

pub(super) struct Direct {
    path: PathBuf,
    readers: Mutex<Vec<Connection>>,
    /// Used only under the writer turn, and by nothing else, so its page cache stays valid
    /// from one batch to the next.
    writer: Mutex<Option<Connection>>,
}

impl Direct {
    pub(super) fn new(path: &Path) -> Self {
        Self { path: path.to_owned(), readers: Mutex::default(), writer: Mutex::default() }
    }

    fn open(&self) -> Result<Connection, StoreError> {
        // The store exists by now: the pool created and migrated it.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.path, flags)?;
        conn.execute_batch(SQLITE_PRAGMAS)?;
        // A batch's statements differ with its size; keep the usual sizes' statements prepared.
        conn.set_prepared_statement_cache_capacity(64);
        Ok(conn)
    }

    /// Runs `read` on an idle connection (or a new one). A connection whose read failed is
    /// closed rather than kept.
    pub(super) fn read<R>(&self, read: impl FnOnce(&Connection) -> Result<R, StoreError>) -> Result<R, StoreError> {
        let idle = lock(&self.readers).pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self.open()?,
        };
        let result = read(&conn)?;
        let mut readers = lock(&self.readers);
        if readers.len() < IDLE_READERS {
            readers.push(conn);
        }
        Ok(result)
    }

    /// Begins a write transaction on the writer connection. The caller holds the writer turn.
    pub(super) fn begin(&self) -> Result<DirectTx<'_>, StoreError> {
        let taken = lock(&self.writer).take();
        let conn = match taken {
            Some(conn) => conn,
            None => {
                let conn = self.open()?;
                conn.execute_batch(&format!("PRAGMA cache_size = -{WRITER_CACHE_KIB}"))?;
                conn
            }
        };
        conn.execute_batch("BEGIN IMMEDIATE")?;
        Ok(DirectTx { conn: Some(conn), home: self })
    }

    /// Closes every idle connection.
    pub(super) fn close(&self) {
        lock(&self.readers).clear();
        lock(&self.writer).take();
    }
}

/// A write transaction on the writer connection; dropped without [`DirectTx::commit`] it
/// rolls back.
pub(super) struct DirectTx<'a> {
    conn: Option<Connection>,
    home: &'a Direct,
}

impl DirectTx<'_> {
    pub(super) fn conn(&self) -> &Connection {
        self.conn.as_ref().expect("a transaction holds its connection until it ends")
    }

    pub(super) fn commit(mut self) -> Result<(), StoreError> {
        let conn = self.conn.take().expect("a transaction holds its connection until it ends");
        // A COMMIT that failed leaves the transaction open: the connection is dropped, which
        // rolls it back.
        conn.execute_batch("COMMIT")?;
        *lock(&self.home.writer) = Some(conn);
        Ok(())
    }
}

impl Drop for DirectTx<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && conn.execute_batch("ROLLBACK").is_ok()
        {
            *lock(&self.home.writer) = Some(conn);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
