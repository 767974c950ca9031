//! Turning a parsed module into a runnable program: the module-path rule (MOD010), import
//! resolution against the native std modules (LDR001, IMP011, IMP012), module-scope
//! collisions (MOD007, MOD015) and the global bindings the evaluator sees.

use crate::ast::*;
use crate::diag::{Diagnostic, Pos};
use crate::parser::parse_module;
use crate::stdlib::{self, Export, StdModule};
use crate::value::{Callable, Value};
use std::collections::HashMap;
use std::rc::Rc;

pub struct Program {
    pub module: Module,
    pub globals: HashMap<Name, Value>,
    /// Constructor name → number of fields, for every constructor in scope.
    pub ctor_arity: HashMap<Name, usize>,
    pub types: HashMap<Name, TypeDecl>,
}

impl Program {
    pub fn func(&self, name: &str) -> Option<&Rc<FuncDecl>> {
        self.module.decls.iter().find_map(|d| match d {
            Decl::Func(f) if &*f.name == name => Some(f),
            _ => None,
        })
    }

    pub fn exported_funcs(&self) -> impl Iterator<Item = &Rc<FuncDecl>> {
        self.module.decls.iter().filter_map(|d| match d {
            Decl::Func(f) if f.exported => Some(f),
            _ => None,
        })
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    /// Downgrade MOD010 to a warning (`--relax-modules`, `AILANG_RELAX_MODULES=1`).
    pub relax_modules: bool,
}

/// The result of loading: a program unless there were errors, plus any warnings.
pub struct Loaded {
    pub program: Option<Program>,
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
}

/// The module name a file path implies: the path without `./` and the `.ail` extension.
pub fn path_module_name(file: &str) -> String {
    let trimmed = file.strip_prefix("./").unwrap_or(file);
    trimmed.strip_suffix(".ail").unwrap_or(trimmed).to_string()
}

pub fn load(source: &str, file: &str, options: LoadOptions) -> Loaded {
    let module = match parse_module(source) {
        Ok(m) => m,
        Err(d) => {
            return Loaded { program: None, errors: vec![d.in_file(file)], warnings: Vec::new() };
        }
    };
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    if let Some((name, _)) = &module.name {
        let path = path_module_name(file);
        if path != *name && !path.ends_with(&format!("/{name}")) {
            let d = Diagnostic::new(
                "MOD010",
                format!(
                    "module '{name}' doesn't match file path '{path}'. Fix: use --relax-modules flag or set AILANG_RELAX_MODULES=1"
                ),
                None,
            );
            if options.relax_modules { warnings.push(d) } else { errors.push(d) }
        }
    }
    let mut defined: HashMap<Name, Pos> = HashMap::new();
    let mut builder = Builder::default();
    builder.add_std(&stdlib::prelude::MODULE);
    // Whole-module imports first, so that selective imports and local names override them.
    for import in module.imports.iter().filter(|i| i.items.is_none()) {
        match (stdlib::module(&import.path), &import.alias) {
            (Some(m), None) => builder.add_std(m),
            // `import std/list as L`: one global `L` holding the module's functions, so that
            // `L.map` is an ordinary field read.
            (Some(m), Some(alias)) => {
                if let Some(first) = defined.insert(alias.clone(), import.pos) {
                    errors.push(Diagnostic::at(
                        "MOD007",
                        format!("duplicate definition of '{alias}' (first defined at line {})", first.line),
                        import.pos,
                    ));
                }
                builder.globals.insert(alias.clone(), qualified(m));
            }
            (None, _) => errors.push(not_found(import)),
        }
    }
    let mut imported: HashMap<Name, (String, Pos)> = HashMap::new();
    for import in &module.imports {
        let Some(items) = &import.items else { continue };
        let Some(std_module) = stdlib::module(&import.path) else {
            errors.push(not_found(import));
            continue;
        };
        for item in items {
            let Some(export) = std_module.export(&item.name) else {
                errors.push(Diagnostic::at(
                    "IMP011",
                    format!("'{}' is not exported by {}", item.name, import.path),
                    item.pos,
                ));
                continue;
            };
            let local = item.local_name().clone();
            if let Some((from, _)) = imported.get(&local)
                && (*from != import.path || item.alias.is_some())
            {
                errors.push(Diagnostic::at(
                    "IMP012",
                    format!("'{local}' is imported twice (from {from} and {})", import.path),
                    item.pos,
                ));
                continue;
            }
            imported.insert(local.clone(), (import.path.clone(), item.pos));
            builder.add_export(local, export);
        }
    }
    let mut define = |name: &Name, pos: Pos, errors: &mut Vec<Diagnostic>| {
        if let Some((from, _)) = imported.get(name) {
            errors.push(Diagnostic::at(
                "MOD015",
                format!("'{name}' is imported from {from} and also defined in this module"),
                pos,
            ));
        } else if let Some(first) = defined.get(name) {
            errors.push(Diagnostic::at(
                "MOD007",
                format!("duplicate definition of '{name}' (first defined at line {})", first.line),
                pos,
            ));
        } else {
            defined.insert(name.clone(), pos);
        }
    };
    let mut types = HashMap::new();
    let mut type_names: HashMap<Name, Pos> = HashMap::new();
    for decl in &module.decls {
        match decl {
            Decl::Type(t) => {
                // Types live in their own namespace: `type W = W(…)` is fine.
                if let Some(first) = type_names.insert(t.name.clone(), t.pos) {
                    errors.push(Diagnostic::at(
                        "MOD007",
                        format!("duplicate definition of type '{}' (first defined at line {})", t.name, first.line),
                        t.pos,
                    ));
                }
                if let TypeBody::Variants(variants) = &t.body {
                    for v in variants {
                        define(&v.name, v.pos, &mut errors);
                        let float_fields: Vec<bool> = v
                            .fields
                            .iter()
                            .map(|f| matches!(f, TypeExpr::Named(n, a) if &**n == "float" && a.is_empty()))
                            .collect();
                        builder.add_ctor(v.name.clone(), &v.name, &float_fields);
                    }
                }
                types.insert(t.name.clone(), t.clone());
            }
            Decl::Func(f) => {
                define(&f.name, f.pos, &mut errors);
                if f.exported && f.name.starts_with('_') {
                    errors.push(Diagnostic::at(
                        "MOD006",
                        format!("cannot export '{}': names starting with '_' are private", f.name),
                        f.pos,
                    ));
                }
                builder.globals.insert(f.name.clone(), Value::Func(Rc::new(Callable::Func(f.clone()))));
            }
            Decl::Let(top) => define(&top.name, top.pos, &mut errors),
            Decl::Test { .. } => {}
        }
    }
    let errors: Vec<Diagnostic> = errors.into_iter().map(|d| d.in_file(file)).collect();
    let warnings = warnings.into_iter().map(|d| d.in_file(file)).collect();
    let program = Program { module, globals: builder.globals, ctor_arity: builder.ctor_arity, types };
    Loaded { program: Some(program), errors, warnings }
}

/// A std module as one record of its functions, for a qualified import.
fn qualified(module: &'static StdModule) -> Value {
    let fields = module
        .export_names()
        .into_iter()
        .filter_map(|name| match module.export(name) {
            Some(Export::Func(f)) => Some((Name::from(name), Value::Func(Rc::new(Callable::Native(f))))),
            _ => None,
        })
        .collect();
    Value::record(fields)
}

fn not_found(import: &Import) -> Diagnostic {
    Diagnostic::at("LDR001", format!("module not found: {}", import.path), import.pos)
}

#[derive(Default)]
struct Builder {
    globals: HashMap<Name, Value>,
    ctor_arity: HashMap<Name, usize>,
}

impl Builder {
    fn add_std(&mut self, module: &'static StdModule) {
        for name in module.export_names() {
            if let Some(export) = module.export(name) {
                self.add_export(name.into(), export);
            }
        }
    }

    fn add_export(&mut self, local: Name, export: Export) {
        match export {
            Export::Func(f) => {
                self.globals.insert(local, Value::Func(Rc::new(Callable::Native(f))));
            }
            // Importing a type brings its constructors along.
            Export::Type(ty) => {
                for c in ty.ctors {
                    self.add_ctor(c.name.into(), c.name, c.fields);
                }
            }
            Export::Ctor(c) => {
                self.add_ctor(local, c.name, c.fields);
            }
        }
    }

    /// Bind constructor `real` under `local` (they differ for `import … (Some as S)`).
    fn add_ctor(&mut self, local: Name, real: &str, float_fields: &[bool]) {
        self.ctor_arity.insert(local.clone(), float_fields.len());
        let value = if float_fields.is_empty() {
            Value::ctor(real, Vec::new())
        } else {
            Value::Func(Rc::new(Callable::Ctor {
                name: real.into(),
                arity: float_fields.len(),
                float_fields: float_fields.into(),
            }))
        };
        self.globals.insert(local, value);
    }
}
