//! The type checker: Hindley–Milner inference with let-generalisation over the loaded module.
//!
//! * Declared functions get the type their annotations give (type variables quantified);
//!   missing annotations are inferred, monomorphically within the module.
//! * Int literals are `Num a => a` (so `jnum(1)` is a float), float literals are `float`;
//!   Eq, Ord and Num constrain variables and are checked when the variable is bound.
//! * Records are row-polymorphic: `r.f` asks for `{f: t, ...}`; a record literal is closed.
//!   A single-constructor type wrapping a record allows `.f` on the wrapper.
//! * Effects: every function type carries an effect row. A declared function may only call
//!   what its `! {…}` allows (none = pure); a lambda's effects flow to where it is used.
//! * Arguments that are lambdas are checked after the other arguments, against the parameter
//!   type, so `map(\e. e.key, entries)` knows `e` before reading its field.
//!
//! Type annotations are flexible (an annotated `a` may turn out to be `int` in the body):
//! the checker must never refuse a program the reference accepts, so where the two could
//! differ it leans to accepting.

use crate::ast::*;
use crate::diag::{Diagnostic, Pos};
use crate::loader::Program;
use crate::parser::{parse_module, parse_type};
use crate::stack;
use crate::stdlib::catalog::{self, Builtin, STD_TYPES};
use crate::types::*;
use crate::value::{Callable, Value};
use std::cell::Cell;
use std::collections::BTreeMap;

// The checker hashes short names constantly and never sees untrusted keys in bulk: a fast
// fixed hasher, whose order nothing here depends on (see `type_order`).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::FixedState>;
use std::rc::Rc;

/// What `check` reports: errors fail, warnings (non-exhaustive matches) do not.
#[derive(Debug, Default)]
pub struct Report {
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
}

/// How much to check. `run` needs the module's code to be well-typed; `check` and `test`
/// also check inline test rows and contracts and look for non-exhaustive matches.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub full: bool,
}

/// Nesting beyond this is refused with a diagnostic rather than risking the native stack.
const MAX_DEPTH: usize = 5_000;
/// Later errors are usually consequences of the first ones.
const MAX_ERRORS: usize = 25;

pub fn check_program(program: &Program, file: &str) -> Vec<Diagnostic> {
    check_module(program, file, Options { full: true }).errors
}

pub fn check_module(program: &Program, file: &str, options: Options) -> Report {
    let _region = stack::enter(None);
    let mut checker = Checker::new(program, options);
    checker.run();
    Report {
        errors: checker.errors.into_iter().map(|d| d.in_file(file)).collect(),
        warnings: checker.warnings.into_iter().map(|d| d.in_file(file)).collect(),
    }
}

struct TypeDef {
    params: Vec<Name>,
    body: TypeBody,
}

struct CtorInfo {
    scheme: Scheme,
    arity: usize,
}

enum Global {
    Std(&'static Builtin),
    Known(Scheme),
}

struct Checker<'p> {
    program: &'p Program,
    options: Options,
    s: Subst,
    types: HashMap<Name, Rc<TypeDef>>,
    /// Type names in the order they were declared (std types first, then the module's), so
    /// that a constructor name two types share resolves the way the loader bound it.
    type_order: Vec<Name>,
    /// Constructor name (as written in this module) → its type.
    ctors: HashMap<Name, CtorInfo>,
    /// Type name → its constructors' real names, for exhaustiveness.
    variants: HashMap<Name, Vec<(Name, usize)>>,
    globals: HashMap<Name, Global>,
    /// Names whose import failed (already reported): typed as anything, silently.
    poisoned: HashSet<Name>,
    /// A whole-module import failed: any unknown name may have come from it.
    lenient: bool,
    locals: Vec<(Name, Scheme)>,
    /// The effect row the code being checked may use.
    ambient: Ty,
    /// Who owns the ambient row, for messages: a function name, or None for a lambda.
    owner: Option<Name>,
    depth: usize,
    too_deep: bool,
    /// The top-level `let` being checked, for messages.
    top_let: Option<Name>,
    /// `import std/list as L`: alias → module path; `L.map` reads the module's `map`.
    module_aliases: HashMap<Name, String>,
    /// Every int literal with its type, to mark those that resolved to `float`.
    int_literals: Vec<(&'p Cell<bool>, Ty)>,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
}

fn is_lambda(e: &Expr) -> bool {
    matches!(e.kind, ExprKind::Lambda(_))
}

/// The constructor a global value stands for (`import std/option (Some as S)` binds `S`).
fn real_ctor_name(v: &Value) -> Option<Name> {
    match v {
        Value::Ctor(c) => Some(c.name.clone()),
        Value::Func(f) => match &**f {
            Callable::Ctor { name, .. } => Some(name.clone()),
            _ => None,
        },
        _ => None,
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = if ca == *cb { 0 } else { 1 };
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, c)| *d <= (name.chars().count() / 3).min(3) && *c != name)
        .min()
        .map(|(_, c)| c)
}

