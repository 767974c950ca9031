//! `world.v1.Invocation`: one call of a published transition.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use tracing::Instrument as _;
use world_model::{Episode, Failure, FailureCode, Surface, TaskId, invocation_id};
use world_proto::v1 as pb;
use world_proto::v1::invocation_server::Invocation;

use super::{authorization, reply, unless_store_gone};
use crate::Core;
use crate::invoke::{Call, Invoked, refusal};
use crate::session::SessionBinding;
use crate::store::{Receipt, Store};

pub struct InvocationService {
    core: Arc<Core>,
}

impl InvocationService {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }

    /// The seed's order: the session, the tool on the session's surface at the registry head
    /// current now (having seen a tool conveys no authority), the invocation service, the
    /// call's arguments; then the coordinator validates and runs it.
    async fn invoke_call(&self, request: Request<pb::InvokeRequest>) -> Result<pb::Invoked, Failure> {
        let session = self.core.resolve_session(authorization(&request), "invoke").await?;
        let message = request.into_inner();
        let surface = Surface::parse(&message.surface)
            .ok_or_else(|| Failure::new(FailureCode::InvalidParams, "surface must be a2a or mcp"))?;
        let transition_id = self.admitted_transition(&session, surface, &message).await?;
        let Some(coordinator) = &self.core.coordinator else {
            // The operator chose this at start (and was warned then); each call is the caller's.
            tracing::info!(
                code = FailureCode::Unavailable.as_str(),
                "{surface} refusal: invoke -: \"this core serves without --ailang-bin: there is no coordinator\""
            );
            return Err(Failure::of(FailureCode::Unavailable));
        };
        // The edge passes the arguments on as sent; only an object is a call. A2A answers
        // anything else as invalid params, MCP as a failed host callback (reference-edge §7.1).
        if !message.arguments.trim_ascii_start().starts_with(b"{") {
            return Err(match surface {
                Surface::A2a => Failure::of(FailureCode::InvalidParams),
                Surface::Mcp => {
                    tracing::info!(
                        code = FailureCode::BadRequest.as_str(),
                        "mcp refusal: tools/call -: {:?}",
                        "tools/call arguments are not a JSON object"
                    );
                    Failure::new(FailureCode::BadRequest, "arguments are not an object")
                }
            });
        }
        let episode = session.episode.as_str().to_owned();
        let call = Call {
            surface,
            session,
            transition_id,
            task_id: match surface {
                Surface::A2a => Some(message.task_id),
                Surface::Mcp => None,
            },
            arguments: message.arguments,
            pin: (!message.transition_fn.is_empty()).then_some(message.transition_fn),
        };
        let invoked = coordinator.invoke(Arc::clone(&self.core.registry), call).await?;
        Ok(invoked_message(invoked, episode))
    }
}

impl InvocationService {
    /// The transition the call names, if the session's live grants see it at the registry head
    /// current now: A2A names it by id, MCP by its tool name on the session's surface.
    async fn admitted_transition(
        &self,
        session: &SessionBinding,
        surface: Surface,
        message: &pb::InvokeRequest,
    ) -> Result<String, Failure> {
        let span = tracing::info_span!("admit", world.episode = session.episode.as_str());
        let current = self.core.registry.at(&self.core.store, session.registry_head).instrument(span).await;
        let current = current.map_err(|error| refusal::registry_failure(error, "invoke"))?;
        let Some((head, revision)) = current else { return Err(Failure::of(FailureCode::NotAuthorized)) };
        let now = crate::session::now_unix();
        let id = match surface {
            Surface::A2a => message.transition_id.as_str(),
            // Tool names are escaped over the whole visible surface at once, so the surface's
            // (cached) name table answers.
            Surface::Mcp => {
                let seen = self.core.surfaces.get(head, &revision, &session.grants, now);
                return seen.mcp_tool(&message.mcp_tool).map(str::to_owned);
            }
        };
        match revision.entry(id) {
            Some(descriptor) if descriptor.visible_to(&session.grants, now) => Ok(id.to_owned()),
            _ => Err(Failure::of(FailureCode::NotAuthorized)),
        }
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
    let unreadable = |cause: &str| refusal::unreadable_task(id, cause);
    let result_ref = match store.receipt(id).await.map_err(|error| unreadable(&error.to_string()))? {
        Receipt::NotStarted => return Err(Failure::new(FailureCode::NotFound, "task not found")),
        Receipt::Indeterminate => return Err(Failure::of(FailureCode::Unconfirmed)),
        Receipt::Resolved { result_ref } => result_ref,
    };
    match crate::invoke::reconcile::read_committed(store, id, &result_ref, task).await {
        Ok(invoked) => Ok(invoked_message(Invoked { reconciled: true, ..invoked }, episode.as_str().to_owned())),
        Err(refused) => Err(unreadable(&refused.cause.unwrap_or_default())),
    }
}

impl InvocationService {
    async fn committed_call(&self, request: Request<pb::CommittedTaskRequest>) -> Result<pb::Invoked, Failure> {
        let session = self.core.resolve_session(authorization(&request), "committed task").await?;
        // A text outside the task-id grammar can never have been a task.
        let task = TaskId::parse(&request.into_inner().task_id)
            .map_err(|_| Failure::new(FailureCode::NotFound, "task not found"))?;
        let read = committed_task(&self.core.store, &session.episode, &task);
        tokio::time::timeout(self.core.limits.read, read).await.map_err(refusal::timed_out)?
    }
}

#[tonic::async_trait]
impl Invocation for InvocationService {
    async fn invoke(&self, request: Request<pb::InvokeRequest>) -> Result<Response<pb::InvokeReply>, Status> {
        // The coordinator's own task runs on if the store goes; its answer is not committed.
        reply(unless_store_gone(&self.core, self.invoke_call(request), || Failure::of(FailureCode::NotCommitted)).await)
    }

    async fn committed_task(
        &self,
        request: Request<pb::CommittedTaskRequest>,
    ) -> Result<Response<pb::InvokeReply>, Status> {
        reply(self.committed_call(request).await)
    }
}
