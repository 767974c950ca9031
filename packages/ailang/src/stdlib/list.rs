//! std/list, natively and iteratively: long lists cost heap, never native stack.

use super::{StdModule, arg, native};
use crate::diag::Diagnostic;
use crate::eval::Interp;
use crate::value::*;

pub static MODULE: StdModule = StdModule {
    path: "std/list",
    types: &[],
    funcs: &[
        native("length", 1, |_, a| Ok(Value::Int(as_list(&a[0], "length")?.len() as i64))),
        native("head", 1, |_, a| Ok(Value::option(as_list(&a[0], "head")?.iter().next().cloned()))),
        native("tail", 1, |_, a| {
            Ok(Value::List(as_list(&a[0], "tail")?.split().map(|(_, t)| t.clone()).unwrap_or_default()))
        }),
        native("reverse", 1, |_, a| {
            let mut out = List::nil();
            for x in as_list(&a[0], "reverse")?.iter() {
                out = List::cons(x.clone(), out);
            }
            Ok(Value::List(out))
        }),
        native("concat", 2, |_, a| crate::eval::binary(crate::ast::BinOp::Append, arg(&a, 0), arg(&a, 1))),
        native("zip", 2, |_, a| {
            let pairs = items(&a[0])?
                .into_iter()
                .zip(items(&a[1])?)
                .map(|(x, y)| Value::Tuple(std::rc::Rc::new(Seq(vec![x, y]))))
                .collect();
            Ok(Value::list(pairs))
        }),
        native("zipWith", 3, |it, a| {
            let mut out = Vec::new();
            for (x, y) in items(&a[1])?.into_iter().zip(items(&a[2])?) {
                out.push(it.apply(&a[0], vec![x, y])?);
            }
            Ok(Value::list(out))
        }),
        native("map", 2, map),
        native("mapE", 2, map),
        native("filter", 2, filter),
        native("filterE", 2, filter),
        native("foldl", 3, foldl),
        native("foldlE", 3, foldl),
        native("foldr", 3, |it, a| {
            let mut acc = a[1].clone();
            for x in items(&a[2])?.into_iter().rev() {
                acc = it.apply(&a[0], vec![x, acc])?;
            }
            Ok(acc)
        }),
        native("mapAccumL", 3, |it, a| {
            // f(state, x) = (y, state'); the result is (ys, final state).
            let mut state = a[1].clone();
            let mut out = Vec::new();
            for x in items(&a[2])? {
                match it.apply(&a[0], vec![state, x])? {
                    Value::Tuple(pair) if pair.0.len() == 2 => {
                        out.push(pair.0[0].clone());
                        state = pair.0[1].clone();
                    }
                    other => {
                        return Err(type_error(format!(
                            "mapAccumL: the function must return a pair (output, state), got {}",
                            other.type_name()
                        )));
                    }
                }
            }
            Ok(Value::Tuple(std::rc::Rc::new(Seq(vec![Value::list(out), state]))))
        }),
        native("flatMap", 2, flat_map),
        native("flatMapE", 2, flat_map),
        native("forEachE", 2, |it, a| {
            for x in items(&a[1])? {
                it.apply(&a[0], vec![x])?;
            }
            Ok(Value::Unit)
        }),
        native("takeMap", 3, |it, a| {
            let n = as_int(&a[0], "takeMap")?.max(0) as usize;
            let mut out = Vec::new();
            for x in as_list(&a[2], "takeMap")?.iter().take(n) {
                out.push(it.apply(&a[1], vec![x.clone()])?);
            }
            Ok(Value::list(out))
        }),
        native("takeFlatMap", 3, |it, a| {
            let n = as_int(&a[0], "takeFlatMap")?.max(0) as usize;
            let mut out = Vec::new();
            for x in as_list(&a[2], "takeFlatMap")?.iter() {
                if out.len() >= n {
                    break;
                }
                out.extend(items(&it.apply(&a[1], vec![x.clone()])?)?);
            }
            out.truncate(n);
            Ok(Value::list(out))
        }),
        native("take", 2, |_, a| {
            let n = as_int(&a[0], "take")?.max(0) as usize;
            Ok(Value::list(as_list(&a[1], "take")?.iter().take(n).cloned().collect()))
        }),
        native("drop", 2, |_, a| {
            let n = as_int(&a[0], "drop")?.max(0);
            let mut cur = as_list(&a[1], "drop")?.clone();
            for _ in 0..n {
                match cur.split() {
                    Some((_, t)) => cur = t.clone(),
                    None => break,
                }
            }
            Ok(Value::List(cur))
        }),
        native("nth", 2, |_, a| Ok(Value::option(nth(&a[0], &a[1])?))),
        native("nth_or", 3, |_, a| Ok(nth(&a[0], &a[1])?.unwrap_or_else(|| a[2].clone()))),
        native("last", 1, |_, a| Ok(Value::option(as_list(&a[0], "last")?.iter().last().cloned()))),
        native("head_or", 2, |_, a| {
            Ok(as_list(&a[0], "head_or")?.iter().next().cloned().unwrap_or_else(|| a[1].clone()))
        }),
        native("last_or", 2, |_, a| {
            Ok(as_list(&a[0], "last_or")?.iter().last().cloned().unwrap_or_else(|| a[1].clone()))
        }),
        native("any", 2, |it, a| {
            for x in items(&a[1])? {
                if as_bool(&it.apply(&a[0], vec![x])?, "any")? {
                    return Ok(Value::Bool(true));
                }
            }
            Ok(Value::Bool(false))
        }),
        native("all", 2, |it, a| {
            for x in items(&a[1])? {
                if !as_bool(&it.apply(&a[0], vec![x])?, "all")? {
                    return Ok(Value::Bool(false));
                }
            }
            Ok(Value::Bool(true))
        }),
        native("findIndex", 2, |it, a| {
            for (i, x) in items(&a[1])?.into_iter().enumerate() {
                if as_bool(&it.apply(&a[0], vec![x])?, "findIndex")? {
                    return Ok(Value::some(Value::Int(i as i64)));
                }
            }
            Ok(Value::none())
        }),
        native("sortBy", 2, |it, a| {
            let sorted = merge_sort(it, &a[0], items(&a[1])?)?;
            Ok(Value::list(sorted))
        }),
        native("contains", 2, |_, a| Ok(Value::Bool(member(&a[1], &items(&a[0])?)?))),
        native("member", 2, |_, a| Ok(Value::Bool(member(&a[0], &items(&a[1])?)?))),
        native("dedup", 1, |_, a| Ok(Value::list(dedup(items(&a[0])?)?))),
        native("union", 2, |_, a| {
            let mut all = items(&a[0])?;
            all.extend(items(&a[1])?);
            Ok(Value::list(dedup(all)?))
        }),
        native("intersect", 2, |_, a| {
            let ys = items(&a[1])?;
            let mut out = Vec::new();
            for x in dedup(items(&a[0])?)? {
                if member(&x, &ys)? {
                    out.push(x);
                }
            }
            Ok(Value::list(out))
        }),
        native("difference", 2, |_, a| {
            let ys = items(&a[1])?;
            let mut out = Vec::new();
            for x in items(&a[0])? {
                if !member(&x, &ys)? {
                    out.push(x);
                }
            }
            Ok(Value::list(out))
        }),
        native("maximumInt", 1, |_, a| extreme(&a[0], false)),
        native("minimumInt", 1, |_, a| extreme(&a[0], true)),
        native("maximumFloat", 1, |_, a| extreme(&a[0], false)),
        native("minimumFloat", 1, |_, a| extreme(&a[0], true)),
        native("maximumString", 1, |_, a| extreme(&a[0], false)),
        native("minimumString", 1, |_, a| extreme(&a[0], true)),
        native("sum", 1, |_, a| {
            let mut total = Value::Int(0);
            for x in items(&a[0])? {
                total = crate::eval::binary(crate::ast::BinOp::Add, total, x)?;
            }
            Ok(total)
        }),
    ],
};

