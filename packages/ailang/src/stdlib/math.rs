//! std/math: conversions between int and float, and a few float functions.

use super::{StdModule, native};
use crate::stdlib::json::float_to_int;
use crate::value::*;

pub static MODULE: StdModule = StdModule {
    path: "std/math",
    types: &[],
    funcs: &[
        native("intToFloat", 1, int_to_float),
        native("floatToInt", 1, float_to_int_native),
        native("sqrt", 1, |_, a| Ok(Value::Float(as_float(&a[0], "sqrt")?.sqrt()))),
        native("pow", 2, |_, a| Ok(Value::Float(as_float(&a[0], "pow")?.powf(as_float(&a[1], "pow")?)))),
        native("floor", 1, |_, a| Ok(Value::Float(as_float(&a[0], "floor")?.floor()))),
        native("ceil", 1, |_, a| Ok(Value::Float(as_float(&a[0], "ceil")?.ceil()))),
        native("round", 1, |_, a| Ok(Value::Float(as_float(&a[0], "round")?.round()))),
        native("abs", 1, |_, a| match &a[0] {
            Value::Int(n) => Ok(Value::Int(n.wrapping_abs())),
            other => Ok(Value::Float(as_float(other, "abs")?.abs())),
        }),
        native("min", 2, |_, a| pick(&a, true)),
        native("max", 2, |_, a| pick(&a, false)),
    ],
};

pub fn int_to_float(_: &mut crate::eval::Interp, a: Vec<Value>) -> Result<Value, crate::Diagnostic> {
    Ok(Value::Float(as_int(&a[0], "intToFloat")? as f64))
}

pub fn float_to_int_native(_: &mut crate::eval::Interp, a: Vec<Value>) -> Result<Value, crate::Diagnostic> {
    match &a[0] {
        Value::Int(n) => Ok(Value::Int(*n)),
        other => Ok(Value::Int(float_to_int(as_float(other, "floatToInt")?))),
    }
}

fn pick(a: &[Value], smaller: bool) -> Result<Value, crate::Diagnostic> {
    let ord = compare(&a[0], &a[1])?;
    let first = match ord {
        Some(o) => {
            if smaller {
                o.is_le()
            } else {
                o.is_ge()
            }
        }
        None => true,
    };
    Ok(if first { a[0].clone() } else { a[1].clone() })
}
