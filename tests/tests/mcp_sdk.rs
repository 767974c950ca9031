//! Real MCP clients against real processes: the official MCP Python SDK and FastMCP's `Client`
//! (both pinned in `tests/python/requirements.txt`) each connect over streamable HTTP with a
//! bearer header, initialize, list the session's tools and call the echo tool.
//!
//! `WORLD_TEST_PYTHON` names a Python that has them installed (a virtualenv's `python`).
//! Without it the test fails: `tests/run.sh` makes that virtualenv and sets it.

use serde_json::json;
use world_tests::{INVOKE_TOOLS, Setup, World, run_python_client};

#[test]
fn the_official_python_sdk_initializes_lists_and_calls_the_echo_tool() {
    sees_the_surface_and_calls_echo("mcp_client.py");
}

#[test]
fn fastmcp_s_client_initializes_lists_and_calls_the_echo_tool() {
    sees_the_surface_and_calls_echo("fastmcp_client.py");
}

fn sees_the_surface_and_calls_echo(client: &str) {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let seen =
        run_python_client(client, &[&world.url("/mcp/"), &token, "tools_decho", r#"{"greeting":"hello","n":1}"#]);
    assert_eq!(seen["serverName"], "ailang-worldd");
    assert!(
        ["2025-11-25", "2025-06-18", "2025-03-26"].contains(&seen["protocolVersion"].as_str().unwrap_or("")),
        "{seen}"
    );
    // The session's surface only: neither the transition under another scope nor the one
    // whose name would be too long.
    assert_eq!(seen["tools"], json!(INVOKE_TOOLS));
    assert_eq!(seen["isError"], false);
    assert_eq!(seen["structuredContent"], json!({"echo":{"greeting":"hello","n":1}}));
    assert_eq!(seen["text"], json!([r#"{"echo":{"greeting":"hello","n":1}}"#]));
}
