//! std/result: `Result[a, e] = Ok(a) | Err(e)` and its helpers.

use super::{StdCtor, StdModule, StdType, native};
use crate::diag::Diagnostic;
use crate::eval::division_by_zero;
use crate::value::*;

pub static RESULT_TYPE: StdType = StdType {
    name: "Result",
    ctors: &[StdCtor { name: "Ok", fields: &[false] }, StdCtor { name: "Err", fields: &[false] }],
};

pub static MODULE: StdModule = StdModule {
    path: "std/result",
    types: &[StdType { name: "Result", ctors: RESULT_TYPE.ctors }],
    funcs: &[
        native("map", 2, |it, a| match split(&a[1])? {
            Ok(x) => Ok(Value::ok(it.apply(&a[0], vec![x])?)),
            Err(_) => Ok(a[1].clone()),
        }),
        native("mapErr", 2, |it, a| match split(&a[1])? {
            Ok(_) => Ok(a[1].clone()),
            Err(e) => Ok(Value::err(it.apply(&a[0], vec![e])?)),
        }),
        native("flatMap", 2, |it, a| match split(&a[1])? {
            Ok(x) => it.apply(&a[0], vec![x]),
            Err(_) => Ok(a[1].clone()),
        }),
        native("isOk", 1, |_, a| Ok(Value::Bool(split(&a[0])?.is_ok()))),
        native("isErr", 1, |_, a| Ok(Value::Bool(split(&a[0])?.is_err()))),
        // The reference's `unwrap` fails on `Err` by dividing by zero; keep that failure.
        native("unwrap", 1, |_, a| split(&a[0])?.map_err(|_| division_by_zero())),
    ],
};

fn split(v: &Value) -> Result<Result<Value, Value>, Diagnostic> {
    match v {
        Value::Ctor(c) if c.args.0.len() == 1 && &*c.name == "Ok" => Ok(Ok(c.args.0[0].clone())),
        Value::Ctor(c) if c.args.0.len() == 1 && &*c.name == "Err" => Ok(Err(c.args.0[0].clone())),
        other => Err(type_error(format!("expected a Result, got {}", show(other)))),
    }
}
