//! `world.v1.Store`: reads and the compare-and-append commit, each gated by a
//! live session (any episode) except Health. The log and its objects are read as the
//! session's reader (`store::Reader`): its own episode, or every one with `Log.Read`.

use std::future::Future;
use std::sync::Arc;

use tonic::{Request, Response, Status};
use world_model::{Failure, FailureCode};
use world_proto::v1 as pb;
use world_proto::v1::store_server::Store as StoreApi;

use super::convert::{self, parse_optional_ref, parse_ref};
use super::{authorization, reply, unless_store_gone};
use crate::invoke::refusal;
use crate::store::{Commit, Reader, Receipt, Store, StoreError};
use crate::{Core, calls};

pub struct StoreService {
    core: Arc<Core>,
}

impl StoreService {
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }

    /// Resolves the caller's session, then runs `read` on the store, as the session's reader,
    /// with the request's message, under the read deadline.
    async fn gated<'a, T, R, F>(
        &'a self,
        request: &'a Request<T>,
        what: &str,
        read: impl FnOnce(&'a Store, Reader, &'a T) -> F,
    ) -> Result<R, Failure>
    where
        F: Future<Output = Result<R, Failure>>,
    {
        let session = self.core.resolve_session(authorization(request), what).await?;
        let reader = session.reader(crate::session::now_unix());
        let read = read(&self.core.store, reader, request.get_ref());
        tokio::time::timeout(self.core.limits.read, read).await.map_err(refusal::timed_out)?
    }
}

fn not_found(message: &str) -> Failure {
    Failure::new(FailureCode::NotFound, message)
}

/// A read of one thing: the store's error classified, or `missing` when there is none.
trait Found<T> {
    fn found(self, what: &'static str, missing: &str) -> Result<T, Failure>;
}

impl<T> Found<T> for Result<Option<T>, StoreError> {
    fn found(self, what: &'static str, missing: &str) -> Result<T, Failure> {
        self.map_err(read_failure(what))?.ok_or_else(|| not_found(missing))
    }
}

fn read_failure(what: &'static str) -> impl Fn(StoreError) -> Failure {
    move |error| refusal::rest_store_failure(error, what)
}

#[tonic::async_trait]
impl StoreApi for StoreService {
    async fn health(&self, _request: Request<pb::HealthRequest>) -> Result<Response<pb::HealthReply>, Status> {
        Ok(Response::new(self.core.health()))
    }

    async fn head(&self, request: Request<pb::HeadRequest>) -> Result<Response<pb::HeadReply>, Status> {
        let outcome = self
            .gated(&request, "head", |store, _, _| async move {
                store.selected_head().await.found("head", "no world head has been selected yet")
            })
            .await;
        reply(outcome.map(|head| head.to_string()))
    }

