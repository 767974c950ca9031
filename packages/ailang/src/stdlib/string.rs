//! std/string: strings are UTF-8 and measured in code points.

use super::{StdModule, native};
use crate::value::*;

pub static MODULE: StdModule = StdModule {
    path: "std/string",
    types: &[],
    funcs: &[
        native("length", 1, |_, a| Ok(Value::Int(as_str(&a[0], "length")?.chars().count() as i64))),
        native("substring", 3, |_, a| {
            let s = as_str(&a[0], "substring")?;
            Ok(Value::str(substring(s, as_int(&a[1], "substring")?, as_int(&a[2], "substring")?)))
        }),
        native("toUpper", 1, |_, a| Ok(Value::str(map_chars(as_str(&a[0], "toUpper")?, true)))),
        native("toLower", 1, |_, a| Ok(Value::str(map_chars(as_str(&a[0], "toLower")?, false)))),
        native("trim", 1, |_, a| Ok(Value::str(as_str(&a[0], "trim")?.trim_matches(char::is_whitespace)))),
        native("trimStart", 1, |_, a| {
            Ok(Value::str(as_str(&a[0], "trimStart")?.trim_start_matches(char::is_whitespace)))
        }),
        native("trimEnd", 1, |_, a| Ok(Value::str(as_str(&a[0], "trimEnd")?.trim_end_matches(char::is_whitespace)))),
        native("compare", 2, |_, a| {
            let (x, y) = (as_str(&a[0], "compare")?, as_str(&a[1], "compare")?);
            Ok(Value::Int(match x.as_bytes().cmp(y.as_bytes()) {
                std::cmp::Ordering::Less => -1,
                std::cmp::Ordering::Equal => 0,
                std::cmp::Ordering::Greater => 1,
            }))
        }),
        native("find", 2, |_, a| Ok(Value::Int(find(as_str(&a[0], "find")?, as_str(&a[1], "find")?)))),
        native("contains", 2, |_, a| {
            Ok(Value::Bool(as_str(&a[0], "contains")?.contains(&**as_str(&a[1], "contains")?)))
        }),
        native("startsWith", 2, |_, a| {
            Ok(Value::Bool(as_str(&a[0], "startsWith")?.starts_with(&**as_str(&a[1], "startsWith")?)))
        }),
        native("endsWith", 2, |_, a| {
            Ok(Value::Bool(as_str(&a[0], "endsWith")?.ends_with(&**as_str(&a[1], "endsWith")?)))
        }),
        native("stringToInt", 1, |_, a| Ok(Value::option(parse_int(as_str(&a[0], "stringToInt")?).map(Value::Int)))),
        native("stringToFloat", 1, |_, a| {
            Ok(Value::option(parse_float(as_str(&a[0], "stringToFloat")?).map(Value::Float)))
        }),
        native("intToStr", 1, |_, a| Ok(Value::str(as_int(&a[0], "intToStr")?.to_string()))),
        native("floatToStr", 1, |_, a| Ok(Value::str(show_float(as_float(&a[0], "floatToStr")?)))),
        native("split", 2, |_, a| Ok(strings(split(as_str(&a[0], "split")?, as_str(&a[1], "split")?)))),
        native("chars", 1, |_, a| Ok(strings(as_str(&a[0], "chars")?.chars().map(String::from).collect()))),
        native("foldChars", 3, |it, a| {
            let s = as_str(&a[2], "foldChars")?.clone();
            let mut acc = a[1].clone();
            let mut buf = [0u8; 4];
            for c in s.chars() {
                acc = it.apply(&a[0], vec![acc, Value::str(&*c.encode_utf8(&mut buf))])?;
            }
            Ok(acc)
        }),
        native("charAt", 2, |_, a| {
            let (s, i) = (as_str(&a[0], "charAt")?, as_int(&a[1], "charAt")?);
            let found = usize::try_from(i).ok().and_then(|i| s.chars().nth(i));
            match found {
                Some(c) => Ok(Value::str(c.to_string())),
                None => Err(index_error(format!(
                    "charAt: index {i} out of bounds for string of length {}",
                    s.chars().count()
                ))),
            }
        }),
        native("charCode", 1, |_, a| {
            let s = as_str(&a[0], "charCode")?;
            let mut chars = s.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Ok(Value::Int(c as i64)),
                _ => Err(type_error(format!(
                    "charCode: expected a one-character string, got {} characters",
                    s.chars().count()
                ))),
            }
        }),
        native("join", 2, |_, a| {
            let delim = as_str(&a[0], "join")?;
            let parts = string_items(&a[1], "join")?;
            Ok(Value::str(parts.join(&**delim)))
        }),
        native("concat", 1, |_, a| Ok(Value::str(string_items(&a[0], "concat")?.concat()))),
        native("repeat", 2, |_, a| {
            let n = as_int(&a[1], "repeat")?;
            Ok(Value::str(as_str(&a[0], "repeat")?.repeat(n.max(0) as usize)))
        }),
        native("words", 1, |_, a| Ok(strings(as_str(&a[0], "words")?.split_whitespace().map(String::from).collect()))),
        native("splitAny", 2, |_, a| {
            let seps = as_str(&a[1], "splitAny")?;
            let parts = as_str(&a[0], "splitAny")?
                .split(|c: char| seps.contains(c))
                .filter(|p| !p.is_empty())
                .map(String::from)
                .collect();
            Ok(strings(parts))
        }),
        native("replace", 3, |_, a| {
            let (s, old, new) = (as_str(&a[0], "replace")?, as_str(&a[1], "replace")?, as_str(&a[2], "replace")?);
            Ok(Value::str(if old.is_empty() { s.to_string() } else { s.replace(&**old, new) }))
        }),
        native("replaceMany", 2, |_, a| {
            let s = as_str(&a[0], "replaceMany")?;
            let mut pairs = Vec::new();
            for pair in as_list(&a[1], "replaceMany")?.iter() {
                match pair {
                    Value::Tuple(t) if t.0.len() == 2 => {
                        pairs.push((as_str(&t.0[0], "replaceMany")?.clone(), as_str(&t.0[1], "replaceMany")?.clone()));
                    }
                    other => {
                        return Err(type_error(format!(
                            "replaceMany: expected (from, to) pairs, got {}",
                            other.type_name()
                        )));
                    }
                }
            }
            Ok(Value::str(replace_many(s, &pairs)))
        }),
        native("foldSlices", 4, |it, a| {
            let (s, delim) = (as_str(&a[0], "foldSlices")?.clone(), as_str(&a[1], "foldSlices")?.clone());
            let mut acc = a[2].clone();
            for piece in split(&s, &delim) {
                acc = it.apply(&a[3], vec![acc, Value::str(piece)])?;
            }
            Ok(acc)
        }),
        native("mapSlicesJoin", 3, |it, a| {
            let (s, delim) = (as_str(&a[0], "mapSlicesJoin")?.clone(), as_str(&a[1], "mapSlicesJoin")?.clone());
            let mut out = Vec::new();
            for piece in split(&s, &delim) {
                out.push(as_str(&it.apply(&a[2], vec![Value::str(piece)])?, "mapSlicesJoin")?.to_string());
            }
            Ok(Value::str(out.join(&*delim)))
        }),
        native("startsWithIgnoreCase", 2, |_, a| {
            let (s, prefix) = (as_str(&a[0], "startsWithIgnoreCase")?, as_str(&a[1], "startsWithIgnoreCase")?);
            let mut chars = s.chars().flat_map(char::to_lowercase);
            Ok(Value::Bool(prefix.chars().flat_map(char::to_lowercase).all(|p| chars.next() == Some(p))))
        }),
    ],
};

