//! WAL checkpoints off the commit thread.
//!
//! SQLite's automatic checkpoint runs inside whichever COMMIT takes the write-ahead log past
//! 1,000 frames, on the committing connection: on the commit thread it copied the pages of the
//! last thousand frames back into the database file and fsynced it while the next batch waited.
//! The writer connection turns it off and reports the log's length after each commit instead,
//! and every [`BACKGROUND_BYTES`] of log a thread of its own checkpoints from a connection of
//! its own: PASSIVE, so it neither waits for nor blocks the writer or any reader.
//!
//! The log starts over (the next commit writes at its beginning) only when a write transaction
//! begins with all of it copied, which a checkpoint beside a busy writer never sees: the writer
//! has begun its next batch by the time the copy ends. So once the log is past
//! [`RESTART_BYTES`] the thread asks the writer to copy the rest after its next commit, while
//! no write transaction is open. That copy holds only what was committed since the thread's,
//! and one commit in every [`RESTART_BYTES`] of log waits for it, where SQLite made one in
//! every 1,000 frames wait for all of them. Should the thread fall behind or be gone, the
//! writer checkpoints the whole log itself once it passes [`WRITER_BYTES`]. The thresholds are
//! larger than SQLite's because larger checkpoints are cheaper per commit: a page the log holds
//! many times is copied once, and the database file is fsynced less often.
//!
//! A checkpoint copies committed pages only, and fsyncs the database file before the log may
//! start over, so a process killed in the middle of one leaves a log the next open replays
//! (SQLite's guarantee); nothing here writes anything else. The sqlx pool's connections keep
//! an automatic checkpoint, past [`WRITER_BYTES`] (`SQLITE_PRAGMAS`) so that they never copy
//! the log the thread is about to copy: they write seldom, and a process that writes only
//! through them (an operator's command) has no other.

use std::cell::Cell;
use std::ffi::c_int;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use rusqlite::Connection;
use rusqlite::hooks::Wal;

use super::StoreError;

/// The thread checkpoints every time the log grows by this much.
const BACKGROUND_BYTES: u64 = 8 << 20;

/// Past this size the writer copies the rest of the log after the thread's copy, so that it
/// starts over.
const RESTART_BYTES: u64 = 4 * BACKGROUND_BYTES;

/// Past this size the writer checkpoints the log itself, after its commit.
const WRITER_BYTES: u64 = 8 * BACKGROUND_BYTES;

thread_local! {
    /// The log's length after the last commit of a writer connection on this thread; its WAL
    /// hook, which SQLite calls inside COMMIT, sets it.
    static LOG_FRAMES: Cell<u32> = const { Cell::new(0) };
}

/// The writer connection's WAL hook, in place of SQLite's automatic checkpoint.
fn note_log_frames(_wal: &Wal, frames: c_int) -> rusqlite::Result<()> {
    LOG_FRAMES.set(u32::try_from(frames).unwrap_or(0));
    Ok(())
}

/// What `PRAGMA wal_checkpoint` answers.
struct Checkpoint {
    /// Another connection was checkpointing.
    busy: bool,
    /// Frames in the log.
    log: i64,
    /// Frames of the log now in the database file.
    copied: i64,
}

fn passive(conn: &Connection) -> Result<Checkpoint, StoreError> {
    Ok(conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        Ok(Checkpoint { busy: row.get::<_, i64>(0)? != 0, log: row.get(1)?, copied: row.get(2)? })
    })?)
}

/// The store's checkpoint thread, started when the log first passes [`BACKGROUND_BYTES`].
pub(super) struct Checkpointer {
    path: PathBuf,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The log's size after the writer's previous commit; the writer alone uses it.
    last_log: AtomicU64,
}

/// What the writer and the thread share.
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    /// The thread copied a log past [`RESTART_BYTES`]: the writer copies the rest after its
    /// next commit.
    finish: AtomicBool,
    /// The store's page size, which each frame of the log holds.
    page_size: AtomicU32,
    /// The log sizes at which the thread and the writer act ([`BACKGROUND_BYTES`],
    /// [`RESTART_BYTES`], [`WRITER_BYTES`]; smaller in tests).
    background_bytes: AtomicU64,
    restart_bytes: AtomicU64,
    writer_bytes: AtomicU64,
}