    async fn get_world(&self, request: Request<pb::GetWorldRequest>) -> Result<Response<pb::GetWorldReply>, Status> {
        let outcome = self
            .gated(&request, "world", |store, _, message| async move {
                let reference = parse_ref("world ref", &message.r#ref)?;
                store.world(&reference).await.found("world", "world not found")
            })
            .await;
        reply(outcome.map(convert::world))
    }

    async fn get_object(&self, request: Request<pb::GetObjectRequest>) -> Result<Response<pb::GetObjectReply>, Status> {
        let outcome = self
            .gated(&request, "object", |store, reader, message| async move {
                let hash = parse_ref("object ref", &message.r#ref)?;
                store.reads(&reader).object(&hash, message.with_payload).await.found("object", "object not found")
            })
            .await;
        reply(outcome.map(convert::object))
    }

    async fn objects_by_semantic_id(
        &self,
        request: Request<pb::ObjectsBySemanticIdRequest>,
    ) -> Result<Response<pb::ObjectsBySemanticIdReply>, Status> {
        let outcome = self
            .gated(&request, "objects by semantic id", |store, reader, message| async move {
                if message.semantic_id.is_empty() {
                    return Err(Failure::new(FailureCode::BadRequest, "semantic id is empty"));
                }
                let after = parse_optional_ref("after", &message.after)?;
                store
                    .reads(&reader)
                    .objects_by_semantic_id(&message.semantic_id, after.as_ref(), message.limit)
                    .await
                    .map_err(read_failure("objects by semantic id"))
            })
            .await;
        reply(outcome.map(|items| pb::ObjectPage { items: items.into_iter().map(convert::object).collect() }))
    }

    async fn object_entry(
        &self,
        request: Request<pb::ObjectEntryRequest>,
    ) -> Result<Response<pb::ObjectEntryReply>, Status> {
        let outcome = self
            .gated(&request, "object entry", |store, reader, message| async move {
                let hash = parse_ref("object ref", &message.r#ref)?;
                store
                    .reads(&reader)
                    .entry_of_object(&hash)
                    .await
                    .found("object entry", "no log entry carries this object")
            })
            .await;
        reply(outcome.map(convert::entry))
    }

    async fn get_log_entry(
        &self,
        request: Request<pb::GetLogEntryRequest>,
    ) -> Result<Response<pb::GetLogEntryReply>, Status> {
        let outcome = self
            .gated(&request, "log entry", |store, reader, message| async move {
                let index = message.index;
                if index < 0 {
                    return Err(Failure::new(FailureCode::BadRequest, "log index must be a non-negative integer"));
                }
                store.reads(&reader).log_entry(index).await.found("log entry", "log entry not found")
            })
            .await;
        reply(outcome.map(convert::entry))
    }

    async fn log_page(&self, request: Request<pb::LogPageRequest>) -> Result<Response<pb::LogPageReply>, Status> {
        let outcome = self
            .gated(&request, "log page", |store, reader, message| async move {
                if message.from < 0 {
                    return Err(Failure::new(FailureCode::BadRequest, "from must be a non-negative integer"));
                }
                store.reads(&reader).log_page(message.from, message.limit).await.map_err(read_failure("log page"))
            })
            .await;
        reply(outcome.map(|items| pb::EntryPage { items: items.into_iter().map(convert::entry).collect() }))
    }

    async fn registry_head(
        &self,
        request: Request<pb::RegistryHeadRequest>,
    ) -> Result<Response<pb::RegistryHeadReply>, Status> {
        let outcome = self
            .gated(&request, "registry head", |store, _, message| async move {
                let name = &message.name;
                if name.is_empty() {
                    return Err(Failure::new(FailureCode::BadRequest, "registry name is empty"));
                }
                store.registry_head(name).await.found("registry head", "registry head not found")
            })
            .await;
        reply(outcome.map(|head| head.to_string()))
    }

    async fn receipt(&self, request: Request<pb::ReceiptRequest>) -> Result<Response<pb::ReceiptReply>, Status> {
        let outcome = self
            .gated(&request, "receipt", |store, _, message| async move {
                let id = &message.invocation_id;
                if !is_rest_id(id) {
                    return Err(Failure::new(FailureCode::BadRequest, "receipt id must be rest:<id>"));
                }
                store.receipt(id).await.map_err(read_failure("receipt"))
            })
            .await;
        reply(outcome.map(|receipt| pb::ReceiptState {
            invocation_id: request.get_ref().invocation_id.clone(),
            state: receipt.state().to_owned(),
            result_ref: match receipt {
                Receipt::Resolved { result_ref } => result_ref.to_string(),
                _ => String::new(),
            },
        }))
    }

    async fn commit(&self, request: Request<pb::CommitRequest>) -> Result<Response<pb::CommitReply>, Status> {
        let commit = async {
            let session = self.core.resolve_session(authorization(&request), "commit").await?;
            let message = request.get_ref();
            let (observed_head, next_world, entry, objects) = convert::commit_parts(message)?;
            let invocation_id = match message.invocation_id.as_str() {
                "" => None,
                id if is_rest_id(id) => Some(id.to_owned()),
                _ => return Err(Failure::new(FailureCode::BadRequest, "invocationId must be rest:<id>")),
            };
            let commit = Commit {
                invocation_id,
                // What a session commits is its episode's to read.
                episode: Some(session.episode),
                observed_head,
                objects,
                next_world,
                entry,
                logical_time: crate::session::now_unix(),
                effect_outcomes: Vec::new(),
            };
            self.core
                .store
                .commit(commit, self.core.limits.rest_commit)
                .await
                .map(|committed| committed.selected_head)
                .map_err(|error| refusal::rest_store_failure(error, "commit"))
        };
        let not_committed = || {
            Failure::new(FailureCode::NotCommitted, "the store was removed or replaced under this core: not committed")
        };
        reply(unless_store_gone(&self.core, commit, not_committed).await.map(|head| head.to_string()))
    }

    async fn session(&self, request: Request<pb::SessionRequest>) -> Result<Response<pb::SessionReply>, Status> {
        let outcome = async {
            let session = self.core.resolve_session(authorization(&request), "session").await?;
            let spend = self.read(self.core.store.effect_spend(session.episode.as_str()), "session").await?;
            let grants = session
                .grants
                .iter()
                .zip(world_model::budget::seed_grants(&session.grants, &spend))
                .map(|(grant, seeded)| pb::GrantSpend {
                    effect: grant.effect.clone(),
                    scope: grant.scope.clone(),
                    budget: grant.budget,
                    spent: world_model::budget::spent_on(grant, &spend),
                    left: seeded.budget,
                    expires_at: grant.expires_at,
                })
                .collect();
            Ok(pb::SessionView {
                reads_every_episode: session.reader(crate::session::now_unix()) == Reader::Everything,
                episode: session.episode.as_str().to_owned(),
                expires_at: session.expires_at,
                created_at: session.created_at,
                grants,
            })
        }
        .await;
        reply(outcome)
    }

    async fn calls(&self, request: Request<pb::CallsRequest>) -> Result<Response<pb::CallsReply>, Status> {
        let outcome = async {
            let session = self.core.resolve_session(authorization(&request), "calls").await?;
            let message = request.get_ref();
            let reader = session.reader(crate::session::now_unix());
            let reads = self.core.store.reads(&reader);
            if !message.find.is_empty() {
                let found = self.read(calls::find(&reads, session.episode.as_str(), &message.find), "calls").await?;
                return Ok(pb::CallPage { items: found.into_iter().map(call).collect(), next: 0 });
            }
            let filter = calls::Filter { episode: message.episode.clone(), transition: message.transition.clone() };
            let before = (message.before > 0).then_some(message.before);
            let (items, next) = self.read(calls::page(&reads, before, message.limit, &filter), "calls").await?;
            Ok(pb::CallPage { items: items.into_iter().map(call).collect(), next: next.unwrap_or(0) })
        }
        .await;
        reply(outcome)
    }
}

impl StoreService {
    /// Runs a store read under the read deadline.
    async fn read<R>(
        &self,
        read: impl Future<Output = Result<R, StoreError>>,
        what: &'static str,
    ) -> Result<R, Failure> {
        tokio::time::timeout(self.core.limits.read, read).await.map_err(refusal::timed_out)?.map_err(read_failure(what))
    }
}

fn call(call: calls::Call) -> pb::Call {
    pb::Call {
        entry_index: call.entry.entry_index,
        entry_hash: call.entry.entry_hash.to_string(),
        transition_ref: call.entry.transition_ref.to_string(),
        written_by: call.entry.written_by,
        invocation_id: call.invocation_id,
        episode: call.episode,
        transition: call.transition,
        time: call.time,
        outcome: call.outcome.to_owned(),
        effects: call
            .effects
            .into_iter()
            .map(|e| pb::CallEffect {
                effect: e.effect,
                scope: e.scope,
                status: e.status.to_owned(),
                record: e.record.to_string(),
            })
            .collect(),
    }
}

/// `rest:` followed by at least one character.
fn is_rest_id(id: &str) -> bool {
    id.len() > "rest:".len() && id.starts_with("rest:")
}