/// Every `from` replaced by its `to` in one left-to-right pass: at each position the first
/// pair (in list order) that matches wins, and replaced text is not scanned again.
fn replace_many(s: &str, pairs: &[(std::rc::Rc<str>, std::rc::Rc<str>)]) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        match pairs.iter().find(|(from, _)| !from.is_empty() && rest.starts_with(&**from)) {
            Some((from, to)) => {
                out.push_str(to);
                rest = &rest[from.len()..];
            }
            None => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

fn strings(items: Vec<String>) -> Value {
    Value::list(items.into_iter().map(Value::str).collect())
}

fn string_items(v: &Value, what: &str) -> Result<Vec<String>, crate::Diagnostic> {
    as_list(v, what)?.iter().map(|x| as_str(x, what).map(|s| s.to_string())).collect()
}

/// Rune-indexed slice, with indices clamped into range.
pub fn substring(s: &str, start: i64, end: i64) -> String {
    let len = s.chars().count() as i64;
    let start = start.clamp(0, len);
    let end = end.clamp(start, len);
    s.chars().skip(start as usize).take((end - start) as usize).collect()
}

/// The code-point index of the first match, or -1.
pub fn find(hay: &str, needle: &str) -> i64 {
    match hay.find(needle) {
        Some(byte_at) => hay[..byte_at].chars().count() as i64,
        None => -1,
    }
}

/// Go's per-rune simple case mapping: no final-sigma rule, no multi-character expansions.
fn map_chars(s: &str, upper: bool) -> String {
    s.chars()
        .map(|c| {
            let mut mapped: Vec<char> = if upper { c.to_uppercase().collect() } else { c.to_lowercase().collect() };
            match mapped.len() {
                1 => mapped.remove(0),
                _ if c == '\u{130}' && !upper => 'i',
                _ => c,
            }
        })
        .collect()
}

/// Go `strconv.Atoi`: an optional sign and decimal digits, no blanks, no overflow.
fn parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Go `strconv.ParseFloat`: out-of-range input is an error, not an infinity.
fn parse_float(s: &str) -> Option<f64> {
    let f: f64 = s.parse().ok()?;
    let says_infinite = s.trim_start_matches(['+', '-']).to_ascii_lowercase().starts_with("inf");
    if f.is_infinite() && !says_infinite {
        return None;
    }
    Some(f)
}

/// Go `strings.Split`: an empty separator splits into code points.
fn split(s: &str, sep: &str) -> Vec<String> {
    if sep.is_empty() {
        return s.chars().map(String::from).collect();
    }
    s.split(sep).map(String::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_count_code_points() {
        assert_eq!(find("héllo wörld", "wö"), 6);
        assert_eq!(find("abc", "z"), -1);
        assert_eq!(substring("héllo", 1, 3), "él");
        assert_eq!(substring("abc", -5, 99), "abc");
        assert_eq!(substring("abc", 2, 1), "");
    }

    #[test]
    fn case_mapping_is_per_rune() {
        assert_eq!(map_chars("ΣΑΣ", false), "σασ");
        assert_eq!(map_chars("straße", true), "STRAßE");
    }

    #[test]
    fn number_parsing_follows_go() {
        assert_eq!(parse_int("+42"), Some(42));
        assert_eq!(parse_int(" 42"), None);
        assert_eq!(parse_int("9223372036854775808"), None);
        assert_eq!(parse_float("1e400"), None);
        assert_eq!(parse_float("2.5"), Some(2.5));
    }
}
