//! Property tests: the lexer, the parser and the JSON decoder never panic or hang on any
//! input, and encode/decode round-trip what encode writes. Case counts are bounded so the
//! crate's test run stays short.

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

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

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
