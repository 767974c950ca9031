//! std/json: the `Json` ADT, a byte-exact encoder and an order-preserving decoder.
//!
//! Encoding follows the reference's newest rule: no whitespace, list order, minimal escaping,
//! ECMAScript-like numbers. Decoding keeps key order and duplicate keys; it is iterative, so
//! nesting depth costs heap, never native stack.

use super::{StdCtor, StdModule, StdType, arg, native};
use crate::diag::Diagnostic;
use crate::eval::Interp;
use crate::float::float_to_int;
use crate::stack;
use crate::value::*;
use std::fmt::Write as _;

/// Go's encoding/json refuses documents nested deeper than this.
pub const MAX_DECODE_DEPTH: usize = 10_000;

pub static MODULE: StdModule = StdModule {
    path: "std/json",
    types: &[StdType {
        name: "Json",
        ctors: &[
            StdCtor { name: "JNull", fields: &[] },
            StdCtor { name: "JBool", fields: &[false] },
            StdCtor { name: "JNumber", fields: &[true] },
            StdCtor { name: "JString", fields: &[false] },
            StdCtor { name: "JArray", fields: &[false] },
            StdCtor { name: "JObject", fields: &[false] },
        ],
    }],
    funcs: &[
        native("encode", 1, |_, a| Ok(Value::str(encode(&a[0])?))),
        native("decode", 1, |_, a| {
            Ok(match decode(as_str(&a[0], "decode")?, DecodeMode::FirstValue) {
                Ok(v) => Value::ok(v),
                Err(e) => Value::err(Value::str(e.library_message())),
            })
        }),
        native("jn", 1, |_, _| Ok(jnull())),
        native("jb", 1, |_, a| Ok(Value::ctor("JBool", vec![Value::Bool(as_bool(&a[0], "jb")?)]))),
        native("js", 1, |_, a| Ok(jstring(as_str(&a[0], "js")?.clone()))),
        native("jnum", 1, |_, a| Ok(jnumber(as_float(&a[0], "jnum")?))),
        native("jint", 1, |_, a| Ok(jnumber(as_int(&a[0], "jint")? as f64))),
        native("ja", 1, |_, a| Ok(Value::ctor("JArray", vec![arg(&a, 0)]))),
        native("jo", 1, |_, a| Ok(Value::ctor("JObject", vec![arg(&a, 0)]))),
        native("kv", 2, |_, a| Ok(kv(as_str(&a[0], "kv")?.clone(), a[1].clone()))),
        native("get", 2, |_, a| Ok(Value::option(get(&a[0], as_str(&a[1], "get")?)))),
        native("has", 2, |_, a| Ok(Value::Bool(get(&a[0], as_str(&a[1], "has")?).is_some()))),
        native("getOr", 3, |_, a| Ok(get(&a[0], as_str(&a[1], "getOr")?).unwrap_or_else(|| a[2].clone()))),
        native("asString", 1, |_, a| Ok(Value::option(payload(&a[0], "JString")))),
        native("asNumber", 1, |_, a| Ok(Value::option(payload(&a[0], "JNumber")))),
        native("asBool", 1, |_, a| Ok(Value::option(payload(&a[0], "JBool")))),
        native("asArray", 1, |_, a| Ok(Value::option(payload(&a[0], "JArray")))),
        native("asObject", 1, |_, a| Ok(Value::option(payload(&a[0], "JObject")))),
        native("getString", 2, |_, a| Ok(Value::option(get_as(&a[0], &a[1], "JString")?))),
        native("getNumber", 2, |_, a| Ok(Value::option(get_as(&a[0], &a[1], "JNumber")?))),
        native("getBool", 2, |_, a| Ok(Value::option(get_as(&a[0], &a[1], "JBool")?))),
        native("getArray", 2, |_, a| Ok(Value::option(get_as(&a[0], &a[1], "JArray")?))),
        native("getObject", 2, |_, a| Ok(Value::option(get(&a[0], as_str(&a[1], "getObject")?)))),
        native("getInt", 2, |_, a| {
            let n = get_as(&a[0], &a[1], "JNumber")?;
            Ok(Value::option(n.map(|v| Value::Int(float_to_int(as_float(&v, "getInt").unwrap_or(0.0))))))
        }),
        native("keys", 1, |_, a| Ok(Value::list(object_entries(&a[0], "key")))),
        native("values", 1, |_, a| Ok(Value::list(object_entries(&a[0], "value")))),
        native("filterStrings", 1, |_, a| Ok(Value::list(filter_payloads(&a[0], "JString")?))),
        native("filterNumbers", 1, |_, a| Ok(Value::list(filter_payloads(&a[0], "JNumber")?))),
        native("allStrings", 1, |_, a| all_payloads(&a[0], "JString")),
        native("allNumbers", 1, |_, a| all_payloads(&a[0], "JNumber")),
        native("getStringArray", 2, |_, a| typed_array(&a[0], &a[1], "JString", false)),
        native("getStringArrayStrict", 2, |_, a| typed_array(&a[0], &a[1], "JString", true)),
        native("getStringArrayOrEmpty", 2, |_, a| or_empty(typed_array(&a[0], &a[1], "JString", false)?)),
        native("getNumberArray", 2, |_, a| typed_array(&a[0], &a[1], "JNumber", false)),
        native("getNumberArrayStrict", 2, |_, a| typed_array(&a[0], &a[1], "JNumber", true)),
        native("getNumberArrayOrEmpty", 2, |_, a| or_empty(typed_array(&a[0], &a[1], "JNumber", false)?)),
        native("decodeFloatArray", 1, decode_float_array),
    ],
};

