//! The command-line contract: `run`, `test`, `check`, `--version`.
//!
//! Flags follow Go's `flag` package, as the reference binary does: `-f` or `--f`, values as
//! `--f v` or `--f=v`, and parsing stops at the first positional argument (the file).
//! Exit codes: 0 success, 1 any compile/run/entry/argument error, 2 bad flags or a bad
//! argument source.

use crate::argdecode::decode_argument;
use crate::ast::{Decl, FuncDecl, TypeExpr};
use crate::check::{Options, Report, check_module};
use crate::diag::Diagnostic;
use crate::eval::{DEFAULT_MAX_DEPTH, Interp};
use crate::loader::{LoadOptions, Program, load};
use crate::stdlib::json::encode_string;
use crate::value::{Value, equal, show};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::rc::Rc;

pub const RELEASE: &str = concat!("ailang-rs ", env!("CARGO_PKG_VERSION"), " (AILANG v0.41 compatible)");

const USAGE: &str = "\
Usage:
  ailang run [flags] <file.ail> [program args...]
  ailang test [--relax-modules] <file.ail>
  ailang check [--json] [--quiet] [--relax-modules] <file.ail|dir>
  ailang builtins list|show <name> [--json]
  ailang examples list|search <words>|show <name> [--json] [--examples-dir DIR]
  ailang iface <std/module|file.ail> [--json]
  ailang prompt [--json]
  ailang fork-server
  ailang --version

Commands:
  run       type-check the module, call its exported entry function and print the result
  test      run every inline `tests [...]` row and `test \"name\" = e` declaration
  check     parse, resolve and type-check (with effects); never runs code
  builtins  every std function with its module, signature, effect and description
  examples  the examples corpus (AILANG_EXAMPLES or --examples-dir; default: bundled)
  iface     the types and functions a std module or a source file exports
  prompt    a concise guide to writing a transition
  fork-server  fork a fresh run per request from a host on the socket at stdin
               (for hosts that run many programs; see src/fork_server.rs)

Flags for run (all flags go before the file):
  --entry NAME               exported function to call (default main)
  --args-json JSON           the entry's argument as JSON (default null); '-' reads stdin
  --args-file PATH           read the argument JSON from a file
  --caps LIST                comma-separated capabilities to grant: IO (std/io), FS (std/fs,
                             confined to AILANG_FS_SANDBOX or the current directory); default none
  --quiet                    only program output on stdout
  --no-print                 do not print the result (exit code only)
  --max-recursion-depth N    evaluator recursion limit (default 10000)
  --relax-modules            report a module/path mismatch (MOD010) as a warning
                             (also AILANG_RELAX_MODULES=1)
  --verify-contracts         accepted; contracts are parsed but not evaluated

Exit codes: 0 success; 1 compile, run, entry or argument error; 2 bad flags or argument source.
";

/// Streams the commands write to; the binary passes stdout and stderr.
pub struct Io<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
    /// Reads stdin for `--args-json -`.
    pub stdin: &'a mut dyn Read,
    /// `AILANG_RELAX_MODULES` is set to 1 (or true).
    pub relax_env: bool,
    /// `AILANG_EXAMPLES`: the examples directory when `--examples-dir` is not given.
    pub examples_env: Option<String>,
    /// The process exits as soon as the command returns: large structures (a checked
    /// module's syntax tree) are left for the exit to reclaim instead of freed node by node.
    pub exiting: bool,
}

/// Run the CLI on `args` (without the program name) and return the exit code.
pub fn main(args: &[String], io: &mut Io<'_>) -> i32 {
    let Some(command) = args.first() else {
        let _ = write!(io.err, "{USAGE}");
        return 2;
    };
    let rest = &args[1..];
    match command.as_str() {
        "--version" | "-version" | "version" => {
            let _ = writeln!(io.out, "{RELEASE}");
            0
        }
        "--help" | "-help" | "-h" | "help" => {
            let _ = write!(io.out, "{USAGE}");
            0
        }
        "run" => run_command(rest, io),
        "test" => test_command(rest, io),
        "check" => check_command(rest, io),
        "builtins" => crate::discover::builtins_command(rest, io),
        "examples" => crate::discover::examples_command(rest, io, io.examples_env.clone()),
        "iface" => crate::discover::iface_command(rest, io, io.relax_env),
        "prompt" => crate::discover::prompt_command(rest, io),
        other => {
            let _ = writeln!(io.err, "Error: unknown command '{other}'\n\n{USAGE}");
            2
        }
    }
}

