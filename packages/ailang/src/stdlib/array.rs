//! std/array: the reference's `Array[a]`, here the same persistent list as `[a]` (so `#[…]`
//! literals, `get` and `set` work; `get` walks the list rather than indexing in O(1)).

use super::{StdModule, StdType, native};
use crate::diag::Diagnostic;
use crate::value::*;

pub static MODULE: StdModule = StdModule {
    path: "std/array",
    types: &[StdType { name: "Array", ctors: &[] }],
    funcs: &[
        native("empty", 1, |_, _| Ok(Value::list(Vec::new()))),
        native("make", 2, |_, a| {
            let n = as_int(&a[0], "make")?;
            if n < 0 {
                return Err(index_error(format!("make: negative size {n}")));
            }
            Ok(Value::list(vec![a[1].clone(); n as usize]))
        }),
        native("fromList", 1, |_, a| Ok(Value::List(as_list(&a[0], "fromList")?.clone()))),
        native("toList", 1, |_, a| Ok(Value::List(as_list(&a[0], "toList")?.clone()))),
        native("length", 1, |_, a| Ok(Value::Int(as_list(&a[0], "length")?.len() as i64))),
        native("get", 2, |_, a| element(&a[0], &a[1], "get")),
        native("unsafeGet", 2, |_, a| element(&a[0], &a[1], "unsafeGet")),
        native("getOpt", 2, |_, a| {
            let (xs, i) = (as_list(&a[0], "getOpt")?, as_int(&a[1], "getOpt")?);
            Ok(Value::option(usize::try_from(i).ok().and_then(|i| xs.iter().nth(i)).cloned()))
        }),
        native("set", 3, |_, a| {
            let (xs, i) = (as_list(&a[0], "set")?, as_int(&a[1], "set")?);
            let mut items: Vec<Value> = xs.iter().cloned().collect();
            match usize::try_from(i).ok().filter(|i| *i < items.len()) {
                Some(i) => items[i] = a[2].clone(),
                None => return Err(out_of_bounds("set", i, items.len())),
            }
            Ok(Value::list(items))
        }),
        native("append", 2, |_, a| {
            let mut items: Vec<Value> = as_list(&a[0], "append")?.iter().cloned().collect();
            items.push(a[1].clone());
            Ok(Value::list(items))
        }),
    ],
};

fn element(xs: &Value, i: &Value, what: &str) -> Result<Value, Diagnostic> {
    let (xs, i) = (as_list(xs, what)?, as_int(i, what)?);
    usize::try_from(i).ok().and_then(|at| xs.iter().nth(at)).cloned().ok_or_else(|| out_of_bounds(what, i, xs.len()))
}

fn out_of_bounds(what: &str, i: i64, len: usize) -> Diagnostic {
    index_error(format!("{what}: index {i} out of bounds for array of length {len}"))
}
