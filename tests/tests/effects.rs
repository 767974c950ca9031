//! Effectful transitions over real processes: reads and writes in an episode's worktree
//! through A2A and MCP with the `world` block, the plan law, refusal plans, finish phases,
//! EffectsUnrecorded on both wires, budgets that survive restarts and new sessions, R8, and
//! resent task ids that never run an effect twice.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Value, json};
use world_tests::{Setup, World, fixture, http, tasks_send};

const TRANSITIONS: usize = 5;
const READ: &str = "Workspace.Read=worktree";
const WRITE: &str = "Workspace.Write=worktree";

/// A world serving the effect fixtures with a workspace root holding the episode `ep1`.
fn effect_world() -> (World, PathBuf) {
    let root = tempfile::tempdir().expect("workspace root").keep();
    std::fs::create_dir(root.join("ep1")).expect("episode worktree");
    std::fs::write(root.join("ep1/hello.txt"), "hello, world\n").expect("sample file");
    let root_arg = root.display().to_string();
    let core_args = ["--workspace-root", root_arg.as_str()];
    let world = World::published(
        &fixture("effects/transitions.json"),
        TRANSITIONS,
        Setup { core_args: &core_args, ..Setup::default() },
    );
    (world, root)
}

async fn a2a(world: &World, token: &str, task: &str, skill: &str, data: Value) -> Value {
    world.a2a(token, &tasks_send(task, skill, data)).await
}

/// The output object of a successful A2A call.
fn a2a_output(answer: &Value) -> &Value {
    &answer["result"]["artifacts"][0]["parts"][0]["data"]
}

/// One MCP `tools/call`: the JSON-RPC object of its answer (SSE or whole-POST envelope).
async fn mcp(world: &World, token: &str, tool: &str, arguments: Value) -> Value {
    world.mcp_call(token, tool, arguments).await
}

async fn object(world: &World, token: &str, reference: &str) -> Value {
    let response = http()
        .get(world.url(&format!("/v1/objects/{reference}?payload=true")))
        .header("Authorization", format!("Bearer {token}"))
        .send()
        .await
        .expect("GET object");
    assert_eq!(response.status(), 200, "object {reference}");
    response.json().await.expect("object JSON")
}

/// The payload of a stored object, decoded as JSON.
async fn payload(world: &World, token: &str, reference: &str) -> Value {
    let object = object(world, token, reference).await;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(object["payload"].as_str().expect("payload"))
        .expect("base64 payload");
    serde_json::from_slice(&bytes).expect("a JSON payload")
}

fn plan(effects: Value, finish: bool, result: Value) -> Value {
    json!({"plan":"world/effect-plan/v1","effects":effects,"finish":finish,"result":result})
}

fn effect(effect: &str, payload: Value) -> Value {
    json!({"id":"e1","effect":effect,"scope":"worktree","cost":1,"payload":payload})
}

fn write_plan(path: &str, content: &str) -> Value {
    plan(json!([effect("Workspace.Write", json!({"op":"write","path":path,"content":content}))]), false, Value::Null)
}

fn a2a_error(answer: &Value) -> (i64, String) {
    let error = &answer["error"];
    (error["code"].as_i64().unwrap_or_default(), error["message"].as_str().unwrap_or_default().to_owned())
}