#[derive(Default)]
struct Flags {
    values: Vec<(String, String)>,
    positional: Vec<String>,
}

impl Flags {
    fn get(&self, name: &str) -> Option<&str> {
        self.values.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    fn is_set(&self, name: &str) -> bool {
        matches!(self.get(name), Some(v) if v != "false")
    }
}

enum FlagError {
    Help,
    Bad(String),
}

/// Go-`flag`-style parsing against the known boolean and valued flags.
fn parse_flags(args: &[String], bools: &[&str], valued: &[&str]) -> Result<Flags, FlagError> {
    let mut flags = Flags::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if arg == "--" {
            flags.positional.extend(args[i + 1..].iter().cloned());
            break;
        }
        let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')).filter(|b| !b.is_empty()) else {
            flags.positional.extend(args[i..].iter().cloned());
            break;
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        if name == "help" || name == "h" {
            return Err(FlagError::Help);
        }
        if bools.contains(&name) {
            let value = inline.unwrap_or_else(|| "true".into());
            if value != "true" && value != "false" {
                return Err(FlagError::Bad(format!("invalid boolean value {value:?} for -{name}")));
            }
            flags.values.push((name.to_string(), value));
        } else if valued.contains(&name) {
            let value = match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    args.get(i).cloned().ok_or_else(|| FlagError::Bad(format!("flag needs an argument: -{name}")))?
                }
            };
            flags.values.push((name.to_string(), value));
        } else {
            return Err(FlagError::Bad(format!("flag provided but not defined: -{name}")));
        }
        i += 1;
    }
    Ok(flags)
}

/// The flags of a command that takes a file, and the file (its first positional argument); or
/// the exit code once usage or the error has been written.
fn file_flags_or_exit(
    args: &[String],
    bools: &[&str],
    valued: &[&str],
    io: &mut Io<'_>,
) -> Result<(Flags, String), i32> {
    let flags = match parse_flags(args, bools, valued) {
        Ok(f) => f,
        Err(FlagError::Help) => {
            let _ = write!(io.out, "{USAGE}");
            return Err(0);
        }
        Err(FlagError::Bad(message)) => {
            let _ = writeln!(io.err, "Error: {message}\n\n{USAGE}");
            return Err(2);
        }
    };
    let Some(file) = flags.positional.first().cloned() else {
        let _ = writeln!(io.err, "Error: no file given\n\n{USAGE}");
        return Err(2);
    };
    Ok((flags, file))
}

fn read_source(file: &str, io: &mut Io<'_>) -> Result<String, i32> {
    std::fs::read_to_string(file).map_err(|e| {
        let _ = writeln!(io.err, "Error: cannot read file '{file}': {e}");
        1
    })
}

/// Load and structurally check a file, printing every error; `None` when it failed.
/// `full` also checks test rows and contracts (`test`); `run` checks what it evaluates.
fn load_checked(file: &str, source: &str, relax: bool, quiet: bool, full: bool, io: &mut Io<'_>) -> Option<Program> {
    // A run forked from the fork server may find its program checked already.
    let prepared = if full { None } else { crate::prepared::take(file, source, relax) };
    let (program, warnings, errors) = match prepared {
        Some((program, warnings)) => (Some(program), warnings, Vec::new()),
        None => {
            let loaded = load(source, file, LoadOptions { relax_modules: relax });
            let mut errors = loaded.errors;
            if let Some(program) = &loaded.program {
                errors.extend(check_module(program, file, Options { full }).errors);
            }
            (loaded.program, loaded.warnings, errors)
        }
    };
    if !quiet {
        for w in &warnings {
            let _ = writeln!(io.err, "Warning: {w}");
        }
    }
    if !errors.is_empty() {
        for e in &errors {
            let _ = writeln!(io.err, "Error: {e}");
        }
        return None;
    }
    program
}

