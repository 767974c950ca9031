//! The tree-walking evaluator: strict, call-by-value, closures over persistent scopes.

use crate::ast::*;
use crate::diag::{Diagnostic, Pos};
use crate::stack;
use crate::value::*;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// The reference's default `--max-recursion-depth`.
pub const DEFAULT_MAX_DEPTH: usize = 10_000;

pub struct Interp {
    globals: HashMap<Name, Value>,
    depth: usize,
    max_depth: usize,
    capabilities: HashSet<String>,
}

fn rt(code: &str, message: impl Into<String>) -> Diagnostic {
    Diagnostic::new(code, message, None)
}

pub fn division_by_zero() -> Diagnostic {
    rt("RT_DIV0", "division by zero")
}

fn is_float_type(ty: &Option<TypeExpr>) -> bool {
    matches!(ty, Some(TypeExpr::Named(n, args)) if &**n == "float" && args.is_empty())
}

/// Without a type checker an integer literal can reach a place declared `float`.
fn coerce_float(declared_float: bool, v: Value) -> Value {
    match v {
        Value::Int(n) if declared_float => Value::Float(n as f64),
        other => other,
    }
}

impl Interp {
    pub fn new(globals: HashMap<Name, Value>, max_depth: usize, capabilities: HashSet<String>) -> Self {
        Interp { globals, depth: 0, max_depth, capabilities }
    }

    /// Evaluate the module's top-level `let`s in order, binding each as a global before the
    /// next: what every entry, test and test row then sees.
    pub fn bind_top_lets(&mut self, module: &Module) -> Result<(), Diagnostic> {
        for decl in &module.decls {
            if let Decl::Let(top) = decl {
                let value = self.eval(&top.value, &None)?;
                self.globals.insert(top.name.clone(), coerce_float(is_float_type(&top.ty), value));
            }
        }
        Ok(())
    }

    pub fn global(&self, name: &str) -> Option<&Value> {
        self.globals.get(name)
    }

    pub fn has_capability(&self, cap: &str) -> bool {
        self.capabilities.contains(cap)
    }

    fn recursion_error(&self) -> Diagnostic {
        rt("RT_RECURSION", format!("maximum recursion depth exceeded ({})", self.max_depth))
    }

    pub fn eval(&mut self, expr: &Expr, env: &Env) -> Result<Value, Diagnostic> {
        if stack::exhausted() {
            return Err(
                rt("RT_RECURSION", "maximum recursion depth exceeded (native stack exhausted)").in_pos(expr.pos)
            );
        }
        self.eval_inner(expr, env).map_err(|d| d.in_pos(expr.pos))
    }

