-- World store, schema version 5 ({backend}): which core holds each claim, lease and effect intent,
-- and until when, so a dead core's can be told from a live one's.

-- Every core identity (`--core-id`) that has served the store. On PostgreSQL a serving core
-- holds a session-level advisory lock keyed by `lock_key` for as long as it lives;
-- `incarnation` names its current process, `gone_since` when another core first found the
-- lock free. A SQLite store has one serving core and keeps the table empty.
CREATE TABLE cores (
    core TEXT PRIMARY KEY,
    lock_key {int} NOT NULL UNIQUE,
    incarnation TEXT NOT NULL,
    started_at {int} NOT NULL,
    gone_since {int}
);

-- A claim lasts until its owner (`<core>/<incarnation>`) is known dead or `expires_at`,
-- which the owner sets from its own invocation timeout. Claims written before this version
-- keep the fixed 120 s they were given.
ALTER TABLE invocation_claims ADD COLUMN expires_at {int} NOT NULL DEFAULT 0;
UPDATE invocation_claims SET expires_at = claimed_at + 120;

-- The core (`<core>/<incarnation>`) holding a lease, and the one that wrote an intent; ''
-- for rows written before this version.
ALTER TABLE episode_leases ADD COLUMN core TEXT NOT NULL DEFAULT '';
ALTER TABLE effect_intents ADD COLUMN core TEXT NOT NULL DEFAULT '';
