//! Reconciliation (reference-core §3.8): the committed result of an invocation id, read back
//! and verified; nothing runs again.

use world_model::{FailureCode, HashRef, TaskId, world_ref};

use super::Invoked;
use super::refusal::Refusal;
use crate::store::{Receipt, Store};

pub async fn committed(store: &Store, id: &str, task: &TaskId) -> Result<Invoked, Refusal> {
    let Receipt::Resolved { result_ref } = store.receipt(id).await? else {
        return Err(Refusal::of(FailureCode::NotCommitted));
    };
    read_committed(store, id, &result_ref, task).await
}

/// The committed result of `id`, whose journal outcome names `result_ref`, verified: the world
/// hashes to its ref and its state root is the output, a JSON object.
pub async fn read_committed(store: &Store, id: &str, result_ref: &HashRef, task: &TaskId) -> Result<Invoked, Refusal> {
    let integrity = |what: &str| Refusal::because(FailureCode::Unavailable, format!("reconcile {id}: {what}"));
    let result_ref = *result_ref;
    let world = store.world(&result_ref).await?.ok_or_else(|| integrity("the committed world is absent"))?;
    if world_ref(world.revision, &world.state_root, &world.log_head) != world.reference {
        return Err(integrity("the committed world does not hash to its ref"));
    }
    let output = store
        .get_object(&world.state_root, true)
        .await?
        .and_then(|o| o.payload)
        .filter(|payload| HashRef::of(payload) == world.state_root)
        .ok_or_else(|| integrity("the committed output is absent or corrupt"))?;
    if !matches!(serde_json::from_slice(&output), Ok(serde_json::Value::Object(_))) {
        return Err(integrity("the committed output is not a JSON object"));
    }
    Ok(Invoked {
        output,
        invocation_id: id.to_owned(),
        task_id: task.as_str().to_owned(),
        world_ref: world.reference,
        entry_index: world.revision,
        reconciled: true,
    })
}
