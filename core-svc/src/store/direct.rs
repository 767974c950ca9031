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

use super::checkpoint::Checkpointer;
use super::{SQLITE_PRAGMAS, StoreError};

/// Idle read connections kept for reuse; more are opened when needed and closed after.
const IDLE_READERS: usize = 8;

/// The writer's page cache once the database is past SQLite's lock page, in KiB (SQLite's
/// default is 2 MiB). Every commit inserts into indexes keyed by content hashes, at random
/// places; a cache that holds their inner pages keeps a commit from reading them back.
const LARGE_WRITER_CACHE_KIB: i64 = 64 * 1024;

/// SQLite's lock page starts here, 1 GiB into the file.
const PENDING_BYTE: i64 = 0x4000_0000;

/// How many write transactions go by between two looks at the database's size.
const SIZE_CHECK_EVERY: u32 = 256;

pub(super) struct Direct {
    path: PathBuf,
    readers: Mutex<Vec<Connection>>,
    /// Used only under the writer turn, and by nothing else, so its page cache stays valid
    /// from one batch to the next.
    writer: Mutex<Option<Writer>>,
    /// Checkpoints the log the writer's commits leave (`checkpoint`).
    checkpointer: Checkpointer,
}

/// The writer connection and how its page cache is sized.
struct Writer {
    conn: Connection,
    large_cache: bool,
    transactions: u32,
}

impl Writer {
    /// Keeps SQLite's default cache while the database is smaller than 1 GiB and a large one
    /// after. Below its lock page SQLite's cache scans its whole hash table at the end of
    /// every transaction that split a b-tree page (the split borrows the lock page's number,
    /// beyond the end of the file, and the end of the transaction truncates the cache to the
    /// file), so there a large cache costs every commit more than it saves; past it that
    /// never happens.
    fn size_cache(&mut self) -> Result<(), StoreError> {
        if self.large_cache {
            return Ok(());
        }
        self.transactions = self.transactions.wrapping_add(1);
        if self.transactions % SIZE_CHECK_EVERY != 1 {
            return Ok(());
        }
        let bytes: i64 = self.conn.query_row(
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
            [],
            |row| row.get(0),
        )?;
        if bytes > PENDING_BYTE {
            self.conn.execute_batch(&format!("PRAGMA cache_size = -{LARGE_WRITER_CACHE_KIB}"))?;
            self.large_cache = true;
            tracing::debug!(bytes, "the store passed 1 GiB: the writer's page cache grows");
        }
        Ok(())
    }
}

impl Direct {
    pub(super) fn new(path: &Path) -> Self {
        Self {
            path: path.to_owned(),
            readers: Mutex::default(),
            writer: Mutex::default(),
            checkpointer: Checkpointer::new(path),
        }
    }

    /// Runs `read` on an idle connection (or a new one). A connection whose read failed is
    /// closed rather than kept.
    pub(super) fn read<R>(&self, read: impl FnOnce(&Connection) -> Result<R, StoreError>) -> Result<R, StoreError> {
        let idle = lock(&self.readers).pop();
        let conn = match idle {
            Some(conn) => conn,
            None => connect(&self.path)?,
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
        let mut writer = match taken {
            Some(writer) => writer,
            None => {
                let conn = connect(&self.path)?;
                self.checkpointer.prepare_writer(&conn)?;
                Writer { conn, large_cache: false, transactions: 0 }
            }
        };
        writer.size_cache()?;
        writer.conn.execute_batch("BEGIN IMMEDIATE")?;
        Ok(DirectTx { writer: Some(writer), home: self })
    }

    /// Closes every idle connection and stops the checkpoint thread; the handle joins it.
    pub(super) fn close(&self) -> Option<std::thread::JoinHandle<()>> {
        lock(&self.readers).clear();
        lock(&self.writer).take();
        self.checkpointer.stop()
    }
}

/// A connection to the store at `path`, which exists by now: the pool created and migrated it.
pub(super) fn connect(path: &Path) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.execute_batch(SQLITE_PRAGMAS)?;
    // A batch's statements differ with its size; keep the usual sizes' statements prepared.
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// A write transaction on the writer connection; dropped without [`DirectTx::commit`] it
/// rolls back.
pub(super) struct DirectTx<'a> {
    writer: Option<Writer>,
    home: &'a Direct,
}

impl DirectTx<'_> {
    pub(super) fn conn(&self) -> &Connection {
        &self.writer.as_ref().expect("a transaction holds its connection until it ends").conn
    }

    pub(super) fn commit(mut self) -> Result<(), StoreError> {
        let writer = self.writer.take().expect("a transaction holds its connection until it ends");
        // A COMMIT that failed leaves the transaction open: the connection is dropped, which
        // rolls it back.
        writer.conn.execute_batch("COMMIT")?;
        self.home.checkpointer.committed(&writer.conn);
        *lock(&self.home.writer) = Some(writer);
        Ok(())
    }
}

impl Drop for DirectTx<'_> {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take()
            && writer.conn.execute_batch("ROLLBACK").is_ok()
        {
            *lock(&self.home.writer) = Some(writer);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
impl Direct {
    pub(super) fn checkpointer(&self) -> &Checkpointer {
        &self.checkpointer
    }

    /// Runs `read` on the writer connection between two transactions.
    pub(super) fn writer_conn<R>(&self, read: impl FnOnce(&Connection) -> rusqlite::Result<R>) -> rusqlite::Result<R> {
        let writer = lock(&self.writer);
        read(&writer.as_ref().expect("the writer connection is open").conn)
    }
}