pub fn jnull() -> Value {
    Value::ctor("JNull", Vec::new())
}

pub fn jstring(s: impl Into<std::rc::Rc<str>>) -> Value {
    Value::ctor("JString", vec![Value::Str(s.into())])
}

pub fn jnumber(f: f64) -> Value {
    Value::ctor("JNumber", vec![Value::Float(f)])
}

pub fn kv(key: impl Into<std::rc::Rc<str>>, value: Value) -> Value {
    Value::record(vec![("key".into(), Value::Str(key.into())), ("value".into(), value)])
}

/// The single argument of a `Json` constructor named `ctor`.
fn payload(v: &Value, ctor: &str) -> Option<Value> {
    match v {
        Value::Ctor(c) if &*c.name == ctor && c.args.0.len() == 1 => Some(c.args.0[0].clone()),
        _ => None,
    }
}

/// `get`: the value of the first entry with this key.
pub fn get(obj: &Value, key: &str) -> Option<Value> {
    let entries = payload(obj, "JObject")?;
    let Value::List(list) = entries else {
        return None;
    };
    list.iter()
        .find(|entry| matches!(entry.field("key"), Some(Value::Str(k)) if &**k == key))
        .and_then(|entry| entry.field("value").cloned())
}

fn get_as(obj: &Value, key: &Value, ctor: &str) -> Result<Option<Value>, Diagnostic> {
    Ok(get(obj, as_str(key, "get")?).and_then(|v| payload(&v, ctor)))
}

fn object_entries(obj: &Value, field: &str) -> Vec<Value> {
    match payload(obj, "JObject") {
        Some(Value::List(list)) => list.iter().filter_map(|e| e.field(field).cloned()).collect(),
        _ => Vec::new(),
    }
}

fn filter_payloads(xs: &Value, ctor: &str) -> Result<Vec<Value>, Diagnostic> {
    Ok(as_list(xs, "filter")?.iter().filter_map(|j| payload(j, ctor)).collect())
}

fn all_payloads(xs: &Value, ctor: &str) -> Result<Value, Diagnostic> {
    let list = as_list(xs, "all")?;
    let items: Option<Vec<Value>> = list.iter().map(|j| payload(j, ctor)).collect();
    Ok(Value::option(items.map(Value::list)))
}

fn typed_array(obj: &Value, key: &Value, ctor: &str, strict: bool) -> Result<Value, Diagnostic> {
    match get_as(obj, key, "JArray")? {
        None => Ok(Value::none()),
        Some(arr) if strict => all_payloads(&arr, ctor),
        Some(arr) => Ok(Value::some(Value::list(filter_payloads(&arr, ctor)?))),
    }
}

fn or_empty(v: Value) -> Result<Value, Diagnostic> {
    Ok(payload(&v, "Some").unwrap_or_else(|| Value::list(Vec::new())))
}

