//! `world-core` with its fault points live (feature `fault-points`), for the crash tests:
//! the same commands as `main.rs`.

#[path = "cli/mod.rs"]
mod cli;

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    cli::main()
}
