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
    ],
};

/// `x` to the power `y`, as `f64::powf` computes it.
///
/// On glibc `powf` is libm's `pow`, and it is the only thing the interpreter needs from
/// libm: linking libm would load it into every process, which costs about as much as a
/// short `run` itself. So libm is opened on the first use of `pow` and the very same
/// function is called.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn pow(x: f64, y: f64) -> f64 {
    type PowFn = unsafe extern "C" fn(f64, f64) -> f64;
    static POW: std::sync::OnceLock<Option<PowFn>> = std::sync::OnceLock::new();
    let pow = POW.get_or_init(|| {
        // SAFETY: dlopen/dlsym with constant C strings; `pow` in libm has exactly PowFn's
        // signature, and the library stays loaded (it is never closed).
        unsafe {
            let lib = libc::dlopen(c"libm.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            if lib.is_null() {
                return None;
            }
            let sym = libc::dlsym(lib, c"pow".as_ptr());
            (!sym.is_null()).then(|| std::mem::transmute::<*mut libc::c_void, PowFn>(sym))
        }
    });
    match pow {
        // SAFETY: libm's pow is a pure function of two doubles.
        Some(pow) => unsafe { pow(x, y) },
        // glibc always ships libm.so.6; without it only integral exponents are exact.
        None if y.fract() == 0.0 && y.abs() <= i32::MAX as f64 => x.powi(y as i32),
        None => f64::NAN,
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn pow(x: f64, y: f64) -> f64 {
    x.powf(y)
}

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
