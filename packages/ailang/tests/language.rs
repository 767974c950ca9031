//! Each language construct with its exact output.

mod common;
use common::*;

const HELPERS: &str = r#"
import std/string (length as strLength)

type Shape = Circle(float) | Rect(float, float) | Empty
type Person = { name: string, age: int }
type Wrapped = Wrapped({ inner: int })

func area(s: Shape) -> float {
  match s {
    Circle(r) => 3.0 * r * r,
    Rect(w, h) => w * h,
    Empty => 0.0
  }
}

func sum(xs: [int]) -> int {
  match xs {
    [] => 0,
    h :: t => h + sum(t)
  }
}

func firstTwo(xs: [int]) -> string {
  match xs {
    [a, b, ...rest] => "${show(a)},${show(b)} rest=${show(rest)}",
    [a] => "one ${show(a)}",
    [] => "none"
  }
}

func sign(n: int) -> string {
  match n {
    x if x < 0 => "neg",
    0 => "zero",
    _ => "pos"
  }
}

func double(x: int) -> int = x * 2

func unitf() -> string = "unit-called"

func adder(n: int) -> (int) -> int {
  \x. x + n
}

func count(n: int) -> int = if n == 0 then 0 else 1 + count(n - 1)

func classify(r: Result[Option[int], string]) -> string {
  match r {
    Ok(Some(n)) => "some ${show(n)}",
    Ok(None) => "nothing",
    Err(why) => "error ${why}"
  }
}

func greet(p: Person) -> string {
  match p {
    { name, age: a } => "${name} is ${show(a)}"
  }
}

func pairSwap(p: (int, string)) -> (string, int) {
  match p { (n, s) => (s, n) }
}

-- contracts, tests and annotations are parsed; `run` does not evaluate contracts
@allow_empty_ok("demo")
export func inc(x: int) -> int ! {}
  requires { x >= 0 }
  ensures { result == x + 1 }
  tests [ (1, 2), (41, 42) ]
{
  x + 1
}

func seq() -> int {
  let a = 1;
  let b = a + 1
  let c = b * 10
  c + a
}
"#;

#[test]
fn integer_arithmetic_wraps_and_divides_like_go() {
    expect_lines(
        HELPERS,
        &[
            ("show(1 + 2 * 3)", "7"),
            ("show((1 + 2) * 3)", "9"),
            ("show(9223372036854775807 + 1)", "-9223372036854775808"),
            ("show(-7 / 2)", "-3"),
            ("show(-7 % 2)", "-1"),
            ("show(7 % -2)", "1"),
            ("show((0 - 9223372036854775807 - 1) / (0 - 1))", "-9223372036854775808"),
            ("show((0 - 9223372036854775807 - 1) % (0 - 1))", "0"),
            ("show(3000000000 * 4000000000)", "-6446744073709551616"),
            ("show(2 ** 10)", "1024"),
            ("show(6 & 3)", "2"),
            ("show(6 ^ 3)", "5"),
            ("show(1 << 4)", "16"),
            ("show(-16 >> 2)", "-4"),
            ("show(~0)", "-1"),
            ("show(-(3))", "-3"),
            ("show(0x1F)", "31"),
        ],
    );
}

#[test]
fn floats_follow_ieee_with_the_reference_zero_division() {
    expect_lines(
        HELPERS,
        &[
            ("show(1.5 + 2.25)", "3.75"),
            ("show(2.0)", "2.0"),
            ("show(0.1 + 0.2)", "0.30000000000000004"),
            ("show(1.0 / 0.0)", "Inf"),
            ("show(-1.0 / 0.0)", "-Inf"),
            ("show(0.0 / 0.0)", "NaN"),
            ("show(1.0 / -0.0)", "-Inf"),
            ("show(5.5 % 2.0)", "1.5"),
            ("show(1.0 % 0.0)", "NaN"),
            ("show(1e3)", "1000.0"),
            ("show(intToFloat(3))", "3.0"),
            ("show(floatToInt(-2.9))", "-2"),
            ("show(1.5 < 2.5)", "true"),
            ("show(area(Circle(1.0)))", "3.0"),
            ("show(area(Rect(2.0, 3.5)))", "7.0"),
            ("show(area(Empty))", "0.0"),
        ],
    );
}