fn interp_for(program: &Program, max_depth: usize, caps: HashSet<String>) -> Interp {
    Interp::new(program.globals.clone(), max_depth, caps)
}

fn run_command(args: &[String], io: &mut Io<'_>) -> i32 {
    let bools = ["quiet", "relax-modules", "print", "no-print", "verify-contracts"];
    let valued = ["entry", "args-json", "args-file", "caps", "max-recursion-depth"];
    let (flags, file) = match file_flags_or_exit(args, &bools, &valued, io) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    let quiet = flags.is_set("quiet");
    let relax = flags.is_set("relax-modules") || io.relax_env;
    let entry_name = flags.get("entry").unwrap_or("main").to_string();
    let max_depth = match flags.get("max-recursion-depth").map(str::parse::<usize>) {
        None => DEFAULT_MAX_DEPTH,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            let _ = writeln!(io.err, "Error: invalid value for -max-recursion-depth");
            return 2;
        }
    };
    let caps: HashSet<String> = match flags.get("caps") {
        Some("auto") => {
            ["IO", "FS", "Net", "Env", "Process", "Clock", "AI", "Rand"].iter().map(|s| s.to_string()).collect()
        }
        Some(list) => list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect(),
        None => HashSet::new(),
    };
    // The argument source is settled before anything else: its failures exit 2.
    let argument_given = flags.get("args-json").is_some() || flags.get("args-file").is_some();
    let argument = match (flags.get("args-json"), flags.get("args-file")) {
        (Some(_), Some(_)) => {
            let _ = writeln!(io.err, "Error: --args-json and --args-file cannot both be given");
            return 2;
        }
        (None, Some(path)) => match std::fs::read(path) {
            Ok(bytes) => match clean_argument(bytes) {
                Some(text) => text,
                None => {
                    let _ = writeln!(io.err, "Error: args file '{path}' is empty or not UTF-8");
                    return 2;
                }
            },
            Err(e) => {
                let _ = writeln!(io.err, "Error: cannot read args file '{path}': {e}");
                return 2;
            }
        },
        (Some("-"), None) => {
            let mut bytes = Vec::new();
            if let Err(e) = io.stdin.read_to_end(&mut bytes) {
                let _ = writeln!(io.err, "Error: cannot read arguments from stdin: {e}");
                return 2;
            }
            match clean_argument(bytes) {
                Some(text) => text,
                None => {
                    let _ = writeln!(io.err, "Error: arguments on stdin are empty or not UTF-8");
                    return 2;
                }
            }
        }
        (Some(json), None) => {
            if json.trim().is_empty() {
                let _ = writeln!(io.err, "Error: --args-json is empty");
                return 2;
            }
            json.to_string()
        }
        (None, None) => "null".to_string(),
    };
    let source = match read_source(&file, io) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let Some(program) = load_checked(&file, &source, relax, quiet, false, io) else {
        return 1;
    };
    let mut program = Held::new(program, io.exiting);
    let entry = match select_entry(&program, &entry_name) {
        Ok(Selected::Named(f)) => f,
        Ok(Selected::Auto(f)) => {
            if argument_given {
                let _ =
                    writeln!(io.err, "Error: entrypoint '{}' takes no arguments, but --args-json was provided", f.name);
                return 1;
            }
            f
        }
        Err(message) => {
            let _ = writeln!(io.err, "Error: {message}");
            return 1;
        }
    };
    if entry.params.len() > 1 {
        let _ = writeln!(
            io.err,
            "Error: entrypoint '{}' takes {} parameters, but run supports 0 or 1",
            entry.name,
            entry.params.len()
        );
        return 1;
    }
    let param_ty: Option<&TypeExpr> = entry.params.first().and_then(|p| p.ty.as_ref());
    let arg = match decode_argument(&argument, param_ty, &program) {
        Ok(v) => v,
        Err(e) => {
            let _ = writeln!(io.err, "Error: failed to decode arguments: {e}");
            return 1;
        }
    };
    // The run evaluates once, so its globals move instead of being copied: a copy would
    // write to every value's count, and so copy each page a forked run shares with its server.
    let globals = std::mem::take(&mut program.globals);
    let mut interp = Held::new(Interp::new(globals, max_depth, caps), io.exiting);
    let result = match interp.bind_top_lets(&program.module).and_then(|()| interp.call_decl(&entry, vec![arg])) {
        Ok(v) => v,
        Err(e) => {
            if let Some(status) = crate::stdlib::io::exit_status(&e) {
                let _ = io.out.flush();
                return status;
            }
            let _ = writeln!(io.err, "Error: execution failed: {}", e.in_file(&file));
            return 1;
        }
    };
    let print = !flags.is_set("no-print") && flags.get("print") != Some("false");
    if print && !matches!(result, Value::Unit) {
        let text = match &result {
            Value::Str(s) => s.to_string(),
            other => show(other),
        };
        let _ = writeln!(io.out, "{text}");
    }
    let _ = io.out.flush();
    0
}

