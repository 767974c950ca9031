//! The failure table: every failure that crosses a process boundary is one `FailureCode`, and
//! each wire's rendering of it (A2A JSON-RPC, REST envelope, MCP host-callback envelope) is a
//! lookup here, so the wire texts live in exactly one place.

use std::fmt;

use crate::credential::SessionDenial;
use crate::hashref::HashRef;

/// A2A envelope errors that are not failures of a call (bad JSON-RPC shape, unknown method).
pub const A2A_INVALID_REQUEST: (i64, &str) = (-32600, "invalid JSON-RPC request");
pub const A2A_METHOD_NOT_FOUND: (i64, &str) = (-32601, "method not found");
/// A2A 1.0's own errors (its JSON-RPC binding, `TaskNotFoundError` and
/// `TaskNotCancelableError`) for `GetTask` / `CancelTask`, which the seed does not have. A task
/// completes when it commits, so none is ever cancelable.
pub const A2A_TASK_NOT_FOUND: (i64, &str) = (-32001, "task not found");
pub const A2A_TASK_NOT_CANCELABLE: (i64, &str) = (-32002, "task cannot be canceled: it completed when it committed");
/// A2A 1.0's `VersionNotSupportedError`; the message names the version the request carried.
pub const A2A_VERSION_NOT_SUPPORTED: i64 = -32009;

/// The `VersionNotSupportedError` message for a request whose `A2A-Version` (`None` when the
/// header is absent, which A2A reads as 0.3) is not 1.0.
pub fn a2a_version_not_supported(version: Option<&str>) -> String {
    match version {
        None => "A2A-Version is absent, which means 0.3; this method is A2A 1.0: send A2A-Version: 1.0".to_owned(),
        Some(version) => format!("A2A-Version {version:?} is not supported: send A2A-Version: 1.0"),
    }
}
/// The MCP host-callback envelope code (reference-edge §6.6); always -32603.
pub const MCP_HOST_CALLBACK_CODE: i64 = -32603;
/// The MCP envelope message when the client went away mid-call. The edge detects that itself
/// (it is the edge's request that was cancelled), so it is not a `FailureCode`.
pub const MCP_HOST_CANCELED: &str = "host callback canceled";

const EFFECTS_UNRECORDED_PREFIX: &str =
    "effects were requested but the invocation was not confirmed committed; effect records:";
const NOT_AVAILABLE: &str = "transition invocation is not available in this daemon";

/// One row of the failure table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureCode {
    SessionAbsent,
    SessionMalformed,
    SessionUnknown,
    SessionExpired,
    /// R1 or a bad request shape: task id grammar, arguments, part shape, `transition_fn`.
    InvalidParams,
    /// Unknown, invisible or denied transition (all answered identically).
    NotAuthorized,
    /// The `transition_fn` pin does not match the registered transition.
    ProposalMismatch,
    /// The task id names a different call, or the same call still in flight.
    TaskIdUsed,
    /// An effect ran and was recorded, then a later step failed; `effect_records` lists them.
    EffectsUnrecorded,
    /// R8: a declared effect has no handler here.
    EffectsUnsupported,
    /// No genesis commit yet.
    WorldAbsent,
    /// The transition does not implement the calling convention.
    Incompatible,
    ExecutionFailed,
    OutputNotObject,
    /// The invocation's own deadline ended.
    Deadline,
    /// The commit outcome is unknown; resending the same task id resolves it.
    Unconfirmed,
    /// The task id is known and definitely did not commit; it is spent.
    NotCommitted,
    /// A pure transition lost a head race.
    HeadMoved,
    /// No coordinator, a registry read failure, an integrity failure, or any unclassified
    /// cause (logged by the core, never shown).
    Unavailable,
    BadRequest,
    NotFound,
    /// A REST commit named a stale `observedHead`; `observed_head`/`selected_head` say which.
    HeadConflict,
    PayloadTooLarge,
    /// A store failure; the cause is logged, never shown.
    Internal,
    /// A bounded read, credential lookup or commit ended before its durable step.
    Timeout,
    /// A REST commit's budget ended after its durable step began.
    CommitUncertain,
    /// The interpreter subprocess limit (8) is reached; refused, not queued.
    CapacityExceeded,
}

