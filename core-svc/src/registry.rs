//! The registries as the core reads them: the epoch registry it bootstraps
//! at startup, and the transition registry's current revision, read per
//! request (a cheap head check; parsed revisions cached by ref).

use std::sync::{Arc, Mutex};

use world_model::registry::{EPOCH_REGISTRY, TRANSITION_REGISTRY, TRANSITION_REGISTRY_INTERFACE};
use world_model::{Descriptor, EpochRegistry, Grant, HashRef, Revision};

use crate::store::{Store, StoreError, StoredObject};

const EPOCH_PROVENANCE: &str = "epoch-registry-bootstrap";
pub const REVISION_PROVENANCE: &str = "host/transitionreg";

#[derive(Debug, thiserror::Error)]
pub enum RegistryReadError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("registry head {head} names no stored object")]
    HeadAbsent { head: HashRef },
    #[error("registry head {head} is damaged: {reason}")]
    Damaged { head: HashRef, reason: String },
}

/// Writes epoch 1 for `release` unless the store already nominates exactly
/// that; a store bootstrapped for another release is never rewritten.
pub async fn bootstrap_epochs(store: &Store, release: &str) -> Result<HashRef, String> {
    let object = StoredObject::new(EPOCH_REGISTRY, EPOCH_PROVENANCE, EpochRegistry::bootstrap(release).encode());
    let wanted = object.hash;
    let diverged = |head: HashRef| {
        format!(
            "the epoch registry head {head} diverges from the bootstrap revision {wanted} for interpreter release \
             {release:?}: this store was bootstrapped for a different interpreter release; serve it with that \
             interpreter, or use a new store"
        )
    };
    match store.registry_head(EPOCH_REGISTRY).await.map_err(|e| e.to_string())? {
        Some(head) if head == wanted => Ok(wanted),
        Some(head) => Err(diverged(head)),
        None => {
            store.put_object(&object).await.map_err(|e| e.to_string())?;
            match store.compare_and_set_registry_head(EPOCH_REGISTRY, None, &wanted).await {
                Ok(()) => Ok(wanted),
                // Another core bootstrapped at the same moment: fine if it agrees.
                Err(StoreError::RegistryConflict { actual: Some(head), .. }) if head == wanted => Ok(wanted),
                Err(StoreError::RegistryConflict { actual: Some(head), .. }) => Err(diverged(head)),
                Err(error) => Err(error.to_string()),
            }
        }
    }
}

/// Reads the epoch registry, if it has a head.
pub async fn read_epochs(store: &Store) -> Result<Option<EpochRegistry>, RegistryReadError> {
    let Some(head) = store.registry_head(EPOCH_REGISTRY).await? else { return Ok(None) };
    let object = load_verified(store, &head, EPOCH_REGISTRY).await?;
    EpochRegistry::decode(&object).map(Some).map_err(|e| RegistryReadError::Damaged { head, reason: e.to_string() })
}

async fn load_verified(store: &Store, head: &HashRef, semantic_id: &str) -> Result<Vec<u8>, RegistryReadError> {
    let object = store.get_object(head, true).await?.ok_or(RegistryReadError::HeadAbsent { head: *head })?;
    let damaged = |reason: String| RegistryReadError::Damaged { head: *head, reason };
    if object.semantic_id != semantic_id {
        return Err(damaged(format!("semantic id {:?}", object.semantic_id)));
    }
    let payload = object.payload.unwrap_or_default();
    if HashRef::of(&payload) != *head {
        return Err(damaged("the payload does not hash to the head".into()));
    }
    Ok(payload)
}

/// The transition registry's current revision.
pub type Current = Option<(HashRef, Arc<Revision>)>;

/// Reads the current transition-registry revision, caching the parsed
/// revision by its ref (revisions are immutable; only the head moves).
#[derive(Default)]
pub struct RegistryReader {
    cached: Mutex<Option<(HashRef, Arc<Revision>)>>,
}

impl RegistryReader {
    /// The revision at `head` (as read with the caller's session), decoded once per head.
    pub async fn at(&self, store: &Store, head: Option<HashRef>) -> Result<Current, RegistryReadError> {
        let Some(head) = head else { return Ok(None) };
        if let Some((cached, revision)) = self.cached.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
            && *cached == head
        {
            return Ok(Some((head, Arc::clone(revision))));
        }
        let revision = Arc::new(read_revision(store, &head).await?);
        *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = Some((head, Arc::clone(&revision)));
        Ok(Some((head, revision)))
    }
}

/// Loads and verifies one revision object.
pub async fn read_revision(store: &Store, head: &HashRef) -> Result<Revision, RegistryReadError> {
    let object = store.get_object(head, true).await?.ok_or(RegistryReadError::HeadAbsent { head: *head })?;
    if object.interface_hash.to_string() != TRANSITION_REGISTRY_INTERFACE {
        return Err(RegistryReadError::Damaged { head: *head, reason: "wrong interface hash".into() });
    }
    let payload = load_verified(store, head, TRANSITION_REGISTRY).await?;
    Revision::decode(&payload).map_err(|e| RegistryReadError::Damaged { head: *head, reason: e.to_string() })
}

/// The descriptors `grants` make visible, in registry order.
pub fn visible<'a>(revision: &'a Revision, grants: &'a [Grant], now: i64) -> impl Iterator<Item = &'a Descriptor> {
    revision.entries.iter().filter(move |d| d.visible_to(grants, now))
}

/// The registry revision object for `revision`.
pub fn revision_object(revision: &Revision) -> StoredObject {
    let payload = revision.encode();
    let mut object = StoredObject::new(TRANSITION_REGISTRY, REVISION_PROVENANCE, payload);
    // The one object whose interface hash is a fixed constant.
    object.interface_hash = HashRef::parse(TRANSITION_REGISTRY_INTERFACE).unwrap_or(object.interface_hash);
    object
}
