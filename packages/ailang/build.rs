//! On glibc, link libgcc's unwinder into everything that links this crate instead of
//! loading libgcc_s.so.1 at start-up (what `gcc -static-libgcc` does). Std needs the
//! unwinder only for panics and backtraces, while loading the shared library (and running
//! its CPU-detection constructor) was a measurable share of a short `ailang run` or
//! `ailang check`. The archive is linked whole and ahead of std, so the linker (run with
//! --as-needed) finds no use for libgcc_s and leaves it out.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo::rustc-link-lib=static:+whole-archive,-bundle=gcc_eh");
    }
    println!("cargo::rerun-if-changed=build.rs");
}
