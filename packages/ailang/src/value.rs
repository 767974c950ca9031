//! Run-time values: immutable, reference counted, with persistent cons lists.
//!
//! Dropping is iterative for every container (`Cons`, `Seq`, `Fields`, `CtorValue`, `Scope`),
//! so a million-element list or a deeply nested value built by a fold can be freed without
//! recursing on the native stack.

use crate::ast::{FuncDecl, Lambda, Name};
use crate::diag::Diagnostic;
use crate::eval::Interp;
use crate::stack;
use std::cmp::Ordering;
use std::fmt::Write as _;
use std::rc::Rc;

#[derive(Clone, Debug)]
pub enum Value {
    Unit,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    List(List),
    Tuple(Rc<Seq>),
    /// Fields sorted by name: records are structural, so order never matters.
    Record(Rc<Fields>),
    Ctor(Rc<CtorValue>),
    Func(Rc<Callable>),
}

/// A persistent singly linked list.
#[derive(Clone, Debug, Default)]
pub struct List(pub Option<Rc<Cons>>);

#[derive(Debug)]
pub struct Cons {
    pub head: Value,
    pub tail: List,
}

#[derive(Debug, Default)]
pub struct Seq(pub Vec<Value>);

#[derive(Debug, Default)]
pub struct Fields(pub Vec<(Name, Value)>);

#[derive(Debug)]
pub struct CtorValue {
    pub name: Name,
    pub args: Seq,
}

/// The signature every native function has.
pub type NativeRun = fn(&mut Interp, Vec<Value>) -> Result<Value, Diagnostic>;

#[derive(Debug)]
pub struct NativeFn {
    pub name: &'static str,
    pub arity: usize,
    pub run: NativeRun,
}

pub enum Callable {
    /// A top-level function; its free names resolve through the module's globals.
    Func(Rc<FuncDecl>),
    Closure {
        lambda: Rc<Lambda>,
        env: Env,
    },
    /// A `letrec`-bound lambda: lambda `index` of its group, whose members (one `letrec`, or
    /// consecutive `letrec`s of one block) see each other by name.
    RecClosure {
        group: Rc<[(Name, Rc<Lambda>)]>,
        index: usize,
        env: Env,
    },
    Native(&'static NativeFn),
    /// A constructor used as a function; `float_fields` marks fields declared `float`.
    Ctor {
        name: Name,
        arity: usize,
        float_fields: Rc<[bool]>,
    },
}

impl std::fmt::Debug for Callable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Callable::Func(decl) => write!(f, "<func {}>", decl.name),
            Callable::Closure { .. } | Callable::RecClosure { .. } => write!(f, "<lambda>"),
            Callable::Native(n) => write!(f, "<builtin {}>", n.name),
            Callable::Ctor { name, .. } => write!(f, "<constructor {name}>"),
        }
    }
}

/// Local bindings: a persistent chain, newest first.
pub type Env = Option<Rc<Scope>>;

#[derive(Debug)]
pub struct Scope {
    pub name: Name,
    pub value: Value,
    pub next: Env,
}

pub fn bind(env: &Env, name: Name, value: Value) -> Env {
    Some(Rc::new(Scope { name, value, next: env.clone() }))
}

pub fn lookup<'a>(env: &'a Env, name: &str) -> Option<&'a Value> {
    let mut cur = env.as_deref();
    while let Some(scope) = cur {
        if &*scope.name == name {
            return Some(&scope.value);
        }
        cur = scope.next.as_deref();
    }
    None
}

// ---- iterative dropping ----

/// Move the children of a uniquely owned container into `out`, leaving it empty.
fn detach_children(value: Value, out: &mut Vec<Value>) {
    match value {
        Value::List(mut list) => {
            if let Some(rc) = list.0.take()
                && let Ok(mut cell) = Rc::try_unwrap(rc)
            {
                out.push(std::mem::replace(&mut cell.head, Value::Unit));
                out.push(Value::List(List(cell.tail.0.take())));
            }
        }
        Value::Tuple(rc) => {
            if let Ok(mut seq) = Rc::try_unwrap(rc) {
                out.append(&mut seq.0);
            }
        }
        Value::Record(rc) => {
            if let Ok(mut fields) = Rc::try_unwrap(rc) {
                out.extend(fields.0.drain(..).map(|(_, v)| v));
            }
        }
        Value::Ctor(rc) => {
            if let Ok(mut ctor) = Rc::try_unwrap(rc) {
                out.append(&mut ctor.args.0);
            }
        }
        Value::Func(rc) => {
            if let Ok(Callable::Closure { env: Some(scope), .. } | Callable::RecClosure { env: Some(scope), .. }) =
                Rc::try_unwrap(rc)
            {
                drop_scope_chain(scope, out);
            }
        }
        _ => {}
    }
}

