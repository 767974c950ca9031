//! The capsule contract: exact argv, environment, stdout bytes and exit codes.

mod common;
use common::*;

const ECHO: &str =
    "module quickstart/echo\n\nexport func main(input: string) -> string {\n  \"{\\\"echo\\\":${input}}\"\n}\n";

#[test]
fn seed_echo_prints_its_input_wrapped_under_the_capsule_argv_and_env() {
    let capsule = Capsule::new(ECHO, Some(r#""{\"a\":1}""#));
    let out = capsule.run();
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert_eq!(out.stdout.as_bytes(), b"{\"echo\":{\"a\":1}}\n");
    assert_eq!(out.stderr, "");
}

#[test]
fn version_first_line_is_the_release_string() {
    let out = Capsule::new(ECHO, None).run_args(&["--version"]);
    assert_eq!(out.code, 0);
    assert_eq!(out.stdout.lines().next(), Some("ailang-rs 0.1.0 (AILANG v0.41 compatible)"));
}

#[test]
fn module_path_mismatch_fails_without_the_relax_rule() {
    let capsule = Capsule::new(ECHO, Some(r#""x""#));
    let out: Outcome = capsule
        .command()
        .env_remove("AILANG_RELAX_MODULES")
        .args(["run", "--quiet", "--caps", "", "--entry", "main", "--args-file", "args.json", "host/capsule/main.ail"])
        .output()
        .expect("spawn")
        .into();
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        "Error: MOD010: module 'quickstart/echo' doesn't match file path 'host/capsule/main'. Fix: use --relax-modules flag or set AILANG_RELAX_MODULES=1\n"
    );
    let relaxed: Outcome = capsule
        .command()
        .env_remove("AILANG_RELAX_MODULES")
        .args(["run", "--quiet", "--relax-modules", "--args-file", "args.json", "host/capsule/main.ail"])
        .output()
        .expect("spawn")
        .into();
    assert_eq!((relaxed.code, relaxed.stdout.as_str()), (0, "{\"echo\":x}\n"));
}

#[test]
fn a_matching_module_path_needs_no_relax_rule() {
    let source = "module host/capsule/main\nexport func main(input: string) -> string = input\n";
    let capsule = Capsule::new(source, Some(r#""ok""#));
    let out: Outcome = capsule
        .command()
        .env_remove("AILANG_RELAX_MODULES")
        .args(["run", "--quiet", "--args-file", "args.json", "host/capsule/main.ail"])
        .output()
        .expect("spawn")
        .into();
    assert_eq!((out.code, out.stdout.as_str(), out.stderr.as_str()), (0, "ok\n", ""));
}

#[test]
fn stdout_is_the_raw_string_plus_one_newline() {
    let source = "module m\nexport func main(input: string) -> string = \"line1\\nline2\\n\"\n";
    let out = transition(source, "");
    assert_eq!(out.stdout, "line1\nline2\n\n");
}

// ---- argument decoding by declared parameter type ----

fn with_args(source: &str, args_file: &str) -> Outcome {
    Capsule::new(source, Some(args_file)).run()
}

#[test]
fn arguments_decode_by_the_declared_parameter_type() {
    let cases: &[(&str, &str, &str)] = &[
        ("(n: int)", "show(n + 1)", "41.9"),
        ("(x: float)", "show(x)", "2"),
        ("(b: bool)", "show(not b)", "true"),
        ("(xs: [int])", "show(xs)", "[1, 2,3]"),
        ("(xs: List[string])", "show(xs)", r#"["a","b"]"#),
        ("(r: {name: string, age: int})", "\"${r.name}:${show(r.age)}\"", r#"{"age":3,"name":"x","extra":[1]}"#),
        ("(r: Req)", "r.name", r#"{"name":"alias"}"#),
        ("(u: ())", "\"unit\"", "null"),
        ("()", "\"no parameter\"", "null"),
    ];
    let expected = ["42", "2.0", "false", "[1, 2, 3]", "[\"a\", \"b\"]", "x:3", "alias", "unit", "no parameter"];
    for ((params, body, args), want) in cases.iter().zip(expected) {
        let source = format!("module m\ntype Req = {{name: string}}\nexport func main{params} -> string = {body}\n");
        let out = with_args(&source, args);
        assert_eq!(
            (out.code, out.stdout.as_str()),
            (0, format!("{want}\n").as_str()),
            "{params} <- {args}: {}",
            out.stderr
        );
    }
}

#[test]
fn argument_mismatches_carry_the_incompatibility_marker() {
    let cases: &[(&str, Option<&str>, &str)] = &[
        (
            "(input: string)",
            None,
            "Error: failed to decode arguments: ARG_DECODE_MISMATCH: expected string, got <nil>\n  expected JSON string\n",
        ),
        (
            "(input: string)",
            Some("42"),
            "Error: failed to decode arguments: ARG_DECODE_MISMATCH: expected string, got 42\n  expected JSON string\n",
        ),
        (
            "()",
            Some(r#""hi""#),
            "Error: failed to decode arguments: ARG_DECODE_MISMATCH: expected (), got hi\n  expected null for unit type\n",
        ),
        (
            "(n: int)",
            Some(r#""{\"a\":1}""#),
            "Error: failed to decode arguments: ARG_DECODE_MISMATCH: expected int, got {\"a\":1}\n  expected JSON number\n",
        ),
        (
            "(r: {name: string})",
            Some(r#"{"b":[1,true],"a":null}"#),
            "Error: failed to decode arguments: ARG_DECODE_MISMATCH: expected {name: string}, got map[a:<nil> b:[1 true]]\n  missing required field 'name'\n",
        ),
        ("(x: float)", Some("1e6"), ""),
        (
            "(input: string)",
            Some("{"),
            "Error: failed to decode arguments: invalid JSON: unexpected end of JSON input\n",
        ),
        (
            "(input: string)",
            Some("\"a\" x"),
            "Error: failed to decode arguments: invalid JSON: invalid character 'x' after top-level value\n",
        ),
    ];
    for (params, args, want) in cases {
        let source = format!("module m\nexport func main{params} -> string = \"ran\"\n");
        let capsule = Capsule::new(&source, *args);
        let out = match args {
            Some(_) => capsule.run(),
            None => capsule.run_args(&["run", "--quiet", "--caps", "", "--entry", "main", "host/capsule/main.ail"]),
        };
        if want.is_empty() {
            assert_eq!((out.code, out.stdout.as_str()), (0, "ran\n"), "{params} <- {args:?}: {}", out.stderr);
        } else {
            assert_eq!((out.code, out.stderr.as_str(), out.stdout.as_str()), (1, *want, ""), "{params} <- {args:?}");
        }
    }
}

#[test]
fn args_file_loses_a_bom_and_trailing_whitespace() {
    let out = with_args("module m\nexport func main(s: string) -> string = s\n", "\u{feff}\"bom\"\n\n  ");
    assert_eq!((out.code, out.stdout.as_str()), (0, "bom\n"), "{}", out.stderr);
}

#[test]
fn args_json_dash_reads_stdin() {
    let capsule = Capsule::new("module m\nexport func main(s: string) -> string = s\n", None);
    let mut command = capsule.command();
    command.args(["run", "--quiet", "--args-json", "-", "host/capsule/main.ail"]);
    let out = with_stdin(&mut command, b"\"from stdin\"\n");
    assert_eq!((out.code, out.stdout.as_str()), (0, "from stdin\n"));
}

#[test]
fn bad_argument_sources_and_flags_exit_2() {
    let source = "module m\nexport func main(s: string) -> string = s\n";
    let empty = Capsule::new(source, Some("  \n"));
    assert_eq!(empty.run().code, 2);
    let missing = Capsule::new(source, None);
    assert_eq!(missing.run().code, 2);
    let both = Capsule::new(source, Some("\"x\""));
    let out = both.run_args(&["run", "--args-json", "\"y\"", "--args-file", "args.json", "host/capsule/main.ail"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.starts_with("Error: "), "{}", out.stderr);
    let out = both.run_args(&["run", "--bogus", "host/capsule/main.ail"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("flag provided but not defined: -bogus"), "{}", out.stderr);
}

#[test]
fn flags_after_the_file_are_program_arguments() {
    let capsule = Capsule::new("module m\nexport func main(s: string) -> string = s\n", Some("\"x\""));
    let out = capsule.run_args(&["run", "--quiet", "host/capsule/main.ail", "--args-file", "args.json"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("ARG_DECODE_MISMATCH: expected string, got <nil>"), "{}", out.stderr);
}

#[test]
fn a_missing_entry_is_reported_with_the_marker_and_the_exports() {
    let source = "module m\nexport func other(s: string) -> string = s\nexport func more(s: string) -> string = s\n";
    let stderr = expect_failure(source, "x", 1);
    assert_eq!(stderr, "Error: entrypoint 'main' not found in module\nAvailable exports: [other more]\n");
}

#[test]
fn a_lone_zero_argument_export_stands_in_for_main() {
    let source = "module m\nexport func hello() -> string = \"hi\"\n";
    let capsule = Capsule::new(source, Some("\"x\""));
    let out = capsule.run_args(&["run", "--quiet", "host/capsule/main.ail"]);
    assert_eq!((out.code, out.stdout.as_str()), (0, "hi\n"));
    let out = capsule.run();
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr, "Error: entrypoint 'hello' takes no arguments, but --args-json was provided\n");
}

#[test]
fn other_entries_can_be_named() {
    let source = "module m\nexport func shout(s: string) -> string = \"${s}!\"\n";
    let capsule = Capsule::new(source, Some("\"hey\""));
    let out =
        capsule.run_args(&["run", "--quiet", "--entry", "shout", "--args-file", "args.json", "host/capsule/main.ail"]);
    assert_eq!((out.code, out.stdout.as_str()), (0, "hey!\n"));
}

#[test]
fn runtime_errors_exit_1_with_an_error_line() {
    let stderr = expect_failure("module m\nexport func main(s: string) -> string = show(1 / 0)\n", "", 1);
    assert_eq!(stderr, "Error: execution failed: RT_DIV0: division by zero at host/capsule/main.ail:2:46\n");
}

#[test]
fn print_needs_the_io_capability() {
    let source = "module m\nexport func main(s: string) -> () ! {IO} = println(s)\n";
    fails_with(source, "x", "EVA004: missing capability: IO");
    let capsule = Capsule::new(source, Some("\"printed\""));
    let out =
        capsule.run_args(&["run", "--quiet", "--caps", "IO", "--args-file", "args.json", "host/capsule/main.ail"]);
    assert_eq!((out.code, out.stdout.as_str()), (0, "printed\n"));
}