/// File and stdin arguments lose a UTF-8 BOM and trailing whitespace; empty is refused.
fn clean_argument(bytes: Vec<u8>) -> Option<String> {
    let text = String::from_utf8(bytes).ok()?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text).trim_end().to_string();
    if text.is_empty() { None } else { Some(text) }
}

enum Selected {
    Named(Rc<FuncDecl>),
    /// `--entry main` was asked for, absent, and one zero-argument export stood in.
    Auto(Rc<FuncDecl>),
}

fn takes_no_arguments(f: &FuncDecl) -> bool {
    f.params.len() == 1 && f.params[0].ty == Some(TypeExpr::Unit) && &*f.params[0].name == "_"
}

fn select_entry(program: &Program, name: &str) -> Result<Selected, String> {
    // The reference runs a module's `main` whether or not it is exported.
    if let Some(f) = program.exported_funcs().find(|f| &*f.name == name).or_else(|| program.func(name)) {
        return Ok(Selected::Named(f.clone()));
    }
    let exports: Vec<String> = program.exported_funcs().map(|f| f.name.to_string()).collect();
    if name == "main" {
        let zero_arg: Vec<&Rc<FuncDecl>> = program.exported_funcs().filter(|f| takes_no_arguments(f)).collect();
        match zero_arg.as_slice() {
            [only] => return Ok(Selected::Auto((*only).clone())),
            [] => {}
            several => {
                if let Some(test) = several.iter().find(|f| &*f.name == "test") {
                    return Ok(Selected::Auto((*test).clone()));
                }
            }
        }
    }
    Err(format!("entrypoint '{name}' not found in module\nAvailable exports: [{}]", exports.join(" ")))
}

fn test_command(args: &[String], io: &mut Io<'_>) -> i32 {
    let (flags, file) = match file_flags_or_exit(args, &["relax-modules", "quiet"], &["max-recursion-depth"], io) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    let relax = flags.is_set("relax-modules") || io.relax_env;
    let source = match read_source(&file, io) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let Some(program) = load_checked(&file, &source, relax, flags.is_set("quiet"), true, io) else {
        return 1;
    };
    let mut interp = interp_for(&program, DEFAULT_MAX_DEPTH, HashSet::new());
    if let Err(e) = interp.bind_top_lets(&program.module) {
        let _ = writeln!(io.err, "Error: {}", e.in_file(&file));
        return 1;
    }
    let (mut passed, mut failed) = (0usize, 0usize);
    for decl in &program.module.decls {
        match decl {
            Decl::Func(f) => {
                for (i, row) in f.tests.iter().enumerate() {
                    match run_row(&mut interp, f, row) {
                        Ok(()) => passed += 1,
                        Err(why) => {
                            failed += 1;
                            let _ = writeln!(io.out, "FAIL {} row {} (line {}): {why}", f.name, i + 1, row.pos.line);
                        }
                    }
                }
            }
            Decl::Test { name, body, pos } => match interp.eval(body, &None) {
                // A block of asserts ends in unit: reaching its end is a pass.
                Ok(Value::Bool(true) | Value::Unit) => passed += 1,
                Ok(other) => {
                    failed += 1;
                    let _ = writeln!(io.out, "FAIL test \"{name}\" (line {}): got {}", pos.line, show(&other));
                }
                Err(e) => {
                    failed += 1;
                    let _ = writeln!(io.out, "FAIL test \"{name}\" (line {}): error: {e}", pos.line);
                }
            },
            Decl::Type(_) | Decl::Let(_) => {}
        }
    }
    let _ = writeln!(io.out, "{passed} passed, {failed} failed");
    if failed > 0 { 1 } else { 0 }
}

