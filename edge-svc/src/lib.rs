//! world-edge: the stateless HTTP edge of World. It terminates agent traffic — the agent card,
//! the REST `/v1` API, `POST /mcp/` and `POST /a2a/` — and forwards every read, commit and
//! admission to world-core over gRPC, forwarding the caller's `Authorization` header verbatim.
//!
//! The edge holds no state and makes no decision the core owns: it parses and validates input
//! (refs, integers, bodies) so bad requests never cost a round trip, copies the reference's
//! Go router semantics byte for byte, and renders the core's typed failures onto each wire in
//! one place ([`wire`]).

pub mod a2a;
pub mod body;
pub mod callback;
pub mod card;
pub mod cli;
mod connection;
pub mod core;
#[cfg(test)]
mod fuzzing;
pub mod json;
pub mod limits;
pub mod mcp;
pub mod metrics;
pub mod oauth;
pub mod origin;
pub mod query;
pub mod rest;
pub mod router;
pub mod server;
pub mod session;
pub mod surface;
pub mod ui;
pub mod wire;

pub use cli::{EdgeArgs, LogFormat};
pub use core::{CoreClient, CoreUrlError};
pub use limits::Limits;
pub use server::{AppState, ServeError, app, serve};
