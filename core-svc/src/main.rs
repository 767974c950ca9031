//! `world-core`: serve the core, and the operator verbs that act on a store.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
