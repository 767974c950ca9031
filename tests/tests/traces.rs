//! Spans arrive: a real core exports to an in-process OTLP receiver over
//! both protocols; its spans join the caller's trace, chain to the caller's
//! span, carry their attributes, and never hold the credential.

use std::time::Duration;

use world_proto::v1 as pb;
use world_proto::v1::invocation_client::InvocationClient;
use world_tests::World;
use world_tests::otlp::{ReceivedSpan, Spans, export_env, grpc_receiver, http_receiver};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

async fn traced_invocation(protocol: &str, endpoint: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("world.db");
    let env = export_env(endpoint, protocol);
    let world = World::echo_core_on(dir, store, None, &[], &env);
    let token = world.mint("ep1", &["world.apply=world:10"], 3600);
    let mut client = InvocationClient::connect(format!("http://{}", world.core_addr)).await.unwrap();
    let mut request = world_tests::a2a_invoke(&token, "tools.echo", "traced-1", br#"{"a":1}"#);
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

const MCP_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const MCP_PARENT: &str = "b7ad6b7169203331";

/// One trace from the agent to the capsule: an A2A `tasks/send` carrying a
/// `traceparent` header, and an MCP `tools/call` carrying
/// `params._meta.traceparent`; edge and core spans share the client's trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_and_core_spans_share_the_clients_trace() {
    let (endpoint, spans) = grpc_receiver().await;
    let env = export_env(&endpoint, "grpc");
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("world.db");
    let world = World::echo_core_on(dir, store, None, &[], &env);
    let (edge, edge_url) = world_tests::start_edge_with_env(&[&world.core_addr], world.dir.path(), &[], &env);
    let token = world.mint("ep1", &["world.apply=world:10"], 3600);
    let client = world_tests::http();

    let a2a: serde_json::Value = world_tests::a2a_post(&client, &format!("{edge_url}/a2a/"), &token)
        .header("traceparent", format!("00-{TRACE_ID}-{CLIENT_SPAN}-01"))
        .body(world_tests::tasks_send("t-a2a", "tools.echo", serde_json::json!({"a":1})).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(a2a["result"]["status"]["state"], "completed", "{a2a}");

    let mcp = world_tests::mcp_post(&client, &format!("{edge_url}/mcp/"), &token)
        .body(format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"tools_decho","arguments":{{"b":2}},"_meta":{{"traceparent":"00-{MCP_TRACE}-{MCP_PARENT}-01"}}}}}}"#
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(mcp.contains("structuredContent"), "{mcp}");

    assert!(edge.terminate().success());
    let World { core, .. } = world;
    assert!(core.terminate().success());
    let received = {
        let spans = spans.clone();
        tokio::task::spawn_blocking(move || {
            spans.wait_for(Duration::from_secs(10), |s| {
                [TRACE_ID, MCP_TRACE].iter().all(|t| s.iter().any(|s| &s.trace_id == t && s.name == "capsule.run"))
            })
        })
        .await
        .unwrap()
    };
    let in_trace = |trace: &str, name: &str| -> ReceivedSpan {
        received.iter().find(|s| s.trace_id == trace && s.name == name).cloned().unwrap_or_else(|| {
            let names: Vec<_> =
                received.iter().map(|s| (s.service.as_str(), s.name.as_str(), &s.trace_id[..8])).collect();
            panic!("no {name} span in trace {trace}; got {names:?}")
        })
    };

    // A2A: the HTTP header is the parent of the whole tree.
    let http = in_trace(TRACE_ID, "http.server");
    assert_eq!(http.service, "world-edge");
    assert_eq!(http.attribute("http.route"), Some("POST /a2a/"));
    assert_eq!(http.attribute("http.request.method"), Some("POST"));
    assert_eq!(http.parent_span_id, CLIENT_SPAN);
    assert_eq!(http.attribute("http.response.status_code"), Some("200"));
    let message = in_trace(TRACE_ID, "tasks/send");
    assert_eq!(message.parent_span_id, http.span_id);
    assert_eq!(message.attribute("a2a.skill"), Some("tools.echo"));
    assert_eq!(message.attribute("a2a.task.id"), Some("t-a2a"));
    let invoke_call = received
        .iter()
        .find(|s| s.trace_id == TRACE_ID && s.name == "rpc.client" && s.attribute("rpc.method") == Some("invoke"))
        .expect("the edge's gRPC client span for invoke");
    assert_eq!(invoke_call.parent_span_id, message.span_id);
    let server = received
        .iter()
        .find(|s| s.trace_id == TRACE_ID && s.name == "rpc.server" && s.parent_span_id == invoke_call.span_id)
        .expect("the core's server span chains to the edge's client span");
    assert_eq!(server.service, "world-core");
    assert_eq!(in_trace(TRACE_ID, "capsule.run").attribute("process.exit.code"), Some("0"));

    // MCP: params._meta.traceparent parents the message span and all below it.
    let message = in_trace(MCP_TRACE, "tools/call");
    assert_eq!(message.parent_span_id, MCP_PARENT);
    assert_eq!(message.attribute("gen_ai.tool.name"), Some("tools_decho"));
    assert_eq!(message.attribute("mcp.method.name"), Some("tools/call"));
    assert_eq!(in_trace(MCP_TRACE, "rpc.client").parent_span_id, message.span_id);
    let core_invoke = received
        .iter()
        .find(|s| s.trace_id == MCP_TRACE && s.name == "invoke" && s.service == "world-core")
        .expect("the core's invoke span in the MCP trace");
    assert_eq!(core_invoke.attribute("world.invocation.id").map(|id| id.starts_with("mcp:ep1:")), Some(true));

    for span in &received {
        for (key, value) in &span.attributes {
            assert!(!value.contains(&token), "span {} attribute {key} holds the credential", span.name);
        }
    }
}
