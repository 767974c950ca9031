//! `world-core`: serve the core, and the operator verbs that act on a store.

mod cli;

use std::process::ExitCode;

/// Request handling allocates many small short-lived buffers; glibc's allocator made a
/// tenth of the CPU time on the request path.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    cli::main()
}