/// Who must act on a failure, which sets the level of the line the core logs for it: ERROR and
/// WARN are for what an operator must act on, never for a request the caller can correct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Concern {
    /// A refused request, or a transition's own outcome: the caller acts on the answer (INFO).
    Caller,
    /// An outcome an operator should look into: a commit left uncertain, no genesis yet, a
    /// slow or lost store (WARN).
    Operator,
    /// The service itself failed: the store, the registry, an interpreter that no longer
    /// matches its pin (ERROR).
    Service,
}

impl FailureCode {
    /// Who must act on this failure.
    pub fn concern(&self) -> Concern {
        match self {
            FailureCode::SessionAbsent
            | FailureCode::SessionMalformed
            | FailureCode::SessionUnknown
            | FailureCode::SessionExpired
            | FailureCode::InvalidParams
            | FailureCode::NotAuthorized
            | FailureCode::ProposalMismatch
            | FailureCode::TaskIdUsed
            | FailureCode::EffectsUnsupported
            | FailureCode::Incompatible
            | FailureCode::ExecutionFailed
            | FailureCode::OutputNotObject
            | FailureCode::Deadline
            | FailureCode::HeadMoved
            | FailureCode::BadRequest
            | FailureCode::NotFound
            | FailureCode::HeadConflict
            | FailureCode::PayloadTooLarge
            | FailureCode::CapacityExceeded => Concern::Caller,
            FailureCode::EffectsUnrecorded
            | FailureCode::WorldAbsent
            | FailureCode::Unconfirmed
            | FailureCode::NotCommitted
            | FailureCode::Timeout
            | FailureCode::CommitUncertain => Concern::Operator,
            FailureCode::Unavailable | FailureCode::Internal => Concern::Service,
        }
    }
}

impl FailureCode {
    pub const ALL: [FailureCode; 27] = [
        FailureCode::SessionAbsent,
        FailureCode::SessionMalformed,
        FailureCode::SessionUnknown,
        FailureCode::SessionExpired,
        FailureCode::InvalidParams,
        FailureCode::NotAuthorized,
        FailureCode::ProposalMismatch,
        FailureCode::TaskIdUsed,
        FailureCode::EffectsUnrecorded,
        FailureCode::EffectsUnsupported,
        FailureCode::WorldAbsent,
        FailureCode::Incompatible,
        FailureCode::ExecutionFailed,
        FailureCode::OutputNotObject,
        FailureCode::Deadline,
        FailureCode::Unconfirmed,
        FailureCode::NotCommitted,
        FailureCode::HeadMoved,
        FailureCode::Unavailable,
        FailureCode::BadRequest,
        FailureCode::NotFound,
        FailureCode::HeadConflict,
        FailureCode::PayloadTooLarge,
        FailureCode::Internal,
        FailureCode::Timeout,
        FailureCode::CommitUncertain,
        FailureCode::CapacityExceeded,
    ];

