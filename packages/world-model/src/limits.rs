//! The bounds both sides of the gRPC hop need (the reference's defaults, reference-edge §9): the
//! core enforces each on its own work, and the edge sizes how long it waits for the core's answer
//! from them, so neither side restates the other's numbers.

use std::time::Duration;

/// One invocation, end to end; also the aggregate deadline of one POST to `/mcp/` or `/a2a/`
/// and of each MCP host callback.
pub const INVOCATION: Duration = Duration::from_secs(20);
/// Resolving a credential to its session, at the start of every call that carries one.
pub const CREDENTIAL: Duration = Duration::from_secs(3);
/// Every store read of a request (admission, REST reads).
pub const READ: Duration = Duration::from_secs(10);
/// The store work of a REST commit before its durable step.
pub const REST_COMMIT: Duration = Duration::from_secs(3);