/// One inline test row: a tuple input is spread over several parameters.
fn run_row(interp: &mut Interp, f: &Rc<FuncDecl>, row: &crate::ast::TestRow) -> Result<(), String> {
    let input = interp.eval(&row.input, &None).map_err(|e| format!("input error: {e}"))?;
    let expected = interp.eval(&row.expected, &None).map_err(|e| format!("expected-value error: {e}"))?;
    let args = match &input {
        Value::Tuple(items) if f.params.len() > 1 && items.0.len() == f.params.len() => items.0.clone(),
        other => vec![other.clone()],
    };
    let shown_input = show_quoted(&input);
    let got = interp.call_decl(f, args).map_err(|e| format!("input {shown_input}: error: {e}"))?;
    match equal(&got, &expected) {
        Ok(true) => Ok(()),
        Ok(false) => {
            Err(format!("input {shown_input}: expected {}, got {}", show_quoted(&expected), show_quoted(&got)))
        }
        Err(e) => Err(format!("input {shown_input}: cannot compare: {e}")),
    }
}

/// `show`, but with top-level strings quoted so that failure lines are unambiguous.
fn show_quoted(v: &Value) -> String {
    match v {
        Value::Str(_) => show(&Value::list(vec![v.clone()])).trim_start_matches('[').trim_end_matches(']').to_string(),
        other => show(other),
    }
}

/// `check` of one file: loader errors and warnings, then the type checker's report.
pub fn check_file(file: &str, relax: bool) -> Report {
    check_one(file, relax, false)
}

fn check_one(file: &str, relax: bool, exiting: bool) -> Report {
    let source = match std::fs::read_to_string(file) {
        Ok(source) => source,
        Err(e) => {
            let d = Diagnostic::new("ERROR", format!("cannot read file '{file}': {e}"), None);
            return Report { errors: vec![d], warnings: Vec::new() };
        }
    };
    let loaded = load(&source, file, LoadOptions { relax_modules: relax });
    let mut report = Report { errors: loaded.errors, warnings: loaded.warnings };
    if let Some(program) = &loaded.program {
        let checked = check_module(program, file, Options { full: true });
        report.errors.extend(checked.errors);
        report.warnings.extend(checked.warnings);
    }
    // Freeing the tree costs about a tenth of a short check.
    drop(Held::new(loaded.program, exiting));
    report
}

/// Holds what a command built until the command returns. In a process that exits right
/// after (`Io::exiting`) it is left for the exit, which reclaims it at once, instead of
/// being freed node by node; a run forked from the fork server would first copy every page
/// of its checked program that it shares with the server just to free it.
struct Held<T> {
    value: std::mem::ManuallyDrop<T>,
    leave: bool,
}

impl<T> Held<T> {
    fn new(value: T, leave: bool) -> Held<T> {
        Held { value: std::mem::ManuallyDrop::new(value), leave }
    }
}

impl<T> std::ops::Deref for Held<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> std::ops::DerefMut for Held<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T> Drop for Held<T> {
    fn drop(&mut self) {
        if !self.leave {
            // SAFETY: dropped once, here; the value is not used after.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.value) }
        }
    }
}

/// Every `.ail` file beneath `dir`, sorted, or the file itself.
fn ail_files(path: &str) -> Result<Vec<String>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read '{path}': {e}"))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_string()]);
    }
    let mut out = Vec::new();
    let mut pending = vec![std::path::PathBuf::from(path)];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("cannot read '{}': {e}", dir.display()))?;
        for entry in entries.flatten() {
            let p = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => pending.push(p),
                Ok(t) if t.is_file() && p.extension().is_some_and(|e| e == "ail") => {
                    out.push(p.to_string_lossy().into_owned())
                }
                _ => {}
            }
        }
    }
    out.sort();
    Ok(out)
}

