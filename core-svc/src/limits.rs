//! Every deadline and cap of the core, in one value (the reference's defaults).

use std::time::Duration;

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
    /// A running claim older than this belongs to a dead owner.
    pub stale_claim: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            invocation: Duration::from_secs(20),
            credential: Duration::from_secs(3),
            read: Duration::from_secs(10),
            rest_commit: Duration::from_secs(3),
            plan_phase: Duration::from_secs(2),
            finish_phase: Duration::from_secs(2),
            handler: Duration::from_secs(10),
            post_effect: Duration::from_secs(4),
            max_input: 1024 * 1024,
            max_output: 1024 * 1024,
            max_subprocesses: 8,
            stale_claim: Duration::from_secs(120),
        }
    }
}

impl Limits {
    /// How long an episode lease holds without its owner: longer than any effectful call
    /// can run, so only a dead owner's lease ever expires.
    pub fn episode_lease(&self) -> Duration {
        self.invocation + self.post_effect + Duration::from_secs(10)
    }
}
