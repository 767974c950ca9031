//! std/bytes: byte strings, UTF-8 conversion and base64 (RFC 4648).

use super::{StdModule, native};
use crate::value::*;
use std::rc::Rc;

pub static MODULE: StdModule = StdModule {
    path: "std/bytes",
    types: &[],
    funcs: &[
        native("fromString", 1, |_, a| Ok(bytes(as_str(&a[0], "fromString")?.as_bytes().to_vec()))),
        native("toString", 1, |_, a| Ok(Value::str(String::from_utf8_lossy(as_bytes(&a[0], "toString")?)))),
        native("toInts", 1, |_, a| {
            Ok(Value::list(as_bytes(&a[0], "toInts")?.iter().map(|b| Value::Int(i64::from(*b))).collect()))
        }),
        native("fromInts", 1, |_, a| {
            let mut out = Vec::new();
            for x in as_list(&a[0], "fromInts")?.iter() {
                let n = as_int(x, "fromInts")?;
                let byte = u8::try_from(n).map_err(|_| type_error(format!("fromInts: {n} is not a byte (0-255)")))?;
                out.push(byte);
            }
            Ok(bytes(out))
        }),
        native("length", 1, |_, a| Ok(Value::Int(as_bytes(&a[0], "length")?.len() as i64))),
        native("byteAt", 2, |_, a| {
            let b = as_bytes(&a[0], "byteAt")?;
            let i = as_int(&a[1], "byteAt")?;
            let at = usize::try_from(i).ok().and_then(|i| b.get(i));
            Ok(Value::option(at.map(|x| Value::Int(i64::from(*x)))))
        }),
        native("slice", 3, |_, a| {
            let b = as_bytes(&a[0], "slice")?;
            let (start, len) = (as_int(&a[1], "slice")?, as_int(&a[2], "slice")?);
            let range = usize::try_from(start).ok().zip(usize::try_from(len).ok());
            let piece = range.and_then(|(s, l)| b.get(s..s.checked_add(l)?));
            Ok(Value::option(piece.map(|p| bytes(p.to_vec()))))
        }),
        native("concat", 2, |_, a| {
            let mut out = as_bytes(&a[0], "concat")?.to_vec();
            out.extend_from_slice(as_bytes(&a[1], "concat")?);
            Ok(bytes(out))
        }),
        native("concatList", 1, |_, a| {
            let mut out = Vec::new();
            for x in as_list(&a[0], "concatList")?.iter() {
                out.extend_from_slice(as_bytes(x, "concatList")?);
            }
            Ok(bytes(out))
        }),
        native("toBase64", 1, |_, a| Ok(Value::str(to_base64(as_bytes(&a[0], "toBase64")?, STANDARD, true)))),
        native("toBase64URL", 1, |_, a| Ok(Value::str(to_base64(as_bytes(&a[0], "toBase64URL")?, URL_SAFE, false)))),
        native("fromBase64", 1, |_, a| {
            Ok(Value::option(from_base64(as_str(&a[0], "fromBase64")?, STANDARD, true).map(bytes)))
        }),
        native("fromBase64URL", 1, |_, a| {
            Ok(Value::option(from_base64(as_str(&a[0], "fromBase64URL")?, URL_SAFE, false).map(bytes)))
        }),
    ],
};

fn bytes(b: Vec<u8>) -> Value {
    Value::Bytes(Rc::from(b))
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

pub fn to_base64(data: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        let emitted = chunk.len() + 1;
        for i in 0..4 {
            if i < emitted {
                out.push(char::from(alphabet[((n >> (18 - 6 * i)) & 63) as usize]));
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// Strict decoding: padding required (standard) or absent (URL), line breaks ignored,
/// unused trailing bits must be zero, as Go's decoders insist.
pub fn from_base64(text: &str, alphabet: &[u8; 64], padded: bool) -> Option<Vec<u8>> {
    let symbols: Vec<u8> = text.bytes().filter(|b| *b != b'\n' && *b != b'\r').collect();
    let body: &[u8] = if padded {
        if !symbols.len().is_multiple_of(4) {
            return None;
        }
        let pad = symbols.iter().rev().take_while(|b| **b == b'=').count();
        if pad > 2 {
            return None;
        }
        &symbols[..symbols.len() - pad]
    } else {
        &symbols
    };
    if body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.chunks(4) {
        let mut n = 0u32;
        for (i, sym) in chunk.iter().enumerate() {
            let v = alphabet.iter().position(|a| a == sym)? as u32;
            n |= v << (18 - 6 * i);
        }
        let produced = chunk.len() - 1;
        let leftover_mask = match produced {
            1 => 0xFFFF,
            2 => 0xFF,
            _ => 0,
        };
        if n & leftover_mask != 0 {
            return None;
        }
        for i in 0..produced {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_rfc4648_vectors() {
        for (plain, coded) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foobar", "Zm9vYmFy")] {
            assert_eq!(to_base64(plain.as_bytes(), STANDARD, true), coded);
            assert_eq!(from_base64(coded, STANDARD, true).unwrap(), plain.as_bytes());
        }
        assert_eq!(from_base64("Zg=", STANDARD, true), None);
        assert_eq!(from_base64("Zh==", STANDARD, true), None);
        assert_eq!(from_base64("SGVsbG8", URL_SAFE, false).unwrap(), b"Hello");
    }
}
