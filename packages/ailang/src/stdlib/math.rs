//! std/math: conversions between int and float, rounding, trigonometry, logarithms, constants
//! and `bitwiseOr` (AILANG has no `|` operator).

use super::{StdModule, native};
use crate::float::{acos, asin, atan, atan2, cos, exp, float_to_int, log, log10, pow, sin, tan};
use crate::value::*;

pub static MODULE: StdModule = StdModule {
    path: "std/math",
    types: &[],
    funcs: &[
        native("intToFloat", 1, int_to_float),
        native("floatToInt", 1, float_to_int_native),
        native("sqrt", 1, |_, a| Ok(Value::Float(as_float(&a[0], "sqrt")?.sqrt()))),
        native("pow", 2, |_, a| Ok(Value::Float(pow(as_float(&a[0], "pow")?, as_float(&a[1], "pow")?)))),
        native("floor", 1, |_, a| Ok(Value::Float(as_float(&a[0], "floor")?.floor()))),
        native("ceil", 1, |_, a| Ok(Value::Float(as_float(&a[0], "ceil")?.ceil()))),
        native("round", 1, |_, a| Ok(Value::Float(as_float(&a[0], "round")?.round()))),
        native("abs", 1, |_, a| match &a[0] {
            Value::Int(n) => Ok(Value::Int(n.wrapping_abs())),
            other => Ok(Value::Float(as_float(other, "abs")?.abs())),
        }),
        native("min", 2, |_, a| pick(&a, true)),
        native("max", 2, |_, a| pick(&a, false)),
        native("sin", 1, |_, a| Ok(Value::Float(sin(as_float(&a[0], "sin")?)))),
        native("cos", 1, |_, a| Ok(Value::Float(cos(as_float(&a[0], "cos")?)))),
        native("tan", 1, |_, a| Ok(Value::Float(tan(as_float(&a[0], "tan")?)))),
        native("asin", 1, |_, a| Ok(Value::Float(asin(as_float(&a[0], "asin")?)))),
        native("acos", 1, |_, a| Ok(Value::Float(acos(as_float(&a[0], "acos")?)))),
        native("atan", 1, |_, a| Ok(Value::Float(atan(as_float(&a[0], "atan")?)))),
        native("atan2", 2, |_, a| Ok(Value::Float(atan2(as_float(&a[0], "atan2")?, as_float(&a[1], "atan2")?)))),
        native("exp", 1, |_, a| Ok(Value::Float(exp(as_float(&a[0], "exp")?)))),
        native("log", 1, |_, a| Ok(Value::Float(log(as_float(&a[0], "log")?)))),
        native("log10", 1, |_, a| Ok(Value::Float(log10(as_float(&a[0], "log10")?)))),
        native("abs_Float", 1, |_, a| Ok(Value::Float(as_float(&a[0], "abs_Float")?.abs()))),
        native("abs_Int", 1, |_, a| Ok(Value::Int(as_int(&a[0], "abs_Int")?.wrapping_abs()))),
        native("PI", 1, |_, _| Ok(Value::Float(std::f64::consts::PI))),
        native("E", 1, |_, _| Ok(Value::Float(std::f64::consts::E))),
        native("isNaN", 1, |_, a| Ok(Value::Bool(as_float(&a[0], "isNaN")?.is_nan()))),
        native("shiftRightLogical", 2, |_, a| {
            let (n, count) = (as_int(&a[0], "shiftRightLogical")?, as_int(&a[1], "shiftRightLogical")?);
            if count < 0 {
                return Err(crate::Diagnostic::new("RT_SHIFT", "negative shift count", None));
            }
            Ok(Value::Int(if count >= 64 { 0 } else { ((n as u64) >> count) as i64 }))
        }),
        native("bitwiseOr", 2, |_, a| Ok(Value::Int(as_int(&a[0], "bitwiseOr")? | as_int(&a[1], "bitwiseOr")?))),
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