#[test]
fn strings_interpolation_and_escapes() {
    expect_lines(
        HELPERS,
        &[
            (r#""a${"b${1 + 1}c"}d""#, "ab2cd"),
            (r#""q\"\\ \u{e9}\u00e9\x41""#, r#"q"\ ééA"#),
            (r#""\${x}""#, "${x}"),
            (r#""cost $5 {x} }""#, "cost $5 {x} }"),
            (r#"'c'"#, "c"),
            (r#"show("a" == "a")"#, "true"),
            (r#"show("a" < "b")"#, "true"),
            (r#"show("Z" < "a")"#, "true"),
            (r#"show(strLength("héllo😀"))"#, "6"),
            (r#""${show(true)}-${show(())}""#, "true-()"),
        ],
    );
}

#[test]
fn control_flow_bindings_and_functions() {
    expect_lines(
        HELPERS,
        &[
            ("if 1 < 2 then \"yes\" else \"no\"", "yes"),
            ("if false then \"a\" else if true then \"b\" else \"c\"", "b"),
            ("show(let x = 2 in x * x)", "4"),
            ("show({ let y = 3; y + 1 })", "4"),
            ("show(seq())", "21"),
            ("show((\\x. x + 1)(41))", "42"),
            ("show((\\x y. x * y)(6, 7))", "42"),
            ("show((func(x: int) -> int { x * 2 })(21))", "42"),
            ("show(adder(10)(5))", "15"),
            ("show(double(4))", "8"),
            ("unitf()", "unit-called"),
            ("unitf(())", "unit-called"),
            ("show(letrec fact = \\n. if n == 0 then 1 else n * fact(n - 1) in fact(10))", "3628800"),
            ("show(count(9000))", "9000"),
            ("show(inc(1))", "2"),
            ("show(false && 1 / 0 == 0)", "false"),
            ("show(true || 1 / 0 == 0)", "true"),
            ("show(not true)", "false"),
            ("show(!false)", "true"),
            ("show(1 == 1 && 2 != 3)", "true"),
        ],
    );
}

#[test]
fn data_records_tuples_lists_and_constructors() {
    expect_lines(
        HELPERS,
        &[
            ("show({ name: \"a\", n: 1 }.name)", "a"),
            ("show({ { b: 2, a: 1 } | b: 3 })", "{a: 1, b: 3}"),
            ("show({ b: 2, a: \"x\" })", "{a: \"x\", b: 2}"),
            ("show(Wrapped({ inner: 7 }).inner)", "7"),
            ("greet({ name: \"Ann\", age: 30 })", "Ann is 30"),
            ("show((1, \"x\"))", "(1, \"x\")"),
            ("show(pairSwap((1, \"x\")))", "(\"x\", 1)"),
            ("show([1, 2] ++ [3])", "[1, 2, 3]"),
            ("show(0 :: 1 :: [2])", "[0, 1, 2]"),
            ("show([])", "[]"),
            ("show(sum([1, 2, 3, 4]))", "10"),
            ("firstTwo([1, 2, 3])", "1,2 rest=[3]"),
            ("firstTwo([9])", "one 9"),
            ("firstTwo([])", "none"),
            ("sign(-5)", "neg"),
            ("sign(0)", "zero"),
            ("sign(3)", "pos"),
            ("classify(Ok(Some(3)))", "some 3"),
            ("classify(Ok(None))", "nothing"),
            ("classify(Err(\"bad\"))", "error bad"),
            ("show(Some([1]))", "Some([1])"),
            ("show(None)", "None"),
            ("show(Rect(1.0, 2.0))", "Rect(1.0, 2.0)"),
            ("show(Circle(1))", "Circle(1.0)"),
            ("show([[[[[1]]]]])", "[[[[...]]]]"),
            ("show(Some(1) == Some(1))", "true"),
            ("show([1, 2] == [1, 3])", "false"),
            ("show((1, \"a\") == (1, \"a\"))", "true"),
            ("show({a: 1, b: 2} == {b: 2, a: 1})", "true"),
            ("match \"b\" { \"a\" => \"was a\", \"b\" => \"was b\", _ => \"other\" }", "was b"),
            ("match (1, true) { (1, false) => \"x\", (1, true) => \"y\", _ => \"z\" }", "y"),
        ],
    );
}

fn program(body: &str) -> String {
    format!("module m\n{HELPERS}\nexport func main(input: string) -> string {{\n{body}\n}}\n")
}

#[test]
fn recursion_past_the_limit_is_an_error_not_a_crash() {
    let source =
        "module m\nfunc loop(n: int) -> int = 1 + loop(n + 1)\nexport func main(s: string) -> string = show(loop(0))\n";
    fails_starting(source, "", "Error: execution failed: RT_RECURSION: maximum recursion depth exceeded (10000)");
}

#[test]
fn the_recursion_limit_is_configurable() {
    let source = "module m\nfunc count(n: int) -> int = if n == 0 then 0 else 1 + count(n - 1)\nexport func main(s: string) -> string = show(count(500))\n";
    let capsule = Capsule::new(source, Some("\"\""));
    let tight = capsule.run_args(&[
        "run",
        "--quiet",
        "--max-recursion-depth",
        "100",
        "--args-file",
        "args.json",
        "host/capsule/main.ail",
    ]);
    assert_eq!(tight.code, 1);
    assert!(tight.stderr.contains("maximum recursion depth exceeded (100)"), "{}", tight.stderr);
    let roomy = capsule.run_args(&[
        "run",
        "--quiet",
        "--max-recursion-depth",
        "1000",
        "--args-file",
        "args.json",
        "host/capsule/main.ail",
    ]);
    assert_eq!((roomy.code, roomy.stdout.as_str()), (0, "500\n"));
}

#[test]
fn a_match_without_a_matching_arm_fails_at_run_time() {
    fails_with(&program("match 3 { 1 => \"one\", 2 => \"two\" }"), "", "RT_MATCH: no pattern matched value 3");
}

#[test]
fn comments_may_hold_any_utf8() {
    let source = "module m\n-- ─── § — ünïcødé ───\nexport func main(s: string) -> string = \"ok\" -- trailing\n";
    assert_eq!(transition(source, "").stdout, "ok\n");
}

#[test]
fn a_long_list_built_by_recursion_and_consumed_natively() {
    let source = "module m\nimport std/list (length, foldl)\nfunc build(n: int, acc: [int]) -> [int] = if n == 0 then acc else build(n - 1, n :: acc)\nexport func main(s: string) -> string = show(foldl(\\a x. a + x, 0, build(5000, [])))\n";
    assert_eq!(transition(source, "").stdout, "12502500\n");
}
