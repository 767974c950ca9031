//! Go `%q` quoting, because the reference's wire messages (hashref errors, `--grant` errors,
//! refusal log lines) embed offending input quoted that way and our texts must match byte for
//! byte; and the table-driven character escapes (HTML text, MCP tool names) share one loop here.

/// `text` with each character `escape` names replaced by its escape and every other kept: the
/// loop under every table of character escapes (HTML text, MCP tool names).
pub fn escape_chars(text: &str, escape: impl Fn(char) -> Option<&'static str>) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match escape(c) {
            Some(escaped) => out.push_str(escaped),
            None => out.push(c),
        }
    }
    out
}

/// Quotes `text` the way Go's `strconv.Quote` does: `"` and `\` escaped, the short C escapes
/// for the usual controls, `\xHH` for other ASCII controls, `\uHHHH` / `\UHHHHHHHH` for
/// non-printable non-ASCII code points; printable non-ASCII is kept raw.
///
/// Go's notion of "printable" is Unicode categories L, M, N, P, S plus the ASCII space. Rust's
/// standard library has no category tables, so non-ASCII printability is approximated by
/// [`is_non_printable`]: controls, separators other than the ASCII space, the common format
/// characters and private-use code points are escaped. Offending input in practice is ASCII.
pub fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_ascii() => out.push(c),
            c if is_non_printable(c) => {
                let cp = c as u32;
                if cp < 0x1_0000 {
                    out.push_str(&format!("\\u{cp:04x}"));
                } else {
                    out.push_str(&format!("\\U{cp:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// How many characters of a caller-chosen text a log line keeps.
pub const LOG_TEXT_CHARS: usize = 200;

/// A caller-chosen `text` for a log line: quoted as [`go_quote`] quotes it (so it cannot forge
/// a line or a field), and cut to its first [`LOG_TEXT_CHARS`] characters, saying how long it
/// was, so it cannot fill the log either.
pub fn quote_for_log(text: &str) -> String {
    match text.char_indices().nth(LOG_TEXT_CHARS) {
        None => go_quote(text),
        Some((cut, _)) => format!("{}… ({} bytes)", go_quote(&text[..cut]), text.len()),
    }
}

fn is_non_printable(c: char) -> bool {
    let cp = c as u32;
    c.is_control()
        || matches!(
            cp,
            0x00a0 | 0x00ad | 0x034f | 0x061c | 0x1680 | 0x180e | 0x3000 | 0xfeff
                | 0x0600..=0x0605
                | 0x2000..=0x200f
                | 0x2028..=0x202f
                | 0x205f..=0x206f
                | 0xfff9..=0xfffb
                | 0xe000..=0xf8ff
                | 0xf0000..=0x10ffff
        )
}

#[cfg(test)]
mod tests {
    use super::{LOG_TEXT_CHARS, go_quote, quote_for_log};

    #[test]
    fn log_text_is_quoted_and_cut() {
        assert_eq!(quote_for_log("task id\nwith a break"), r#""task id\nwith a break""#);
        let long = "é".repeat(LOG_TEXT_CHARS + 50);
        let shown = quote_for_log(&long);
        assert_eq!(shown, format!("\"{}\"… ({} bytes)", "é".repeat(LOG_TEXT_CHARS), long.len()));
        assert_eq!(quote_for_log(&"a".repeat(LOG_TEXT_CHARS)), go_quote(&"a".repeat(LOG_TEXT_CHARS)));
    }

    #[test]
    fn go_quote_matches_strconv_quote() {
        let table: &[(&str, &str)] = &[
            ("", r#""""#),
            ("abc", r#""abc""#),
            ("a\"b", r#""a\"b""#),
            ("a\\b", r#""a\\b""#),
            ("\n\t\r", r#""\n\t\r""#),
            ("\u{07}\u{08}\u{0b}\u{0c}", r#""\a\b\v\f""#),
            ("\u{00}\u{1f}\u{7f}", r#""\x00\x1f\x7f""#),
            ("héllo ✓", "\"héllo ✓\""),
            ("\u{85}", r#""\u0085""#),
            ("\u{a0}", r#""\u00a0""#),
            ("\u{2028}", r#""\u2028""#),
            ("\u{feff}", r#""\ufeff""#),
            ("\u{f0000}", r#""\U000f0000""#),
            ("😀", "\"😀\""),
        ];
        for (input, want) in table {
            assert_eq!(go_quote(input), *want, "quoting {input:?}");
        }
    }
}
