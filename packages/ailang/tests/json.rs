//! std/json: byte-exact encoding and order-preserving decoding tables.

mod common;
use common::*;

const JSON: &str = r#"
import std/json (encode, decode, jn, jb, js, jnum, jint, ja, jo, kv, get, getString, getObject, Json, JNumber)

func roundTrip(s: string) -> string {
  match decode(s) {
    Ok(j) => encode(j),
    Err(e) => "ERR ${e}"
  }
}
"#;

#[test]
fn numbers_encode_in_the_reference_form() {
    expect_lines(
        JSON,
        &[
            ("encode(jnum(1.0))", "1"),
            ("encode(jnum(100.0))", "100"),
            ("encode(jnum(0.1))", "0.1"),
            ("encode(jnum(1.5))", "1.5"),
            ("encode(jnum(-2.25))", "-2.25"),
            ("encode(jnum(0.0))", "0"),
            ("encode(jnum(-0.0))", "-0.0"),
            ("encode(jnum(1e20))", "100000000000000000000"),
            ("encode(jnum(1e21))", "1e+21"),
            ("encode(jnum(1.5e300))", "1.5e+300"),
            ("encode(jnum(1e308))", "1e+308"),
            ("encode(jnum(0.000001))", "0.000001"),
            ("encode(jnum(1e-7))", "1e-7"),
            ("encode(jnum(5e-324))", "5e-324"),
            ("encode(jnum(9223372036854775808.0))", "9223372036854776000"),
            ("encode(jnum(1.0 / 0.0))", "null"),
            ("encode(jnum(1.0 % 0.0))", "null"),
            ("encode(jint(42))", "42"),
            ("encode(jint(-3))", "-3"),
            ("encode(jint(9007199254740993))", "9007199254740992"),
            ("encode(JNumber(7))", "7"),
        ],
    );
}

#[test]
fn strings_encode_with_minimal_escaping() {
    expect_lines(
        JSON,
        &[
            (r#"encode(js("plain"))"#, r#""plain""#),
            (r#"encode(js("a\"b\\c"))"#, r#""a\"b\\c""#),
            (r#"encode(js("\n\t\r"))"#, r#""\n\t\r""#),
            (r#"encode(js("\u{8}\u{c}"))"#, r#""\b\f""#),
            (r#"encode(js("\u{1}\u{1f}\e\0"))"#, r#""\u0001\u001f\u001b\u0000""#),
            (r#"encode(js("<>&"))"#, r#""<>&""#),
            (r#"encode(js("é😀"))"#, r#""é😀""#),
            (r#"encode(js("\u{7f}\u{2028}"))"#, "\"\u{7f}\u{2028}\""),
            (r#"encode(js("/"))"#, r#""/""#),
        ],
    );
}

#[test]
fn structures_encode_in_list_order_without_whitespace() {
    expect_lines(
        JSON,
        &[
            (r#"encode(jo([kv("b", jn()), kv("a", jb(true))]))"#, r#"{"b":null,"a":true}"#),
            (r#"encode(jo([kv("k", jint(1)), kv("k", jint(2))]))"#, r#"{"k":1,"k":2}"#),
            ("encode(ja([]))", "[]"),
            ("encode(jo([]))", "{}"),
            ("encode(jn(()))", "null"),
            (r#"encode(ja([jb(false), ja([jint(1), js("x")]), jo([kv("", jn())])]))"#, r#"[false,[1,"x"],{"":null}]"#),
        ],
    );
}

fn decode_case(input: &str) -> String {
    format!("roundTrip({})", ail_str(input))
}

#[test]
fn decode_keeps_order_duplicates_and_go_errors() {
    let table: &[(&str, &str)] = &[
        (r#"{"b":1,"a":2}"#, r#"{"b":1,"a":2}"#),
        (r#"{"flags":{},"flags":{"write":""}}"#, r#"{"flags":{},"flags":{"write":""}}"#),
        (" [1, 2 ,\n3]\t", "[1,2,3]"),
        (r#""\u00e9\ud83d\ude00""#, r#""é😀""#),
        (r#""\ud800x""#, "\"\u{fffd}x\""),
        (r#""\udc00""#, "\"\u{fffd}\""),
        (r#""a\/b\"\\""#, r#""a/b\"\\""#),
        ("{} x", "{}"),
        ("10000000000000000000", "10000000000000000000"),
        ("-0", "-0.0"),
        ("1E2", "100"),
        ("0.5e-10", "5e-11"),
        ("true", "true"),
        (r#"{"":1}"#, r#"{"":1}"#),
        ("", "ERR no JSON value found"),
        ("   ", "ERR no JSON value found"),
        ("[1,", "ERR unexpected end of input"),
        (r#"{"a":"#, "ERR unexpected end of input"),
        ("nul", "ERR invalid json: unexpected EOF"),
        (r#""abc"#, "ERR invalid json: unexpected EOF"),
        (r#"{"a" 1}"#, "ERR invalid json: invalid character '1' after object key"),
        ("[1,]", "ERR invalid json: invalid character ']' looking for beginning of value"),
        (r#"{"a":1,}"#, "ERR invalid json: invalid character '}' looking for beginning of object key string"),
        ("{1:2}", "ERR invalid json: invalid character '1' looking for beginning of object key string"),
        ("[1 2]", "ERR invalid json: invalid character '2' after array element"),
        (r#"{"a":1 "b":2}"#, "ERR invalid json: invalid character '\"' after object key:value pair"),
        ("x", "ERR invalid json: invalid character 'x' looking for beginning of value"),
        ("trux", "ERR invalid json: invalid character 'x' in literal true (expecting 'e')"),
        ("\"tab\there\"", "ERR invalid json: invalid character '\\t' in string literal"),
        (r#""\q""#, "ERR invalid json: invalid character 'q' in string escape code"),
        ("-x", "ERR invalid json: invalid character 'x' in numeric literal"),
        ("1.x", "ERR invalid json: invalid character 'x' after decimal point in numeric literal"),
        ("1e400", "ERR json: number 1e400 out of float64 range"),
    ];
    let cases: Vec<(String, &str)> = table.iter().map(|(input, want)| (decode_case(input), *want)).collect();
    let refs: Vec<(&str, &str)> = cases.iter().map(|(e, w)| (e.as_str(), *w)).collect();
    expect_lines(JSON, &refs);
}

#[test]
fn get_returns_the_first_matching_key() {
    let prelude = format!(
        "{JSON}\nfunc doc() -> Json = match decode({}) {{ Ok(j) => j, Err(_) => jn() }}\n",
        ail_str(r#"{"flags":{},"flags":{"write":""},"name":"n","n":2}"#)
    );
    expect_lines(
        &prelude,
        &[
            (r#"match getObject(doc(), "flags") { Some(f) => encode(f), None => "none" }"#, "{}"),
            (r#"show(getString(doc(), "name"))"#, "Some(\"n\")"),
            (r#"show(getString(doc(), "n"))"#, "None"),
            (r#"show(get(js("x"), "name"))"#, "None"),
        ],
    );
}
