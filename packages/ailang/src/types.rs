//! Types, substitutions and unification for the Hindley–Milner checker.
//!
//! Type variables live in one table and are bound in place (union-find without path
//! compression). Each variable carries a *level* for let-generalisation and the built-in
//! classes (Num, Eq, Ord) it must satisfy. Records and effect rows share one row shape: a
//! map of labels to types plus an optional tail variable (open) or none (closed); effect
//! labels map to the unit type.

use crate::ast::Name;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::rc::Rc;

pub type TvId = u32;

#[derive(Debug, Clone)]
pub enum Ty {
    Var(TvId),
    /// A named type with arguments: `int`, `string`, `List[a]`, `Option[a]`, user ADTs.
    Con(Name, Rc<[Ty]>),
    /// Tuples; the empty tuple is unit.
    Tuple(Rc<[Ty]>),
    /// Parameters, result and effect row (a `Row`).
    Func(Rc<[Ty]>, Rc<Ty>, Rc<Ty>),
    /// A record over a `Row`.
    Record(Rc<Ty>),
    /// Labels and an optional tail variable; only inside `Record`, `Func` or a row binding.
    Row(Rc<BTreeMap<Name, Ty>>, Option<TvId>),
}

// Children are shared: unification clones types constantly, and a clone is then a few
// reference-count bumps.
/// The types the checker builds over and over, made once per thread: building `int` would
/// otherwise allocate its name and its empty argument list every time.
struct Common {
    int: Ty,
    float: Ty,
    string: Ty,
    bool: Ty,
    unit: Ty,
    closed_row: Ty,
    list: Name,
    no_args: Rc<[Ty]>,
}

thread_local! {
    static COMMON: Common = {
        let no_args: Rc<[Ty]> = Rc::new([]);
        let con = |name: &str| Ty::Con(name.into(), no_args.clone());
        Common {
            int: con("int"),
            float: con("float"),
            string: con("string"),
            bool: con("bool"),
            unit: Ty::Tuple(no_args.clone()),
            closed_row: Ty::Row(Rc::new(BTreeMap::new()), None),
            list: "List".into(),
            no_args,
        }
    };
}

impl Ty {
    pub fn con(name: &str) -> Ty {
        COMMON.with(|c| match name {
            "int" => c.int.clone(),
            "float" => c.float.clone(),
            "string" => c.string.clone(),
            "bool" => c.bool.clone(),
            _ => Ty::Con(name.into(), c.no_args.clone()),
        })
    }
    pub fn con_args(name: Name, args: Vec<Ty>) -> Ty {
        Ty::Con(name, args.into())
    }
    pub fn unit() -> Ty {
        COMMON.with(|c| c.unit.clone())
    }
    pub fn tuple(items: Vec<Ty>) -> Ty {
        Ty::Tuple(items.into())
    }
    pub fn list(item: Ty) -> Ty {
        Ty::Con(COMMON.with(|c| c.list.clone()), Rc::new([item]))
    }
    pub fn func(params: Vec<Ty>, ret: Ty, effects: Ty) -> Ty {
        Ty::Func(params.into(), Rc::new(ret), Rc::new(effects))
    }
    pub fn record(row: Ty) -> Ty {
        Ty::Record(Rc::new(row))
    }
    pub fn row(labels: BTreeMap<Name, Ty>, tail: Option<TvId>) -> Ty {
        Ty::Row(Rc::new(labels), tail)
    }
    pub fn closed_row() -> Ty {
        COMMON.with(|c| c.closed_row.clone())
    }
}

pub const NUM: u8 = 1;
pub const EQ: u8 = 2;
pub const ORD: u8 = 4;

pub fn class_name(class: u8) -> &'static str {
    match class {
        NUM => "Num",
        EQ => "Eq",
        _ => "Ord",
    }
}

#[derive(Debug, Clone)]
struct VarInfo {
    bound: Option<Ty>,
    level: u32,
    classes: u8,
}

/// Why two types could not be made equal.
#[derive(Debug, Clone)]
pub enum UnifyError {
    Mismatch(Ty, Ty),
    Occurs(Ty, Ty),
    /// `label` is in one row and not the other; `has` lists the other's labels. `extra`: the
    /// label is the second (found) row's, which the first (expected, closed) does not allow.
    MissingLabel {
        label: Name,
        has: Vec<Name>,
        effect: bool,
        extra: bool,
    },
    Class {
        class: u8,
        ty: Ty,
    },
}

