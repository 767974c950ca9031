//! The se-tools package: every module passes `ailang check` and its inline tests (which pin
//! the exact plan bytes of an admitted call and of each refusal), and the manifest holds the
//! eight descriptors with the shape the coding tools rely on.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use world_tests::bin;

const MODULES: [&str; 8] = ["read", "write", "edit", "check", "run", "builtins_search", "examples_search", "cli"];

fn package() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packages/se-tools")
}

#[test]
fn every_module_checks_and_passes_its_inline_tests() {
    for module in MODULES {
        let file = format!("se_tools/{module}.ail");
        for verb in ["check", "test"] {
            let output = Command::new(bin("ailang")).current_dir(package()).args([verb, &file]).output().unwrap();
            assert!(
                output.status.success(),
                "ailang {verb} {file}:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

#[test]
fn the_manifest_holds_the_eight_coding_tools() {
    let manifest: Vec<Value> =
        serde_json::from_slice(&std::fs::read(package().join("transitions.json")).unwrap()).expect("a JSON array");
    let ids: Vec<&str> = manifest.iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "ailang-read",
            "ailang-write",
            "ailang-edit",
            "ailang-check",
            "ailang-run",
            "builtins-search",
            "examples-search",
            "ailang-cli"
        ]
    );
    for (descriptor, module) in manifest.iter().zip(MODULES) {
        let id = descriptor["id"].as_str().unwrap();
        assert_eq!(descriptor["transitionFnFile"], format!("packages/se-tools/se_tools/{module}.ail"), "{id}");
        assert_eq!(descriptor["inputSchema"]["additionalProperties"], false, "{id}");
        assert_eq!(descriptor["outputSchema"]["required"], serde_json::json!(["world"]), "{id}");
        let effect = &descriptor["access"]["effect"];
        assert_eq!(descriptor["access"]["cost"], 0, "{id}");
        assert_eq!(descriptor["access"]["scope"], "worktree", "{id}");
        assert_eq!(
            descriptor["declaredEffects"],
            serde_json::json!([{"effect": effect, "scope": "worktree", "cost": 1}]),
            "{id}"
        );
        assert!(world_model::SE_TOOLS_EFFECTS.contains(&effect.as_str().unwrap()), "{id}");
        assert!(descriptor["description"].as_str().unwrap().len() > 80, "{id} tells an agent what it does");
    }
}
