//! JSON bodies with Go `encoding/json` byte parity (reference-edge §1.5): compact output, `<`,
//! `>`, `&`, U+2028 and U+2029 escaped as `\u003c`-style sequences inside every string, and —
//! for bodies the reference writes with `json.NewEncoder(w).Encode` — one trailing newline.
//!
//! Key order is the caller's business: structs serialise in declaration order (the reference's
//! struct-typed bodies), and bodies the reference builds from Go maps are declared with their
//! fields already sorted, so nothing depends on serde_json's map ordering features.

use std::io;

use serde::Serialize;
use serde_json::ser::{Formatter, Serializer};

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
    let mut out = Vec::with_capacity(128);
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

#[cfg(test)]
mod tests {
    use super::*;

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