fn check_command(args: &[String], io: &mut Io<'_>) -> i32 {
    let bools = ["json", "quiet", "relax-modules", "strict-syntax"];
    let (flags, target) = match file_flags_or_exit(args, &bools, &["timeout"], io) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    let json = flags.is_set("json");
    let quiet = flags.is_set("quiet") || json;
    let relax = flags.is_set("relax-modules") || io.relax_env;
    let is_dir = std::fs::metadata(&target).is_ok_and(|m| m.is_dir());
    let files = match ail_files(&target) {
        Ok(files) => files,
        // check_file reports why the path cannot be read.
        Err(_) => vec![target.clone()],
    };
    let exiting = io.exiting;
    let reports: Vec<(String, Report)> = files.iter().map(|f| (f.clone(), check_one(f, relax, exiting))).collect();
    let failed = reports.iter().any(|(_, r)| !r.errors.is_empty());
    if json {
        let objects: Vec<String> = reports.iter().map(|(f, r)| check_report_json(f, &r.errors, &r.warnings)).collect();
        if is_dir {
            let errors: usize = reports.iter().map(|(_, r)| r.errors.len()).sum();
            let files = objects.iter().map(|o| indent(o, "    ")).collect::<Vec<_>>().join(",\n");
            let _ = writeln!(
                io.out,
                "{{\n  \"dir\": {},\n  \"passed\": {},\n  \"error_count\": {errors},\n  \"files\": [{}{files}{}]\n}}",
                json_text(&target),
                !failed,
                if files.is_empty() { "" } else { "\n" },
                if files.is_empty() { "" } else { "\n  " },
            );
        } else {
            for o in objects {
                let _ = writeln!(io.out, "{o}");
            }
        }
    } else {
        for (file, report) in &reports {
            if !quiet {
                let _ = writeln!(io.out, "→ Checking {file}...");
                for w in &report.warnings {
                    let _ = writeln!(io.err, "Warning: {w}");
                }
            }
            for e in &report.errors {
                let _ = writeln!(io.err, "Error: {e}");
            }
        }
        if !failed && !quiet {
            let _ = writeln!(io.out, "\n✓ No errors found!");
        }
    }
    if failed { 1 } else { 0 }
}

fn indent(text: &str, by: &str) -> String {
    text.lines().map(|l| format!("{by}{l}")).collect::<Vec<_>>().join("\n")
}

/// A JSON string literal.
pub fn json_text(s: &str) -> String {
    let mut out = String::new();
    encode_string(s, &mut out);
    out
}

fn diagnostics_json(file: &str, list: &[Diagnostic]) -> String {
    if list.is_empty() {
        return "[]".into();
    }
    let items: Vec<String> = list
        .iter()
        .map(|e| {
            let mut fields =
                vec![format!("\"code\": {}", json_text(&e.code)), format!("\"message\": {}", json_text(&e.message))];
            fields.push(format!("\"file\": {}", json_text(e.file.as_deref().unwrap_or(file))));
            if let Some(pos) = e.pos {
                fields.push(format!("\"line\": {}", pos.line));
                fields.push(format!("\"column\": {}", pos.col));
            }
            if let Some(s) = &e.suggestion {
                fields.push(format!("\"suggestion\": {}", json_text(s)));
            }
            format!("    {{\n{}\n    }}", fields.iter().map(|f| format!("      {f}")).collect::<Vec<_>>().join(",\n"))
        })
        .collect();
    format!("[\n{}\n  ]", items.join(",\n"))
}

/// `{file, passed, error_count, errors: [{code, message, file, line, column, suggestion?}],
/// warnings: […]}`, indented.
pub fn check_report_json(file: &str, errors: &[Diagnostic], warnings: &[Diagnostic]) -> String {
    format!(
        "{{\n  \"file\": {},\n  \"passed\": {},\n  \"error_count\": {},\n  \"errors\": {},\n  \"warnings\": {}\n}}",
        json_text(file),
        errors.is_empty(),
        errors.len(),
        diagnostics_json(file, errors),
        diagnostics_json(file, warnings)
    )
}
