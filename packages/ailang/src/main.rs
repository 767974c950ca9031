//! The `ailang` binary: the CLI on a large stack, so that deep (but legal)
//! recursion reaches the evaluator's own limit instead of the native stack's end.

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let relax_env = matches!(std::env::var("AILANG_RELAX_MODULES").as_deref(), Ok("1" | "true"));
    let examples_env = std::env::var("AILANG_EXAMPLES").ok().filter(|d| !d.is_empty());
    let outcome = ailang::stack::run_on_big_stack(move || {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        let mut err = std::io::stderr().lock();
        // Not locked for the whole run: std/io readLine reads stdin too.
        let mut stdin = std::io::stdin();
        let mut io = ailang::cli::Io { out: &mut out, err: &mut err, stdin: &mut stdin, relax_env, examples_env };
        let code = ailang::cli::main(&args, &mut io);
        let _ = out.flush();
        code
    });
    let code = outcome.unwrap_or_else(|e| {
        let _ = writeln!(std::io::stderr(), "Error: cannot set up the interpreter stack: {e}");
        1
    });
    std::process::exit(code);
}
