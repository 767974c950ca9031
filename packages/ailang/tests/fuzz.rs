//! Property tests: the lexer, the parser, the checker, the evaluator and the JSON decoder
//! never panic or hang on any input, a checked program never meets a run-time type error,
//! and encode/decode round-trip what encode writes. Case counts and a wall-clock cap bound
//! the run so the crate's test run stays short; `PROPTEST_CASES` sets every count for a longer
//! run. Deep nesting and long operator chains end in a diagnostic, never a stack overflow.

use ailang::stdlib::json::{DecodeMode, decode, encode};
use proptest::prelude::*;

/// Source-like text: AILANG tokens and fragments mixed with arbitrary characters.
fn source_like() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "module a/b\n",
        "import std/json (encode)\n",
        "func ",
        "export ",
        "f",
        "(",
        ")",
        "{",
        "}",
        "[",
        "]",
        "x",
        ": int",
        " -> ",
        "=",
        "=>",
        "match ",
        "if ",
        " then ",
        " else ",
        "let ",
        " in ",
        ";",
        "\n",
        ",",
        "\"s${",
        "}\"",
        "\"",
        "\\",
        ".",
        "::",
        "++",
        "1",
        "2.5",
        "-",
        "@a(\"b\")",
        "tests [(1, 2)]",
        "type T = A | B(int)",
        "|",
        "...",
        "_",
        "--c\n",
        "'",
        "$",
        "0x",
        "\\u{",
        "é",
    ]);
    prop::collection::vec(prop_oneof![pieces.prop_map(String::from), any::<char>().prop_map(String::from)], 0..60)
        .prop_map(|v| v.concat())
}

fn json_like() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "{", "}", "[", "]", ":", ",", "\"", "\\", "\\u", "d83d", "null", "true", "fals", "-", "0", "1e", "+", ".5",
        " ", "\"k\"", "1e400", "\n", "\u{1}",
    ]);
    prop::collection::vec(prop_oneof![pieces.prop_map(String::from), any::<char>().prop_map(String::from)], 0..80)
        .prop_map(|v| v.concat())
}

/// Expressions built from the grammar, well-formed but often ill-typed, over the names a
/// generated module binds (`x: int`, `s: string`, `xs: [int]`, `f`, `g`, `T`'s constructors).
fn expr_like() -> impl Strategy<Value = String> {
    let leaf = prop::sample::select(vec![
        "1", "2.5", "\"s\"", "true", "()", "x", "s", "xs", "[]", "None", "A", "B(1)", "f", "g", "{a: 1}", "show",
        "map", "foldl", "r", "y", "-1",
    ])
    .prop_map(String::from);
    leaf.prop_recursive(6, 48, 4, |inner| {
        prop_oneof![
            (
                inner.clone(),
                inner.clone(),
                prop::sample::select(vec!["+", "-", "*", "/", "==", "<", "&&", "++", "::", "%"])
            )
                .prop_map(|(a, b, op)| format!("({a} {op} {b})")),
            (inner.clone(), prop::collection::vec(inner.clone(), 0..3))
                .prop_map(|(f, args)| format!("{f}({})", args.join(", "))),
            inner.clone().prop_map(|b| format!("\\y. {b}")),
            (inner.clone(), inner.clone(), inner.clone()).prop_map(|(c, t, e)| format!("if {c} then {t} else {e}")),
            (inner.clone(), inner.clone()).prop_map(|(v, b)| format!("{{ let y = {v}; {b} }}")),
            prop::collection::vec(inner.clone(), 0..3).prop_map(|items| format!("[{}]", items.join(", "))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a}, {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{{a: {a}, b: {b}}}")),
            inner.clone().prop_map(|a| format!("{a}.a")),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(v, a, b)| format!("match {v} {{ A => {a}, B(n) => {b}, _ => {a} }}")),
            (inner.clone(), inner.clone()).prop_map(|(v, a)| format!("match {v} {{ h :: t => {a}, [] => h }}")),
            inner.clone().prop_map(|a| format!("\"<${{{a}}}>\"")),
            (inner.clone(), inner).prop_map(|(r, v)| format!("{{ {r} | a: {v} }}")),
        ]
    })
}

/// A property's case count: `default`, or `PROPTEST_CASES` when set, so a longer run needs no
/// edit (a count written in the config would override the variable).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

