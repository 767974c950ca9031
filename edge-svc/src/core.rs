//! The gRPC client to world-core: one lazily connected channel per `--core` URL, spread evenly
//! over the calls, so the edge starts before the core and any number of core replicas share
//! the load.
//! A core that cannot be connected to is passed over for a short while, and a call that never
//! reached a core (its connection failed) goes to the next one, whatever the call: so one core
//! down costs no failed request beyond those it was serving when it went.
//!
//! Every call forwards the caller's `Authorization` as `authorization` metadata, carries its
//! deadline as `grpc-timeout` and enforces it locally too (a hung core must not hang the
//! request), and comes back as the reply's value or a typed [`Failure`]: the core's own, or
//! one standing for a transport problem. Nothing here chooses an HTTP status or knows the
//! protocols above it (the surfaces admitted through it are kept a layer up, in `surface`); the
//! deadlines are [`crate::limits::core_call`]'s.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tracing::Instrument as _;

use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request, Response, Status};
use world_model::{Failure, FailureCode, HashRef};
use world_proto::Outcome;
use world_proto::v1 as pb;
use world_proto::v1::admission_client::AdmissionClient;
use world_proto::v1::invocation_client::InvocationClient;
use world_proto::v1::store_client::StoreClient;

use crate::limits::core_call as deadline;
use crate::metrics::CoreCalls;
use crate::session::Forwarded;

/// The message of the failure that stands for a core the edge cannot reach.
pub const CORE_UNREACHABLE: &str = "world-core is unreachable; retry the request";
/// The message of the failure that stands for a core that did not answer in time.
pub const CORE_DEADLINE: &str = "world-core did not answer within its deadline";

#[derive(Debug, thiserror::Error)]
pub enum CoreUrlError {
    #[error("at least one --core URL is required (for example http://127.0.0.1:7650)")]
    None,
    #[error("--core {url:?} is not a usable URL: {reason}")]
    Invalid { url: String, reason: String },
}

#[derive(Clone)]
pub struct CoreClient {
    cores: Arc<[Core]>,
    calls: Arc<CoreCalls>,
    next: Arc<AtomicUsize>,
    /// The zero of each core's `passed_over_until`.
    started: Instant,
}

/// One `--core` URL.
struct Core {
    url: String,
    channel: Channel,
    /// Milliseconds after `started` until which the core is passed over (0: never failed).
    passed_over_until: AtomicU64,
}

/// SplitMix64's finaliser: consecutive counters map to well-spread values.
fn spread(counter: u64) -> u64 {
    let mut x = counter.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Whether `status` stands for a connection to the core that was never made, so the request
/// never left the edge.
fn never_connected(status: &Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(error) = source {
        if error.is::<tonic::ConnectError>() {
            return true;
        }
        source = error.source();
    }
    false
}

/// How a failed call is classified when the reply never arrived.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LostReply {
    /// A read or admission: nothing happened, retrying is safe.
    Retryable,
    /// A commit: it may have landed, so the caller is told to reconcile first.
    Uncertain,
    /// An invocation: it may have run, so it is never repeated here; a lost deadline is the
    /// invocation's own deadline, which each wire words as such.
    Invocation,
}

/// One call of `Client::method` whose reply is a value or a typed failure, read back by
/// [`outcome`].
macro_rules! rpc {
    ($client:expr, $what:expr, $credential:expr, $deadline:expr, $lost:expr, $message:expr, $rpc:ident :: $method:ident) => {
        outcome(
            $what,
            $client
                .unary($what, Some($credential), $deadline, $lost, $message, |channel, request| async move {
                    $rpc::new(channel).$method(request).await
                })
                .await,
        )
    };
}

/// A store read of the `world.v1.Store` RPC `method`: under the read deadline, and retried on
/// another core when it is lost.
macro_rules! store_read {
    ($client:expr, $what:expr, $credential:expr, $message:expr, $method:ident) => {
        rpc!($client, $what, $credential, deadline::READ, LostReply::Retryable, $message, StoreClient::$method)
    };
}

