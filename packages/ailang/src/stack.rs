//! Native stack budgeting.
//!
//! The parser and the evaluator recurse on the Rust stack. Rather than trusting a depth
//! counter alone (frame sizes differ between debug and release builds), each recursive step
//! asks how much of the current thread's stack has been used since the outermost entry
//! point and turns "too deep" into an ordinary error long before the real stack ends.

use std::cell::Cell;

/// Stack size of the thread the CLI runs everything on.
pub const BIG_STACK_BYTES: usize = 1 << 30;

/// What the guard allows on a thread whose size we did not choose (a test thread or an
/// embedding caller): well under the 2 MiB Rust gives spawned threads.
const UNKNOWN_THREAD_BUDGET: usize = 1 << 20;

thread_local! {
    static BASE: Cell<usize> = const { Cell::new(0) };
    static BUDGET: Cell<usize> = const { Cell::new(0) };
}

fn stack_address() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Marks the start of a guarded region; the outermost one wins.
pub struct Region {
    owner: bool,
}

impl Drop for Region {
    fn drop(&mut self) {
        if self.owner {
            BASE.with(|b| b.set(0));
            BUDGET.with(|b| b.set(0));
        }
    }
}

/// Enter a guarded region with `budget` bytes of stack (or a conservative default).
pub fn enter(budget: Option<usize>) -> Region {
    let already = BASE.with(|b| b.get()) != 0;
    if already {
        return Region { owner: false };
    }
    BASE.with(|b| b.set(stack_address()));
    BUDGET.with(|b| b.set(budget.unwrap_or(UNKNOWN_THREAD_BUDGET)));
    Region { owner: true }
}

/// True when the stack used since the region began exceeds its budget.
pub fn exhausted() -> bool {
    let base = BASE.with(|b| b.get());
    if base == 0 {
        return false;
    }
    let used = base.abs_diff(stack_address());
    used > BUDGET.with(|b| b.get())
}

/// Run `f` on a fresh thread with a large stack, guarded, and return its result.
pub fn run_on_big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> std::io::Result<T> {
    let handle =
        std::thread::Builder::new().name("ailang-main".into()).stack_size(BIG_STACK_BYTES).spawn(move || {
            let _region = enter(Some(BIG_STACK_BYTES - (32 << 20)));
            f()
        })?;
    match handle.join() {
        Ok(v) => Ok(v),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
