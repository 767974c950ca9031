//! A session's surface: the registry descriptors its live grants make visible, in registry
//! order, with a digest that names exactly that set. Admission ships it for `tools/list` and
//! the cards; an invocation finds the tool it names on it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use world_model::{Failure, FailureCode, Grant, HashRef, McpNameError, Revision, escape_surface};
use world_proto::v1 as pb;

use crate::grpc::convert;
use crate::invoke::refusal;
use crate::session::SessionBinding;
use crate::{Core, registry};

/// A surface as the wire carries it, built once per registry revision and set of live grants.
pub struct Surface {
    pub digest: String,
    pub descriptors: Vec<pb::Descriptor>,
    /// Descriptor positions by MCP tool name, escaped once when a call first asks; an over-long
    /// or shared name refuses the whole surface, as `tools/list` does.
    by_tool: OnceLock<Result<HashMap<String, usize>, McpNameError>>,
}

impl Surface {
    fn new(digest: String, descriptors: Vec<pb::Descriptor>) -> Surface {
        Surface { digest, descriptors, by_tool: OnceLock::new() }
    }

    /// The transition an MCP tool name stands for on this surface; a name that is not there is
    /// `NotAuthorized` (MCP's unknown tool).
    pub fn mcp_tool(&self, name: &str) -> Result<&str, Failure> {
        let by_tool = self.by_tool.get_or_init(|| {
            let names = escape_surface(self.descriptors.iter().map(|d| d.id.as_str()))?;
            Ok(names.into_iter().enumerate().map(|(at, name)| (name, at)).collect())
        });
        match by_tool {
            Ok(by_tool) => by_tool
                .get(name)
                .map(|&at| self.descriptors[at].id.as_str())
                .ok_or_else(|| Failure::of(FailureCode::NotAuthorized)),
            Err(error) => Err(refusal::broken_surface(error)),
        }
    }
}

/// The registry head a session sees and its surface there; `None` when nothing is published.
pub type Admission = Option<(HashRef, Arc<Surface>)>;

/// At most this many surfaces are kept; then the cache starts over.
const SURFACES_KEPT: usize = 1024;

/// Built surfaces by registry head and live grants: admission, which every request makes, is
/// then a session read and a lookup, however many transitions are published.
#[derive(Default)]
pub struct Surfaces(Mutex<HashMap<SurfaceKey, Arc<Surface>>>);

/// A registry revision and a session's live grants (effect, scope, budget).
type SurfaceKey = (HashRef, Vec<(String, String, i64)>);

impl Surfaces {
    pub fn get(&self, head: HashRef, revision: &Revision, grants: &[Grant], now: i64) -> Arc<Surface> {
        let live = grants.iter().filter(|g| g.is_live(now)).map(|g| (g.effect.clone(), g.scope.clone(), g.budget));
        let key = (head, live.collect());
        let mut surfaces = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(surface) = surfaces.get(&key) {
            return Arc::clone(surface);
        }
        let visible: Vec<&world_model::Descriptor> = registry::visible(revision, grants, now).collect();
        // A revision's descriptors never change, so its ref and the visible ids name the set.
        let mut named = format!("world/surface/v1\n{head}");
        for descriptor in &visible {
            named.push('\n');
            named.push_str(descriptor.id.as_str());
        }
        let surface = Arc::new(Surface::new(
            HashRef::of(named.as_bytes()).to_string(),
            visible.into_iter().map(convert::descriptor).collect(),
        ));
        if surfaces.len() >= SURFACES_KEPT {
            surfaces.clear();
        }
        surfaces.insert(key, Arc::clone(&surface));
        surface
    }
}

impl Core {
    /// The surface `session` sees now.
    pub async fn admit(&self, session: &SessionBinding) -> Result<Admission, Failure> {
        let current = self.registry.at(&self.store, session.registry_head).await;
        let current = current.map_err(|error| refusal::registry_failure(error, "admit"))?;
        let now = crate::session::now_unix();
        Ok(current.map(|(head, revision)| (head, self.surfaces.get(head, &revision, &session.grants, now))))
    }
}