    /// Stable snake_case code carried in the gRPC `Failure.code` field.
    pub fn as_str(&self) -> &'static str {
        match self {
            FailureCode::SessionAbsent => "session_absent",
            FailureCode::SessionMalformed => "session_malformed",
            FailureCode::SessionUnknown => "session_unknown",
            FailureCode::SessionExpired => "session_expired",
            FailureCode::InvalidParams => "invalid_params",
            FailureCode::NotAuthorized => "not_authorized",
            FailureCode::ProposalMismatch => "proposal_mismatch",
            FailureCode::TaskIdUsed => "task_id_used",
            FailureCode::EffectsUnrecorded => "effects_unrecorded",
            FailureCode::EffectsUnsupported => "effects_unsupported",
            FailureCode::WorldAbsent => "world_absent",
            FailureCode::Incompatible => "incompatible",
            FailureCode::ExecutionFailed => "execution_failed",
            FailureCode::OutputNotObject => "output_not_object",
            FailureCode::Deadline => "deadline",
            FailureCode::Unconfirmed => "unconfirmed",
            FailureCode::NotCommitted => "not_committed",
            FailureCode::HeadMoved => "head_moved",
            FailureCode::Unavailable => "unavailable",
            FailureCode::BadRequest => "bad_request",
            FailureCode::NotFound => "not_found",
            FailureCode::HeadConflict => "head_conflict",
            FailureCode::PayloadTooLarge => "payload_too_large",
            FailureCode::Internal => "internal",
            FailureCode::Timeout => "timeout",
            FailureCode::CommitUncertain => "commit_uncertain",
            FailureCode::CapacityExceeded => "capacity_exceeded",
        }
    }

    pub fn parse(code: &str) -> Option<FailureCode> {
        FailureCode::ALL.into_iter().find(|c| c.as_str() == code)
    }

    /// The session denial this code stands for, if it is one.
    pub fn session_denial(&self) -> Option<SessionDenial> {
        match self {
            FailureCode::SessionAbsent => Some(SessionDenial::Absent),
            FailureCode::SessionMalformed => Some(SessionDenial::Malformed),
            FailureCode::SessionUnknown => Some(SessionDenial::Unknown),
            FailureCode::SessionExpired => Some(SessionDenial::Expired),
            _ => None,
        }
    }

    /// The A2A JSON-RPC error (inside HTTP 200): code and the seed's exact message. For
    /// `EffectsUnrecorded` this is the message's fixed prefix; use [`Failure::a2a_message`] to
    /// get the record list appended.
    ///
    /// REST-side codes that reach A2A (a credential-lookup `Timeout`, an `Internal` store
    /// failure, `CapacityExceeded`, …) fall in the reference's "anything else" row: -32603
    /// "transition invocation is not available in this daemon", with the cause logged.
    pub fn a2a(&self) -> (i64, &'static str) {
        match self {
            FailureCode::SessionAbsent
            | FailureCode::SessionMalformed
            | FailureCode::SessionUnknown
            | FailureCode::SessionExpired => {
                let denial = self.session_denial().unwrap_or(SessionDenial::Unknown);
                (denial.a2a_code(), denial.wire_message())
            }
            FailureCode::InvalidParams => (-32602, "invalid params"),
            FailureCode::NotAuthorized => (-32602, "not authorized"),
            FailureCode::ProposalMismatch => (-32602, "proposal does not match the registered transition"),
            FailureCode::TaskIdUsed => (-32602, "task id already used in this session"),
            FailureCode::EffectsUnrecorded => (-32603, EFFECTS_UNRECORDED_PREFIX),
            FailureCode::EffectsUnsupported => (-32603, "transition declares an effect this daemon has no handler for"),
            FailureCode::WorldAbsent => (-32603, "no world is selected; commit a genesis world first"),
            FailureCode::Incompatible => (-32603, "transition does not implement the invocation calling convention"),
            FailureCode::ExecutionFailed => (-32603, "transition execution failed"),
            FailureCode::OutputNotObject => (-32603, "transition output is not a JSON object"),
            FailureCode::Deadline => (-32603, "invocation exceeded its deadline"),
            FailureCode::Unconfirmed => (-32603, "invocation outcome is not confirmed; resend the same task id"),
            FailureCode::NotCommitted => (-32603, "invocation was not committed; send a new task id"),
            FailureCode::HeadMoved => (-32603, "world head moved during invocation; not committed; send a new task id"),
            FailureCode::Unavailable
            | FailureCode::BadRequest
            | FailureCode::NotFound
            | FailureCode::HeadConflict
            | FailureCode::PayloadTooLarge
            | FailureCode::Internal
            | FailureCode::Timeout
            | FailureCode::CommitUncertain
            | FailureCode::CapacityExceeded => (-32603, NOT_AVAILABLE),
        }
    }

    /// The A2A error of a task read (`GetTask`, `CancelTask`): a task id that never committed
    /// in the caller's episode is A2A 1.0's task-not-found; every other failure is the seed's row.
    pub fn a2a_task_read(&self) -> (i64, &'static str) {
        match self {
            FailureCode::NotFound => A2A_TASK_NOT_FOUND,
            _ => self.a2a(),
        }
    }

    /// An A2A deadline answer also sets `Connection: close` (reference-edge §5.3).
    pub fn a2a_closes_connection(&self) -> bool {
        matches!(self, FailureCode::Deadline)
    }

    /// HTTP status and REST envelope class, the rows in status order.
    ///
    /// The reference classes are used where the reference has the row (reference-edge §3.1,
    /// §2.2). The reference has no REST invocation route, so invocation codes get a class of
    /// their own name where the caller can act on it (400 BadRequest for bad params, 403
    /// NotAuthorized, 409 for task-id / proposal / head conflicts, 503 CommitUncertain when the
    /// outcome is unknown, 503 Timeout for the deadline) and 503 Unavailable for everything the
    /// caller can only retry later.
    pub fn rest(&self) -> (u16, &'static str) {
        match self {
            FailureCode::BadRequest | FailureCode::InvalidParams => (400, "BadRequest"),
            FailureCode::SessionAbsent
            | FailureCode::SessionMalformed
            | FailureCode::SessionUnknown
            | FailureCode::SessionExpired => {
                let denial = self.session_denial().unwrap_or(SessionDenial::Unknown);
                let (status, class, _) = denial.rest();
                (status, class)
            }
            FailureCode::NotAuthorized => (403, "NotAuthorized"),
            FailureCode::NotFound => (404, "NotFound"),
            FailureCode::HeadConflict | FailureCode::HeadMoved => (409, "HeadConflict"),
            FailureCode::ProposalMismatch => (409, "ProposalMismatch"),
            FailureCode::TaskIdUsed => (409, "TaskIdUsed"),
            FailureCode::PayloadTooLarge => (413, "PayloadTooLarge"),
            FailureCode::Internal => (500, "Internal"),
            FailureCode::Timeout | FailureCode::Deadline => (503, "Timeout"),
            FailureCode::CommitUncertain | FailureCode::Unconfirmed | FailureCode::EffectsUnrecorded => {
                (503, "CommitUncertain")
            }
            FailureCode::EffectsUnsupported
            | FailureCode::WorldAbsent
            | FailureCode::Incompatible
            | FailureCode::ExecutionFailed
            | FailureCode::OutputNotObject
            | FailureCode::NotCommitted
            | FailureCode::Unavailable
            | FailureCode::CapacityExceeded => (503, "Unavailable"),
        }
    }

    /// The whole-POST MCP envelope message (code -32603) when a host callback fails; the cause
    /// never reaches the MCP wire (reference-edge §6.6). A credential lookup that timed out is a
    /// deadline too (reference-edge §2.2).
    pub fn mcp_host_message(&self) -> &'static str {
        match self {
            FailureCode::Deadline | FailureCode::Timeout => "host callback timed out",
            FailureCode::CapacityExceeded => "host callback capacity exceeded",
            _ => "host callback failed",
        }
    }

    /// The message `Failure::of` uses: the seed's A2A / MCP text for rows the seed lists, the
    /// reference's REST text for REST-side rows.
    pub fn default_message(&self) -> &'static str {
        match self {
            FailureCode::BadRequest => "the request is malformed",
            FailureCode::NotFound => "not found",
            FailureCode::HeadConflict => "conflict: the observed head is not the selected head",
            FailureCode::PayloadTooLarge => "commit body exceeds 8388608 bytes",
            FailureCode::Internal => "internal store failure",
            FailureCode::Timeout => "read deadline (10s) exceeded",
            FailureCode::CommitUncertain => {
                "commit outcome unknown: reconcile with the log or the receipt before any resend"
            }
            FailureCode::CapacityExceeded => "interpreter subprocess capacity exceeded; retry later",
            _ => self.a2a().1,
        }
    }
}

