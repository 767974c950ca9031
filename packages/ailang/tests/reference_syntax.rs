//! The AILANG the reference's current tests and examples are written in: `test` blocks with
//! `assert`, `//` comments, top-level `let`, a statement `letrec`, the prefix cons pattern, a
//! private `main`, the std functions they call, numeric literals that take a float type, and
//! the checker's answers to the common mistakes. Each through the real binary.

mod common;
use common::*;
use std::process::Command;

/// Write `source` as `m.ail` in a fresh directory and run `ailang <args…> m.ail`.
fn ailang_on(source: &str, args: &[&str]) -> Outcome {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("m.ail"), source).expect("write");
    let mut all: Vec<&str> = args.to_vec();
    all.push("m.ail");
    Command::new(BIN)
        .args(&all)
        .current_dir(dir.path())
        .env("AILANG_RELAX_MODULES", "1")
        .output()
        .expect("spawn ailang")
        .into()
}

/// `ailang check` refuses `source`, saying `needle` on stderr.
fn check_refuses(source: &str, needle: &str) {
    let out = ailang_on(source, &["check"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains(needle), "{}", out.stderr);
}

/// `ailang run` of `source` with the IO capability, once a run without it has failed for the
/// want of IO.
fn run_needing_io(source: &str) -> Outcome {
    let out = ailang_on(source, &["run"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("EVA004: missing capability: IO"), "{}", out.stderr);
    ailang_on(source, &["run", "--caps", "IO"])
}

#[test]
fn test_blocks_run_their_asserts_and_report_the_failing_one() {
    let source = r#"module m
import std/list (length)

test "every assert holds" {
  let xs = [1, 2, 3]
  assert length(xs) == 3
  assert xs != []
}

test "a block may end in a bool" {
  let n = 2;
  n * 2 == 4
}

test "the second assert fails" {
  assert 1 == 1
  assert 2 + 2 == 5
  assert 1 / 0 == 0
}

test "a block ending in false fails" {
  let n = 1;
  n == 2
}

test "the equation form still works" = 1 < 2
"#;
    let out = ailang_on(source, &["test"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", out.stdout);
    assert!(
        lines[0].starts_with(
            "FAIL test \"the second assert fails\" (line 15): error: RT_ASSERT: assertion failed at line 17, column 10"
        ),
        "{}",
        lines[0]
    );
    assert_eq!(lines[1], "FAIL test \"a block ending in false fails\" (line 21): got false");
    assert_eq!(lines[2], "3 passed, 2 failed");
}

#[test]
fn an_assert_takes_a_bool_and_test_blocks_are_type_checked() {
    let out = ailang_on("module m\ntest \"t\" {\n  assert \"yes\"\n}\n", &["check"]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("TC001") && out.stderr.contains("an assert takes a bool at m.ail:3:10"),
        "{}",
        out.stderr
    );
    check_refuses("module m\ntest \"t\" {\n  let s = \"a\";\n  s\n}\n", "a test must end in an assert or a bool");
}

#[test]
fn an_assert_in_ordinary_code_fails_the_run() {
    let source = "module m\nexport func main(input: string) -> string {\n  assert input != \"\"\n  input\n}\n";
    assert_eq!(transition(source, "ok").stdout, "ok\n");
    fails_starting(source, "", "Error: execution failed: RT_ASSERT: assertion failed at host/capsule/main.ail:3:10");
}

#[test]
fn double_slash_comments_run_to_the_end_of_the_line() {
    expect_lines(
        "// a header comment\nfunc half(n: int) -> int = n / 2 // trailing\n",
        &[
            ("show(half(9))", "4"),
            ("show(8 / 2 / 2)", "2"),
            ("\"a // b\"", "a // b"),
            ("show({ // inside a block\n 3 })", "3"),
        ],
    );
}

#[test]
fn top_level_lets_are_values_every_function_and_test_sees() {
    let source = r#"module m
import std/string (length)

let limit = 3
let greeting: string = "hi"
let twice = limit * 2
let scale: float = 7 / 2
let shout = \s. "${s}!"

func short(s: string) -> bool = length(s) < limit

export func main(input: string) -> string =
  "${show(short(input))} ${greeting} ${show(twice)} ${show(scale)} ${shout(input)}"

test "a test sees them" = twice == 6 && short("ab")
"#;
    assert_eq!(transition(source, "abcd").stdout, "false hi 6 3.5 abcd!\n");
    let out = ailang_on(source, &["test"]);
    assert_eq!(out.stdout, "1 passed, 0 failed\n", "{}", out.stderr);
    // A value's declared type is checked, and a name is defined once.
    check_refuses("module m\nlet n: string = 1 + 1\n", "the value of 'n' must have its declared type");
    check_refuses(
        "module m\nlet n = println(\"x\")\n",
        "TC009: 'println' needs the IO effect, but the top-level value 'n' must be pure",
    );
    check_refuses("module m\nlet n = 1\nfunc n() -> int = 2\n", "MOD007: duplicate definition of 'n'");
}

#[test]
fn the_retired_script_mode_is_refused_with_a_pointer() {
    check_refuses("module m\nlet x = 5 in\nx + 1\n", "PAR001: a top-level 'let … in' (script mode) is not supported");
}

#[test]
fn a_statement_letrec_binds_a_recursive_function_in_a_block() {
    expect_lines(
        "func fact(n: int) -> int {\n  letrec go = \\k acc. if k <= 1 then acc else go(k - 1, acc * k)\n  go(n, 1)\n}\n",
        &[("show(fact(10))", "3628800"), ("show({ letrec f = \\n. if n == 0 then 0 else 1 + f(n - 1); f(50) })", "50")],
    );
}

#[test]
fn the_prefix_cons_pattern_matches_head_and_tail() {
    expect_lines(
        "func firstOr(xs: [int], d: int) -> int = match xs { ::(h, _) => h, [] => d }\nfunc pairs(xs: [int]) -> int = match xs { ::(a, ::(b, rest)) => a + b, _ => 0 }\n",
        &[
            ("show(firstOr([7, 8], 0))", "7"),
            ("show(firstOr([], 5))", "5"),
            ("show(pairs([1, 2, 3]))", "3"),
            ("show(pairs([1]))", "0"),
        ],
    );
    check_refuses(
        "module m\nfunc f(xs: [int]) -> int = match xs { ::(h) => h, _ => 0 }\n",
        "'::(…)' takes a head and a tail pattern, found 1",
    );
}

#[test]
fn a_function_literal_result_annotation_is_not_held_against_its_body() {
    expect_lines("", &[("show((func(x: int) -> int { func(y: int) -> int { x * y } })(6)(7))", "42")]);
}

#[test]
fn a_private_main_is_an_entry() {
    let out = ailang_on("module m\nfunc main() -> string = \"private main ran\"\nfunc helper() -> int = 1\n", &["run"]);
    assert_eq!((out.code, out.stdout.as_str()), (0, "private main ran\n"), "{}", out.stderr);
    let out = ailang_on(
        "module m\nexport func other() -> int = 1\nfunc a() -> int = 1\nfunc b() -> int = 2\n",
        &["run", "--entry", "nope"],
    );
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr, "Error: entrypoint 'nope' not found in module\nAvailable exports: [other]\n");
}

#[test]
fn std_functions_the_reference_programs_call() {
    expect_lines(
        "import std/list (mapAccumL)\nimport std/string (foldChars, charAt, charCode)\nimport std/math (bitwiseOr, isNaN, sin, cos, tan, asin, acos, atan, atan2, exp, log, log10, abs_Int, abs_Float, PI, E)\n",
        &[
            ("show(mapAccumL(\\st x. (st + x, st + x), 0, [1, 2, 3]))", "([1, 3, 6], 6)"),
            ("show(mapAccumL(\\st x. (x, st + 1), 41, []))", "([], 41)"),
            ("show(mapAccumL(\\n s. (\"${show(n)}${s}\", n + 1), 1, [\"a\", \"b\"]))", "([\"1a\", \"2b\"], 3)"),
            ("show(foldChars(\\n c. n + 1, 0, \"héllo\"))", "5"),
            ("foldChars(\\acc c. \"${c}${acc}\", \"\", \"abc\")", "cba"),
            ("charAt(\"héllo\", 1)", "é"),
            ("show(charCode(\"A\"))", "65"),
            ("show(charCode(\"é\"))", "233"),
            ("show(bitwiseOr(12, 10))", "14"),
            ("show(bitwiseOr(255, 256))", "511"),
            ("show(bitwiseOr(-1, 5))", "-1"),
            ("show(isNaN(0.0 / 0.0))", "true"),
            ("show(isNaN(1.5))", "false"),
            ("show(sin(0.0))", "0.0"),
            ("show(cos(0.0))", "1.0"),
            ("show(tan(0.0))", "0.0"),
            ("show(asin(1.0) * 2.0 == PI())", "true"),
            ("show(acos(1.0))", "0.0"),
            ("show(atan(0.0))", "0.0"),
            ("show(atan2(1.0, 1.0) * 4.0 == PI())", "true"),
            ("show(exp(0.0))", "1.0"),
            ("show(log(E()))", "1.0"),
            ("show(log10(1000.0))", "3.0"),
            ("show(abs_Int(-4))", "4"),
            ("show(abs_Float(-2.5))", "2.5"),
        ],
    );
    fails_with(
        "module m\nimport std/string (charAt)\nexport func main(input: string) -> string = charAt(input, 9)\n",
        "abc",
        "RT_INDEX: charAt: index 9 out of bounds for string of length 3",
    );
    fails_with(
        "module m\nimport std/string (charCode)\nexport func main(input: string) -> string = show(charCode(input))\n",
        "ab",
        "charCode: expected a one-character string, got 2 characters",
    );
}

#[test]
fn the_reference_internal_printers_print_under_io() {
    let source = "module m\nexport func main() -> () ! {IO} {\n  _io_print(\"a\");\n  _io_println(\"b\")\n}\n";
    let out = ailang_on(source, &["run", "--caps", "IO"]);
    assert_eq!((out.code, out.stdout.as_str()), (0, "ab\n"), "{}", out.stderr);
}

#[test]
fn int_literals_divide_as_the_type_checker_types_them() {
    expect_lines(
        "import std/json (jnum, encode)\nfunc half(x: float) -> float = x / 2\nfunc ratio() -> float = 7 / 2\n",
        &[
            ("show(7 / 2)", "3"),
            ("encode(jnum(7 / 2))", "3.5"),
            ("show(ratio())", "3.5"),
            ("show(half(5.0))", "2.5"),
            ("show(1 / 2 + 0.25)", "0.75"),
            ("show(let x = 7 / 2 in x)", "3"),
        ],
    );
}

#[test]
fn one_call_gets_one_error_and_the_common_mistakes_get_a_fix() {
    let source = r#"module m
import std/json (jo, kv, encode)

func f(a: int, b: string, c: int) -> int = a

export func main(input: string) -> string {
  let n = f("x", 1, "y");
  let j = jo([kv("n", 5)]);
  let s = input + "!";
  let d = decode(input);
  input
}
"#;
    let out = ailang_on(source, &["check"]);
    assert_eq!(out.code, 1);
    let errors: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("Error:")).collect();
    let fixes: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("  Fix:")).collect();
    assert_eq!(
        errors,
        [
            "Error: TC001: type mismatch: expected int, found string: argument 1 of 'f' at m.ail:7:13",
            "Error: TC010: argument 2 of 'kv' must be a Json value, but this is a number at m.ail:8:23",
            "Error: TC010: '+' works on numbers, but this operand is a string at m.ail:9:11",
            "Error: TC002: unbound variable: decode at m.ail:10:11",
        ],
        "{}",
        out.stderr
    );
    assert_eq!(
        fixes,
        [
            "  Fix: wrap the number: jnum(x) for a float, jint(n) for an int",
            "  Fix: join strings with interpolation \"${a}${b}\" or std/string concat([a, b])",
            "  Fix: import it: import std/json (jo, kv, encode, decode)",
        ],
        "{}",
        out.stderr
    );
}

#[test]
fn a_missing_import_is_suggested_without_an_import_line_too() {
    let out =
        ailang_on("module m\nexport func main(input: string) -> string = encode(js(input))\n", &["check", "--json"]);
    assert!(out.stdout.contains("\"suggestion\": \"import it: import std/json (encode)\""), "{}", out.stdout);
    assert!(out.stdout.contains("\"suggestion\": \"import it: import std/json (js)\""), "{}", out.stdout);
}

#[test]
fn a_qualified_import_reaches_a_module_through_its_alias() {
    expect_lines(
        "import std/list as L\nimport std/string as S\n",
        &[
            ("show(L.map(\\x. x * 2, [1, 2, 3]))", "[2, 4, 6]"),
            ("show(L.foldl(\\a b. a + b, 0, [1, 2, 3]))", "6"),
            ("S.toUpper(\"ab\")", "AB"),
            ("show(L.length(S.chars(\"héllo\")))", "5"),
        ],
    );
    check_refuses(
        "module m\nimport std/list as L\nexport func main() -> int = L.nope([1])\n",
        "TC002: 'nope' is not exported by std/list at m.ail:3:29",
    );
    // The alias alone is the way in: the module's names are not also unqualified.
    check_refuses(
        "module m\nimport std/list as L\nexport func main() -> int = length([1])\n",
        "TC002: unbound variable: length",
    );
}

#[test]
fn consecutive_letrecs_in_a_block_are_mutually_recursive() {
    expect_lines(
        "func parity(n: int) -> string {\n  letrec isEven = \\k. if k == 0 then true else isOdd(k - 1);\n  letrec isOdd = \\k. if k == 0 then false else isEven(k - 1);\n  \"${show(isEven(n))} ${show(isOdd(n))}\"\n}\n",
        &[("parity(10)", "true false"), ("parity(7)", "false true")],
    );
}

#[test]
fn hex_binary_and_octal_literals_are_64_bit_patterns() {
    expect_lines(
        "import std/math (shiftRightLogical)\n",
        &[
            ("show(0xffffffffffffffff)", "-1"),
            ("show(0x9e3779b97f4a7c15)", "-7046029254386353131"),
            ("show(0b1010)", "10"),
            ("show(0o17)", "15"),
            ("show(0xFF_FF)", "65535"),
            ("show(-1 >> 1)", "-1"),
            ("show(shiftRightLogical(-1, 1))", "9223372036854775807"),
            ("show(shiftRightLogical(-1, 64))", "0"),
        ],
    );
}

#[test]
fn string_helpers_of_the_reference_std() {
    expect_lines(
        "import std/string (replaceMany, foldSlices, mapSlicesJoin, startsWithIgnoreCase, toUpper, length)\n",
        &[
            ("replaceMany(\"a &lt; b &amp;&amp; c\", [(\"&lt;\", \"<\"), (\"&amp;\", \"&\")])", "a < b && c"),
            ("replaceMany(\"aaa\", [(\"a\", \"aa\"), (\"aa\", \"x\")])", "aaaaaa"),
            ("show(foldSlices(\"ab\\ncde\\n\", \"\\n\", 0, \\acc line. acc + length(line)))", "5"),
            ("mapSlicesJoin(\"a,b,c\", \",\", \\f. toUpper(f))", "A,B,C"),
            ("show(startsWithIgnoreCase(\"Content-Type: x\", \"content-type\"))", "true"),
            ("show(startsWithIgnoreCase(\"Co\", \"content\"))", "false"),
            ("show(_str_eq(\"a\", \"a\"))", "true"),
        ],
    );
}

#[test]
fn io_reads_lines_as_options_and_writes_to_stderr() {
    let source = r#"module m
import std/io (readLineOpt, printErr, eprintln, flush, print)
func loop(n: int) -> int ! {IO} {
  match readLineOpt(()) {
    Some(line) => { print("[${line}]"); loop(n + 1) },
    None => n
  }
}
export func main() -> () ! {IO} {
  let n = loop(0);
  flush(());
  printErr("lines: ");
  eprintln(show(n))
}
"#;
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("m.ail"), source).expect("write");
    let out =
        with_stdin(Command::new(BIN).args(["run", "--caps", "IO", "m.ail"]).current_dir(dir.path()), b"a\r\n\nlast");
    assert_eq!((out.code, out.stdout.as_str(), out.stderr.as_str()), (0, "[a][][last]", "lines: 3\n"));
}

