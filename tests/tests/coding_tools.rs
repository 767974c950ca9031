//! The coding tools end to end: a scripted agent on the official MCP Python SDK writes a
//! program with a type error in its worktree, checks it, fixes it, checks it again, runs it,
//! reads it back, searches the builtins and the examples and runs an `ailang-cli` op — every
//! result carrying the `world` block, one committed entry per call — with a session minted
//! from the se-tools preset, against the published `packages/se-tools` package.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use world_tests::{Setup, World, http};

const SE_TOOLS: [&str; 8] = [
    "ailang-check",
    "ailang-cli",
    "ailang-edit",
    "ailang-read",
    "ailang-run",
    "ailang-write",
    "builtins-search",
    "examples-search",
];

fn se_tools_world(root: &Path) -> World {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packages/se-tools/transitions.json");
    let root = root.display().to_string();
    World::published(&manifest, SE_TOOLS.len(), Setup { core_args: &["--workspace-root", &root], ..Setup::default() })
}

fn preset_session(world: &World, episode: &str, budget: &str) -> String {
    let mut command = Command::new(world_tests::bin("world-core"));
    command
        .args(["session", "mint", "--episode", episode, "--preset", "se-tools", "--budget", budget, "--store"])
        .arg(&world.store);
    let run = world_tests::run_attended(command, "y\n");
    assert!(run.status.success(), "{}", run.stderr);
    run.stdout.trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_writes_checks_fixes_runs_and_reads_a_program_through_the_sdk() {
    let python = std::env::var_os("WORLD_TEST_PYTHON").expect(
        "WORLD_TEST_PYTHON is not set: run the tests with tests/run.sh, which makes a virtualenv with the MCP SDK",
    );
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("agent")).unwrap();
    let world = se_tools_world(root.path());
    let token = preset_session(&world, "agent", "50");
    let before = world.log_len(&token).await;

    let broken = "module hello\n\nexport func main(input: string) -> string {\n  1 + \"x\"\n}\n";
    let calls = json!([
        ["ailang-write", {"path": "hello.ail", "content": broken}],
        ["ailang-check", {"path": "hello.ail"}],
        ["ailang-edit", {"path": "hello.ail", "old_text": "1 + \"x\"", "new_text": "\"{\\\"hi\\\":1}\""}],
        ["ailang-check", {"path": "hello.ail"}],
        ["ailang-run", {"path": "hello.ail", "args_json": "\"x\""}],
        ["ailang-read", {"path": "hello.ail"}],
        ["builtins-search", {"query": "readFile"}],
        ["examples-search", {"query": "json"}],
        ["ailang-cli", {"op": "version"}],
    ]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/agent_session.py");
    let run =
        Command::new(python).arg(&script).arg(world.url("/mcp/")).arg(&token).arg(calls.to_string()).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{}\n{stdout}", String::from_utf8_lossy(&run.stderr));
    let seen: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(seen["tools"], json!(SE_TOOLS), "the preset session sees exactly the coding tools");
    let results = seen["results"].as_array().unwrap();
    for result in results {
        assert_eq!(result["isError"], false, "{result}");
        let block = &result["output"]["world"];
        assert!(block["plan"].as_str().is_some_and(|p| p.starts_with("sha256:")), "{result}");
        assert_eq!(block["effects"][0]["status"], "ok", "{result}");
    }
    let output = |i: usize| &results[i]["output"];
    assert_eq!(output(0)["ok"], true);
    assert_eq!(output(1)["passed"], false, "the type error is reported: {}", output(1));
    assert!(output(1)["error_count"].as_i64().unwrap_or_default() >= 1);
    assert_eq!(output(2)["ok"], true, "{}", output(2));
    assert_eq!(output(3)["passed"], true, "{}", output(3));
    assert_eq!(output(4)["stdout"], "{\"hi\":1}\n", "{}", output(4));
    assert!(output(5)["content"].as_str().is_some_and(|c| c.contains("\"{\\\"hi\\\":1}\"")), "{}", output(5));
    assert!(output(6)["count"].as_i64().unwrap_or_default() >= 1, "{}", output(6));
    assert!(output(7).get("stdout").is_some() || output(7)["ok"] == true, "{}", output(7));
    assert!(output(8)["stdout"].as_str().is_some_and(|s| !s.is_empty()), "{}", output(8));
    assert_eq!(world.log_len(&token).await, before + results.len(), "one committed entry per call");
    assert!(std::fs::read_to_string(root.path().join("agent/hello.ail")).unwrap().contains("hi"));

    // A refusal is a committed ok:false result, and a budget of N allows N calls of its effect.
    let small = preset_session(&world, "agent", "0");
    let answer = http()
        .post(world.url("/a2a/"))
        .header("Authorization", format!("Bearer {small}"))
        .header("Content-Type", "application/json")
        .body(json!({"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"id":"refuse-1","metadata":{"skill_id":"ailang-read"},
            "message":{"role":"user","parts":[{"type":"data","data":{"path":"/etc/passwd"}}]}}}).to_string())
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let refused = &answer["result"]["artifacts"][0]["parts"][0]["data"];
    assert_eq!(refused["ok"], false, "{answer}");
    assert!(refused["refused"].as_str().is_some_and(|r| r.contains("/etc/passwd")), "{answer}");
    assert_eq!(refused["world"]["effects"], json!([]));
}