impl Shared {
    /// The size of a log of `frames` frames.
    fn bytes(&self, frames: i64) -> u64 {
        u64::try_from(frames).unwrap_or(0) * u64::from(self.page_size.load(Ordering::Relaxed))
    }
}

#[derive(Default)]
struct State {
    /// The log grew by [`BACKGROUND_BYTES`] since the thread last began a checkpoint.
    wanted: bool,
    checkpointing: bool,
    stopping: bool,
    /// Checkpoints the thread ran.
    checkpoints: u64,
    /// Times the writer copied the rest of the log after the thread.
    finished: u64,
}

impl Checkpointer {
    pub(super) fn new(path: &Path) -> Self {
        let shared = Shared {
            state: Mutex::default(),
            changed: Condvar::new(),
            finish: AtomicBool::new(false),
            page_size: AtomicU32::new(0),
            background_bytes: AtomicU64::new(BACKGROUND_BYTES),
            restart_bytes: AtomicU64::new(RESTART_BYTES),
            writer_bytes: AtomicU64::new(WRITER_BYTES),
        };
        Self { path: path.to_owned(), shared: Arc::new(shared), thread: Mutex::default(), last_log: AtomicU64::new(0) }
    }

    /// Turns off the automatic checkpoint of `conn`, the writer connection, and has its commits
    /// report the log's length.
    pub(super) fn prepare_writer(&self, conn: &Connection) -> Result<(), StoreError> {
        let page_size: u32 = conn.query_row("PRAGMA page_size", [], |row| row.get(0))?;
        self.shared.page_size.store(page_size, Ordering::Relaxed);
        conn.execute_batch("PRAGMA wal_autocheckpoint = 0")?;
        conn.wal_hook(Some(note_log_frames));
        Ok(())
    }

    /// Called by the writer after each COMMIT on `conn`, still holding the writer turn.
    pub(super) fn committed(&self, conn: &Connection) {
        let frames = LOG_FRAMES.replace(0);
        if frames == 0 {
            // The transaction wrote nothing.
            return;
        }
        let shared = &self.shared;
        let log = shared.bytes(frames.into());
        let last = self.last_log.swap(log, Ordering::Relaxed);
        if log >= shared.writer_bytes.load(Ordering::Relaxed) {
            self.checkpoint(conn, "the log outgrew the checkpoint thread: the writer checkpointed it");
        } else if shared.finish.load(Ordering::Relaxed) && shared.finish.swap(false, Ordering::Relaxed) {
            self.checkpoint(conn, "the writer copied the rest of the log");
            lock(&shared.state).finished += 1;
        } else {
            // A log shorter than before has started over.
            let before = if log >= last { last } else { 0 };
            let every = shared.background_bytes.load(Ordering::Relaxed).max(1);
            if log / every > before / every {
                self.wake();
            }
        }
    }

    /// The writer's own checkpoint: no write transaction of this process is open, so if it
    /// copies the log to its end (no reader holds an older snapshot), the next commit starts
    /// the log over.
    fn checkpoint(&self, conn: &Connection, what: &str) {
        match passive(conn) {
            Ok(Checkpoint { log, copied, .. }) => tracing::debug!(log, copied, "{what}"),
            // The commit is durable whatever happens here; a later one tries again.
            Err(error) => tracing::warn!(%error, "the writer's checkpoint failed"),
        }
    }

    fn wake(&self) {
        let mut state = lock(&self.shared.state);
        if state.stopping {
            return;
        }
        state.wanted = true;
        self.shared.changed.notify_one();
        drop(state);
        let mut thread = lock(&self.thread);
        if thread.is_none() {
            let (path, shared) = (self.path.clone(), Arc::clone(&self.shared));
            let spawned = std::thread::Builder::new().name("world-checkpt".into()).spawn(move || run(&path, &shared));
            match spawned {
                Ok(handle) => *thread = Some(handle),
                // The writer checkpoints itself past `WRITER_BYTES`.
                Err(error) => tracing::warn!(%error, "the checkpoint thread did not start"),
            }
        }
    }

    /// Stops the thread; the returned handle joins it once its checkpoint (if one is running)
    /// ends.
    pub(super) fn stop(&self) -> Option<JoinHandle<()>> {
        lock(&self.shared.state).stopping = true;
        self.shared.changed.notify_all();
        lock(&self.thread).take()
    }
}

