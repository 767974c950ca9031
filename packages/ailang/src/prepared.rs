//! Programs already loaded and checked in this process, for the runs it forks.
//!
//! The fork server keeps the checked form of the sources its host names (message `P`), so a
//! run forked from it finds its program here and starts evaluating at once instead of
//! parsing and checking the same source again. A run looks its program up by the exact
//! source text, file name and module rule, so an entry can only ever stand for what loading
//! would have produced. Only a checked program without errors is kept, with the warnings
//! loading it gave.

use std::cell::RefCell;
use std::collections::VecDeque;

use crate::check::{Options, check_module};
use crate::diag::Diagnostic;
use crate::loader::{LoadOptions, Program, load};

/// Programs kept; past it the oldest goes. Each is shared by every fork, and a larger heap
/// makes every fork dearer (its page tables are copied), so this stays small.
pub const CAPACITY: usize = 16;

struct Entry {
    file: String,
    relax: bool,
    source: String,
    program: Program,
    warnings: Vec<Diagnostic>,
}

thread_local! {
    static PREPARED: RefCell<VecDeque<Entry>> = const { RefCell::new(VecDeque::new()) };
}

/// Loads and checks `source` as `file` (as `ailang run` would) and keeps the program when it
/// has no errors; `false` when it had some. A source already kept is not loaded again.
pub fn prepare(file: &str, source: &str, relax: bool) -> bool {
    if PREPARED.with(|p| p.borrow().iter().any(|e| e.file == file && e.relax == relax && e.source == source)) {
        return true;
    }
    let loaded = load(source, file, LoadOptions { relax_modules: relax });
    let Some(program) = loaded.program.filter(|_| loaded.errors.is_empty()) else {
        return false;
    };
    if !check_module(&program, file, Options { full: false }).errors.is_empty() {
        return false;
    }
    let entry = Entry { file: file.to_owned(), relax, source: source.to_owned(), program, warnings: loaded.warnings };
    PREPARED.with(|p| {
        let mut prepared = p.borrow_mut();
        if prepared.len() == CAPACITY {
            prepared.pop_front();
        }
        prepared.push_back(entry);
    });
    true
}

/// The program kept for exactly this source, file and rule, with its loading warnings, taken
/// out of the table: a forked run owns its copy, and uses it once.
pub fn take(file: &str, source: &str, relax: bool) -> Option<(Program, Vec<Diagnostic>)> {
    PREPARED.with(|p| {
        let mut prepared = p.borrow_mut();
        let at = prepared.iter().position(|e| e.file == file && e.relax == relax && e.source == source)?;
        let entry = prepared.remove(at)?;
        Some((entry.program, entry.warnings))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ECHO: &str = "module echo\n\nexport func main(x: string) -> string { x }\n";

    #[test]
    fn a_prepared_program_is_found_only_for_the_same_source_file_and_rule() {
        assert!(prepare("echo.ail", ECHO, true));
        assert!(take("echo.ail", ECHO, false).is_none(), "another module rule");
        assert!(take("other.ail", ECHO, true).is_none(), "another file");
        assert!(take("echo.ail", &ECHO.replace("x }", "x  }"), true).is_none(), "another source");
        let (program, _) = take("echo.ail", ECHO, true).expect("kept");
        assert!(program.func("main").is_some());
        assert!(take("echo.ail", ECHO, true).is_none(), "taken once");
    }

    #[test]
    fn a_source_with_errors_is_not_kept() {
        assert!(!prepare("bad.ail", "module bad\n\nexport func main( -> int { 1 }\n", true));
        assert!(!prepare("ill.ail", "module ill\n\nexport func main() -> int { \"no\" }\n", true));
        assert!(take("bad.ail", "module bad\n\nexport func main( -> int { 1 }\n", true).is_none());
    }

    #[test]
    fn the_oldest_program_goes_past_the_capacity() {
        let source = |n: usize| format!("module p\n\nexport func main() -> int {{ {n} }}\n");
        for n in 0..=CAPACITY {
            assert!(prepare("p.ail", &source(n), true));
        }
        assert!(take("p.ail", &source(0), true).is_none());
        assert!(take("p.ail", &source(CAPACITY), true).is_some());
        assert!(take("p.ail", &source(1), true).is_some());
    }
}