impl<'p> Checker<'p> {
    fn new(program: &'p Program, options: Options) -> Self {
        let mut s = Subst::with_capacity(program.module.decls.len() * 64);
        let ambient = Ty::closed_row();
        s.level = 1;
        Checker {
            program,
            options,
            s,
            types: HashMap::default(),
            type_order: Vec::new(),
            ctors: HashMap::default(),
            variants: HashMap::default(),
            globals: HashMap::default(),
            poisoned: HashSet::default(),
            lenient: false,
            locals: Vec::with_capacity(64),
            ambient,
            owner: None,
            depth: 0,
            too_deep: false,
            top_let: None,
            module_aliases: HashMap::default(),
            int_literals: Vec::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Record an error, unless one is already reported at the same place: a second error there
    /// is a knock-on of the first.
    fn error(&mut self, d: Diagnostic) {
        if self.errors.len() < MAX_ERRORS && !self.errors.iter().any(|e| e.pos == d.pos) {
            self.errors.push(d);
        }
    }

    // ---- environment ----

    fn run(&mut self) {
        let program: &'p Program = self.program;
        let module = &program.module;
        for (_, decl) in STD_TYPES.iter().filter(|(m, _)| *m != "prelude") {
            if let Ok(m) = parse_module(decl) {
                for d in m.decls {
                    if let Decl::Type(t) = d {
                        self.add_type(&t);
                    }
                }
            }
        }
        for decl in &module.decls {
            if let Decl::Type(t) = decl {
                self.add_type(t);
            }
        }
        // Constructors in scope, as the loader bound them.
        let mut names: Vec<&Name> = self.program.ctor_arity.keys().collect();
        names.sort();
        for local in names {
            let Some(real) = self.program.globals.get(local).and_then(real_ctor_name) else { continue };
            if let Some(info) = self.ctor_info(&real) {
                self.ctors.insert(local.clone(), info);
            }
        }
        self.bind_imports();
        // Declared functions: their annotated signatures, quantified.
        let funcs: Vec<Rc<FuncDecl>> = module
            .decls
            .iter()
            .filter_map(|d| match d {
                Decl::Func(f) => Some(f.clone()),
                _ => None,
            })
            .collect();
        for f in &funcs {
            let scheme = self.declared_scheme(f);
            self.globals.insert(f.name.clone(), Global::Known(scheme));
        }
        // Top-level values, in order, before the functions that may read them.
        for decl in &module.decls {
            if let Decl::Let(top) = decl {
                self.check_top_let(top);
            }
        }
        for decl in &module.decls {
            if self.too_deep {
                break;
            }
            match decl {
                Decl::Func(f) => self.check_func(f),
                Decl::Test { body, .. } if self.options.full => {
                    self.enter_scope(None, Ty::closed_row());
                    let t = self.infer(body);
                    // A block of asserts ends in unit; anything else must come to a bool.
                    let asserts =
                        matches!(&body.kind, ExprKind::Block(stmts) if matches!(stmts.last(), Some(Stmt::Assert(_))));
                    if !asserts {
                        self.expect(&Ty::con("bool"), &t, body.pos, "a test must end in an assert or a bool");
                    }
                }
                _ => {}
            }
        }
        // Int literals whose type came out `float` are floats for the evaluator too.
        for (as_float, t) in std::mem::take(&mut self.int_literals) {
            if matches!(self.s.shallow_ref(&t), Ty::Con(name, _) if &**name == "float") {
                as_float.set(true);
            }
        }
    }

    /// `let x[: T] = e` at module level: pure, numbers defaulted, then generalised.
    fn check_top_let(&mut self, top: &'p TopLet) {
        self.enter_scope(None, Ty::closed_row());
        self.top_let = Some(top.name.clone());
        self.s.level += 1;
        let t = self.infer(&top.value);
        self.top_let = None;
        if let Some(te) = &top.ty {
            let declared = self.ty_of(te, &mut HashMap::default(), top.pos, true);
            let what = || format!("the value of '{}' must have its declared type", top.name);
            self.expect_with(&declared, &t, top.value.pos, &what);
        }
        self.s.default_numbers(&t);
        self.s.level -= 1;
        let scheme = self.s.generalize(&t);
        self.globals.insert(top.name.clone(), Global::Known(scheme));
    }

    fn add_type(&mut self, t: &TypeDecl) {
        let def = TypeDef { params: t.params.clone(), body: t.body.clone() };
        if let TypeBody::Variants(vs) = &t.body {
            self.variants.insert(t.name.clone(), vs.iter().map(|v| (v.name.clone(), v.fields.len())).collect());
        }
        self.type_order.retain(|n| *n != t.name);
        self.type_order.push(t.name.clone());
        self.types.insert(t.name.clone(), Rc::new(def));
    }

    /// The scheme of constructor `real`, from its type's declaration.
    fn ctor_info(&mut self, real: &Name) -> Option<CtorInfo> {
        // The latest declaration wins, as the module's constructors shadow imported ones.
        let (type_name, def) = self.type_order.iter().rev().find_map(|n| {
            let d = self.types.get(n)?;
            match &d.body {
                TypeBody::Variants(vs) if vs.iter().any(|v| &v.name == real) => Some((n.clone(), d.clone())),
                _ => None,
            }
        })?;
        let TypeBody::Variants(vs) = &def.body else { return None };
        let variant = vs.iter().find(|v| &v.name == real)?;
        let saved = self.s.level;
        self.s.level = 1;
        let mut tvars: HashMap<Name, Ty> = HashMap::default();
        let args: Vec<Ty> = def
            .params
            .iter()
            .map(|p| {
                let v = self.s.fresh();
                tvars.insert(p.clone(), v.clone());
                v
            })
            .collect();
        let result = Ty::con_args(type_name.clone(), args);
        let fields: Vec<Ty> = variant.fields.iter().map(|f| self.ty_of(f, &mut tvars, variant.pos, false)).collect();
        let arity = fields.len();
        let ty = if fields.is_empty() { result } else { Ty::func(fields, result, Ty::closed_row()) };
        self.s.level = 0;
        let scheme = self.s.generalize(&ty);
        self.s.level = saved;
        Some(CtorInfo { scheme, arity })
    }

    fn bind_imports(&mut self) {
        for b in catalog::BUILTINS.iter().filter(|b| b.module == "prelude") {
            self.globals.insert(b.name.into(), Global::Std(b));
        }
        let imports = &self.program.module.imports;
        for import in imports.iter().filter(|i| i.items.is_none()) {
            if crate::stdlib::module(&import.path).is_none() {
                self.lenient = true;
                continue;
            }
            if let Some(alias) = &import.alias {
                self.module_aliases.insert(alias.clone(), import.path.clone());
                continue;
            }
            for b in catalog::BUILTINS.iter().filter(|b| b.module == import.path) {
                self.globals.insert(b.name.into(), Global::Std(b));
            }
        }
        for import in imports {
            let Some(items) = &import.items else { continue };
            for item in items {
                match catalog::lookup(&import.path, &item.name) {
                    Some(b) => {
                        self.globals.insert(item.local_name().clone(), Global::Std(b));
                    }
                    None => {
                        if !self.ctors.contains_key(item.local_name()) {
                            self.poisoned.insert(item.local_name().clone());
                        }
                    }
                }
            }
        }
    }

    fn std_scheme(&mut self, b: &Builtin) -> Scheme {
        let (constraint, sig) = match b.signature.split_once("=>") {
            Some((c, sig)) => (Some(c.trim()), sig.trim()),
            None => (None, b.signature),
        };
        let saved = self.s.level;
        self.s.level = 1;
        let mut tvars = HashMap::default();
        let ty = match parse_type(sig) {
            Ok(te) => self.ty_of(&te, &mut tvars, Pos::default(), false),
            Err(_) => self.s.fresh(),
        };
        if let Some((class, var)) = constraint.and_then(|c| c.split_once(' '))
            && let Some(Ty::Var(v)) = tvars.get(var.trim())
        {
            let class = match class {
                "Num" => NUM,
                "Eq" => EQ,
                _ => ORD,
            };
            let _ = self.s.require(class, &Ty::Var(*v));
        }
        self.s.level = 0;
        let scheme = self.s.generalize(&ty);
        self.s.level = saved;
        scheme
    }

    /// The type a function's annotations give it: annotated parts quantified, missing
    /// parts shared monomorphic variables the body will fix.
    fn declared_scheme(&mut self, f: &FuncDecl) -> Scheme {
        let saved = self.s.level;
        let mut tvars = HashMap::default();
        let mut params = Vec::new();
        for p in &f.params {
            params.push(match &p.ty {
                // A function-typed parameter written without `! {…}` takes a function with
                // any effects, as in the reference: the effects stay latent in the value, and
                // the capability check at run time still guards them.
                Some(te @ TypeExpr::Func(_, _, None)) => {
                    self.s.level = 1;
                    match self.ty_of(te, &mut tvars, p.pos, true) {
                        Ty::Func(ps, r, _) => Ty::func(ps.to_vec(), (*r).clone(), self.s.open_row()),
                        other => other,
                    }
                }
                Some(te) => {
                    self.s.level = 1;
                    self.ty_of(te, &mut tvars, p.pos, true)
                }
                None => {
                    self.s.level = 0;
                    self.s.fresh()
                }
            });
        }
        self.s.level = if f.ret.is_some() { 1 } else { 0 };
        let ret = match &f.ret {
            Some(te) => self.ty_of(te, &mut tvars, f.pos, true),
            None => self.s.fresh(),
        };
        self.s.level = 1;
        let effects = self.effect_row(f.effects.as_ref(), &mut tvars);
        let ty = Ty::func(params, ret, effects);
        self.s.level = 0;
        let scheme = self.s.generalize(&ty);
        self.s.level = saved;
        scheme
    }

    fn effect_row(&mut self, row: Option<&EffectRow>, tvars: &mut HashMap<Name, Ty>) -> Ty {
        let Some(row) = row else { return Ty::closed_row() };
        let labels: BTreeMap<Name, Ty> = row.labels.iter().map(|l| (l.clone(), Ty::unit())).collect();
        let tail = row.tail.as_ref().map(|t| match tvars.get(t) {
            Some(Ty::Var(v)) => *v,
            _ => {
                let v = self.s.fresh_id(0);
                tvars.insert(t.clone(), Ty::Var(v));
                v
            }
        });
        Ty::row(labels, tail)
    }

    /// A written type as a checker type. Lower-case unknown names are type variables.
    fn ty_of(&mut self, te: &TypeExpr, tvars: &mut HashMap<Name, Ty>, pos: Pos, report: bool) -> Ty {
        self.ty_of_depth(te, tvars, pos, report, 0)
    }

    fn ty_of_depth(
        &mut self,
        te: &TypeExpr,
        tvars: &mut HashMap<Name, Ty>,
        pos: Pos,
        report: bool,
        depth: usize,
    ) -> Ty {
        if depth > 64 || stack::exhausted() {
            return self.s.fresh();
        }
        match te {
            TypeExpr::Unit => Ty::unit(),
            TypeExpr::List(inner) => Ty::list(self.ty_of_depth(inner, tvars, pos, report, depth + 1)),
            TypeExpr::Tuple(items) => {
                Ty::Tuple(items.iter().map(|i| self.ty_of_depth(i, tvars, pos, report, depth + 1)).collect())
            }
            TypeExpr::Record { fields, open } => {
                let labels = fields
                    .iter()
                    .map(|(k, t)| (k.clone(), self.ty_of_depth(t, tvars, pos, report, depth + 1)))
                    .collect();
                let tail = if *open { Some(self.s.fresh_id(0)) } else { None };
                Ty::record(Ty::row(labels, tail))
            }
            TypeExpr::Func(params, ret, effects) => {
                let mut ps: Vec<Ty> =
                    params.iter().map(|p| self.ty_of_depth(p, tvars, pos, report, depth + 1)).collect();
                if ps.is_empty() {
                    ps.push(Ty::unit());
                }
                let r = self.ty_of_depth(ret, tvars, pos, report, depth + 1);
                let e = self.effect_row(effects.as_ref(), tvars);
                Ty::func(ps, r, e)
            }
            TypeExpr::Named(name, args) => {
                if let Some(t) = tvars.get(name) {
                    return t.clone();
                }
                let mut args: Vec<Ty> =
                    args.iter().map(|a| self.ty_of_depth(a, tvars, pos, report, depth + 1)).collect();
                match &**name {
                    "int" | "float" | "string" | "bool" | "bytes" if args.is_empty() => {
                        return Ty::con_args(name.clone(), args);
                    }
                    "unit" if args.is_empty() => return Ty::unit(),
                    _ => {}
                }
                if let Some(def) = self.types.get(name).cloned() {
                    args.resize_with(def.params.len(), || self.s.fresh());
                    return match &def.body {
                        TypeBody::Variants(_) => Ty::con_args(name.clone(), args),
                        TypeBody::Alias(body) => {
                            let mut inner: HashMap<Name, Ty> = def.params.iter().cloned().zip(args).collect();
                            self.ty_of_depth(body, &mut inner, pos, report, depth + 1)
                        }
                    };
                }
                if name.starts_with(|c: char| c.is_lowercase()) || name.starts_with('_') {
                    let v = self.s.fresh();
                    tvars.insert(name.clone(), v.clone());
                    return v;
                }
                if report {
                    let known: Vec<&str> = self.types.keys().map(|k| &**k).collect();
                    let mut d = Diagnostic::at("TC002", format!("unknown type: {name}"), pos);
                    if let Some(c) = closest(name, known.into_iter().chain(["int", "float", "string", "bool"])) {
                        d = d.with_suggestion(format!("did you mean {c}?"));
                    } else if &**name == "Json" {
                        d = d.with_suggestion("import it: import std/json (Json)");
                    }
                    self.error(d);
                }
                self.s.fresh()
            }
        }
    }

    // ---- functions ----

    fn enter_scope(&mut self, owner: Option<Name>, ambient: Ty) {
        self.locals.clear();
        self.owner = owner;
        self.ambient = ambient;
        self.s.level = 1;
    }

    fn check_func(&mut self, f: &'p FuncDecl) {
        let Some(Global::Known(scheme)) = self.globals.get(&f.name) else { return };
        let scheme = scheme.clone();
        self.s.level = 1;
        let Ty::Func(params, ret, effects) = self.s.instantiate(&scheme) else { return };
        self.enter_scope(Some(f.name.clone()), (*effects).clone());
        for (p, t) in f.params.iter().zip(params.iter()) {
            self.locals.push((p.name.clone(), Scheme::mono(t.clone())));
        }
        let body = self.infer(&f.body);
        let what = || format!("the body of '{}' must have its declared result type", f.name);
        self.expect_with(&ret, &body, f.body.pos, &what);
        if self.options.full {
            self.ambient = self.s.open_row();
            for e in &f.requires {
                let t = self.infer(e);
                self.expect(&Ty::con("bool"), &t, e.pos, "a requires clause must be a bool");
            }
            self.locals.push(("result".into(), Scheme::mono((*ret).clone())));
            for e in &f.ensures {
                let t = self.infer(e);
                self.expect(&Ty::con("bool"), &t, e.pos, "an ensures clause must be a bool");
            }
            self.s.default_numbers(&Ty::Func(params.clone(), ret.clone(), effects.clone()));
            for row in &f.tests {
                self.check_test_row(f, &scheme, row);
            }
        } else {
            self.s.default_numbers(&Ty::Func(params, ret, effects));
        }
    }

    fn check_test_row(&mut self, f: &'p FuncDecl, scheme: &Scheme, row: &'p TestRow) {
        self.enter_scope(None, Ty::closed_row());
        self.ambient = self.s.open_row();
        let Ty::Func(params, ret, _) = self.s.instantiate(scheme) else { return };
        let input = self.infer(&row.input);
        let expected = self.infer(&row.expected);
        let want = if params.len() > 1 { Ty::Tuple(params) } else { params[0].clone() };
        let what = format!("a test row's input must match the parameters of '{}'", f.name);
        self.expect(&want, &input, row.input.pos, &what);
        let what = format!("a test row's expected value must match the result of '{}'", f.name);
        self.expect(&ret, &expected, row.expected.pos, &what);
    }

    // ---- diagnostics for failed unifications ----

    fn expect(&mut self, expected: &Ty, found: &Ty, pos: Pos, what: &str) -> bool {
        self.expect_with(expected, found, pos, &|| what.to_string())
    }

    /// `expect` with the context built only when there is an error to explain.
    fn expect_with(&mut self, expected: &Ty, found: &Ty, pos: Pos, what: &dyn Fn() -> String) -> bool {
        match self.s.unify(expected, found) {
            Ok(()) => true,
            Err(e) => {
                let what = what();
                let what = what.as_str();
                let d = self.explain(e, expected, found, pos, what);
                self.error(d);
                false
            }
        }
    }

    fn explain(&mut self, err: UnifyError, expected: &Ty, found: &Ty, pos: Pos, what: &str) -> Diagnostic {
        let mut p = Printer::new(&self.s);
        match err {
            UnifyError::Mismatch(a, b) => {
                let (e, f) = (p.show(expected), p.show(found));
                let (ia, ib) = (p.show(&a), p.show(&b));
                let mut message = format!("type mismatch: expected {e}, found {f}");
                if (ia.as_str(), ib.as_str()) != (e.as_str(), f.as_str()) {
                    message.push_str(&format!(" ({ia} vs {ib})"));
                }
                let mut d = Diagnostic::at("TC001", format!("{message}: {what}"), pos);
                if let Some(fix) = mismatch_fix(&ia, &ib) {
                    d = d.with_suggestion(fix);
                }
                d
            }
            UnifyError::Occurs(a, b) => Diagnostic::at(
                "TC004",
                format!("infinite type: {} would have to contain itself ({}): {what}", p.show(&a), p.show(&b)),
                pos,
            ),
            UnifyError::MissingLabel { label, has, effect: false, extra: true } => {
                // The value has a field the expected (closed) record type does not take.
                let list = has.iter().map(|h| h.to_string()).collect::<Vec<_>>().join(", ");
                let open =
                    has.iter().map(|h| format!("{h}: …")).chain(["...".to_string()]).collect::<Vec<_>>().join(", ");
                Diagnostic::at(
                    "TC001",
                    format!(
                        "this record has a field '{label}' that is not expected (expected exactly: {list}): {what}"
                    ),
                    pos,
                )
                .with_suggestion(format!("drop the field, or accept more fields with an open record type {{{open}}}"))
            }
            UnifyError::MissingLabel { label, has, effect: false, .. } => {
                let list = has.iter().map(|h| h.to_string()).collect::<Vec<_>>().join(", ");
                let mut d = Diagnostic::at(
                    "TC001",
                    format!("record field '{label}' is missing (the record has: {list}): {what}"),
                    pos,
                );
                if let Some(c) = closest(&label, has.iter().map(|h| &**h)) {
                    d = d.with_suggestion(format!("did you mean '{c}'?"));
                }
                d
            }
            UnifyError::MissingLabel { label, .. } => {
                Diagnostic::at("TC009", format!("effect {label} is not allowed here: {what}"), pos)
                    .with_suggestion(format!("declare it in the function's signature: ! {{{label}}}"))
            }
            UnifyError::Class { class: NUM, ty }
                if matches!(&ty, Ty::Con(n, _) if &**n == "string") && what.starts_with('\'') =>
            {
                // `"a" + "b"`: told from the caller's side, with the way strings are joined.
                let op = what.split('\'').nth(1).unwrap_or("+");
                Diagnostic::at("TC010", format!("'{op}' works on numbers, but this operand is a string"), pos)
                    .with_suggestion("join strings with interpolation \"${a}${b}\" or std/string concat([a, b])")
            }
            UnifyError::Class { class: NUM, ty } if matches!(&ty, Ty::Con(n, _) if &**n == "Json") => {
                // A bare number where a Json value belongs (`kv("n", 5)`).
                Diagnostic::at("TC010", format!("{what} must be a Json value, but this is a number"), pos)
                    .with_suggestion("wrap the number: jnum(x) for a float, jint(n) for an int")
            }
            UnifyError::Class { class, ty } => {
                let shown = p.show(&ty);
                let wanted = match class {
                    NUM => "a number (int or float)",
                    EQ => "a type that supports ==",
                    _ => "a type that supports ordering (<, >)",
                };
                let mut d = Diagnostic::at(
                    "TC010",
                    format!("{shown} is not an instance of {}: expected {wanted}: {what}", class_name(class)),
                    pos,
                );
                if class == NUM && shown == "string" {
                    d = d.with_suggestion("strings do not add up; join them with interpolation \"${a}${b}\"");
                } else if class == EQ && matches!(ty, Ty::Func(..)) {
                    d = d.with_suggestion("functions cannot be compared; compare their results");
                }
                d
            }
        }
    }

    // ---- expressions ----

    fn lookup(&mut self, name: &Name, pos: Pos) -> Ty {
        if let Some((_, scheme)) = self.locals.iter().rev().find(|(n, _)| n == name) {
            return self.s.instantiate(scheme);
        }
        if let Some(Global::Known(scheme)) = self.globals.get(name) {
            return self.s.instantiate(scheme);
        }
        if let Some(global) = self.globals.get(name) {
            let scheme = match global {
                Global::Known(s) => s.clone(),
                Global::Std(b) => {
                    let b: &Builtin = b;
                    let s = self.std_scheme(b);
                    self.globals.insert(name.clone(), Global::Known(s.clone()));
                    s
                }
            };
            return self.s.instantiate(&scheme);
        }
        if let Some(info) = self.ctors.get(name) {
            let scheme = info.scheme.clone();
            return self.s.instantiate(&scheme);
        }
        if !self.poisoned.contains(name) && !self.lenient {
            let ctor = name.starts_with(|c: char| c.is_uppercase());
            let what = if ctor { "unknown constructor" } else { "unbound variable" };
            let mut d = Diagnostic::at("TC002", format!("{what}: {name}"), pos);
            let candidates: Vec<String> = self
                .locals
                .iter()
                .map(|(n, _)| n.to_string())
                .chain(self.globals.keys().map(|k| k.to_string()))
                .chain(self.ctors.keys().map(|k| k.to_string()))
                .collect();
            // A std function of exactly that name is a missing import, whatever local name is
            // close; otherwise a close local name is a typo, and a close std name an import.
            let std_names = catalog::BUILTINS.iter().filter(|b| b.module != "prelude");
            let exact = std_names.clone().find(|b| b.name == &**name);
            let near_local = closest(name, candidates.iter().map(|s| s.as_str()));
            let near_std =
                closest(name, std_names.clone().map(|b| b.name)).and_then(|n| std_names.clone().find(|b| b.name == n));
            if let Some(b) = exact {
                d = d.with_suggestion(self.import_fix(b));
            } else if let Some(c) = near_local {
                d = d.with_suggestion(format!("did you mean '{c}'?"));
            } else if let Some(b) = near_std {
                d = d.with_suggestion(self.import_fix(b));
            }
            self.error(d);
        }
        self.s.fresh()
    }

    /// How to bring std function `b` into scope: a new import line, or the module's existing
    /// selective import of that module with the name added.
    fn import_fix(&self, b: &Builtin) -> String {
        let existing = self.program.module.imports.iter().find_map(|i| match &i.items {
            Some(items) if i.path == b.module => Some(items),
            _ => None,
        });
        let names = match existing {
            Some(items) => {
                let mut names: Vec<String> = items
                    .iter()
                    .map(|i| match &i.alias {
                        Some(alias) => format!("{} as {alias}", i.name),
                        None => i.name.to_string(),
                    })
                    .collect();
                names.push(b.name.to_string());
                names.join(", ")
            }
            None => b.name.to_string(),
        };
        format!("import it: import {} ({names})", b.module)
    }

    fn infer(&mut self, e: &'p Expr) -> Ty {
        if self.too_deep {
            return self.s.fresh();
        }
        self.depth += 1;
        if self.depth > MAX_DEPTH || stack::exhausted() {
            self.too_deep = true;
            self.error(
                Diagnostic::at("TC999", "expression nested too deeply to type-check", e.pos)
                    .with_suggestion("split it into smaller functions or let bindings"),
            );
            self.depth -= 1;
            return self.s.fresh();
        }
        let t = self.infer_inner(e);
        self.depth -= 1;
        t
    }

    fn infer_inner(&mut self, e: &'p Expr) -> Ty {
        match &e.kind {
            ExprKind::Int(_, as_float) => {
                let t = self.s.fresh_with(NUM);
                self.int_literals.push((as_float, t.clone()));
                t
            }
            ExprKind::Float(_) => Ty::con("float"),
            ExprKind::Str(_) => Ty::con("string"),
            ExprKind::Bool(_) => Ty::con("bool"),
            ExprKind::Unit => Ty::unit(),
            ExprKind::Interp(parts) => {
                for part in parts {
                    if let InterpPart::Expr(x) = part {
                        self.infer(x);
                    }
                }
                Ty::con("string")
            }
            ExprKind::Var(name) => self.lookup(name, e.pos),
            ExprKind::Call(callee, args) => self.infer_call(callee, args),
            ExprKind::Field(base, field) => {
                if let ExprKind::Var(alias) = &base.kind
                    && !self.locals.iter().any(|(n, _)| n == alias)
                    && let Some(path) = self.module_aliases.get(alias)
                {
                    return match catalog::lookup(path, field) {
                        Some(b) => {
                            let scheme = self.std_scheme(b);
                            self.s.instantiate(&scheme)
                        }
                        None => {
                            self.error(Diagnostic::at("TC002", format!("'{field}' is not exported by {path}"), e.pos));
                            self.s.fresh()
                        }
                    };
                }
                let bt = self.infer(base);
                self.field_type(&bt, field, base.pos)
            }
            ExprKind::Record(fields) => {
                let mut labels = BTreeMap::new();
                let mut seen = HashSet::default();
                for (name, value) in fields {
                    if !seen.insert(name.clone()) {
                        self.error(Diagnostic::at("TC001", format!("duplicate field '{name}' in record"), e.pos));
                    }
                    let t = self.infer(value);
                    labels.entry(name.clone()).or_insert(t);
                }
                Ty::record(Ty::row(labels, None))
            }
            ExprKind::RecordUpdate(base, fields) => {
                let bt = self.infer(base);
                let row = self.s.open_row();
                self.expect(&Ty::record(row.clone()), &bt, base.pos, "only a record can be updated");
                let (mut labels, tail) = self.s.row(&row);
                let mut seen = HashSet::default();
                for (name, value) in fields {
                    if !seen.insert(name.clone()) {
                        self.error(Diagnostic::at("TC001", format!("duplicate field '{name}' in record"), e.pos));
                    }
                    let t = self.infer(value);
                    labels.insert(name.clone(), t);
                }
                Ty::record(Ty::row(labels, tail))
            }
            ExprKind::Tuple(items) => Ty::Tuple(items.iter().map(|i| self.infer(i)).collect()),
            ExprKind::List(items) => {
                let elem = self.s.fresh();
                for item in items {
                    let t = self.infer(item);
                    self.expect(&elem, &t, item.pos, "list items must all have the same type");
                }
                Ty::list(elem)
            }
            ExprKind::Lambda(lambda) => self.infer_lambda(lambda, None),
            ExprKind::If(c, t, f) => {
                let ct = self.infer(c);
                self.expect(&Ty::con("bool"), &ct, c.pos, "an if condition must be a bool");
                let tt = self.infer(t);
                let ft = self.infer(f);
                self.expect(&tt, &ft, f.pos, "both branches of an if must have the same type");
                tt
            }
            ExprKind::Match(scrutinee, arms) => {
                let st = self.infer(scrutinee);
                let result = self.s.fresh();
                for arm in arms {
                    let base = self.locals.len();
                    self.pattern(&arm.pat, &st);
                    if let Some(g) = &arm.guard {
                        let gt = self.infer(g);
                        self.expect(&Ty::con("bool"), &gt, g.pos, "a match guard must be a bool");
                    }
                    let bt = self.infer(&arm.body);
                    self.expect(&result, &bt, arm.body.pos, "every match arm must have the same type");
                    self.locals.truncate(base);
                }
                if self.options.full {
                    self.exhaustive(&st, arms, e.pos);
                }
                result
            }
            ExprKind::Let { pat, value, body, recursive } => {
                let base = self.locals.len();
                self.bind_let(pat, value, *recursive);
                let t = self.infer(body);
                self.locals.truncate(base);
                t
            }
            ExprKind::Block(stmts) => {
                let base = self.locals.len();
                let mut last = Ty::unit();
                let mut at = 0;
                while let Some(stmt) = stmts.get(at) {
                    at += 1;
                    match stmt {
                        Stmt::Let { recursive: true, .. } if crate::eval::rec_group_len(&stmts[at - 1..]) > 1 => {
                            let len = crate::eval::rec_group_len(&stmts[at - 1..]);
                            self.bind_rec_group(&stmts[at - 1..at - 1 + len]);
                            at += len - 1;
                            last = Ty::unit();
                        }
                        Stmt::Let { pat, value, recursive, .. } => {
                            self.bind_let(pat, value, *recursive);
                            last = Ty::unit();
                        }
                        Stmt::Assert(cond) => {
                            let t = self.infer(cond);
                            self.expect(&Ty::con("bool"), &t, cond.pos, "an assert takes a bool");
                            last = Ty::unit();
                        }
                        Stmt::Expr(x) => last = self.infer(x),
                    }
                }
                self.locals.truncate(base);
                last
            }
            ExprKind::Unary(op, x) => {
                let t = self.infer(x);
                match op {
                    UnaryOp::Neg => {
                        let n = self.s.fresh_with(NUM);
                        self.expect(&n, &t, x.pos, "'-' negates a number");
                        n
                    }
                    UnaryOp::Not => {
                        self.expect(&Ty::con("bool"), &t, x.pos, "'not' takes a bool");
                        Ty::con("bool")
                    }
                    UnaryOp::BitNot => {
                        self.expect(&Ty::con("int"), &t, x.pos, "'~' takes an int");
                        Ty::con("int")
                    }
                }
            }
            ExprKind::Binary(op, l, r) => self.infer_binary(*op, l, r),
        }
    }

    fn infer_binary(&mut self, op: BinOp, l: &'p Expr, r: &'p Expr) -> Ty {
        let lt = self.infer(l);
        let rt = self.infer(r);
        let sym = op.symbol();
        match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem | BinOp::Pow => {
                let n = self.s.fresh_with(NUM);
                let what = || format!("'{sym}' takes two numbers of the same type");
                if self.expect_with(&n, &lt, l.pos, &what) {
                    self.expect_with(&n, &rt, r.pos, &what);
                }
                n
            }
            BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                let class = if matches!(op, BinOp::Eq | BinOp::Ne) { EQ } else { ORD };
                let v = self.s.fresh_with(class);
                let what = || format!("'{sym}' compares two values of the same type");
                if self.expect_with(&v, &lt, l.pos, &what) {
                    self.expect_with(&v, &rt, r.pos, &what);
                }
                Ty::con("bool")
            }
            BinOp::And | BinOp::Or => {
                let what = || format!("'{sym}' takes two bools");
                self.expect_with(&Ty::con("bool"), &lt, l.pos, &what);
                self.expect_with(&Ty::con("bool"), &rt, r.pos, &what);
                Ty::con("bool")
            }
            BinOp::BitAnd | BinOp::BitXor | BinOp::Shl | BinOp::Shr => {
                let what = || format!("'{sym}' takes two ints");
                self.expect_with(&Ty::con("int"), &lt, l.pos, &what);
                self.expect_with(&Ty::con("int"), &rt, r.pos, &what);
                Ty::con("int")
            }
            BinOp::Cons => {
                let list = Ty::list(lt);
                self.expect(&list, &rt, r.pos, "'::' puts an item in front of a list of that item's type");
                list
            }
            BinOp::Append => {
                let elem = self.s.fresh();
                let list = Ty::list(elem);
                for (t, x) in [(&lt, l), (&rt, r)] {
                    if matches!(self.s.shallow(t), Ty::Con(ref n, _) if &**n == "string") {
                        self.error(Diagnostic::at("TC001", "'++' joins lists, not strings", x.pos).with_suggestion(
                            "join strings with interpolation \"${a}${b}\" or std/string concat([a, b])",
                        ));
                        return Ty::con("string");
                    }
                    if !self.expect(&list, t, x.pos, "'++' joins two lists of the same type") {
                        break;
                    }
                }
                list
            }
        }
    }

