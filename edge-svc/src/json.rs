//! JSON bodies with Go `encoding/json` byte parity (reference-edge §1.5): compact output, `<`,
//! `>`, `&`, U+2028 and U+2029 escaped as `\u003c`-style sequences inside every string, and —
//! for bodies the reference writes with `json.NewEncoder(w).Encode` — one trailing newline.
//!
//! Key order is the caller's business: structs serialise in declaration order (the reference's
//! struct-typed bodies), and bodies the reference builds from Go maps are declared with their
//! fields already sorted, so nothing depends on serde_json's map ordering features.

use std::io;

use serde::Serialize;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::ser::{Formatter, Serializer};
use serde_json::value::RawValue;

/// A compact formatter that adds Go's HTML-safe escapes to serde_json's own (which already
/// match Go for `"`, `\`, `\b`, `\f`, `\n`, `\r`, `\t` and `\u00XX` controls).
struct GoFormatter;

impl Formatter for GoFormatter {
    fn write_string_fragment<W>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        let mut start = 0;
        for (offset, c) in fragment.char_indices() {
            let escape = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[start..offset])?;
            writer.write_all(escape.as_bytes())?;
            start = offset + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

/// `json.Marshal`: compact, Go-escaped, no trailing newline.
pub fn marshal<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    marshal_sized(value, 128)
}

/// [`marshal`] into a buffer made for `capacity` bytes, so a large body is written once
/// rather than copied as its buffer grows.
pub fn marshal_sized<T: Serialize + ?Sized>(value: &T, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    let mut serializer = Serializer::with_formatter(&mut out, GoFormatter);
    if let Err(error) = value.serialize(&mut serializer) {
        // Every body the edge writes is a plain struct of strings, integers, vectors and JSON
        // values, none of which can fail to serialise; answer `null` rather than a torn body
        // should a future type break that.
        tracing::error!(%error, "cannot encode a response body");
        return b"null".to_vec();
    }
    out
}

/// `json.NewEncoder(w).Encode`: [`marshal`] plus one `\n`.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = marshal(value);
    out.push(b'\n');
    out
}

/// Why a value could not be decoded the way Go would decode it into the caller's type.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("expected {expected}, got {found}")]
    Type { expected: &'static str, found: &'static str },
    #[error("{0}")]
    Json(#[from] serde_json::Error),
}

/// The JSON kind of a raw value, for messages.
pub fn kind(raw: &RawValue) -> &'static str {
    match raw.get().as_bytes().first() {
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't' | b'f') => "boolean",
        Some(b'n') => "null",
        _ => "number",
    }
}

pub fn is_null(raw: &RawValue) -> bool {
    raw.get() == "null"
}

/// An object's members in document order, duplicates kept.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, &'de RawValue>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// A JSON object decoded as Go decodes it into a `map[string]…`: members in document order
/// (a later duplicate wins when the caller looks a key up from the end). `Ok(None)` for
/// `null`, which leaves a Go map nil.
pub fn go_members(raw: &RawValue) -> Result<Option<Vec<(String, &RawValue)>>, DecodeError> {
    match kind(raw) {
        "null" => Ok(None),
        "object" => Ok(Some(serde_json::from_str::<Members>(raw.get())?.0)),
        found => Err(DecodeError::Type { expected: "object", found }),
    }
}

/// The value of `key` in a member list as a Go map holds it: the last duplicate wins.
pub fn member<'a>(members: &[(String, &'a RawValue)], key: &str) -> Option<&'a RawValue> {
    members.iter().rev().find(|(name, _)| name == key).map(|(_, value)| *value)
}

/// A JSON object decoded as Go decodes it into a struct with fields `names` (lowercase JSON
/// names): a member matches a field by its exact name, else case-insensitively; a later
/// duplicate replaces an earlier one; unknown members are ignored. `Ok(None)` for `null`,
/// which leaves a Go struct untouched.
pub fn go_fields<'a, const N: usize>(
    raw: &'a RawValue,
    names: [&str; N],
) -> Result<Option<[Option<&'a RawValue>; N]>, DecodeError> {
    let Some(members) = go_members(raw)? else {
        return Ok(None);
    };
    let mut fields = [None; N];
    for (key, value) in members {
        let index =
            names.iter().position(|name| *name == key).or_else(|| names.iter().position(|name| fold_eq(name, &key)));
        if let Some(index) = index {
            fields[index] = Some(value);
        }
    }
    Ok(Some(fields))
}

/// Go's `EqualFold` against an ASCII field name: ASCII case folds, and so do the two non-ASCII
/// letters that fold onto ASCII ones (KELVIN SIGN onto `k`, LONG S onto `s`).
fn fold_eq(name: &str, key: &str) -> bool {
    let mut key_chars = key.chars().map(|c| match c {
        '\u{212A}' => 'k',
        '\u{17F}' => 's',
        c => c.to_ascii_lowercase(),
    });
    name.chars().all(|n| key_chars.next() == Some(n.to_ascii_lowercase())) && key_chars.next().is_none()
}

