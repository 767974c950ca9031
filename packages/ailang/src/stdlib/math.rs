//! std/math: conversions between int and float, rounding, trigonometry, logarithms, constants
//! and `bitwiseOr` (AILANG has no `|` operator).

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

/// libm's functions, opened on first use.
///
/// On glibc `f64::powf`, `sin`, `exp`, … are libm's functions, and they are the only things
/// the interpreter needs from libm: linking libm would load it into every process, which
/// costs about as much as a short `run` itself. So libm is opened on the first call of one of
/// them and the very same function is called.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod libm {
    use std::ffi::CStr;
    use std::sync::OnceLock;

    /// The address of libm's `name`, or 0 when libm or the symbol cannot be had.
    fn symbol(name: &CStr) -> usize {
        static LIB: OnceLock<usize> = OnceLock::new();
        // SAFETY: dlopen/dlsym with C strings; the library stays loaded (it is never closed).
        unsafe {
            let lib =
                *LIB.get_or_init(|| libc::dlopen(c"libm.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) as usize);
            if lib == 0 {
                return 0;
            }
            libc::dlsym(lib as *mut libc::c_void, name.as_ptr()) as usize
        }
    }

    pub fn call1(slot: &'static OnceLock<usize>, name: &CStr, x: f64) -> f64 {
        let addr = *slot.get_or_init(|| symbol(name));
        if addr == 0 {
            return f64::NAN;
        }
        // SAFETY: `addr` is libm's `name`, a pure function of one double returning a double.
        unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(f64) -> f64>(addr)(x) }
    }

    pub fn call2(slot: &'static OnceLock<usize>, name: &CStr, x: f64, y: f64) -> Option<f64> {
        let addr = *slot.get_or_init(|| symbol(name));
        // SAFETY: `addr` is libm's `name`, a pure function of two doubles returning a double.
        (addr != 0).then(|| unsafe { std::mem::transmute::<usize, unsafe extern "C" fn(f64, f64) -> f64>(addr)(x, y) })
    }
}

/// `pub fn $name(x: f64) -> f64`: libm's `$sym` on glibc, std's `$method` elsewhere.
macro_rules! libm1 {
    ($($name:ident = $sym:literal / $method:ident),* $(,)?) => {$(
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        pub fn $name(x: f64) -> f64 {
            static SLOT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
            libm::call1(&SLOT, $sym, x)
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        pub fn $name(x: f64) -> f64 {
            x.$method()
        }
    )*};
}

libm1!(
    sin = c"sin" / sin,
    cos = c"cos" / cos,
    tan = c"tan" / tan,
    asin = c"asin" / asin,
    acos = c"acos" / acos,
    atan = c"atan" / atan,
    exp = c"exp" / exp,
    log = c"log" / ln,
    log10 = c"log10" / log10,
);

/// `x` to the power `y`, as `f64::powf` computes it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn pow(x: f64, y: f64) -> f64 {
    static SLOT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    match libm::call2(&SLOT, c"pow", x, y) {
        Some(v) => v,
        // glibc always ships libm.so.6; without it only integral exponents are exact.
        None if y.fract() == 0.0 && y.abs() <= i32::MAX as f64 => x.powi(y as i32),
        None => f64::NAN,
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn pow(x: f64, y: f64) -> f64 {
    x.powf(y)
}

/// The angle of the point `(x, y)`, as `f64::atan2` computes it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn atan2(y: f64, x: f64) -> f64 {
    static SLOT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    libm::call2(&SLOT, c"atan2", y, x).unwrap_or(f64::NAN)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn atan2(y: f64, x: f64) -> f64 {
    y.atan2(x)
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