impl fmt::Display for FailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<SessionDenial> for FailureCode {
    fn from(denial: SessionDenial) -> FailureCode {
        match denial {
            SessionDenial::Absent => FailureCode::SessionAbsent,
            SessionDenial::Malformed => FailureCode::SessionMalformed,
            SessionDenial::Unknown => FailureCode::SessionUnknown,
            SessionDenial::Expired => FailureCode::SessionExpired,
        }
    }
}

/// A typed failure as the core returns it. `message` is caller-safe text (never an internal
/// cause); the record and head fields are filled only for the codes that carry them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub code: FailureCode,
    pub message: String,
    /// `EffectsUnrecorded`: the effect records that are durable although nothing committed.
    pub effect_records: Vec<HashRef>,
    /// `HeadConflict`: the head the caller observed (`None` = genesis attempt).
    pub observed_head: Option<HashRef>,
    /// `HeadConflict`: the head actually selected.
    pub selected_head: Option<HashRef>,
}

impl Failure {
    pub fn new(code: FailureCode, message: impl Into<String>) -> Failure {
        Failure { code, message: message.into(), effect_records: Vec::new(), observed_head: None, selected_head: None }
    }

    pub fn of(code: FailureCode) -> Failure {
        Failure::new(code, code.default_message())
    }