    fn eval_inner(&mut self, expr: &Expr, env: &Env) -> Result<Value, Diagnostic> {
        Ok(match &expr.kind {
            ExprKind::Int(n, as_float) => {
                if as_float.get() {
                    Value::Float(*n as f64)
                } else {
                    Value::Int(*n)
                }
            }
            ExprKind::Float(f) => Value::Float(*f),
            ExprKind::Str(s) => Value::Str(s.clone()),
            ExprKind::Bool(b) => Value::Bool(*b),
            ExprKind::Unit => Value::Unit,
            ExprKind::Interp(parts) => {
                let mut out = String::new();
                for part in parts {
                    match part {
                        InterpPart::Lit(text) => out.push_str(text),
                        InterpPart::Expr(e) => match self.eval(e, env)? {
                            Value::Str(s) => out.push_str(&s),
                            other => out.push_str(&show(&other)),
                        },
                    }
                }
                Value::str(out)
            }
            ExprKind::Var(name) => self.lookup(name, env)?,
            ExprKind::Call(callee, args) => {
                let f = self.eval(callee, env)?;
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    values.push(self.eval(arg, env)?);
                }
                self.apply(&f, values)?
            }
            ExprKind::Field(base, field) => {
                let value = self.eval(base, env)?;
                match value.field(field) {
                    Some(v) => v.clone(),
                    None => {
                        return Err(type_error(format!("no field '{field}' on {}", value.type_name())));
                    }
                }
            }
            ExprKind::Record(fields) => {
                let mut values: Vec<(Name, Value)> = Vec::with_capacity(fields.len());
                for (name, e) in fields {
                    if values.iter().any(|(n, _)| n == name) {
                        return Err(type_error(format!("duplicate field '{name}' in record")));
                    }
                    values.push((name.clone(), self.eval(e, env)?));
                }
                Value::record(values)
            }
            ExprKind::RecordUpdate(base, updates) => {
                let Value::Record(fields) = self.eval(base, env)? else {
                    return Err(type_error("record update of a value that is not a record"));
                };
                let mut fields: Vec<(Name, Value)> = fields.0.clone();
                for (name, e) in updates {
                    let v = self.eval(e, env)?;
                    match fields.iter_mut().find(|(n, _)| n == name) {
                        Some(slot) => slot.1 = v,
                        None => fields.push((name.clone(), v)),
                    }
                }
                Value::record(fields)
            }
            ExprKind::Tuple(items) => {
                let mut values = Vec::with_capacity(items.len());
                for item in items {
                    values.push(self.eval(item, env)?);
                }
                Value::Tuple(Rc::new(Seq(values)))
            }
            ExprKind::List(items) => {
                let mut values = Vec::with_capacity(items.len());
                for item in items {
                    values.push(self.eval(item, env)?);
                }
                Value::list(values)
            }
            ExprKind::Lambda(lambda) => {
                Value::Func(Rc::new(Callable::Closure { lambda: lambda.clone(), env: env.clone() }))
            }
            ExprKind::If(cond, then, otherwise) => {
                if as_bool(&self.eval(cond, env)?, "if condition")? {
                    self.eval(then, env)?
                } else {
                    self.eval(otherwise, env)?
                }
            }
            ExprKind::Match(scrutinee, arms) => {
                let value = self.eval(scrutinee, env)?;
                for arm in arms {
                    let mut arm_env = env.clone();
                    if !self.bind_pattern(&arm.pat, &value, &mut arm_env)? {
                        continue;
                    }
                    if let Some(guard) = &arm.guard
                        && !as_bool(&self.eval(guard, &arm_env)?, "match guard")?
                    {
                        continue;
                    }
                    return self.eval(&arm.body, &arm_env);
                }
                return Err(rt("RT_MATCH", format!("no pattern matched value {}", show(&value))));
            }
            ExprKind::Let { pat, value, body, recursive } => {
                let mut inner = env.clone();
                self.bind_let(pat, value, *recursive, &mut inner)?;
                self.eval(body, &inner)?
            }
            ExprKind::Block(stmts) => {
                let mut scope = env.clone();
                let mut last = Value::Unit;
                // Statements a `letrec` group already bound.
                let mut skip = 0;
                for (at, stmt) in stmts.iter().enumerate() {
                    if skip > 0 {
                        skip -= 1;
                        continue;
                    }
                    match stmt {
                        Stmt::Let { pat, value, recursive, .. } => {
                            let group = if *recursive { rec_group_len(&stmts[at..]) } else { 0 };
                            if group > 1 {
                                bind_rec_group(&stmts[at..at + group], &mut scope);
                                skip = group - 1;
                            } else {
                                self.bind_let(pat, value, *recursive, &mut scope)?;
                            }
                            last = Value::Unit;
                        }
                        Stmt::Assert(cond) => {
                            self.assert(cond, &scope)?;
                            last = Value::Unit;
                        }
                        Stmt::Expr(e) => last = self.eval(e, &scope)?,
                    }
                }
                last
            }
            ExprKind::Unary(op, operand) => {
                let v = self.eval(operand, env)?;
                unary(*op, v)?
            }
            ExprKind::Binary(BinOp::And, l, r) => {
                let left = as_bool(&self.eval(l, env)?, "&&")?;
                Value::Bool(left && as_bool(&self.eval(r, env)?, "&&")?)
            }
            ExprKind::Binary(BinOp::Or, l, r) => {
                let left = as_bool(&self.eval(l, env)?, "||")?;
                Value::Bool(left || as_bool(&self.eval(r, env)?, "||")?)
            }
            ExprKind::Binary(op, l, r) => {
                let left = self.eval(l, env)?;
                let right = self.eval(r, env)?;
                binary(*op, left, right)?
            }
        })
    }

    /// `assert cond`: an `RT_ASSERT` error unless `cond` holds. Kept out of `eval_inner`, whose
    /// stack frame every nested expression pays.
    #[inline(never)]
    fn assert(&mut self, cond: &Expr, env: &Env) -> Result<(), Diagnostic> {
        if as_bool(&self.eval(cond, env)?, "assert")? {
            Ok(())
        } else {
            Err(rt("RT_ASSERT", "assertion failed").in_pos(cond.pos))
        }
    }

    fn lookup(&self, name: &Name, env: &Env) -> Result<Value, Diagnostic> {
        if let Some(v) = lookup(env, name) {
            return Ok(v.clone());
        }
        self.globals.get(name).cloned().ok_or_else(|| rt("TC002", format!("unbound variable: {name}")))
    }

    fn bind_let(&mut self, pat: &Pattern, value: &Expr, recursive: bool, env: &mut Env) -> Result<(), Diagnostic> {
        let v = match (&pat.kind, &value.kind, recursive) {
            (PatKind::Var(name), ExprKind::Lambda(lambda), true) => Value::Func(Rc::new(Callable::RecClosure {
                group: Rc::new([(name.clone(), lambda.clone())]),
                index: 0,
                env: env.clone(),
            })),
            _ => self.eval(value, env)?,
        };
        if !self.bind_pattern(pat, &v, env)? {
            return Err(rt("RT_MATCH", format!("let pattern did not match value {}", show(&v))).in_pos(pat.pos));
        }
        Ok(())
    }

    /// Match `value` against `pat`, extending `env` with the bindings on success.
    pub fn bind_pattern(&mut self, pat: &Pattern, value: &Value, env: &mut Env) -> Result<bool, Diagnostic> {
        if stack::exhausted() {
            return Err(self.recursion_error());
        }
        Ok(match (&pat.kind, value) {
            (PatKind::Wildcard, _) => true,
            (PatKind::Var(name), v) => {
                *env = bind(env, name.clone(), v.clone());
                true
            }
            (PatKind::Int(n), Value::Int(m)) => n == m,
            (PatKind::Int(n), Value::Float(f)) => (*n as f64) == *f,
            (PatKind::Float(f), Value::Float(g)) => f == g,
            (PatKind::Float(f), Value::Int(m)) => *f == (*m as f64),
            (PatKind::Str(s), Value::Str(t)) => s == t,
            (PatKind::Bool(b), Value::Bool(c)) => b == c,
            (PatKind::Unit, Value::Unit) => true,
            (PatKind::Ctor(name, args), Value::Ctor(c)) => {
                if *name != c.name {
                    return Ok(false);
                }
                if args.len() != c.args.0.len() {
                    return Err(type_error(format!(
                        "constructor pattern {name} has {} arguments, the value has {}",
                        args.len(),
                        c.args.0.len()
                    )));
                }
                for (p, v) in args.iter().zip(&c.args.0) {
                    if !self.bind_pattern(p, v, env)? {
                        return Ok(false);
                    }
                }
                true
            }
            (PatKind::Tuple(pats), Value::Tuple(items)) => {
                if pats.len() != items.0.len() {
                    return Ok(false);
                }
                for (p, v) in pats.iter().zip(&items.0) {
                    if !self.bind_pattern(p, v, env)? {
                        return Ok(false);
                    }
                }
                true
            }
            (PatKind::List(pats, rest), Value::List(list)) => {
                let mut cur = list.clone();
                for p in pats {
                    let Some((head, tail)) = cur.split() else {
                        return Ok(false);
                    };
                    let (head, tail) = (head.clone(), tail.clone());
                    if !self.bind_pattern(p, &head, env)? {
                        return Ok(false);
                    }
                    cur = tail;
                }
                match rest {
                    Some(rest) => self.bind_pattern(rest, &Value::List(cur), env)?,
                    None => cur.is_empty(),
                }
            }
            (PatKind::Cons(head_pat, tail_pat), Value::List(list)) => {
                let Some((head, tail)) = list.split() else {
                    return Ok(false);
                };
                let tail = Value::List(tail.clone());
                self.bind_pattern(head_pat, head, env)? && self.bind_pattern(tail_pat, &tail, env)?
            }
            (PatKind::Record { fields, .. }, v @ (Value::Record(_) | Value::Ctor(_))) => {
                for (name, p) in fields {
                    let Some(fv) = v.field(name) else {
                        return Ok(false);
                    };
                    let fv = fv.clone();
                    if !self.bind_pattern(p, &fv, env)? {
                        return Ok(false);
                    }
                }
                true
            }
            _ => false,
        })
    }

    /// Call a function value. `f()` passes a unit argument to a one-parameter function.
    pub fn apply(&mut self, f: &Value, mut args: Vec<Value>) -> Result<Value, Diagnostic> {
        let Value::Func(callable) = f else {
            return Err(type_error(format!("cannot call a value of type {}", f.type_name())));
        };
        match &**callable {
            Callable::Func(decl) => {
                let decl = decl.clone();
                self.call_decl(&decl, args)
            }
            Callable::Closure { lambda, env } => self.call_lambda(lambda, env.clone(), args),
            Callable::RecClosure { group, index, env } => self.call_rec(f, group, *index, env, args),
            Callable::Native(native) => {
                if args.is_empty() && native.arity == 1 {
                    args.push(Value::Unit);
                }
                if args.len() != native.arity {
                    return Err(arity_error(native.name, native.arity, args.len()));
                }
                (native.run)(self, args)
            }
            Callable::Ctor { name, arity, float_fields } => {
                if args.len() != *arity {
                    return Err(arity_error(name, *arity, args.len()));
                }
                let args =
                    args.into_iter().zip(float_fields.iter()).map(|(v, is_float)| coerce_float(*is_float, v)).collect();
                Ok(Value::Ctor(Rc::new(CtorValue { name: name.clone(), args: Seq(args) })))
            }
        }
    }

    /// Call lambda `index` of a `letrec` group, in its environment extended with every
    /// member of the group (`f` itself among them).
    #[inline(never)]
    fn call_rec(
        &mut self,
        f: &Value,
        group: &Rc<[(Name, Rc<Lambda>)]>,
        index: usize,
        env: &Env,
        args: Vec<Value>,
    ) -> Result<Value, Diagnostic> {
        let mut scope = env.clone();
        for (i, (name, _)) in group.iter().enumerate() {
            let member = if i == index {
                f.clone()
            } else {
                Value::Func(Rc::new(Callable::RecClosure { group: group.clone(), index: i, env: env.clone() }))
            };
            scope = bind(&scope, name.clone(), member);
        }
        self.call_lambda(&group[index].1, scope, args)
    }

    fn enter_call(&mut self) -> Result<(), Diagnostic> {
        if self.depth >= self.max_depth {
            return Err(self.recursion_error());
        }
        self.depth += 1;
        Ok(())
    }

    pub fn call_decl(&mut self, decl: &Rc<FuncDecl>, mut args: Vec<Value>) -> Result<Value, Diagnostic> {
        if args.is_empty() && decl.params.len() == 1 {
            args.push(Value::Unit);
        }
        if args.len() != decl.params.len() {
            return Err(arity_error(&decl.name, decl.params.len(), args.len()));
        }
        let mut env: Env = None;
        for (param, arg) in decl.params.iter().zip(args) {
            let arg = coerce_float(is_float_type(&param.ty), arg);
            if &*param.name != "_" {
                env = bind(&env, param.name.clone(), arg);
            }
        }
        self.enter_call()?;
        let result = self.eval(&decl.body, &env);
        self.depth -= 1;
        Ok(coerce_float(is_float_type(&decl.ret), result?))
    }

    fn call_lambda(&mut self, lambda: &Lambda, mut env: Env, mut args: Vec<Value>) -> Result<Value, Diagnostic> {
        if args.is_empty() && lambda.params.len() == 1 {
            args.push(Value::Unit);
        }
        if args.len() != lambda.params.len() {
            return Err(arity_error("lambda", lambda.params.len(), args.len()));
        }
        for (param, arg) in lambda.params.iter().zip(args) {
            if &*param.name != "_" {
                env = bind(&env, param.name.clone(), coerce_float(is_float_type(&param.ty), arg));
            }
        }
        self.enter_call()?;
        let result = self.eval(&lambda.body, &env);
        self.depth -= 1;
        result
    }
}