/// Fuzz budget: a case count per property and a wall-clock cap across the whole file, so the
/// run stays bounded on a slow machine whatever the counts.
fn within_budget() -> bool {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed() < std::time::Duration::from_secs(60)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(600), ..ProptestConfig::default() })]

    #[test]
    fn checker_never_panics_on_source_like_text(src in source_like()) {
        if within_budget() {
            let _ = ailang::check_source(&src, "m.ail", true);
        }
    }

    #[test]
    fn checker_and_evaluator_never_panic_on_generated_programs(body in expr_like(), ret in prop::sample::select(vec!["int", "string", "[int]", "bool", "float"])) {
        if within_budget() {
            let source = format!(
                "module m\nimport std/list (map, foldl)\ntype T = A | B(int)\nfunc g(n: int) -> T = if n > 0 then B(n) else A\nfunc f(x: int, s: string, xs: [int]) -> {ret} = {body}\nexport func main(input: string) -> string = show(f(1, input, [1, 2]))\n"
            );
            let errors = ailang::check_source(&source, "m.ail", true);
            // A module the checker accepts runs to a value or a run-time error, never a panic ...
            if errors.is_empty() {
                let r = ailang::run_source(&source, "m.ail", "main", "\"in\"");
                // ... and never a run-time type error: that would be a hole in the checker.
                if let Err(ailang::RunError::Execution(d)) = &r {
                    prop_assert!(d.code != "RT_TYPE", "{}\n{}", source, d);
                }
            }
        }
    }

    #[test]
    fn lexer_and_parser_never_panic(src in source_like()) {
        let _ = ailang::lexer::lex(&src);
        let _ = ailang::parser::parse_module(&src);
        let _ = ailang::parser::parse_expr(&src);
    }

    #[test]
    fn parser_never_panics_on_arbitrary_text(src in ".{0,200}") {
        let _ = ailang::parser::parse_module(&src);
    }

    #[test]
    fn json_decoder_never_panics(text in json_like()) {
        let _ = decode(&text, DecodeMode::FirstValue);
        let _ = decode(&text, DecodeMode::Whole);
    }

    #[test]
    fn decoded_json_reencodes_to_a_fixed_point(text in json_like()) {
        if let Ok(value) = decode(&text, DecodeMode::FirstValue) {
            let once = encode(&value).expect("decoded JSON encodes");
            let again = encode(&decode(&once, DecodeMode::Whole).expect("encoder output decodes")).expect("encodes");
            prop_assert_eq!(once, again);
        }
    }
}

#[test]
fn deeply_nested_json_is_refused_or_decoded_without_overflow() {
    let deep = "[".repeat(200_000);
    assert!(decode(&deep, DecodeMode::FirstValue).is_err());
    let nested = "[".repeat(5_000) + &"]".repeat(5_000);
    assert!(decode(&nested, DecodeMode::Whole).is_ok());
}

#[test]
fn deeply_nested_source_is_an_error_not_an_overflow() {
    for opener in ["(", "[", "{", "\\x. ", "-", "\"${"] {
        let src = format!("module m\nfunc f() -> int = {}", opener.repeat(50_000));
        assert!(ailang::parser::parse_module(&src).is_err(), "{opener}");
    }
}

#[test]
fn deep_recursion_in_process_is_an_error_not_an_overflow() {
    let source = "module m\nfunc count(n: int) -> int = if n == 0 then 0 else 1 + count(n - 1)\nexport func main(n: int) -> string = show(count(n))\n";
    match ailang::run_source(source, "m.ail", "main", "100000") {
        Err(ailang::RunError::Execution(d)) => {
            assert_eq!(d.to_string(), "RT_RECURSION: maximum recursion depth exceeded (10000) at line 2, column 55")
        }
        other => panic!("expected a recursion error, got {other:?}"),
    }
    assert_eq!(ailang::run_source(source, "m.ail", "main", "9000").expect("runs"), "9000");
}

#[test]
fn check_source_reports_what_the_cli_reports() {
    let errors = ailang::check_source("module m\nimport world/logepoch (x)\n", "m.ail", true);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].to_string(), "LDR001: module not found: world/logepoch at m.ail:2:1");
}

