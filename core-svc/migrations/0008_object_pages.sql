-- World store, schema version 8 ({backend}): fewer index pages per object a call writes.
--
-- Keys are content hashes, so each index row an object adds lands on a random page of its
-- index, and every such page is a page a commit writes into the log and back. An object had
-- four: its hash, its semantic id, its episodes (`object_episodes`) and the entries whose
-- commits carried it (`commit_objects`).
--
-- Now an object's first write records its episode and entry on its own row (`entry_index` is
-- NULL when that write was not a commit's), and the two tables hold only the rest: the same
-- bytes written later for another episode, or carried by another entry's commit. Objects stored
-- before this version keep both columns NULL and all their rows.
ALTER TABLE objects ADD COLUMN episode TEXT;
ALTER TABLE objects ADD COLUMN entry_index {int};

-- The kinds only calls and effects write (several per call) leave the semantic-id index, which
-- keeps the kinds published and listed by name (sources, registries, epochs, interpreters). A
-- listing of a call's kind walks the objects in hash order instead (`store/reads.rs`).
DROP INDEX objects_by_semantic_id;
CREATE INDEX objects_by_semantic_id ON objects (semantic_id, hash) WHERE semantic_id NOT IN (
    'world/invocation-input/v1', 'world/invocation-output/v1', 'world/invocation-record/v1',
    'world/invocation-record/v2', 'world/effect-plan/v1', 'world/journal-intent/v1',
    'world/journal-outcome/v1', 'world/effect-request/v1', 'world/effect-result/v1',
    'world/effect-record/v1', 'world/effect-intent/v1');
