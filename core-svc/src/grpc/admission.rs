//! `world.v1.Admission`: the caller's session and its grant-filtered surface.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tracing::Instrument as _;
use world_model::{Failure, FailureCode};
use world_proto::v1 as pb;
use world_proto::v1::admission_server::Admission;

use super::{authorization, convert};
use crate::{Core, registry};

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
        use pb::admit_reply::Outcome;
        let span = tracing::info_span!("admit", world.episode = tracing::field::Empty);
        let outcome = async {
            let session = self.core.resolve_session(authorization(&request), "admit").await?;
            tracing::Span::current().record(world_telemetry::attr::EPISODE, session.episode.as_str());
            let current = self.core.registry.at(&self.core.store, session.registry_head).await.map_err(|error| {
                tracing::error!(%error, "admit: transition registry read failed");
                Failure::of(FailureCode::Unavailable)
            })?;
            let now = crate::session::now_unix();
            let (head, surface) = match &current {
                Some((head, revision)) => (
                    head.to_string(),
                    registry::visible(revision, &session.grants, now).map(convert::descriptor).collect(),
                ),
                None => (String::new(), Vec::new()),
            };
            Ok(pb::Admitted {
                episode: session.episode.as_str().to_owned(),
                expires_at: session.expires_at,
                surface,
                registry_head: head,
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
