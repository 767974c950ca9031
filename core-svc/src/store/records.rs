//! The rows the store keeps, as typed values (refs parsed, never re-checked).

use world_model::{Episode, HashRef, semantic_interface_hash};

use super::StoreError;

/// A content-addressed object: `hash` is the sha256 of `payload`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredObject {
    pub hash: HashRef,
    pub interface_hash: HashRef,
    pub semantic_id: String,
    pub provenance: String,
    /// `None` when read without its payload.
    pub payload: Option<Vec<u8>>,
}

impl StoredObject {
    /// A new object whose interface hash is the sha256 of its semantic id
    /// (the convention for every kernel object).
    pub fn new(semantic_id: &str, provenance: &str, payload: Vec<u8>) -> Self {
        Self {
            hash: HashRef::of(&payload),
            interface_hash: semantic_interface_hash(semantic_id),
            semantic_id: semantic_id.to_owned(),
            provenance: provenance.to_owned(),
            payload: Some(payload),
        }
    }

    /// Checks that the payload is present and hashes to `hash`.
    pub fn verify(&self, field: &str) -> Result<&[u8], StoreError> {
        let payload = self.payload.as_deref().ok_or_else(|| StoreError::invalid(field, "object payload is missing"))?;
        let actual = HashRef::of(payload);
        if actual != self.hash {
            return Err(StoreError::invalid(
                field,
                format!("payload hashes to {actual}, not to the object's hash {}", self.hash),
            ));
        }
        Ok(payload)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorldRow {
    pub reference: HashRef,
    pub revision: i64,
    pub state_root: HashRef,
    pub log_head: HashRef,
}

/// A log entry: the six-field header plus its hash and transition (record) ref.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    pub entry_index: i64,
    pub semantics_epoch: i64,
    pub transition_fn: HashRef,
    pub interpreter: HashRef,
    pub prev_entry_hash: HashRef,
    pub written_by: String,
    pub entry_hash: HashRef,
    pub transition_ref: HashRef,
}

/// The compare-and-append commit: the one mutation of world state.
#[derive(Clone, Debug)]
pub struct Commit {
    /// Journals the commit under this id (`rest:…`, `a2a:…`, `mcp:…`): an
    /// identical resend is an idempotent success.
    pub invocation_id: Option<String>,
    /// The episode of the session that commits; its entry and objects are that episode's to
    /// read. `None` for a commit of no episode (genesis, an operator's commit on the store).
    pub episode: Option<Episode>,
    /// `None` for genesis.
    pub observed_head: Option<HashRef>,
    pub objects: Vec<StoredObject>,
    pub next_world: WorldRow,
    pub entry: LogEntry,
    /// Unix seconds, recorded in the journal.
    pub logical_time: i64,
    /// Effect outcomes journaled in the same transaction (an effectful call's, so its
    /// outcome costs no durable write of its own): `(effect id, outcome object)`.
    pub effect_outcomes: Vec<(String, StoredObject)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Committed {
    pub selected_head: HashRef,
    /// True when the invocation id had already committed this same commit.
    pub replayed: bool,
}

/// The three-state projection of a journaled invocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receipt {
    NotStarted,
    Indeterminate,
    Resolved { result_ref: HashRef },
}

impl Receipt {
    pub fn state(&self) -> &'static str {
        match self {
            Self::NotStarted => "not-started",
            Self::Indeterminate => "indeterminate",
            Self::Resolved { .. } => "resolved",
        }
    }
}

/// A session as stored: only the sha256 of the credential, never the credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRow {
    pub credential_id: String,
    pub episode: String,
    /// The grants as stored; decoded by the session resolver.
    pub grants_json: String,
    pub expires_at: i64,
    pub created_at: i64,
}
