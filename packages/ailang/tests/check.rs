//! The type checker through the real binary: ill-typed programs are refused with the
//! expected code at the expected position, well-typed ones (every corpus module, example
//! and fixture the project runs) pass, `run` refuses before evaluating, and `--json`
//! carries suggestions and warnings.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;

fn ailang(args: &[&str]) -> Outcome {
    Command::new(BIN).args(args).env("AILANG_RELAX_MODULES", "1").output().expect("spawn").into()
}

/// `ailang check --json` on `source`; the (code, line, column) of every error.
fn errors_of(source: &str) -> (Vec<(String, u64, u64)>, String) {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("m.ail");
    std::fs::write(&file, source).expect("write");
    let out = ailang(&["check", "--json", file.to_str().expect("path")]);
    let mut found = Vec::new();
    for chunk in out.stdout.split("\"code\": ").skip(1) {
        let code = chunk.split('"').nth(1).unwrap_or("").to_string();
        let num = |key: &str| {
            chunk
                .split(&format!("\"{key}\": "))
                .nth(1)
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        found.push((code, num("line"), num("column")));
    }
    (found, out.stdout)
}

#[test]
fn ill_typed_programs_are_refused_with_their_code_and_position() {
    let cases: &[(&str, &str, u64, u64)] = &[
        ("func f(x: int) -> string = x", "TC001", 2, 28),
        ("func f(x: int) -> float = x + 1.5", "TC001", 2, 31),
        ("func f(s: string) -> string = s + \"a\"", "TC010", 2, 31),
        ("func f(s: string) -> string = s ++ \"a\"", "TC001", 2, 31),
        ("func f(r: {a: int}) -> int = r.b", "TC001", 2, 30),
        ("func f(x: int) -> int {\n  let r = {name: \"a\"};\n  r.nmae\n}", "TC001", 4, 3),
        ("export func main(s: string) -> string {\n  println(s);\n  s\n}", "TC009", 3, 3),
        (
            "import std/list (map)\nexport func main(s: string) -> string ! {IO} {\n  let u = map(\\x. println(x), [s]);\n  s\n}",
            "TC009",
            4,
            19,
        ),
        ("func f(x: Option[int]) -> int = x + 1", "TC010", 2, 33),
        ("func f(g: (int) -> int) -> bool = g == g", "TC010", 2, 35),
        ("func f(x: int) -> int = length(x)", "TC002", 2, 25),
        ("func f(x: Foo) -> int = 1", "TC002", 2, 8),
        ("func f(x: int) -> int = f(1, 2)", "TC001", 2, 25),
        ("func f(x: int) -> int = 1\ntest \"t\" = f(1)", "TC001", 3, 12),
        ("func f(x: int) -> int tests [(\"a\", 1)] = 1", "TC001", 2, 31),
        ("func f(xs: [int]) -> [int] = [1, \"a\"]", "TC010", 2, 34),
        ("func f(x: int) -> int = if x then 1 else 2", "TC001", 2, 28),
        ("func f(x: int) -> int = if x > 0 then 1 else \"no\"", "TC010", 2, 46),
        ("func f(x: int) -> int = match x { 0 => 1, _ => \"2\" }", "TC010", 2, 48),
        ("func f(x: [int]) -> int = match x { \"a\" :: _ => 1, _ => 0 }", "TC001", 2, 37),
        ("func f(x: int) -> int = x(1)", "TC001", 2, 25),
        ("func f(x: int) -> int requires { x } = x", "TC001", 2, 34),
        ("func f(x: int) -> int = \\y. y", "TC001", 2, 25),
        ("func f() -> int = let g = \\x. x(x) in 1", "TC004", 2, 33),
        ("func f(p: {name: string}) -> string = p.name ++ [1]", "TC001", 2, 39),
        ("func f(x: int) -> bool = x < \"a\"", "TC001", 2, 30),
        ("func f(x: Option[int]) -> bool = x < x", "TC010", 2, 34),
        ("import std/json (jnum, Json)\nfunc f(n: int) -> Json = jnum(n)", "TC001", 3, 31),
    ];
    let mut failures = Vec::new();
    for (body, code, line, col) in cases {
        let source = format!("module m\n{body}\n");
        let (found, raw) = errors_of(&source);
        let want = (code.to_string(), *line, *col);
        if found.first() != Some(&want) {
            failures.push(format!("{body}\n  want {want:?}\n  got  {found:?}\n{raw}"));
        }
    }
    assert!(failures.is_empty(), "{} case(s) differ:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn well_typed_programs_pass() {
    let bodies = [
        // numeric defaulting: an int literal fits a float place
        "import std/json (jnum, Json)\nfunc f() -> Json = jnum(1)",
        "func f(x: float) -> float = x * 2 + 1",
        // let-generalisation
        "func f() -> string {\n  let id = \\x. x;\n  \"${show(id(1))}${id(\"s\")}\"\n}",
        // row polymorphism, open and closed
        "func name(r: {name: string, ...}) -> string = r.name\nfunc f() -> string = name({name: \"a\", age: 3})",
        "type P = { name: string }\nfunc f(p: P) -> P = { p | name: \"b\" }",
        // a wrapper around a record allows field access
        "type W = W({ inner: int })\nfunc f(w: W) -> int = w.inner",
        // lambdas learn their parameter from the other arguments
        "import std/json (asObject, Json)\nimport std/list (map)\nfunc f(j: Json) -> [string] = match asObject(j) { Some(es) => map(\\e. e.key, es), None => [] }",
        // effect polymorphism through mapE, effects declared
        "import std/list (mapE)\nimport std/io (println)\nexport func main(s: string) -> string ! {IO} {\n  let u = mapE(\\x. println(x), [s]);\n  s\n}",
        // contracts see result; tests rows spread tuples
        "func clamp(lo: int, hi: int, x: int) -> int\n  requires { lo <= hi }\n  ensures { result >= lo }\n  tests [ ((0, 10, 5), 5) ]\n= if x < lo then lo else if x > hi then hi else x",
        // polymorphic declared functions used at two types
        "func first[a](xs: [a], d: a) -> a = match xs { [] => d, x :: _ => x }\nfunc f() -> string = \"${show(first([1], 0))}${first([\"a\"], \"b\")}\"",
        // equality on ADTs and lists, ordering on strings and tuples
        "type T = A | B(int)\nfunc f(x: T, y: [T]) -> bool = x == B(1) && y != [] && \"a\" < \"b\" && (1, \"a\") < (2, \"b\")",
        // recursion and mutual recursion
        "func even(n: int) -> bool = if n == 0 then true else odd(n - 1)\nfunc odd(n: int) -> bool = if n == 0 then false else even(n - 1)",
        // letrec and local functions
        "func f(n: int) -> int = letrec go = \\k. if k <= 0 then 0 else k + go(k - 1) in go(n)",
    ];
    for body in bodies {
        let (found, raw) = errors_of(&format!("module m\n{body}\n"));
        assert!(found.is_empty(), "{body}\n{raw}");
    }
}

fn assert_checks(path: &Path) {
    let out = ailang(&["check", path.to_str().expect("utf-8 path")]);
    assert_eq!(out.code, 0, "{}: {}", path.display(), out.stderr);
}

#[test]
fn every_program_the_project_runs_passes_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut seen = 0;
    for dir in [
        "packages/ailang/tests/corpus",
        "packages/ailang/examples",
        "packages/examples",
        "tests/fixtures/invoke",
        "tests/fixtures/core-slow",
    ] {
        for entry in std::fs::read_dir(root.join(dir)).expect("dir") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "ail") {
                assert_checks(&path);
                seen += 1;
            }
        }
    }
    assert!(seen >= 20, "only {seen} programs found");
}

