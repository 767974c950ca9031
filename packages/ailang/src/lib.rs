//! AILANG, the project's own interpreter: lexer, parser, evaluator, native standard library
//! and the command-line contract (`run`, `test`, `check`) that the capsule invokes.

pub mod ast;
pub mod diag;
pub mod lexer;
pub mod parser;
pub mod stack;

pub use diag::{Diagnostic, Pos};
pub mod eval;
pub mod stdlib;
pub mod value;
pub mod argdecode;
pub mod check;
pub mod cli;
pub mod loader;