fn decode_float_array(_: &mut Interp, a: Vec<Value>) -> Result<Value, Diagnostic> {
    let Ok(json) = decode(as_str(&a[0], "decodeFloatArray")?, DecodeMode::FirstValue) else {
        return Ok(Value::none());
    };
    let Some(arr) = payload(&json, "JArray") else {
        return Ok(Value::none());
    };
    all_payloads(&arr, "JNumber")
}

// ---- encode ----

/// Encode a `Json` value exactly as the reference does.
pub fn encode(v: &Value) -> Result<String, Diagnostic> {
    // Guard the recursion even when called outside the CLI's big-stack thread.
    let _region = stack::enter(None);
    let mut out = String::new();
    encode_into(v, &mut out)?;
    Ok(out)
}

fn not_json(v: &Value) -> Diagnostic {
    type_error(format!("encode: expected a Json value, got {}", show(v)))
}

fn encode_into(v: &Value, out: &mut String) -> Result<(), Diagnostic> {
    if stack::exhausted() {
        return Err(Diagnostic::new("RT_RECURSION", "encode: value nested too deeply", None));
    }
    let Value::Ctor(c) = v else {
        return Err(not_json(v));
    };
    match (&*c.name, c.args.0.as_slice()) {
        ("JNull", []) => out.push_str("null"),
        ("JBool", [Value::Bool(b)]) => out.push_str(if *b { "true" } else { "false" }),
        ("JNumber", [n]) => out.push_str(&format_number(as_float(n, "encode")?)),
        ("JString", [Value::Str(s)]) => encode_string(s, out),
        ("JArray", [Value::List(items)]) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode_into(item, out)?;
            }
            out.push(']');
        }
        ("JObject", [Value::List(entries)]) => {
            out.push('{');
            for (i, entry) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let (Some(Value::Str(key)), Some(value)) = (entry.field("key"), entry.field("value")) else {
                    return Err(not_json(entry));
                };
                encode_string(key, out);
                out.push(':');
                encode_into(value, out)?;
            }
            out.push('}');
        }
        _ => return Err(not_json(v)),
    }
    Ok(())
}

/// Minimal escaping: quote, backslash, the short control escapes, other controls as `\u00xx`.
pub fn encode_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Numbers: `null` for NaN/Inf, `-0.0` for negative zero, shortest round-trip digits in fixed
/// notation for 1e-6 <= |f| < 1e21, exponent form (`1e+21`, `5e-324`) otherwise.
pub fn format_number(f: f64) -> String {
    if !f.is_finite() {
        return "null".into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0".into() } else { "0".into() };
    }
    let magnitude = f.abs();
    if (1e-6..1e21).contains(&magnitude) {
        return format!("{f}");
    }
    let text = format!("{f:e}");
    match text.split_once('e') {
        Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
        _ => text,
    }
}

// ---- decode ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeMode {
    /// std/json `decode`: the first value only; trailing text is ignored.
    FirstValue,
    /// Argument decoding (Go `json.Unmarshal`): the whole text must be one value.
    Whole,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    #[error("no JSON value found")]
    Empty,
    /// Input ended inside a token.
    #[error("unexpected EOF")]
    UnexpectedEof,
    /// Input ended between tokens while arrays or objects were still open.
    #[error("unexpected end of input")]
    EndOfInput,
    /// A syntax error, in Go's words (`invalid character 'x' looking for …`).
    #[error("{0}")]
    Syntax(String),
    #[error("json: number {0} out of float64 range")]
    Range(String),
}

impl JsonError {
    /// The text std/json's `decode` returns in `Err`.
    pub fn library_message(&self) -> String {
        match self {
            JsonError::Empty | JsonError::EndOfInput | JsonError::Range(_) => self.to_string(),
            JsonError::UnexpectedEof | JsonError::Syntax(_) => format!("invalid json: {self}"),
        }
    }

    /// The text Go's `json.Unmarshal` gives, used for argument decoding.
    pub fn unmarshal_message(&self) -> String {
        match self {
            JsonError::Empty | JsonError::EndOfInput | JsonError::UnexpectedEof => {
                "unexpected end of JSON input".into()
            }
            other => other.to_string(),
        }
    }
}

