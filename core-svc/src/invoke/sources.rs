//! R6: transition sources, read once and verified against their refs. Content-addressed,
//! so a cached source is never stale.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use world_model::FailureCode;
use world_model::HashRef;
use world_model::registry::TRANSITION_SOURCE;

use super::refusal::Refusal;
use crate::store::Store;

/// Bound on the bytes of cached sources; past it the cache starts over.
const SOURCE_CACHE_BYTES: usize = 64 * 1024 * 1024;

#[derive(Default)]
pub struct Sources {
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    sources: HashMap<HashRef, Arc<[u8]>>,
    bytes: usize,
}

impl Sources {
    /// The source object `reference` names; it must exist and hash to its ref.
    pub async fn get(&self, store: &Store, reference: &HashRef) -> Result<Arc<[u8]>, Refusal> {
        if let Some(source) = self.lock().sources.get(reference) {
            return Ok(Arc::clone(source));
        }
        let source: Arc<[u8]> = store
            .get_object(reference, true)
            .await?
            .filter(|o| o.semantic_id == TRANSITION_SOURCE)
            .and_then(|o| o.payload)
            .ok_or_else(|| Refusal::because(FailureCode::Unavailable, "the transition source object is absent"))?
            .into();
        if HashRef::of(&source) != *reference {
            return Err(Refusal::because(FailureCode::Unavailable, "the transition source object is corrupt"));
        }
        let mut cache = self.lock();
        if cache.bytes + source.len() > SOURCE_CACHE_BYTES {
            *cache = Cache::default();
        }
        cache.bytes += source.len();
        cache.sources.insert(*reference, Arc::clone(&source));
        Ok(source)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}
