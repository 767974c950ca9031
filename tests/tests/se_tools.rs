//! The se-tools manifest holds the eight descriptors with the shape the coding tools and the
//! se-tools preset rely on (the modules' own checks and inline tests run in
//! packages/ailang/tests/se_tools.rs).

use std::path::Path;

use serde_json::Value;

const MODULES: [&str; 8] = ["read", "write", "edit", "check", "run", "builtins_search", "examples_search", "cli"];

fn package() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packages/se-tools")
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