/// The `letrec name = \…` a statement binds, if it is one.
pub fn rec_lambda(stmt: &Stmt) -> Option<(&Name, &Rc<Lambda>)> {
    match stmt {
        Stmt::Let { pat: Pattern { kind: PatKind::Var(name), .. }, value, recursive: true, .. } => match &value.kind {
            ExprKind::Lambda(lambda) => Some((name, lambda)),
            _ => None,
        },
        _ => None,
    }
}

/// How many `letrec`s of lambdas start `stmts`: consecutive ones are one recursive group.
pub fn rec_group_len(stmts: &[Stmt]) -> usize {
    stmts.iter().take_while(|s| rec_lambda(s).is_some()).count()
}

/// Bind a group of consecutive `letrec` lambdas, each seeing all of them.
#[inline(never)]
fn bind_rec_group(stmts: &[Stmt], scope: &mut Env) {
    let group: Rc<[(Name, Rc<Lambda>)]> =
        stmts.iter().filter_map(rec_lambda).map(|(name, lambda)| (name.clone(), lambda.clone())).collect();
    let env = scope.clone();
    for (index, (name, _)) in group.iter().enumerate() {
        let member = Callable::RecClosure { group: group.clone(), index, env: env.clone() };
        *scope = bind(scope, name.clone(), Value::Func(Rc::new(member)));
    }
}

