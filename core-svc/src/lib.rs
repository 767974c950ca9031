//! world-core: the World core service. It holds the only store (SQLite or PostgreSQL) and
//! serves it to the edges over the world.v1 gRPC API ([`grpc`]); the `world-core` binary also
//! carries the operator verbs (`up`, `session`, `genesis`, `why`).
//!
//! What it does, and where:
//!
//! * **Admission** ([`Core::admit`], `grpc/admission.rs`): a caller's session resolved fresh
//!   from the store ([`session`]) and the transition surface its grants open (`surface.rs`,
//!   read through [`registry`]).
//! * **Invocation** ([`invoke`]): validate, claim, reconcile, bind, verify, execute in the
//!   pinned interpreter's capsule ([`capsule`]; runs forked from the interpreter's
//!   [`fork_server`], or spawned by [`subprocess`]), commit. Every refusal is
//!   classified in `invoke/refusal.rs`.
//! * **Effects** ([`effects`]): the broker's grant law and durable intent, the confined
//!   handlers, and recovery of intents a previous run left pending.
//! * **The commit** ([`store`], `store/commit.rs`): compare-and-append, group-committed; the one
//!   mutation of world state.
//! * **Reads** (`store/reads.rs`): who reads what — a session's own episode, or everything.
//! * **OAuth sign-in** ([`oauth`]): clients, approvals and the token endpoint, minting session
//!   credentials.
//! * **Liveness** (`store/liveness.rs`): which cores are alive, so a dead core's claims end.
//!
//! The public face is what the binaries, the publish CLI and the tests need; the rest is
//! `pub(crate)`.

pub mod archive;
pub mod attended;
pub(crate) mod calls;
pub mod capsule;
pub mod effects;
pub(crate) mod fault;
pub mod fork_server;
#[cfg(test)]
mod fuzzing;
pub mod genesis;
pub mod grpc;
pub mod invoke;
pub mod limits;
pub(crate) mod metrics;
pub mod oauth;
pub mod publish;
pub mod registry;
pub mod scratch;
pub mod session;
pub mod store;
pub mod subprocess;
pub(crate) mod surface;

pub use limits::Limits;
pub use store::{Store, StoreError};

use world_model::Failure;
use world_proto::v1 as pb;

use session::SessionBinding;

/// The version every World binary reports.
pub const DAEMON_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What the serving core knows and shares with every request.
pub struct Core {
    pub store: Store,
    pub limits: limits::Limits,
    /// The archived interpreter, when serving with one (else no coordinator).
    pub interpreter: Option<archive::Interpreter>,
    pub registry: std::sync::Arc<registry::RegistryReader>,
    /// Present only when serving with an interpreter.
    pub coordinator: Option<std::sync::Arc<invoke::Coordinator>>,
    pub metrics: std::sync::Arc<metrics::Metrics>,
    pub surfaces: surface::Surfaces,
    /// Declared by the store watch when the store's file is removed or replaced.
    pub store_gone: store::StoreGone,
}

impl Core {
    /// A core without a coordinator: invocations answer "not available".
    pub fn new(store: Store, limits: limits::Limits) -> Self {
        Self {
            store,
            limits,
            interpreter: None,
            registry: Default::default(),
            coordinator: None,
            metrics: Default::default(),
            surfaces: Default::default(),
            store_gone: Default::default(),
        }
    }

    /// A core that invokes transitions with the verified, pinned interpreter.
    /// With `effects`, it also serves effectful transitions.
    pub fn with_coordinator(
        store: Store,
        capsule: capsule::Capsule,
        limits: limits::Limits,
        effects: Option<std::sync::Arc<effects::handlers::Effects>>,
    ) -> Self {
        let archived = capsule.interpreter.interpreter.clone();
        let metrics = std::sync::Arc::<metrics::Metrics>::default();
        let mut coordinator = invoke::Coordinator::new(
            store.clone(),
            std::sync::Arc::new(capsule),
            limits,
            std::sync::Arc::clone(&metrics),
        );
        if let Some(effects) = effects {
            coordinator = coordinator.with_effects(effects);
        }
        Self {
            store,
            limits,
            interpreter: Some(archived),
            registry: Default::default(),
            coordinator: Some(std::sync::Arc::new(coordinator)),
            metrics,
            surfaces: Default::default(),
            store_gone: Default::default(),
        }
    }

    /// Resolves a credential fresh from the store under the credential deadline.
    pub async fn resolve_session(&self, authorization: Option<&str>, what: &str) -> Result<SessionBinding, Failure> {
        let now = session::now_unix();
        let limit = self.limits.credential;
        let resolved = tokio::time::timeout(limit, session::resolve(&self.store, authorization, now))
            .await
            .map_err(|elapsed| invoke::refusal::credential_timeout(elapsed, limit))?;
        resolved.map_err(|error| invoke::refusal::resolve_failure(error, what))
    }

    /// The Prometheus text of this core's metrics.
    pub fn render_metrics(&self) -> String {
        self.metrics.render(self.coordinator.as_ref().map_or(0, |c| c.slots_in_use()))
    }

    pub fn health(&self) -> pb::HealthReply {
        let (interpreter_ref, interpreter_version) = match &self.interpreter {
            Some(interpreter) => (interpreter.reference.to_string(), interpreter.version.clone()),
            None => (String::new(), String::new()),
        };
        pb::HealthReply {
            status: "ok".to_owned(),
            daemon_version: DAEMON_VERSION.to_owned(),
            store: self.store.location().redacted(),
            coordinator: self.interpreter.is_some(),
            interpreter_ref,
            interpreter_version,
        }
    }
}