/// A polymorphic type: `vars` are quantified.
#[derive(Debug, Clone)]
pub struct Scheme {
    pub vars: Vec<TvId>,
    pub ty: Ty,
}

impl Scheme {
    pub fn mono(ty: Ty) -> Scheme {
        Scheme { vars: Vec::new(), ty }
    }
}

#[derive(Default)]
pub struct Subst {
    vars: Vec<VarInfo>,
    pub level: u32,
}

impl Subst {
    pub fn with_capacity(vars: usize) -> Subst {
        Subst { vars: Vec::with_capacity(vars), level: 0 }
    }

    pub fn fresh(&mut self) -> Ty {
        Ty::Var(self.fresh_id(0))
    }

    pub fn fresh_with(&mut self, classes: u8) -> Ty {
        Ty::Var(self.fresh_id(classes))
    }

    pub fn fresh_id(&mut self, classes: u8) -> TvId {
        let id = self.vars.len() as TvId;
        self.vars.push(VarInfo { bound: None, level: self.level, classes });
        id
    }

    /// An open row with no labels yet.
    pub fn open_row(&mut self) -> Ty {
        let tail = self.fresh_id(0);
        Ty::row(BTreeMap::new(), Some(tail))
    }

    pub fn classes(&self, v: TvId) -> u8 {
        self.vars[v as usize].classes
    }

    /// Follow bindings at the top of a type, borrowing.
    pub fn shallow_ref<'a>(&'a self, mut ty: &'a Ty) -> &'a Ty {
        while let Ty::Var(v) = ty {
            match &self.vars[*v as usize].bound {
                Some(t) => ty = t,
                None => break,
            }
        }
        ty
    }

