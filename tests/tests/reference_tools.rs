//! The reference's coding-tools vocabulary runs unchanged: a package laid out like the
//! reference World's `packages/se-tools` (its operation names, request fields and result
//! shapes, written for these tests in tests/fixtures/reference-tools) is published, and each
//! tool is driven over MCP as the reference's descriptions promise — `ai_check`'s
//! `{check, verify}` report, the text builtins inventory, the run decision and limit, and
//! every one of the twenty `ailang-cli` operations served or refused with its reason.

use serde_json::{Value, json};
use world_tests::{Setup, World, fixture};

const TOOLS: usize = 8;

/// One MCP `tools/call`: the JSON-RPC `result` of its answer.
async fn call(world: &World, token: &str, tool: &str, arguments: Value) -> Value {
    let answer = world.mcp_call(token, tool, arguments).await;
    assert!(answer["result"]["structuredContent"].is_object(), "{tool}: {answer}");
    answer["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_in_the_references_vocabulary_runs_unchanged() {
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("ref");
    std::fs::create_dir(&work).unwrap();
    let root_arg = root.path().display().to_string();
    let world = World::published(
        &fixture("reference-tools/transitions.json"),
        TOOLS,
        Setup { core_args: &["--workspace-root", &root_arg], ..Setup::default() },
    );
    let grants: Vec<String> = world_model::SE_TOOLS_EFFECTS.iter().map(|e| format!("{e}=worktree:100")).collect();
    let grants: Vec<&str> = grants.iter().map(String::as_str).collect();
    let token = world.mint("ref", &grants, 3600);
    let out = |result: &Value| result["structuredContent"].clone();

    // Reads, writes and edits: {op, path, …} answered {ok, …}.
    let broken = "module bad\n\nexport func main(input: string) -> string {\n  1 + \"x\"\n}\n";
    let written = call(&world, &token, "ailang-write", json!({"path": "bad.ail", "content": broken})).await;
    assert_eq!(out(&written)["ok"], true, "{written}");
    let read = call(&world, &token, "ailang-read", json!({"path": "bad.ail"})).await;
    assert_eq!((out(&read)["ok"].clone(), out(&read)["content"].clone()), (json!(true), json!(broken)), "{read}");
    let refused = call(&world, &token, "ailang-read", json!({"path": "nope.ail"})).await;
    assert_eq!((out(&refused)["ok"].clone(), refused["isError"].clone()), (json!(false), json!(true)), "{refused}");
    assert!(out(&refused)["refused"].as_str().is_some_and(|r| r.contains("nope.ail")), "{refused}");

    // ai_check: the finish phase reads {check: {passed, error_count, errors}} from stdout.
    let checked = call(&world, &token, "ailang-check", json!({"path": "bad.ail"})).await;
    let report = out(&checked);
    assert_eq!((report["ok"].clone(), report["passed"].clone()), (json!(true), json!(false)), "{checked}");
    assert!(report["error_count"].as_i64().unwrap_or_default() >= 1, "{report}");
    assert!(report["errors"][0]["code"].as_str().is_some_and(|c| !c.is_empty()), "{report}");
    let edited =
        call(&world, &token, "ailang-edit", json!({"path": "bad.ail", "old_text": "1 + \"x\"", "new_text": "input"}))
            .await;
    assert_eq!(out(&edited)["ok"], true, "{edited}");
    let checked = call(&world, &token, "ailang-check", json!({"path": "bad.ail"})).await;
    assert_eq!(out(&checked)["passed"], true, "{checked}");

    // Runs: {path, args_json} answered {admitted, exit_code, decision, limit, stdout, stderr}.
    let ran = call(&world, &token, "ailang-run", json!({"path": "bad.ail", "args_json": "\"hi\""})).await;
    let result = out(&ran);
    for key in ["admitted", "exit_code", "decision", "limit", "stdout", "stderr"] {
        assert!(result.get(key).is_some(), "{key}: {ran}");
    }
    assert_eq!((result["admitted"].clone(), result["exit_code"].clone()), (json!(true), json!(0)), "{ran}");
    assert_eq!((result["stdout"].clone(), result["limit"].clone()), (json!("hi\n"), Value::Null), "{ran}");
    assert_eq!(result["decision"]["ok"], true, "{ran}");
    let net = "module net\n\nexport func main(input: string) -> string ! {Net} {\n  input\n}\n";
    std::fs::write(work.join("net.ail"), net).unwrap();
    let ran = call(&world, &token, "ailang-run", json!({"path": "net.ail"})).await;
    let result = out(&ran);
    assert_eq!((result["admitted"].clone(), result["decision"]["ok"].clone()), (json!(false), json!(false)), "{ran}");
    assert_eq!(result["decision"]["missing_from_policy"], json!(["Net"]), "{ran}");
    assert_eq!(result["world"]["effects"][0]["status"], "ok", "a run that was not admitted still ran its effect");

    // builtins_list's text inventory: {count, matches:[{name, module, effect}]}.
    let found = call(&world, &token, "builtins-search", json!({"query": "readFile"})).await;
    let found = out(&found);
    assert!(found["count"].as_i64().unwrap_or_default() >= 1, "{found}");
    assert!(
        found["matches"].as_array().unwrap().contains(&json!({"name": "readFile", "module": "std/fs", "effect": "fs"})),
        "{found}"
    );

    // examples_search: the command's answer, {ok, argv, exit_code, stdout, stderr}.
    let examples = call(&world, &token, "examples-search", json!({"query": "json"})).await;
    let examples = out(&examples);
    assert_eq!((examples["ok"].clone(), examples["exit_code"].clone()), (json!(true), json!(0)), "{examples}");
    assert!(examples["stdout"].as_str().is_some_and(|s| s.contains("json")), "{examples}");

    // Every ailang-cli operation of the reference: served, or refused with the reason.
    let example = examples["matches"][0]["name"].as_str().expect("an example name").to_owned();
    let served = [
        ("agent_prompt", json!({})),
        ("ai_check", json!({"path": "bad.ail"})),
        ("builtins_list", json!({})),
        ("builtins_show", json!({"module": "decode"})),
        ("check", json!({"path": "bad.ail", "flags": {"json": ""}})),
        ("examples_list", json!({})),
        ("examples_search", json!({"query": "json"})),
        ("examples_show", json!({"module": example})),
        ("iface", json!({"module": "std/json"})),
        ("policy_check", json!({"path": "net.ail"})),
        ("prompt", json!({})),
        ("test", json!({"path": "bad.ail"})),
        ("version", json!({})),
    ];
    for (op, fields) in served {
        let mut arguments = fields.clone();
        arguments["op"] = json!(op);
        let result = call(&world, &token, "ailang-cli", arguments).await;
        let output = out(&result);
        assert!(output["argv"].is_array() && output["exit_code"].is_i64(), "{op}: {result}");
        assert!(output["stdout"].as_str().is_some_and(|s| !s.is_empty()), "{op}: {result}");
        assert_eq!(output["world"]["effects"][0]["status"], "ok", "{op}: {result}");
    }
    let policy = call(&world, &token, "ailang-cli", json!({"op": "policy_check", "path": "net.ail"})).await;
    let decision: Value = serde_json::from_str(out(&policy)["stdout"].as_str().unwrap()).unwrap();
    assert_eq!(decision["decision"]["missing_from_policy"], json!(["Net"]), "{policy}");
    for op in ["axioms", "devtools_prompt", "docs_search", "examples_tags", "fmt", "pkg_docs", "tree"] {
        let result = call(&world, &token, "ailang-cli", json!({"op": op, "path": "bad.ail"})).await;
        let output = out(&result);
        assert_eq!((output["ok"].clone(), result["isError"].clone()), (json!(false), json!(true)), "{op}: {result}");
        assert!(
            output["refused"]
                .as_str()
                .is_some_and(|r| r.starts_with(&format!("op \"{op}\" is not served by World-rs: "))),
            "{op}: {result}"
        );
        assert_eq!(output["world"]["effects"][0]["status"], "failed", "{op}: {result}");
    }
}
