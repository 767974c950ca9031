//! AILANG, the project's own interpreter: lexer, parser, type checker, evaluator, native
//! standard library, the command-line contract (`run`, `test`, `check`) that the capsule and
//! the publisher invoke, and the discovery commands agents use (`builtins`, `examples`,
//! `iface`, `prompt`).
//!
//! Besides the `ailang` binary, two entry points serve in-process callers: [`check_source`]
//! (what `ailang check` reports) and [`run_source`] (what `ailang run` computes).

pub mod argdecode;
pub mod ast;
pub mod check;
pub mod cli;
pub mod diag;
pub mod discover;
pub mod eval;
pub mod float;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub mod fork_server;
pub mod lexer;
pub mod loader;
pub mod parser;
pub mod prepared;
pub mod stack;
pub mod stdlib;
pub mod types;
pub mod value;

pub use diag::{Diagnostic, Pos};
pub use value::Value;

use std::collections::HashSet;

/// Parse, resolve and structurally check a module; the errors `ailang check` would print.
/// `file` is the path used for the module-path rule (MOD010) and in diagnostics.
pub fn check_source(source: &str, file: &str, relax_modules: bool) -> Vec<Diagnostic> {
    let _region = stack::enter(None);
    let loaded = loader::load(source, file, loader::LoadOptions { relax_modules });
    let mut errors = loaded.errors;
    if let Some(program) = &loaded.program {
        errors.extend(check::check_program(program, file));
    }
    errors
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Load(Vec<Diagnostic>),
    #[error("entrypoint '{0}' not found in module")]
    EntryNotFound(String),
    #[error("failed to decode arguments: {0}")]
    Arguments(#[from] argdecode::ArgError),
    #[error("execution failed: {0}")]
    Execution(Diagnostic),
}

/// Run exported `entry` of a module on a JSON argument, without capabilities, and return
/// what `ailang run` would print (a string result raw, anything else in `show` form). The
/// evaluation runs on its own large stack, so deep programs reach the recursion limit.
pub fn run_source(source: &str, file: &str, entry: &str, args_json: &str) -> Result<String, RunError> {
    let (source, file, entry, args_json) =
        (source.to_string(), file.to_string(), entry.to_string(), args_json.to_string());
    stack::run_on_big_stack(move || run_here(&source, &file, &entry, &args_json)).map_err(|e| {
        RunError::Execution(Diagnostic::new("EVA001", format!("cannot set up the evaluator stack: {e}"), None))
    })?
}

fn run_here(source: &str, file: &str, entry: &str, args_json: &str) -> Result<String, RunError> {
    let loaded = loader::load(source, file, loader::LoadOptions { relax_modules: true });
    let mut errors = loaded.errors;
    let Some(program) = loaded.program else {
        return Err(RunError::Load(errors));
    };
    errors.extend(check::check_module(&program, file, check::Options { full: false }).errors);
    if !errors.is_empty() {
        return Err(RunError::Load(errors));
    }
    let func = program
        .exported_funcs()
        .find(|f| &*f.name == entry)
        .or_else(|| program.func(entry))
        .cloned()
        .ok_or_else(|| RunError::EntryNotFound(entry.to_string()))?;
    let param = func.params.first().and_then(|p| p.ty.as_ref());
    let arg = argdecode::decode_argument(args_json, param, &program)?;
    let mut interp = eval::Interp::new(program.globals.clone(), eval::DEFAULT_MAX_DEPTH, HashSet::new());
    interp.bind_top_lets(&program.module).map_err(RunError::Execution)?;
    match interp.call_decl(&func, vec![arg]).map_err(RunError::Execution)? {
        Value::Str(s) => Ok(s.to_string()),
        other => Ok(value::show(&other)),
    }
}