impl Drop for Checkpointer {
    /// A store dropped without `close` leaves the thread to end on its own.
    fn drop(&mut self) {
        lock(&self.shared.state).stopping = true;
        self.shared.changed.notify_all();
    }
}

/// The checkpoint thread: a checkpoint each time the writer asks for one.
fn run(path: &Path, shared: &Shared) {
    let mut conn = None;
    loop {
        {
            let state = lock(&shared.state);
            let mut state =
                shared.changed.wait_while(state, |s| !s.wanted && !s.stopping).unwrap_or_else(PoisonError::into_inner);
            if state.stopping {
                return;
            }
            state.wanted = false;
            state.checkpointing = true;
        }
        let checkpoint = checkpoint(&mut conn, path);
        match checkpoint {
            Ok(checkpoint) => {
                if !checkpoint.busy && shared.bytes(checkpoint.log) >= shared.restart_bytes.load(Ordering::Relaxed) {
                    shared.finish.store(true, Ordering::Relaxed);
                }
            }
            Err(error) => {
                // The writer checkpoints itself if this keeps failing.
                tracing::warn!(%error, "the store's checkpoint failed");
                conn = None;
            }
        }
        let mut state = lock(&shared.state);
        state.checkpointing = false;
        state.checkpoints += 1;
        shared.changed.notify_all();
    }
}

