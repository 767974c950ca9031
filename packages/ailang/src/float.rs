//! Float arithmetic as the reference computes it: libm's functions, called through libm
//! itself on glibc (so results match to the last bit), and Go's float-to-int conversion.
//! The evaluator's `**` and the `std/math`, `std/json` and argument-decoding natives share it.

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

/// Go's `int(f)` on amd64: NaN and out-of-range values give i64::MIN (Rust would saturate).
pub fn float_to_int(f: f64) -> i64 {
    const TWO_POW_63: f64 = (1u64 << 63) as f64;
    if f.is_nan() || !(-TWO_POW_63..TWO_POW_63).contains(&f) { i64::MIN } else { f as i64 }
}
