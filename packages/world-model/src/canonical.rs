//! The one canonical JSON encoding (reference-core §0.5 "E3"), used for every hashed JSON
//! object, and the canonical form of transition source text (§0.2).
//!
//! JSON is parsed by a strict parser of our own rather than through `serde_json::Value`, so
//! numbers keep their exact decimal value (never rounded through f64) and the refusals
//! (escaped surrogates, duplicate members, trailing values) are the reference's.

use std::collections::BTreeMap;

use crate::quote::go_quote;

/// Deepest nesting of arrays and objects accepted. The parser is iterative, so this bounds
/// memory and work rather than protecting the stack.
pub const MAX_NESTING: usize = 500;
/// Largest accepted absolute value of a number's written exponent.
pub const MAX_EXPONENT: u32 = 10_000;
/// Most significant digits a number's coefficient may have (leading and trailing zeros are
/// not counted; the normalised length is capped separately by `MAX_NUMBER_BYTES`).
pub const MAX_COEFFICIENT_DIGITS: usize = 1024;
/// Longest normalised number text.
pub const MAX_NUMBER_BYTES: usize = 16_384;

/// Why bytes were refused as canonicalisable JSON. Offsets are byte offsets into the input.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    #[error("canonical JSON: input is {len} bytes; at most {max} are allowed here")]
    TooLarge { len: usize, max: usize },
    #[error("canonical JSON: invalid UTF-8 at byte {offset}")]
    InvalidUtf8 { offset: usize },
    #[error("canonical JSON: unexpected end of input at byte {offset}; expected {expected}")]
    UnexpectedEnd { offset: usize, expected: &'static str },
    #[error(
        "canonical JSON: unexpected {} at byte {offset}; expected {expected}",
        go_quote(&.found.to_string())
    )]
    UnexpectedCharacter { offset: usize, found: char, expected: &'static str },
    #[error("canonical JSON: more data after the value at byte {offset}; exactly one JSON value is allowed")]
    TrailingData { offset: usize },
    #[error(
        "canonical JSON: raw control character U+{code:04X} in a string at byte {offset}; control characters must be escaped"
    )]
    ControlCharacter { offset: usize, code: u8 },
    #[error(
        "canonical JSON: invalid escape at byte {offset}; allowed are \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\u followed by 4 hex digits"
    )]
    InvalidEscape { offset: usize },
    #[error(
        "canonical JSON: escaped surrogate \\u{code:04x} at byte {offset}; surrogate escapes are refused even in valid pairs, write the character as raw UTF-8"
    )]
    EscapedSurrogate { offset: usize, code: u16 },
    #[error("canonical JSON: duplicate object member name {} at byte {offset}", go_quote(.key))]
    DuplicateKey { offset: usize, key: String },
    #[error("canonical JSON: nesting deeper than {max} levels at byte {offset}")]
    TooDeep { offset: usize, max: usize },
    #[error("canonical JSON: invalid number at byte {offset}: {reason}")]
    InvalidNumber { offset: usize, reason: &'static str },
    #[error("canonical JSON: number at byte {offset} has an exponent beyond ±10000; write it in plain form")]
    ExponentOutOfRange { offset: usize },
    #[error("canonical JSON: number at byte {offset} has {digits} significant digits; at most 1024 are allowed")]
    TooManyDigits { offset: usize, digits: usize },
    #[error("canonical JSON: number at byte {offset} normalises to {len} bytes; at most 16384 are allowed")]
    NumberTooLong { offset: usize, len: usize },
}

/// Why source text has no canonical form (reference-core §0.2).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceCanonError {
    #[error("canonical source: starts with a UTF-8 byte order mark at byte 0; remove it")]
    ByteOrderMark,
    #[error("canonical source: invalid UTF-8 at byte {offset}")]
    InvalidUtf8 { offset: usize },
    #[error("canonical source: NUL byte at byte {offset}; source text must not contain NUL")]
    Nul { offset: usize },
}

/// Parses `raw` strictly and returns its canonical encoding: no whitespace, members sorted by
/// the bytes of their names, strings escaping only `"`, `\` and controls, numbers in
/// normalised plain decimal. `max_raw` caps the input length (callers pass their limit).
pub fn canonicalize(raw: &[u8], max_raw: usize) -> Result<Vec<u8>, CanonicalError> {
    if raw.len() > max_raw {
        return Err(CanonicalError::TooLarge { len: raw.len(), max: max_raw });
    }
    let text = std::str::from_utf8(raw).map_err(|e| CanonicalError::InvalidUtf8 { offset: e.valid_up_to() })?;
    Parser { text, pos: 0 }.document()
}

/// The canonical encoding of an in-memory value: keys sorted by bytes, integers exact, f64
/// numbers written in their shortest round-trip form and then normalised like parsed ones.
pub fn canonical_value(value: &serde_json::Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(value, &mut out);
    out
}

/// The canonical encoding of anything serde can turn into a `serde_json::Value`.
pub fn canonical_json<T: serde::Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    Ok(canonical_value(&serde_json::to_value(value)?))
}

