//! How log entries and worlds are addressed: the hashes that chain the log.

use serde_json::json;

use crate::canonical::canonical_value;
use crate::hashref::HashRef;

/// The frozen six-field header of a log entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHeader<'a> {
    pub entry_index: i64,
    pub semantics_epoch: i64,
    pub transition_fn: &'a HashRef,
    pub interpreter: &'a HashRef,
    pub prev_entry_hash: &'a HashRef,
    pub written_by: &'a str,
}

/// `entryHash` = sha256 of the canonical header plus the entry's transition (record) ref.
pub fn entry_hash(header: &EntryHeader<'_>, transition_ref: &HashRef) -> HashRef {
    HashRef::of(&canonical_value(&json!({
        "entryIndex": header.entry_index,
        "semanticsEpoch": header.semantics_epoch,
        "transitionFn": header.transition_fn.to_string(),
        "interpreter": header.interpreter.to_string(),
        "prevEntryHash": header.prev_entry_hash.to_string(),
        "writtenBy": header.written_by,
        "transitionRef": transition_ref.to_string(),
    })))
}

/// A world's ref = sha256 of its canonical `{revision, stateRoot, logHead}`.
pub fn world_ref(revision: i64, state_root: &HashRef, log_head: &HashRef) -> HashRef {
    HashRef::of(&canonical_value(&json!({
        "revision": revision,
        "stateRoot": state_root.to_string(),
        "logHead": log_head.to_string(),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_header_field_changes_the_entry_hash() {
        let a = HashRef::of(b"a");
        let b = HashRef::of(b"b");
        let base = EntryHeader {
            entry_index: 1,
            semantics_epoch: 1,
            transition_fn: &a,
            interpreter: &a,
            prev_entry_hash: &a,
            written_by: "x",
        };
        let reference = entry_hash(&base, &a);
        let variants = [
            EntryHeader { entry_index: 2, ..base },
            EntryHeader { semantics_epoch: 2, ..base },
            EntryHeader { transition_fn: &b, ..base },
            EntryHeader { interpreter: &b, ..base },
            EntryHeader { prev_entry_hash: &b, ..base },
            EntryHeader { written_by: "y", ..base },
        ];
        for variant in variants {
            assert_ne!(entry_hash(&variant, &a), reference, "{variant:?}");
        }
        assert_ne!(entry_hash(&base, &b), reference);
        assert_eq!(entry_hash(&base, &a), reference);
    }

    #[test]
    fn the_world_ref_hashes_the_canonical_world_triple() {
        let a = HashRef::of(b"a");
        let expected = HashRef::of(format!("{{\"logHead\":\"{a}\",\"revision\":3,\"stateRoot\":\"{a}\"}}").as_bytes());
        assert_eq!(world_ref(3, &a, &a), expected);
    }
}