/// Long chains that the parser builds without recursing (left-associative operators, postfix
/// calls and field accesses) still make trees as deep as the chain; checking them, and
/// dropping them, must not recurse once per link on the native stack.
#[test]
fn long_operator_and_postfix_chains_are_diagnosed_without_overflow() {
    const LINKS: usize = 100_000;
    let chains = [
        ("left-associative +", format!("1{}", " + 1".repeat(LINKS))),
        ("left-associative &&", format!("true{}", " && true".repeat(LINKS))),
        ("comparison chain", format!("1{}", " == 1".repeat(LINKS))),
        ("right-associative ::", format!("{}[]", "1 :: ".repeat(LINKS))),
        ("power chain", format!("2{}", " ** 2".repeat(LINKS))),
        ("append chain", format!("\"a\"{}", " ++ \"a\"".repeat(LINKS))),
        ("call chain", format!("f{}", "(1)".repeat(LINKS))),
        ("field chain", format!("r{}", ".a".repeat(LINKS))),
        ("negation chain", "- ".repeat(LINKS) + "1"),
        ("not chain", "!".repeat(LINKS) + "true"),
        ("else-if chain", format!("{}0", "if true then 1 else ".repeat(LINKS))),
        ("balanced parentheses", format!("{}1{}", "(".repeat(LINKS), ")".repeat(LINKS))),
        ("balanced lists", format!("{}1{}", "[".repeat(LINKS), "]".repeat(LINKS))),
    ];
    for (name, body) in chains {
        let source = format!("module m\nexport func main(input: string) -> int = {body}\n");
        assert!(ailang::lexer::lex(&source).is_ok(), "{name}");
        let _ = ailang::parser::parse_module(&source);
        let _ = ailang::parser::parse_expr(&body);
        let errors = ailang::check_source(&source, "m.ail", true);
        let codes: Vec<&str> = errors.iter().map(|e| e.code.as_str()).collect();
        assert!(codes.first().is_some_and(|code| ["PAR999", "TC999"].contains(code)), "{name}: {codes:?}");
    }
    // Types and patterns nest too, and so do other expression forms; these are built by
    // recursion, so a fifth of the links is already far past every limit.
    const NESTED: usize = LINKS / 5;
    let declarations = [
        ("nested list type", format!("func f(x: {}int{}) -> int = 1", "[".repeat(NESTED), "]".repeat(NESTED))),
        ("function type chain", format!("func f(x: {}int) -> int = 1", "(int) -> ".repeat(NESTED))),
        (
            "nested tuple pattern",
            format!("func f(x: int) -> int = match x {{ {}y{} => 1 }}", "(".repeat(NESTED), ")".repeat(NESTED)),
        ),
        (
            "cons pattern chain",
            format!("func f(x: [int]) -> int = match x {{ {}[] => 1, _ => 0 }}", "a :: ".repeat(NESTED)),
        ),
        ("lambda chain", format!("func f(x: int) -> int = {}1", "\\y. ".repeat(NESTED))),
        ("let-in chain", format!("func f(x: int) -> int = {}1", "let y = 1 in ".repeat(NESTED))),
        ("match chain", format!("func f(x: int) -> int = {}1", "match x { _ => ".repeat(NESTED))),
        ("nested records", format!("func f(x: int) -> int = {}1{}", "{a: ".repeat(NESTED), "}".repeat(NESTED))),
        (
            "nested interpolation",
            format!("func f(x: int) -> string = {}1{}", "\"${".repeat(NESTED), "}\"".repeat(NESTED)),
        ),
    ];
    for (name, decl) in declarations {
        let source = format!("module m\n{decl}\n");
        let errors = ailang::check_source(&source, "m.ail", true);
        let codes: Vec<&str> = errors.iter().map(|e| e.code.as_str()).collect();
        assert!(!codes.is_empty(), "{name}");
    }
    // A long flat block is no nesting at all: it checks.
    let block = format!("module m\nexport func main(input: string) -> int = {{ {} 1 }}\n", "let x = 1; ".repeat(LINKS));
    assert_eq!(ailang::check_source(&block, "m.ail", true).len(), 0);
}

/// The crate's example modules, garbled: a byte range cut, repeated or replaced, and a token
/// spliced in. Edits of real programs reach deeper into the parser and checker than random text.
fn garbled_example() -> impl Strategy<Value = String> {
    const EXAMPLES: [&str; 4] = [
        include_str!("../examples/records.ail"),
        include_str!("../examples/json_decode.ail"),
        include_str!("../examples/lists.ail"),
        include_str!("../examples/options.ail"),
    ];
    let edit = (
        0usize..3,
        any::<prop::sample::Index>(),
        0usize..40,
        prop::sample::select(vec![
            "(", ")", "{", "}", "[", "]", "\"", "${", "=>", "|", "::", ",", ";", "\n", "é", "--",
        ]),
    );
    (prop::sample::select(EXAMPLES.to_vec()), prop::collection::vec(edit, 1..4)).prop_map(|(source, edits)| {
        let mut bytes = source.as_bytes().to_vec();
        for (kind, at, len, token) in edits {
            let start = at.index(bytes.len().max(1)).min(bytes.len());
            let end = (start + len).min(bytes.len());
            match kind {
                0 => {
                    bytes.drain(start..end);
                }
                1 => {
                    let copy = bytes[start..end].to_vec();
                    bytes.splice(start..start, copy);
                }
                _ => {
                    bytes.splice(start..end, token.bytes());
                }
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(200), ..ProptestConfig::default() })]

    #[test]
    fn front_end_never_panics_on_garbled_examples(src in garbled_example()) {
        if within_budget() {
            let _ = ailang::lexer::lex(&src);
            let _ = ailang::parser::parse_module(&src);
            let _ = ailang::check_source(&src, "m.ail", true);
        }
    }
}
