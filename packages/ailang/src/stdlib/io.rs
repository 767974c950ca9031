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
        native("readLine", 1, |it, _| Ok(Value::str(read_line(it)?.unwrap_or_default()))),
        native("readLineOpt", 1, |it, _| Ok(Value::option(read_line(it)?.map(Value::str)))),
        native("flush", 1, |it, _| {
            require(it, "IO")?;
            std::io::stdout()
                .flush()
                .map_err(|e| Diagnostic::new("EVA001", format!("cannot write to stdout: {e}"), None))?;
            Ok(Value::Unit)
        }),
        native("exit", 1, |it, a| {
            require(it, "IO")?;
            Err(exit_request(as_int(&a[0], "exit")?))
        }),
        native("printErr", 1, |it, a| print_err(it, &a[0], false)),
        native("eprintln", 1, |it, a| print_err(it, &a[0], true)),
    ],
};

/// The code of the diagnostic `exit(n)` unwinds the evaluation with; the command line ends the
/// process with the status it carries, after what was printed.
pub const EXIT: &str = "EXIT";

fn exit_request(status: i64) -> Diagnostic {
    Diagnostic::new(EXIT, status.to_string(), None)
}

/// The status an `exit(n)` asked for (Unix keeps its low byte), if `d` is that request.
pub fn exit_status(d: &Diagnostic) -> Option<i32> {
    (d.code == EXIT).then(|| d.message.parse::<i64>().map_or(1, |n| (n & 0xff) as i32))
}

pub fn require(it: &Interp, cap: &str) -> Result<(), Diagnostic> {
    if it.has_capability(cap) {
        return Ok(());
    }
    Err(Diagnostic::new("EVA004", format!("missing capability: {cap} (grant it with --caps {cap})"), None))
}

pub fn print(it: &mut Interp, v: &Value, newline: bool) -> Result<Value, Diagnostic> {
    write_shown(it, v, newline, std::io::stdout().lock(), "stdout")
}

fn print_err(it: &mut Interp, v: &Value, newline: bool) -> Result<Value, Diagnostic> {
    write_shown(it, v, newline, std::io::stderr().lock(), "stderr")
}

/// `v` as `show` renders it, and a newline when asked, to the standard `stream` `out`.
fn write_shown(
    it: &mut Interp,
    v: &Value,
    newline: bool,
    mut out: impl Write,
    stream: &str,
) -> Result<Value, Diagnostic> {
    require(it, "IO")?;
    let text = show(v);
    let written = if newline { writeln!(out, "{text}") } else { write!(out, "{text}") };
    written.map_err(|e| Diagnostic::new("EVA001", format!("cannot write to {stream}: {e}"), None))?;
    Ok(Value::Unit)
}

/// One line of stdin without its LF or CRLF; `None` at end of input (a last line without a
/// newline is still a line).
fn read_line(it: &mut Interp) -> Result<Option<String>, Diagnostic> {
    require(it, "IO")?;
    let mut line = String::new();
    let read = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Diagnostic::new("EVA001", format!("cannot read from stdin: {e}"), None))?;
    if read == 0 {
        return Ok(None);
    }
    let trimmed = line.strip_suffix('\n').unwrap_or(&line);
    Ok(Some(trimmed.strip_suffix('\r').unwrap_or(trimmed).to_string()))
}