    /// Visit the labels of a row (following chained tails) and return its unbound tail.
    fn row_walk<'a>(&'a self, ty: &'a Ty, visit: &mut dyn FnMut(&'a Name, &'a Ty)) -> Option<TvId> {
        let mut cur = self.shallow_ref(ty);
        loop {
            match cur {
                Ty::Row(fields, tail) => {
                    for (k, v) in fields.iter() {
                        visit(k, v);
                    }
                    match tail {
                        None => return None,
                        Some(t) => match &self.vars[*t as usize].bound {
                            Some(next) => cur = self.shallow_ref(next),
                            None => return Some(*t),
                        },
                    }
                }
                Ty::Var(v) => return Some(*v),
                _ => return None,
            }
        }
    }

    /// Follow bindings at the top of a type.
    pub fn shallow(&self, ty: &Ty) -> Ty {
        let mut ty = ty.clone();
        while let Ty::Var(v) = ty {
            match &self.vars[v as usize].bound {
                Some(t) => ty = t.clone(),
                None => break,
            }
        }
        ty
    }

    /// A row's labels and its unbound tail, with chained tail bindings merged.
    pub fn row(&self, ty: &Ty) -> (BTreeMap<Name, Ty>, Option<TvId>) {
        let mut labels = BTreeMap::new();
        let mut cur = self.shallow(ty);
        loop {
            match cur {
                Ty::Row(fields, tail) => {
                    for (k, v) in fields.iter() {
                        labels.entry(k.clone()).or_insert_with(|| v.clone());
                    }
                    match tail {
                        None => return (labels, None),
                        Some(t) => match &self.vars[t as usize].bound {
                            Some(next) => cur = next.clone(),
                            None => return (labels, Some(t)),
                        },
                    }
                }
                Ty::Var(v) => return (labels, Some(v)),
                _ => return (labels, None),
            }
        }
    }

    /// The type with every bound variable replaced, for printing and comparison.
    pub fn resolve(&self, ty: &Ty) -> Ty {
        match self.shallow(ty) {
            Ty::Var(v) => Ty::Var(v),
            Ty::Con(n, args) => Ty::con_args(n, args.iter().map(|a| self.resolve(a)).collect()),
            Ty::Tuple(items) => Ty::tuple(items.iter().map(|a| self.resolve(a)).collect()),
            Ty::Func(ps, r, e) => {
                Ty::func(ps.iter().map(|a| self.resolve(a)).collect(), self.resolve(&r), self.resolve(&e))
            }
            Ty::Record(row) => Ty::record(self.resolve(&row)),
            row @ Ty::Row(..) => {
                let (labels, tail) = self.row(&row);
                Ty::row(labels.into_iter().map(|(k, v)| (k, self.resolve(&v))).collect(), tail)
            }
        }
    }

    fn occurs(&self, v: TvId, ty: &Ty) -> bool {
        match self.shallow_ref(ty) {
            Ty::Var(w) => v == *w,
            Ty::Con(_, args) | Ty::Tuple(args) => args.iter().any(|a| self.occurs(v, a)),
            Ty::Func(ps, r, e) => ps.iter().any(|a| self.occurs(v, a)) || self.occurs(v, r) || self.occurs(v, e),
            Ty::Record(row) => self.occurs(v, row),
            row @ Ty::Row(..) => {
                let mut found = false;
                let tail = self.row_walk(row, &mut |_, t| found = found || self.occurs(v, t));
                found || tail == Some(v)
            }
        }
    }

    /// Lower the level of every free variable in `ty` to at most `level`.
    fn adjust_levels(&mut self, ty: &Ty, level: u32) {
        let mut free = Vec::new();
        self.collect_free(ty, &mut |v, info| {
            if info.level > level {
                free.push(v)
            }
        });
        for v in free {
            self.vars[v as usize].level = level;
        }
    }

    fn bind(&mut self, v: TvId, ty: &Ty) -> Result<(), UnifyError> {
        if let Ty::Var(w) = self.shallow(ty) {
            if w == v {
                return Ok(());
            }
            let (vi, wi) = (self.vars[v as usize].clone(), self.vars[w as usize].clone());
            let info = &mut self.vars[w as usize];
            info.classes |= vi.classes;
            info.level = wi.level.min(vi.level);
            self.vars[v as usize].bound = Some(Ty::Var(w));
            return Ok(());
        }
        if self.occurs(v, ty) {
            return Err(UnifyError::Occurs(Ty::Var(v), ty.clone()));
        }
        let VarInfo { level, classes, .. } = self.vars[v as usize].clone();
        self.adjust_levels(ty, level);
        self.vars[v as usize].bound = Some(ty.clone());
        for class in [NUM, EQ, ORD] {
            if classes & class != 0 {
                self.require(class, ty)?;
            }
        }
        Ok(())
    }

    /// Require `ty` to be an instance of `class` (Num, Eq or Ord).
    pub fn require(&mut self, class: u8, ty: &Ty) -> Result<(), UnifyError> {
        let fail = |ty: &Ty| Err(UnifyError::Class { class, ty: ty.clone() });
        let t = self.shallow(ty);
        match &t {
            Ty::Var(v) => {
                self.vars[*v as usize].classes |= class;
                Ok(())
            }
            Ty::Con(n, args) => match (&**n, class) {
                ("int" | "float", _) => Ok(()),
                (_, NUM) => fail(&t),
                ("string" | "bool", _) => Ok(()),
                ("List", _) => args.iter().try_for_each(|a| self.require(class, a)),
                (_, ORD) => fail(&t),
                // Every ADT compares structurally when its arguments do.
                _ => args.iter().try_for_each(|a| self.require(class, a)),
            },
            Ty::Tuple(items) if class != NUM => items.iter().try_for_each(|a| self.require(class, a)),
            Ty::Record(row) if class == EQ => {
                let (labels, _) = self.row(row);
                labels.values().try_for_each(|a| self.require(class, a))
            }
            _ => fail(&t),
        }
    }

    pub fn unify(&mut self, a: &Ty, b: &Ty) -> Result<(), UnifyError> {
        // The commonest agreements (a variable with itself, `int` with `int`) need no copies.
        match (self.shallow_ref(a), self.shallow_ref(b)) {
            (Ty::Var(v), Ty::Var(w)) if v == w => return Ok(()),
            (Ty::Con(n, xs), Ty::Con(m, ys)) if xs.is_empty() && ys.is_empty() && n == m => return Ok(()),
            _ => {}
        }
        let (a, b) = (self.shallow(a), self.shallow(b));
        match (&a, &b) {
            (Ty::Var(v), _) => self.bind(*v, &b),
            (_, Ty::Var(v)) => self.bind(*v, &a),
            (Ty::Con(n, xs), Ty::Con(m, ys)) if n == m && xs.len() == ys.len() => {
                xs.iter().zip(ys.iter()).try_for_each(|(x, y)| self.unify(x, y))
            }
            (Ty::Tuple(xs), Ty::Tuple(ys)) if xs.len() == ys.len() => {
                xs.iter().zip(ys.iter()).try_for_each(|(x, y)| self.unify(x, y))
            }
            (Ty::Func(ps, r, e), Ty::Func(qs, s, f)) if ps.len() == qs.len() => {
                for (p, q) in ps.iter().zip(qs.iter()) {
                    self.unify(p, q)?;
                }
                self.unify(r, s)?;
                self.unify_rows(e, f, true)
            }
            (Ty::Record(r), Ty::Record(s)) => self.unify_rows(r, s, false),
            (Ty::Row(..), Ty::Row(..)) => self.unify_rows(&a, &b, false),
            _ => Err(UnifyError::Mismatch(a.clone(), b.clone())),
        }
    }

    pub fn unify_rows(&mut self, a: &Ty, b: &Ty, effect: bool) -> Result<(), UnifyError> {
        // Closed empty rows (every pure function's effects) and a row met with itself agree
        // without merging label maps.
        if let (Ty::Row(x, tx), Ty::Row(y, ty)) = (self.shallow_ref(a), self.shallow_ref(b))
            && tx == ty
            && (tx.is_none() && x.is_empty() && y.is_empty() || Rc::ptr_eq(x, y))
        {
            return Ok(());
        }
        let (la, ta) = self.row(a);
        let (lb, tb) = self.row(b);
        for (k, v) in &la {
            if let Some(w) = lb.get(k) {
                self.unify(v, w)?;
            }
        }
        let only_a: BTreeMap<Name, Ty> =
            la.iter().filter(|(k, _)| !lb.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        let only_b: BTreeMap<Name, Ty> =
            lb.iter().filter(|(k, _)| !la.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        let missing = |label: &Name, has: &BTreeMap<Name, Ty>, extra: bool| UnifyError::MissingLabel {
            label: label.clone(),
            has: has.keys().cloned().collect(),
            effect,
            extra,
        };
        match (ta, tb) {
            (Some(x), Some(y)) if x == y => match (only_a.keys().next(), only_b.keys().next()) {
                (Some(k), _) => Err(missing(k, &lb, false)),
                (_, Some(k)) => Err(missing(k, &la, true)),
                _ => Ok(()),
            },
            (None, None) => match (only_a.keys().next(), only_b.keys().next()) {
                (Some(k), _) => Err(missing(k, &lb, false)),
                (_, Some(k)) => Err(missing(k, &la, true)),
                _ => Ok(()),
            },
            (Some(x), None) => match only_a.keys().next() {
                Some(k) => Err(missing(k, &lb, false)),
                None => self.bind(x, &Ty::row(only_b, None)),
            },
            (None, Some(y)) => match only_b.keys().next() {
                Some(k) => Err(missing(k, &la, true)),
                None => self.bind(y, &Ty::row(only_a, None)),
            },
            (Some(x), Some(y)) => {
                let level = self.vars[x as usize].level.min(self.vars[y as usize].level);
                let saved = self.level;
                self.level = level;
                let tail = self.fresh_id(0);
                self.level = saved;
                self.bind(x, &Ty::row(only_b, Some(tail)))?;
                self.bind(y, &Ty::row(only_a, Some(tail)))
            }
        }
    }

    /// Quantify the variables of `ty` created at a deeper level than the current one.
    pub fn generalize(&self, ty: &Ty) -> Scheme {
        let mut vars = Vec::new();
        self.collect_free(ty, &mut |v, info: &VarInfo| {
            if info.level > self.level && !vars.contains(&v) {
                vars.push(v);
            }
        });
        Scheme { vars, ty: ty.clone() }
    }

    /// Quantify every free variable of `ty` (signatures of declared functions).
    pub fn generalize_all(&self, ty: &Ty) -> Scheme {
        let mut vars = Vec::new();
        self.collect_free(ty, &mut |v, _| {
            if !vars.contains(&v) {
                vars.push(v);
            }
        });
        Scheme { vars, ty: ty.clone() }
    }

    fn collect_free(&self, ty: &Ty, f: &mut dyn FnMut(TvId, &VarInfo)) {
        match self.shallow_ref(ty) {
            Ty::Var(v) => f(*v, &self.vars[*v as usize]),
            Ty::Con(_, args) | Ty::Tuple(args) => args.iter().for_each(|a| self.collect_free(a, f)),
            Ty::Func(ps, r, e) => {
                ps.iter().for_each(|a| self.collect_free(a, f));
                self.collect_free(r, f);
                self.collect_free(e, f);
            }
            Ty::Record(row) => self.collect_free(row, f),
            row @ Ty::Row(..) => {
                let mut labels = Vec::new();
                let tail = self.row_walk(row, &mut |_, t| labels.push(t));
                labels.into_iter().for_each(|t| self.collect_free(t, f));
                if let Some(t) = tail {
                    f(t, &self.vars[t as usize]);
                }
            }
        }
    }

    pub fn instantiate(&mut self, scheme: &Scheme) -> Ty {
        if scheme.vars.is_empty() {
            return scheme.ty.clone();
        }
        // Schemes quantify a handful of variables: a list beats hashing.
        let map: Vec<(TvId, TvId)> = scheme
            .vars
            .iter()
            .map(|v| {
                let classes = self.vars[*v as usize].classes;
                (*v, self.fresh_id(classes))
            })
            .collect();
        self.copy(&scheme.ty, &map)
    }

    fn copy(&self, ty: &Ty, map: &[(TvId, TvId)]) -> Ty {
        self.rename(ty, map).unwrap_or_else(|| ty.clone())
    }

    /// `ty` with the variables of `map` renamed and bound variables replaced by copies of
    /// their bindings; None where that changes nothing, so unchanged parts (`int`, a closed
    /// row) are shared rather than rebuilt for every instantiation.
    fn rename(&self, ty: &Ty, map: &[(TvId, TvId)]) -> Option<Ty> {
        let renamed = |v: TvId| map.iter().find(|(from, _)| *from == v).map(|(_, to)| *to);
        match ty {
            Ty::Var(v) => match &self.vars[*v as usize].bound {
                Some(t) => Some(self.copy(t, map)),
                None => renamed(*v).map(Ty::Var),
            },
            Ty::Con(n, args) => self.rename_all(args, map).map(|args| Ty::Con(n.clone(), args)),
            Ty::Tuple(items) => self.rename_all(items, map).map(Ty::Tuple),
            Ty::Func(ps, r, e) => {
                let (new_ps, new_r, new_e) = (self.rename_all(ps, map), self.rename(r, map), self.rename(e, map));
                if new_ps.is_none() && new_r.is_none() && new_e.is_none() {
                    return None;
                }
                Some(Ty::Func(
                    new_ps.unwrap_or_else(|| ps.clone()),
                    new_r.map_or_else(|| r.clone(), Rc::new),
                    new_e.map_or_else(|| e.clone(), Rc::new),
                ))
            }
            Ty::Record(row) => self.rename(row, map).map(Ty::record),
            Ty::Row(fields, tail) if tail.is_none_or(|t| self.vars[t as usize].bound.is_none()) => {
                let new_tail = tail.and_then(renamed);
                let mut changed = fields.iter().filter_map(|(k, t)| Some((k, self.rename(t, map)?))).peekable();
                if changed.peek().is_none() && new_tail.is_none() {
                    return None;
                }
                let mut labels: BTreeMap<Name, Ty> = changed.map(|(k, t)| (k.clone(), t)).collect();
                for (k, t) in fields.iter() {
                    labels.entry(k.clone()).or_insert_with(|| t.clone());
                }
                Some(Ty::row(labels, new_tail.or(*tail)))
            }
            // A row continued through a bound tail: merge the chain, as `row` does.
            row @ Ty::Row(..) => {
                let mut labels = BTreeMap::new();
                let tail = self.row_walk(row, &mut |k, t| {
                    labels.entry(k.clone()).or_insert_with(|| self.copy(t, map));
                });
                Some(Ty::row(labels, tail.map(|t| renamed(t).unwrap_or(t))))
            }
        }
    }

    fn rename_all(&self, items: &Rc<[Ty]>, map: &[(TvId, TvId)]) -> Option<Rc<[Ty]>> {
        let mut out: Option<Vec<Ty>> = None;
        for (i, item) in items.iter().enumerate() {
            match (self.rename(item, map), &mut out) {
                (Some(new), Some(out)) => out.push(new),
                (Some(new), None) => {
                    let mut fresh = Vec::with_capacity(items.len());
                    fresh.extend_from_slice(&items[..i]);
                    fresh.push(new);
                    out = Some(fresh);
                }
                (None, Some(out)) => out.push(item.clone()),
                (None, None) => {}
            }
        }
        out.map(Rc::from)
    }

    /// Default every unbound `Num` variable in `ty` to `int` (the reference's defaulting).
    pub fn default_numbers(&mut self, ty: &Ty) {
        let mut pending = Vec::new();
        self.collect_free(ty, &mut |v, info| {
            if info.classes & NUM != 0 {
                pending.push(v);
            }
        });
        for v in pending {
            if self.vars[v as usize].bound.is_none() {
                self.vars[v as usize].bound = Some(Ty::con("int"));
            }
        }
    }
}

/// Prints types for diagnostics, naming variables `a`, `b`, … in order of appearance.
pub struct Printer<'s> {
    subst: &'s Subst,
    names: HashMap<TvId, String>,
}

