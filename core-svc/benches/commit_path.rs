//! The SQLite commit path on its own, run outside CI:
//!
//! ```sh
//! cargo bench -p world-core --bench commit_path -- [--commits N] [--prefill N] [--dir DIR] [--page-size N]
//! ```
//!
//! Eight clients commit one call each at a time through `Store::commit_next`, as the core does
//! for an echo `tools/call` (an input, an output and a record object, the journal's intent and
//! outcome, one episode), until `--commits` have committed; `--prefill` commits go first,
//! unmeasured, so the store has a history. The store is a fresh file under `--dir` (by default a
//! new directory in the working directory: a disk, not a tmpfs, since the fsync is half the cost);
//! `--page-size` creates the file with that page size first.
//!
//! One line of results: commits per second, the process's CPU per commit (getrusage), the CPU
//! per commit of the commit thread and of every other thread whose name says it belongs to the
//! store, the bytes this process wrote per commit (`/proc/self/io`), and the write-ahead log's
//! size at the end. Compare builds by running them in turns on the same machine.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use world_core::genesis;
use world_core::store::{Commit, LogEntry, OpenMode, Planner, Store, StoreLocation, StoredObject, WorldRow};
use world_model::{EntryHeader, Episode, HashRef, canonical_value, entry_hash, world_ref};

const CLIENTS: u64 = 8;
const BUDGET: Duration = Duration::from_secs(60);

struct Options {
    commits: u64,
    prefill: u64,
    dir: Option<PathBuf>,
    page_size: Option<u32>,
}

fn options() -> Options {
    let mut options = Options { commits: 20_000, prefill: 0, dir: None, page_size: None };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--commits" => options.commits = value().parse().expect("--commits N"),
            "--prefill" => options.prefill = value().parse().expect("--prefill N"),
            "--dir" => options.dir = Some(PathBuf::from(value())),
            "--page-size" => options.page_size = Some(value().parse().expect("--page-size N")),
            // `cargo bench` passes --bench.
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    options
}

/// The commit of one echo call, planned on whatever world is the head.
fn planner(episode: &Episode, client: u64, call: u64) -> Planner {
    let id = format!("mcp:bench-{client}-{call}");
    let episode = episode.clone();
    let transition_fn = HashRef::of(b"bench transition");
    let interpreter = HashRef::of(b"bench interpreter");
    Box::new(move |world: &WorldRow| {
        let by = "mcp";
        let arguments = json!({ "client": client, "call": call, "text": "hello from the commit bench" });
        let input = StoredObject::new("world/invocation-input/v1", by, canonical_value(&arguments));
        let output =
            StoredObject::new("world/invocation-output/v1", by, canonical_value(&json!({ "echo": arguments })));
        let record = StoredObject::new(
            "world/invocation-record/v1",
            by,
            canonical_value(&json!({
                "invocationId": id,
                "episodeId": episode.as_str(),
                "skillId": "tools.echo",
                "transitionFn": transition_fn.to_string(),
                "interpreter": interpreter.to_string(),
                "semanticsEpoch": 1,
                "input": input.hash.to_string(),
                "output": output.hash.to_string(),
            })),
        );
        let index = world.revision + 1;
        let header = EntryHeader {
            entry_index: index,
            semantics_epoch: 1,
            transition_fn: &transition_fn,
            interpreter: &interpreter,
            prev_entry_hash: &world.log_head,
            written_by: by,
        };
        let hash = entry_hash(&header, &record.hash);
        let state_root = output.hash;
        let entry = LogEntry {
            entry_index: index,
            semantics_epoch: 1,
            transition_fn,
            interpreter,
            prev_entry_hash: world.log_head,
            written_by: by.to_owned(),
            entry_hash: hash,
            transition_ref: record.hash,
        };
        Commit {
            invocation_id: Some(id),
            episode: Some(episode),
            observed_head: Some(world.reference),
            objects: vec![input, output, record],
            next_world: WorldRow {
                reference: world_ref(index, &state_root, &hash),
                revision: index,
                state_root,
                log_head: hash,
            },
            entry,
            logical_time: 1_700_000_000,
            effect_outcomes: Vec::new(),
        }
    })
}