#[test]
fn run_refuses_an_ill_typed_module_before_evaluating_it() {
    let source = "module m\nimport std/io (println)\nexport func main(input: string) -> string {\n  let n = 1 + \"a\";\n  input\n}\n";
    let stderr = fails_starting(source, "{}", "Error: TC010: '+' works on numbers, but this operand is a string");
    assert!(stderr.contains("host/capsule/main.ail:4:15"), "{stderr}");
}

#[test]
fn an_effect_without_a_declaration_is_refused_at_check_time() {
    let source = "module m\nexport func main(input: string) -> string {\n  println(input);\n  input\n}\n";
    let stderr =
        fails_starting(source, "{}", "Error: TC009: 'println' needs the IO effect, but 'main' does not declare it");
    assert!(stderr.contains("Fix: declare it"), "{stderr}");
}

#[test]
fn json_output_carries_suggestions_and_warnings() {
    let (_, raw) = errors_of("module m\nfunc f(n: int) -> float = n\n");
    assert!(
        raw.contains("\"suggestion\": \"convert with intToFloat(n), or write a float literal such as 1.0\""),
        "{raw}"
    );
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("w.ail");
    std::fs::write(&file, "module w\ntype T = A | B | C\nfunc f(x: T) -> int = match x { A => 1, B => 2 }\n")
        .expect("write");
    let out = ailang(&["check", "--json", file.to_str().expect("path")]);
    assert_eq!(out.code, 0, "warnings never fail a check: {}", out.stdout);
    assert!(out.stdout.contains("\"code\": \"ELB004\""), "{}", out.stdout);
    assert!(out.stdout.contains("non-exhaustive match: no arm matches C"), "{}", out.stdout);
    let text = ailang(&["check", file.to_str().expect("path")]);
    assert!(text.stderr.starts_with("Warning: ELB004: non-exhaustive match: no arm matches C at "), "{}", text.stderr);
}

