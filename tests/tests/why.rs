//! `world-core why` tells a call's story in words: a read, a run and a read the budget denied,
//! made through the coding tools over MCP against real processes, each explained from the
//! store and from a serving core, with the refs of what each line was read from beside it.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use world_tests::{Setup, World};

const PROGRAM: &str = "module hello\n\nexport func main(input: string) -> string {\n  \"hi ${input}\"\n}\n";

/// One MCP `tools/call`; the tool's output object (its structured content).
async fn call(world: &World, token: &str, tool: &str, arguments: Value) -> Value {
    world.mcp_call(token, tool, arguments).await["result"]["structuredContent"].clone()
}

/// The ref of the single effect record in an output's `world` block.
fn record_of(output: &Value) -> String {
    output["world"]["effects"][0]["record"]
        .as_str()
        .unwrap_or_else(|| panic!("no effect record in {output}"))
        .to_owned()
}

/// `world-core why` with `args`: (succeeded, stdout, stderr).
fn why(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(world_tests::bin("world-core")).arg("why").args(args).output().expect("run why");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The story's line that starts (after its indent) with `start`.
fn line<'a>(story: &'a str, start: &str) -> &'a str {
    story.lines().find(|l| l.trim_start().starts_with(start)).unwrap_or_else(|| panic!("no line {start:?} in\n{story}"))
}

/// The line right after the one starting with `start`.
fn after<'a>(story: &'a str, start: &str, n: usize) -> &'a str {
    let lines: Vec<&str> = story.lines().collect();
    let at = lines.iter().position(|l| l.trim_start().starts_with(start)).unwrap_or_else(|| panic!("{start:?}"));
    lines.get(at + n).unwrap_or_else(|| panic!("nothing {n} lines after {start:?} in\n{story}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_tells_a_read_a_run_and_a_denial_in_words_with_the_refs_beside() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("ep1")).unwrap();
    std::fs::write(root.path().join("ep1/hello.ail"), PROGRAM).unwrap();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packages/se-tools/transitions.json");
    let root_arg = root.path().display().to_string();
    let world =
        World::published(&manifest, 8, Setup { core_args: &["--workspace-root", &root_arg], ..Setup::default() });
    let mut mint = Command::new(world_tests::bin("world-core"));
    mint.args(["session", "mint", "--episode", "ep1", "--preset", "se-tools", "--budget", "1", "--store"])
        .arg(&world.store);
    let minted = world_tests::run_attended(mint, "y\n");
    assert!(minted.status.success(), "{}", minted.stderr);
    let token = minted.stdout.trim().to_owned();

    let read = call(&world, &token, "ailang-read", json!({"path": "hello.ail"})).await;
    assert_eq!(read["content"], PROGRAM, "{read}");
    let ran = call(&world, &token, "ailang-run", json!({"path": "hello.ail", "args_json": "\"why\""})).await;
    assert_eq!(ran["exit_code"], 0, "{ran}");
    let denied = call(&world, &token, "ailang-read", json!({"path": "hello.ail"})).await;
    assert_eq!(denied["world"]["effects"][0]["status"], "denied", "{denied}");

    let store = world.store.display().to_string();
    let core = format!("http://{}", world.core_addr);
    let record = record_of(&read);
    for source in [vec!["--store", store.as_str()], vec!["--core", core.as_str(), "--session", token.as_str()]] {
        let args: Vec<&str> = std::iter::once(record.as_str()).chain(source.iter().copied()).collect();
        let (ok, story, stderr) = why(&args);
        assert!(ok, "{args:?}: {stderr}\n{story}");
        let walk: Value = serde_json::from_str(&why(&[args.as_slice(), &["--json"]].concat()).1).expect("why --json");
        let object = |role: &str| {
            walk["objects"].as_array().unwrap().iter().find(|o| o["role"] == role).unwrap()["ref"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert!(line(&story, "ailang-read over MCP, episode ep1, invocation mcp:ep1:").len() > 40, "{story}");
        let arguments = line(&story, "arguments");
        assert!(arguments.contains(r#"{"path":"hello.ail"}"#) && arguments.contains(&object("input")), "{story}");
        let effect = line(&story, "effect e1");
        assert!(effect.contains("Workspace.Read at worktree: read hello.ail"), "{story}");
        assert!(effect.contains(&format!("record   {record}  ok")), "{story}");
        let status = after(&story, "effect e1", 1);
        assert!(status.trim_start().starts_with(&format!("ok — {} bytes", PROGRAM.len())), "{story}");
        assert!(status.contains(&format!("request  {}  ok", object("request"))), "{story}");
        // The read's sha256 is shown when its result carries one.
        let result: Value = walk["call"]["effects"][0].clone();
        if let Some(sha256) = result["sha256"].as_str() {
            assert!(status.contains(sha256), "{story}");
        }
        let budget = after(&story, "effect e1", 2);
        assert!(budget.trim_start().starts_with("cost 1, budget 1 → 0"), "{story}");
        assert!(budget.contains(&format!("result   {}  ok", object("result"))), "{story}");
        let outcome = line(&story, "outcome");
        assert!(outcome.contains("outcome     ok") && outcome.contains(&object("output")), "{story}");
        assert!(line(&story, "source").contains("ailang-read's source"), "{story}");

        assert_eq!(walk["call"]["transition"], "ailang-read");
        assert_eq!(walk["call"]["surface"], "MCP");
        assert_eq!(walk["call"]["arguments"], json!({"path": "hello.ail"}));
        let effect = &walk["call"]["effects"][0];
        assert_eq!(
            (&effect["path"], &effect["status"], &effect["bytes"], &effect["budgetBefore"], &effect["budgetAfter"]),
            (&json!("hello.ail"), &json!("ok"), &json!(PROGRAM.len()), &json!(1), &json!(0)),
            "{walk}"
        );
    }

    let (ok, story, stderr) = why(&[&record_of(&ran), "--store", &store]);
    assert!(ok, "{stderr}\n{story}");
    assert!(line(&story, "ailang-run over MCP, episode ep1").contains("invocation mcp:ep1:"), "{story}");
    assert!(line(&story, "arguments").contains(r#"{"args_json":"\"why\"","path":"hello.ail"}"#), "{story}");
    assert!(line(&story, "effect e1").contains(r#"Ailang.Run at worktree: run hello.ail with args "why""#), "{story}");
    let status = after(&story, "effect e1", 1).trim_start();
    assert!(status.starts_with("ok — ") && status.contains("exit code 0"), "{story}");
    assert!(after(&story, "effect e1", 2).trim_start().starts_with("cost 1, budget 1 → 0"), "{story}");
    assert!(line(&story, "outcome").contains("exit_code 0"), "{story}");

    // A denial stores its record only; the story says why and the walk still verifies.
    let (ok, story, stderr) = why(&[&record_of(&denied), "--store", &store]);
    assert!(ok, "a denied effect's walk verifies: {stderr}\n{story}");
    let status = after(&story, "effect e1", 1).trim_start();
    assert!(status.starts_with("denied: the episode has spent this grant's budget (denied:budget)"), "{story}");
    assert!(after(&story, "effect e1", 2).trim_start().starts_with("cost 1, budget 0 → 0"), "{story}");
    assert!(!story.contains("request  sha256:"), "a denial has no stored request: {story}");
}
