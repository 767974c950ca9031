//! `world.v1.Invocation`: one call of a published transition.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use world_model::{Failure, FailureCode, Surface};
use world_proto::v1 as pb;
use world_proto::v1::invocation_server::Invocation;

use super::{authorization, convert};
use crate::Core;
use crate::invoke::Call;

pub struct InvocationService {
    core: Arc<Core>,
}

impl InvocationService {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }

    async fn invoke_call(&self, request: Request<pb::InvokeRequest>) -> Result<pb::Invoked, Failure> {
        let session = self.core.resolve_session(authorization(&request), "invoke").await?;
        let message = request.into_inner();
        let surface = Surface::parse(&message.surface)
            .ok_or_else(|| Failure::new(FailureCode::InvalidParams, "surface must be a2a or mcp"))?;
        let Some(coordinator) = &self.core.coordinator else {
            tracing::error!(
                "{surface} refusal: invoke -: \"this core serves without --ailang-bin: there is no coordinator\""
            );
            return Err(Failure::of(FailureCode::Unavailable));
        };
        let call = Call {
            surface,
            session,
            transition_id: message.transition_id,
            task_id: match surface {
                Surface::A2a => Some(message.task_id),
                Surface::Mcp => None,
            },
            arguments: message.arguments,
            pin: (!message.transition_fn.is_empty()).then_some(message.transition_fn),
        };
        let invoked = coordinator.invoke(Arc::clone(&self.core.registry), call).await?;
        Ok(pb::Invoked {
            output: invoked.output,
            invocation_id: invoked.invocation_id,
            world_ref: invoked.world_ref.to_string(),
            entry_index: invoked.entry_index,
            task_id: invoked.task_id,
            reconciled: invoked.reconciled,
        })
    }
}

#[tonic::async_trait]
impl Invocation for InvocationService {
    async fn invoke(&self, request: Request<pb::InvokeRequest>) -> Result<Response<pb::InvokeReply>, Status> {
        use pb::invoke_reply::Outcome;
        let outcome = match self.invoke_call(request).await {
            Ok(invoked) => Outcome::Invoked(invoked),
            Err(failure) => Outcome::Failure(convert::failure(failure)),
        };
        Ok(Response::new(pb::InvokeReply { outcome: Some(outcome) }))
    }
}