fn drain(mut work: Vec<Value>) {
    while let Some(value) = work.pop() {
        detach_children(value, &mut work);
    }
}

fn is_container(v: &Value) -> bool {
    matches!(v, Value::List(_) | Value::Tuple(_) | Value::Record(_) | Value::Ctor(_) | Value::Func(_))
}

fn drop_scope_chain(scope: Rc<Scope>, out: &mut Vec<Value>) {
    let mut next = Some(scope);
    while let Some(rc) = next.take() {
        if let Ok(mut s) = Rc::try_unwrap(rc) {
            out.push(std::mem::replace(&mut s.value, Value::Unit));
            next = s.next.take();
        }
    }
}

impl Drop for Cons {
    fn drop(&mut self) {
        let mut work = Vec::new();
        if is_container(&self.head) {
            work.push(std::mem::replace(&mut self.head, Value::Unit));
        }
        if let Some(tail) = self.tail.0.take() {
            work.push(Value::List(List(Some(tail))));
        }
        drain(work);
    }
}

impl Drop for Seq {
    fn drop(&mut self) {
        if self.0.iter().any(is_container) {
            drain(std::mem::take(&mut self.0));
        }
    }
}

impl Drop for Fields {
    fn drop(&mut self) {
        if self.0.iter().any(|(_, v)| is_container(v)) {
            drain(std::mem::take(&mut self.0).into_iter().map(|(_, v)| v).collect());
        }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let mut work = Vec::new();
        if is_container(&self.value) {
            work.push(std::mem::replace(&mut self.value, Value::Unit));
        }
        if let Some(next) = self.next.take() {
            drop_scope_chain(next, &mut work);
        }
        drain(work);
    }
}

// ---- lists ----

impl List {
    pub fn nil() -> Self {
        List(None)
    }

    pub fn cons(head: Value, tail: List) -> Self {
        List(Some(Rc::new(Cons { head, tail })))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    pub fn split(&self) -> Option<(&Value, &List)> {
        self.0.as_deref().map(|c| (&c.head, &c.tail))
    }

    pub fn iter(&self) -> ListIter<'_> {
        ListIter(self.0.as_deref())
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn from_vec(items: Vec<Value>) -> Self {
        let mut list = List::nil();
        for item in items.into_iter().rev() {
            list = List::cons(item, list);
        }
        list
    }

    pub fn to_vec(&self) -> Vec<Value> {
        self.iter().cloned().collect()
    }
}

pub struct ListIter<'a>(Option<&'a Cons>);

impl<'a> Iterator for ListIter<'a> {
    type Item = &'a Value;
    fn next(&mut self) -> Option<&'a Value> {
        let cell = self.0?;
        self.0 = cell.tail.0.as_deref();
        Some(&cell.head)
    }
}

// ---- constructors of common values ----

impl Value {
    pub fn str(s: impl Into<Rc<str>>) -> Value {
        Value::Str(s.into())
    }

    pub fn ctor(name: &str, args: Vec<Value>) -> Value {
        Value::Ctor(Rc::new(CtorValue { name: name.into(), args: Seq(args) }))
    }

    pub fn some(v: Value) -> Value {
        Value::ctor("Some", vec![v])
    }

    pub fn none() -> Value {
        Value::ctor("None", Vec::new())
    }

    pub fn option(v: Option<Value>) -> Value {
        v.map_or_else(Value::none, Value::some)
    }

    pub fn ok(v: Value) -> Value {
        Value::ctor("Ok", vec![v])
    }

    pub fn err(v: Value) -> Value {
        Value::ctor("Err", vec![v])
    }

    pub fn list(items: Vec<Value>) -> Value {
        Value::List(List::from_vec(items))
    }

    /// A record from fields in any order; the caller guarantees distinct names.
    pub fn record(mut fields: Vec<(Name, Value)>) -> Value {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        Value::Record(Rc::new(Fields(fields)))
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Unit => "()",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Record(_) => "record",
            Value::Ctor(_) => "constructor value",
            Value::Func(_) => "function",
        }
    }

    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Record(fields) => fields.0.binary_search_by(|(k, _)| (**k).cmp(name)).ok().map(|i| &fields.0[i].1),
            // A single-constructor type wrapping a record lets `.field` reach through.
            Value::Ctor(c) if c.args.0.len() == 1 => c.args.0[0].field(name),
            _ => None,
        }
    }
}

pub fn type_error(message: impl Into<String>) -> Diagnostic {
    Diagnostic::new("RT_TYPE", message, None)
}

pub fn index_error(message: impl Into<String>) -> Diagnostic {
    Diagnostic::new("RT_INDEX", message, None)
}

