//! Structural checks (no type inference yet): unbound identifiers, constructor arity and
//! duplicate record fields, over every function body, contract and test row.

use crate::ast::*;
use crate::diag::{Diagnostic, Pos};
use crate::loader::Program;
use std::collections::HashMap;

pub fn check_program(program: &Program, file: &str) -> Vec<Diagnostic> {
    let mut checker = Checker { globals: program, locals: Vec::new(), errors: Vec::new() };
    for decl in &program.module.decls {
        match decl {
            Decl::Func(f) => {
                let base = checker.locals.len();
                for p in &f.params {
                    checker.locals.push(p.name.clone());
                }
                checker.expr(&f.body);
                for e in &f.requires {
                    checker.expr(e);
                }
                checker.locals.push("result".into());
                for e in &f.ensures {
                    checker.expr(e);
                }
                checker.locals.truncate(base);
                for row in &f.tests {
                    checker.expr(&row.input);
                    checker.expr(&row.expected);
                }
            }
            Decl::Test { body, .. } => checker.expr(body),
            Decl::Type(_) => {}
        }
    }
    checker.errors.into_iter().map(|d| d.in_file(file)).collect()
}

struct Checker<'a> {
    globals: &'a Program,
    locals: Vec<Name>,
    errors: Vec<Diagnostic>,
}

impl Checker<'_> {
    fn bound(&self, name: &str) -> bool {
        self.locals.iter().any(|l| &**l == name) || self.globals.globals.contains_key(name)
    }

    fn arity(&mut self, name: &Name, got: usize, pos: Pos) {
        let Some(&expected) = self.globals.ctor_arity.get(name) else {
            self.errors.push(Diagnostic::at("TC002", format!("unknown constructor: {name}"), pos));
            return;
        };
        // `C()` passes a unit argument to a one-field constructor.
        if expected != got && !(expected == 1 && got == 0) {
            self.errors.push(Diagnostic::at(
                "TC001",
                format!("constructor {name} expects {expected} argument(s), got {got}"),
                pos,
            ));
        }
    }

    fn expr(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Str(_) | ExprKind::Bool(_) | ExprKind::Unit => {}
            ExprKind::Interp(parts) => {
                for part in parts {
                    if let InterpPart::Expr(x) = part {
                        self.expr(x);
                    }
                }
            }
            ExprKind::Var(name) => {
                if !self.bound(name) {
                    let what = if name.starts_with(|c: char| c.is_uppercase()) {
                        "unknown constructor"
                    } else {
                        "unbound variable"
                    };
                    self.errors.push(Diagnostic::at("TC002", format!("{what}: {name}"), e.pos));
                }
            }
            ExprKind::Call(callee, args) => {
                match &callee.kind {
                    ExprKind::Var(name)
                        if !self.locals.iter().any(|l| l == name) && self.globals.ctor_arity.contains_key(name) =>
                    {
                        self.arity(name, args.len(), callee.pos)
                    }
                    _ => self.expr(callee),
                }
                for a in args {
                    self.expr(a);
                }
            }
            ExprKind::Field(base, _) => self.expr(base),
            ExprKind::Record(fields) => self.fields(fields, e.pos),
            ExprKind::RecordUpdate(base, fields) => {
                self.expr(base);
                self.fields(fields, e.pos);
            }
            ExprKind::Tuple(items) | ExprKind::List(items) => {
                for i in items {
                    self.expr(i);
                }
            }
            ExprKind::Lambda(lambda) => {
                let base = self.locals.len();
                for p in &lambda.params {
                    self.locals.push(p.name.clone());
                }
                self.expr(&lambda.body);
                self.locals.truncate(base);
            }
            ExprKind::If(c, t, f) => {
                self.expr(c);
                self.expr(t);
                self.expr(f);
            }
            ExprKind::Match(scrutinee, arms) => {
                self.expr(scrutinee);
                for arm in arms {
                    let base = self.locals.len();
                    self.pattern(&arm.pat);
                    if let Some(g) = &arm.guard {
                        self.expr(g);
                    }
                    self.expr(&arm.body);
                    self.locals.truncate(base);
                }
            }
            ExprKind::Let { pat, value, body, recursive } => {
                let base = self.locals.len();
                if *recursive {
                    self.pattern(pat);
                    self.expr(value);
                } else {
                    self.expr(value);
                    self.pattern(pat);
                }
                self.expr(body);
                self.locals.truncate(base);
            }
            ExprKind::Block(stmts) => {
                let base = self.locals.len();
                for stmt in stmts {
                    match stmt {
                        Stmt::Let { pat, value, .. } => {
                            self.expr(value);
                            self.pattern(pat);
                        }
                        Stmt::Expr(x) => self.expr(x),
                    }
                }
                self.locals.truncate(base);
            }
            ExprKind::Unary(_, x) => self.expr(x),
            ExprKind::Binary(_, l, r) => {
                self.expr(l);
                self.expr(r);
            }
        }
    }

    fn fields(&mut self, fields: &[(Name, Expr)], pos: Pos) {
        let mut seen: HashMap<&str, ()> = HashMap::new();
        for (name, value) in fields {
            if seen.insert(name, ()).is_some() {
                self.errors.push(Diagnostic::at("TC001", format!("duplicate field '{name}' in record"), pos));
            }
            self.expr(value);
        }
    }

    fn pattern(&mut self, p: &Pattern) {
        match &p.kind {
            PatKind::Var(name) => self.locals.push(name.clone()),
            PatKind::Ctor(name, args) => {
                self.arity(name, args.len(), p.pos);
                for a in args {
                    self.pattern(a);
                }
            }
            PatKind::Tuple(items) => {
                for i in items {
                    self.pattern(i);
                }
            }
            PatKind::List(items, rest) => {
                for i in items {
                    self.pattern(i);
                }
                if let Some(r) = rest {
                    self.pattern(r);
                }
            }
            PatKind::Cons(h, t) => {
                self.pattern(h);
                self.pattern(t);
            }
            PatKind::Record { fields, .. } => {
                for (_, fp) in fields {
                    self.pattern(fp);
                }
            }
            PatKind::Wildcard
            | PatKind::Int(_)
            | PatKind::Float(_)
            | PatKind::Str(_)
            | PatKind::Bool(_)
            | PatKind::Unit => {}
        }
    }
}