/// Commits `count` calls from eight clients at a time; `first` numbers the first call.
async fn commit_calls(store: &Store, episode: &Episode, first: u64, count: u64) {
    let next = Arc::new(AtomicU64::new(first));
    let end = first + count;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (store, episode, next) = (store.clone(), episode.clone(), Arc::clone(&next));
            tokio::spawn(async move {
                loop {
                    let call = next.fetch_add(1, Ordering::Relaxed);
                    if call >= end {
                        return;
                    }
                    let id = format!("mcp:bench-{client}-{call}");
                    store.commit_next(&id, planner(&episode, client, call), false, BUDGET).await.expect("commit");
                }
            })
        })
        .collect();
    for client in clients {
        client.await.expect("client");
    }
}

/// CPU time of the whole process (user + system).
fn process_cpu() -> Duration {
    // SAFETY: getrusage writes into the struct it is given and reads nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1_000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// CPU time on each of this process's threads, summed by thread name.
fn thread_cpu() -> BTreeMap<String, Duration> {
    let mut threads = BTreeMap::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task").flatten() {
        let path = task.path();
        let (Ok(name), Ok(schedstat)) =
            (std::fs::read_to_string(path.join("comm")), std::fs::read_to_string(path.join("schedstat")))
        else {
            continue;
        };
        let nanos: u64 = schedstat.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
        *threads.entry(name.trim().to_owned()).or_default() += Duration::from_nanos(nanos);
    }
    threads
}

/// Bytes this process has written with write(2) and its kin.
fn written_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io");
    io.lines().find_map(|line| line.strip_prefix("wchar: ")).and_then(|n| n.parse().ok()).expect("wchar")
}

fn main() {
    let options = options();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir_in(options.dir.clone().unwrap_or_else(|| PathBuf::from("."))).expect("store dir");
    let path = dir.path().join("world.db");
    if let Some(page_size) = options.page_size {
        let conn = rusqlite::Connection::open(&path).expect("create the store file");
        conn.execute_batch(&format!("PRAGMA page_size = {page_size}; PRAGMA journal_mode = WAL;")).expect("page size");
    }
    runtime.block_on(async {
        let location = StoreLocation::Sqlite(path.clone());
        let store = Store::open(&location, OpenMode::CreateIfMissing).await.expect("open the store");
        genesis::commit_genesis(&store, 1_700_000_000).await.expect("genesis");
        let episode = Episode::parse("bench").expect("episode");
        commit_calls(&store, &episode, 0, options.prefill).await;

        let (cpu, threads, written, started) = (process_cpu(), thread_cpu(), written_bytes(), Instant::now());
        commit_calls(&store, &episode, options.prefill, options.commits).await;
        let elapsed = started.elapsed();
        let (cpu, written) = (process_cpu() - cpu, written_bytes() - written);
        let per_commit = |d: Duration| d.as_secs_f64() * 1e6 / options.commits as f64;
        let mut line = format!(
            "commits={} commits_per_s={:.0} cpu_us_per_commit={:.1} written_bytes_per_commit={:.0}",
            options.commits,
            options.commits as f64 / elapsed.as_secs_f64(),
            per_commit(cpu),
            written as f64 / options.commits as f64,
        );
        for (name, after) in thread_cpu() {
            let spent = after.saturating_sub(threads.get(&name).copied().unwrap_or_default());
            if name.starts_with("world-") && !spent.is_zero() {
                line.push_str(&format!(" {name}_us_per_commit={:.1}", per_commit(spent)));
            }
        }
        let wal = std::fs::metadata(path.with_extension("db-wal")).map(|m| m.len()).unwrap_or(0);
        let database = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        line.push_str(&format!(" wal_kib={} db_kib={}", wal / 1024, database / 1024));
        println!("{line}");
        store.close().await;
    });
}
