-- World store, schema version 4 ({backend}): each episode's spend kept beside its intents.

-- What an episode has spent, by (effect, scope): the sum of its intents' costs, raised in
-- the transaction that writes each intent, so seeding a call's budget reads a few rows
-- however many effects the episode has run.
CREATE TABLE effect_spend (
    episode TEXT NOT NULL,
    effect TEXT NOT NULL,
    scope TEXT NOT NULL,
    spent {int} NOT NULL,
    PRIMARY KEY (episode, effect, scope)
);
INSERT INTO effect_spend (episode, effect, scope, spent)
    SELECT episode, effect, scope, SUM(cost) FROM effect_intents GROUP BY episode, effect, scope;
