//! Spans arrive: a real core exports to an in-process OTLP receiver over
//! both protocols; its spans join the caller's trace, chain to the caller's
//! span, carry their attributes, and never hold the credential.

use std::time::Duration;

use world_proto::v1 as pb;
use world_proto::v1::invocation_client::InvocationClient;
use world_tests::World;
use world_tests::otlp::{ReceivedSpan, Spans, grpc_receiver, http_receiver};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

async fn traced_invocation(protocol: &str, endpoint: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("world.db");
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
    ];
    let world = World::echo_core_on(dir, store, None, &[], &env);
    let token = world.mint("ep1", &["world.apply=world:10"], 3600);
    let mut client = InvocationClient::connect(format!("http://{}", world.core_addr)).await.unwrap();
    let mut request = tonic::Request::new(pb::InvokeRequest {
        surface: "a2a".into(),
        transition_id: "tools.echo".into(),
        task_id: "traced-1".into(),
        arguments: br#"{"a":1}"#.to_vec(),
        transition_fn: String::new(),
    });
    request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    request.metadata_mut().insert("traceparent", format!("00-{TRACE_ID}-{CLIENT_SPAN}-01").parse().unwrap());
    let outcome = client.invoke(request).await.unwrap().into_inner().outcome.unwrap();
    assert!(matches!(outcome, pb::invoke_reply::Outcome::Invoked(_)), "{outcome:?}");
    // A graceful stop flushes what the batch processor still holds.
    let World { core, .. } = world;
    assert!(core.terminate().success());
    token
}

fn check(spans: &[ReceivedSpan], token: &str) {
    let ours: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.trace_id == TRACE_ID).collect();
    let find = |name: &str| {
        ours.iter().find(|s| s.name == name).copied().unwrap_or_else(|| {
            panic!("no {name} span in the client's trace; got {:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>())
        })
    };
    let server = find("rpc.server");
    assert_eq!(server.parent_span_id, CLIENT_SPAN, "the core's span chains to the client's");
    assert_eq!(server.service, "world-core");
    assert_eq!(server.attribute("rpc.system"), Some("grpc"));
    assert_eq!(server.attribute("rpc.method"), Some("/world.v1.Invocation/Invoke"));
    let invoke = find("invoke");
    assert_eq!(invoke.parent_span_id, server.span_id);
    assert_eq!(invoke.attribute("world.transition.id"), Some("tools.echo"));
    assert_eq!(invoke.attribute("world.invocation.id"), Some("a2a:ep1:traced-1"));
    assert_eq!(invoke.attribute("world.outcome"), Some("committed"));
    assert_eq!(invoke.attribute("world.entry.index"), Some("1"));
    for phase in ["validate", "reconcile", "commit"] {
        assert_eq!(find(phase).parent_span_id, invoke.span_id, "{phase} is a phase of invoke");
    }
    assert_eq!(find("commit").attribute("world.entry.index"), Some("1"));
    let capsule = find("capsule.run");
    assert!(capsule.attribute("world.interpreter.ref").is_some_and(|r| r.starts_with("sha256:")));
    assert_eq!(capsule.attribute("process.exit.code"), Some("0"));
    for span in spans {
        for (key, value) in &span.attributes {
            assert!(!value.contains(token), "span {} attribute {key} holds the credential", span.name);
        }
    }
}

async fn wait(spans: &Spans) -> Vec<ReceivedSpan> {
    let spans = spans.clone();
    tokio::task::spawn_blocking(move || {
        spans.wait_for(Duration::from_secs(10), |s| s.iter().any(|s| s.trace_id == TRACE_ID && s.name == "capsule.run"))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_spans_arrive_over_otlp_grpc() {
    let (endpoint, spans) = grpc_receiver().await;
    let token = traced_invocation("grpc", &endpoint).await;
    check(&wait(&spans).await, &token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_spans_arrive_over_otlp_http() {
    let (endpoint, spans) = http_receiver().await;
    let token = traced_invocation("http/protobuf", &endpoint).await;
    check(&wait(&spans).await, &token);
}
