//! The one place an internal error becomes a [`Failure`]: what the caller sees, plus the
//! cause the core logs once (callers never see it). Each internal error answers its own code
//! ([`Coded`], one `impl` per type, all of them here); the functions below classify what
//! depends on more than the error: the surface (REST's codes), the call's state (whether an
//! effect ran), or a message that names a limit.

use std::fmt::Display;
use std::time::Duration;

use tokio::task::JoinError;
use tokio::time::error::Elapsed;
use world_model::{Concern, Failure, FailureCode, HashRef, McpNameError, PlanLawError, quote_for_log};

use crate::capsule::CapsuleError;
use crate::effects::broker::DispatchError;
use crate::effects::episodes::TurnError;
use crate::registry::RegistryReadError;
use crate::session::ResolveError;
use crate::store::StoreError;
use crate::subprocess::RunError;

/// A failure plus the internal cause the core logs once.
#[derive(Debug)]
pub struct Refusal {
    pub failure: Failure,
    pub cause: Option<String>,
}

impl Refusal {
    pub fn of(code: FailureCode) -> Self {
        Self { failure: Failure::of(code), cause: None }
    }

    pub fn because(code: FailureCode, cause: impl ToString) -> Self {
        Self { failure: Failure::of(code), cause: Some(cause.to_string()) }
    }

    pub fn with_message(code: FailureCode, message: impl Into<String>) -> Self {
        Self { failure: Failure::new(code, message), cause: None }
    }

    /// An internal error as its code, the error itself the cause.
    pub fn coded(error: impl Coded) -> Self {
        Self::because(error.code(), error)
    }
}

/// An internal error that names the failure it is to an invocation's caller (Quickwit's
/// `ServiceError`): the code lives on the error, not at the call sites that meet it.
pub trait Coded: Display {
    fn code(&self) -> FailureCode;
}

impl Coded for StoreError {
    fn code(&self) -> FailureCode {
        match self {
            StoreError::WorldAbsent => FailureCode::WorldAbsent,
            StoreError::Uncertain(_) => FailureCode::Unconfirmed,
            StoreError::Deadline => FailureCode::Deadline,
            StoreError::DuplicateInvocation { .. } => FailureCode::TaskIdUsed,
            StoreError::Conflict { .. } => FailureCode::HeadMoved,
            _ => FailureCode::Unavailable,
        }
    }
}

/// A store error met by an invocation: a code the caller can act on says all there is; an
/// unknown commit outcome and a failed store leave a cause for the log.
impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Self {
        match (error.code(), error) {
            (code, StoreError::Uncertain(cause)) => Refusal::because(code, cause),
            (FailureCode::Unavailable, error) => Refusal::coded(error),
            (code, _) => Refusal::of(code),
        }
    }
}

impl Coded for CapsuleError {
    fn code(&self) -> FailureCode {
        match self {
            CapsuleError::Run(RunError::NoSlot(_)) => FailureCode::CapacityExceeded,
            CapsuleError::Run(RunError::Timeout(_)) => FailureCode::Deadline,
            CapsuleError::Integrity { .. } => FailureCode::Unavailable,
            _ => FailureCode::ExecutionFailed,
        }
    }
}

/// A capsule run that did not finish.
impl From<CapsuleError> for Refusal {
    fn from(error: CapsuleError) -> Self {
        match (error.code(), error) {
            (code, CapsuleError::Run(RunError::NoSlot(limit))) => Refusal::with_message(
                code,
                format!("interpreter subprocess capacity exceeded: at most {limit} run at once; retry later"),
            ),
            (code @ FailureCode::Deadline, _) => Refusal::of(code),
            (_, error) => Refusal::coded(error),
        }
    }
}