#[test]
fn a_function_parameter_without_an_effect_row_takes_effectful_functions() {
    let source = r#"module m
import std/io (println)
type Hooks = { onEvent: string -> () ! {IO} }
func logEvent(s: string) -> () ! {IO} = println(s)
pure func mkHooks() -> Hooks = { onEvent: logEvent }
func applyTo(f: string -> (), s: string) -> () = f(s)
export func main() -> () ! {IO} {
  applyTo(logEvent, "through a parameter");
  mkHooks().onEvent("through a field")
}
"#;
    // The effect is still checked where it happens: without the capability the call fails.
    let out = run_needing_io(source);
    assert_eq!((out.code, out.stdout.as_str()), (0, "through a parameter\nthrough a field\n"), "{}", out.stderr);
    // std's pure combinators keep refusing an effectful function: mapE is the effectful one.
    check_refuses(
        "module m\nimport std/list (map)\nexport func main(s: string) -> string ! {IO} {\n  let u = map(\\x. println(x), [s]);\n  s\n}\n",
        "TC009",
    );
}

#[test]
fn std_array_holds_items_by_index() {
    expect_lines(
        "import std/array (make, get, getOpt, set, length as arrayLength, fromList, toList, append, empty)\n",
        &[
            ("show(get(set(make(3, 0), 1, 7), 1))", "7"),
            ("show(toList(set(fromList([1, 2, 3]), 0, 9)))", "[9, 2, 3]"),
            ("show(getOpt(#[10, 20], 5))", "None"),
            ("show(getOpt(#[10, 20], 1))", "Some(20)"),
            ("show(arrayLength(append(empty(), \"x\")))", "1"),
        ],
    );
    fails_with(
        "module m\nimport std/array (get)\nexport func main(input: string) -> string = show(get(#[1, 2], 2))\n",
        "",
        "RT_INDEX: get: index 2 out of bounds for array of length 2",
    );
    check_refuses(
        "module m\nimport std/array (make)\nfunc f(a: Array[int]) -> int = 1\nexport func main() -> int = f(make(2, \"s\"))\n",
        "TC001",
    );
}

#[test]
fn exit_ends_the_run_with_its_status_after_what_was_printed() {
    let source = "module m\nimport std/io (println, exit)\nexport func main() -> () ! {IO} = {\n  println(\"before\");\n  exit(42);\n  println(\"after\")\n}\n";
    let out = run_needing_io(source);
    assert_eq!((out.code, out.stdout.as_str(), out.stderr.as_str()), (42, "before\n", ""));
}

#[test]
fn an_extra_field_for_a_closed_record_type_is_named_with_the_open_form() {
    let source = "module m\nfunc getId(r: {id: int}) -> int = r.id\nfunc getAny(r: {id: int, ...}) -> int = r.id\nexport func main() -> int = getAny({id: 1, name: \"x\"}) + getId({id: 1, name: \"x\"})\n";
    let out = ailang_on(source, &["check"]);
    assert_eq!(
        out.stderr,
        "Error: TC001: this record has a field 'name' that is not expected (expected exactly: id): argument 1 of 'getId' at m.ail:4:64\n  Fix: drop the field, or accept more fields with an open record type {id: …, ...}\n"
    );
}
