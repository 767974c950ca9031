-- World store, schema version 2: drops the indexes no query reads. Every commit inserted into
-- each of them, into two at a random place (they lead with a per-call hash), and wrote their
-- pages; a query that needs one adds it back in its own version.
DROP INDEX IF EXISTS worlds_by_state_root;
DROP INDEX IF EXISTS log_entries_by_transition_ref;
DROP INDEX IF EXISTS log_entries_by_transition_fn;
