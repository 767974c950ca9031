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
#[inline(always)]
pub fn exhausted() -> bool {
    let base = BASE.with(|b| b.get());
    if base == 0 {
        return false;
    }
    let used = base.abs_diff(stack_address());
    used > BUDGET.with(|b| b.get())
}

/// Run `f` on a large stack, guarded, and return its result.
///
/// On glibc the current thread switches to a freshly mapped stack and back
/// (`makecontext`/`swapcontext`): spawning a thread instead costs a clone, a second malloc
/// arena grown page by page and its teardown, which dominated the run time of a short
/// `ailang check`. Elsewhere a thread with a large stack does the same job.
pub fn run_on_big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> std::io::Result<T> {
    #[cfg(all(target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        switch::run(BIG_STACK_BYTES, move || {
            let _region = enter_fresh(BIG_STACK_BYTES - (32 << 20));
            f()
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64"))))]
    {
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
}

/// A region that owns the guard for a new stack on this thread whatever was set before
/// (the addresses of the old stack mean nothing there), restoring the outer one on drop.
#[cfg_attr(
    not(all(target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64"))),
    allow(dead_code)
)]
struct FreshRegion {
    outer: (usize, usize),
}

impl Drop for FreshRegion {
    fn drop(&mut self) {
        BASE.with(|b| b.set(self.outer.0));
        BUDGET.with(|b| b.set(self.outer.1));
    }
}

#[cfg_attr(
    not(all(target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64"))),
    allow(dead_code)
)]
fn enter_fresh(budget: usize) -> FreshRegion {
    let outer = (BASE.with(|b| b.get()), BUDGET.with(|b| b.get()));
    BASE.with(|b| b.set(stack_address()));
    BUDGET.with(|b| b.set(budget));
    FreshRegion { outer }
}

#[cfg(all(target_os = "linux", target_env = "gnu", any(target_arch = "x86_64", target_arch = "aarch64")))]
mod switch {
    use std::cell::Cell;
    use std::panic::{AssertUnwindSafe, catch_unwind};

    /// Below the mapped stack: faults there instead of running into other memory.
    const GUARD_BYTES: usize = 64 << 10;

    type Job = (*mut u8, unsafe fn(*mut u8));

    thread_local! {
        /// The job the trampoline runs; set just before switching to the new stack.
        static PENDING: Cell<Option<Job>> = const { Cell::new(None) };
    }

    extern "C" fn trampoline() {
        if let Some((data, call)) = PENDING.with(|p| p.take()) {
            // SAFETY: `run` stored a pointer to its live `Option<F>` with the matching `call_job::<F>`,
            // and waits in `swapcontext` until this returns.
            unsafe { call(data) }
        }
        // Returning resumes `uc_link`, the context saved by `run`.
    }

    unsafe fn call_job<F: FnOnce()>(data: *mut u8) {
        // SAFETY: see `trampoline`; the pointer is to an `Option<F>` owned by `run`'s frame.
        let slot = unsafe { &mut *(data as *mut Option<F>) };
        if let Some(f) = slot.take() {
            f();
        }
    }

    struct Mapping {
        base: *mut libc::c_void,
        len: usize,
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: `base`/`len` are exactly what mmap returned, and nothing runs on it any more.
            unsafe { libc::munmap(self.base, self.len) };
        }
    }

    pub fn run<T>(size: usize, f: impl FnOnce() -> T) -> std::io::Result<T> {
        let len = size + GUARD_BYTES;
        // SAFETY: a fresh private anonymous mapping; pages are only touched when the stack reaches them.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let mapping = Mapping { base, len };
        // SAFETY: the lowest GUARD_BYTES of our own mapping.
        if unsafe { libc::mprotect(base, GUARD_BYTES, libc::PROT_NONE) } != 0 {
            return Err(std::io::Error::last_os_error());
        }

        let mut result: Option<std::thread::Result<T>> = None;
        let mut job = Some(|| result = Some(catch_unwind(AssertUnwindSafe(f))));
        // SAFETY: zeroed contexts are filled by getcontext/swapcontext before use.
        let mut caller: libc::ucontext_t = unsafe { std::mem::zeroed() };
        let mut callee: libc::ucontext_t = unsafe { std::mem::zeroed() };
        // SAFETY: plain libc calls on contexts owned by this frame; the new context's stack
        // is the mapping above (minus its guard), which outlives the switch.
        unsafe {
            if libc::getcontext(&mut callee) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            callee.uc_stack.ss_sp = (base as *mut u8).add(GUARD_BYTES) as *mut libc::c_void;
            callee.uc_stack.ss_size = size;
            callee.uc_link = &mut caller;
            libc::makecontext(&mut callee, trampoline, 0);
            PENDING.with(|p| p.set(Some((&mut job as *mut Option<_> as *mut u8, call_job_for(&job)))));
            if libc::swapcontext(&mut caller, &callee) != 0 {
                PENDING.with(|p| p.set(None));
                return Err(std::io::Error::last_os_error());
            }
        }
        drop(mapping);
        match result {
            Some(Ok(v)) => Ok(v),
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => Err(std::io::Error::other("the large-stack job did not run")),
        }
    }

    fn call_job_for<F: FnOnce()>(_: &Option<F>) -> unsafe fn(*mut u8) {
        call_job::<F>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_on_the_big_stack_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| run_on_big_stack(|| panic!("inner")));
        let payload = caught.expect_err("the panic propagates");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"inner"));
    }

    #[test]
    fn the_big_stack_has_its_own_budget_and_the_outer_region_returns() {
        let _outer = enter(None);
        let outer_base = BASE.with(|b| b.get());
        let inner = run_on_big_stack(|| (exhausted(), BUDGET.with(|b| b.get()))).expect("runs");
        assert_eq!(inner, (false, BIG_STACK_BYTES - (32 << 20)));
        assert_eq!(BASE.with(|b| b.get()), outer_base);
        assert_eq!(BUDGET.with(|b| b.get()), UNKNOWN_THREAD_BUDGET);
        assert!(!exhausted());
    }

    #[test]
    fn big_stacks_nest() {
        let depth = run_on_big_stack(|| run_on_big_stack(|| 2).expect("inner") + 1).expect("outer");
        assert_eq!(depth, 3);
    }
}