    fn infer_call(&mut self, callee: &'p Expr, args: &'p [Expr]) -> Ty {
        // `f()` passes one unit argument, which has no expression of its own.
        let unit_call = args.is_empty();
        let arity = args.len().max(1);
        let name = match &callee.kind {
            ExprKind::Var(n) => Some(n.clone()),
            _ => None,
        };
        if let Some(n) = &name
            && !self.locals.iter().any(|(l, _)| l == n)
            && let Some(info) = self.ctors.get(n)
        {
            let got = args.len();
            if info.arity != got && !(info.arity == 1 && got == 0) {
                let message = format!("constructor {n} expects {} argument(s), got {got}", info.arity);
                self.error(Diagnostic::at("TC001", message, callee.pos));
                for a in args {
                    self.infer(a);
                }
                return self.s.fresh();
            }
        }
        let ft = self.infer(callee);
        // Only messages need the callee's description: built on demand.
        let shown = || name.as_deref().map(|n| format!("'{n}'")).unwrap_or_else(|| "the function".into());
        let (params, ret, effects) = match self.s.shallow(&ft) {
            Ty::Func(ps, r, e) => {
                if ps.len() != arity {
                    let message = format!("{} expects {} argument(s), got {}", shown(), ps.len(), args.len());
                    self.error(Diagnostic::at("TC001", message, callee.pos));
                    for a in args {
                        self.infer(a);
                    }
                    return (*r).clone();
                }
                (ps.to_vec(), (*r).clone(), (*e).clone())
            }
            Ty::Var(_) => {
                let ps: Vec<Ty> = (0..arity).map(|_| self.s.fresh()).collect();
                let (r, e) = (self.s.fresh(), self.s.open_row());
                let f = Ty::func(ps.clone(), r.clone(), e.clone());
                if !self.expect_with(&f, &ft, callee.pos, &|| format!("{} is called", shown())) {
                    for a in args {
                        self.infer(a);
                    }
                    return r;
                }
                (ps, r, e)
            }
            other => {
                let shown_ty = Printer::new(&self.s).show(&other);
                self.error(Diagnostic::at(
                    "TC001",
                    format!("{} is not a function (it is {shown_ty})", shown()),
                    callee.pos,
                ));
                for a in args {
                    self.infer(a);
                }
                return self.s.fresh();
            }
        };
        if unit_call {
            self.expect_with(&params[0], &Ty::unit(), callee.pos, &|| {
                format!("argument 1 of {} (none given)", shown())
            });
        }
        // Other arguments first, then lambdas against what is known of their parameter. After
        // one argument does not fit, the rest are still checked inside but not against the
        // call: their mismatches would only be knock-ons of the first.
        let mut fits = true;
        for pass in [false, true] {
            for (i, (arg, param)) in args.iter().zip(&params).enumerate() {
                if is_lambda(arg) != pass {
                    continue;
                }
                let at = match &arg.kind {
                    ExprKind::Lambda(l) if fits => self.infer_lambda(l, Some(param)),
                    _ => self.infer(arg),
                };
                if fits {
                    fits = self.expect_with(param, &at, arg.pos, &|| format!("argument {} of {}", i + 1, shown()));
                }
            }
        }
        if fits {
            self.use_effects(&effects, &shown, callee.pos);
        }
        ret
    }

