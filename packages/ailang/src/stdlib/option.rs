//! std/option: `Option[a] = Some(a) | None` and its helpers.

use super::{StdCtor, StdModule, StdType, arg, native};
use crate::diag::Diagnostic;
use crate::value::*;

pub static OPTION_TYPE: StdType = StdType {
    name: "Option",
    ctors: &[StdCtor { name: "Some", fields: &[false] }, StdCtor { name: "None", fields: &[] }],
};

pub static MODULE: StdModule = StdModule {
    path: "std/option",
    types: &[StdType { name: "Option", ctors: OPTION_TYPE.ctors }],
    funcs: &[
        native("map", 2, |it, a| match some_payload(&a[1])? {
            Some(x) => Ok(Value::some(it.apply(&a[0], vec![x])?)),
            None => Ok(Value::none()),
        }),
        native("flatMap", 2, |it, a| match some_payload(&a[1])? {
            Some(x) => it.apply(&a[0], vec![x]),
            None => Ok(Value::none()),
        }),
        native("getOrElse", 2, |_, a| Ok(some_payload(&a[0])?.unwrap_or_else(|| arg(&a, 1)))),
        native("isSome", 1, |_, a| Ok(Value::Bool(some_payload(&a[0])?.is_some()))),
        native("isNone", 1, |_, a| Ok(Value::Bool(some_payload(&a[0])?.is_none()))),
        native("filter", 2, |it, a| match some_payload(&a[1])? {
            Some(x) => {
                let keep = as_bool(&it.apply(&a[0], vec![x])?, "filter")?;
                Ok(if keep { a[1].clone() } else { Value::none() })
            }
            None => Ok(Value::none()),
        }),
    ],
};

/// `Some(x)` gives `Some(x)`, `None` gives `None`; anything else is a type error.
pub fn some_payload(v: &Value) -> Result<Option<Value>, Diagnostic> {
    match v {
        Value::Ctor(c) if &*c.name == "Some" && c.args.0.len() == 1 => Ok(Some(c.args.0[0].clone())),
        Value::Ctor(c) if &*c.name == "None" => Ok(None),
        other => Err(type_error(format!("expected an Option, got {}", show(other)))),
    }
}
