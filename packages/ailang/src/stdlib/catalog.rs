//! The type of every std function, written in AILANG's own type syntax, with a one-line
//! description. The checker reads the signatures; `ailang builtins` and `ailang iface` print
//! them. A test keeps this table and the native modules in step.
//!
//! A signature is a function type, optionally prefixed by class constraints
//! (`Num a => ([a]) -> a`); lower-case names are type variables and `! {…}` is the effect row.

pub struct Builtin {
    pub module: &'static str,
    pub name: &'static str,
    pub signature: &'static str,
    pub doc: &'static str,
}

impl Builtin {
    /// The effect labels the signature's outermost row names (`IO`, `FS`), comma-joined.
    pub fn effect(&self) -> String {
        let Some(at) = self.signature.rfind("! {") else { return String::new() };
        if self.signature[at..].contains("->") {
            return String::new();
        }
        self.signature[at + 3..].trim_end_matches('}').trim().to_string()
    }
}

const fn b(module: &'static str, name: &'static str, signature: &'static str, doc: &'static str) -> Builtin {
    Builtin { module, name, signature, doc }
}

/// The std types and their constructors, as AILANG declarations.
pub const STD_TYPES: &[(&str, &str)] = &[
    ("prelude", "type Option[a] = Some(a) | None"),
    ("prelude", "type Result[a, e] = Ok(a) | Err(e)"),
    ("std/option", "type Option[a] = Some(a) | None"),
    ("std/result", "type Result[a, e] = Ok(a) | Err(e)"),
    (
        "std/json",
        "type Json = JNull | JBool(bool) | JNumber(float) | JString(string) | JArray([Json]) | JObject([{key: string, value: Json}])",
    ),
];

