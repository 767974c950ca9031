//! The transition registry as the core reads it: the current revision per
//! request and the descriptors a session's grants make visible.

use world_model::{Failure, FailureCode, Grant, HashRef};
use world_proto::v1 as pb;

use crate::store::Store;

pub const TRANSITION_REGISTRY: &str = "world/transition-registry/v1";

/// The descriptors visible to a session, in registry order, and the head they came from.
pub struct Surface {
    pub head: Option<HashRef>,
    pub descriptors: Vec<pb::Descriptor>,
}

pub async fn surface(store: &Store, _grants: &[Grant], _now: i64) -> Result<Surface, Failure> {
    let head = store.registry_head(TRANSITION_REGISTRY).await.map_err(|error| {
        tracing::error!(%error, "registry head read failed");
        Failure::of(FailureCode::Unavailable)
    })?;
    match head {
        None => Ok(Surface { head: None, descriptors: Vec::new() }),
        Some(head) => {
            // Nothing in this build writes registry revisions yet, so a head
            // here was written by a newer publisher: refuse rather than guess.
            tracing::error!(%head, "transition registry revisions are not readable by this build");
            Err(Failure::of(FailureCode::Unavailable))
        }
    }
}
