//! `world.v1.Admission`: the caller's session and its grant-filtered surface.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tonic::{Request, Response, Status};
use tracing::Instrument as _;
use world_model::{Failure, FailureCode, Grant, HashRef, Revision};
use world_proto::v1 as pb;
use world_proto::v1::admission_server::Admission;

use super::{authorization, convert};
use crate::{Core, registry};

pub struct AdmissionService {
    core: Arc<Core>,
    surfaces: Surfaces,
}

impl AdmissionService {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core, surfaces: Surfaces::default() }
    }
}

/// A surface as the wire carries it, built once per registry revision and set of live grants.
struct Surface {
    digest: String,
    descriptors: Vec<pb::Descriptor>,
}

/// At most this many surfaces are kept; then the cache starts over.
const SURFACES_KEPT: usize = 1024;

/// Built surfaces by registry head and live grants: admission, which every request makes, is
/// then a session read and a lookup, however many transitions are published.
#[derive(Default)]
struct Surfaces(Mutex<HashMap<SurfaceKey, Arc<Surface>>>);

/// A registry revision and a session's live grants (effect, scope, budget).
type SurfaceKey = (HashRef, Vec<(String, String, i64)>);

impl Surfaces {
    fn get(&self, head: HashRef, revision: &Revision, grants: &[Grant], now: i64) -> Arc<Surface> {
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
        let surface = Arc::new(Surface {
            digest: HashRef::of(named.as_bytes()).to_string(),
            descriptors: visible.into_iter().map(convert::descriptor).collect(),
        });
        if surfaces.len() >= SURFACES_KEPT {
            surfaces.clear();
        }
        surfaces.insert(key, Arc::clone(&surface));
        surface
    }
}

#[tonic::async_trait]
impl Admission for AdmissionService {
    async fn admit(&self, request: Request<pb::AdmitRequest>) -> Result<Response<pb::AdmitReply>, Status> {
        use pb::admit_reply::Outcome;
        let span = tracing::info_span!("admit", world.episode = tracing::field::Empty);
        let known = request.get_ref().known_surface.as_str();
        let outcome = async {
            let session = self.core.resolve_session(authorization(&request), "admit").await?;
            tracing::Span::current().record(world_telemetry::attr::EPISODE, session.episode.as_str());
            let current = self.core.registry.at(&self.core.store, session.registry_head).await.map_err(|error| {
                tracing::error!(%error, "admit: transition registry read failed");
                Failure::of(FailureCode::Unavailable)
            })?;
            let now = crate::session::now_unix();
            let (head, surface, surface_digest) = match &current {
                Some((head, revision)) => {
                    let surface = self.surfaces.get(*head, revision, &session.grants, now);
                    let descriptors = if surface.digest == known { Vec::new() } else { surface.descriptors.clone() };
                    (head.to_string(), descriptors, surface.digest.clone())
                }
                None => (String::new(), Vec::new(), String::new()),
            };
            Ok(pb::Admitted {
                episode: session.episode.as_str().to_owned(),
                expires_at: session.expires_at,
                surface,
                registry_head: head,
                surface_digest,
            })
        }
        .instrument(span)
        .await;
        let outcome = match outcome {
            Ok(admitted) => Outcome::Admitted(admitted),
            Err(failure) => Outcome::Failure(convert::failure(failure)),
        };
        Ok(Response::new(pb::AdmitReply { outcome: Some(outcome) }))
    }
}
