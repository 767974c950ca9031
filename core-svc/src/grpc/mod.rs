//! The core's gRPC API: thin translations from world.v1 onto the store,
//! sessions and the registry. Failures travel as typed `Failure` messages in
//! the reply, not as free-text statuses.

mod admission;
pub(crate) mod convert;
mod invocation;
mod oauth;
mod store_api;

use std::sync::Arc;

use tonic::Request;
use world_model::Failure;

pub use admission::AdmissionService;
pub use invocation::InvocationService;
pub use oauth::OAuthService;
pub use store_api::StoreService;

use crate::Core;

/// The `authorization` metadata as sent (the edge forwards the HTTP header verbatim).
fn authorization<T>(request: &Request<T>) -> Option<&str> {
    request.metadata().get("authorization").and_then(|v| v.to_str().ok())
}

/// A committing call's answer, unless the store's file goes while it runs ([`Core::store_gone`]):
/// whatever it commits then is lost with the file, so it answers `gone` at once instead.
async fn unless_store_gone<T>(
    core: &Core,
    call: impl Future<Output = Result<T, Failure>>,
    gone: impl Fn() -> Failure,
) -> Result<T, Failure> {
    let store_gone = &core.store_gone;
    let answer = tokio::select! {
        answer = call => answer,
        () = store_gone.wait() => Err(gone()),
    };
    if store_gone.is_gone() { Err(gone()) } else { answer }
}

/// Registers every world.v1 service, standard health and reflection on one router.
pub fn router(core: Arc<Core>) -> Result<tonic::transport::server::Router, tonic_reflection::server::Error> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    // The serving status never changes while the process runs: the core
    // either serves everything or has not started.
    tokio::spawn(async move {
        health_reporter.set_serving::<world_proto::v1::store_server::StoreServer<StoreService>>().await;
        health_reporter.set_serving::<world_proto::v1::admission_server::AdmissionServer<AdmissionService>>().await;
        health_reporter.set_serving::<world_proto::v1::invocation_server::InvocationServer<InvocationService>>().await;
        health_reporter.set_serving::<world_proto::v1::o_auth_server::OAuthServer<OAuthService>>().await;
    });
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(world_proto::v1::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    Ok(tonic::transport::Server::builder()
        .trace_fn(server_span)
        .add_service(health_service)
        .add_service(reflection)
        .add_service(world_proto::v1::store_server::StoreServer::new(StoreService::new(Arc::clone(&core))))
        .add_service(world_proto::v1::admission_server::AdmissionServer::new(AdmissionService::new(Arc::clone(&core))))
        .add_service(world_proto::v1::o_auth_server::OAuthServer::new(OAuthService::new(Arc::clone(&core))))
        .add_service(world_proto::v1::invocation_server::InvocationServer::new(InvocationService::new(core))))
}

/// The core's server span for one RPC, a child of the caller's trace
/// context when the metadata carries one (`traceparent`).
fn server_span(request: &http::Request<()>) -> tracing::Span {
    let span = tracing::info_span!(
        "rpc.server",
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.method = %request.uri().path(),
        trace_id = tracing::field::Empty,
    );
    world_telemetry::adopt_parent(&span, request.headers());
    span
}
