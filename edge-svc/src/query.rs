//! Query strings and integer parameters the way the reference's Go handlers read them:
//! `URL.Query().Get` (first occurrence wins, `+` is a space, undecodable pairs are dropped) and
//! `strconv` integer parses (leading `+` accepted, `-0` is 0, leading zeros allowed, overflow
//! is a failure), plus the paging clamp of reference-edge §3.2.

/// Page size when `limit` is absent, empty or below 1.
pub const DEFAULT_PAGE_LIMIT: u32 = 100;
/// Largest page; larger requests are clamped, not refused.
pub const MAX_PAGE_LIMIT: u32 = 500;

/// The first value of `key` in a raw query string, decoded; `None` when no pair names it.
///
/// Mirrors Go's `url.ParseQuery` as used by `Query().Get`: pairs split on `&`, a pair holding a
/// `;` is refused, empty pairs are skipped, key and value are split at the first `=`, and a pair
/// whose key or value does not unescape is dropped rather than failing the request.
pub fn query_get(raw: Option<&str>, key: &str) -> Option<String> {
    let raw = raw?;
    for pair in raw.split('&') {
        if pair.is_empty() || pair.contains(';') {
            continue;
        }
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (Some(name), Some(value)) = (unescape(name, true), unescape(value, true)) else {
            continue;
        };
        if name == key.as_bytes() {
            return Some(String::from_utf8_lossy(&value).into_owned());
        }
    }
    None
}

/// Percent-decodes `text`; `plus_is_space` selects query (`+` → space) over path rules.
/// `None` for a malformed escape (`%` not followed by two hex digits), as Go refuses those.
pub fn unescape(text: &str, plus_is_space: bool) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let high = bytes.get(i + 1).and_then(|b| hex_value(*b))?;
                let low = bytes.get(i + 2).and_then(|b| hex_value(*b))?;
                out.push(high << 4 | low);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    Some(out)
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Go's `strconv.ParseInt(text, 10, 64)`: an optional sign, then one or more ASCII digits, no
/// whitespace or underscores; a value outside i64 is a failure, not a saturation.
pub fn parse_go_int(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // With the grammar checked above, std's parser agrees with Go's on every input (sign
    // handling, leading zeros, and overflow reported as an error).
    text.parse::<i64>().ok()
}

/// The page size for a raw `limit` value (§3.2): absent or empty → 100, below 1 → 100, above
/// 500 → 500; a value that is not a Go integer is refused (the caller names the message).
pub fn page_limit(raw: Option<&str>) -> Result<u32, NotAnInteger> {
    let Some(text) = raw.filter(|text| !text.is_empty()) else {
        return Ok(DEFAULT_PAGE_LIMIT);
    };
    let value = parse_go_int(text).ok_or(NotAnInteger)?;
    Ok(if value < 1 {
        DEFAULT_PAGE_LIMIT
    } else if value > i64::from(MAX_PAGE_LIMIT) {
        MAX_PAGE_LIMIT
    } else {
        // In 1..=500 here, so the conversion cannot fail.
        u32::try_from(value).unwrap_or(MAX_PAGE_LIMIT)
    })
}

/// A non-negative Go integer (`/v1/log/{index}`, `from`); `None` for anything else.
pub fn non_negative(text: &str) -> Option<i64> {
    parse_go_int(text).filter(|value| *value >= 0)
}

