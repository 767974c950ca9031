//! Two jobs before the crate compiles.
//!
//! The std catalog: `src/stdlib/catalog.txt` (one std function a line, as `ailang builtins
//! list` prints it) becomes the static table `stdlib::catalog::BUILTINS`, so the text is read
//! once here rather than at every start of a short `ailang` run.
//!
//! The unwinder: on glibc, link libgcc's unwinder into everything that links this crate
//! instead of loading libgcc_s.so.1 at start-up (what `gcc -static-libgcc` does). Std needs
//! the unwinder only for panics and backtraces, while loading the shared library (and running
//! its CPU-detection constructor) was a measurable share of a short `ailang run` or
//! `ailang check`. The archive is linked whole and ahead of std, so the linker (run with
//! --as-needed) finds no use for libgcc_s and leaves it out.

use std::fmt::Write as _;

const CATALOG: &str = "src/stdlib/catalog.txt";

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo::rustc-link-lib=static:+whole-archive,-bundle=gcc_eh");
    }
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed={CATALOG}");

    let text = std::fs::read_to_string(CATALOG).unwrap_or_else(|e| panic!("{CATALOG}: {e}"));
    let mut table =
        format!("/// Every std function, in the order of {CATALOG}.\npub static BUILTINS: &[Builtin] = &[\n");
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with("--") {
            continue;
        }
        let [module, name, signature, doc] = entry(line).unwrap_or_else(|| {
            panic!("{CATALOG}:{}: not `<module>.<name> : <signature>  -- <description>`", number + 1)
        });
        let _ = writeln!(
            table,
            "    Builtin {{ module: {module:?}, name: {name:?}, signature: {signature:?}, doc: {doc:?} }},"
        );
    }
    table.push_str("];\n");
    let out = std::path::Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("catalog.rs");
    std::fs::write(&out, table).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}

/// The module, name, signature and description of `<module>.<name> : <signature>  --
/// <description>`, each non-empty.
fn entry(line: &str) -> Option<[&str; 4]> {
    let (head, doc) = line.split_once("  -- ")?;
    let (path, signature) = head.split_once(" : ")?;
    let (module, name) = path.rsplit_once('.')?;
    let parts = [module, name, signature, doc];
    parts.iter().all(|part| !part.is_empty()).then_some(parts)
}
