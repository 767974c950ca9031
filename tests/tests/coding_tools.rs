//! The coding tools end to end: a scripted agent on the official MCP Python SDK writes a
//! program with a type error in its worktree, checks it, fixes it, checks it again, runs it,
//! reads it back, searches the builtins and the examples and runs an `ailang-cli` op — every
//! result carrying the `world` block, one committed entry per call — with a session minted
//! from the se-tools preset, against the published `packages/se-tools` package.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use world_tests::{Setup, World, run_python_client, tasks_send};

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
    let seen = run_python_client("agent_session.py", &[&world.url("/mcp/"), &token, &calls.to_string()]);
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
    let answer = world.a2a(&small, &tasks_send("refuse-1", "ailang-read", json!({"path":"/etc/passwd"}))).await;
    let refused = &answer["result"]["artifacts"][0]["parts"][0]["data"];
    assert_eq!(refused["ok"], false, "{answer}");
    assert!(refused["refused"].as_str().is_some_and(|r| r.contains("/etc/passwd")), "{answer}");
    assert_eq!(refused["world"]["effects"], json!([]));
}

/// Runs `calls` through the official MCP SDK (tests/python/agent_session.py) and returns each
/// call's `{tool, isError, output}`.
fn sdk_session(world: &World, token: &str, calls: Value) -> Vec<Value> {
    let seen = run_python_client("agent_session.py", &[&world.url("/mcp/"), token, &calls.to_string()]);
    seen["results"].as_array().unwrap().clone()
}

