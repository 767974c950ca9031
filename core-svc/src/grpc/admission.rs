//! `world.v1.Admission`: the caller's session and its grant-filtered surface.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tracing::Instrument as _;
use world_proto::v1 as pb;
use world_proto::v1::admission_server::Admission;

use super::{authorization, reply};
use crate::Core;

pub struct AdmissionService {
    core: Arc<Core>,
}

impl AdmissionService {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }
}

#[tonic::async_trait]
impl Admission for AdmissionService {
    async fn admit(&self, request: Request<pb::AdmitRequest>) -> Result<Response<pb::AdmitReply>, Status> {
        let span = tracing::info_span!("admit", world.episode = tracing::field::Empty);
        let known = request.get_ref().known_surface.as_str();
        let admitted = async {
            let session = self.core.resolve_session(authorization(&request), "admit").await?;
            tracing::Span::current().record(world_telemetry::attr::EPISODE, session.episode.as_str());
            let (head, surface, surface_digest) = match self.core.admit(&session).await? {
                Some((head, surface)) => {
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
        reply(admitted)
    }
}
