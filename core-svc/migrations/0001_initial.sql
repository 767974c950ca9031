-- World store, schema version 1 ({backend}).
CREATE TABLE objects (
    hash TEXT PRIMARY KEY,
    interface_hash TEXT NOT NULL,
    semantic_id TEXT NOT NULL,
    provenance TEXT NOT NULL,
    payload {bytes} NOT NULL
);
CREATE INDEX objects_by_semantic_id ON objects (semantic_id, hash);

CREATE TABLE worlds (
    world_ref TEXT PRIMARY KEY,
    revision {int} NOT NULL,
    state_root TEXT NOT NULL,
    log_head TEXT NOT NULL
);
CREATE INDEX worlds_by_state_root ON worlds (state_root, world_ref);

CREATE TABLE log_entries (
    entry_index {int} PRIMARY KEY,
    entry_hash TEXT NOT NULL UNIQUE,
    semantics_epoch {int} NOT NULL,
    transition_fn TEXT NOT NULL,
    interpreter TEXT NOT NULL,
    prev_entry_hash TEXT NOT NULL,
    written_by TEXT NOT NULL,
    transition_ref TEXT NOT NULL
);
CREATE INDEX log_entries_by_transition_ref ON log_entries (transition_ref, entry_index);
CREATE INDEX log_entries_by_transition_fn ON log_entries (transition_fn, entry_index);

CREATE TABLE commit_objects (
    object_ref TEXT NOT NULL REFERENCES objects (hash),
    entry_index {int} NOT NULL REFERENCES log_entries (entry_index),
    PRIMARY KEY (object_ref, entry_index)
);

-- Named mutable pointers: the selected world head and the registries.
CREATE TABLE heads (
    name TEXT PRIMARY KEY,
    ref TEXT NOT NULL
);

CREATE TABLE journal (
    seq {int} PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('intent', 'outcome')),
    invocation_id TEXT NOT NULL CHECK (invocation_id <> ''),
    object_ref TEXT NOT NULL REFERENCES objects (hash),
    UNIQUE (invocation_id, kind)
);

CREATE TABLE sessions (
    credential_id TEXT PRIMARY KEY,
    episode TEXT NOT NULL,
    grants_json TEXT NOT NULL,
    expires_at {int} NOT NULL,
    created_at {int} NOT NULL
);
CREATE INDEX sessions_by_episode ON sessions (episode, credential_id);

-- One row per invocation id from the moment its call starts: the primary
-- key is the in-flight guard shared by every core on this store, and the
-- digest tells a resend of the same call from a different call.
CREATE TABLE invocation_claims (
    invocation_id TEXT PRIMARY KEY,
    call_digest TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('running', 'committed')),
    owner TEXT NOT NULL,
    claimed_at {int} NOT NULL
);