fn write_value(value: &serde_json::Value, out: &mut Vec<u8>) {
    use serde_json::Value;
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => {
            let text = number.to_string();
            match normalize_number(text.as_bytes(), 0) {
                Ok((_, normalised)) => out.extend_from_slice(normalised.as_bytes()),
                // Only reachable for numbers beyond the E3 limits, which an f64 never is (a
                // serde_json built with arbitrary_precision could hold one); keep the exact
                // text rather than inventing a value.
                Err(_) => out.extend_from_slice(text.as_bytes()),
            }
        }
        Value::String(text) => write_string(text, out),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        Value::Object(members) => {
            // Sorted here rather than relying on the map's order, which the `preserve_order`
            // feature of serde_json would change.
            let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (index, (key, item)) in sorted.into_iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_value(item, out);
            }
            out.push(b'}');
        }
    }
}

fn write_string(text: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for c in text.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\u{08}' => out.extend_from_slice(b"\\b"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\u{0c}' => out.extend_from_slice(b"\\f"),
            '\r' => out.extend_from_slice(b"\\r"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes());
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// An open container while parsing. The parser keeps its own stack so nesting never grows the
/// call stack.
enum Frame {
    /// Canonical bytes so far, starting with `[`.
    Array { out: Vec<u8>, empty: bool },
    /// Members so far (canonical value bytes by name) and the name awaiting its value.
    Object { members: BTreeMap<String, Vec<u8>>, pending: String },
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn unexpected(&self, expected: &'static str) -> CanonicalError {
        match self.text[self.pos..].chars().next() {
            Some(found) => CanonicalError::UnexpectedCharacter { offset: self.pos, found, expected },
            None => CanonicalError::UnexpectedEnd { offset: self.pos, expected },
        }
    }

    fn document(mut self) -> Result<Vec<u8>, CanonicalError> {
        let mut stack: Vec<Frame> = Vec::new();
        self.skip_whitespace();
        loop {
            // Parse one value, or open a container and go round for its first element.
            let mut value = match self.peek() {
                Some(b'[') => {
                    if self.open(&stack, b']')? {
                        b"[]".to_vec()
                    } else {
                        stack.push(Frame::Array { out: vec![b'['], empty: true });
                        continue;
                    }
                }
                Some(b'{') => {
                    if self.open(&stack, b'}')? {
                        b"{}".to_vec()
                    } else {
                        let mut members = BTreeMap::new();
                        let pending = self.member_name(&mut members)?;
                        stack.push(Frame::Object { members, pending });
                        continue;
                    }
                }
                Some(b'"') => {
                    let text = self.string()?;
                    let mut out = Vec::with_capacity(text.len() + 2);
                    write_string(&text, &mut out);
                    out
                }
                Some(b'-' | b'0'..=b'9') => {
                    let (end, normalised) = normalize_number(self.bytes(), self.pos)?;
                    self.pos = end;
                    normalised.into_bytes()
                }
                Some(b't') => self.literal("true")?,
                Some(b'f') => self.literal("false")?,
                Some(b'n') => self.literal("null")?,
                _ => return Err(self.unexpected("a JSON value")),
            };
            // Hand the finished value to its container, closing every container that ends.
            loop {
                self.skip_whitespace();
                match stack.last_mut() {
                    None => {
                        if self.pos != self.bytes().len() {
                            return Err(CanonicalError::TrailingData { offset: self.pos });
                        }
                        return Ok(value);
                    }
                    Some(Frame::Array { out, empty }) => {
                        if !*empty {
                            out.push(b',');
                        }
                        *empty = false;
                        out.extend_from_slice(&value);
                        if self.comma_or(b']', "',' or ']' in an array")? {
                            break;
                        }
                        value = match stack.pop() {
                            Some(Frame::Array { mut out, .. }) => {
                                out.push(b']');
                                out
                            }
                            _ => unreachable_frame(),
                        };
                    }
                    Some(Frame::Object { members, pending }) => {
                        members.insert(std::mem::take(pending), value);
                        if self.comma_or(b'}', "',' or '}' in an object")? {
                            *pending = self.member_name(members)?;
                            break;
                        }
                        value = match stack.pop() {
                            Some(Frame::Object { members, .. }) => encode_object(members),
                            _ => unreachable_frame(),
                        };
                    }
                }
            }
        }
    }

    /// Steps past a container's opening bracket and the white space after it, one level
    /// deeper than `stack`. True when `close` follows at once (an empty container), which is
    /// stepped past too.
    fn open(&mut self, stack: &[Frame], close: u8) -> Result<bool, CanonicalError> {
        if stack.len() >= MAX_NESTING {
            return Err(CanonicalError::TooDeep { offset: self.pos, max: MAX_NESTING });
        }
        self.pos += 1;
        self.skip_whitespace();
        Ok(self.eat(close))
    }

    /// After a container's element: true at a `,` (stepped past with the white space after
    /// it, so the next element follows), false at `close` (stepped past: the container ends);
    /// anything else is refused as not `expected`.
    fn comma_or(&mut self, close: u8, expected: &'static str) -> Result<bool, CanonicalError> {
        if self.eat(b',') {
            self.skip_whitespace();
            Ok(true)
        } else if self.eat(close) {
            Ok(false)
        } else {
            Err(self.unexpected(expected))
        }
    }

    /// Steps past `byte` when it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let here = self.peek() == Some(byte);
        if here {
            self.pos += 1;
        }
        here
    }

    /// Reads `"name"` and the `:` after it, refusing a name the object already has.
    fn member_name(&mut self, members: &mut BTreeMap<String, Vec<u8>>) -> Result<String, CanonicalError> {
        if self.peek() != Some(b'"') {
            return Err(self.unexpected("a member name string"));
        }
        let offset = self.pos;
        let name = self.string()?;
        if members.contains_key(&name) {
            return Err(CanonicalError::DuplicateKey { offset, key: name });
        }
        self.skip_whitespace();
        if self.peek() != Some(b':') {
            return Err(self.unexpected("':' after a member name"));
        }
        self.pos += 1;
        self.skip_whitespace();
        Ok(name)
    }

    fn literal(&mut self, word: &'static str) -> Result<Vec<u8>, CanonicalError> {
        for expected in word.bytes() {
            match self.peek() {
                Some(b) if b == expected => self.pos += 1,
                _ => return Err(self.unexpected(word)),
            }
        }
        Ok(word.as_bytes().to_vec())
    }

    /// Decodes a string starting at the opening quote.
    fn string(&mut self) -> Result<String, CanonicalError> {
        self.pos += 1;
        let mut decoded = String::new();
        let mut run_start = self.pos;
        loop {
            let Some(b) = self.peek() else {
                return Err(CanonicalError::UnexpectedEnd { offset: self.pos, expected: "'\"' closing a string" });
            };
            match b {
                b'"' => {
                    decoded.push_str(&self.text[run_start..self.pos]);
                    self.pos += 1;
                    return Ok(decoded);
                }
                b'\\' => {
                    decoded.push_str(&self.text[run_start..self.pos]);
                    decoded.push(self.escape()?);
                    run_start = self.pos;
                }
                0x00..=0x1f => {
                    return Err(CanonicalError::ControlCharacter { offset: self.pos, code: b });
                }
                // Multi-byte UTF-8 never contains bytes below 0x80 that matter here, so a
                // byte-wise scan keeps `run_start..pos` on character boundaries.
                _ => self.pos += 1,
            }
        }
    }

    /// Decodes one escape starting at the backslash.
    fn escape(&mut self) -> Result<char, CanonicalError> {
        let offset = self.pos;
        let simple = match self.bytes().get(offset + 1) {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{08}',
            Some(b'f') => '\u{0c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let hex = self
                    .bytes()
                    .get(offset + 2..offset + 6)
                    .filter(|digits| digits.iter().all(u8::is_ascii_hexdigit))
                    .ok_or(CanonicalError::InvalidEscape { offset })?;
                let code = hex.iter().fold(0u16, |acc, &d| acc * 16 + hex_value(d) as u16);
                if (0xd800..=0xdfff).contains(&code) {
                    return Err(CanonicalError::EscapedSurrogate { offset, code });
                }
                self.pos = offset + 6;
                return char::from_u32(u32::from(code)).ok_or(CanonicalError::InvalidEscape { offset });
            }
            None => {
                return Err(CanonicalError::UnexpectedEnd { offset: offset + 1, expected: "an escape character" });
            }
            Some(_) => return Err(CanonicalError::InvalidEscape { offset }),
        };
        self.pos = offset + 2;
        Ok(simple)
    }
}

fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        b'A'..=b'F' => digit - b'A' + 10,
        _ => 0,
    }
}

/// The stack's top frame was just matched by kind, so popping yields the same kind.
fn unreachable_frame() -> ! {
    unreachable!("the frame popped is the frame just matched")
}

fn encode_object(members: BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    // BTreeMap<String, _> iterates in `str` order, which is byte order of the UTF-8 names.
    let mut out = vec![b'{'];
    for (index, (name, value)) in members.into_iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        write_string(&name, &mut out);
        out.push(b':');
        out.extend_from_slice(&value);
    }
    out.push(b'}');
    out
}

/// Parses the JSON number starting at `start` and returns where it ends and its normalised
/// plain-decimal text.
fn normalize_number(bytes: &[u8], start: usize) -> Result<(usize, String), CanonicalError> {
    let invalid = |reason| CanonicalError::InvalidNumber { offset: start, reason };
    let mut pos = start;
    let negative = bytes.get(pos) == Some(&b'-');
    if negative {
        pos += 1;
    }
    let digits_while = |from: usize| bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
    let int_len = digits_while(pos);
    if int_len == 0 {
        return Err(invalid("expected a digit"));
    }
    if bytes[pos] == b'0' && int_len > 1 {
        return Err(invalid("leading zeros are not allowed"));
    }
    let int_digits = &bytes[pos..pos + int_len];
    pos += int_len;
    let mut frac_digits: &[u8] = &[];
    if bytes.get(pos) == Some(&b'.') {
        pos += 1;
        let frac_len = digits_while(pos);
        if frac_len == 0 {
            return Err(invalid("expected a digit after the decimal point"));
        }
        frac_digits = &bytes[pos..pos + frac_len];
        pos += frac_len;
    }
    let mut exponent: i64 = 0;
    if matches!(bytes.get(pos), Some(b'e' | b'E')) {
        pos += 1;
        let exponent_negative = match bytes.get(pos) {
            Some(b'-') => {
                pos += 1;
                true
            }
            Some(b'+') => {
                pos += 1;
                false
            }
            _ => false,
        };
        let exp_len = digits_while(pos);
        if exp_len == 0 {
            return Err(invalid("expected a digit in the exponent"));
        }
        let mut magnitude: u32 = 0;
        for &d in &bytes[pos..pos + exp_len] {
            magnitude = magnitude.saturating_mul(10).saturating_add(u32::from(d - b'0'));
        }
        if magnitude > MAX_EXPONENT {
            return Err(CanonicalError::ExponentOutOfRange { offset: start });
        }
        exponent = if exponent_negative { -i64::from(magnitude) } else { i64::from(magnitude) };
        pos += exp_len;
    }

    // value = digits × 10^scale, with the digits stripped of leading and trailing zeros.
    let mut digits: Vec<u8> = int_digits.iter().chain(frac_digits).copied().collect();
    let mut scale = exponent - frac_digits.len() as i64;
    let leading = digits.iter().take_while(|&&d| d == b'0').count();
    digits.drain(..leading);
    if digits.is_empty() {
        // Every zero, negative or not, is `0`.
        return Ok((pos, "0".to_owned()));
    }
    while digits.last() == Some(&b'0') {
        digits.pop();
        scale += 1;
    }
    // The coefficient cap counts significant digits. Counting digits as written would refuse
    // our own output (`1e2000` normalises to 2001 written digits), breaking idempotence.
    if digits.len() > MAX_COEFFICIENT_DIGITS {
        return Err(CanonicalError::TooManyDigits { offset: start, digits: digits.len() });
    }
    let digit_count = digits.len() as i64;
    let point = digit_count + scale;
    let body_len = if scale >= 0 {
        digit_count + scale
    } else if point > 0 {
        digit_count + 1
    } else {
        2 - point + digit_count
    };
    let len = body_len as usize + usize::from(negative);
    if len > MAX_NUMBER_BYTES {
        return Err(CanonicalError::NumberTooLong { offset: start, len });
    }
    let mut out = String::with_capacity(len);
    if negative {
        out.push('-');
    }
    let digits = String::from_utf8(digits).map_err(|_| invalid("expected ASCII digits"))?;
    if scale >= 0 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', scale as usize));
    } else if point > 0 {
        let (whole, fraction) = digits.split_at(point as usize);
        out.push_str(whole);
        out.push('.');
        out.push_str(fraction);
    } else {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(&digits);
    }
    Ok((pos, out))
}

