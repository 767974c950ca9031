//! The edge's bounds on `POST /mcp/` and `POST /a2a/`. The defaults are the reference's
//! (reference-edge §6.6, §7.1, §9); each is a flag so an operator can size them and tests can
//! make them small.

use std::time::Duration;

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
            request_deadline: Duration::from_secs(20),
            callback_slots: 8,
            callback_timeout: Duration::from_secs(20),
            callback_slot_wait: Duration::from_secs(20),
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