/// A Go `string` field: absent or `null` is empty; any other kind is a decode error.
pub fn go_string(raw: Option<&RawValue>) -> Result<String, DecodeError> {
    match raw {
        None => Ok(String::new()),
        Some(raw) if is_null(raw) => Ok(String::new()),
        Some(raw) if kind(raw) == "string" => Ok(serde_json::from_str(raw.get())?),
        Some(raw) => Err(DecodeError::Type { expected: "string", found: kind(raw) }),
    }
}

/// A raw value re-encoded as Go's `json.Marshal` writes a `json.RawMessage`.
pub fn compact_raw(raw: &RawValue) -> Box<RawValue> {
    RawValue::from_string(String::from_utf8_lossy(&compact(raw.get().as_bytes())).into_owned())
        // Compacting valid JSON yields valid JSON; should that ever fail, the value is
        // answered as `null` rather than as a torn body.
        .unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// Go's `json.Compact` plus its HTML escapes, as `json.Marshal` applies them to a raw message:
/// whitespace between tokens dropped, member order and number spelling kept, `<`, `>`, `&`,
/// U+2028 and U+2029 escaped inside strings. `raw` must already be valid JSON (it comes from a
/// parser or from the core); nothing is validated here.
pub fn compact(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut index = 0;
    while index < raw.len() {
        let b = raw[index];
        index += 1;
        if !in_string {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => {}
                b'"' => {
                    in_string = true;
                    out.push(b);
                }
                _ => out.push(b),
            }
            continue;
        }
        if escaped {
            escaped = false;
            out.push(b);
            continue;
        }
        match b {
            b'\\' => {
                escaped = true;
                out.push(b);
            }
            b'"' => {
                in_string = false;
                out.push(b);
            }
            b'<' => out.extend_from_slice(b"\\u003c"),
            b'>' => out.extend_from_slice(b"\\u003e"),
            b'&' => out.extend_from_slice(b"\\u0026"),
            // U+2028 and U+2029 are E2 80 A8 / E2 80 A9 in UTF-8.
            0xE2 if raw.get(index) == Some(&0x80) && matches!(raw.get(index + 1), Some(0xA8 | 0xA9)) => {
                let last = if raw[index + 1] == 0xA8 { b"\\u2028" } else { b"\\u2029" };
                out.extend_from_slice(last);
                index += 2;
            }
            _ => out.push(b),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn struct_fields_match_like_go() {
        let value = raw(r#"{"ID":1,"method":"a","Method":"b","METHOD":"c","x":2,"\u212aey":3,"jsonrpc":null}"#);
        let [id, method, key, jsonrpc] = go_fields(&value, ["id", "method", "key", "jsonrpc"]).unwrap().unwrap();
        assert_eq!(id.unwrap().get(), "1");
        assert_eq!(method.unwrap().get(), r#""c""#, "the last duplicate wins");
        assert_eq!(key.unwrap().get(), "3", "KELVIN SIGN folds onto k");
        assert_eq!(go_string(jsonrpc).unwrap(), "");
        assert!(go_fields(&raw("null"), ["id"]).unwrap().is_none());
        assert!(go_fields(&raw("[1]"), ["id"]).is_err());
        assert!(go_string(Some(&raw("2"))).is_err());
        let duplicated = raw(r#"{"a":1,"a":2}"#);
        let members = go_members(&duplicated).unwrap().unwrap();
        assert_eq!(member(&members, "a").unwrap().get(), "2");
        assert_eq!(compact_raw(&raw("[1, \"<\"]")).get(), r#"[1,"\u003c"]"#);
    }

    #[test]
    fn compact_keeps_order_and_numbers_and_escapes_like_go() {
        let raw = "{ \"z\" : [1.50, 1e2 ,\n\t-0],\r\"a\":\"x <y> & \\\" \u{2028}\u{2029} \\\\\" , \"n\":null }";
        assert_eq!(
            String::from_utf8(compact(raw.as_bytes())).unwrap(),
            r#"{"z":[1.50,1e2,-0],"a":"x \u003cy\u003e \u0026 \" \u2028\u2029 \\","n":null}"#
        );
        assert_eq!(compact(b"  7 "), b"7");
        assert_eq!(compact(b"\"a b\""), b"\"a b\"");
    }

    #[derive(Serialize)]
    struct Ordered {
        zeta: &'static str,
        alpha: i64,
    }

    #[test]
    fn html_sensitive_characters_are_escaped_like_go() {
        let text = "a<b>c&d\u{2028}e\u{2029}f \"q\" \\ \n\t\u{1}\u{8}\u{c}é";
        assert_eq!(
            String::from_utf8(marshal(text)).unwrap(),
            r#""a\u003cb\u003ec\u0026d\u2028e\u2029f \"q\" \\ \n\t\u0001\b\fé""#
        );
    }

    #[test]
    fn encode_appends_one_newline_and_keeps_struct_order() {
        let body = Ordered { zeta: "z", alpha: -1 };
        assert_eq!(encode(&body), b"{\"zeta\":\"z\",\"alpha\":-1}\n");
        assert_eq!(marshal(&body), b"{\"zeta\":\"z\",\"alpha\":-1}");
    }
}
