//! The one place an internal error becomes a [`Failure`]: what the caller sees, plus the
//! cause the core logs once (callers never see it).

use world_model::{Concern, Failure, FailureCode, SessionDenial, quote_for_log};

use crate::capsule::CapsuleError;
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
}

/// A store error met by an invocation.
impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::WorldAbsent => Refusal::of(FailureCode::WorldAbsent),
            StoreError::Uncertain(cause) => Refusal::because(FailureCode::Unconfirmed, cause),
            StoreError::Deadline => Refusal::of(FailureCode::Deadline),
            StoreError::DuplicateInvocation { .. } => Refusal::of(FailureCode::TaskIdUsed),
            StoreError::Conflict { .. } => Refusal::of(FailureCode::HeadMoved),
            other => Refusal::because(FailureCode::Unavailable, other),
        }
    }
}

/// A capsule run that did not finish.
impl From<CapsuleError> for Refusal {
    fn from(error: CapsuleError) -> Self {
        match error {
            CapsuleError::Run(RunError::NoSlot(limit)) => Refusal::with_message(
                FailureCode::CapacityExceeded,
                format!("interpreter subprocess capacity exceeded: at most {limit} run at once; retry later"),
            ),
            CapsuleError::Run(RunError::Timeout(_)) => Refusal::of(FailureCode::Deadline),
            error @ CapsuleError::Integrity { .. } => Refusal::because(FailureCode::Unavailable, error),
            error => Refusal::because(FailureCode::ExecutionFailed, error),
        }
    }
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

/// A session denial as a failure.
pub fn denial(denial: SessionDenial) -> Failure {
    Failure::of(FailureCode::from(denial))
}

/// A failed session resolution: a denial, or (never a denial) a store error.
pub fn resolve_failure(error: ResolveError, what: &str) -> Failure {
    match error {
        ResolveError::Denied(d) => denial(d),
        ResolveError::Store(error) => {
            tracing::error!(%error, "{what}: credential lookup failed");
            Failure::of(FailureCode::Internal)
        }
    }
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
    use world_model::HashRef;

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
    fn session_denials_keep_their_codes() {
        for (d, code) in [
            (SessionDenial::Absent, FailureCode::SessionAbsent),
            (SessionDenial::Malformed, FailureCode::SessionMalformed),
            (SessionDenial::Unknown, FailureCode::SessionUnknown),
            (SessionDenial::Expired, FailureCode::SessionExpired),
        ] {
            assert_eq!(denial(d).code, code);
            assert_eq!(resolve_failure(ResolveError::Denied(d), "test").code, code);
        }
    }
}