/// A checkpoint on the thread's connection, opened if need be.
fn checkpoint(conn: &mut Option<Connection>, path: &Path) -> Result<Checkpoint, StoreError> {
    let conn = match conn {
        Some(conn) => conn,
        None => conn.insert(super::direct::connect(path)?),
    };
    passive(conn)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
impl Checkpointer {
    /// Lowers the log sizes at which the thread checkpoints, the writer copies the rest after
    /// it, and the writer checkpoints the whole log itself (in KiB).
    pub(super) fn set_log_kib(&self, background: u64, restart: u64, writer: u64) {
        self.shared.background_bytes.store(background.saturating_mul(1024), Ordering::Relaxed);
        self.shared.restart_bytes.store(restart.saturating_mul(1024), Ordering::Relaxed);
        self.shared.writer_bytes.store(writer.saturating_mul(1024), Ordering::Relaxed);
    }

    /// `(checkpoints, finished)` once the thread is idle: how many checkpoints it ran, and how
    /// often the writer copied the rest of the log after it.
    fn counts_when_idle(&self) -> (u64, u64) {
        let state = lock(&self.shared.state);
        let idle = self.shared.changed.wait_timeout_while(state, std::time::Duration::from_secs(60), |s| {
            (s.wanted || s.checkpointing) && !s.stopping
        });
        let (state, timeout) = idle.unwrap_or_else(PoisonError::into_inner);
        assert!(!timeout.timed_out(), "the checkpoint thread stays busy");
        (state.checkpoints, state.finished)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use serde_json::json;
    use tokio::io::AsyncBufReadExt;
    use world_model::{EntryHeader, entry_hash, world_ref};

    use super::*;
    use crate::store::{Commit, LogEntry, OpenMode, Planner, Store, StoreLocation, StoredObject, WorldRow};

    const BUDGET: Duration = Duration::from_secs(30);

    async fn fresh_store(dir: &tempfile::TempDir) -> Store {
        let store = Store::open(&StoreLocation::Sqlite(dir.path().join("world.db")), OpenMode::CreateIfMissing)
            .await
            .expect("open");
        crate::genesis::commit_genesis(&store, 1_700_000_000).await.expect("genesis");
        store
    }

    /// One call's commit (an object and the journal's two), on whatever world is the head.
    fn planner(id: String) -> Planner {
        Box::new(move |world: &WorldRow| {
            let object = StoredObject::new("test/output/v1", "test", json!({ "id": id }).to_string().into_bytes());
            let (transition, index) = (object.hash, world.revision + 1);
            let header = EntryHeader {
                entry_index: index,
                semantics_epoch: 1,
                transition_fn: &transition,
                interpreter: &transition,
                prev_entry_hash: &world.log_head,
                written_by: "test",
            };
            let hash = entry_hash(&header, &transition);
            Commit {
                invocation_id: Some(id),
                episode: None,
                observed_head: Some(world.reference),
                next_world: WorldRow {
                    reference: world_ref(index, &object.hash, &hash),
                    revision: index,
                    state_root: object.hash,
                    log_head: hash,
                },
                entry: LogEntry {
                    entry_index: index,
                    semantics_epoch: 1,
                    transition_fn: transition,
                    interpreter: transition,
                    prev_entry_hash: world.log_head,
                    written_by: "test".into(),
                    entry_hash: hash,
                    transition_ref: transition,
                },
                objects: vec![object],
                logical_time: 1_700_000_000,
                effect_outcomes: Vec::new(),
            }
        })
    }

    /// `count` commits from eight concurrent callers, named `{name}-{n}`.
    async fn commit_calls(store: &Store, name: &str, count: usize) {
        let callers: Vec<_> = (0..8)
            .map(|caller| {
                let (store, name) = (store.clone(), name.to_owned());
                tokio::spawn(async move {
                    for n in (caller..count).step_by(8) {
                        let id = format!("{name}-{n}");
                        store.commit_next(&id, planner(id.clone()), false, BUDGET).await.expect("commit");
                    }
                })
            })
            .collect();
        for caller in callers {
            caller.await.expect("caller");
        }
    }

    /// `(log, copied)`: the log's size and how much of it is in the database file, in KiB.
    fn log_kib(dir: &tempfile::TempDir) -> (i64, i64) {
        let conn = Connection::open(dir.path().join("world.db")).expect("connect");
        let page_size: i64 = conn.query_row("PRAGMA page_size", [], |row| row.get(0)).expect("page size");
        let page_kib = page_size / 1024;
        let (log, copied): (i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(NOOP)", [], |row| Ok((row.get(1)?, row.get(2)?)))
            .expect("log length");
        (log * page_kib, copied * page_kib)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_writer_leaves_checkpoints_to_a_thread_of_their_own() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = fresh_store(&dir).await;
        let direct = store.direct.clone().expect("a SQLite store");
        // Only the thread checkpoints, and with far smaller logs than usual.
        direct.checkpointer().set_log_kib(200, 600, u64::MAX);

        // Readers read the whole time the first commits go in and checkpoints copy them.
        let reading = Arc::new(AtomicBool::new(true));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (store, reading) = (store.clone(), Arc::clone(&reading));
                tokio::spawn(async move {
                    while reading.load(Ordering::Relaxed) {
                        let head = store.selected_head().await.expect("head").expect("a world");
                        let world = store.world(&head).await.expect("world").expect("its row");
                        store.log_entry(world.revision).await.expect("entry").expect("its entry");
                    }
                })
            })
            .collect();
        commit_calls(&store, "read-beside", 300).await;
        reading.store(false, Ordering::Relaxed);
        for reader in readers {
            reader.await.expect("reader");
        }
        commit_calls(&store, "alone", 200).await;

        let autocheckpoint: i64 = direct
            .writer_conn(|conn| conn.query_row("PRAGMA wal_autocheckpoint", [], |row| row.get(0)))
            .expect("pragma");
        assert_eq!(autocheckpoint, 0, "the writer connection checkpoints automatically");
        let (checkpoints, _) = direct.checkpointer().counts_when_idle();
        assert!(checkpoints >= 1, "the checkpoint thread never ran");
        // The log passed 600 KiB long before the last commits: the thread copied it and
        // asked the writer to copy the rest, which it did after its next commit at the latest,
        // and the commit after that started the log over.
        commit_calls(&store, "last", 1).await;
        let (_, finished) = direct.checkpointer().counts_when_idle();
        assert!(finished >= 1, "the writer never copied the rest of the log");
        commit_calls(&store, "after-last", 1).await;
        // Since it last started over the log grew by less than 600 KiB, 200 KiB more at most
        // between two copies, and two commits.
        let (log, copied) = log_kib(&dir);
        assert!(log < 1000, "the log holds {log} KiB, {copied} KiB copied, after {finished} restarts");
        store.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_without_its_checkpoint_thread_checkpoints_itself() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = fresh_store(&dir).await;
        let direct = store.direct.clone().expect("a SQLite store");
        if let Some(thread) = direct.checkpointer().stop() {
            thread.join().expect("the checkpoint thread");
        }
        direct.checkpointer().set_log_kib(u64::MAX, u64::MAX, 800);
        commit_calls(&store, "alone", 400).await;

        // The log reached 800 KiB at most plus one batch's pages (8 commits here, a few dozen
        // pages), and started over after the writer's checkpoint; without that checkpoint 400
        // commits leave a log of about 20 MiB.
        let wal = std::fs::metadata(dir.path().join("world.db-wal")).expect("the log").len();
        assert!(wal < 3 << 20, "the log grew to {} KiB", wal >> 10);
        store.close().await;
    }

    #[test]
    fn the_pool_checkpoints_only_past_the_writers_limit() {
        // In frames of SQLite's default page size, which every store has.
        let setting = format!("PRAGMA wal_autocheckpoint = {};", WRITER_BYTES / 4096);
        assert!(crate::store::SQLITE_PRAGMAS.contains(&setting), "{}", crate::store::SQLITE_PRAGMAS);
    }

    /// Names the store the child process commits to.
    const CHILD_STORE: &str = "WORLD_TEST_CHECKPOINT_CHILD_STORE";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_killed_while_it_checkpoints_opens_whole() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("world.db");
        fresh_store(&dir).await.close().await;
        let mut revision = 0;
        for round in 0..6 {
            let mut child = tokio::process::Command::new(std::env::current_exe().expect("this test binary"))
                .args(["--ignored", "--exact", "store::checkpoint::tests::commit_until_killed", "--nocapture"])
                .env(CHILD_STORE, &path)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("the child starts");
            let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("its output")).lines();
            let started = tokio::time::timeout(Duration::from_secs(60), async {
                while let Some(line) = lines.next_line().await.expect("its output") {
                    if line == "committing" {
                        return true;
                    }
                }
                false
            });
            assert!(started.await.expect("the child commits within a minute"), "the child ended before committing");
            // Its commits and checkpoints take turns every few milliseconds; the kill lands on
            // whichever is under way.
            tokio::time::sleep(Duration::from_millis(10 + 29 * round)).await;
            child.start_kill().expect("SIGKILL");
            child.wait().await.expect("the child ends");

            let conn = Connection::open(&path).expect("connect");
            let check: String = conn.query_row("PRAGMA integrity_check", [], |row| row.get(0)).expect("check");
            assert_eq!(check, "ok", "round {round}");
            drop(conn);
            let store = Store::open(&StoreLocation::Sqlite(path.clone()), OpenMode::MustExist).await.expect("reopen");
            let head = store.selected_head().await.expect("head").expect("a world");
            let world = store.world(&head).await.expect("world").expect("its row");
            assert!(world.revision > revision, "round {round}: the child committed nothing");
            revision = world.revision;
            let mut previous = None::<LogEntry>;
            while previous.as_ref().is_none_or(|entry| entry.entry_index < revision) {
                let from = previous.as_ref().map_or(0, |entry| entry.entry_index + 1);
                let page = store.log_page(from, 500).await.expect("log page");
                assert!(!page.is_empty(), "round {round}: the log stops at {from}, short of {revision}");
                for entry in page {
                    if let Some(before) = &previous {
                        assert_eq!(
                            entry.prev_entry_hash, before.entry_hash,
                            "round {round}: entry {}",
                            entry.entry_index
                        );
                    }
                    previous = Some(entry);
                }
            }
            assert_eq!(previous.map(|entry| entry.entry_hash), Some(world.log_head), "round {round}");
            store.close().await;
        }
    }

    /// The process `a_store_killed_while_it_checkpoints_opens_whole` kills: commits to the store
    /// it names, checkpointing every few commits, until it is killed.
    #[test]
    #[ignore = "run by a_store_killed_while_it_checkpoints_opens_whole as the process it kills"]
    fn commit_until_killed() {
        let path = std::env::var_os(CHILD_STORE).expect("the store to commit to");
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(async {
            let location = StoreLocation::Sqlite(path.into());
            let store = Store::open(&location, OpenMode::MustExist).await.expect("open");
            store.direct.as_ref().expect("a SQLite store").checkpointer().set_log_kib(80, 160, 480);
            let name = format!("child-{}", std::process::id());
            for round in 0.. {
                commit_calls(&store, &format!("{name}-{round}"), 16).await;
                if round == 0 {
                    println!("committing");
                }
            }
        });
    }
}
