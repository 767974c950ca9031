//! Decoding the entry's JSON argument by its declared parameter type, with the reference's
//! `ARG_DECODE_MISMATCH: expected <T>, got <v>` wording (`<v>` as Go's `%v` prints it).

use crate::ast::{Name, TypeBody, TypeExpr};
use crate::float::float_to_int;
use crate::loader::Program;
use crate::stdlib::json::{DecodeMode, decode};
use crate::value::{List, Seq, Value};
use std::rc::Rc;

/// How many type aliases may be followed before giving up (guards `type A = B`, `type B = A`).
const MAX_ALIAS_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error("invalid JSON: {0}")]
    InvalidJson(String),
    #[error("ARG_DECODE_MISMATCH: expected {expected}, got {got}\n  {reason}")]
    Mismatch { expected: String, got: String, reason: String },
    #[error("unsupported parameter type {0} for an entrypoint argument")]
    Unsupported(String),
}

/// Decode `json` for a parameter declared as `ty` (`None`: undeclared, guess from the JSON).
pub fn decode_argument(json: &str, ty: Option<&TypeExpr>, program: &Program) -> Result<Value, ArgError> {
    let parsed = decode(json, DecodeMode::Whole).map_err(|e| ArgError::InvalidJson(e.unmarshal_message()))?;
    convert(&parsed, ty, program, 0)
}

/// The `Json` constructor and its payload.
fn parts(v: &Value) -> (&str, Option<&Value>) {
    match v {
        Value::Ctor(c) => (&c.name, c.args.0.first()),
        _ => ("", None),
    }
}

fn mismatch(ty: &TypeExpr, v: &Value, reason: &str) -> ArgError {
    ArgError::Mismatch { expected: type_text(ty), got: go_text(v), reason: reason.into() }
}

fn convert(v: &Value, ty: Option<&TypeExpr>, program: &Program, depth: usize) -> Result<Value, ArgError> {
    let Some(ty) = ty else { return Ok(guess(v)) };
    let (ctor, payload) = parts(v);
    match ty {
        TypeExpr::Unit => match ctor {
            "JNull" => Ok(Value::Unit),
            _ => Err(mismatch(ty, v, "expected null for unit type")),
        },
        TypeExpr::Named(name, args) => match (&**name, args.as_slice(), ctor, payload) {
            ("string", [], "JString", Some(s)) => Ok(s.clone()),
            ("string", [], ..) => Err(mismatch(ty, v, "expected JSON string")),
            ("int", [], "JNumber", Some(Value::Float(f))) => Ok(Value::Int(float_to_int(*f))),
            ("int", [], ..) => Err(mismatch(ty, v, "expected JSON number")),
            ("float", [], "JNumber", Some(n)) => Ok(n.clone()),
            ("float", [], ..) => Err(mismatch(ty, v, "expected JSON number")),
            ("bool", [], "JBool", Some(b)) => Ok(b.clone()),
            ("bool", [], ..) => Err(mismatch(ty, v, "expected JSON boolean")),
            ("Json", [], ..) => Ok(v.clone()),
            ("Option", [inner], "JNull", _) => {
                let _ = inner;
                Ok(Value::none())
            }
            ("Option", [inner], ..) => Ok(Value::some(convert(v, Some(inner), program, depth)?)),
            _ => match program.types.get(name).map(|t| &t.body) {
                Some(TypeBody::Alias(target)) if depth < MAX_ALIAS_DEPTH => {
                    convert(v, Some(target), program, depth + 1)
                }
                _ if is_type_variable(name) && args.is_empty() => Ok(guess(v)),
                _ => Err(ArgError::Unsupported(type_text(ty))),
            },
        },
        TypeExpr::List(inner) => match (ctor, payload) {
            ("JArray", Some(Value::List(items))) => {
                let mut out = Vec::new();
                for item in items.iter() {
                    out.push(convert(item, Some(inner), program, depth)?);
                }
                Ok(Value::list(out))
            }
            _ => Err(mismatch(ty, v, "expected JSON array")),
        },
        TypeExpr::Tuple(items) => match (ctor, payload) {
            ("JArray", Some(Value::List(values))) if values.len() == items.len() => {
                let mut out = Vec::new();
                for (item_ty, item) in items.iter().zip(values.iter()) {
                    out.push(convert(item, Some(item_ty), program, depth)?);
                }
                Ok(Value::Tuple(Rc::new(Seq(out))))
            }
            _ => Err(mismatch(ty, v, "expected JSON array of matching length")),
        },
        TypeExpr::Record { fields, .. } => {
            let ("JObject", Some(Value::List(entries))) = (ctor, payload) else {
                return Err(mismatch(ty, v, "expected JSON object"));
            };
            let mut out: Vec<(Name, Value)> = Vec::new();
            for (name, field_ty) in fields {
                let found = entries
                    .iter()
                    .find(|e| matches!(e.field("key"), Some(Value::Str(k)) if k == name))
                    .and_then(|e| e.field("value"));
                let Some(field_value) = found else {
                    return Err(mismatch(ty, v, &format!("missing required field '{name}'")));
                };
                out.push((name.clone(), convert(field_value, Some(field_ty), program, depth)?));
            }
            Ok(Value::record(out))
        }
        TypeExpr::Func(..) => Err(ArgError::Unsupported(type_text(ty))),
    }
}

