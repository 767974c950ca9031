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
use crate::session::SessionBinding;
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
        read: impl FnOnce(Gate<'a, T>) -> F,
    ) -> Result<R, Failure>
    where
        F: Future<Output = Result<R, Failure>>,
    {
        let session = self.core.resolve_session(authorization(request), what).await?;
        let reader = session.reader(crate::session::now_unix());
        let read = read(Gate { store: &self.core.store, session, reader, message: request.get_ref() });
        tokio::time::timeout(self.core.limits.read, read).await.map_err(refusal::timed_out)?
    }
}

/// What a gated read works with: the store, the caller's session, the reader it reads the log
/// as, and the request's message.
struct Gate<'a, T> {
    store: &'a Store,
    session: SessionBinding,
    reader: Reader,
    message: &'a T,
}

fn not_found(message: &str) -> Failure {
    Failure::new(FailureCode::NotFound, message)
}

fn bad_request(message: &str) -> Failure {
    Failure::new(FailureCode::BadRequest, message)
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

/// `gated { rpc(Request) -> Reply: "what" => read; … }`, one line per session-gated read: the
/// RPC answers what `read` makes of its [`Gate`]. Health and Commit, which are not such reads,
/// follow the table as ordinary methods.
macro_rules! store_api {
    (gated { $($rpc:ident($request:ident) -> $reply:ident: $what:literal => $read:ident;)* } $($other:item)*) => {
        #[tonic::async_trait]
        impl StoreApi for StoreService {
            $(async fn $rpc(&self, request: Request<pb::$request>) -> Result<Response<pb::$reply>, Status> {
                reply(self.gated(&request, $what, $read).await)
            })*
            $($other)*
        }
    };
}

store_api! {
    gated {
    head(HeadRequest) -> HeadReply: "head" => head;
    get_world(GetWorldRequest) -> GetWorldReply: "world" => world;
    get_object(GetObjectRequest) -> GetObjectReply: "object" => object;
    objects_by_semantic_id(ObjectsBySemanticIdRequest) -> ObjectsBySemanticIdReply: "objects by semantic id" => objects_by_semantic_id;
    object_entry(ObjectEntryRequest) -> ObjectEntryReply: "object entry" => object_entry;
    get_log_entry(GetLogEntryRequest) -> GetLogEntryReply: "log entry" => log_entry;
    log_page(LogPageRequest) -> LogPageReply: "log page" => log_page;
    registry_head(RegistryHeadRequest) -> RegistryHeadReply: "registry head" => registry_head;
    receipt(ReceiptRequest) -> ReceiptReply: "receipt" => receipt;
    session(SessionRequest) -> SessionReply: "session" => session;
    calls(CallsRequest) -> CallsReply: "calls" => calls;
    }

    async fn health(&self, _request: Request<pb::HealthRequest>) -> Result<Response<pb::HealthReply>, Status> {
        Ok(Response::new(self.core.health()))
    }

    async fn commit(&self, request: Request<pb::CommitRequest>) -> Result<Response<pb::CommitReply>, Status> {
        let commit = async {
            let session = self.core.resolve_session(authorization(&request), "commit").await?;
            let message = request.get_ref();
            let (observed_head, next_world, entry, objects) = convert::commit_parts(message)?;
            let invocation_id = match message.invocation_id.as_str() {
                "" => None,
                id if is_rest_id(id) => Some(id.to_owned()),
                _ => return Err(bad_request("invocationId must be rest:<id>")),
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
}

async fn head(gate: Gate<'_, pb::HeadRequest>) -> Result<String, Failure> {
    let head = gate.store.selected_head().await.found("head", "no world head has been selected yet")?;
    Ok(head.to_string())
}

async fn world(gate: Gate<'_, pb::GetWorldRequest>) -> Result<pb::World, Failure> {
    let reference = parse_ref("world ref", &gate.message.r#ref)?;
    gate.store.world(&reference).await.found("world", "world not found").map(convert::world)
}

async fn object(gate: Gate<'_, pb::GetObjectRequest>) -> Result<pb::StoredObject, Failure> {
    let hash = parse_ref("object ref", &gate.message.r#ref)?;
    let object = gate.store.reads(&gate.reader).object(&hash, gate.message.with_payload).await;
    object.found("object", "object not found").map(convert::object)
}

async fn objects_by_semantic_id(gate: Gate<'_, pb::ObjectsBySemanticIdRequest>) -> Result<pb::ObjectPage, Failure> {
    let message = gate.message;
    if message.semantic_id.is_empty() {
        return Err(bad_request("semantic id is empty"));
    }
    let after = parse_optional_ref("after", &message.after)?;
    let items = gate
        .store
        .reads(&gate.reader)
        .objects_by_semantic_id(&message.semantic_id, after.as_ref(), message.limit)
        .await
        .map_err(read_failure("objects by semantic id"))?;
    Ok(pb::ObjectPage { items: items.into_iter().map(convert::object).collect() })
}

async fn object_entry(gate: Gate<'_, pb::ObjectEntryRequest>) -> Result<pb::LogEntry, Failure> {
    let hash = parse_ref("object ref", &gate.message.r#ref)?;
    let entry = gate.store.reads(&gate.reader).entry_of_object(&hash).await;
    entry.found("object entry", "no log entry carries this object").map(convert::entry)
}

async fn log_entry(gate: Gate<'_, pb::GetLogEntryRequest>) -> Result<pb::LogEntry, Failure> {
    let index = gate.message.index;
    if index < 0 {
        return Err(bad_request("log index must be a non-negative integer"));
    }
    gate.store.reads(&gate.reader).log_entry(index).await.found("log entry", "log entry not found").map(convert::entry)
}

async fn log_page(gate: Gate<'_, pb::LogPageRequest>) -> Result<pb::EntryPage, Failure> {
    let pb::LogPageRequest { from, limit } = *gate.message;
    if from < 0 {
        return Err(bad_request("from must be a non-negative integer"));
    }
    let items = gate.store.reads(&gate.reader).log_page(from, limit).await.map_err(read_failure("log page"))?;
    Ok(pb::EntryPage { items: items.into_iter().map(convert::entry).collect() })
}

async fn registry_head(gate: Gate<'_, pb::RegistryHeadRequest>) -> Result<String, Failure> {
    let name = &gate.message.name;
    if name.is_empty() {
        return Err(bad_request("registry name is empty"));
    }
    let head = gate.store.registry_head(name).await.found("registry head", "registry head not found")?;
    Ok(head.to_string())
}

async fn receipt(gate: Gate<'_, pb::ReceiptRequest>) -> Result<pb::ReceiptState, Failure> {
    let id = &gate.message.invocation_id;
    if !is_rest_id(id) {
        return Err(bad_request("receipt id must be rest:<id>"));
    }
    let receipt = gate.store.receipt(id).await.map_err(read_failure("receipt"))?;
    Ok(pb::ReceiptState {
        invocation_id: id.clone(),
        state: receipt.state().to_owned(),
        result_ref: match receipt {
            Receipt::Resolved { result_ref } => result_ref.to_string(),
            _ => String::new(),
        },
    })
}

async fn session(gate: Gate<'_, pb::SessionRequest>) -> Result<pb::SessionView, Failure> {
    let session = gate.session;
    let spend = gate.store.effect_spend(session.episode.as_str()).await.map_err(read_failure("session"))?;
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
        reads_every_episode: gate.reader == Reader::Everything,
        episode: session.episode.as_str().to_owned(),
        expires_at: session.expires_at,
        created_at: session.created_at,
        grants,
    })
}

async fn calls(gate: Gate<'_, pb::CallsRequest>) -> Result<pb::CallPage, Failure> {
    let message = gate.message;
    let reads = gate.store.reads(&gate.reader);
    if !message.find.is_empty() {
        let found = calls::find(&reads, gate.session.episode.as_str(), &message.find).await;
        let found = found.map_err(read_failure("calls"))?;
        return Ok(pb::CallPage { items: found.into_iter().map(call).collect(), next: 0 });
    }
    let filter = calls::Filter { episode: message.episode.clone(), transition: message.transition.clone() };
    let before = (message.before > 0).then_some(message.before);
    let (items, next) = calls::page(&reads, before, message.limit, &filter).await.map_err(read_failure("calls"))?;
    Ok(pb::CallPage { items: items.into_iter().map(call).collect(), next: next.unwrap_or(0) })
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
