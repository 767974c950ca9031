//! The top-level parts of canonical JSON text: an object's members, an array's elements, a
//! value's kind, a string's text.
//!
//! The laws that read plans, finish outputs and handler outputs only look one or two levels
//! deep, and they read text that `canonicalize` has already accepted. Scanning that text
//! needs no second parser with limits and refusals of its own: whatever the canonical parser
//! accepted (nesting up to its 500 levels included) splits here, and each part is the exact
//! canonical text of its value, ready to hash or splice.
//!
//! Every function expects canonical bytes (no whitespace, strings escaping only `"`, `\` and
//! controls) and answers `None` for anything else rather than guessing.

/// The kind of a JSON value, named for messages ("the payload is an array, not an object").
pub(crate) fn kind(value: &[u8]) -> &'static str {
    match value.first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// One member of a canonical object: its decoded name, the name as written (with quotes and
/// escapes) and the value's canonical text.
pub(crate) struct Member<'a> {
    pub name: String,
    pub raw_name: &'a [u8],
    pub value: &'a [u8],
}

/// The members of a canonical object, in their (sorted) order; `None` when `text` is not an
/// object.
pub(crate) fn members(text: &[u8]) -> Option<Vec<Member<'_>>> {
    let inner = text.strip_prefix(b"{")?.strip_suffix(b"}")?;
    let mut members = Vec::new();
    let mut pos = 0;
    while pos < inner.len() {
        let name_end = value_end(inner, pos)?;
        let raw_name = inner.get(pos..name_end)?;
        let name = string(raw_name)?;
        if inner.get(name_end) != Some(&b':') {
            return None;
        }
        let value_start = name_end + 1;
        let end = value_end(inner, value_start)?;
        members.push(Member { name, raw_name, value: inner.get(value_start..end)? });
        pos = separator(inner, end)?;
    }
    Some(members)
}

/// The elements of a canonical array; `None` when `text` is not an array.
pub(crate) fn elements(text: &[u8]) -> Option<Vec<&[u8]>> {
    let inner = text.strip_prefix(b"[")?.strip_suffix(b"]")?;
    let mut elements = Vec::new();
    let mut pos = 0;
    while pos < inner.len() {
        let end = value_end(inner, pos)?;
        elements.push(inner.get(pos..end)?);
        pos = separator(inner, end)?;
    }
    Some(elements)
}

/// The text of a JSON string value; `None` for any other value.
pub(crate) fn string(value: &[u8]) -> Option<String> {
    if value.first() != Some(&b'"') {
        return None;
    }
    // A lone string is shallow, so serde_json's own limits cannot bite here.
    serde_json::from_slice(value).ok()
}

/// Whether a canonical object has a top-level member `name`.
pub(crate) fn has_member(text: &[u8], name: &str) -> bool {
    members(text).is_some_and(|members| members.iter().any(|m| m.name == name))
}

/// Where the next part starts after a value ending at `end`: past a `,`, or the end.
fn separator(inner: &[u8], end: usize) -> Option<usize> {
    match inner.get(end) {
        None => Some(end),
        // A trailing comma would leave an empty part; canonical text never has one.
        Some(b',') if end + 1 < inner.len() => Some(end + 1),
        _ => None,
    }
}

/// The end (exclusive) of the value starting at `start`.
fn value_end(text: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut pos = start;
    while let Some(&byte) = text.get(pos) {
        pos += 1;
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => {
                    in_string = false;
                    if depth == 0 {
                        return Some(pos);
                    }
                }
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(pos);
                }
            }
            b',' | b':' if depth == 0 => return (pos - 1 > start).then_some(pos - 1),
            _ => {}
        }
    }
    // A scalar (number or literal) runs to the end of its container's text.
    (depth == 0 && !in_string && pos > start).then_some(pos)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::canonical::canonical_value;

    fn names(text: &str) -> Option<Vec<(String, String)>> {
        members(text.as_bytes()).map(|members| {
            members.into_iter().map(|m| (m.name, String::from_utf8_lossy(m.value).into_owned())).collect()
        })
    }

    #[test]
    fn an_object_splits_into_its_members_whatever_their_values_hold() {
        let text = r#"{"a":1,"b\"c":"x,}{","d":[1,{"e":[]}],"f":null,"g":{}}"#;
        let expected = [("a", "1"), ("b\"c", r#""x,}{""#), ("d", r#"[1,{"e":[]}]"#), ("f", "null"), ("g", "{}")];
        let expected: Vec<(String, String)> = expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(names(text), Some(expected));
        assert_eq!(names("{}"), Some(Vec::new()));
    }

    #[test]
    fn an_escaped_backslash_before_a_quote_ends_the_string() {
        assert_eq!(names(r#"{"a":"\\","b":2}"#).map(|m| m.len()), Some(2));
    }

    #[test]
    fn an_array_splits_into_its_elements() {
        let parts = |text: &str| elements(text.as_bytes()).map(|e| e.iter().map(|p| p.to_vec()).collect::<Vec<_>>());
        assert_eq!(parts("[]"), Some(Vec::new()));
        assert_eq!(
            parts(r#"[1,"a,b",{"c":[2]},[]]"#),
            Some(vec![b"1".to_vec(), br#""a,b""#.to_vec(), br#"{"c":[2]}"#.to_vec(), b"[]".to_vec()])
        );
    }

    #[test]
    fn text_of_another_kind_is_not_split() {
        assert!(members(b"[1]").is_none());
        assert!(elements(b"{}").is_none());
        assert!(members(b"{\"a\":1,}").is_none());
        assert!(members(b"{\"a\"}").is_none());
        assert!(string(b"1").is_none());
    }

    /// Values whose strings and member names are full of what the scanner must not split at:
    /// quotes, backslashes, brackets, separators and controls.
    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        crate::fuzzing::json_value_of(
            "[a-z\"\\\\{}\\[\\],:\x00-\x1fé]{0,8}",
            "(world|worlds|wor|[a-zé\"\\\\,:{}\\[\\]]{0,4})",
        )
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(256))]

        /// The scanner splits canonical text exactly where a full parse would.
        #[test]
        fn parts_are_the_canonical_parts_of_the_value(value in json_value()) {
            let text = canonical_value(&value);
            match &value {
                serde_json::Value::Object(object) => {
                    let mut expected: Vec<(&String, &serde_json::Value)> = object.iter().collect();
                    expected.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                    let found = members(&text).expect("an object splits");
                    prop_assert_eq!(found.len(), expected.len());
                    for (member, (name, item)) in found.iter().zip(expected) {
                        prop_assert_eq!(&member.name, name);
                        prop_assert_eq!(member.raw_name, &canonical_value(&serde_json::Value::String(name.clone()))[..]);
                        prop_assert_eq!(member.value, &canonical_value(item)[..]);
                    }
                    prop_assert!(elements(&text).is_none());
                }
                serde_json::Value::Array(items) => {
                    let found = elements(&text).expect("an array splits");
                    let expected: Vec<Vec<u8>> = items.iter().map(canonical_value).collect();
                    prop_assert_eq!(found.iter().map(|p| p.to_vec()).collect::<Vec<_>>(), expected);
                    prop_assert!(members(&text).is_none());
                }
                serde_json::Value::String(s) => prop_assert_eq!(string(&text), Some(s.clone())),
                _ => {
                    prop_assert!(members(&text).is_none() && elements(&text).is_none() && string(&text).is_none());
                }
            }
        }
    }

    #[test]
    fn deep_nesting_is_scanned_without_limit() {
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(2000), "]".repeat(2000));
        assert_eq!(members(deep.as_bytes()).map(|m| m.len()), Some(1));
    }
}