/// Canonical source bytes (reference-core §0.2): line ends unified to LF, trailing spaces and
/// tabs stripped from every line, trailing empty lines dropped, exactly one final LF (or
/// nothing at all for an empty result). Idempotent.
pub fn canonical_source(text: &[u8]) -> Result<Vec<u8>, SourceCanonError> {
    if text.starts_with(&[0xef, 0xbb, 0xbf]) {
        return Err(SourceCanonError::ByteOrderMark);
    }
    std::str::from_utf8(text).map_err(|e| SourceCanonError::InvalidUtf8 { offset: e.valid_up_to() })?;
    if let Some(offset) = text.iter().position(|&b| b == 0) {
        return Err(SourceCanonError::Nul { offset });
    }
    let mut lines: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    let mut pos = 0;
    while pos < text.len() {
        match text[pos] {
            b'\n' => {
                lines.push(&text[start..pos]);
                pos += 1;
                start = pos;
            }
            b'\r' => {
                lines.push(&text[start..pos]);
                pos += if text.get(pos + 1) == Some(&b'\n') { 2 } else { 1 };
                start = pos;
            }
            _ => pos += 1,
        }
    }
    lines.push(&text[start..]);
    let mut stripped: Vec<&[u8]> = lines
        .into_iter()
        .map(|line| {
            let keep = line.len() - line.iter().rev().take_while(|&&b| b == b' ' || b == b'\t').count();
            &line[..keep]
        })
        .collect();
    while stripped.last().is_some_and(|line| line.is_empty()) {
        stripped.pop();
    }
    let mut out = Vec::with_capacity(text.len() + 1);
    for line in &stripped {
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical_parts::{elements, members};
    use crate::fuzzing::{json_value, spelled};
    use proptest::prelude::*;

    const CAP: usize = 1 << 20;

    fn canon(text: &str) -> Result<String, CanonicalError> {
        canonicalize(text.as_bytes(), CAP).map(|bytes| String::from_utf8(bytes).unwrap())
    }

    #[test]
    fn numbers_normalise_to_plain_decimal() {
        let table = [
            ("0", "0"),
            ("-0", "0"),
            ("-0.0e5", "0"),
            ("0.000", "0"),
            ("1", "1"),
            ("1.50", "1.5"),
            ("1e2", "100"),
            ("1E2", "100"),
            ("1e+2", "100"),
            ("-1.0", "-1"),
            ("1e-3", "0.001"),
            ("-1.5e-1", "-0.15"),
            ("12.34e1", "123.4"),
            ("12.34e2", "1234"),
            ("12.34e-2", "0.1234"),
            ("0.5", "0.5"),
            ("100", "100"),
            ("100e-2", "1"),
            ("1.000000000000000000001", "1.000000000000000000001"),
            ("123456789012345678901234567890", "123456789012345678901234567890"),
            ("9007199254740993", "9007199254740993"),
            ("0.1e1", "1"),
            ("10.0e-1", "1"),
            ("1e00002", "100"),
            ("5e-0", "5"),
        ];
        for (input, want) in table {
            assert_eq!(canon(input).unwrap(), want, "number {input}");
        }
        assert_eq!(canon("1e10000").unwrap().len(), 10001);
        assert_eq!(canon("1e-10000").unwrap().len(), 10002);
        // Zeros are not significant digits, so the canonical form of a large number is itself
        // accepted again.
        let big = canon("1e9000").unwrap();
        assert_eq!(canon(&big).unwrap(), big);
        let padded = format!("0.{}1{}", "0".repeat(2000), "0".repeat(2000));
        assert_eq!(canon(&padded).unwrap(), format!("0.{}1", "0".repeat(2000)));
    }

    #[test]
    fn number_refusals() {
        let many_digits = "1".repeat(1025);
        let max_digits = "1".repeat(1024);
        assert_eq!(canon(&max_digits).unwrap(), max_digits);
        let table: Vec<(String, CanonicalError)> = vec![
            ("1e10001".into(), CanonicalError::ExponentOutOfRange { offset: 0 }),
            ("1e-10001".into(), CanonicalError::ExponentOutOfRange { offset: 0 }),
            ("[0e99999999999999999999]".into(), CanonicalError::ExponentOutOfRange { offset: 1 }),
            (many_digits.clone(), CanonicalError::TooManyDigits { offset: 0, digits: 1025 }),
            (format!("-0.00{many_digits}000e5"), CanonicalError::TooManyDigits { offset: 0, digits: 1025 }),
            ("01".into(), CanonicalError::InvalidNumber { offset: 0, reason: "leading zeros are not allowed" }),
            ("-".into(), CanonicalError::InvalidNumber { offset: 0, reason: "expected a digit" }),
            (
                "1.".into(),
                CanonicalError::InvalidNumber { offset: 0, reason: "expected a digit after the decimal point" },
            ),
            ("1e".into(), CanonicalError::InvalidNumber { offset: 0, reason: "expected a digit in the exponent" }),
            ("1e+".into(), CanonicalError::InvalidNumber { offset: 0, reason: "expected a digit in the exponent" }),
            ("+1".into(), CanonicalError::UnexpectedCharacter { offset: 0, found: '+', expected: "a JSON value" }),
            (".5".into(), CanonicalError::UnexpectedCharacter { offset: 0, found: '.', expected: "a JSON value" }),
            ("0x1".into(), CanonicalError::TrailingData { offset: 1 }),
        ];
        for (input, want) in table {
            assert_eq!(canon(&input).unwrap_err(), want, "number {input}");
        }
    }

    #[test]
    fn number_length_limit_is_enforced() {
        // 1024 significant digits shifted by the largest exponent stays under the cap …
        let digits = "1".repeat(1024);
        let at_cap = format!("{digits}e10000");
        assert_eq!(canon(&at_cap).unwrap().len(), 11024);
        // … but written zeros are not capped by the exponent rule, only by the result size.
        let zeros = "0".repeat(MAX_NUMBER_BYTES - 1);
        assert_eq!(canon(&format!("1{zeros}")).unwrap().len(), MAX_NUMBER_BYTES);
        assert_eq!(
            canon(&format!("-1{zeros}")).unwrap_err(),
            CanonicalError::NumberTooLong { offset: 0, len: MAX_NUMBER_BYTES + 1 }
        );
        assert_eq!(
            canon(&format!("[1{zeros}e1]")).unwrap_err(),
            CanonicalError::NumberTooLong { offset: 1, len: MAX_NUMBER_BYTES + 1 }
        );
    }

    #[test]
    fn structure_and_whitespace() {
        let table = [
            (" {\"b\" : 1 ,\n\t\"a\":[ 1 , 2 ] } \r\n", r#"{"a":[1,2],"b":1}"#),
            ("[]", "[]"),
            ("{}", "{}"),
            ("[ ]", "[]"),
            ("{ }", "{}"),
            ("[[],{},[[]]]", "[[],{},[[]]]"),
            ("true", "true"),
            ("false", "false"),
            ("null", "null"),
            ("[true,false,null]", "[true,false,null]"),
            (r#"{"b":{"d":1,"c":2},"a":0}"#, r#"{"a":0,"b":{"c":2,"d":1}}"#),
            // Byte order of names: uppercase before lowercase, shorter prefix first, UTF-8
            // multibyte after ASCII.
            (r#"{"é":1,"b":2,"B":3,"ba":4,"":5}"#, r#"{"":5,"B":3,"b":2,"ba":4,"é":1}"#),
            (r#"{"\u00e9":1,"z":2}"#, r#"{"z":2,"é":1}"#),
        ];
        for (input, want) in table {
            assert_eq!(canon(input).unwrap(), want, "input {input:?}");
        }
    }

    #[test]
    fn string_escapes() {
        let table = [
            (r#""plain""#, r#""plain""#),
            (r#""\"\\\/""#, r#""\"\\/""#),
            (r#""\b\f\n\r\t""#, r#""\b\f\n\r\t""#),
            (r#""\u0000\u0001\u001f""#, r#""\u0000\u0001\u001f""#),
            (r#""\u001F""#, r#""\u001f""#),
            (r#""\u0041\u00e9\u2028""#, "\"Aé\u{2028}\""),
            (r#""<>&""#, r#""<>&""#),
            (r#""\u003c\u003e\u0026""#, r#""<>&""#),
            ("\"\u{7f}\"", "\"\u{7f}\""),
            ("\"😀\"", "\"😀\""),
            (r#""\u0020""#, r#"" ""#),
        ];
        for (input, want) in table {
            assert_eq!(canon(input).unwrap(), want, "input {input:?}");
        }
    }

    #[test]
    fn refusals_name_the_rule_and_offset() {
        let table: Vec<(&[u8], CanonicalError)> = vec![
            (b"", CanonicalError::UnexpectedEnd { offset: 0, expected: "a JSON value" }),
            (b"   ", CanonicalError::UnexpectedEnd { offset: 3, expected: "a JSON value" }),
            (b"1 2", CanonicalError::TrailingData { offset: 2 }),
            (b"{} {}", CanonicalError::TrailingData { offset: 3 }),
            (b"\"a\"x", CanonicalError::TrailingData { offset: 3 }),
            (b"[1\xff]", CanonicalError::InvalidUtf8 { offset: 2 }),
            (b"\"\xc3\"", CanonicalError::InvalidUtf8 { offset: 1 }),
            (br#""\ud83d\ude00""#, CanonicalError::EscapedSurrogate { offset: 1, code: 0xd83d }),
            (br#"["x\uDFFF"]"#, CanonicalError::EscapedSurrogate { offset: 3, code: 0xdfff }),
            (br#"{"a":1,"a":2}"#, CanonicalError::DuplicateKey { offset: 7, key: "a".into() }),
            (br#"{"a":1,"\u0061":2}"#, CanonicalError::DuplicateKey { offset: 7, key: "a".into() }),
            (b"\"a\nb\"", CanonicalError::ControlCharacter { offset: 2, code: b'\n' }),
            (b"\"\\x\"", CanonicalError::InvalidEscape { offset: 1 }),
            (b"\"\\u12\"", CanonicalError::InvalidEscape { offset: 1 }),
            (b"\"\\u12g4\"", CanonicalError::InvalidEscape { offset: 1 }),
            (b"\"abc", CanonicalError::UnexpectedEnd { offset: 4, expected: "'\"' closing a string" }),
            (b"\"\\", CanonicalError::UnexpectedEnd { offset: 2, expected: "an escape character" }),
            (b"[1,]", CanonicalError::UnexpectedCharacter { offset: 3, found: ']', expected: "a JSON value" }),
            (
                b"[1 2]",
                CanonicalError::UnexpectedCharacter { offset: 3, found: '2', expected: "',' or ']' in an array" },
            ),
            (
                b"{\"a\" 1}",
                CanonicalError::UnexpectedCharacter { offset: 5, found: '1', expected: "':' after a member name" },
            ),
            (
                b"{\"a\":1,}",
                CanonicalError::UnexpectedCharacter { offset: 7, found: '}', expected: "a member name string" },
            ),
            (b"{1:2}", CanonicalError::UnexpectedCharacter { offset: 1, found: '1', expected: "a member name string" }),
            (
                b"{\"a\":1 \"b\":2}",
                CanonicalError::UnexpectedCharacter { offset: 7, found: '"', expected: "',' or '}' in an object" },
            ),
            (b"[", CanonicalError::UnexpectedEnd { offset: 1, expected: "a JSON value" }),
            (b"tru", CanonicalError::UnexpectedEnd { offset: 3, expected: "true" }),
            (b"nul1", CanonicalError::UnexpectedCharacter { offset: 3, found: '1', expected: "null" }),
            (
                "\u{feff}1".as_bytes(),
                CanonicalError::UnexpectedCharacter { offset: 0, found: '\u{feff}', expected: "a JSON value" },
            ),
            (b"\x0c1", CanonicalError::UnexpectedCharacter { offset: 0, found: '\u{0c}', expected: "a JSON value" }),
        ];
        for (input, want) in table {
            assert_eq!(canonicalize(input, CAP).unwrap_err(), want, "input {:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn error_messages_are_actionable() {
        let table: &[(&[u8], usize, &str)] = &[
            (b"[1]", 2, "canonical JSON: input is 3 bytes; at most 2 are allowed here"),
            (br#"{"a":1,"a":2}"#, CAP, r#"canonical JSON: duplicate object member name "a" at byte 7"#),
            (
                br#""\ud83d\ude00""#,
                CAP,
                r"canonical JSON: escaped surrogate \ud83d at byte 1; surrogate escapes are refused even in valid pairs, write the character as raw UTF-8",
            ),
            (b"1 2", CAP, "canonical JSON: more data after the value at byte 2; exactly one JSON value is allowed"),
            (
                b"\"\t\"",
                CAP,
                "canonical JSON: raw control character U+0009 in a string at byte 1; control characters must be escaped",
            ),
            (b"[1 2]", CAP, r#"canonical JSON: unexpected "2" at byte 3; expected ',' or ']' in an array"#),
            (b"1e10001", CAP, "canonical JSON: number at byte 0 has an exponent beyond ±10000; write it in plain form"),
        ];
        for (input, cap, want) in table {
            assert_eq!(canonicalize(input, *cap).unwrap_err().to_string(), *want);
        }
        assert_eq!(canonicalize(b"[1]", 3).unwrap(), b"[1]");
    }

    #[test]
    fn nesting_is_bounded_without_recursion() {
        let ok = "[".repeat(MAX_NESTING) + &"]".repeat(MAX_NESTING);
        assert_eq!(canon(&ok).unwrap(), ok);
        let deep = "[".repeat(MAX_NESTING + 1) + &"]".repeat(MAX_NESTING + 1);
        assert_eq!(canon(&deep).unwrap_err(), CanonicalError::TooDeep { offset: MAX_NESTING, max: MAX_NESTING });
        let hostile = "[{\"a\":".repeat(100_000);
        let err = canon(&hostile).unwrap_err();
        assert!(matches!(err, CanonicalError::TooDeep { .. }), "{err:?}");
        let unclosed = "[".repeat(100_000);
        assert!(canon(&unclosed).is_err());
    }

    #[test]
    fn canonical_value_matches_canonicalize() {
        let value = serde_json::json!({
            "z": [1, -2, 3.5, 1e300, 0.000001, 1e-7, -0.0, 18446744073709551615u64, i64::MIN],
            "a": {"y": null, "x": true, "é": "<\u{2028}\n\u{1}\"\\"},
            "B": [],
            "": {}
        });
        let from_value = canonical_value(&value);
        let from_text = canonicalize(&serde_json::to_vec(&value).unwrap(), CAP).unwrap();
        assert_eq!(from_value, from_text);
        let text = String::from_utf8(from_value).unwrap();
        assert!(text.starts_with(r#"{"":{},"B":[],"a":{"x":true,"y":null,"é":"<"#), "{text}");
        assert!(text.contains(r#",0.000001,0.0000001,0,18446744073709551615,-9223372036854775808]"#), "{text}");
        assert!(text.contains(&format!(",1{},", "0".repeat(300))), "{text}");
    }

    #[test]
    fn canonical_json_of_a_struct() {
        #[derive(serde::Serialize)]
        struct Access {
            scope: &'static str,
            effect: &'static str,
            cost: i64,
        }
        let bytes = canonical_json(&Access { scope: "worktree", effect: "Workspace.Read", cost: 1 }).unwrap();
        assert_eq!(bytes, br#"{"cost":1,"effect":"Workspace.Read","scope":"worktree"}"#);
    }

    #[test]
    fn canonical_source_rules() {
        // Valid sources are UTF-8, so the rows are text.
        let table = [
            ("", ""),
            ("\n\n\n", ""),
            ("  \t \r\n \n", ""),
            ("a", "a\n"),
            ("a\n", "a\n"),
            ("a\r\nb\rc\n", "a\nb\nc\n"),
            ("a\r\r\nb", "a\n\nb\n"),
            ("a  \t\nb \n\n\n", "a\nb\n"),
            ("\n\na", "\n\na\n"),
            ("a\n  \nb", "a\n\nb\n"),
            (" lead", " lead\n"),
            ("x\x0b \n", "x\x0b\n"),
            ("é  \r", "é\n"),
        ];
        for (input, want) in table {
            let got = canonical_source(input.as_bytes()).unwrap();
            assert_eq!(got, want.as_bytes(), "source {input:?}");
            assert_eq!(canonical_source(&got).unwrap(), got, "idempotent");
        }
    }

    #[test]
    fn canonical_source_refusals() {
        let table: &[(&[u8], SourceCanonError, &str)] = &[
            (
                b"\xef\xbb\xbfa",
                SourceCanonError::ByteOrderMark,
                "canonical source: starts with a UTF-8 byte order mark at byte 0; remove it",
            ),
            (b"ab\xffc", SourceCanonError::InvalidUtf8 { offset: 2 }, "canonical source: invalid UTF-8 at byte 2"),
            (
                b"abc\0",
                SourceCanonError::Nul { offset: 3 },
                "canonical source: NUL byte at byte 3; source text must not contain NUL",
            ),
        ];
        for (input, want, message) in table {
            let err = canonical_source(input).unwrap_err();
            assert_eq!(&err, want);
            assert_eq!(err.to_string(), *message);
        }
        // A BOM later in the file is ordinary text.
        assert_eq!(canonical_source("a\u{feff}".as_bytes()).unwrap(), "a\u{feff}\n".as_bytes());
    }

    /// Number texts in every shape the grammar allows.
    fn number_text() -> impl Strategy<Value = String> {
        (
            any::<bool>(),
            "(0|[1-9][0-9]{0,30})",
            prop::option::of("[0-9]{1,30}"),
            prop::option::of(("[eE]", "[+-]?", "[0-9]{1,4}")),
        )
            .prop_map(|(negative, int, frac, exp)| {
                let mut text = String::new();
                if negative {
                    text.push('-');
                }
                text.push_str(&int);
                if let Some(frac) = frac {
                    text.push('.');
                    text.push_str(&frac);
                }
                if let Some((e, sign, digits)) = exp {
                    text.push_str(&e);
                    text.push_str(&sign);
                    text.push_str(&digits);
                }
                text
            })
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(256))]

        #[test]
        fn canonicalize_is_idempotent_on_values(value in json_value(), pretty in any::<bool>()) {
            let raw = if pretty {
                serde_json::to_vec_pretty(&value).unwrap()
            } else {
                serde_json::to_vec(&value).unwrap()
            };
            let once = canonicalize(&raw, CAP).unwrap();
            let twice = canonicalize(&once, CAP).unwrap();
            prop_assert_eq!(&once, &twice);
            prop_assert_eq!(once, canonical_value(&value));
        }

        #[test]
        fn numbers_are_idempotent_and_exact(text in number_text()) {
            let once = canonicalize(text.as_bytes(), CAP).unwrap();
            let twice = canonicalize(&once, CAP).unwrap();
            prop_assert_eq!(&once, &twice);
            // Plain decimal: no exponent, no trailing fractional zero, no leading zero.
            let out = String::from_utf8(once).unwrap();
            prop_assert!(!out.contains(['e', 'E', '+']));
            if out.contains('.') {
                prop_assert!(!out.ends_with('0') && !out.ends_with('.'));
            }
            // Same value as f64 sees it, where f64 can represent the magnitude at all.
            let original: f64 = text.parse().unwrap();
            let normalised: f64 = out.parse().unwrap();
            if original.is_finite() && original != 0.0 {
                prop_assert_eq!(original, normalised);
            }
        }

        #[test]
        fn canonicalize_never_panics_on_bytes(raw in prop::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(once) = canonicalize(&raw, CAP) {
                prop_assert_eq!(canonicalize(&once, CAP).unwrap(), once);
            }
        }

        #[test]
        fn canonicalize_never_panics_on_json_like_text(raw in "[\\[\\]{}\",:0-9eE.+\\-\\\\u tfnrl a-d\u{e9}]{0,64}") {
            if let Ok(once) = canonicalize(raw.as_bytes(), CAP) {
                prop_assert_eq!(canonicalize(&once, CAP).unwrap(), once);
            }
        }

        /// Any bytes at all: a refusal, or source text that is its own canonical form.
        #[test]
        fn canonical_source_never_panics_and_is_a_fixed_point(raw in prop::collection::vec(prop_oneof![any::<u8>(), prop::sample::select(b"\r\n\t \0\xef\xbb\xbf".to_vec())], 0..128)) {
            if let Ok(once) = canonical_source(&raw) {
                prop_assert_eq!(canonical_source(&once).unwrap(), once);
            }
        }

        #[test]
        fn canonical_source_is_idempotent(raw in "[a \\t\\r\\n\u{e9}]{0,64}") {
            let once = canonical_source(raw.as_bytes()).unwrap();
            prop_assert_eq!(canonical_source(&once).unwrap(), once);
        }

        /// Member order and whitespace are spelling, not value: every spelling of a value
        /// canonicalises to the same bytes.
        #[test]
        fn every_spelling_of_a_value_has_one_canonical_form(value in json_value(), seed in any::<u64>(), spaced in any::<bool>()) {
            let raw = spelled(&value, seed, spaced);
            prop_assert_eq!(canonicalize(&raw, CAP).unwrap(), canonical_value(&value));
        }

        /// Canonical text reads back as the value it encodes (integers exactly; fractions are
        /// pinned by the number properties above).
        #[test]
        fn canonical_text_reads_back_as_the_same_value(value in json_value()) {
            let value = integral(value);
            let canonical = canonicalize(&serde_json::to_vec(&value).unwrap(), CAP).unwrap();
            prop_assert_eq!(serde_json::from_slice::<serde_json::Value>(&canonical).unwrap(), value);
        }

        /// At every level: members sorted by the bytes of their names, each name once, no
        /// whitespace between tokens.
        #[test]
        fn canonical_members_are_sorted_by_bytes_at_every_level(value in json_value(), seed in any::<u64>()) {
            let canonical = canonicalize(&spelled(&value, seed, true), CAP).unwrap();
            assert_canonical_layout(&canonical);
        }

        /// Valid JSON with bytes cut, repeated or replaced: never a panic; whatever is accepted is
        /// JSON to any other parser too, and its canonical form is a fixed point.
        #[test]
        fn garbled_json_is_refused_or_canonical(
            value in json_value(),
            edits in prop::collection::vec((0usize..3, any::<prop::sample::Index>(), 0usize..6, prop::sample::select(b"{}[]\",:-.eE0\\u tfn ".to_vec())), 1..4),
        ) {
            let mut raw = spelled(&value, 7, false);
            for (kind, at, len, byte) in edits {
                let start = at.index(raw.len().max(1)).min(raw.len());
                let end = (start + len).min(raw.len());
                match kind {
                    0 => { raw.drain(start..end); }
                    1 => { let copy = raw[start..end].to_vec(); raw.splice(start..start, copy); }
                    _ => { raw.splice(start..end, [byte]); }
                }
            }
            if let Ok(once) = canonicalize(&raw, CAP) {
                prop_assert!(serde_json::from_slice::<serde::de::IgnoredAny>(&raw).is_ok(), "{}", String::from_utf8_lossy(&raw));
                prop_assert_eq!(canonicalize(&once, CAP).unwrap(), once);
            }
        }
    }

    /// `value` with every fraction truncated to an integer.
    fn integral(value: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::Number(n) if n.is_f64() => Value::from(n.as_f64().unwrap_or_default() as i64),
            Value::Array(items) => Value::Array(items.into_iter().map(integral).collect()),
            Value::Object(members) => Value::Object(members.into_iter().map(|(k, v)| (k, integral(v))).collect()),
            other => other,
        }
    }

    fn assert_canonical_layout(text: &[u8]) {
        if let Some(members) = members(text) {
            for pair in members.windows(2) {
                assert!(
                    pair[0].name.as_bytes() < pair[1].name.as_bytes(),
                    "{:?} before {:?}",
                    pair[0].name,
                    pair[1].name
                );
            }
            for member in members {
                assert_canonical_layout(member.value);
            }
        } else if let Some(elements) = elements(text) {
            elements.into_iter().for_each(assert_canonical_layout);
        } else {
            assert!(
                !text.is_empty() && text.first() == Some(&b'"') || !text.iter().any(u8::is_ascii_whitespace),
                "{text:?}"
            );
        }
    }
}
