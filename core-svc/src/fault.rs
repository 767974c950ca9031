//! Fault points for the crash tests: with the `fault-points` feature a core whose
//! `WORLD_FAULT_POINT` names a point kills itself there (SIGKILL: no destructor runs, as in
//! a real crash). Without the feature a point compiles to nothing.

#[cfg(feature = "fault-points")]
pub fn point(name: &str) {
    if std::env::var("WORLD_FAULT_POINT").is_ok_and(|chosen| chosen == name) {
        eprintln!("world-core: fault point {name}: killing this process");
        // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

#[cfg(not(feature = "fault-points"))]
#[inline(always)]
pub fn point(_name: &str) {}
