//! Names every module sees without importing: `show`, the number conversions, `print`, and
//! the Option/Result types with their constructors. `_io_print`, `_io_println` and `_str_eq`
//! are the reference's internal names for the printers and string equality, which its own
//! examples call directly.

use super::math::{float_to_int_native, int_to_float};
use super::{StdModule, StdType, native};
use crate::diag::Diagnostic;
use crate::eval::Interp;
use crate::value::*;

pub static MODULE: StdModule = StdModule {
    path: "prelude",
    types: &[
        StdType { name: "Option", ctors: super::option::OPTION_TYPE.ctors },
        StdType { name: "Result", ctors: super::result::RESULT_TYPE.ctors },
    ],
    funcs: &[
        native("show", 1, |_, a| Ok(Value::str(show(&a[0])))),
        native("intToFloat", 1, int_to_float),
        native("floatToInt", 1, float_to_int_native),
        native("print", 1, |it, a| print(it, &a[0], false)),
        native("println", 1, |it, a| print(it, &a[0], true)),
        native("_io_print", 1, |it, a| print(it, &a[0], false)),
        native("_io_println", 1, |it, a| print(it, &a[0], true)),
        native("_str_eq", 2, |_, a| Ok(Value::Bool(as_str(&a[0], "_str_eq")? == as_str(&a[1], "_str_eq")?))),
    ],
};

fn print(it: &mut Interp, v: &Value, newline: bool) -> Result<Value, Diagnostic> {
    super::io::print(it, v, newline)
}
