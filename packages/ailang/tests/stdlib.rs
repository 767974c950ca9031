//! Every std function the transitions use, with exact outputs.

mod common;
use common::*;

#[test]
fn std_string() {
    let prelude = "import std/string (length, substring, toUpper, toLower, trim, compare, find, contains, startsWith, endsWith, stringToInt, stringToFloat, intToStr, floatToStr, split, chars, join, concat, repeat, words, splitAny, replace)";
    expect_lines(
        prelude,
        &[
            (r#"show(length("héllo"))"#, "5"),
            (r#"show(length(""))"#, "0"),
            (r#"substring("héllo wörld", 6, 11)"#, "wörld"),
            (r#"substring("abc", -1, 99)"#, "abc"),
            (r#"toUpper("abc é")"#, "ABC É"),
            (r#"toLower("ÀB ΣΑΣ")"#, "àb σασ"),
            (r#"toUpper("straße")"#, "STRAßE"),
            (r#""[${trim("  \t x y \n")}]""#, "[x y]"),
            (r#"show(compare("a", "b"))"#, "-1"),
            (r#"show(compare("b", "a"))"#, "1"),
            (r#"show(compare("a", "a"))"#, "0"),
            (r#"show(find("héllo", "l"))"#, "2"),
            (r#"show(find("abc", "z"))"#, "-1"),
            (r#"show(contains("haystack", "st"))"#, "true"),
            (r#"show(contains("haystack", "x"))"#, "false"),
            (r#"show(startsWith("prefix-x", "prefix"))"#, "true"),
            (r#"show(endsWith("x.ail", ".ail"))"#, "true"),
            (r#"show(stringToInt("-42"))"#, "Some(-42)"),
            (r#"show(stringToInt("4x"))"#, "None"),
            (r#"show(stringToFloat("2.5"))"#, "Some(2.5)"),
            (r#"show(stringToFloat("abc"))"#, "None"),
            ("intToStr(12)", "12"),
            ("floatToStr(2.0)", "2.0"),
            (r#"show(split("a,b,,c", ","))"#, r#"["a", "b", "", "c"]"#),
            (r#"show(split("ab", ""))"#, r#"["a", "b"]"#),
            (r#"show(chars("hé"))"#, r#"["h", "é"]"#),
            (r#"join(", ", ["a", "b", "c"])"#, "a, b, c"),
            (r#"concat(["x", "y", "z"])"#, "xyz"),
            (r#"repeat("ab", 3)"#, "ababab"),
            (r#"show(words("  one two\tthree\n"))"#, r#"["one", "two", "three"]"#),
            (r#"show(splitAny("a-b_c--d", "-_"))"#, r#"["a", "b", "c", "d"]"#),
            (r#"replace("a.b.c", ".", "/")"#, "a/b/c"),
        ],
    );
}

#[test]
fn std_list() {
    let prelude = "import std/list (map, filter, take, drop, length, any, all, foldl, foldr, head, tail, reverse, concat, zip, zipWith, flatMap, nth, last, findIndex, sortBy, member, contains, dedup, union, intersect, difference, maximumInt, minimumInt, maximumString, sum)";
    expect_lines(
        prelude,
        &[
            ("show(map(\\x. x * 2, [1, 2, 3]))", "[2, 4, 6]"),
            ("show(filter(\\x. x % 2 == 0, [1, 2, 3, 4]))", "[2, 4]"),
            ("show(take(2, [1, 2, 3]))", "[1, 2]"),
            ("show(take(0 - 1, [1, 2, 3]))", "[]"),
            ("show(drop(2, [1, 2, 3]))", "[3]"),
            ("show(length([1, 2, 3]))", "3"),
            ("show(any(\\x. x > 2, [1, 2, 3]))", "true"),
            ("show(any(\\x. 1 / x > 0, [1, 0]))", "true"),
            ("show(all(\\x. x > 0, [1, 2]))", "true"),
            ("show(foldl(\\acc x. acc - x, 10, [1, 2, 3]))", "4"),
            ("show(foldr(\\x acc. x - acc, 0, [1, 2, 3]))", "2"),
            ("show(head([7, 8]))", "Some(7)"),
            ("show(head([]))", "None"),
            ("show(tail([7, 8]))", "[8]"),
            ("show(reverse([1, 2, 3]))", "[3, 2, 1]"),
            ("show(concat([1], [2, 3]))", "[1, 2, 3]"),
            ("show(zip([1, 2, 3], [\"a\", \"b\"]))", "[(1, \"a\"), (2, \"b\")]"),
            ("show(zipWith(\\a b. a + b, [1, 2], [10, 20]))", "[11, 22]"),
            ("show(flatMap(\\x. [x, x], [1, 2]))", "[1, 1, 2, 2]"),
            ("show(nth([1, 2, 3], 1))", "Some(2)"),
            ("show(nth([1, 2, 3], 5))", "None"),
            ("show(last([1, 2, 3]))", "Some(3)"),
            ("show(findIndex(\\x. x == 3, [1, 2, 3]))", "Some(2)"),
            (
                "show(sortBy(\\a b. a.k - b.k, [{k: 2, v: \"a\"}, {k: 1, v: \"b\"}, {k: 2, v: \"c\"}]))",
                "[{k: 1, v: \"b\"}, {k: 2, v: \"a\"}, {k: 2, v: \"c\"}]",
            ),
            ("show(member(2, [1, 2]))", "true"),
            ("show(contains([1, 2], 3))", "false"),
            ("show(dedup([1, 2, 1, 3, 2]))", "[1, 2, 3]"),
            ("show(union([1, 2], [2, 3]))", "[1, 2, 3]"),
            ("show(intersect([1, 2, 3], [3, 2]))", "[2, 3]"),
            ("show(difference([1, 2, 3], [2]))", "[1, 3]"),
            ("show(maximumInt([3, 9, 2]))", "Some(9)"),
            ("show(minimumInt([]))", "None"),
            ("show(maximumString([\"b\", \"c\", \"a\"]))", "Some(\"c\")"),
            ("show(sum([1, 2, 3]))", "6"),
        ],
    );
}

#[test]
fn std_option_and_result() {
    let prelude = "import std/option (map as mapOpt, flatMap as flatMapOpt, getOrElse, isSome, isNone, filter as filterOpt)\nimport std/result (map as mapRes, mapErr, flatMap as flatMapRes, isOk, isErr, unwrap)";
    expect_lines(
        prelude,
        &[
            ("show(mapOpt(\\x. x + 1, Some(1)))", "Some(2)"),
            ("show(mapOpt(\\x. x + 1, None))", "None"),
            ("show(flatMapOpt(\\x. if x > 0 then Some(x) else None, Some(0)))", "None"),
            ("show(getOrElse(None, 5))", "5"),
            ("show(getOrElse(Some(1), 5))", "1"),
            ("show(isSome(Some(())))", "true"),
            ("show(isNone(Some(1)))", "false"),
            ("show(filterOpt(\\x. x > 1, Some(2)))", "Some(2)"),
            ("show(mapRes(\\x. x * 2, Ok(4)))", "Ok(8)"),
            ("show(mapRes(\\x. x * 2, Err(\"e\")))", "Err(\"e\")"),
            ("show(mapErr(\\e. \"wrapped ${e}\", Err(\"e\")))", "Err(\"wrapped e\")"),
            ("show(flatMapRes(\\x. Err(\"no ${show(x)}\"), Ok(1)))", "Err(\"no 1\")"),
            ("show(isOk(Ok(())))", "true"),
            ("show(isErr(Ok(())))", "false"),
            ("show(unwrap(Ok(3)))", "3"),
        ],
    );
    fails_with(
        &format!("module m\n{prelude}\nexport func main(s: string) -> string = show(unwrap(Err(\"x\")))\n"),
        "",
        "RT_DIV0",
    );
}

#[test]
fn std_bytes() {
    let prelude = "import std/bytes (fromString, toString, toInts, fromInts, length as byteLength, byteAt, slice, concat as byteConcat, toBase64, fromBase64, fromBase64URL)";
    expect_lines(
        prelude,
        &[
            (r#"show(toInts(fromString("AB")))"#, "[65, 66]"),
            (r#"show(toInts(fromString("é")))"#, "[195, 169]"),
            (r#"show(byteLength(fromString("😀")))"#, "4"),
            ("toString(fromInts([104, 105]))", "hi"),
            ("toString(fromInts([255, 104]))", "\u{fffd}h"),
            (r#"show(byteAt(fromString("A"), 0))"#, "Some(65)"),
            (r#"show(byteAt(fromString("A"), 1))"#, "None"),
            (r#"match slice(fromString("hello"), 1, 3) { Some(b) => toString(b), None => "none" }"#, "ell"),
            (r#"show(slice(fromString("hello"), 5, 1))"#, "None"),
            (r#"toString(byteConcat(fromString("ab"), fromString("cd")))"#, "abcd"),
            (r#"toBase64(fromString("hello"))"#, "aGVsbG8="),
            (r#"match fromBase64("aGVsbG8=") { Some(b) => toString(b), None => "invalid" }"#, "hello"),
            (r#"match fromBase64("aGVsbG8") { Some(b) => toString(b), None => "invalid" }"#, "invalid"),
            (r#"match fromBase64URL("SGVsbG8") { Some(b) => toString(b), None => "invalid" }"#, "Hello"),
        ],
    );
}

#[test]
fn show_is_in_the_prelude() {
    expect_lines(
        "",
        &[
            ("show(42)", "42"),
            ("show(\"raw\")", "raw"),
            ("show([\"q\"])", "[\"q\"]"),
            ("show(-0.0)", "-0.0"),
            ("show(1e21)", "1000000000000000000000.0"),
        ],
    );
}

#[test]
fn pow_and_the_power_operator_are_the_c_library_pow() {
    expect_lines(
        "import std/math (pow)",
        &[
            ("show(pow(2.0, 0.5))", &format!("{:?}", 2f64.powf(0.5))),
            ("show(2.0 ** 10.0)", "1024.0"),
            ("show(pow(1.0000001, 1234567.0))", &format!("{:?}", 1.0000001f64.powf(1234567.0))),
            ("show(pow(10.0, -3.7))", &format!("{:?}", 10f64.powf(-3.7))),
            ("show(pow(-8.0, 1.0 / 3.0))", "NaN"),
        ],
    );
}