fn nested_too_deep() -> Diagnostic {
    Diagnostic::new("RT_RECURSION", "value nested too deeply to compare", None)
}

// ---- argument extraction for natives ----

pub fn as_int(v: &Value, what: &str) -> Result<i64, Diagnostic> {
    match v {
        Value::Int(n) => Ok(*n),
        other => Err(type_error(format!("{what}: expected int, got {}", other.type_name()))),
    }
}

/// Floats, accepting ints: without a type checker an integer literal may stand for a float.
pub fn as_float(v: &Value, what: &str) -> Result<f64, Diagnostic> {
    match v {
        Value::Float(f) => Ok(*f),
        Value::Int(n) => Ok(*n as f64),
        other => Err(type_error(format!("{what}: expected float, got {}", other.type_name()))),
    }
}

pub fn as_str<'a>(v: &'a Value, what: &str) -> Result<&'a Rc<str>, Diagnostic> {
    match v {
        Value::Str(s) => Ok(s),
        other => Err(type_error(format!("{what}: expected string, got {}", other.type_name()))),
    }
}

pub fn as_bool(v: &Value, what: &str) -> Result<bool, Diagnostic> {
    match v {
        Value::Bool(b) => Ok(*b),
        other => Err(type_error(format!("{what}: expected bool, got {}", other.type_name()))),
    }
}

pub fn as_list<'a>(v: &'a Value, what: &str) -> Result<&'a List, Diagnostic> {
    match v {
        Value::List(l) => Ok(l),
        other => Err(type_error(format!("{what}: expected list, got {}", other.type_name()))),
    }
}

pub fn as_bytes<'a>(v: &'a Value, what: &str) -> Result<&'a Rc<[u8]>, Diagnostic> {
    match v {
        Value::Bytes(b) => Ok(b),
        other => Err(type_error(format!("{what}: expected bytes, got {}", other.type_name()))),
    }
}

// ---- equality and ordering ----

/// Structural equality. Ints and floats compare numerically (literals are untyped here).
pub fn equal(a: &Value, b: &Value) -> Result<bool, Diagnostic> {
    if stack::exhausted() {
        return Err(nested_too_deep());
    }
    Ok(match (a, b) {
        (Value::Unit, Value::Unit) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Int(x), Value::Float(y)) | (Value::Float(y), Value::Int(x)) => (*x as f64) == *y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            let (mut xs, mut ys) = (x.iter(), y.iter());
            loop {
                match (xs.next(), ys.next()) {
                    (None, None) => break true,
                    (Some(p), Some(q)) => {
                        if !equal(p, q)? {
                            break false;
                        }
                    }
                    _ => break false,
                }
            }
        }
        (Value::Tuple(x), Value::Tuple(y)) => all_equal(&x.0, &y.0)?,
        (Value::Record(x), Value::Record(y)) => {
            if x.0.len() != y.0.len() {
                return Ok(false);
            }
            for ((k1, v1), (k2, v2)) in x.0.iter().zip(y.0.iter()) {
                if k1 != k2 || !equal(v1, v2)? {
                    return Ok(false);
                }
            }
            true
        }
        (Value::Ctor(x), Value::Ctor(y)) => x.name == y.name && all_equal(&x.args.0, &y.args.0)?,
        (Value::Func(_), Value::Func(_)) => {
            return Err(type_error("functions cannot be compared"));
        }
        (x, y) => {
            return Err(type_error(format!("cannot compare {} with {}", x.type_name(), y.type_name())));
        }
    })
}

fn all_equal(xs: &[Value], ys: &[Value]) -> Result<bool, Diagnostic> {
    if xs.len() != ys.len() {
        return Ok(false);
    }
    for (x, y) in xs.iter().zip(ys) {
        if !equal(x, y)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Ordering for `<`-style operators; `None` when IEEE says unordered (NaN).
pub fn compare(a: &Value, b: &Value) -> Result<Option<Ordering>, Diagnostic> {
    if stack::exhausted() {
        return Err(nested_too_deep());
    }
    Ok(match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y),
        (Value::Int(x), Value::Float(y)) => (*x as f64).partial_cmp(y),
        (Value::Float(x), Value::Int(y)) => x.partial_cmp(&(*y as f64)),
        // Go compares strings bytewise; so does Rust's `str` ordering.
        (Value::Str(x), Value::Str(y)) => Some(x.as_bytes().cmp(y.as_bytes())),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Unit, Value::Unit) => Some(Ordering::Equal),
        (Value::List(x), Value::List(y)) => {
            let (mut xs, mut ys) = (x.iter(), y.iter());
            loop {
                match (xs.next(), ys.next()) {
                    (None, None) => break Some(Ordering::Equal),
                    (None, Some(_)) => break Some(Ordering::Less),
                    (Some(_), None) => break Some(Ordering::Greater),
                    (Some(p), Some(q)) => match compare(p, q)? {
                        Some(Ordering::Equal) => {}
                        other => break other,
                    },
                }
            }
        }
        (Value::Tuple(x), Value::Tuple(y)) if x.0.len() == y.0.len() => {
            let mut result = Some(Ordering::Equal);
            for (p, q) in x.0.iter().zip(&y.0) {
                match compare(p, q)? {
                    Some(Ordering::Equal) => {}
                    other => {
                        result = other;
                        break;
                    }
                }
            }
            result
        }
        (x, y) => {
            return Err(type_error(format!("cannot order {} and {}", x.type_name(), y.type_name())));
        }
    })
}