impl CoreClient {
    /// Channels that connect on first use, so a core started after the edge is picked up.
    /// Call it inside a Tokio runtime: each channel spawns its connection task there.
    pub fn connect_lazy<S: AsRef<str>>(urls: &[S]) -> Result<CoreClient, CoreUrlError> {
        let mut cores = Vec::with_capacity(urls.len());
        for url in urls {
            let url = url.as_ref().trim();
            if url.is_empty() {
                continue;
            }
            let invalid = |reason: String| CoreUrlError::Invalid { url: url.to_owned(), reason };
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(invalid("the scheme must be http:// or https://".into()));
            }
            let endpoint = Endpoint::from_shared(url.to_owned())
                .map_err(|error| invalid(error.to_string()))?
                .connect_timeout(deadline::CONNECT)
                .tcp_nodelay(true);
            let channel = endpoint.connect_lazy();
            cores.push(Core { url: url.to_owned(), channel, passed_over_until: AtomicU64::new(0) });
        }
        if cores.is_empty() {
            return Err(CoreUrlError::None);
        }
        Ok(CoreClient {
            cores: cores.into(),
            calls: Arc::default(),
            next: Arc::new(AtomicUsize::new(0)),
            started: Instant::now(),
        })
    }

    /// The calls this client has sent, by RPC.
    pub fn sent(&self) -> &CoreCalls {
        &self.calls
    }

    pub fn replicas(&self) -> usize {
        self.cores.len()
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// A core that is not passed over (when every one is, any). The first one tried is spread
    /// evenly but not in strict turn: a request may make two calls (an admission, then a read),
    /// and strict turns over two cores would send every first call to one and every second to
    /// the other.
    fn pick(&self) -> usize {
        let first = spread(self.next.fetch_add(1, Ordering::Relaxed) as u64) as usize;
        let now = self.now_ms();
        (0..self.cores.len())
            .map(|offset| (first + offset) % self.cores.len())
            .find(|&index| self.cores[index].passed_over_until.load(Ordering::Relaxed) <= now)
            .unwrap_or(first % self.cores.len())
    }

    fn pass_over(&self, index: usize, status: &Status) {
        let core = &self.cores[index];
        tracing::warn!(core = %core.url, error = %status.message(), "world-core cannot be connected to; passing it over for {:?}", deadline::PASS_OVER);
        let until = self.now_ms() + deadline::PASS_OVER.as_millis() as u64;
        core.passed_over_until.store(until, Ordering::Relaxed);
    }

    /// One unary call under `timeout`, with the credential attached.
    pub(crate) async fn unary<Q, R, F, Fut>(
        &self,
        what: &'static str,
        credential: Option<&Forwarded>,
        timeout: Duration,
        lost: LostReply,
        message: Q,
        call: F,
    ) -> Result<R, Failure>
    where
        Q: Clone,
        F: Fn(Channel, Request<Q>) -> Fut,
        Fut: Future<Output = Result<Response<R>, Status>>,
    {
        let authorization = credential.and_then(|credential| {
            // The precheck admitted only visible ASCII, so this cannot fail in practice; if it
            // did, the core would see no credential and answer it as absent.
            MetadataValue::try_from(credential.as_str())
                .inspect_err(|_| tracing::info!(what, "authorization value is not valid metadata"))
                .ok()
        });
        self.calls.count(what);
        let span = tracing::info_span!("rpc.client", otel.kind = "client", rpc.system = "grpc", rpc.method = what,);
        let request = |message: Q| {
            let mut request = Request::new(message);
            request.set_timeout(timeout);
            if let Some(value) = &authorization {
                request.metadata_mut().insert("authorization", value.clone());
            }
            // The core's spans join this trace as children of this call.
            world_telemetry::inject_grpc(&span, &mut request);
            request
        };
        // A call that could not reach one core tries the next: any call whose connection
        // failed (it never left the edge), and a read or admission on any unavailability. A
        // commit or an invocation that may have reached a core is never repeated here.
        let calls = async {
            let mut unreachable = Status::unavailable("no world-core channel");
            for _ in 0..self.cores.len() {
                let index = self.pick();
                match call(self.cores[index].channel.clone(), request(message.clone())).await {
                    Ok(response) => return Ok(response),
                    Err(status) if status.code() == Code::Unavailable => {
                        let undelivered = never_connected(&status);
                        if undelivered {
                            self.pass_over(index, &status);
                        }
                        unreachable = status;
                        if !(undelivered || lost == LostReply::Retryable) {
                            break;
                        }
                    }
                    Err(status) => return Err(status),
                }
            }
            Err(unreachable)
        };
        match tokio::time::timeout(timeout, calls).instrument(span.clone()).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(status)) => Err(status_failure(what, &status, lost)),
            Err(_) => {
                tracing::warn!(what, ?timeout, "world-core call exceeded its deadline");
                Err(lost_failure(lost, FailureCode::Timeout, CORE_DEADLINE))
            }
        }
    }

    pub async fn health(&self) -> Result<pb::HealthReply, Failure> {
        self.unary(
            "health",
            None,
            deadline::HEALTH,
            LostReply::Retryable,
            pb::HealthRequest {},
            |channel, request| async move { StoreClient::new(channel).health(request).await },
        )
        .await
    }

    /// Admits `credential`: its session, fresh from the core, and its surface, which the core
    /// leaves out when its digest is `known_surface` (the caller holds it already).
    pub async fn admit(&self, credential: &Forwarded, known_surface: &str) -> Result<pb::Admitted, Failure> {
        let message = pb::AdmitRequest { known_surface: known_surface.to_owned() };
        rpc!(self, "admit", credential, deadline::ADMIT, LostReply::Retryable, message, AdmissionClient::admit)
    }

    pub async fn head(&self, credential: &Forwarded) -> Result<String, Failure> {
        store_read!(self, "head", credential, pb::HeadRequest {}, head)
    }

    pub async fn world(&self, credential: &Forwarded, reference: &HashRef) -> Result<pb::World, Failure> {
        let message = pb::GetWorldRequest { r#ref: reference.to_string() };
        store_read!(self, "world", credential, message, get_world)
    }

    pub async fn object(
        &self,
        credential: &Forwarded,
        hash: &HashRef,
        with_payload: bool,
    ) -> Result<pb::StoredObject, Failure> {
        let message = pb::GetObjectRequest { r#ref: hash.to_string(), with_payload };
        store_read!(self, "object", credential, message, get_object)
    }

    pub async fn objects_by_semantic_id(
        &self,
        credential: &Forwarded,
        semantic_id: &str,
        after: Option<&HashRef>,
        limit: u32,
    ) -> Result<Vec<pb::StoredObject>, Failure> {
        let message = pb::ObjectsBySemanticIdRequest {
            semantic_id: semantic_id.to_owned(),
            after: HashRef::optional_text(after),
            limit,
        };
        let page = store_read!(self, "objects by semantic id", credential, message, objects_by_semantic_id)?;
        Ok(page.items)
    }

    pub async fn log_entry(&self, credential: &Forwarded, index: i64) -> Result<pb::LogEntry, Failure> {
        store_read!(self, "log entry", credential, pb::GetLogEntryRequest { index }, get_log_entry)
    }

    pub async fn log_page(&self, credential: &Forwarded, from: i64, limit: u32) -> Result<Vec<pb::LogEntry>, Failure> {
        let page = store_read!(self, "log page", credential, pb::LogPageRequest { from, limit }, log_page)?;
        Ok(page.items)
    }

    /// The caller's own session with each grant's spend.
    pub async fn session_view(&self, credential: &Forwarded) -> Result<pb::SessionView, Failure> {
        store_read!(self, "session", credential, pb::SessionRequest {}, session)
    }

    /// A page of the log read as calls, or the call `request.find` names.
    pub async fn calls(&self, credential: &Forwarded, request: pb::CallsRequest) -> Result<pb::CallPage, Failure> {
        store_read!(self, "calls", credential, request, calls)
    }

    pub async fn registry_head(&self, credential: &Forwarded, name: &str) -> Result<String, Failure> {
        let message = pb::RegistryHeadRequest { name: name.to_owned() };
        store_read!(self, "registry head", credential, message, registry_head)
    }

    pub async fn receipt(&self, credential: &Forwarded, invocation_id: &str) -> Result<pb::ReceiptState, Failure> {
        let message = pb::ReceiptRequest { invocation_id: invocation_id.to_owned() };
        store_read!(self, "receipt", credential, message, receipt)
    }

    /// One call of a published transition under `timeout`: the core resolves the session,
    /// admits the call and runs it, or answers the refusal. It is sent once: the core may have
    /// run it even when the reply is lost, and only an A2A task id makes a resend safe, which
    /// is the caller's decision.
    pub async fn invoke(
        &self,
        credential: &Forwarded,
        message: pb::InvokeRequest,
        timeout: Duration,
    ) -> Result<pb::Invoked, Failure> {
        rpc!(self, "invoke", credential, timeout, LostReply::Invocation, message, InvocationClient::invoke)
    }

    /// The committed A2A task `task_id` of the caller's episode (`GetTask`), read from the
    /// store by whichever core answers; a read, so a lost reply may be retried.
    pub async fn committed_task(
        &self,
        credential: &Forwarded,
        task_id: &str,
        timeout: Duration,
    ) -> Result<pb::Invoked, Failure> {
        let message = pb::CommittedTaskRequest { task_id: task_id.to_owned() };
        rpc!(
            self,
            "committed task",
            credential,
            timeout,
            LostReply::Retryable,
            message,
            InvocationClient::committed_task
        )
    }

    /// The compare-and-append commit. A reply that never arrives comes back as
    /// `CommitUncertain`, since the commit may have landed; the caller words the reconcile
    /// instructions, as only it knows the entry and the invocation id.
    pub async fn commit(&self, credential: &Forwarded, message: pb::CommitRequest) -> Result<String, Failure> {
        rpc!(self, "commit", credential, deadline::COMMIT, LostReply::Uncertain, message, StoreClient::commit)
    }
}

/// A reply read back as its value or the core's typed failure: the one place such a reply is
/// read.
fn outcome<R: Outcome<Error = pb::Failure>>(
    what: &'static str,
    reply: Result<R, Failure>,
) -> Result<R::Value, Failure> {
    match reply?.into_result() {
        Some(Ok(value)) => Ok(value),
        Some(Err(failure)) => Err(from_proto(failure)),
        None => Err(empty_reply(what)),
    }
}

/// The core's typed failure as the domain type. A code this edge does not know (a newer core)
/// is treated as an unclassified failure, which every wire answers as "retry later".
pub fn from_proto(failure: pb::Failure) -> Failure {
    let Some(code) = FailureCode::parse(&failure.code) else {
        tracing::warn!(code = %failure.code, "world-core sent an unknown failure code");
        return Failure::of(FailureCode::Unavailable);
    };
    let parse = |text: &str| HashRef::parse_optional(text).ok().flatten();
    Failure {
        code,
        message: failure.message,
        effect_records: failure.effect_records.iter().filter_map(|record| HashRef::parse(record).ok()).collect(),
        observed_head: parse(&failure.observed_head),
        selected_head: parse(&failure.selected_head),
    }
}

fn empty_reply(what: &'static str) -> Failure {
    tracing::error!(what, "world-core sent a reply without an outcome");
    Failure::new(FailureCode::Unavailable, CORE_UNREACHABLE)
}

fn lost_failure(lost: LostReply, code: FailureCode, message: &str) -> Failure {
    match lost {
        LostReply::Retryable => Failure::new(code, message),
        LostReply::Invocation if code == FailureCode::Timeout => Failure::new(FailureCode::Deadline, message),
        LostReply::Invocation => Failure::new(code, message),
        // The caller replaces the message with its reconcile instructions.
        LostReply::Uncertain => Failure::of(FailureCode::CommitUncertain),
    }
}

/// A gRPC status (the core answered nothing typed): a transport problem, logged here once.
fn status_failure(what: &'static str, status: &Status, lost: LostReply) -> Failure {
    tracing::warn!(what, code = ?status.code(), message = status.message(), "world-core call failed");
    match status.code() {
        Code::DeadlineExceeded => lost_failure(lost, FailureCode::Timeout, CORE_DEADLINE),
        // tonic's server answers a call whose `grpc-timeout` expired with CANCELLED, and that
        // answer can arrive before the edge's own timer fires: it is the same deadline.
        Code::Cancelled if lost == LostReply::Invocation => lost_failure(lost, FailureCode::Timeout, CORE_DEADLINE),
        // The client went away; nothing will read this answer, but keep it honest.
        Code::Cancelled => lost_failure(lost, FailureCode::Unavailable, CORE_UNREACHABLE),
        _ => lost_failure(lost, FailureCode::Unavailable, CORE_UNREACHABLE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admissions_and_invocations_both_spread_over_every_core() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let client = runtime.block_on(async { CoreClient::connect_lazy(&["http://a:1", "http://b:2"]).unwrap() });
        // A request's two calls in a row, a thousand times: each kind lands on both cores.
        let mut landed = [[0usize; 2]; 2];
        for _ in 0..1000 {
            for kind in &mut landed {
                kind[client.pick()] += 1;
            }
        }
        for kind in landed {
            assert!(kind.iter().all(|&n| n > 400), "{kind:?}");
        }
        // A passed-over core gets nothing until its time is up.
        client.pass_over(0, &Status::unavailable("refused"));
        assert!((0..100).all(|_| client.pick() == 1));
    }

    #[test]
    fn a_refused_connection_is_known_never_to_have_reached_a_core() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let channel = Endpoint::from_shared(format!("http://127.0.0.1:{port}")).unwrap().connect_lazy();
            let status = StoreClient::new(channel).health(pb::HealthRequest {}).await.unwrap_err();
            assert_eq!(status.code(), Code::Unavailable);
            assert!(never_connected(&status), "{status:?}");
        });
        // The same code from a core that answered: it may have acted on the request.
        assert!(!never_connected(&Status::unavailable("the core is shutting down")));
    }

    #[test]
    fn core_urls_are_checked_at_startup() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        // Endpoint construction needs no runtime, but a lazy channel spawns its worker on one.
        runtime.block_on(async {
            assert!(matches!(CoreClient::connect_lazy::<&str>(&[]), Err(CoreUrlError::None)));
            assert!(matches!(CoreClient::connect_lazy(&[" "]), Err(CoreUrlError::None)));
            assert!(matches!(CoreClient::connect_lazy(&["127.0.0.1:7650"]), Err(CoreUrlError::Invalid { .. })));
            let client = CoreClient::connect_lazy(&["http://127.0.0.1:7650", "http://127.0.0.1:7651"]).unwrap();
            assert_eq!(client.replicas(), 2);
        });
    }

    #[test]
    fn proto_failures_become_domain_failures() {
        let selected = HashRef::of(b"s");
        let failure = from_proto(pb::Failure {
            code: "head_conflict".into(),
            message: "conflict".into(),
            effect_records: vec!["junk".into(), selected.to_string()],
            observed_head: String::new(),
            selected_head: selected.to_string(),
        });
        assert_eq!(failure.code, FailureCode::HeadConflict);
        assert_eq!(failure.observed_head, None);
        assert_eq!(failure.selected_head, Some(selected));
        assert_eq!(failure.effect_records, vec![selected]);
        let unknown = from_proto(pb::Failure { code: "from_the_future".into(), ..Default::default() });
        assert_eq!(unknown.code, FailureCode::Unavailable);
    }

    #[test]
    fn lost_replies_are_uncertain_only_for_commits() {
        let status = Status::unavailable("connection refused");
        assert_eq!(
            status_failure("x", &status, LostReply::Retryable),
            Failure::new(FailureCode::Unavailable, CORE_UNREACHABLE)
        );
        assert_eq!(status_failure("x", &status, LostReply::Uncertain).code, FailureCode::CommitUncertain);
        assert_eq!(
            status_failure("x", &Status::deadline_exceeded("t"), LostReply::Retryable).code,
            FailureCode::Timeout
        );
        assert_eq!(
            status_failure("x", &Status::deadline_exceeded("t"), LostReply::Invocation).code,
            FailureCode::Deadline
        );
        assert_eq!(status_failure("x", &status, LostReply::Invocation).code, FailureCode::Unavailable);
        assert_eq!(
            status_failure("x", &Status::cancelled("Timeout expired"), LostReply::Invocation).code,
            FailureCode::Deadline
        );
    }
}
