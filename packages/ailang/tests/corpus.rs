//! The corpus modules: `ailang test` passes on each, failures are reported one per line,
//! and `ailang check` reports structural errors with exact codes.

mod common;
use common::*;
use std::process::Command;

fn ailang(args: &[&str]) -> Outcome {
    Command::new(BIN).args(args).env("AILANG_RELAX_MODULES", "1").output().expect("spawn").into()
}

#[test]
fn every_corpus_module_passes_its_inline_tests() {
    let mut seen = 0;
    for entry in std::fs::read_dir(corpus_dir()).expect("corpus dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "ail") {
            seen += 1;
            let out = ailang(&["test", path.to_str().expect("utf-8 path")]);
            let last = out.stdout.lines().last().unwrap_or("").to_string();
            assert_eq!(out.code, 0, "{}: {}{}", path.display(), out.stdout, out.stderr);
            assert!(last.ends_with(" passed, 0 failed") && !last.starts_with("0 "), "{}: {last}", path.display());
        }
    }
    assert!(seen >= 2, "the corpus has modules");
}

#[test]
fn corpus_plan_runs_as_a_transition() {
    let source = std::fs::read_to_string(corpus_dir().join("plan.ail")).expect("plan.ail");
    let out = transition(&source, r#"{"mode":"r","path":"x"}"#);
    assert_eq!((out.code, out.stdout.as_str()), (0, "{\"path\":\"x\",\"ok\":true}\n"), "{}", out.stderr);
}

#[test]
fn test_reports_each_failure_and_the_totals() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("bad.ail");
    let source = "module bad\nexport func inc(x: int) -> int\n  tests [ (1, 2), (2, 4), (3, 4), (0, 1) ]\n{ x + 1 - 0 / x }\ntest \"truth\" = 1 == 2\n";
    std::fs::write(&file, source).expect("write");
    let out = ailang(&["test", file.to_str().expect("path")]);
    assert_eq!(out.code, 1);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", out.stdout);
    assert_eq!(lines[0], "FAIL inc row 2 (line 3): input 2: expected 4, got 3");
    assert!(lines[1].starts_with("FAIL inc row 4 (line 3): input 0: error: RT_DIV0"), "{}", lines[1]);
    assert_eq!(lines[2], "FAIL test \"truth\" (line 5): got false");
    assert_eq!(lines[3], "2 passed, 3 failed");
}

fn check(source: &str, json: bool) -> Outcome {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("m.ail");
    std::fs::write(&file, source).expect("write");
    let path = file.to_str().expect("path").to_string();
    let mut args = vec!["check"];
    if json {
        args.push("--json");
    }
    args.push(&path);
    let out = ailang(&args);
    Outcome { stderr: out.stderr.replace(&path, "m.ail"), stdout: out.stdout.replace(&path, "m.ail"), code: out.code }
}

#[test]
fn check_accepts_the_corpus() {
    for name in ["shapes.ail", "plan.ail"] {
        let path = corpus_dir().join(name);
        let out = ailang(&["check", path.to_str().expect("path")]);
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
        assert!(out.stdout.ends_with("\n✓ No errors found!\n"), "{}", out.stdout);
    }
}

#[test]
fn check_reports_structural_errors_with_their_codes() {
    let cases: &[(&str, &str)] = &[
        ("module m\nimport world/logepoch (x)\n", "Error: LDR001: module not found: world/logepoch at m.ail:2:1\n"),
        (
            "module m\nimport std/json (encode, nope)\n",
            "Error: IMP011: 'nope' is not exported by std/json at m.ail:2:26\n",
        ),
        ("module m\nfunc f(x: int) -> int = y\n", "Error: TC002: unbound variable: y at m.ail:2:25\n"),
        (
            "module m\nfunc f(x: int) -> int = match x { Foo(a) => a, _ => 0 }\n",
            "Error: TC002: unknown constructor: Foo at m.ail:2:35\n",
        ),
        (
            "module m\nfunc f() -> Option[int] = Some(1, 2)\n",
            "Error: TC001: constructor Some expects 1 argument(s), got 2 at m.ail:2:27\n",
        ),
        (
            "module m\nfunc f() -> int = 1\nfunc f() -> int = 2\n",
            "Error: MOD007: duplicate definition of 'f' (first defined at line 2) at m.ail:3:1\n",
        ),
        (
            "module m\nimport std/string (length)\nfunc length(x: int) -> int = x\n",
            "Error: MOD015: 'length' is imported from std/string and also defined in this module at m.ail:3:1\n",
        ),
        (
            "module m\nfunc f() -> int = (1 + \n",
            "Error: PAR002: expected an expression, found end of input at m.ail:3:1\n",
        ),
        (
            "module m\nfunc f() -> string = \"bad \\q escape\"\n",
            "Error: PAR_ILLEGAL_TOKEN: unknown escape sequence \\q at m.ail:2:27\n",
        ),
        (
            "module m\nfunc f() -> int { let x = 1 x }\n",
            "Error: PAR020: expected ';' or a new line between statements, found 'x' at m.ail:2:29\n",
        ),
        (
            "module m\nimport std/my-mod\n",
            "Error: PAR_HYPHEN_IN_IMPORT: module path segments cannot contain '-'; use '_' at m.ail:2:14\n",
        ),
    ];
    for (source, want) in cases {
        let out = check(source, false);
        assert_eq!((out.code, out.stderr.as_str()), (1, *want), "{source}");
    }
}

#[test]
fn check_json_lists_every_error() {
    let out = check("module m\nimport world/x (a)\nfunc f() -> int = zz\n", true);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stdout,
        "{\n  \"file\": \"m.ail\",\n  \"passed\": false,\n  \"error_count\": 2,\n  \"errors\": [\n    {\n      \"code\": \"LDR001\",\n      \"message\": \"module not found: world/x\",\n      \"file\": \"m.ail\",\n      \"line\": 2,\n      \"column\": 1\n    },\n    {\n      \"code\": \"TC002\",\n      \"message\": \"unbound variable: zz\",\n      \"file\": \"m.ail\",\n      \"line\": 3,\n      \"column\": 19\n    }\n  ],\n  \"warnings\": []\n}\n"
    );
    let ok = check("module m\nfunc f() -> int = 1\n", true);
    assert_eq!(ok.code, 0);
    assert_eq!(
        ok.stdout,
        "{\n  \"file\": \"m.ail\",\n  \"passed\": true,\n  \"error_count\": 0,\n  \"errors\": [],\n  \"warnings\": []\n}\n"
    );
}

#[test]
fn check_never_runs_code() {
    let out = check("module m\nexport func main(s: string) -> string = show(1 / 0)\n", false);
    assert_eq!(out.code, 0, "{}", out.stderr);
}