    /// Calling something with effect row `effects` from the current code.
    fn use_effects(&mut self, effects: &Ty, callee: &dyn Fn() -> String, pos: Pos) {
        // Most calls are pure: a closed empty row asks nothing of the caller.
        if matches!(self.s.shallow_ref(effects), Ty::Row(labels, None) if labels.is_empty()) {
            return;
        }
        let (labels, tail) = self.s.row(effects);
        let (allowed, open) = self.s.row(&self.ambient);
        for label in labels.keys() {
            if allowed.contains_key(label) {
                continue;
            }
            if let Some(t) = open {
                let fresh = self.s.fresh_id(0);
                let _ = self.s.unify(&Ty::Var(t), &Ty::row([(label.clone(), Ty::unit())].into(), Some(fresh)));
                continue;
            }
            let d = match (&self.top_let, &self.owner) {
                (Some(value), _) => Diagnostic::at(
                    "TC009",
                    format!("{} needs the {label} effect, but the top-level value '{value}' must be pure", callee()),
                    pos,
                )
                .with_suggestion(format!("compute it in a function that declares ! {{{label}}}, such as main")),
                (None, Some(f)) => Diagnostic::at(
                    "TC009",
                    format!("{} needs the {label} effect, but '{f}' does not declare it", callee()),
                    pos,
                )
                .with_suggestion(format!(
                    "declare it: func {f}(…) -> … ! {{{label}}}, and grant it at run time with --caps {label}"
                )),
                (None, None) => Diagnostic::at(
                    "TC009",
                    format!("{} needs the {label} effect, but this function must be pure where it is used", callee()),
                    pos,
                )
                .with_suggestion("use the effectful variant (mapE, filterE, foldlE, flatMapE, forEachE)"),
            };
            self.error(d);
            return;
        }
        if let Some(t) = tail {
            let (allowed, open) = self.s.row(&self.ambient);
            if open != Some(t) {
                let rest: BTreeMap<Name, Ty> = allowed.into_iter().filter(|(k, _)| !labels.contains_key(k)).collect();
                let _ = self.s.unify(&Ty::Var(t), &Ty::row(rest, open));
            }
        }
    }

