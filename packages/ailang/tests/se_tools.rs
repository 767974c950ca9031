//! The se-tools package (`packages/se-tools`) under this interpreter: each module, copied
//! alone into an empty root as publication checks it, passes `check` and its inline tests
//! (which pin the exact plan bytes of an admitted call and of each refusal); the shared
//! contract is byte-identical in all eight; and each descriptor of `transitions.json` agrees
//! with its module (id, admitted argument keys, effect).

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The modules in manifest order, with their transition ids.
const MODULES: [(&str, &str); 8] = [
    ("read", "ailang-read"),
    ("write", "ailang-write"),
    ("edit", "ailang-edit"),
    ("check", "ailang-check"),
    ("run", "ailang-run"),
    ("builtins_search", "builtins-search"),
    ("examples_search", "examples-search"),
    ("cli", "ailang-cli"),
];

const SHARED_START: &str = "-- The shared contract of the coding tools";
const SHARED_END: &str = "-- End of the shared contract.";

fn package() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../se-tools")
}

fn source(module: &str) -> String {
    std::fs::read_to_string(package().join(format!("se_tools/{module}.ail"))).expect("module source")
}

/// The text between `start` (inclusive) and `end` (exclusive) of `text`.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text.find(start).unwrap_or_else(|| panic!("{start:?} missing"));
    let to = text[from..].find(end).unwrap_or_else(|| panic!("{end:?} missing")) + from;
    &text[from..to]
}

#[test]
fn every_module_checks_alone_and_passes_its_inline_tests() {
    for (module, _) in MODULES {
        let root = tempfile::tempdir().expect("empty root");
        std::fs::create_dir(root.path().join("se_tools")).expect("module dir");
        let file = format!("se_tools/{module}.ail");
        std::fs::write(root.path().join(&file), source(module)).expect("copy module");
        for verb in ["check", "test"] {
            let out: Outcome = Command::new(BIN)
                .current_dir(root.path())
                .env_clear()
                .env("AILANG_CACHE_DIR", root.path().join(".cache"))
                .args([verb, &file])
                .output()
                .expect("spawn")
                .into();
            assert_eq!(out.code, 0, "ailang {verb} {file}:\n{}{}", out.stdout, out.stderr);
            if verb == "test" {
                assert!(out.stdout.contains(" passed, 0 failed"), "ailang test {file}:\n{}", out.stdout);
            }
        }
    }
}

#[test]
fn the_shared_contract_is_byte_identical_in_every_module() {
    let reference = source("read");
    let imports = |text: &str| text.lines().filter(|l| l.starts_with("import ")).take(4).collect::<Vec<_>>().join("\n");
    for (module, _) in MODULES {
        let text = source(module);
        assert_eq!(imports(&text), imports(&reference), "{module}: the shared imports");
        let (ours, theirs) = (between(&text, SHARED_START, SHARED_END), between(&reference, SHARED_START, SHARED_END));
        if let Some((n, (a, b))) = ours.lines().zip(theirs.lines()).enumerate().find(|(_, (a, b))| a != b) {
            panic!("{module}: line {} of the shared contract differs from read.ail's:\n  {a}\n  {b}", n + 1);
        }
        assert_eq!(ours, theirs, "{module}: the shared contract differs from read.ail's in length");
    }
}

#[test]
fn each_descriptor_agrees_with_its_module() {
    let manifest: Value = serde_json::from_slice(&std::fs::read(package().join("transitions.json")).expect("manifest"))
        .expect("manifest JSON");
    let descriptors = manifest.as_array().expect("a JSON array of descriptors");
    assert_eq!(descriptors.len(), MODULES.len());
    for (descriptor, (module, id)) in descriptors.iter().zip(MODULES) {
        assert_eq!(descriptor["id"], id);
        assert_eq!(descriptor["transitionFnFile"], format!("packages/se-tools/se_tools/{module}.ail"), "{id}");
        assert!(descriptor["title"].as_str().is_some_and(|t| !t.is_empty()), "{id}: title");
        let description = descriptor["description"].as_str().expect("description");
        for fact in ["Unknown argument keys are refused", "from the session's budget", "one World log entry", "`world`"]
        {
            assert!(description.contains(fact), "{id}: the description says {fact:?}");
        }

        // Input: exactly the keys the module's plan admits, nothing else.
        let input = &descriptor["inputSchema"];
        assert_eq!(input["type"], "object", "{id}");
        assert_eq!(input["additionalProperties"], false, "{id}");
        let text = source(module);
        let call = between(&text, &format!("dispatch(input, \"{id}\", ["), "]");
        let admitted: Vec<&str> = call.rsplit('[').next().unwrap().split(", ").map(|k| k.trim_matches('"')).collect();
        let mut properties: Vec<&str> =
            input["properties"].as_object().expect("properties").keys().map(String::as_str).collect();
        let mut sorted = admitted.clone();
        sorted.sort_unstable();
        properties.sort_unstable();
        assert_eq!(properties, sorted, "{id}: schema properties vs the plan's admitted keys");
        for required in input["required"].as_array().expect("required") {
            let key = required.as_str().unwrap();
            assert!(text.contains(&format!("requiredString(args, \"{key}\")")), "{id}: {key} is required by the plan");
        }

        // Output: `world` is always there.
        let output = &descriptor["outputSchema"];
        assert_eq!(output["type"], "object", "{id}");
        assert_eq!(output["required"], serde_json::json!(["world"]), "{id}");
        for common in ["ok", "refused", "world"] {
            assert!(output["properties"][common].is_object(), "{id}: output property {common}");
        }

        // Access at cost 0, one declared effect at cost 1, and that is the effect the plan asks for.
        let effect = descriptor["access"]["effect"].as_str().expect("access effect");
        assert_eq!(descriptor["access"], serde_json::json!({"effect": effect, "scope": "worktree", "cost": 0}), "{id}");
        assert_eq!(
            descriptor["declaredEffects"],
            serde_json::json!([{"effect": effect, "scope": "worktree", "cost": 1}]),
            "{id}"
        );
        assert!(text.contains(&format!("effectPlan(\"{effect}\", ")), "{id}: the plan requests {effect}");
        assert_eq!(text.matches("effectPlan(\"").count(), text.matches(&format!("effectPlan(\"{effect}\"")).count());
    }
}
