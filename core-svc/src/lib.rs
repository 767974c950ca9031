//! world-core: the World core service. It owns the store, sessions, the
//! registry and admission, and serves them over the world.v1 gRPC API; the
//! `world-core` binary also carries the operator verbs (session, genesis).

pub mod archive;
pub mod attended;
pub mod calls;
pub mod capsule;
pub mod effects;
pub mod fault;
#[cfg(test)]
mod fuzzing;
pub mod genesis;
pub mod grpc;
pub mod invoke;
pub mod limits;
pub mod metrics;
pub mod oauth;
pub mod publish;
pub mod registry;
pub mod scratch;
pub mod session;
pub mod store;
pub mod subprocess;
pub mod surface;

use world_model::{Failure, FailureCode};
use world_proto::v1 as pb;

use session::SessionBinding;
use store::Store;

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
        match tokio::time::timeout(self.limits.credential, session::resolve(&self.store, authorization, now)).await {
            Ok(Ok(binding)) => Ok(binding),
            Ok(Err(error)) => Err(invoke::refusal::resolve_failure(error, what)),
            Err(_) => Err(Failure::new(FailureCode::Timeout, "credential lookup deadline (3s) exceeded")),
        }
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
