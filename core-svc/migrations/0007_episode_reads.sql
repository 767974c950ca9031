-- World store, schema version 7 ({backend}): which episode each entry and object belongs to, so a
-- session's read is decided by an index lookup instead of a walk of the log.

-- The episode of the session whose commit logged the entry; '' for an entry of no episode
-- (genesis, a commit made by an operator on the store directly).
ALTER TABLE log_entries ADD COLUMN episode TEXT NOT NULL DEFAULT '';
CREATE INDEX log_entries_by_episode ON log_entries (episode, entry_index);

-- One row per episode whose writes hold the object (the same bytes may belong to several);
-- '' for an object of no episode (sources, registries, epochs, interpreter records, genesis).
-- Filled by every write in the transaction that writes the object; an object without rows is
-- read by operators and holders of Log.Read only.
CREATE TABLE object_episodes (
    object_ref TEXT NOT NULL,
    episode TEXT NOT NULL,
    PRIMARY KEY (object_ref, episode)
){without_rowid};