fn items(v: &Value) -> Result<Vec<Value>, Diagnostic> {
    Ok(as_list(v, "std/list")?.to_vec())
}

fn map(it: &mut Interp, a: Vec<Value>) -> Result<Value, Diagnostic> {
    let mut out = Vec::new();
    for x in items(&a[1])? {
        out.push(it.apply(&a[0], vec![x])?);
    }
    Ok(Value::list(out))
}

fn filter(it: &mut Interp, a: Vec<Value>) -> Result<Value, Diagnostic> {
    let mut out = Vec::new();
    for x in items(&a[1])? {
        if as_bool(&it.apply(&a[0], vec![x.clone()])?, "filter")? {
            out.push(x);
        }
    }
    Ok(Value::list(out))
}

fn foldl(it: &mut Interp, a: Vec<Value>) -> Result<Value, Diagnostic> {
    let mut acc = a[1].clone();
    for x in items(&a[2])? {
        acc = it.apply(&a[0], vec![acc, x])?;
    }
    Ok(acc)
}

fn flat_map(it: &mut Interp, a: Vec<Value>) -> Result<Value, Diagnostic> {
    let mut out = Vec::new();
    for x in items(&a[1])? {
        out.extend(items(&it.apply(&a[0], vec![x])?)?);
    }
    Ok(Value::list(out))
}

