//! `world.v1.Invocation`: one call of a published transition.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tracing::Instrument as _;
use world_model::{Episode, Failure, FailureCode, Surface, TaskId, invocation_id};
use world_proto::v1 as pb;
use world_proto::v1::invocation_server::Invocation;
use world_proto::v1::invoke_reply::Outcome;

use super::{authorization, convert, unless_store_gone};
use crate::Core;
use crate::invoke::{Call, Invoked};
use crate::store::{Receipt, Store};

pub struct InvocationService {
    core: Arc<Core>,
}

impl InvocationService {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }

    async fn invoke_call(&self, mut request: Request<pb::InvokeRequest>) -> Result<Outcome, Failure> {
        let readmit = Ok(Outcome::Readmit(pb::Readmit {}));
        // A call sent without an admission is admitted here; whatever that admission would
        // have answered other than "this surface" goes back to the edge to answer properly.
        let unadmitted = std::mem::take(&mut request.get_mut().unadmitted_surface);
        let session = match self.core.resolve_session(authorization(&request), "invoke").await {
            Ok(session) => session,
            Err(_) if !unadmitted.is_empty() => return readmit,
            Err(failure) => return Err(failure),
        };
        if !unadmitted.is_empty() {
            let span = tracing::info_span!("admit", world.episode = session.episode.as_str());
            match self.core.admit(&session).instrument(span).await {
                Ok(Some((_, surface))) if surface.digest == unadmitted => {}
                _ => return readmit,
            }
        }
        let message = request.into_inner();
        let episode = session.episode.as_str().to_owned();
        let surface = Surface::parse(&message.surface)
            .ok_or_else(|| Failure::new(FailureCode::InvalidParams, "surface must be a2a or mcp"))?;
        let Some(coordinator) = &self.core.coordinator else {
            // The operator chose this at start (and was warned then); each call is the caller's.
            tracing::info!(
                code = FailureCode::Unavailable.as_str(),
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
        Ok(Outcome::Invoked(invoked_message(invoked, episode)))
    }
}

/// A committed call as the wire carries it, in the caller's episode.
fn invoked_message(invoked: Invoked, episode: String) -> pb::Invoked {
    pb::Invoked {
        output: invoked.output,
        invocation_id: invoked.invocation_id,
        world_ref: invoked.world_ref.to_string(),
        entry_index: invoked.entry_index,
        task_id: invoked.task_id,
        reconciled: invoked.reconciled,
        episode,
    }
}

/// The committed invocation `id` as A2A's `GetTask` reports it: read from the store and
/// verified as a resend's reconciliation verifies it (the world hashes to its ref, the output is
/// the world's state object and a JSON object), so any core answers for any edge. A task id that
/// never started is `NotFound`; one whose outcome is not durable yet is `Unconfirmed`.
pub async fn committed_task(store: &Store, episode: &Episode, task: &TaskId) -> Result<pb::Invoked, Failure> {
    let id = &invocation_id(Surface::A2a, episode, task);
    let integrity = |what: &str| {
        tracing::error!("a2a refusal: GetTask {id}: {what:?}");
        Failure::of(FailureCode::Unavailable)
    };
    let stored = |error: crate::store::StoreError| integrity(&error.to_string());
    let result_ref = match store.receipt(id).await.map_err(stored)? {
        Receipt::NotStarted => return Err(Failure::new(FailureCode::NotFound, "task not found")),
        Receipt::Indeterminate => return Err(Failure::of(FailureCode::Unconfirmed)),
        Receipt::Resolved { result_ref } => result_ref,
    };
    match crate::invoke::reconcile::read_committed(store, id, &result_ref, task).await {
        Ok(invoked) => Ok(invoked_message(Invoked { reconciled: true, ..invoked }, episode.as_str().to_owned())),
        Err(refusal) => Err(integrity(&refusal.cause.unwrap_or_default())),
    }
}

impl InvocationService {
    async fn committed_call(&self, request: Request<pb::CommittedTaskRequest>) -> Result<pb::Invoked, Failure> {
        let session = self.core.resolve_session(authorization(&request), "committed task").await?;
        // A text outside the task-id grammar can never have been a task.
        let task = TaskId::parse(&request.into_inner().task_id)
            .map_err(|_| Failure::new(FailureCode::NotFound, "task not found"))?;
        match tokio::time::timeout(self.core.limits.read, committed_task(&self.core.store, &session.episode, &task))
            .await
        {
            Ok(result) => result,
            Err(_) => Err(Failure::of(FailureCode::Timeout)),
        }
    }
}

#[tonic::async_trait]
impl Invocation for InvocationService {
    async fn committed_task(
        &self,
        request: Request<pb::CommittedTaskRequest>,
    ) -> Result<Response<pb::InvokeReply>, Status> {
        let outcome = match self.committed_call(request).await {
            Ok(invoked) => Outcome::Invoked(invoked),
            Err(failure) => Outcome::Failure(convert::failure(failure)),
        };
        Ok(Response::new(pb::InvokeReply { outcome: Some(outcome) }))
    }

    async fn invoke(&self, request: Request<pb::InvokeRequest>) -> Result<Response<pb::InvokeReply>, Status> {
        // The coordinator's own task runs on if the store goes; its answer is not committed.
        let invoked =
            unless_store_gone(&self.core, self.invoke_call(request), || Failure::of(FailureCode::NotCommitted)).await;
        let outcome = invoked.unwrap_or_else(|failure| Outcome::Failure(convert::failure(failure)));
        Ok(Response::new(pb::InvokeReply { outcome: Some(outcome) }))
    }
}