fn is_type_variable(name: &str) -> bool {
    name.starts_with(|c: char| c.is_lowercase()) && !matches!(name, "string" | "int" | "float" | "bool" | "bytes")
}

/// A parameter with no usable declared type takes the JSON's own shape.
fn guess(v: &Value) -> Value {
    match parts(v) {
        ("JNull", _) => Value::Unit,
        ("JArray", Some(Value::List(items))) => Value::List(List::from_vec(items.iter().map(guess).collect())),
        ("JObject", Some(Value::List(entries))) => {
            let mut fields: Vec<(Name, Value)> = Vec::new();
            for e in entries.iter() {
                if let (Some(Value::Str(k)), Some(val)) = (e.field("key"), e.field("value"))
                    && !fields.iter().any(|(n, _)| n == k)
                {
                    fields.push((k.clone(), guess(val)));
                }
            }
            Value::record(fields)
        }
        (_, Some(inner)) => inner.clone(),
        _ => Value::Unit,
    }
}

/// How a declared type is named in messages.
pub fn type_text(ty: &TypeExpr) -> String {
    match ty {
        TypeExpr::Unit => "()".into(),
        TypeExpr::Named(n, args) if args.is_empty() => n.to_string(),
        TypeExpr::Named(n, args) => format!("{n}[{}]", args.iter().map(type_text).collect::<Vec<_>>().join(", ")),
        TypeExpr::List(inner) => format!("[{}]", type_text(inner)),
        TypeExpr::Tuple(items) => format!("({})", items.iter().map(type_text).collect::<Vec<_>>().join(", ")),
        TypeExpr::Record { fields, .. } => format!(
            "{{{}}}",
            fields.iter().map(|(k, t)| format!("{k}: {}", type_text(t))).collect::<Vec<_>>().join(", ")
        ),
        TypeExpr::Func(params, ret, _) => {
            format!("({}) -> {}", params.iter().map(type_text).collect::<Vec<_>>().join(", "), type_text(ret))
        }
    }
}

/// Go's `%v` of the value `json.Unmarshal` would have produced.
pub fn go_text(v: &Value) -> String {
    match parts(v) {
        ("JNull", _) => "<nil>".into(),
        ("JBool", Some(Value::Bool(b))) => b.to_string(),
        ("JNumber", Some(Value::Float(f))) => go_float(*f),
        ("JString", Some(Value::Str(s))) => s.to_string(),
        ("JArray", Some(Value::List(items))) => {
            format!("[{}]", items.iter().map(go_text).collect::<Vec<_>>().join(" "))
        }
        ("JObject", Some(Value::List(entries))) => {
            // A Go map keeps the last duplicate and prints keys sorted.
            let mut map: Vec<(String, String)> = Vec::new();
            for e in entries.iter() {
                if let (Some(Value::Str(k)), Some(val)) = (e.field("key"), e.field("value")) {
                    map.retain(|(key, _)| **key != **k);
                    map.push((k.to_string(), go_text(val)));
                }
            }
            map.sort();
            format!("map[{}]", map.iter().map(|(k, v)| format!("{k}:{v}")).collect::<Vec<_>>().join(" "))
        }
        _ => "<nil>".into(),
    }
}

/// Go's `%v` for a float64: shortest digits, exponent form when exp < -4 or exp >= 6
/// (strconv's `'g'` with shortest precision).
pub fn go_float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_float_forms() {
        let table =
            [(1.0, "1"), (1.5, "1.5"), (1e21, "1e+21"), (123456.0, "123456"), (1e6, "1e+06"), (0.00001, "1e-05")];
        for (f, text) in table {
            assert_eq!(go_float(f), text, "{f:?}");
        }
    }
}