    fn infer_lambda(&mut self, lambda: &'p Lambda, expected: Option<&Ty>) -> Ty {
        let expected = expected.map(|t| self.s.shallow(t));
        let (hint_params, hint_effects) = match &expected {
            Some(Ty::Func(ps, _, e)) if ps.len() == lambda.params.len() => (Some(ps.clone()), Some((**e).clone())),
            _ => (None, None),
        };
        let base = self.locals.len();
        let mut tvars = HashMap::default();
        let mut params = Vec::new();
        for (i, p) in lambda.params.iter().enumerate() {
            let hint = hint_params.as_ref().map(|ps| ps[i].clone());
            let t = match (&p.ty, hint) {
                (Some(te), hint) => {
                    let t = self.ty_of(te, &mut tvars, p.pos, true);
                    if let Some(h) = hint {
                        let _ = self.s.unify(&h, &t);
                    }
                    t
                }
                (None, Some(h)) => h,
                (None, None) => self.s.fresh(),
            };
            self.locals.push((p.name.clone(), Scheme::mono(t.clone())));
            params.push(t);
        }
        let effects = match (&lambda.effects, hint_effects) {
            (Some(row), _) => self.effect_row(Some(row), &mut tvars),
            (None, Some(e)) => e,
            (None, None) => self.s.open_row(),
        };
        let saved_ambient = std::mem::replace(&mut self.ambient, effects.clone());
        let saved_owner = self.owner.take();
        // A function literal's `-> R` is documentation: the reference does not hold the body to
        // it (`func(x: int) -> int { func(y: int) -> int { x * y } }` runs there).
        let body = self.infer(&lambda.body);
        self.ambient = saved_ambient;
        self.owner = saved_owner;
        self.locals.truncate(base);
        Ty::func(params, body, effects)
    }