#[test]
fn check_of_a_directory_reports_every_file() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir(dir.path().join("sub")).expect("sub");
    std::fs::write(dir.path().join("good.ail"), "module good\nfunc f() -> int = 1\n").expect("write");
    std::fs::write(dir.path().join("sub/bad.ail"), "module bad\nfunc f() -> int = \"x\"\n").expect("write");
    let out = ailang(&["check", "--json", dir.path().to_str().expect("path")]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stdout.contains("\"passed\": false,\n  \"error_count\": 1,\n  \"files\": ["), "{}", out.stdout);
    assert!(out.stdout.contains("good.ail\",\n      \"passed\": true"), "{}", out.stdout);
    assert!(out.stdout.contains("bad.ail\",\n      \"passed\": false"), "{}", out.stdout);
    std::fs::remove_file(dir.path().join("sub/bad.ail")).expect("rm");
    assert_eq!(ailang(&["check", dir.path().to_str().expect("path")]).code, 0);
}

#[test]
fn a_deeply_chained_expression_is_checked_without_overflow() {
    let chain = vec!["1"; 100_000].join(" + ");
    let source = format!("module m\nexport func main(s: string) -> string = show({chain})\n");
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("m.ail");
    std::fs::write(&file, &source).expect("write");
    let out = ailang(&["check", file.to_str().expect("path")]);
    // Either it checks or it says plainly that it is too deep; never a crash.
    assert!(out.code == 0 || out.stderr.contains("TC999: expression nested too deeply"), "{}", out.stderr);
    // In process too, on a thread with the CLI's stack (the syntax tree itself is deep).
    let errors = ailang::stack::run_on_big_stack(move || ailang::check_source(&source, "m.ail", true)).expect("thread");
    assert!(errors.iter().all(|e| e.code == "TC999"), "{errors:?}");
}

#[test]
fn a_constructor_named_like_a_std_one_is_checked_against_the_modules_own_type() {
    // Both the module's `P` and the prelude's Option have a `Some`; the loader binds the
    // module's, so the checker must too, every time.
    let source = "module m\n\ntype P = Some(float, float) | Nope\n\nexport func main() -> string {\n  match Some(1.0, 2.0) {\n    Some(a, b) => show(a + b),\n    Nope => \"n\"\n  }\n}\n";
    for _ in 0..8 {
        let (errors, stdout) = errors_of(source);
        assert!(errors.is_empty(), "{stdout}");
    }
    let in_process = ailang::check_source(source, "m.ail", true);
    assert!(in_process.is_empty(), "{in_process:?}");
}