fn nth(xs: &Value, idx: &Value) -> Result<Option<Value>, Diagnostic> {
    let idx = as_int(idx, "nth")?;
    if idx < 0 {
        return Ok(None);
    }
    Ok(as_list(xs, "nth")?.iter().nth(idx as usize).cloned())
}

fn member(x: &Value, ys: &[Value]) -> Result<bool, Diagnostic> {
    for y in ys {
        if equal(x, y)? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn dedup(xs: Vec<Value>) -> Result<Vec<Value>, Diagnostic> {
    let mut out: Vec<Value> = Vec::new();
    for x in xs {
        if !member(&x, &out)? {
            out.push(x);
        }
    }
    Ok(out)
}

fn extreme(xs: &Value, smallest: bool) -> Result<Value, Diagnostic> {
    let mut best: Option<Value> = None;
    for x in items(xs)? {
        best = Some(match best {
            None => x,
            Some(b) => {
                let ord = compare(&x, &b)?;
                let better = matches!(ord, Some(o) if if smallest { o.is_lt() } else { o.is_gt() });
                if better { x } else { b }
            }
        });
    }
    Ok(Value::option(best))
}

/// A stable bottom-up merge sort driven by the program's comparator (`cmp(a, b) <= 0`
/// keeps `a` first).
fn merge_sort(it: &mut Interp, cmp: &Value, xs: Vec<Value>) -> Result<Vec<Value>, Diagnostic> {
    let mut runs: Vec<Vec<Value>> = xs.into_iter().map(|x| vec![x]).collect();
    while runs.len() > 1 {
        let mut merged = Vec::with_capacity(runs.len().div_ceil(2));
        let mut pairs = runs.into_iter();
        while let Some(left) = pairs.next() {
            let Some(right) = pairs.next() else {
                merged.push(left);
                break;
            };
            let mut out = Vec::with_capacity(left.len() + right.len());
            let (mut l, mut r) = (left.into_iter().peekable(), right.into_iter().peekable());
            while let (Some(a), Some(b)) = (l.peek(), r.peek()) {
                let order = as_int(&it.apply(cmp, vec![a.clone(), b.clone()])?, "sortBy")?;
                let next = if order <= 0 { l.next() } else { r.next() };
                out.extend(next);
            }
            out.extend(l);
            out.extend(r);
            merged.push(out);
        }
        runs = merged;
    }
    Ok(runs.pop().unwrap_or_default())
}