impl<'s> Printer<'s> {
    pub fn new(subst: &'s Subst) -> Self {
        Printer { subst, names: HashMap::new() }
    }

    fn var(&mut self, v: TvId) -> String {
        let next = self.names.len();
        self.names
            .entry(v)
            .or_insert_with(|| {
                let letter = (b'a' + (next % 26) as u8) as char;
                if next < 26 { letter.to_string() } else { format!("{letter}{}", next / 26) }
            })
            .clone()
    }

    pub fn show(&mut self, ty: &Ty) -> String {
        let ty = self.subst.resolve(ty);
        let mut out = String::new();
        self.write(&ty, &mut out);
        out
    }

    fn write(&mut self, ty: &Ty, out: &mut String) {
        match ty {
            Ty::Var(v) => {
                let name = self.var(*v);
                out.push_str(&name);
            }
            Ty::Con(n, args) if &**n == "List" && args.len() == 1 => {
                out.push('[');
                self.write(&args[0], out);
                out.push(']');
            }
            Ty::Con(n, args) => {
                out.push_str(n);
                if !args.is_empty() {
                    out.push('[');
                    self.list(args, out);
                    out.push(']');
                }
            }
            Ty::Tuple(items) => {
                out.push('(');
                self.list(items, out);
                out.push(')');
            }
            Ty::Func(ps, r, e) => {
                out.push('(');
                self.list(ps, out);
                out.push_str(") -> ");
                self.write(r, out);
                if let Ty::Row(labels, _) = &**e
                    && !labels.is_empty()
                {
                    let _ =
                        write!(out, " ! {{{}}}", labels.keys().map(|k| k.to_string()).collect::<Vec<_>>().join(", "));
                }
            }
            Ty::Record(row) => {
                out.push('{');
                if let Ty::Row(labels, tail) = &**row {
                    let mut first = true;
                    for (k, v) in labels.iter() {
                        if !first {
                            out.push_str(", ");
                        }
                        first = false;
                        out.push_str(k);
                        out.push_str(": ");
                        self.write(v, out);
                    }
                    if tail.is_some() {
                        out.push_str(if first { "..." } else { ", ..." });
                    }
                }
                out.push('}');
            }
            Ty::Row(labels, _) => {
                out.push_str(&labels.keys().map(|k| k.to_string()).collect::<Vec<_>>().join(", "));
            }
        }
    }

    fn list(&mut self, items: &[Ty], out: &mut String) {
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            self.write(item, out);
        }
    }
}