/// Go's `quoteChar`: how a character is shown inside its error messages.
fn go_quote_char(c: char) -> String {
    match c {
        '\'' => "'\\''".into(),
        '"' => "'\"'".into(),
        '\u{7}' => "'\\a'".into(),
        '\u{8}' => "'\\b'".into(),
        '\u{c}' => "'\\f'".into(),
        '\n' => "'\\n'".into(),
        '\r' => "'\\r'".into(),
        '\t' => "'\\t'".into(),
        '\u{b}' => "'\\v'".into(),
        c if (c as u32) < 0x20 || c == '\u{7f}' => format!("'\\x{:02x}'", c as u32),
        c => format!("'{c}'"),
    }
}

enum Frame {
    Array(Vec<Value>),
    Object(Vec<Value>, std::rc::Rc<str>),
}

struct Reader<'a> {
    text: &'a str,
    at: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += c.len_utf8();
        Some(c)
    }

    fn skip_ws(&mut self) {
        while let Some(' ' | '\t' | '\n' | '\r') = self.peek() {
            self.at += 1;
        }
    }

    fn invalid(c: char, context: &str) -> JsonError {
        JsonError::Syntax(format!("invalid character {} {context}", go_quote_char(c)))
    }

    fn expect_literal(&mut self, word: &str) -> Result<(), JsonError> {
        let mut chars = word.chars();
        chars.next();
        for want in chars {
            match self.bump() {
                None => return Err(JsonError::UnexpectedEof),
                Some(c) if c == want => {}
                Some(c) => {
                    return Err(Self::invalid(c, &format!("in literal {word} (expecting '{want}')")));
                }
            }
        }
        Ok(())
    }

    fn string(&mut self) -> Result<String, JsonError> {
        let mut out = String::new();
        loop {
            let Some(c) = self.bump() else {
                return Err(JsonError::UnexpectedEof);
            };
            match c {
                '"' => return Ok(out),
                '\\' => {
                    let Some(e) = self.bump() else {
                        return Err(JsonError::UnexpectedEof);
                    };
                    match e {
                        '"' => out.push('"'),
                        '\\' => out.push('\\'),
                        '/' => out.push('/'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'u' => {
                            let first = self.hex4()?;
                            out.push(self.surrogate_aware(first)?);
                        }
                        other => return Err(Self::invalid(other, "in string escape code")),
                    }
                }
                c if (c as u32) < 0x20 => return Err(Self::invalid(c, "in string literal")),
                c => out.push(c),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let mut value = 0;
        for _ in 0..4 {
            let Some(c) = self.bump() else {
                return Err(JsonError::UnexpectedEof);
            };
            let d = c.to_digit(16).ok_or_else(|| Self::invalid(c, "in \\u hexadecimal character escape"))?;
            value = value * 16 + d;
        }
        Ok(value)
    }

    /// Pair a high surrogate with a following `\uDC00`-range escape; lone halves become U+FFFD.
    fn surrogate_aware(&mut self, first: u32) -> Result<char, JsonError> {
        if !(0xD800..0xDC00).contains(&first) {
            return Ok(char::from_u32(first).unwrap_or('\u{FFFD}'));
        }
        let rest = &self.text[self.at..];
        let second = rest
            .strip_prefix("\\u")
            .and_then(|r| r.get(..4))
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
            .filter(|second| (0xDC00..0xE000).contains(second));
        if let Some(second) = second {
            self.at += 6;
            let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
            return Ok(char::from_u32(combined).unwrap_or('\u{FFFD}'));
        }
        Ok('\u{FFFD}')
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.at;
        if self.peek() == Some('-') {
            self.at += 1;
        }
        match self.bump() {
            Some('0') => {}
            Some(c) if c.is_ascii_digit() => self.digits(),
            Some(c) => return Err(Self::invalid(c, "in numeric literal")),
            None => return Err(JsonError::UnexpectedEof),
        }
        if self.peek() == Some('.') {
            self.at += 1;
            match self.bump() {
                Some(c) if c.is_ascii_digit() => self.digits(),
                Some(c) => return Err(Self::invalid(c, "after decimal point in numeric literal")),
                None => return Err(JsonError::UnexpectedEof),
            }
        }
        if let Some('e' | 'E') = self.peek() {
            self.at += 1;
            if let Some('+' | '-') = self.peek() {
                self.at += 1;
            }
            match self.bump() {
                Some(c) if c.is_ascii_digit() => self.digits(),
                Some(c) => return Err(Self::invalid(c, "in exponent of numeric literal")),
                None => return Err(JsonError::UnexpectedEof),
            }
        }
        let text = &self.text[start..self.at];
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(jnumber(f)),
            _ => Err(JsonError::Range(text.to_string())),
        }
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
    }
}

/// Decode JSON text into a `Json` value, keeping object key order and duplicate keys.
pub fn decode(text: &str, mode: DecodeMode) -> Result<Value, JsonError> {
    let mut r = Reader { text, at: 0 };
    let mut stack: Vec<Frame> = Vec::new();
    r.skip_ws();
    if r.peek().is_none() {
        return Err(JsonError::Empty);
    }
    'value: loop {
        r.skip_ws();
        let Some(c) = r.bump() else {
            return Err(JsonError::EndOfInput);
        };
        let mut value = match c {
            '{' | '[' => {
                if stack.len() >= MAX_DECODE_DEPTH {
                    return Err(JsonError::Syntax("exceeded max depth".into()));
                }
                r.skip_ws();
                if c == '[' {
                    if r.peek() == Some(']') {
                        r.at += 1;
                        Value::ctor("JArray", vec![Value::list(Vec::new())])
                    } else {
                        stack.push(Frame::Array(Vec::new()));
                        continue 'value;
                    }
                } else {
                    match r.bump() {
                        Some('}') => Value::ctor("JObject", vec![Value::list(Vec::new())]),
                        Some('"') => {
                            let key = object_key(&mut r)?;
                            stack.push(Frame::Object(Vec::new(), key));
                            continue 'value;
                        }
                        Some(other) => {
                            return Err(Reader::invalid(other, "looking for beginning of object key string"));
                        }
                        None => return Err(JsonError::EndOfInput),
                    }
                }
            }
            '"' => jstring(r.string()?),
            't' => {
                r.expect_literal("true")?;
                Value::ctor("JBool", vec![Value::Bool(true)])
            }
            'f' => {
                r.expect_literal("false")?;
                Value::ctor("JBool", vec![Value::Bool(false)])
            }
            'n' => {
                r.expect_literal("null")?;
                jnull()
            }
            c if c == '-' || c.is_ascii_digit() => {
                r.at -= c.len_utf8();
                r.number()?
            }
            other => return Err(Reader::invalid(other, "looking for beginning of value")),
        };
        // Attach the finished value to its container, closing containers as they end.
        loop {
            match stack.last_mut() {
                None => {
                    if mode == DecodeMode::Whole {
                        r.skip_ws();
                        if let Some(c) = r.peek() {
                            return Err(Reader::invalid(c, "after top-level value"));
                        }
                    }
                    return Ok(value);
                }
                Some(Frame::Array(items)) => {
                    items.push(value);
                    r.skip_ws();
                    match r.bump() {
                        Some(',') => continue 'value,
                        Some(']') => {
                            let items = std::mem::take(items);
                            stack.pop();
                            value = Value::ctor("JArray", vec![Value::list(items)]);
                        }
                        Some(other) => return Err(Reader::invalid(other, "after array element")),
                        None => return Err(JsonError::EndOfInput),
                    }
                }
                Some(Frame::Object(entries, key)) => {
                    entries.push(kv(key.clone(), value));
                    r.skip_ws();
                    match r.bump() {
                        Some(',') => {
                            r.skip_ws();
                            match r.bump() {
                                Some('"') => *key = object_key(&mut r)?,
                                Some(other) => {
                                    return Err(Reader::invalid(other, "looking for beginning of object key string"));
                                }
                                None => return Err(JsonError::EndOfInput),
                            }
                            continue 'value;
                        }
                        Some('}') => {
                            let entries = std::mem::take(entries);
                            stack.pop();
                            value = Value::ctor("JObject", vec![Value::list(entries)]);
                        }
                        Some(other) => {
                            return Err(Reader::invalid(other, "after object key:value pair"));
                        }
                        None => return Err(JsonError::EndOfInput),
                    }
                }
            }
        }
    }
}

/// Read an object key (its opening quote consumed) and the `:` after it.
fn object_key(r: &mut Reader<'_>) -> Result<std::rc::Rc<str>, JsonError> {
    let key = r.string()?;
    r.skip_ws();
    match r.bump() {
        Some(':') => Ok(key.into()),
        Some(other) => Err(Reader::invalid(other, "after object key")),
        None => Err(JsonError::EndOfInput),
    }
}