    /// `EffectsUnrecorded` with its records; the message lists them as A2A does.
    pub fn effects_unrecorded(effect_records: Vec<HashRef>) -> Failure {
        let mut failure = Failure::of(FailureCode::EffectsUnrecorded);
        failure.effect_records = effect_records;
        failure.message = failure.a2a_message();
        failure
    }

    /// `HeadConflict` with the reference's REST message `conflict: observed <o> selected <s>`
    /// (an absent observed head leaves two spaces, as the reference prints the zero ref).
    pub fn head_conflict(observed: Option<HashRef>, selected: Option<HashRef>) -> Failure {
        let message = format!(
            "conflict: observed {} selected {}",
            HashRef::optional_text(observed.as_ref()),
            HashRef::optional_text(selected.as_ref())
        );
        Failure { observed_head: observed, selected_head: selected, ..Failure::new(FailureCode::HeadConflict, message) }
    }

    /// The A2A error message; for `EffectsUnrecorded` the fixed text followed by ` <ref>` per
    /// record, or ` none`.
    pub fn a2a_message(&self) -> String {
        let (_, message) = self.code.a2a();
        if self.code != FailureCode::EffectsUnrecorded {
            return message.to_owned();
        }
        let mut text = message.to_owned();
        if self.effect_records.is_empty() {
            text.push_str(" none");
        }
        for record in &self.effect_records {
            text.push(' ');
            text.push_str(&record.to_string());
        }
        text
    }
}

