//! A session's surface as the edge holds it: the descriptors the core admitted, and the MCP
//! tools built from them once ([`tools`]). Surfaces are kept by the digest the core gives them,
//! and the digest each credential last had is sent with its next admission, so a session whose
//! surface has not changed is admitted without the core shipping (or the edge rebuilding) it
//! again. Every admission of the edge goes through [`Surfaces::admit`].

pub mod tools;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::value::RawValue;
use world_model::{Failure, HashRef};
use world_proto::v1 as pb;

use crate::core::CoreClient;
use crate::session::Forwarded;

/// At most this many surfaces, and as many credentials' last digests, are kept; then each
/// map starts over.
const KEPT: usize = 1024;

/// One admitted surface.
pub struct Surface {
    /// The core's name for exactly this surface; empty when nothing is published.
    pub digest: String,
    /// The visible descriptors, in registry order.
    pub descriptors: Vec<pb::Descriptor>,
    tools: OnceLock<Result<Box<RawValue>, String>>,
}

impl Surface {
    pub fn new(digest: String, descriptors: Vec<pb::Descriptor>) -> Surface {
        Surface { digest, descriptors, tools: OnceLock::new() }
    }

    /// The surface's `tools/list` array (escaped, normalised, sorted, encoded), or why it has
    /// no MCP tools.
    pub fn tools(&self) -> &Result<Box<RawValue>, String> {
        self.tools.get_or_init(|| tools::encoded(&self.descriptors))
    }
}

/// An admitted session: what the core's `Admit` answered, with its surface shared.
pub struct Admitted {
    pub episode: String,
    pub expires_at: i64,
    pub registry_head: String,
    pub surface: Arc<Surface>,
}

/// The surfaces this edge holds, and which one each credential had last.
#[derive(Default)]
pub struct Surfaces {
    by_digest: Mutex<HashMap<String, Arc<Surface>>>,
    /// Keyed by the credential's sha256: the credential itself is never kept.
    by_credential: Mutex<HashMap<HashRef, String>>,
}

impl Surfaces {
    /// Admits `credential` through `core`: its session, fresh from the core, and its surface
    /// (the one this edge already holds when the core says it is unchanged).
    pub async fn admit(&self, core: &CoreClient, credential: &Forwarded) -> Result<Admitted, Failure> {
        let known = self.known(credential.as_str());
        let reply = core.admit(credential, known.as_ref().map_or("", |surface| surface.digest.as_str())).await?;
        Ok(self.admitted(credential.as_str(), known, reply))
    }

    /// The digest of the surface `credential` had last, if this edge still holds it.
    fn known(&self, credential: &str) -> Option<Arc<Surface>> {
        let digest = lock(&self.by_credential).get(&HashRef::of(credential.as_bytes())).cloned()?;
        lock(&self.by_digest).get(&digest).cloned()
    }

    /// The surface the core admitted `credential` with: `known` when the core said it is
    /// unchanged, else the one the reply carries (kept for next time).
    fn admitted(&self, credential: &str, known: Option<Arc<Surface>>, reply: pb::Admitted) -> Admitted {
        let surface = match known {
            Some(known) if !reply.surface_digest.is_empty() && known.digest == reply.surface_digest => known,
            _ => {
                let surface = Arc::new(Surface::new(reply.surface_digest.clone(), reply.surface));
                if !surface.digest.is_empty() {
                    remember(&self.by_digest, surface.digest.clone(), Arc::clone(&surface));
                    remember(&self.by_credential, HashRef::of(credential.as_bytes()), surface.digest.clone());
                }
                surface
            }
        };
        Admitted { episode: reply.episode, expires_at: reply.expires_at, registry_head: reply.registry_head, surface }
    }
}

fn remember<K: std::hash::Hash + Eq, V>(map: &Mutex<HashMap<K, V>>, key: K, value: V) {
    let mut map = lock(map);
    if map.len() >= KEPT {
        map.clear();
    }
    map.insert(key, value);
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(digest: &str, ids: &[&str]) -> pb::Admitted {
        pb::Admitted {
            episode: "ep1".into(),
            expires_at: 9,
            registry_head: "sha256:head".into(),
            surface: ids
                .iter()
                .map(|id| pb::Descriptor { id: (*id).into(), input_schema: b"{}".to_vec(), ..Default::default() })
                .collect(),
            surface_digest: digest.into(),
        }
    }

    #[test]
    fn an_unchanged_surface_is_reused_and_a_changed_one_replaces_it() {
        let surfaces = Surfaces::default();
        assert!(surfaces.known("token").is_none());
        let first = surfaces.admitted("token", None, reply("d1", &["a", "b"]));
        assert_eq!(first.surface.descriptors.len(), 2);
        let known = surfaces.known("token").expect("kept");
        assert_eq!(known.digest, "d1");
        // The core answered "unchanged": no descriptors on the wire, the kept surface serves.
        let again = surfaces.admitted("token", Some(known), reply("d1", &[]));
        assert!(Arc::ptr_eq(&again.surface, &first.surface));
        // A new revision: the reply's surface replaces it.
        let changed = surfaces.admitted("token", surfaces.known("token"), reply("d2", &["a"]));
        assert_eq!(changed.surface.descriptors.len(), 1);
        assert_eq!(surfaces.known("token").unwrap().digest, "d2");
        // Nothing published: nothing kept.
        let empty = surfaces.admitted("other", None, reply("", &[]));
        assert!(empty.surface.descriptors.is_empty() && surfaces.known("other").is_none());
    }

    #[test]
    fn tools_are_built_once() {
        let surface = Surface::new("d".into(), reply("d", &["b.x", "a.y"]).surface);
        let tools = surface.tools().as_ref().expect("tools");
        assert!(
            tools.get().starts_with(r#"[{"name":"a_dy","inputSchema":{"type":"object"}},{"name":"b_dx""#),
            "{}",
            tools.get()
        );
        assert!(std::ptr::eq(surface.tools(), surface.tools()));
    }
}
