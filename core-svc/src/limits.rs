//! Every deadline and cap of the core, in one value (the reference's defaults); those the edge
//! sizes its own waits from are `world_model::limits`.
//!
//! An effectful call's phases share its invocation timeout `T`: the plan a tenth, the
//! handler at most half and ending three tenths before the deadline, which leaves a fifth for
//! the tail (the finish, a tenth, and the commit) and a tenth to spare. At the default 20 s
//! that is the reference's 2 s plan, 10 s handler, 4 s tail and 2 s finish.
//!
//! The defaults an operator can change are named constants, so `world-core serve`'s flags
//! show the very values [`Limits::default`] holds.

use std::time::Duration;

pub use world_model::limits::INVOCATION;
use world_model::limits::{CREDENTIAL, READ, REST_COMMIT};

/// Interpreter subprocesses that may run at once by default (`--max-subprocesses`).
pub const MAX_SUBPROCESSES: usize = 8;
/// Largest canonical input (arguments) by default, in bytes (`--max-input-bytes`).
pub const MAX_INPUT: usize = 1024 * 1024;
/// Largest transition output by default, in bytes (`--max-output-bytes`).
pub const MAX_OUTPUT: usize = 1024 * 1024;
/// What an interpreter subprocess (a capsule run, an `Ailang.*` tool) may write to stdout, and
/// to stderr, before it is killed.
pub const CAPTURED_OUTPUT: usize = 8 * 1024 * 1024;
/// How long calls in flight may take to finish once the store's file is gone.
pub const STORE_GONE_GRACE: Duration = Duration::from_secs(2);

/// The shortest invocation timeout served: below it the plan's share (a tenth) would fall
/// under the 200 ms an interpreter run can take on a busy host.
pub const MIN_INVOCATION: Duration = Duration::from_secs(2);
/// What an episode lease and an invocation claim add to the longest their call can run:
/// the cores' clocks may differ, and expiries are whole seconds.
pub const LEASE_SLACK: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// One invocation, end to end.
    pub invocation: Duration,
    /// Credential resolution.
    pub credential: Duration,
    /// Every store read of a request (admission, REST reads).
    pub read: Duration,
    /// The store work of a REST commit before its durable step.
    pub rest_commit: Duration,
    /// An effectful transition's plan phase, and its finish phase.
    pub plan_phase: Duration,
    pub finish_phase: Duration,
    /// One effect handler.
    pub handler: Duration,
    /// Everything after an effect ran (finish, composition, commit), detached from the caller.
    pub post_effect: Duration,
    /// Largest canonical input (arguments) in bytes.
    pub max_input: usize,
    /// Largest transition output in bytes.
    pub max_output: usize,
    /// Interpreter subprocesses that may run at once; beyond that calls are refused.
    pub max_subprocesses: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            invocation: INVOCATION,
            credential: CREDENTIAL,
            read: READ,
            rest_commit: REST_COMMIT,
            plan_phase: Duration::from_secs(2),
            finish_phase: Duration::from_secs(2),
            handler: Duration::from_secs(10),
            post_effect: Duration::from_secs(4),
            max_input: MAX_INPUT,
            max_output: MAX_OUTPUT,
            max_subprocesses: MAX_SUBPROCESSES,
        }
    }
}

impl Limits {
    /// These limits with an invocation timeout of `timeout` and the effect phases scaled to
    /// it, or why it cannot serve effectful calls.
    pub fn with_invocation(self, timeout: Duration) -> Result<Self, String> {
        if timeout < MIN_INVOCATION {
            return Err(format!(
                "an invocation timeout of {timeout:?} is too short: at least {MIN_INVOCATION:?}, because an effectful \
                 call's plan gets a tenth of it and below that its interpreter run could not finish on a busy host"
            ));
        }
        Ok(Self {
            invocation: timeout,
            plan_phase: timeout / 10,
            finish_phase: timeout / 10,
            handler: timeout / 2,
            post_effect: timeout / 5,
            ..self
        })
    }

    /// What a handler leaves of the call: the tail (finish and commit) and a tenth to spare,
    /// so the call still ends by its deadline.
    pub fn after_handler(&self) -> Duration {
        self.post_effect + self.invocation / 10
    }

    /// The bound of a tool the handler runs, inside the handler's own so a slow tool ends as
    /// a clean timeout the output reports rather than an indeterminate effect.
    pub fn tool(&self) -> Duration {
        self.handler * 4 / 5
    }

    /// How long an episode lease, and an invocation claim, hold without their owner: longer
    /// than any call can run (its deadline, then at most the detached tail), so only a dead
    /// owner's ever expires. Whole seconds, rounded up.
    pub fn episode_lease(&self) -> Duration {
        let lease = self.invocation + self.post_effect + LEASE_SLACK;
        Duration::from_secs(lease.as_secs() + u64::from(lease.subsec_nanos() > 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_timeout_keeps_the_reference_phases() {
        let scaled = Limits::default().with_invocation(Duration::from_secs(20)).unwrap();
        let reference = Limits::default();
        assert_eq!(
            (scaled.plan_phase, scaled.finish_phase, scaled.handler, scaled.post_effect),
            (reference.plan_phase, reference.finish_phase, reference.handler, reference.post_effect)
        );
        assert_eq!(reference.after_handler(), Duration::from_secs(6));
        assert_eq!(reference.tool(), Duration::from_secs(8));
        assert_eq!(reference.episode_lease(), Duration::from_secs(34));
    }

    #[test]
    fn every_accepted_timeout_leaves_each_phase_its_share() {
        for seconds in [2, 3, 5, 6, 7, 60, 3600] {
            let limits = Limits::default().with_invocation(Duration::from_secs(seconds)).unwrap();
            let t = limits.invocation;
            // A handler that starts right after the plan still has time, and the tail fits
            // in what it leaves.
            let handler_room = t - limits.plan_phase - limits.after_handler();
            assert!(handler_room >= limits.handler.min(t / 2) && !handler_room.is_zero(), "{seconds}s");
            assert!(limits.finish_phase < limits.post_effect && limits.post_effect < limits.after_handler());
            assert!(limits.tool() < limits.handler && !limits.tool().is_zero(), "{seconds}s");
            assert!(limits.episode_lease() > t + limits.post_effect, "{seconds}s");
        }
        assert_eq!(Limits::default().with_invocation(Duration::from_secs(2)).unwrap().episode_lease().as_secs(), 13);
    }

    #[test]
    fn timeouts_too_short_for_an_effect_are_refused_with_the_reason() {
        for seconds in [0, 1] {
            let refused = Limits::default().with_invocation(Duration::from_secs(seconds)).unwrap_err();
            assert!(refused.contains("too short: at least 2s"), "{refused}");
        }
    }
}