fn arity_error(name: &str, expected: usize, got: usize) -> Diagnostic {
    rt("RT_ARITY", format!("'{name}' expects {expected} argument(s), got {got}"))
}

impl Diagnostic {
    /// Attach a position if the error has none yet.
    pub fn in_pos(mut self, pos: Pos) -> Self {
        if self.pos.is_none() {
            self.pos = Some(pos);
        }
        self
    }
}

fn unary(op: UnaryOp, v: Value) -> Result<Value, Diagnostic> {
    Ok(match (op, v) {
        (UnaryOp::Neg, Value::Int(n)) => Value::Int(n.wrapping_neg()),
        (UnaryOp::Neg, Value::Float(f)) => Value::Float(-f),
        (UnaryOp::Not, Value::Bool(b)) => Value::Bool(!b),
        (UnaryOp::BitNot, Value::Int(n)) => Value::Int(!n),
        (op, v) => {
            return Err(type_error(format!("operator {op:?} does not apply to {}", v.type_name())));
        }
    })
}

/// Integer power with wrapping multiplication, by squaring.
fn int_pow(base: i64, exp: i64) -> Result<i64, Diagnostic> {
    if exp < 0 {
        return Err(type_error("negative exponent for an integer power"));
    }
    let (mut result, mut b, mut e) = (1i64, base, exp as u64);
    while e > 0 {
        if e & 1 == 1 {
            result = result.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    Ok(result)
}

/// Go's shifts: counts of 64 or more shift everything out; negative counts are an error.
fn shift(n: i64, count: i64, left: bool) -> Result<i64, Diagnostic> {
    if count < 0 {
        return Err(rt("RT_SHIFT", "negative shift count"));
    }
    Ok(match (left, count >= 64) {
        (true, true) => 0,
        (true, false) => n << count,
        (false, true) => {
            if n < 0 {
                -1
            } else {
                0
            }
        }
        (false, false) => n >> count,
    })
}

pub fn binary(op: BinOp, left: Value, right: Value) -> Result<Value, Diagnostic> {
    use Value::{Float, Int};
    let mismatch = |l: &Value, r: &Value| {
        type_error(format!("operator {} does not apply to {} and {}", op.symbol(), l.type_name(), r.type_name()))
    };
    Ok(match op {
        BinOp::Eq => Value::Bool(equal(&left, &right)?),
        BinOp::Ne => Value::Bool(!equal(&left, &right)?),
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
            let ord = compare(&left, &right)?;
            Value::Bool(match (op, ord) {
                (_, None) => false,
                (BinOp::Lt, Some(o)) => o.is_lt(),
                (BinOp::Le, Some(o)) => o.is_le(),
                (BinOp::Gt, Some(o)) => o.is_gt(),
                (_, Some(o)) => o.is_ge(),
            })
        }
        BinOp::Cons => match right {
            Value::List(tail) => Value::List(List::cons(left, tail)),
            other => return Err(mismatch(&left, &other)),
        },
        BinOp::Append => match (left, right) {
            (Value::List(a), Value::List(b)) => {
                if b.is_empty() {
                    Value::List(a)
                } else {
                    let mut out = b;
                    for item in a.to_vec().into_iter().rev() {
                        out = List::cons(item, out);
                    }
                    Value::List(out)
                }
            }
            (Value::Str(a), Value::Str(b)) => Value::str(format!("{a}{b}")),
            (l, r) => return Err(mismatch(&l, &r)),
        },
        _ => match (left, right) {
            (Int(a), Int(b)) => Int(match op {
                BinOp::Add => a.wrapping_add(b),
                BinOp::Sub => a.wrapping_sub(b),
                BinOp::Mul => a.wrapping_mul(b),
                BinOp::Div => {
                    if b == 0 {
                        return Err(division_by_zero());
                    }
                    a.wrapping_div(b)
                }
                BinOp::Rem => {
                    if b == 0 {
                        return Err(division_by_zero());
                    }
                    a.wrapping_rem(b)
                }
                BinOp::Pow => int_pow(a, b)?,
                BinOp::BitAnd => a & b,
                BinOp::BitXor => a ^ b,
                BinOp::Shl => shift(a, b, true)?,
                BinOp::Shr => shift(a, b, false)?,
                _ => return Err(mismatch(&Int(a), &Int(b))),
            }),
            (l @ (Int(_) | Float(_)), r @ (Int(_) | Float(_))) => {
                let (a, b) = (as_float(&l, "")?, as_float(&r, "")?);
                Float(match op {
                    BinOp::Add => a + b,
                    BinOp::Sub => a - b,
                    BinOp::Mul => a * b,
                    // IEEE 754, as the reference's newest runtime: `x / 0.0` is ±Inf, `0.0 / 0.0` NaN.
                    BinOp::Div => a / b,
                    BinOp::Rem => {
                        if b == 0.0 {
                            f64::NAN
                        } else {
                            a % b
                        }
                    }
                    BinOp::Pow => crate::float::pow(a, b),
                    _ => return Err(mismatch(&l, &r)),
                })
            }
            (l, r) => return Err(mismatch(&l, &r)),
        },
    })
}
