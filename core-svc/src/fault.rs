//! Fault points for the crash tests: with the `fault-points` feature a core whose
//! `WORLD_FAULT_POINT` names a point kills itself there (SIGKILL: no destructor runs, as in
//! a real crash), and a call reaching the point `WORLD_FAULT_HOLD=<point>:<file>` names
//! waits there while `<file>` exists (so a test can kill the core, or look at the store,
//! while the call stands at that point). Without the feature a point compiles to nothing.

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

#[cfg(feature = "fault-points")]
pub async fn hold(name: &str) {
    let Ok(chosen) = std::env::var("WORLD_FAULT_HOLD") else { return };
    let Some(file) = chosen.strip_prefix(name).and_then(|rest| rest.strip_prefix(':')) else { return };
    let file = std::path::Path::new(file);
    if file.exists() {
        eprintln!("world-core: fault point {name}: holding while {} exists", file.display());
    }
    while file.exists() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[cfg(not(feature = "fault-points"))]
#[inline(always)]
pub fn point(_name: &str) {}

#[cfg(not(feature = "fault-points"))]
#[inline(always)]
pub async fn hold(_name: &str) {}