impl From<SessionDenial> for Failure {
    fn from(denial: SessionDenial) -> Failure {
        Failure::of(denial.into())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

#[cfg(test)]
mod tests {
    #[test]
    fn only_failures_of_the_service_or_its_store_concern_an_operator() {
        let operator = [
            FailureCode::EffectsUnrecorded,
            FailureCode::WorldAbsent,
            FailureCode::Unconfirmed,
            FailureCode::NotCommitted,
            FailureCode::Timeout,
            FailureCode::CommitUncertain,
        ];
        let service = [FailureCode::Unavailable, FailureCode::Internal];
        for code in FailureCode::ALL {
            let want = if service.contains(&code) {
                Concern::Service
            } else if operator.contains(&code) {
                Concern::Operator
            } else {
                Concern::Caller
            };
            assert_eq!(code.concern(), want, "{code:?}");
        }
    }

    use super::*;

    /// The seed's A2A error table, row for row.
    #[test]
    fn a2a_table_matches_the_seed() {
        use FailureCode::*;
        let table: &[(FailureCode, i64, &str)] = &[
            (SessionAbsent, -32001, "session credential is absent: send Authorization: Bearer <session-credential>"),
            (SessionMalformed, -32600, "malformed Authorization header: expected Bearer <64-hex-credential>"),
            (SessionUnknown, -32001, "unknown session credential"),
            (SessionExpired, -32001, "session credential has expired"),
            (InvalidParams, -32602, "invalid params"),
            (NotAuthorized, -32602, "not authorized"),
            (ProposalMismatch, -32602, "proposal does not match the registered transition"),
            (TaskIdUsed, -32602, "task id already used in this session"),
            (
                EffectsUnrecorded,
                -32603,
                "effects were requested but the invocation was not confirmed committed; effect records:",
            ),
            (EffectsUnsupported, -32603, "transition declares an effect this daemon has no handler for"),
            (WorldAbsent, -32603, "no world is selected; commit a genesis world first"),
            (Incompatible, -32603, "transition does not implement the invocation calling convention"),
            (ExecutionFailed, -32603, "transition execution failed"),
            (OutputNotObject, -32603, "transition output is not a JSON object"),
            (Deadline, -32603, "invocation exceeded its deadline"),
            (Unconfirmed, -32603, "invocation outcome is not confirmed; resend the same task id"),
            (NotCommitted, -32603, "invocation was not committed; send a new task id"),
            (HeadMoved, -32603, "world head moved during invocation; not committed; send a new task id"),
            (Unavailable, -32603, "transition invocation is not available in this daemon"),
            (BadRequest, -32603, "transition invocation is not available in this daemon"),
            (NotFound, -32603, "transition invocation is not available in this daemon"),
            (HeadConflict, -32603, "transition invocation is not available in this daemon"),
            (PayloadTooLarge, -32603, "transition invocation is not available in this daemon"),
            (Internal, -32603, "transition invocation is not available in this daemon"),
            (Timeout, -32603, "transition invocation is not available in this daemon"),
            (CommitUncertain, -32603, "transition invocation is not available in this daemon"),
            (CapacityExceeded, -32603, "transition invocation is not available in this daemon"),
        ];
        assert_eq!(table.len(), FailureCode::ALL.len());
        for (code, number, message) in table {
            assert_eq!(code.a2a(), (*number, *message), "{code:?}");
        }
        assert_eq!(A2A_INVALID_REQUEST, (-32600, "invalid JSON-RPC request"));
        assert_eq!(A2A_METHOD_NOT_FOUND, (-32601, "method not found"));
        for code in FailureCode::ALL {
            assert_eq!(code.a2a_closes_connection(), code == Deadline, "{code:?}");
        }
    }

    /// A2A 1.0's task reads: only a task that never committed is "task not found"; every other
    /// failure keeps the seed's row, so session denials read the same on every method.
    #[test]
    fn a2a_task_reads_add_only_task_not_found() {
        for code in FailureCode::ALL {
            let want = if code == FailureCode::NotFound { (-32001, "task not found") } else { code.a2a() };
            assert_eq!(code.a2a_task_read(), want, "{code:?}");
        }
        assert_eq!(A2A_TASK_NOT_CANCELABLE.0, -32002);
        assert_eq!(A2A_VERSION_NOT_SUPPORTED, -32009);
        assert_eq!(
            a2a_version_not_supported(Some("0.3")),
            r#"A2A-Version "0.3" is not supported: send A2A-Version: 1.0"#
        );
        assert_eq!(
            a2a_version_not_supported(None),
            "A2A-Version is absent, which means 0.3; this method is A2A 1.0: send A2A-Version: 1.0"
        );
    }

    #[test]
    fn effects_unrecorded_lists_its_records() {
        let a = HashRef::of(b"a");
        let b = HashRef::of(b"b");
        let prefix = "effects were requested but the invocation was not confirmed committed; effect records:";
        let table = [
            (vec![], format!("{prefix} none")),
            (vec![a], format!("{prefix} {a}")),
            (vec![a, b], format!("{prefix} {a} {b}")),
        ];
        for (records, want) in table {
            let failure = Failure::effects_unrecorded(records.clone());
            assert_eq!(failure.a2a_message(), want);
            assert_eq!(failure.message, want);
            assert_eq!(failure.effect_records, records);
            assert_eq!(failure.code.a2a().0, -32603);
        }
        // Records on another code are not rendered.
        let mut other = Failure::of(FailureCode::ExecutionFailed);
        other.effect_records = vec![a];
        assert_eq!(other.a2a_message(), "transition execution failed");
    }

    #[test]
    fn rest_table() {
        use FailureCode::*;
        let table: &[(FailureCode, u16, &str)] = &[
            (SessionAbsent, 401, "SessionAbsent"),
            (SessionMalformed, 400, "InvalidSession"),
            (SessionUnknown, 401, "SessionUnknown"),
            (SessionExpired, 401, "SessionExpired"),
            (InvalidParams, 400, "BadRequest"),
            (NotAuthorized, 403, "NotAuthorized"),
            (ProposalMismatch, 409, "ProposalMismatch"),
            (TaskIdUsed, 409, "TaskIdUsed"),
            (EffectsUnrecorded, 503, "CommitUncertain"),
            (EffectsUnsupported, 503, "Unavailable"),
            (WorldAbsent, 503, "Unavailable"),
            (Incompatible, 503, "Unavailable"),
            (ExecutionFailed, 503, "Unavailable"),
            (OutputNotObject, 503, "Unavailable"),
            (Deadline, 503, "Timeout"),
            (Unconfirmed, 503, "CommitUncertain"),
            (NotCommitted, 503, "Unavailable"),
            (HeadMoved, 409, "HeadConflict"),
            (Unavailable, 503, "Unavailable"),
            (BadRequest, 400, "BadRequest"),
            (NotFound, 404, "NotFound"),
            (HeadConflict, 409, "HeadConflict"),
            (PayloadTooLarge, 413, "PayloadTooLarge"),
            (Internal, 500, "Internal"),
            (Timeout, 503, "Timeout"),
            (CommitUncertain, 503, "CommitUncertain"),
            (CapacityExceeded, 503, "Unavailable"),
        ];
        assert_eq!(table.len(), FailureCode::ALL.len());
        for (code, status, class) in table {
            assert_eq!(code.rest(), (*status, *class), "{code:?}");
        }
    }

    #[test]
    fn mcp_host_messages() {
        for code in FailureCode::ALL {
            let want = match code {
                FailureCode::Deadline | FailureCode::Timeout => "host callback timed out",
                FailureCode::CapacityExceeded => "host callback capacity exceeded",
                _ => "host callback failed",
            };
            assert_eq!(code.mcp_host_message(), want, "{code:?}");
        }
        assert_eq!(MCP_HOST_CANCELED, "host callback canceled");
        assert_eq!(MCP_HOST_CALLBACK_CODE, -32603);
    }

    #[test]
    fn codes_are_stable_and_parse_back() {
        let mut seen = std::collections::HashSet::new();
        for code in FailureCode::ALL {
            let text = code.as_str();
            assert!(seen.insert(text), "duplicate code {text}");
            assert!(text.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{text}");
            assert_eq!(FailureCode::parse(text), Some(code));
            assert_eq!(code.to_string(), text);
        }
        assert_eq!(FailureCode::parse("TaskIdUsed"), None);
        assert_eq!(FailureCode::TaskIdUsed.as_str(), "task_id_used");
        assert_eq!(FailureCode::OutputNotObject.as_str(), "output_not_object");
    }

    #[test]
    fn session_denials_map_both_ways() {
        for denial in SessionDenial::ALL {
            let code = FailureCode::from(denial);
            assert_eq!(code.session_denial(), Some(denial));
            assert_eq!(code.as_str(), denial.code());
            assert_eq!(code.a2a(), (denial.a2a_code(), denial.wire_message()));
            let (status, class, _) = denial.rest();
            assert_eq!(code.rest(), (status, class));
            assert_eq!(Failure::from(denial).message, denial.wire_message());
        }
        assert_eq!(FailureCode::Internal.session_denial(), None);
    }

    #[test]
    fn constructors_and_display() {
        let failure = Failure::of(FailureCode::WorldAbsent);
        assert_eq!(failure.message, "no world is selected; commit a genesis world first");
        assert_eq!(failure.to_string(), failure.message);
        assert!(failure.effect_records.is_empty() && failure.observed_head.is_none());
        assert_eq!(Failure::of(FailureCode::Internal).message, "internal store failure");
        let custom = Failure::new(FailureCode::BadRequest, "limit: not an integer");
        assert_eq!(custom.to_string(), "limit: not an integer");
        for code in FailureCode::ALL {
            assert!(!code.default_message().is_empty(), "{code:?}");
        }

        let selected = HashRef::of(b"s");
        let observed = HashRef::of(b"o");
        let conflict = Failure::head_conflict(Some(observed), Some(selected));
        assert_eq!(conflict.message, format!("conflict: observed {observed} selected {selected}"));
        assert_eq!(conflict.observed_head, Some(observed));
        assert_eq!(conflict.selected_head, Some(selected));
        let genesis = Failure::head_conflict(None, Some(selected));
        assert_eq!(genesis.message, format!("conflict: observed  selected {selected}"));
        let boxed: Box<dyn std::error::Error> = Box::new(genesis);
        assert!(boxed.to_string().starts_with("conflict: observed  selected"));
    }
}
