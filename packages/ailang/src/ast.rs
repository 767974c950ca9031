//! The syntax tree. Every expression and pattern carries its source position.

use crate::diag::Pos;
use std::cell::Cell;
use std::rc::Rc;

pub type Name = Rc<str>;

#[derive(Debug, Clone)]
pub struct Module {
    /// `module a/b`, when the file has a header.
    pub name: Option<(String, Pos)>,
    pub imports: Vec<Import>,
    pub decls: Vec<Decl>,
}

#[derive(Debug, Clone)]
pub struct Import {
    pub path: String,
    pub pos: Pos,
    /// `None` imports every export; `Some` is a selective list.
    pub items: Option<Vec<ImportItem>>,
    /// `import std/list as L`: the exports are reached as `L.name` only.
    pub alias: Option<Name>,
}

#[derive(Debug, Clone)]
pub struct ImportItem {
    pub name: Name,
    pub alias: Option<Name>,
    pub pos: Pos,
}

impl ImportItem {
    /// The name the item is bound to in the importing module.
    pub fn local_name(&self) -> &Name {
        self.alias.as_ref().unwrap_or(&self.name)
    }
}

#[derive(Debug, Clone)]
pub enum Decl {
    Type(TypeDecl),
    Func(Rc<FuncDecl>),
    /// `test "name" = expr` passes when the expression is `true`; `test "name" { … }` when
    /// every `assert` in the block holds and the block ends in `true` or an assert.
    Test {
        name: String,
        body: Expr,
        pos: Pos,
    },
    /// `let x[: T] = expr` at module level: evaluated once, in order, before anything runs.
    Let(TopLet),
}