pub static BUILTINS: &[Builtin] = &[
    // prelude: every module sees these without an import
    b("prelude", "show", "(a) -> string", "render any value as text (strings as they are, records sorted by field)"),
    b("prelude", "intToFloat", "(int) -> float", "convert an int to a float"),
    b("prelude", "floatToInt", "(float) -> int", "truncate a float toward zero"),
    b("prelude", "print", "(string) -> () ! {IO}", "write a string to stdout (needs --caps IO)"),
    b("prelude", "println", "(string) -> () ! {IO}", "write a string and a newline to stdout (needs --caps IO)"),
    b("prelude", "_io_print", "(string) -> () ! {IO}", "the reference's internal name for print"),
    b("prelude", "_io_println", "(string) -> () ! {IO}", "the reference's internal name for println"),
    // std/io
    b("std/io", "print", "(string) -> () ! {IO}", "write a string to stdout"),
    b("std/io", "println", "(string) -> () ! {IO}", "write a string and a newline to stdout"),
    b(
        "std/io",
        "readLine",
        "(()) -> string ! {IO}",
        "read one line from stdin, without its newline (\"\" at end of input)",
    ),
    // std/fs
    b("std/fs", "readFile", "(string) -> string ! {FS}", "read a UTF-8 file beneath the sandbox root"),
    b("std/fs", "writeFile", "(string, string) -> () ! {FS}", "write a file beneath the sandbox root, atomically"),
    b("std/fs", "exists", "(string) -> bool ! {FS}", "whether a path beneath the sandbox root exists"),
    b(
        "std/fs",
        "listDir",
        "(string) -> [string] ! {FS}",
        "the sorted entry names of a directory beneath the sandbox root",
    ),
    // std/json
    b("std/json", "encode", "(Json) -> string", "JSON text, no whitespace, keys in list order"),
    b("std/json", "decode", "(string) -> Result[Json, string]", "parse JSON text (key order and duplicates kept)"),
    b("std/json", "jn", "(()) -> Json", "JSON null"),
    b("std/json", "jb", "(bool) -> Json", "a JSON boolean"),
    b("std/json", "js", "(string) -> Json", "a JSON string"),
    b("std/json", "jnum", "(float) -> Json", "a JSON number"),
    b("std/json", "jint", "(int) -> Json", "a JSON number from an int"),
    b("std/json", "ja", "([Json]) -> Json", "a JSON array"),
    b("std/json", "jo", "([{key: string, value: Json}]) -> Json", "a JSON object from key/value records"),
    b("std/json", "kv", "(string, Json) -> {key: string, value: Json}", "one object entry"),
    b("std/json", "get", "(Json, string) -> Option[Json]", "the value of the first matching key of an object"),
    b("std/json", "has", "(Json, string) -> bool", "whether an object has the key"),
    b("std/json", "getOr", "(Json, string, Json) -> Json", "the key's value or a default"),
    b("std/json", "asString", "(Json) -> Option[string]", "the string inside a JString"),
    b("std/json", "asNumber", "(Json) -> Option[float]", "the number inside a JNumber"),
    b("std/json", "asBool", "(Json) -> Option[bool]", "the boolean inside a JBool"),
    b("std/json", "asArray", "(Json) -> Option[[Json]]", "the items of a JArray"),
    b("std/json", "asObject", "(Json) -> Option[[{key: string, value: Json}]]", "the entries of a JObject"),
    b("std/json", "getString", "(Json, string) -> Option[string]", "a string member of an object"),
    b("std/json", "getNumber", "(Json, string) -> Option[float]", "a number member of an object"),
    b("std/json", "getBool", "(Json, string) -> Option[bool]", "a boolean member of an object"),
    b("std/json", "getArray", "(Json, string) -> Option[[Json]]", "an array member of an object"),
    b("std/json", "getObject", "(Json, string) -> Option[Json]", "a member of an object"),
    b("std/json", "getInt", "(Json, string) -> Option[int]", "a number member, truncated to an int"),
    b("std/json", "keys", "(Json) -> [string]", "the keys of an object, in order"),
    b("std/json", "values", "(Json) -> [Json]", "the values of an object, in order"),
    b("std/json", "filterStrings", "([Json]) -> [string]", "the strings among the items"),
    b("std/json", "filterNumbers", "([Json]) -> [float]", "the numbers among the items"),
    b("std/json", "allStrings", "([Json]) -> Option[[string]]", "the items as strings, if all are strings"),
    b("std/json", "allNumbers", "([Json]) -> Option[[float]]", "the items as numbers, if all are numbers"),
    b("std/json", "getStringArray", "(Json, string) -> Option[[string]]", "the string items of an array member"),
    b(
        "std/json",
        "getStringArrayStrict",
        "(Json, string) -> Option[[string]]",
        "an array member whose items are all strings",
    ),
    b("std/json", "getStringArrayOrEmpty", "(Json, string) -> [string]", "the string items of an array member, or []"),
    b("std/json", "getNumberArray", "(Json, string) -> Option[[float]]", "the number items of an array member"),
    b(
        "std/json",
        "getNumberArrayStrict",
        "(Json, string) -> Option[[float]]",
        "an array member whose items are all numbers",
    ),
    b("std/json", "getNumberArrayOrEmpty", "(Json, string) -> [float]", "the number items of an array member, or []"),
    b("std/json", "decodeFloatArray", "(string) -> Option[[float]]", "parse a JSON array of numbers"),
    // std/string
    b("std/string", "length", "(string) -> int", "the number of code points"),
    b(
        "std/string",
        "substring",
        "(string, int, int) -> string",
        "code points from start (inclusive) to end (exclusive)",
    ),
    b("std/string", "toUpper", "(string) -> string", "upper-case, code point by code point"),
    b("std/string", "toLower", "(string) -> string", "lower-case, code point by code point"),
    b("std/string", "trim", "(string) -> string", "without leading and trailing white space"),
    b("std/string", "trimStart", "(string) -> string", "without leading white space"),
    b("std/string", "trimEnd", "(string) -> string", "without trailing white space"),
    b("std/string", "compare", "(string, string) -> int", "-1, 0 or 1, comparing bytes"),
    b("std/string", "find", "(string, string) -> int", "the code-point index of the first match, or -1"),
    b("std/string", "contains", "(string, string) -> bool", "whether the needle occurs"),
    b("std/string", "startsWith", "(string, string) -> bool", "whether the string starts with the prefix"),
    b("std/string", "endsWith", "(string, string) -> bool", "whether the string ends with the suffix"),
    b("std/string", "stringToInt", "(string) -> Option[int]", "parse a decimal int"),
    b("std/string", "stringToFloat", "(string) -> Option[float]", "parse a float"),
    b("std/string", "intToStr", "(int) -> string", "an int in decimal"),
    b("std/string", "floatToStr", "(float) -> string", "a float as show renders it"),
    b("std/string", "split", "(string, string) -> [string]", "the pieces between separators"),
    b("std/string", "chars", "(string) -> [string]", "one string per code point"),
    b(
        "std/string",
        "foldChars",
        "((a, string) -> a, a, string) -> a",
        "fold over the code points, each as a one-character string, left to right",
    ),
    b("std/string", "charAt", "(string, int) -> string", "the code point at an index (an error out of bounds)"),
    b("std/string", "charCode", "(string) -> int", "the code point of a one-character string, as an int"),
    b("std/string", "join", "(string, [string]) -> string", "the strings joined by the delimiter"),
    b("std/string", "concat", "([string]) -> string", "the strings joined with nothing between"),
    b("std/string", "repeat", "(string, int) -> string", "the string n times"),
    b("std/string", "words", "(string) -> [string]", "the pieces between runs of white space"),
    b(
        "std/string",
        "splitAny",
        "(string, string) -> [string]",
        "the non-empty pieces between any of the separator characters",
    ),
    b("std/string", "replace", "(string, string, string) -> string", "every occurrence of old replaced by new"),
    // std/list
    b("std/list", "length", "([a]) -> int", "the number of items"),
    b("std/list", "head", "([a]) -> Option[a]", "the first item"),
    b("std/list", "tail", "([a]) -> [a]", "all but the first item ([] for [])"),
    b("std/list", "reverse", "([a]) -> [a]", "the items in reverse order"),
    b("std/list", "concat", "([a], [a]) -> [a]", "the first list followed by the second"),
    b("std/list", "zip", "([a], [b]) -> [(a, b)]", "pairs of items, as long as the shorter list"),
    b("std/list", "zipWith", "((a, b) -> c, [a], [b]) -> [c]", "f applied to pairs of items"),
    b("std/list", "map", "((a) -> b, [a]) -> [b]", "f applied to every item"),
    b("std/list", "mapE", "((a) -> b ! {e}, [a]) -> [b] ! {e}", "map with an effectful function, left to right"),
    b("std/list", "filter", "((a) -> bool, [a]) -> [a]", "the items the predicate keeps"),
    b("std/list", "filterE", "((a) -> bool ! {e}, [a]) -> [a] ! {e}", "filter with an effectful predicate"),
    b("std/list", "foldl", "((b, a) -> b, b, [a]) -> b", "fold from the left: f(f(init, x1), x2)…"),
    b("std/list", "foldlE", "((b, a) -> b ! {e}, b, [a]) -> b ! {e}", "foldl with an effectful function"),
    b("std/list", "foldr", "((a, b) -> b, b, [a]) -> b", "fold from the right: f(x1, f(x2, …init))"),
    b(
        "std/list",
        "mapAccumL",
        "((s, a) -> (b, s), s, [a]) -> ([b], s)",
        "map with a state threaded left to right: f(state, x) = (y, state'); gives (ys, final state)",
    ),
    b("std/list", "flatMap", "((a) -> [b], [a]) -> [b]", "f applied to every item, results concatenated"),
    b("std/list", "flatMapE", "((a) -> [b] ! {e}, [a]) -> [b] ! {e}", "flatMap with an effectful function"),
    b("std/list", "forEachE", "((a) -> () ! {e}, [a]) -> () ! {e}", "run an effectful function on every item"),
    b("std/list", "takeMap", "(int, (a) -> b, [a]) -> [b]", "map over the first n items"),
    b("std/list", "takeFlatMap", "(int, (a) -> [b], [a]) -> [b]", "flatMap, stopping once n results exist"),
    b("std/list", "take", "(int, [a]) -> [a]", "the first n items"),
    b("std/list", "drop", "(int, [a]) -> [a]", "all but the first n items"),
    b("std/list", "nth", "([a], int) -> Option[a]", "the item at a 0-based index"),
    b("std/list", "nth_or", "([a], int, a) -> a", "the item at an index, or a default"),
    b("std/list", "last", "([a]) -> Option[a]", "the last item"),
    b("std/list", "head_or", "([a], a) -> a", "the first item, or a default"),
    b("std/list", "last_or", "([a], a) -> a", "the last item, or a default"),
    b("std/list", "any", "((a) -> bool, [a]) -> bool", "whether some item satisfies the predicate (stops early)"),
    b("std/list", "all", "((a) -> bool, [a]) -> bool", "whether every item satisfies the predicate"),
    b(
        "std/list",
        "findIndex",
        "((a) -> bool, [a]) -> Option[int]",
        "the index of the first item satisfying the predicate",
    ),
    b("std/list", "sortBy", "((a, a) -> int, [a]) -> [a]", "a stable sort; cmp(x, y) <= 0 keeps x first"),
    b("std/list", "contains", "Eq a => ([a], a) -> bool", "whether the list has the item"),
    b("std/list", "member", "Eq a => (a, [a]) -> bool", "whether the item is in the list"),
    b("std/list", "dedup", "Eq a => ([a]) -> [a]", "the items without repeats, first occurrences kept"),
    b("std/list", "union", "Eq a => ([a], [a]) -> [a]", "the items of both, without repeats"),
    b("std/list", "intersect", "Eq a => ([a], [a]) -> [a]", "the items of the first that are in the second"),
    b("std/list", "difference", "Eq a => ([a], [a]) -> [a]", "the items of the first that are not in the second"),
    b("std/list", "maximumInt", "([int]) -> Option[int]", "the largest int"),
    b("std/list", "minimumInt", "([int]) -> Option[int]", "the smallest int"),
    b("std/list", "maximumFloat", "([float]) -> Option[float]", "the largest float"),
    b("std/list", "minimumFloat", "([float]) -> Option[float]", "the smallest float"),
    b("std/list", "maximumString", "([string]) -> Option[string]", "the greatest string (bytewise)"),
    b("std/list", "minimumString", "([string]) -> Option[string]", "the least string (bytewise)"),
    b("std/list", "sum", "Num a => ([a]) -> a", "the sum of the items"),
    // std/option
    b("std/option", "map", "((a) -> b, Option[a]) -> Option[b]", "f applied inside Some"),
    b("std/option", "flatMap", "((a) -> Option[b], Option[a]) -> Option[b]", "chain an optional computation"),
    b("std/option", "getOrElse", "(Option[a], a) -> a", "the value inside Some, or a default"),
    b("std/option", "isSome", "(Option[a]) -> bool", "whether it is Some"),
    b("std/option", "isNone", "(Option[a]) -> bool", "whether it is None"),
    b("std/option", "filter", "((a) -> bool, Option[a]) -> Option[a]", "Some only when the predicate holds"),
    // std/result
    b("std/result", "map", "((a) -> b, Result[a, e]) -> Result[b, e]", "f applied inside Ok"),
    b("std/result", "mapErr", "((e) -> f, Result[a, e]) -> Result[a, f]", "f applied inside Err"),
    b("std/result", "flatMap", "((a) -> Result[b, e], Result[a, e]) -> Result[b, e]", "chain a fallible computation"),
    b("std/result", "isOk", "(Result[a, e]) -> bool", "whether it is Ok"),
    b("std/result", "isErr", "(Result[a, e]) -> bool", "whether it is Err"),
    b("std/result", "unwrap", "(Result[a, e]) -> a", "the value inside Ok; Err fails at run time"),
    // std/bytes
    b("std/bytes", "fromString", "(string) -> bytes", "the UTF-8 bytes of a string"),
    b("std/bytes", "toString", "(bytes) -> string", "decode UTF-8 (invalid sequences become U+FFFD)"),
    b("std/bytes", "toInts", "(bytes) -> [int]", "the bytes as ints 0-255"),
    b("std/bytes", "fromInts", "([int]) -> bytes", "bytes from ints 0-255"),
    b("std/bytes", "length", "(bytes) -> int", "the number of bytes"),
    b("std/bytes", "byteAt", "(bytes, int) -> Option[int]", "the byte at an index"),
    b("std/bytes", "slice", "(bytes, int, int) -> Option[bytes]", "len bytes from start, if in range"),
    b("std/bytes", "concat", "(bytes, bytes) -> bytes", "the first bytes followed by the second"),
    b("std/bytes", "concatList", "([bytes]) -> bytes", "all the byte strings joined"),
    b("std/bytes", "toBase64", "(bytes) -> string", "standard base64 with padding"),
    b("std/bytes", "toBase64URL", "(bytes) -> string", "URL-safe base64 without padding"),
    b("std/bytes", "fromBase64", "(string) -> Option[bytes]", "decode standard base64"),
    b("std/bytes", "fromBase64URL", "(string) -> Option[bytes]", "decode URL-safe base64"),
    // std/math
    b("std/math", "intToFloat", "(int) -> float", "convert an int to a float"),
    b("std/math", "floatToInt", "(float) -> int", "truncate a float toward zero"),
    b("std/math", "sqrt", "(float) -> float", "the square root"),
    b("std/math", "pow", "(float, float) -> float", "x raised to y"),
    b("std/math", "floor", "(float) -> float", "round down"),
    b("std/math", "ceil", "(float) -> float", "round up"),
    b("std/math", "round", "(float) -> float", "round half away from zero"),
    b("std/math", "abs", "Num a => (a) -> a", "the absolute value"),
    b("std/math", "min", "Ord a => (a, a) -> a", "the smaller of two values"),
    b("std/math", "max", "Ord a => (a, a) -> a", "the larger of two values"),
    b("std/math", "sin", "(float) -> float", "the sine of an angle in radians"),
    b("std/math", "cos", "(float) -> float", "the cosine of an angle in radians"),
    b("std/math", "tan", "(float) -> float", "the tangent of an angle in radians"),
    b("std/math", "asin", "(float) -> float", "the arcsine, in radians"),
    b("std/math", "acos", "(float) -> float", "the arccosine, in radians"),
    b("std/math", "atan", "(float) -> float", "the arctangent, in radians"),
    b("std/math", "atan2", "(float, float) -> float", "atan2(y, x): the angle of the point (x, y), in radians"),
    b("std/math", "exp", "(float) -> float", "e raised to x"),
    b("std/math", "log", "(float) -> float", "the natural logarithm"),
    b("std/math", "log10", "(float) -> float", "the base-10 logarithm"),
    b("std/math", "abs_Float", "(float) -> float", "the absolute value of a float"),
    b("std/math", "abs_Int", "(int) -> int", "the absolute value of an int (wrapping at the minimum)"),
    b("std/math", "PI", "(()) -> float", "the constant pi"),
    b("std/math", "E", "(()) -> float", "Euler's number e"),
    b("std/math", "isNaN", "(float) -> bool", "whether a float is NaN (NaN is never == to anything)"),
    b("std/math", "bitwiseOr", "(int, int) -> int", "bitwise OR (AILANG has no | operator)"),
];

/// The entry for `name` in std module `module` (`prelude` for the names every module sees).
pub fn lookup(module: &str, name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.module == module && b.name == name)
}
