//! Deadlines and caps (the reference's defaults).

use std::time::Duration;

/// Credential resolution.
pub const CREDENTIAL: Duration = Duration::from_secs(3);
/// Every store read of a request.
pub const READ: Duration = Duration::from_secs(10);
/// The store work of a REST commit before its durable step.
pub const REST_COMMIT: Duration = Duration::from_secs(3);