/// The world block's single effect: (status, record ref), after checking the plan ref.
async fn only_effect(world: &World, token: &str, output: &Value) -> (String, String) {
    let block = &output["world"];
    let plan_ref = block["plan"].as_str().expect("world.plan");
    let stored = payload(world, token, plan_ref).await;
    assert_eq!(stored["plan"], "world/effect-plan/v1", "the plan ref names the admitted plan");
    let effects = block["effects"].as_array().expect("world.effects");
    assert_eq!(effects.len(), 1, "{output}");
    assert_eq!(effects[0]["id"], "e1");
    (
        effects[0]["status"].as_str().unwrap_or_default().to_owned(),
        effects[0]["record"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_and_a_write_through_a2a_and_mcp_leave_records_and_the_world_block() {
    let (world, root) = effect_world();
    let token = world.mint("ep1", &[&format!("{READ}:10"), &format!("{WRITE}:10")], 3600);
    let before = world.log_len(&token).await;

    let answer = a2a(&world, &token, "read-1", "fx.read", json!({"path":"hello.txt"})).await;
    let output = a2a_output(&answer);
    assert_eq!(output["ok"], true, "{answer}");
    assert_eq!(output["content"], "hello, world\n");
    assert!(output["tool"].as_str().is_some_and(|t| t.starts_with("sha256:")), "{output}");
    assert!(output["policy_digest"].as_str().is_some_and(|t| t.starts_with("sha256:")), "{output}");
    let (status, record) = only_effect(&world, &token, output).await;
    assert_eq!(status, "ok");
    let record = payload(&world, &token, &record).await;
    assert_eq!(record["effect"], "Workspace.Read");
    assert_eq!((record["allowed"].clone(), record["failed"].clone()), (json!(true), json!(false)));
    assert_eq!((record["budgetBefore"].clone(), record["budgetAfter"].clone()), (json!(10), json!(9)));
    let request = object(&world, &token, record["requestRef"].as_str().expect("requestRef")).await;
    assert_eq!(request["semanticId"], "world/effect-request/v1");
    let result = payload(&world, &token, record["resultRef"].as_str().expect("resultRef")).await;
    assert_eq!(result["content"], "hello, world\n", "the result object holds the handler's output");
    assert_eq!(answer["result"]["metadata"]["entry_index"], json!(before as i64), "{answer}");

    let answer =
        mcp(&world, &token, "fx_dscripted_uwrite", json!({"plan": write_plan(".git/hooks/x", "written")})).await;
    // The handler refuses a write under the deny list: a failed effect whose result is the
    // reason, answered as an MCP error result that still carries the output.
    let output = &answer["result"]["structuredContent"];
    assert_eq!(output["ok"], false, "{answer}");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(output["refused"].as_str().is_some_and(|r| r.contains("deny list")), "{output}");
    let (status, record) = only_effect(&world, &token, output).await;
    assert_eq!(status, "failed");
    let record = payload(&world, &token, &record).await;
    assert_eq!((record["failed"].clone(), record["budgetAfter"].clone()), (json!(true), json!(9)), "debited");
    let reason = payload(&world, &token, record["resultRef"].as_str().expect("a failed record's reason")).await;
    assert_eq!(reason["refused"], output["refused"], "{reason}");
    let text = answer["result"]["content"][0]["text"].as_str().expect("the output as text");
    assert_eq!(&serde_json::from_str::<Value>(text).expect("text is the JSON output"), output);
    assert!(!root.join("ep1/.git").exists());

    let answer =
        mcp(&world, &token, "fx_dscripted_uwrite", json!({"plan": write_plan("notes/deep/new.txt", "written")})).await;
    let output = &answer["result"]["structuredContent"];
    assert_eq!(output["ok"], true, "missing directories are made: {answer}");
    assert_eq!(output["sha256"], json!(world_model::HashRef::of(b"written").to_string()), "{answer}");
    assert!(answer["result"].get("isError").is_none(), "{answer}");
    assert_eq!(std::fs::read_to_string(root.join("ep1/notes/deep/new.txt")).expect("written file"), "written");
    assert_eq!(world.log_len(&token).await, before + 3, "one entry per call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_plan_law_violation_is_refused_with_its_law_and_commits_nothing() {
    let (world, _root) = effect_world();
    let token = world.mint("ep1", &[&format!("{READ}:10")], 3600);
    let read = |path: &str| effect("Workspace.Read", json!({"op":"read","path":path}));
    let rows: Vec<(&str, Value)> = vec![
        ("shape", json!({"plan":"world/effect-plan/v2","effects":[],"finish":false,"result":{}})),
        ("shape", json!({"plan":"world/effect-plan/v1","effects":[],"finish":false})),
        ("L1", plan(json!([read("a"), read("b")]), false, Value::Null)),
        (
            "L2",
            plan(
                json!([{"id":"E1","effect":"Workspace.Read","scope":"worktree","cost":1,"payload":{}}]),
                false,
                Value::Null,
            ),
        ),
        (
            "L3",
            plan(
                json!([{"id":"e1","effect":"Workspace.Read","scope":"worktree","cost":2,"payload":{}}]),
                false,
                Value::Null,
            ),
        ),
        ("L3", plan(json!([effect("Workspace.Write", json!({}))]), false, Value::Null)),
        (
            "L4",
            plan(
                json!([{"id":"e1","effect":"Workspace.Read","scope":"worktree","cost":1,"payload":[1]}]),
                false,
                Value::Null,
            ),
        ),
        ("L6", json!({"plan":"world/effect-plan/v1","effects":[],"finish":false,"result":{},"world":{}})),
        ("L6", plan(json!([]), false, json!({"world":1}))),
        ("L7", plan(json!([]), false, Value::Null)),
        ("L7", plan(json!([read("a")]), false, json!({}))),
        ("L7", plan(json!([]), true, json!({}))),
    ];
    let before = world.log_len(&token).await;
    for (i, (law, plan)) in rows.into_iter().enumerate() {
        let answer = a2a(&world, &token, &format!("law-{i}"), "fx.scripted_read", json!({"plan": plan})).await;
        assert_eq!(a2a_error(&answer), (-32603, "transition execution failed".to_owned()), "row {i} ({law}): {answer}");
        let logged = world.core.stderr();
        let line = logged.lines().rev().find(|l| l.contains(&format!("law-{i}"))).unwrap_or_default();
        assert!(line.contains(&format!("plan law {law}")), "row {i}: the refusal names {law}: {line}");
    }
    assert_eq!(world.log_len(&token).await, before, "a refused plan commits nothing");
    // Nothing was debited: the whole budget is still there.
    let answer = a2a(&world, &token, "after-laws", "fx.read", json!({"path":"hello.txt"})).await;
    let (_, record) = only_effect(&world, &token, a2a_output(&answer)).await;
    assert_eq!(payload(&world, &token, &record).await["budgetBefore"], 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusal_plans_and_finish_phases_compose_the_output() {
    let (world, _root) = effect_world();
    let token = world.mint("ep1", &[&format!("{READ}:10")], 3600);
    let refusal = json!({"ok":false,"refused":"path \"/etc\" refused"});
    let answer =
        a2a(&world, &token, "refuse", "fx.scripted_read", json!({"plan": plan(json!([]), false, refusal.clone())}))
            .await;
    let output = a2a_output(&answer);
    assert_eq!(output["refused"], refusal["refused"], "{answer}");
    assert_eq!(output["world"]["effects"], json!([]));
    assert!(answer["result"]["metadata"]["entry_index"].is_i64(), "a refusal commits an entry");

    let read = plan(json!([effect("Workspace.Read", json!({"op":"read","path":"hello.txt"}))]), true, Value::Null);
    let answer = a2a(&world, &token, "finish", "fx.scripted_read", json!({"plan": read})).await;
    let output = a2a_output(&answer);
    assert_eq!(output["finished"], true, "{answer}");
    let results = output["results"].as_array().expect("the finish input's results");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["status"], "ok");
    assert_eq!(results[0]["effect"], "Workspace.Read");
    assert_eq!(results[0]["output"]["content"], "hello, world\n");
    let (status, record) = only_effect(&world, &token, output).await;
    assert_eq!((status.as_str(), results[0]["record"].as_str()), ("ok", Some(record.as_str())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_failure_after_the_effect_ran_is_effects_unrecorded_on_both_wires() {
    let (world, root) = effect_world();
    let token = world.mint("ep1", &[&format!("{WRITE}:10")], 3600);
    let before = world.log_len(&token).await;
    let mut bad_finish = write_plan("a.txt", "one");
    bad_finish["finish"] = json!(true);

    let answer =
        a2a(&world, &token, "unrecorded", "fx.scripted_write", json!({"plan": bad_finish, "finish": [1]})).await;
    let (code, message) = a2a_error(&answer);
    assert_eq!(code, -32603, "{answer}");
    let prefix = "effects were requested but the invocation was not confirmed committed; effect records: ";
    let record = message.strip_prefix(prefix).unwrap_or_else(|| panic!("{message}")).to_owned();
    assert!(record.starts_with("sha256:") && !record.contains(' '), "{message}");
    assert_eq!(std::fs::read_to_string(root.join("ep1/a.txt")).expect("the effect ran"), "one");
    assert_eq!(payload(&world, &token, &record).await["allowed"], true, "the record is durable");
    assert_eq!(world.log_len(&token).await, before, "nothing committed");
    // The task id is spent: a resend never runs the effect again.
    std::fs::write(root.join("ep1/a.txt"), "changed by hand").expect("edit");
    let answer =
        a2a(&world, &token, "unrecorded", "fx.scripted_write", json!({"plan": bad_finish, "finish": [1]})).await;
    assert_eq!(a2a_error(&answer), (-32603, "invocation was not committed; send a new task id".to_owned()));
    assert_eq!(std::fs::read_to_string(root.join("ep1/a.txt")).expect("file"), "changed by hand");

    let answer = mcp(&world, &token, "fx_dscripted_uwrite", json!({"plan": bad_finish, "finish": [1]})).await;
    assert_eq!(answer["error"], json!({"code":-32603,"message":"host callback failed"}), "{answer}");
    let logged = world.core.stderr();
    assert!(
        logged.lines().any(|l| l.contains("mcp refusal") && l.contains("effect records: [sha256:")),
        "the core's log names the records: {logged}"
    );
    assert_eq!(world.log_len(&token).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_allows_exactly_its_effects_across_restarts_and_new_sessions() {
    let (mut world, root) = effect_world();
    let token = world.mint("ep1", &[&format!("{READ}:3")], 3600);
    let mut statuses = Vec::new();
    for i in 0..4 {
        let answer = a2a(&world, &token, &format!("b-{i}"), "fx.read", json!({"path":"hello.txt"})).await;
        let (status, record) = only_effect(&world, &token, a2a_output(&answer)).await;
        let record = payload(&world, &token, &record).await;
        statuses.push((status, record["budgetBefore"].clone(), record["budgetAfter"].clone()));
    }
    let want = |s: &str, b: i64, a: i64| (s.to_owned(), json!(b), json!(a));
    assert_eq!(statuses, vec![want("ok", 3, 2), want("ok", 2, 1), want("ok", 1, 0), want("denied", 0, 0)]);
    let answer = a2a(&world, &token, "b-denied", "fx.read", json!({"path":"hello.txt"})).await;
    let output = a2a_output(&answer);
    assert_eq!(
        output.as_object().map(|o| o.len()),
        Some(1),
        "a denied effect without finish answers {{}} + world: {output}"
    );

    // The spend is durable: a restarted core and a new session for the episode see it.
    restart_core(&mut world, &root);
    let answer = a2a(&world, &token, "b-after-restart", "fx.read", json!({"path":"hello.txt"})).await;
    assert_eq!(only_effect(&world, &token, a2a_output(&answer)).await.0, "denied", "{answer}");
    let fresh = world.mint("ep1", &[&format!("{READ}:5")], 3600);
    let mut allowed = 0;
    for i in 0..3 {
        let answer = a2a(&world, &fresh, &format!("fresh-{i}"), "fx.read", json!({"path":"hello.txt"})).await;
        if only_effect(&world, &fresh, a2a_output(&answer)).await.0 == "ok" {
            allowed += 1;
        }
    }
    assert_eq!(allowed, 2, "a budget of 5 less the episode's spend of 3");
    let other = world.mint("ep2", &[&format!("{READ}:5")], 3600);
    let answer = a2a(&world, &other, "no-worktree", "fx.read", json!({"path":"hello.txt"})).await;
    let r8 = "transition declares an effect this daemon has no handler for";
    assert_eq!(a2a_error(&answer), (-32603, r8.to_owned()), "an episode without a worktree has no handlers");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r8_and_resends_never_run_an_effect_twice() {
    let (world, root) = effect_world();
    let token = world.mint("ep1", &[&format!("{READ}:10"), &format!("{WRITE}:10")], 3600);
    let answer = a2a(&world, &token, "r8", "fx.unhandled", json!({"plan": plan(json!([]), false, json!({}))})).await;
    let r8 = "transition declares an effect this daemon has no handler for";
    assert_eq!(a2a_error(&answer), (-32603, r8.to_owned()), "{answer}");

    let data = json!({"plan": write_plan("once.txt", "first")});
    let first = a2a(&world, &token, "once", "fx.scripted_write", data.clone()).await;
    assert_eq!(a2a_output(&first)["ok"], true, "{first}");
    std::fs::write(root.join("ep1/once.txt"), "changed by hand").expect("edit");
    let again = a2a(&world, &token, "once", "fx.scripted_write", data).await;
    assert_eq!(again["result"]["artifacts"], first["result"]["artifacts"], "the committed result comes back");
    assert_eq!(again["result"]["metadata"], first["result"]["metadata"]);
    assert_eq!(std::fs::read_to_string(root.join("ep1/once.txt")).expect("file"), "changed by hand");
    let other = a2a(&world, &token, "once", "fx.scripted_write", json!({"plan": write_plan("once.txt", "x")})).await;
    assert_eq!(a2a_error(&other), (-32602, "task id already used in this session".to_owned()));
}

/// Kills the world's core and serves its store again with the same flags.
fn restart_core(world: &mut World, root: &Path) {
    let ailang = world_tests::bin("ailang").display().to_string();
    let root = root.display().to_string();
    world.restart_core(&world_tests::bin("world-core"), &["--ailang-bin", &ailang, "--workspace-root", &root], &[]);
}

fn tool_plan(effect: &str, payload: Value) -> Value {
    plan(json!([{"id":"e1","effect":effect,"scope":"worktree","cost":1,"payload":payload}]), false, Value::Null)
}

/// The output of one scripted Ailang.* effect, after checking it committed and ran `ok`.
async fn tool(world: &World, token: &str, task: &str, effect: &str, payload: Value) -> Value {
    let answer = a2a(world, token, task, "fx.scripted_tools", json!({"plan": tool_plan(effect, payload)})).await;
    let output = a2a_output(&answer).clone();
    assert!(output["tool"].as_str().is_some_and(|t| t.starts_with("sha256:")), "{task}: {answer}");
    output
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ailang_tools_check_run_discover_and_stay_in_the_worktree() {
    let (world, root) = effect_world();
    let grants: Vec<String> = ["Ailang.Check", "Ailang.Run", "Ailang.Discover", "Ailang.CLI"]
        .iter()
        .map(|e| format!("{e}=worktree:20"))
        .collect();
    let grants: Vec<&str> = grants.iter().map(String::as_str).collect();
    let token = world.mint("ep1", &grants, 3600);
    let ep = root.join("ep1");
    std::fs::write(ep.join("bad.ail"), "module bad\n\nexport func main(input: string) -> string {\n  1 + \"x\"\n}\n")
        .unwrap();
    let cat = "module cat\n\nimport std/fs (readFile)\n\nexport func main(path: string) -> string ! {FS} {\n  readFile(path)\n}\n";
    std::fs::write(ep.join("cat.ail"), cat).unwrap();
    std::fs::write(ep.join("in.txt"), "inside").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", ep.join("out-link")).unwrap();

    let checked = tool(&world, &token, "check-bad", "Ailang.Check", json!({"op":"ai_check","path":"bad.ail"})).await;
    let report: Value = serde_json::from_str(checked["stdout"].as_str().unwrap_or_default()).expect("a check report");
    assert_eq!(report["check"]["passed"], false, "{checked}");
    assert!(report["check"]["error_count"].as_i64().unwrap_or_default() >= 1, "{report}");
    assert_eq!(report["verify"]["available"], false, "Z3 is not run, and the report says so: {report}");
    assert!(report["verify"]["reason"].as_str().is_some_and(|r| r.contains("not run")), "{report}");
    assert_eq!(
        checked["sha256"],
        json!(world_model::HashRef::of(&std::fs::read(ep.join("bad.ail")).unwrap()).to_string())
    );
    let checked = tool(&world, &token, "check-good", "Ailang.Check", json!({"op":"ai_check","path":"cat.ail"})).await;
    assert_eq!(checked["exit_code"], 0, "{checked}");
    let refused = tool(&world, &token, "check-old", "Ailang.Check", json!({"op":"check","path":"cat.ail"})).await;
    assert!(refused["refused"].as_str().is_some_and(|r| r.contains("ai_check")), "{refused}");

    let ran = tool(&world, &token, "run-in", "Ailang.Run", json!({"path":"cat.ail","args_json":"\"in.txt\""})).await;
    assert_eq!((ran["exit_code"].clone(), ran["stdout"].as_str()), (json!(0), Some("inside\n")), "{ran}");
    assert_eq!((ran["admitted"].clone(), ran["limit"].clone()), (json!(true), Value::Null), "{ran}");
    assert_eq!(ran["decision"]["program_effects"], json!(["FS"]), "{ran}");
    assert_eq!(ran["sha256"], json!(world_model::HashRef::of(cat.as_bytes()).to_string()), "{ran}");
    // A program declaring an effect beyond IO and FS is not run.
    let net = "module net\n\nexport func main(input: string) -> string ! {Net} {\n  input\n}\n";
    std::fs::write(ep.join("net.ail"), net).unwrap();
    let ran = tool(&world, &token, "run-net", "Ailang.Run", json!({"path":"net.ail"})).await;
    assert_eq!((ran["admitted"].clone(), ran["stdout"].clone()), (json!(false), json!("")), "{ran}");
    assert_eq!(ran["decision"]["missing_from_policy"], json!(["Net"]), "{ran}");
    let ran = tool(&world, &token, "run-out", "Ailang.Run", json!({"path":"cat.ail","args_json":"\"out-link\""})).await;
    assert_ne!(ran["exit_code"], 0, "a symlink out of the worktree is refused: {ran}");
    assert!(ran["stderr"].as_str().is_some_and(|e| e.contains("outside the sandbox")), "{ran}");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "secret").unwrap();
    std::fs::hard_link(outside.path().join("secret"), ep.join("hard")).unwrap();
    let ran = tool(&world, &token, "run-hard", "Ailang.Run", json!({"path":"cat.ail","args_json":"\"hard\""})).await;
    assert!(!ran["stdout"].as_str().unwrap_or_default().contains("secret"), "a hard link out is refused: {ran}");
    // Writes never reach a protected directory, directly or through a symlink inside.
    let writer = "module writer\n\nimport std/fs (writeFile)\n\nexport func main(path: string) -> string ! {FS} {\n  writeFile(path, \"x\");\n  \"done\"\n}\n";
    std::fs::write(ep.join("writer.ail"), writer).unwrap();
    std::fs::create_dir(ep.join(".git")).unwrap();
    std::os::unix::fs::symlink(".git", ep.join("docs")).unwrap();
    for (task, target) in [("w-git", ".git/config"), ("w-GIT", ".GIT/config"), ("w-link", "docs/config")] {
        let args = format!("\"{target}\"");
        let ran = tool(&world, &token, task, "Ailang.Run", json!({"path":"writer.ail","args_json": args})).await;
        assert_ne!(ran["exit_code"], 0, "{task}: {ran}");
    }
    assert!(!ep.join(".git/config").exists(), "nothing was written under .git");
    let ran = tool(&world, &token, "w-ok", "Ailang.Run", json!({"path":"writer.ail","args_json":"\"out.txt\""})).await;
    assert_eq!(ran["exit_code"], 0, "{ran}");
    assert_eq!(std::fs::read_to_string(ep.join("out.txt")).unwrap(), "x");
    // The source itself is read through the confined worktree, never by the interpreter.
    let ran = tool(&world, &token, "run-link", "Ailang.Run", json!({"path":"out-link"})).await;
    assert_eq!(ran["ok"], false, "{ran}");

    let found = tool(&world, &token, "discover", "Ailang.Discover", json!({"op":"builtins_list"})).await;
    let inventory = found["stdout"].as_str().unwrap_or_default();
    assert!(inventory.starts_with("Total: ") && inventory.contains(" builtins\n\n"), "{found}");
    assert!(inventory.lines().any(|l| l.trim_start().starts_with("readFile") && l.contains("[fs] std/fs")), "{found}");
    let found =
        tool(&world, &token, "discover-json", "Ailang.Discover", json!({"op":"builtins_list","flags":{"json":""}}))
            .await;
    assert!(found["stdout"].as_str().is_some_and(|s| s.starts_with("{\"builtins\":[")), "{found}");
    let version = tool(&world, &token, "cli", "Ailang.CLI", json!({"op":"version"})).await;
    assert!(version["stdout"].as_str().is_some_and(|s| !s.is_empty()), "{version}");
    let fmt = tool(&world, &token, "cli-fmt", "Ailang.CLI", json!({"op":"fmt","path":"cat.ail"})).await;
    assert!(fmt["refused"].as_str().is_some_and(|r| r.contains("not served by World-rs")), "{fmt}");
    let answer = a2a(
        &world,
        &token,
        "cli-read",
        "fx.scripted_tools",
        json!({"plan": tool_plan("Ailang.CLI", json!({"op":"read"}))}),
    )
    .await;
    let (status, _) = only_effect(&world, &token, a2a_output(&answer)).await;
    assert_eq!(status, "failed", "an op outside the allow-list is a failed effect: {answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_walks_every_object_of_an_effectful_call_and_marks_a_tampered_one() {
    let (world, _root) = effect_world();
    let token = world.mint("ep1", &[&format!("{READ}:10")], 3600);
    let answer = a2a(&world, &token, "why-1", "fx.read", json!({"path":"hello.txt"})).await;
    let (_, record) = only_effect(&world, &token, a2a_output(&answer)).await;
    let entry = answer["result"]["metadata"]["entry_index"].as_i64().expect("entry index");

    let why = |args: &[&str]| {
        let output =
            std::process::Command::new(world_tests::bin("world-core")).arg("why").args(args).output().expect("why");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let store = world.store.display().to_string();
    let core = format!("http://{}", world.core_addr);
    for args in [
        vec![record.as_str(), "--store", &store, "--json"],
        vec!["a2a:ep1:why-1", "--store", &store, "--json"],
        vec![record.as_str(), "--core", &core, "--session", &token, "--json"],
    ] {
        let (ok, stdout, stderr) = why(&args);
        assert!(ok, "{args:?}: {stderr}");
        let walk: Value = serde_json::from_str(&stdout).expect("why --json");
        assert_eq!(walk["entry"]["index"], entry, "{args:?}");
        assert_eq!(walk["entry"]["verified"], "ok");
        let roles: Vec<&str> =
            walk["objects"].as_array().unwrap().iter().map(|o| o["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["record", "input", "output", "plan", "effect 0", "request", "result", "source"], "{args:?}");
        assert!(walk["objects"].as_array().unwrap().iter().all(|o| o["verified"] == "ok"), "{stdout}");
    }

    // Tamper with the effect's result behind the store's back: the walk marks it and fails.
    let result = payload(&world, &token, &record).await["resultRef"].as_str().unwrap().to_owned();
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&format!("sqlite://{store}")).await.unwrap();
    sqlx::query("UPDATE objects SET payload = $1 WHERE hash = $2")
        .bind(b"{\"forged\":true}".to_vec())
        .bind(&result)
        .execute(&mut conn)
        .await
        .unwrap();
    let (ok, stdout, _) = why(&[&entry.to_string(), "--store", &store]);
    assert!(!ok, "a tampered walk fails");
    let line = stdout.lines().find(|l| l.contains(&result)).expect("the result's line");
    assert!(line.contains("MISMATCH"), "{stdout}");
}
