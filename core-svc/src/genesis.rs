//! Genesis: revision 0, entry 0, written by `genesis`. It is an ordinary
//! compare-and-append against an empty head, so it is refused once any head
//! exists and is safe beside a serving core.

use std::time::Duration;

use serde_json::json;
use world_model::{EntryHeader, HashRef, canonical_value};

use crate::store::{Commit, LogEntry, Store, StoreError, StoredObject, WorldRow};

pub const GENESIS_SEMANTIC_ID: &str = "world/genesis/v1";
pub const GENESIS_WRITER: &str = "genesis";

/// The entry hash of a stored log entry.
pub fn entry_hash(entry: &LogEntry) -> HashRef {
    let header = EntryHeader {
        entry_index: entry.entry_index,
        semantics_epoch: entry.semantics_epoch,
        transition_fn: &entry.transition_fn,
        interpreter: &entry.interpreter,
        prev_entry_hash: &entry.prev_entry_hash,
        written_by: &entry.written_by,
    };
    world_model::entry_hash(&header, &entry.transition_ref)
}

pub use world_model::world_ref;

/// `entry` with its hash filled in (whatever it held), and the world it makes with
/// `state_root` as its state: revision and log head are the entry's.
pub fn seal(mut entry: LogEntry, state_root: HashRef) -> (LogEntry, WorldRow) {
    entry.entry_hash = entry_hash(&entry);
    let world = WorldRow {
        reference: world_ref(entry.entry_index, &state_root, &entry.entry_hash),
        revision: entry.entry_index,
        state_root,
        log_head: entry.entry_hash,
    };
    (entry, world)
}

/// The genesis commit. Its one object stands for the empty state, the
/// transition and the record; the previous entry hash is that of no bytes.
pub fn genesis_commit(now: i64) -> Commit {
    let object = StoredObject::new(
        GENESIS_SEMANTIC_ID,
        GENESIS_WRITER,
        canonical_value(&json!({ "semanticId": GENESIS_SEMANTIC_ID })),
    );
    let entry = LogEntry {
        entry_index: 0,
        semantics_epoch: 0,
        transition_fn: object.hash,
        interpreter: object.hash,
        prev_entry_hash: HashRef::of(b""),
        written_by: GENESIS_WRITER.to_owned(),
        entry_hash: object.hash,
        transition_ref: object.hash,
    };
    let (entry, next_world) = seal(entry, object.hash);
    Commit {
        invocation_id: None,
        episode: None,
        observed_head: None,
        objects: vec![object],
        next_world,
        entry,
        logical_time: now,
        effect_outcomes: Vec::new(),
    }
}

pub async fn commit_genesis(store: &Store, now: i64) -> Result<WorldRow, StoreError> {
    let commit = genesis_commit(now);
    let world = commit.next_world;
    store.commit(commit, Duration::from_secs(10)).await?;
    Ok(world)
}
