//! The standard library, as native modules. Only `std/*` paths exist.

pub mod array;
pub mod bytes;
pub mod catalog;
pub mod fs;
pub mod io;
pub mod json;
pub mod list;
pub mod math;
pub mod option;
pub mod prelude;
pub mod result;
pub mod string;

use crate::value::{NativeFn, NativeRun, Value};

pub struct StdModule {
    pub path: &'static str,
    pub types: &'static [StdType],
    pub funcs: &'static [NativeFn],
}

pub struct StdType {
    pub name: &'static str,
    pub ctors: &'static [StdCtor],
}

pub struct StdCtor {
    pub name: &'static str,
    /// One flag per field: true where the field is declared `float`.
    pub fields: &'static [bool],
}

/// What a name exported by a std module refers to.
pub enum Export {
    Func(&'static NativeFn),
    Type(&'static StdType),
    Ctor(&'static StdCtor),
}

pub const fn native(name: &'static str, arity: usize, run: NativeRun) -> NativeFn {
    NativeFn { name, arity, run }
}

/// Argument `i`, cloned (natives receive their arguments by value, checked for arity).
pub fn arg(args: &[Value], i: usize) -> Value {
    args.get(i).cloned().unwrap_or(Value::Unit)
}

pub static MODULES: &[&StdModule] = &[
    &json::MODULE,
    &string::MODULE,
    &list::MODULE,
    &option::MODULE,
    &result::MODULE,
    &bytes::MODULE,
    &math::MODULE,
    &io::MODULE,
    &fs::MODULE,
    &array::MODULE,
];

pub fn module(path: &str) -> Option<&'static StdModule> {
    MODULES.iter().copied().find(|m| m.path == path)
}

impl StdModule {
    pub fn export(&'static self, name: &str) -> Option<Export> {
        if let Some(f) = self.funcs.iter().find(|f| f.name == name) {
            return Some(Export::Func(f));
        }
        for ty in self.types {
            if ty.name == name {
                return Some(Export::Type(ty));
            }
            if let Some(c) = ty.ctors.iter().find(|c| c.name == name) {
                return Some(Export::Ctor(c));
            }
        }
        None
    }

    /// Every exported name, for whole-module imports.
    pub fn export_names(&'static self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.funcs.iter().map(|f| f.name).collect();
        for ty in self.types {
            names.push(ty.name);
            names.extend(ty.ctors.iter().map(|c| c.name));
        }
        names
    }
}