/// A parameter that is not an integer; the route's own message goes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotAnInteger;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn go_integer_rules() {
        let table: &[(&str, Option<i64>)] = &[
            ("0", Some(0)),
            ("7", Some(7)),
            ("+7", Some(7)),
            ("-7", Some(-7)),
            ("-0", Some(0)),
            ("+0", Some(0)),
            ("007", Some(7)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("-9223372036854775809", None),
            ("99999999999999999999999", None),
            ("", None),
            ("+", None),
            ("-", None),
            ("++1", None),
            ("+-1", None),
            (" 1", None),
            ("1 ", None),
            ("1_000", None),
            ("0x10", None),
            ("1.0", None),
            ("1e3", None),
            ("١", None),
        ];
        for (text, want) in table {
            assert_eq!(parse_go_int(text), *want, "{text:?}");
        }
    }

    #[test]
    fn paging_clamp() {
        let table: &[(Option<&str>, Result<u32, NotAnInteger>)] = &[
            (None, Ok(100)),
            (Some(""), Ok(100)),
            (Some("0"), Ok(100)),
            (Some("-5"), Ok(100)),
            (Some("1"), Ok(1)),
            (Some("+42"), Ok(42)),
            (Some("500"), Ok(500)),
            (Some("501"), Ok(500)),
            (Some("9223372036854775807"), Ok(500)),
            (Some("-9223372036854775808"), Ok(100)),
            (Some("9223372036854775808"), Err(NotAnInteger)),
            (Some("ten"), Err(NotAnInteger)),
            (Some("1.5"), Err(NotAnInteger)),
        ];
        for (raw, want) in table {
            assert_eq!(page_limit(*raw), *want, "{raw:?}");
        }
    }

    #[test]
    fn non_negative_indexes() {
        assert_eq!(non_negative("0"), Some(0));
        assert_eq!(non_negative("-0"), Some(0));
        assert_eq!(non_negative("+3"), Some(3));
        assert_eq!(non_negative("-1"), None);
        assert_eq!(non_negative("x"), None);
    }

    #[test]
    fn first_query_occurrence_wins_and_values_decode() {
        let table: &[(Option<&str>, &str, Option<&str>)] = &[
            (None, "limit", None),
            (Some(""), "limit", None),
            (Some("limit=5&limit=7"), "limit", Some("5")),
            (Some("limit=&limit=7"), "limit", Some("")),
            (Some("limit"), "limit", Some("")),
            (Some("a=1&limit=9"), "limit", Some("9")),
            (Some("payload=true"), "payload", Some("true")),
            (Some("payload=TRUE"), "payload", Some("TRUE")),
            (Some("after=a%3Ab"), "after", Some("a:b")),
            (Some("after=a+b"), "after", Some("a b")),
            (Some("li%6Dit=3"), "limit", Some("3")),
            // Go drops pairs it cannot decode or that hold a `;`, then keeps looking.
            (Some("limit=%zz&limit=4"), "limit", Some("4")),
            (Some("limit=1;x&limit=2"), "limit", Some("2")),
            (Some("&&limit=6&"), "limit", Some("6")),
            (Some("limit=a=b"), "limit", Some("a=b")),
        ];
        for (raw, key, want) in table {
            assert_eq!(query_get(*raw, key).as_deref(), *want, "{raw:?} {key}");
        }
    }

    #[test]
    fn unescape_rules() {
        assert_eq!(unescape("a%2Fb", false).unwrap(), b"a/b");
        assert_eq!(unescape("a+b", false).unwrap(), b"a+b");
        assert_eq!(unescape("a+b", true).unwrap(), b"a b");
        assert_eq!(unescape("%", false), None);
        assert_eq!(unescape("%4", false), None);
        assert_eq!(unescape("%g0", false), None);
        assert_eq!(unescape("%ff", false).unwrap(), vec![0xff]);
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(256))]

        #[test]
        fn query_and_integer_parsers_never_panic(raw in ".{0,64}", key in "[a-z%+]{0,8}") {
            let _ = query_get(Some(&raw), &key);
            let _ = page_limit(Some(&raw));
            let _ = non_negative(&raw);
            let _ = unescape(&raw, true);
        }

        #[test]
        fn go_integers_round_trip(value in any::<i64>()) {
            prop_assert_eq!(parse_go_int(&value.to_string()), Some(value));
            if value >= 0 {
                let plus = format!("+{}", value);
                prop_assert_eq!(parse_go_int(&plus), Some(value));
            }
        }
    }
}