/// What an agent sees when a call does not succeed: `isError`, `ok: false` and a `refused` that
/// says why, with the output kept.
#[track_caller]
fn refused(result: &Value) -> String {
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["output"]["ok"], false, "{result}");
    result["output"]["refused"].as_str().unwrap_or_else(|| panic!("no refused: {result}")).to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_never_stalls_every_answer_says_what_happened_and_what_to_do() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    for episode in ["work", "spent"] {
        std::fs::create_dir(root.path().join(episode)).unwrap();
    }
    let work = root.path().join("work");
    std::fs::create_dir(work.join(".git")).unwrap();
    std::os::unix::fs::symlink(outside.path(), work.join("out")).unwrap();
    std::os::unix::fs::symlink(".git", work.join("gitlink")).unwrap();
    let world = se_tools_world(root.path());
    let token = preset_session(&world, "work", "50");

    let echo = "module echo\n\nexport func main(input: string) -> string {\n  input\n}\n";
    let no_import = "module tools/enc\n\nexport func main(input: string) -> string {\n  encode(js(input))\n}\n";
    let results = sdk_session(
        &world,
        &token,
        json!([
            ["ailang-write", {"path": "tools/stats/echo.ail", "content": echo}],
            ["ailang-run", {"path": "tools/stats/echo.ail", "args_json": {"n": 2}}],
            ["ailang-run", {"path": "tools/stats/echo.ail"}],
            ["ailang-write", {"path": "tools/enc.ail", "content": no_import}],
            ["ailang-check", {"path": "tools/enc.ail"}],
            ["ailang-write", {"path": "out/escape.txt", "content": "x"}],
            ["ailang-write", {"path": ".git/config", "content": "x"}],
            ["ailang-write", {"path": "gitlink/hooks/pre-commit", "content": "x"}],
            ["builtins-search", {"query": "json decode"}],
            ["examples-search", {"query": "json"}],
            ["ailang-read", {"path": "tools/stats/echo.ail"}],
            ["ailang-run", {"path": "missing.ail"}],
        ]),
    );

    // A nested new path: the directories are made beneath the worktree.
    assert_eq!(results[0]["output"]["ok"], true, "{}", results[0]);
    assert_eq!(std::fs::read_to_string(work.join("tools/stats/echo.ail")).unwrap(), echo);
    let written = results[0]["output"]["sha256"].clone();
    assert_eq!(written, json!(world_model::HashRef::of(echo.as_bytes()).to_string()));
    // Arguments as an object reach a string entry as their JSON text; absent, as "".
    assert_eq!(results[1]["isError"], false, "{}", results[1]);
    assert_eq!(results[1]["output"]["stdout"], "{\"n\":2}\n", "{}", results[1]);
    assert_eq!(results[1]["output"]["sha256"], written, "the run names the bytes it ran");
    assert_eq!(results[2]["output"]["stdout"], "\n", "{}", results[2]);
    assert_eq!(results[2]["output"]["exit_code"], 0, "{}", results[2]);
    // A missing import: the checker's suggestion, line and column pass through.
    let report = &results[4]["output"];
    assert_eq!((report["ok"].clone(), report["passed"].clone()), (json!(true), json!(false)), "{report}");
    let error = report["errors"].as_array().unwrap().iter().find(|e| e["message"].as_str().unwrap().contains("encode"));
    let error = error.unwrap_or_else(|| panic!("no error about encode: {report}"));
    assert_eq!(error["suggestion"], "import it: import std/json (encode)", "{error}");
    assert_eq!((error["line"].clone(), error["column"].clone()), (json!(4), json!(3)), "{error}");
    assert!(report["warnings"].is_array(), "{report}");
    // Writes through a symlink out and into .git are refused, and recorded failed.
    assert!(refused(&results[5]).contains("symlink"), "{}", results[5]);
    assert!(refused(&results[6]).contains("deny list"), "{}", results[6]);
    assert!(refused(&results[7]).contains("symlink"), "{}", results[7]);
    for result in &results[5..8] {
        assert_eq!(result["output"]["world"]["effects"][0]["status"], "failed", "{result}");
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(work.join(".git")).unwrap().count(), 0);
    // A two-word query finds the entries holding both words.
    let found = &results[8]["output"];
    let matches = found["matches"].as_array().unwrap();
    assert!(matches.iter().any(|m| m["module"] == "std/json" && m["name"] == "decode"), "{found}");
    // Examples come back structured: name, path and a snippet holding the word.
    let examples = &results[9]["output"];
    let first = &examples["matches"][0];
    assert!(first["name"].is_string() && first["path"].as_str().is_some_and(|p| p.ends_with(".ail")), "{examples}");
    assert!(first["snippet"].as_str().is_some_and(|s| s.to_lowercase().contains("json")), "{examples}");
    assert_eq!(results[10]["output"]["sha256"], written, "the read names the bytes it read");
    assert!(refused(&results[11]).contains("missing.ail"), "{}", results[11]);

    // A spent budget, for each kind of tool: the refusal names the effect, the reason, the
    // numbers in this episode and the operator's command; the finish phase explained it.
    let spent = preset_session(&world, "spent", "1");
    std::fs::write(root.path().join("spent/a.ail"), echo).unwrap();
    let twice = |tool: &str, args: Value| vec![json!([tool, args.clone()]), json!([tool, args])];
    let calls: Vec<Value> = [
        twice("ailang-read", json!({"path": "a.ail"})),
        twice("ailang-edit", json!({"path": "a.ail", "old_text": "input\n}", "new_text": "input\n}"})),
        twice("ailang-check", json!({"path": "a.ail"})),
        twice("ailang-run", json!({"path": "a.ail"})),
        twice("builtins-search", json!({"query": "decode"})),
        twice("ailang-cli", json!({"op": "version"})),
    ]
    .concat();
    let results = sdk_session(&world, &spent, Value::Array(calls));
    for (pair, effect) in results.chunks(2).zip([
        "Workspace.Read",
        "Workspace.Write",
        "Ailang.Check",
        "Ailang.Run",
        "Ailang.Discover",
        "Ailang.CLI",
    ]) {
        assert_eq!(pair[0]["isError"], false, "{}", pair[0]);
        let why = refused(&pair[1]);
        assert_eq!(pair[1]["output"]["status"], "denied", "{}", pair[1]);
        assert_eq!(pair[1]["output"]["world"]["effects"][0]["status"], "denied", "{}", pair[1]);
        assert!(
            why.starts_with(&format!("{effect} was denied: its budget is spent (1 of 1 calls used in episode spent)")),
            "{why}"
        );
        assert!(
            why.contains("world-core session mint --store <store> --preset se-tools --episode <new-episode>"),
            "{why}"
        );
    }
}