// ---- show ----

/// `show`: strings raw at the top level, everything else in display form.
pub fn show(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        other => show_at(other, 0),
    }
}

/// Containers deeper than this print as `...`.
const SHOW_MAX_DEPTH: usize = 3;
/// A rendered container longer than this keeps only its first and last 20 characters.
const SHOW_MAX_WIDTH: usize = 80;
const SHOW_KEEP: usize = 20;

pub fn show_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Inf".into() } else { "-Inf".into() };
    }
    let mut s = format!("{f}");
    if !s.contains('.') {
        s.push_str(".0");
    }
    s
}

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn show_at(v: &Value, depth: usize) -> String {
    let container = matches!(v, Value::List(_) | Value::Tuple(_) | Value::Record(_))
        || matches!(v, Value::Ctor(c) if !c.args.0.is_empty());
    if container && depth > SHOW_MAX_DEPTH {
        return "...".into();
    }
    let join = |items: &mut dyn Iterator<Item = &Value>| -> String {
        items.map(|x| show_at(x, depth + 1)).collect::<Vec<_>>().join(", ")
    };
    let rendered = match v {
        Value::Unit => "()".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(n) => n.to_string(),
        Value::Float(f) => show_float(*f),
        Value::Str(s) => quote(s),
        Value::Bytes(b) => format!("<bytes:{}>", b.len()),
        Value::List(l) => format!("[{}]", join(&mut l.iter())),
        Value::Tuple(t) => format!("({})", join(&mut t.0.iter())),
        Value::Record(r) => {
            let parts: Vec<String> = r.0.iter().map(|(k, x)| format!("{k}: {}", show_at(x, depth + 1))).collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Ctor(c) if c.args.0.is_empty() => c.name.to_string(),
        Value::Ctor(c) => format!("{}({})", c.name, join(&mut c.args.0.iter())),
        Value::Func(_) => "<function>".into(),
    };
    if container && rendered.chars().count() > SHOW_MAX_WIDTH {
        let chars: Vec<char> = rendered.chars().collect();
        let head: String = chars[..SHOW_KEEP].iter().collect();
        let tail: String = chars[chars.len() - SHOW_KEEP..].iter().collect();
        return format!("{head}...{tail}");
    }
    rendered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_list_drops_without_recursing() {
        let mut list = List::nil();
        for i in 0..2_000_000 {
            list = List::cons(Value::Int(i), list);
        }
        drop(list);
    }

    #[test]
    fn deeply_nested_values_drop_without_recursing() {
        let mut v = Value::Unit;
        for _ in 0..1_000_000 {
            v = Value::ctor("Some", vec![Value::list(vec![v])]);
        }
        drop(v);
    }

    #[test]
    fn show_forms() {
        assert_eq!(show(&Value::Float(1.0)), "1.0");
        assert_eq!(show(&Value::Float(f64::NEG_INFINITY)), "-Inf");
        assert_eq!(show(&Value::str("a")), "a");
        assert_eq!(show(&Value::list(vec![Value::str("a"), Value::Int(2)])), "[\"a\", 2]");
        assert_eq!(show(&Value::some(Value::Unit)), "Some(())");
        let rec = Value::record(vec![("b".into(), Value::Int(1)), ("a".into(), Value::Bool(true))]);
        assert_eq!(show(&rec), "{a: true, b: 1}");
    }

    #[test]
    fn show_cuts_deep_and_wide_containers() {
        let deep =
            Value::list(vec![Value::list(vec![Value::list(vec![Value::list(vec![Value::list(vec![Value::Int(
                1,
            )])])])])]);
        assert_eq!(show(&deep), "[[[[...]]]]");
        let wide = Value::list((0..40).map(Value::Int).collect());
        let text = show(&wide);
        assert_eq!(text, "[0, 1, 2, 3, 4, 5, 6... 35, 36, 37, 38, 39]");
    }
}
