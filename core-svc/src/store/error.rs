use world_model::HashRef;

/// Why a store operation did not happen. Every variant except `Uncertain`
/// means nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("world store {0} does not exist; refusing to create one (world-core serve or genesis creates the store)")]
    Missing(String),
    #[error(
        "world store {location} has schema version {found}, newer than this build supports ({supported}); \
         nothing was changed: run a newer world-core"
    )]
    FutureSchema { location: String, found: i64, supported: i64 },
    #[error("{location} is not a world store: it has tables but no schema version; nothing was changed")]
    NotAWorldStore { location: String },
    #[error("invalid {field}: {reason}")]
    Invalid { field: String, reason: String },
    #[error("conflict: observed {} selected {}", show(.observed), show(.selected))]
    Conflict { observed: Option<HashRef>, selected: Option<HashRef> },
    #[error("no world is selected; commit a genesis world first")]
    WorldAbsent,
    #[error("invocation {invocation_id} already committed world {result_ref}")]
    AlreadyCommitted { invocation_id: String, result_ref: HashRef },
    #[error("log entry {0} already exists")]
    EntryExists(i64),
    #[error("invocation id {invocation_id} already names a different {kind}")]
    DuplicateInvocation { invocation_id: String, kind: &'static str },
    #[error("registry {name} head moved: expected {} found {}", show(.expected), show(.actual))]
    RegistryConflict { name: String, expected: Option<HashRef>, actual: Option<HashRef> },
    #[error("session credential id {0} already exists")]
    SessionExists(String),
    #[error("stored data is damaged: {0}")]
    Damaged(String),
    /// The COMMIT was sent but its outcome is unknown: reconcile before any retry.
    #[error("commit outcome unknown: {0}")]
    Uncertain(String),
    /// A commit's transaction (shared with the commits queued beside it) failed before COMMIT.
    #[error("nothing was committed: the commit transaction failed: {0}")]
    RolledBack(String),
    #[error("store operation exceeded its deadline before anything was committed")]
    Deadline,
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("store file error: {0}")]
    Io(#[from] std::io::Error),
}

fn show(head: &Option<HashRef>) -> String {
    head.map(|h| h.to_string()).unwrap_or_default()
}

impl StoreError {
    pub fn invalid(field: impl Into<String>, reason: impl ToString) -> Self {
        Self::Invalid { field: field.into(), reason: reason.to_string() }
    }
}
