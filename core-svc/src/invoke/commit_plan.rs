//! Commit planning (reference-core §3.6): the objects, entry and next world of one call,
//! planned against whatever world is the head when the commit transaction runs.

use serde_json::json;
use world_model::{Descriptor, EntryHeader, Episode, Surface, canonical_value, entry_hash, world_ref};

use crate::effects::broker::ForCommit;
use crate::store::{Commit, LogEntry, Planner, StoredObject, WorldRow};

pub const INPUT_SEMANTIC_ID: &str = "world/invocation-input/v1";
pub const OUTPUT_SEMANTIC_ID: &str = "world/invocation-output/v1";
pub const RECORD_SEMANTIC_ID: &str = "world/invocation-record/v1";
pub const RECORD_V2_SEMANTIC_ID: &str = "world/invocation-record/v2";
pub const PLAN_SEMANTIC_ID: &str = "world/effect-plan/v1";

/// What a call produced, ready to be committed.
pub struct Produced {
    /// Canonical JSON of the arguments.
    pub input: Vec<u8>,
    pub output: Vec<u8>,
    pub effects: Option<Effects>,
}

/// What an effectful call adds to its commit.
pub struct Effects {
    /// The admitted plan's canonical bytes.
    pub plan: Vec<u8>,
    /// The records, results and outcomes of its effects, journaled in the commit's own
    /// transaction.
    pub effects: ForCommit,
}

/// The planner of one call's commit; `now` is its logical time.
pub fn planner(
    descriptor: &Descriptor,
    id: &str,
    episode: &Episode,
    surface: Surface,
    produced: Produced,
    now: i64,
) -> Planner {
    let by = surface.written_by();
    let id = id.to_owned();
    let committer = episode.clone();
    let episode = episode.as_str().to_owned();
    let skill = descriptor.id.as_str().to_owned();
    let (transition_fn, interpreter, epoch) =
        (descriptor.transition_fn, descriptor.interpreter, descriptor.semantics_epoch);
    Box::new(move |w: &WorldRow| {
        let Produced { input, output, effects } = produced;
        let input = StoredObject::new(INPUT_SEMANTIC_ID, by, input);
        let output = StoredObject::new(OUTPUT_SEMANTIC_ID, by, output);
        let mut fields = json!({
            "invocationId": id,
            "episodeId": episode,
            "skillId": skill,
            "transitionFn": transition_fn.to_string(),
            "interpreter": interpreter.to_string(),
            "semanticsEpoch": epoch,
            "input": input.hash.to_string(),
            "output": output.hash.to_string(),
        });
        let mut objects = vec![input, output];
        let (semantic_id, effect_outcomes) = match effects {
            None => (RECORD_SEMANTIC_ID, Vec::new()),
            Some(Effects { plan, effects: ForCommit { records, results, outcomes } }) => {
                objects.extend(results);
                let plan = StoredObject::new(PLAN_SEMANTIC_ID, by, plan);
                fields["plan"] = json!(plan.hash.to_string());
                fields["effects"] = json!(records.iter().map(|r| r.hash.to_string()).collect::<Vec<_>>());
                objects.push(plan);
                objects.extend(records);
                (RECORD_V2_SEMANTIC_ID, outcomes)
            }
        };
        let record = StoredObject::new(semantic_id, by, canonical_value(&fields));
        let state_root = objects[1].hash;
        let index = w.revision + 1;
        let header = EntryHeader {
            entry_index: index,
            semantics_epoch: epoch,
            transition_fn: &transition_fn,
            interpreter: &interpreter,
            prev_entry_hash: &w.log_head,
            written_by: by,
        };
        let hash = entry_hash(&header, &record.hash);
        let next_world =
            WorldRow { reference: world_ref(index, &state_root, &hash), revision: index, state_root, log_head: hash };
        let entry = LogEntry {
            entry_index: index,
            semantics_epoch: epoch,
            transition_fn,
            interpreter,
            prev_entry_hash: w.log_head,
            written_by: by.to_owned(),
            entry_hash: hash,
            transition_ref: record.hash,
        };
        objects.push(record);
        Commit {
            invocation_id: Some(id),
            episode: Some(committer),
            observed_head: Some(w.reference),
            objects,
            next_world,
            entry,
            logical_time: now,
            effect_outcomes,
        }
    })
}
