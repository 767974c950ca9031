//! The `ailang` binary: the CLI on a large stack, so that deep (but legal)
//! recursion reaches the evaluator's own limit instead of the native stack's end.
//!
//! On glibc the binary provides the C `main` itself. Std's runtime start-up would otherwise
//! read `/proc/self/maps` and map an alternate signal stack to report overflows of the
//! native main stack, which the interpreter never recurses on; for a short `check` or
//! `run` that set-up was a measurable share of the process. The two things it does that
//! matter here (standard descriptors that are open, SIGPIPE ignored) are done below.
#![cfg_attr(all(target_os = "linux", target_env = "gnu", not(test)), no_main)]

use std::io::Write;

#[cfg(all(target_os = "linux", target_env = "gnu", not(test)))]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: std::ffi::c_int, _argv: *const *const std::ffi::c_char) -> std::ffi::c_int {
    prepare_process();
    // glibc hands argc/argv to std through `.init_array`, so `std::env::args` works here.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("fork-server") {
        return ailang::fork_server::serve(run);
    }
    // After a panic the hook has printed the message; 101 is what std's `main` exits with.
    std::panic::catch_unwind(|| run(args)).unwrap_or(101)
}

// Test builds keep std's main: the harness provides it.
#[cfg(any(not(all(target_os = "linux", target_env = "gnu")), test))]
fn main() {
    std::process::exit(run(std::env::args().skip(1).collect()));
}

/// What std's start-up does that the CLI relies on: descriptors 0–2 exist (so a file the
/// CLI opens never becomes its stdout), and writing to a closed pipe is an error, not a
/// signal.
#[cfg(all(target_os = "linux", target_env = "gnu", not(test)))]
fn prepare_process() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd { fd, events: 0, revents: 0 });
    // SAFETY: plain libc calls on a local array and on constant paths and signals.
    unsafe {
        if libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) != -1 {
            for fd in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0) {
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                if null != fd.fd && null >= 0 {
                    libc::dup2(null, fd.fd);
                    libc::close(null);
                }
            }
        }
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// The CLI on `args` (without the program name), returning the exit code.
fn run(args: Vec<String>) -> i32 {
    let relax_env = matches!(std::env::var("AILANG_RELAX_MODULES").as_deref(), Ok("1" | "true"));
    let examples_env = std::env::var("AILANG_EXAMPLES").ok().filter(|d| !d.is_empty());
    let outcome = ailang::stack::run_on_big_stack(move || {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        let mut err = std::io::stderr().lock();
        // Not locked for the whole run: std/io readLine reads stdin too.
        let mut stdin = std::io::stdin();
        let mut io =
            ailang::cli::Io { out: &mut out, err: &mut err, stdin: &mut stdin, relax_env, examples_env, exiting: true };
        let code = ailang::cli::main(&args, &mut io);
        let _ = out.flush();
        code
    });
    outcome.unwrap_or_else(|e| {
        let _ = writeln!(std::io::stderr(), "Error: cannot set up the interpreter stack: {e}");
        1
    })
}
