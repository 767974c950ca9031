//! std/io: printing and reading lines. Every function needs the `IO` capability.

use super::{StdModule, native};
use crate::diag::Diagnostic;
use crate::eval::Interp;
use crate::value::*;
use std::io::{BufRead, Write};

pub static MODULE: StdModule = StdModule {
    path: "std/io",
    types: &[],
    funcs: &[
        native("print", 1, |it, a| print(it, &a[0], false)),
        native("println", 1, |it, a| print(it, &a[0], true)),
        native("readLine", 1, |it, _| read_line(it)),
    ],
};

pub fn require(it: &Interp, cap: &str) -> Result<(), Diagnostic> {
    if it.has_capability(cap) {
        return Ok(());
    }
    Err(Diagnostic::new("EVA004", format!("missing capability: {cap} (grant it with --caps {cap})"), None))
}

pub fn print(it: &mut Interp, v: &Value, newline: bool) -> Result<Value, Diagnostic> {
    require(it, "IO")?;
    let mut out = std::io::stdout().lock();
    let text = show(v);
    let written = if newline { writeln!(out, "{text}") } else { write!(out, "{text}") };
    written.map_err(|e| Diagnostic::new("EVA001", format!("cannot write to stdout: {e}"), None))?;
    Ok(Value::Unit)
}

fn read_line(it: &mut Interp) -> Result<Value, Diagnostic> {
    require(it, "IO")?;
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Diagnostic::new("EVA001", format!("cannot read from stdin: {e}"), None))?;
    let trimmed = line.strip_suffix('\n').unwrap_or(&line);
    Ok(Value::str(trimmed.strip_suffix('\r').unwrap_or(trimmed)))
}