/// Errors that are one failure whatever their variant.
macro_rules! coded {
    ($($(#[$why:meta])* $error:ty => $code:ident;)*) => {$(
        $(#[$why])*
        impl Coded for $error {
            fn code(&self) -> FailureCode {
                FailureCode::$code
            }
        }
    )*};
}

coded! {
    /// The transition registry could not be read (a store failure, or a head that is absent or
    /// damaged): the service failed, whatever the call.
    RegistryReadError => Unavailable;
    /// An effectful call that could not have its episode's effect turn in time, the lease's
    /// store included: the call's own deadline ended first.
    TurnError => Deadline;
    /// An invocation task that panicked or was cancelled.
    JoinError => Unavailable;
    /// Tool names that cannot be told apart (too long, or shared once escaped): the surface
    /// itself is broken, so no call on it can be answered.
    McpNameError => Unavailable;
    /// A bounded read, lookup or commit that ended before its durable step.
    Elapsed => Timeout;
}

impl Coded for ResolveError {
    fn code(&self) -> FailureCode {
        match self {
            ResolveError::Denied(denial) => FailureCode::from(*denial),
            // Never a denial: the caller's credential may be good.
            ResolveError::Store(_) => FailureCode::Internal,
        }
    }
}

/// An internal error answered with its code alone; the error goes to the core's log, here,
/// once, as `what`.
pub fn logged(error: impl Coded, what: std::fmt::Arguments<'_>) -> Failure {
    tracing::error!(%error, "{what}");
    Failure::of(error.code())
}

/// The transition registry could not be read for a request's `what` (admit, invoke).
pub fn registry_failure(error: RegistryReadError, what: &str) -> Failure {
    logged(error, format_args!("{what}: transition registry read failed"))
}

/// A bound that passed first: its code, and nothing to log (the caller's answer says it).
pub fn timed_out(elapsed: Elapsed) -> Failure {
    Failure::of(elapsed.code())
}

/// The credential lookup's bound passed first; the message names the bound.
pub fn credential_timeout(elapsed: Elapsed, limit: Duration) -> Failure {
    Failure::new(elapsed.code(), format!("credential lookup deadline ({limit:?}) exceeded"))
}

/// The operator line for a refused call (the reference's `<surface> refusal: <method> <id>:
/// "<cause>"`), at the level its failure's [`Concern`] sets and with its code as the class:
/// a refused request is INFO, never an ERROR that would page an operator. The cause may hold
/// the caller's own text, so it is quoted and cut.
pub fn log_refusal(code: FailureCode, what: std::fmt::Arguments<'_>, cause: &str) {
    let (class, cause) = (code.as_str(), quote_for_log(cause));
    match code.concern() {
        Concern::Service => tracing::error!(code = class, "{what}: {cause}"),
        Concern::Operator => tracing::warn!(code = class, "{what}: {cause}"),
        Concern::Caller => tracing::info!(code = class, "{what}: {cause}"),
    }
}

/// An MCP surface whose tool names cannot be told apart: the reference's operator line, and
/// to the caller only "host callback failed".
pub fn broken_surface(error: &McpNameError) -> Failure {
    tracing::error!("mcp refusal: tools/call -: {:?}", error.to_string());
    Failure::of(error.code())
}

/// A failed session resolution: a denial, or (never a denial) a store error, logged here.
pub fn resolve_failure(error: ResolveError, what: &str) -> Failure {
    if let ResolveError::Store(cause) = &error {
        tracing::error!(%cause, "{what}: credential lookup failed");
    }
    Failure::of(error.code())
}

/// A plan that broke the plan law: the caller is told which rule.
pub fn plan_refused(error: PlanLawError) -> Refusal {
    Refusal {
        failure: Failure::new(FailureCode::ExecutionFailed, format!("the effect plan was refused: {error}")),
        cause: Some(error.to_string()),
    }
}

/// An effect dispatch that failed. When this effect was not dispatched and no earlier one of
/// the call awaits its outcome, nothing ran: the call is refused (`Err`). Otherwise effects ran
/// (`Ok`, the cause): the caller makes their outcomes durable, then answers [`unrecorded`].
pub fn dispatch_failure(error: DispatchError, earlier_ran: bool) -> Result<String, Refusal> {
    match error {
        DispatchError::NotRun(cause) if !earlier_ran => Err(Refusal::because(FailureCode::Unavailable, cause)),
        error => Ok(error.to_string()),
    }
}

/// EffectsUnrecorded: the records travel to A2A callers, the cause to the core's log.
pub fn unrecorded(records: Vec<HashRef>, cause: String) -> Refusal {
    let listed: Vec<String> = records.iter().map(HashRef::to_string).collect();
    Refusal {
        failure: Failure::effects_unrecorded(records),
        cause: Some(format!("{cause}; effect records: [{}]", listed.join(" "))),
    }
}

/// A committed A2A task that cannot be read back (the store failed, or what it holds does not
/// verify): the service failed, whatever the cause, which is logged here.
pub fn unreadable_task(id: &str, cause: &str) -> Failure {
    tracing::error!("a2a refusal: GetTask {id}: {cause:?}");
    Failure::of(FailureCode::Unavailable)
}

/// A store error met by a REST read or commit; internal causes are logged here, once.
pub fn rest_store_failure(error: StoreError, what: &str) -> Failure {
    match error {
        StoreError::Conflict { observed, selected } => Failure {
            code: FailureCode::HeadConflict,
            message: StoreError::Conflict { observed, selected }.to_string(),
            effect_records: Vec::new(),
            observed_head: observed,
            selected_head: selected,
        },
        error @ (StoreError::Invalid { .. } | StoreError::EntryExists(_)) => {
            Failure::new(FailureCode::BadRequest, error.to_string())
        }
        StoreError::DuplicateInvocation { invocation_id, kind } => Failure::new(
            FailureCode::BadRequest,
            format!("invocationId already names a different {kind}: {invocation_id}"),
        ),
        StoreError::Deadline => Failure::of(FailureCode::Timeout),
        StoreError::Uncertain(cause) => {
            tracing::error!(%cause, "{what}: commit outcome unknown");
            Failure::of(FailureCode::CommitUncertain)
        }
        error => {
            tracing::error!(%error, "{what}: internal store failure");
            Failure::of(FailureCode::Internal)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use world_model::SessionDenial;

    #[test]
    fn store_errors_map_to_one_code_per_surface() {
        type Make = fn() -> StoreError;
        let table: [(Make, FailureCode, FailureCode); 7] = [
            (|| StoreError::WorldAbsent, FailureCode::WorldAbsent, FailureCode::Internal),
            (|| StoreError::Uncertain("x".into()), FailureCode::Unconfirmed, FailureCode::CommitUncertain),
            (|| StoreError::Deadline, FailureCode::Deadline, FailureCode::Timeout),
            (
                || StoreError::DuplicateInvocation { invocation_id: "rest:a".into(), kind: "commit" },
                FailureCode::TaskIdUsed,
                FailureCode::BadRequest,
            ),
            (
                || StoreError::Conflict { observed: None, selected: Some(HashRef::of(b"h")) },
                FailureCode::HeadMoved,
                FailureCode::HeadConflict,
            ),
            (|| StoreError::EntryExists(3), FailureCode::Unavailable, FailureCode::BadRequest),
            (|| StoreError::Damaged("x".into()), FailureCode::Unavailable, FailureCode::Internal),
        ];
        for (make, want_invocation, want_rest) in table {
            let text = format!("{:?}", make());
            assert_eq!(Refusal::from(make()).failure.code, want_invocation, "{text}");
            assert_eq!(rest_store_failure(make(), "test").code, want_rest, "{text}");
        }
    }

    #[test]
    fn a_rest_conflict_names_both_heads() {
        let (observed, selected) = (Some(HashRef::of(b"o")), Some(HashRef::of(b"s")));
        let failure = rest_store_failure(StoreError::Conflict { observed, selected }, "test");
        assert_eq!((failure.observed_head, failure.selected_head), (observed, selected));
    }

    #[test]
    fn capsule_errors_map_by_cause() {
        let table = [
            (CapsuleError::Run(RunError::NoSlot(12)), FailureCode::CapacityExceeded),
            (CapsuleError::Run(RunError::Timeout(Duration::from_secs(1))), FailureCode::Deadline),
            (CapsuleError::Run(RunError::Overflow(9)), FailureCode::ExecutionFailed),
            (CapsuleError::Root("x".into()), FailureCode::ExecutionFailed),
            (CapsuleError::Integrity { pin: HashRef::of(b"i"), cause: "x".into() }, FailureCode::Unavailable),
        ];
        for (error, want) in table {
            assert_eq!(Refusal::from(error).failure.code, want);
        }
    }

    #[test]
    fn the_capacity_message_names_the_configured_limit() {
        let refusal = Refusal::from(CapsuleError::Run(RunError::NoSlot(12)));
        assert!(refusal.failure.message.contains("at most 12 run at once"), "{}", refusal.failure.message);
    }

    #[test]
    fn internal_errors_carry_their_codes() {
        let head = HashRef::of(b"r");
        let table: [(&dyn Coded, FailureCode); 6] = [
            (&RegistryReadError::HeadAbsent { head }, FailureCode::Unavailable),
            (&RegistryReadError::Store(StoreError::Deadline), FailureCode::Unavailable),
            (&TurnError::Deadline("ep".into()), FailureCode::Deadline),
            (&TurnError::Store(StoreError::Damaged("x".into())), FailureCode::Deadline),
            (&ResolveError::Store(StoreError::Deadline), FailureCode::Internal),
            (&McpNameError::Empty, FailureCode::Unavailable),
        ];
        for (error, want) in table {
            assert_eq!(error.code(), want, "{error}");
        }
        let refusal = Refusal::coded(RegistryReadError::HeadAbsent { head });
        assert_eq!((refusal.failure.code, refusal.cause.is_some()), (FailureCode::Unavailable, true));
    }

    #[test]
    fn a_failed_dispatch_is_refused_only_when_nothing_ran() {
        let not_run = || DispatchError::NotRun("effect intent: x".into());
        let refused = dispatch_failure(not_run(), false).unwrap_err();
        assert_eq!(
            (refused.failure.code, refused.cause.as_deref()),
            (FailureCode::Unavailable, Some("effect intent: x"))
        );
        assert_eq!(dispatch_failure(not_run(), true).unwrap(), not_run().to_string());
        let ran = DispatchError::Unrecorded { effect_id: "e".into(), cause: "lost".into() };
        assert!(dispatch_failure(ran, false).unwrap().contains("lost"));
        let record = HashRef::of(b"record");
        let unrecorded = unrecorded(vec![record], "lost".into());
        assert_eq!(
            (unrecorded.failure.code, unrecorded.failure.effect_records),
            (FailureCode::EffectsUnrecorded, vec![record])
        );
    }

    #[tokio::test]
    async fn timeouts_answer_timeout_and_the_credential_one_names_its_bound() {
        let elapsed =
            || async { tokio::time::timeout(Duration::ZERO, std::future::pending::<()>()).await.unwrap_err() };
        assert_eq!(timed_out(elapsed().await), Failure::of(FailureCode::Timeout));
        let credential = credential_timeout(elapsed().await, Duration::from_secs(3));
        assert_eq!(credential, Failure::new(FailureCode::Timeout, "credential lookup deadline (3s) exceeded"));
    }

    #[test]
    fn session_denials_keep_their_codes() {
        for (d, code) in [
            (SessionDenial::Absent, FailureCode::SessionAbsent),
            (SessionDenial::Malformed, FailureCode::SessionMalformed),
            (SessionDenial::Unknown, FailureCode::SessionUnknown),
            (SessionDenial::Expired, FailureCode::SessionExpired),
        ] {
            assert_eq!(resolve_failure(ResolveError::Denied(d), "test").code, code);
        }
    }
}
