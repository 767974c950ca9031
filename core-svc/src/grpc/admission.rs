//! `world.v1.Admission`: the caller's session and its grant-filtered surface.

use std::sync::Arc;

use tonic::{Request, Response, Status};
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
        let outcome = async {
            let session = self.core.resolve_session(authorization(&request), "admit").await?;
            let surface = registry::surface(&self.core.store, &session.grants, crate::session::now_unix()).await?;
            Ok(pb::Admitted {
                episode: session.episode.as_str().to_owned(),
                expires_at: session.expires_at,
                surface: surface.descriptors,
                registry_head: world_model::HashRef::optional_text(surface.head.as_ref()),
            })
        }
        .await;
        let outcome = match outcome {
            Ok(admitted) => Outcome::Admitted(admitted),
            Err(failure) => Outcome::Failure(convert::failure(failure)),
        };
        Ok(Response::new(pb::AdmitReply { outcome: Some(outcome) }))
    }
}