    fn bind_let(&mut self, pat: &Pattern, value: &'p Expr, recursive: bool) {
        if let PatKind::Var(name) = &pat.kind {
            self.s.level += 1;
            let t = if recursive {
                let v = self.s.fresh();
                self.locals.push((name.clone(), Scheme::mono(v.clone())));
                let t = self.infer(value);
                self.expect(&v, &t, value.pos, "a recursive binding keeps one type");
                self.locals.pop();
                t
            } else {
                self.infer(value)
            };
            self.s.level -= 1;
            let scheme = self.s.generalize(&t);
            self.locals.push((name.clone(), scheme));
            return;
        }
        let t = self.infer(value);
        self.pattern(pat, &t);
    }

    /// Consecutive `letrec`s of lambdas: each sees all of them (mutual recursion), and each is
    /// generalised once the whole group is typed.
    fn bind_rec_group(&mut self, stmts: &'p [Stmt]) {
        self.s.level += 1;
        let base = self.locals.len();
        let members: Vec<(&Name, &'p Rc<Lambda>, Ty)> = stmts
            .iter()
            .filter_map(crate::eval::rec_lambda)
            .map(|(name, lambda)| (name, lambda, self.s.fresh()))
            .collect();
        for (name, _, t) in &members {
            self.locals.push(((*name).clone(), Scheme::mono(t.clone())));
        }
        for (_, lambda, t) in &members {
            let found = self.infer_lambda(lambda, None);
            self.expect(t, &found, lambda.body.pos, "a recursive binding keeps one type");
        }
        self.locals.truncate(base);
        self.s.level -= 1;
        for (name, _, t) in members {
            let scheme = self.s.generalize(&t);
            self.locals.push((name.clone(), scheme));
        }
    }

    fn field_type(&mut self, base: &Ty, field: &Name, pos: Pos) -> Ty {
        let result = self.s.fresh();
        let mut target = self.s.shallow(base);
        if let Ty::Con(name, args) = &target
            && let Some(def) = self.types.get(name).cloned()
            && let TypeBody::Variants(vs) = &def.body
            && let [only] = vs.as_slice()
            && let [inner] = only.fields.as_slice()
        {
            let mut tvars: HashMap<Name, Ty> = def.params.iter().cloned().zip(args.iter().cloned()).collect();
            target = self.ty_of(inner, &mut tvars, pos, false);
        }
        let tail = self.s.fresh_id(0);
        let want = Ty::record(Ty::row([(field.clone(), result.clone())].into(), Some(tail)));
        if let Err(err) = self.s.unify(&want, &target) {
            let d = match err {
                UnifyError::Mismatch(..) => {
                    let shown = Printer::new(&self.s).show(&target);
                    Diagnostic::at("TC001", format!("cannot read field '{field}' of a value of type {shown}"), pos)
                }
                other => self.explain(other, &want, &target, pos, &format!("reading field '{field}'")),
            };
            self.error(d);
        }
        result
    }

    // ---- patterns ----

    fn pattern(&mut self, p: &Pattern, expected: &Ty) {
        match &p.kind {
            PatKind::Wildcard => {}
            PatKind::Var(name) => self.locals.push((name.clone(), Scheme::mono(expected.clone()))),
            PatKind::Int(_) => {
                let n = self.s.fresh_with(NUM);
                self.expect(expected, &n, p.pos, "the pattern must match the value's type");
            }
            PatKind::Float(_) => {
                self.expect(expected, &Ty::con("float"), p.pos, "the pattern must match the value's type");
            }
            PatKind::Str(_) => {
                self.expect(expected, &Ty::con("string"), p.pos, "the pattern must match the value's type");
            }
            PatKind::Bool(_) => {
                self.expect(expected, &Ty::con("bool"), p.pos, "the pattern must match the value's type");
            }
            PatKind::Unit => {
                self.expect(expected, &Ty::unit(), p.pos, "the pattern must match the value's type");
            }
            PatKind::Ctor(name, args) => {
                let Some(info) = self.ctors.get(name) else {
                    if !self.poisoned.contains(name) && !self.lenient {
                        let candidates: Vec<&str> = self.ctors.keys().map(|k| &**k).collect();
                        let mut d = Diagnostic::at("TC002", format!("unknown constructor: {name}"), p.pos);
                        if let Some(c) = closest(name, candidates.into_iter()) {
                            d = d.with_suggestion(format!("did you mean {c}?"));
                        }
                        self.error(d);
                    }
                    for a in args {
                        let v = self.s.fresh();
                        self.pattern(a, &v);
                    }
                    return;
                };
                let arity = info.arity;
                let scheme = info.scheme.clone();
                if arity != args.len() && !(arity == 1 && args.is_empty()) {
                    let message = format!("constructor {name} expects {arity} argument(s), got {}", args.len());
                    self.error(Diagnostic::at("TC001", message, p.pos));
                    return;
                }
                let t = self.s.instantiate(&scheme);
                let (fields, result) = match t {
                    Ty::Func(fs, r, _) => (fs.to_vec(), (*r).clone()),
                    other => (Vec::new(), other),
                };
                self.expect(expected, &result, p.pos, &format!("constructor {name} must match the value's type"));
                for (a, f) in args.iter().zip(&fields) {
                    self.pattern(a, f);
                }
            }
            PatKind::Tuple(items) => {
                let vars: Vec<Ty> = items.iter().map(|_| self.s.fresh()).collect();
                self.expect(expected, &Ty::tuple(vars.clone()), p.pos, "the tuple pattern must match the value's type");
                for (i, v) in items.iter().zip(&vars) {
                    self.pattern(i, v);
                }
            }
            PatKind::List(items, rest) => {
                let elem = self.s.fresh();
                let list = Ty::list(elem.clone());
                self.expect(expected, &list, p.pos, "the list pattern must match the value's type");
                for i in items {
                    self.pattern(i, &elem);
                }
                if let Some(r) = rest {
                    self.pattern(r, &list);
                }
            }
            PatKind::Cons(h, t) => {
                let elem = self.s.fresh();
                let list = Ty::list(elem.clone());
                self.expect(expected, &list, p.pos, "the '::' pattern must match a list");
                self.pattern(h, &elem);
                self.pattern(t, &list);
            }
            PatKind::Record { fields, .. } => {
                let vars: Vec<(Name, Ty)> = fields.iter().map(|(n, _)| (n.clone(), self.s.fresh())).collect();
                let tail = self.s.fresh_id(0);
                let want = Ty::record(Ty::row(vars.iter().cloned().collect(), Some(tail)));
                self.expect(expected, &want, p.pos, "the record pattern must match the value's type");
                for ((_, fp), (_, v)) in fields.iter().zip(&vars) {
                    self.pattern(fp, v);
                }
            }
        }
    }

    // ---- exhaustiveness ----

    fn exhaustive(&mut self, scrutinee: &Ty, arms: &[Arm], pos: Pos) {
        let pats: Vec<&Pattern> = arms.iter().filter(|a| a.guard.is_none()).map(|a| &a.pat).collect();
        if let Some(missing) = self.missing(&pats, scrutinee, 0) {
            self.warnings.push(
                Diagnostic::at("ELB004", format!("non-exhaustive match: no arm matches {missing}"), pos)
                    .with_suggestion("add an arm for it, or a final `_ => …` arm"),
            );
        }
    }

    /// An example of a value of type `ty` none of `pats` matches, if the checker can tell.
    fn missing(&self, pats: &[&Pattern], ty: &Ty, depth: usize) -> Option<String> {
        if depth > 8 || pats.iter().any(|p| irrefutable(p)) {
            return None;
        }
        let ty = self.s.shallow(ty);
        match &ty {
            Ty::Con(n, _) if &**n == "bool" => {
                for b in [true, false] {
                    if !pats.iter().any(|p| matches!(p.kind, PatKind::Bool(x) if x == b)) {
                        return Some(b.to_string());
                    }
                }
                None
            }
            Ty::Con(n, _) if &**n == "List" => {
                let empty = pats.iter().any(|p| matches!(&p.kind, PatKind::List(items, _) if items.is_empty()));
                if !empty {
                    return Some("[]".into());
                }
                let nonempty = pats.iter().any(|p| match &p.kind {
                    PatKind::Cons(h, t) => irrefutable(h) && irrefutable(t),
                    PatKind::List(items, Some(rest)) => {
                        items.len() <= 1 && items.iter().all(irrefutable) && irrefutable(rest)
                    }
                    _ => false,
                });
                let partial = pats.iter().any(|p| matches!(&p.kind, PatKind::Cons(..) | PatKind::List(_, Some(_))))
                    || pats.iter().any(|p| matches!(&p.kind, PatKind::List(items, None) if !items.is_empty()));
                if nonempty || partial {
                    // Several shapes of non-empty lists: too many cases to judge cheaply.
                    None
                } else {
                    Some("a non-empty list".into())
                }
            }
            Ty::Con(n, args) => {
                let variants = self.variants.get(n)?;
                let def = self.types.get(n)?;
                for (ctor, arity) in variants {
                    let rows: Vec<&Vec<Pattern>> = pats
                        .iter()
                        .filter_map(|p| match &p.kind {
                            PatKind::Ctor(c, ps) if self.ctor_real(c).as_ref() == Some(ctor) => Some(ps),
                            _ => None,
                        })
                        .collect();
                    if rows.is_empty() {
                        return Some(if *arity == 0 { ctor.to_string() } else { format!("{ctor}(…)") });
                    }
                    // Each field column on its own: may miss combinations, never invents one.
                    let TypeBody::Variants(vs) = &def.body else { return None };
                    let variant = vs.iter().find(|v| &v.name == ctor)?;
                    for (i, field) in variant.fields.iter().enumerate() {
                        let column: Vec<&Pattern> = rows.iter().filter_map(|ps| ps.get(i)).collect();
                        if column.len() < rows.len() {
                            continue;
                        }
                        let field_ty = self.field_of(def, args, field);
                        if let Some(m) = self.missing(&column, &field_ty, depth + 1) {
                            let mut shown: Vec<String> = vec!["_".into(); *arity];
                            shown[i] = m;
                            return Some(format!("{ctor}({})", shown.join(", ")));
                        }
                    }
                }
                None
            }
            Ty::Tuple(items) if !items.is_empty() => {
                for (i, item) in items.iter().enumerate() {
                    let column: Vec<&Pattern> = pats
                        .iter()
                        .filter_map(|p| match &p.kind {
                            PatKind::Tuple(ps) => ps.get(i),
                            _ => None,
                        })
                        .collect();
                    if let Some(m) = self.missing(&column, item, depth + 1) {
                        let mut shown: Vec<String> = vec!["_".into(); items.len()];
                        shown[i] = m;
                        return Some(format!("({})", shown.join(", ")));
                    }
                }
                None
            }
            _ => None,
        }
    }

    fn ctor_real(&self, local: &Name) -> Option<Name> {
        self.program.globals.get(local).and_then(real_ctor_name)
    }

    /// A constructor field's type at the scrutinee's type arguments, without reporting.
    fn field_of(&self, def: &TypeDef, args: &[Ty], field: &TypeExpr) -> Ty {
        // Only the shapes exhaustiveness needs: a named type, a type parameter or a list.
        match field {
            TypeExpr::Named(n, a) => match def.params.iter().position(|p| p == n) {
                Some(i) => args.get(i).cloned().unwrap_or(Ty::unit()),
                None => match &**n {
                    "bool" | "int" | "float" | "string" => Ty::con(n),
                    _ => Ty::Con(n.clone(), a.iter().map(|x| self.field_of(def, args, x)).collect()),
                },
            },
            TypeExpr::List(inner) => Ty::list(self.field_of(def, args, inner)),
            TypeExpr::Tuple(items) => Ty::Tuple(items.iter().map(|x| self.field_of(def, args, x)).collect()),
            _ => Ty::unit(),
        }
    }
}

fn irrefutable(p: &Pattern) -> bool {
    match &p.kind {
        PatKind::Wildcard | PatKind::Var(_) | PatKind::Unit => true,
        PatKind::Tuple(items) => items.iter().all(irrefutable),
        PatKind::Record { fields, .. } => fields.iter().all(|(_, f)| irrefutable(f)),
        _ => false,
    }
}

/// A fix for the commonest mismatches.
fn mismatch_fix(expected: &str, found: &str) -> Option<String> {
    match (expected, found) {
        ("float", "int") => Some("convert with intToFloat(n), or write a float literal such as 1.0".into()),
        ("int", "float") => Some("convert with floatToInt(x) (it truncates)".into()),
        ("string", "int" | "float" | "bool") => Some("render it with show(x) or \"${x}\"".into()),
        ("Json", "string") => Some("wrap it: js(s)".into()),
        ("Json", "int") => Some("wrap it: jint(n)".into()),
        ("Json", "float") => Some("wrap it: jnum(x)".into()),
        ("Json", "bool") => Some("wrap it: jb(b)".into()),
        (e, f) if e.starts_with("Option[") && !f.starts_with("Option[") => {
            Some("wrap the value in Some(…), or return None".into())
        }
        (e, f) if f.starts_with("Option[") && !e.starts_with("Option[") => {
            Some("take the value out with match (Some(x) => …, None => …) or getOrElse".into())
        }
        (e, f) if f.starts_with("Result[") && !e.starts_with("Result[") => {
            Some("take the value out with match (Ok(x) => …, Err(e) => …)".into())
        }
        _ => None,
    }
}
