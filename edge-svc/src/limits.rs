//! Every bound of the edge. The POST, callback and connection bounds are flags whose defaults
//! are the reference's (reference-edge §6.6, §7.1, §9), so an operator can size them and tests
//! can make them small; the deadlines of the edge's calls to a core ([`core_call`]) are derived
//! from the core's own bounds (`world_model::limits`), never restated.

use std::time::Duration;

use world_model::limits::INVOCATION;

/// What the edge waits beyond a core's own bound for a call: the hop both ways and the core's
/// scheduling. The core's typed answer then normally arrives first, and the edge's own deadline
/// fires only when a core is hung or gone.
pub const HOP: Duration = Duration::from_secs(2);

/// How long the edge waits for each kind of call to a core.
pub mod core_call {
    use std::time::Duration;

    use world_model::limits::{CREDENTIAL, READ as STORE_READ, REST_COMMIT};

    use super::HOP;

    /// Health reads nothing from the store.
    pub const HEALTH: Duration = Duration::from_secs(5);
    /// A store read: the core resolves the credential, then reads under its read bound.
    pub const READ: Duration = CREDENTIAL.saturating_add(STORE_READ).saturating_add(HOP);
    /// An admission (the cards', a request's own session check): the credential, then the
    /// registry read, which the reference bounds as a read.
    pub const ADMIT: Duration = READ;
    /// A REST commit: the credential, then the commit's store work.
    pub const COMMIT: Duration = CREDENTIAL.saturating_add(REST_COMMIT).saturating_add(HOP);
    /// An OAuth call: a few store statements, which the core does not bound itself.
    pub const OAUTH: Duration = Duration::from_secs(10);
    /// Opening a TCP connection to a core.
    pub const CONNECT: Duration = Duration::from_secs(3);
    /// How long a core that refused a connection is passed over before it is tried again.
    pub const PASS_OVER: Duration = Duration::from_secs(2);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// One POST to `/mcp/` or `/a2a/`, everything included.
    pub request_deadline: Duration,
    /// MCP host callbacks (admission, each `tools/call`) running at once on this edge.
    pub callback_slots: usize,
    /// How long one MCP host callback may run before its caller stops waiting.
    pub callback_timeout: Duration,
    /// How long an MCP host callback waits for a free slot before it is refused as capacity
    /// exceeded. The reference waits as long as the callback may run, so under the default
    /// the request deadline normally ends the wait first (`host callback timed out`).
    pub callback_slot_wait: Duration,
    /// How long a client may take to send a request's headers, counted from the moment the
    /// connection opens for its first request (whatever the protocol); then it closes.
    pub header_read_timeout: Duration,
    /// How long a connection may stay open with no request in flight after its first.
    pub idle_timeout: Duration,
    /// How long a client may take to send a request's body once its headers arrived; on
    /// `/mcp/` the POST's aggregate deadline ends it sooner.
    pub body_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_deadline: INVOCATION,
            callback_slots: 8,
            callback_timeout: INVOCATION,
            callback_slot_wait: INVOCATION,
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(120),
            body_read_timeout: Duration::from_secs(30),
        }
    }
}

/// A duration flag: `250ms`, `3s`, or a plain number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1e-3)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number.trim().parse().map_err(|_| format!("{text:?} is not a duration such as 500ms or 20s"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("{text:?} is not a duration such as 500ms or 20s"));
    }
    Duration::try_from_secs_f64(value * unit).map_err(|error| format!("{text:?}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["", "s", "-1s", "x", "1h", "inf"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