#[derive(Debug, Clone)]
pub struct TopLet {
    pub name: Name,
    pub ty: Option<TypeExpr>,
    pub value: Expr,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct TypeDecl {
    pub name: Name,
    pub params: Vec<Name>,
    pub exported: bool,
    pub body: TypeBody,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub enum TypeBody {
    Variants(Vec<Variant>),
    Alias(TypeExpr),
}

#[derive(Debug, Clone)]
pub struct Variant {
    pub name: Name,
    pub fields: Vec<TypeExpr>,
    pub pos: Pos,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TypeExpr {
    /// `int`, `Json`, `Option[a]`, a type variable `a`.
    Named(Name, Vec<TypeExpr>),
    List(Box<TypeExpr>),
    Tuple(Vec<TypeExpr>),
    Unit,
    Record {
        fields: Vec<(Name, TypeExpr)>,
        open: bool,
    },
    /// Parameters, result and the effect row (`None` when the type has no `! {…}`: pure).
    Func(Vec<TypeExpr>, Box<TypeExpr>, Option<EffectRow>),
}

/// `! {IO, FS}`, `! {e}`, `! {IO | e}`: effect labels and an optional row variable.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EffectRow {
    pub labels: Vec<Name>,
    pub tail: Option<Name>,
}

#[derive(Debug, Clone)]
pub struct Param {
    pub name: Name,
    pub ty: Option<TypeExpr>,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct FuncDecl {
    pub name: Name,
    pub exported: bool,
    /// `func map[a, b](…)`: the declared type parameters.
    pub type_params: Vec<Name>,
    pub params: Vec<Param>,
    pub ret: Option<TypeExpr>,
    /// The declared effect row; `None` means pure.
    pub effects: Option<EffectRow>,
    pub requires: Vec<Expr>,
    pub ensures: Vec<Expr>,
    /// Inline `tests [(input, expected), …]` rows.
    pub tests: Vec<TestRow>,
    pub annotations: Vec<String>,
    pub body: Expr,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct TestRow {
    pub input: Expr,
    pub expected: Expr,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub struct Expr {
    pub kind: ExprKind,
    pub pos: Pos,
}

/// Dropping a tree frees it without recursing once per level. The parser builds
/// left-associative chains (`1 + 1 + …`, `f(1)(1)…`, `r.a.a…`) in a loop, so their depth is
/// bounded only by the input's length; the derived drop glue would recurse that deep and
/// overflow the native stack long after the checker had refused the module.
impl Drop for Expr {
    fn drop(&mut self) {
        let mut pending = Vec::new();
        detach_children(&mut self.kind, &mut pending);
        while let Some(mut child) = pending.pop() {
            // Each child is dropped with its own children already moved out, so its drop
            // glue goes no deeper than this frame.
            detach_children(&mut child.kind, &mut pending);
        }
    }
}

/// Moves the direct sub-expressions of `kind` onto `out`, leaving it a leaf.
fn detach_children(kind: &mut ExprKind, out: &mut Vec<Expr>) {
    match kind {
        ExprKind::Int(..)
        | ExprKind::Float(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Unit
        | ExprKind::Var(_) => return,
        // A shared lambda body belongs to another owner as well; only the last owner frees it.
        ExprKind::Lambda(lambda) if Rc::strong_count(lambda) > 1 || Rc::weak_count(lambda) > 0 => return,
        _ => {}
    }
    match std::mem::replace(kind, ExprKind::Unit) {
        ExprKind::Interp(parts) => out.extend(parts.into_iter().filter_map(|part| match part {
            InterpPart::Expr(expr) => Some(expr),
            InterpPart::Lit(_) => None,
        })),
        ExprKind::Call(callee, args) => {
            out.push(*callee);
            out.extend(args);
        }
        ExprKind::Field(inner, _) | ExprKind::Unary(_, inner) => out.push(*inner),
        ExprKind::Record(fields) => out.extend(fields.into_iter().map(|(_, expr)| expr)),
        ExprKind::RecordUpdate(base, fields) => {
            out.push(*base);
            out.extend(fields.into_iter().map(|(_, expr)| expr));
        }
        ExprKind::Tuple(items) | ExprKind::List(items) => out.extend(items),
        ExprKind::Lambda(lambda) => {
            if let Ok(lambda) = Rc::try_unwrap(lambda) {
                out.push(lambda.body);
            }
        }
        ExprKind::If(cond, then, otherwise) => out.extend([*cond, *then, *otherwise]),
        ExprKind::Match(scrutinee, arms) => {
            out.push(*scrutinee);
            for arm in arms {
                out.extend(arm.guard);
                out.push(arm.body);
            }
        }
        ExprKind::Let { value, body, .. } | ExprKind::Binary(_, value, body) => out.extend([*value, *body]),
        ExprKind::Block(stmts) => out.extend(stmts.into_iter().map(|stmt| match stmt {
            Stmt::Let { value, .. } => value,
            Stmt::Assert(expr) | Stmt::Expr(expr) => expr,
        })),
        ExprKind::Int(..)
        | ExprKind::Float(_)
        | ExprKind::Str(_)
        | ExprKind::Bool(_)
        | ExprKind::Unit
        | ExprKind::Var(_) => {}
    }
}

#[derive(Debug, Clone)]
pub enum ExprKind {
    /// An int literal. The checker sets the flag when the literal's type resolved to `float`
    /// (`jnum(7 / 2)`), so the evaluator computes with the float numeric defaulting gives.
    Int(i64, Cell<bool>),
    Float(f64),
    Str(Rc<str>),
    /// `"a${x}b"`: literal pieces and shown expressions, concatenated.
    Interp(Vec<InterpPart>),
    Bool(bool),
    Unit,
    Var(Name),
    Call(Box<Expr>, Vec<Expr>),
    Field(Box<Expr>, Name),
    Record(Vec<(Name, Expr)>),
    RecordUpdate(Box<Expr>, Vec<(Name, Expr)>),
    Tuple(Vec<Expr>),
    List(Vec<Expr>),
    Lambda(Rc<Lambda>),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    Match(Box<Expr>, Vec<Arm>),
    /// `let p = e in body` (`recursive` for `letrec`).
    Let {
        pat: Pattern,
        value: Box<Expr>,
        body: Box<Expr>,
        recursive: bool,
    },
    Block(Vec<Stmt>),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone)]
pub enum InterpPart {
    Lit(Rc<str>),
    Expr(Expr),
}

#[derive(Debug, Clone)]
pub struct Lambda {
    pub params: Vec<Param>,
    /// `func(x: T) -> R ! {…} { … }` may declare its result and effects.
    pub ret: Option<TypeExpr>,
    pub effects: Option<EffectRow>,
    pub body: Expr,
}

#[derive(Debug, Clone)]
pub enum Stmt {
    /// `let p = e` (`recursive` for `letrec`, whose value may name itself).
    Let {
        pat: Pattern,
        value: Expr,
        pos: Pos,
        recursive: bool,
    },
    /// `assert e`: fails the enclosing test (or call) with an assertion error unless `e` holds.
    Assert(Expr),
    Expr(Expr),
}

#[derive(Debug, Clone)]
pub struct Arm {
    pub pat: Pattern,
    pub guard: Option<Expr>,
    pub body: Expr,
}

#[derive(Debug, Clone)]
pub struct Pattern {
    pub kind: PatKind,
    pub pos: Pos,
}

#[derive(Debug, Clone)]
pub enum PatKind {
    Wildcard,
    Var(Name),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    Bool(bool),
    Unit,
    /// A constructor, with its argument patterns (empty when nullary).
    Ctor(Name, Vec<Pattern>),
    Tuple(Vec<Pattern>),
    /// `[a, b]`, or `[a, ...rest]` when `rest` is set.
    List(Vec<Pattern>, Option<Box<Pattern>>),
    Cons(Box<Pattern>, Box<Pattern>),
    Record {
        fields: Vec<(Name, Pattern)>,
        open: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Not,
    BitNot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Or,
    And,
    BitXor,
    BitAnd,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Shl,
    Shr,
    Cons,
    Append,
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Pow,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::BitXor => "^",
            BinOp::BitAnd => "&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Cons => "::",
            BinOp::Append => "++",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Pow => "**",
        }
    }
}
