-- World store, schema version 3 ({backend}): the effect journal's index and episode leases.

-- One row per effect intent (whose object and journal row carry the rest): ordinals are
-- gapless per episode, the spend a budget is seeded from is their sum, and `call_id`
-- names the invocation that requested the effect, so a resent call that already ran an
-- effect is never run again.
CREATE TABLE effect_intents (
    episode TEXT NOT NULL,
    ordinal {int} NOT NULL,
    call_id TEXT NOT NULL,
    effect TEXT NOT NULL,
    scope TEXT NOT NULL,
    cost {int} NOT NULL,
    PRIMARY KEY (episode, ordinal)
);
CREATE INDEX effect_intents_by_call ON effect_intents (call_id);

-- The holder of an episode's effect turn: effectful calls of one episode run one at a time,
-- whichever core serves them. A lease outlives its owner only until it expires.
CREATE TABLE episode_leases (
    episode TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at {int} NOT NULL
);
