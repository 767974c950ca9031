//! Bounded child processes: their own process group (killed whole on
//! timeout or overflow), capped stdout and stderr, and a process-wide slot
//! limit that refuses rather than queues.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

/// How many interpreter subprocesses may run at once per core.
pub const DEFAULT_SLOTS: usize = 8;
/// Per-stream capture cap.
pub const OUTPUT_CAP: usize = 8 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("all {0} subprocess slots are busy")]
    NoSlot(usize),
    #[error("cannot start {program}: {cause}")]
    Spawn { program: String, cause: String },
    #[error("the process exceeded its {0:?} deadline and was killed")]
    Timeout(Duration),
    #[error("the process wrote more than {0} bytes to one stream and was killed")]
    Overflow(usize),
    #[error("waiting for the process failed: {0}")]
    Wait(String),
}

#[derive(Debug)]
pub struct Finished {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Finished {
    pub fn success(&self) -> bool {
        self.status.success()
    }
}

/// The process-wide count of running children.
#[derive(Clone)]
pub struct Slots {
    limit: usize,
    in_use: Arc<AtomicUsize>,
}

/// Held while a child runs.
pub struct Slot {
    in_use: Arc<AtomicUsize>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.in_use.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Slots {
    pub fn new(limit: usize) -> Self {
        Self { limit, in_use: Arc::new(AtomicUsize::new(0)) }
    }

    pub fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Acquire)
    }

    /// Takes a slot now, or refuses: callers are never queued.
    pub fn try_take(&self) -> Result<Slot, RunError> {
        let taken =
            self.in_use.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < self.limit).then_some(n + 1));
        match taken {
            Ok(_) => Ok(Slot { in_use: Arc::clone(&self.in_use) }),
            Err(_) => Err(RunError::NoSlot(self.limit)),
        }
    }
}

/// Runs `command` to completion within `timeout`, capturing at most `cap`
/// bytes of each stream. The slot is released when the child has been reaped.
pub async fn run(mut command: Command, _slot: Slot, timeout: Duration, cap: usize) -> Result<Finished, RunError> {
    let program = format!("{:?}", command.as_std().get_program());
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0).kill_on_drop(true);
    // A core that dies abruptly (SIGKILL, OOM) runs no destructor; the kernel
    // still ends the child with it, so no interpreter outlives its core.
    // SAFETY: prctl is async-signal-safe and touches only the child.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| RunError::Spawn { program, cause: e.to_string() })?;
    let pid = child.id().and_then(|id| i32::try_from(id).ok());
    let kill_group = || {
        if let Some(pid) = pid {
            // SAFETY: signals the process group this child leads.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    };
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let work = async {
        let (out, err) = tokio::join!(read_capped(stdout, cap, &kill_group), read_capped(stderr, cap, &kill_group));
        let status = child.wait().await.map_err(|e| RunError::Wait(e.to_string()))?;
        Ok::<_, RunError>((status, out, err))
    };
    match tokio::time::timeout(timeout, work).await {
        Err(_) => {
            kill_group();
            Err(RunError::Timeout(timeout))
        }
        Ok(Err(error)) => {
            kill_group();
            Err(error)
        }
        Ok(Ok((status, out, err))) => {
            // Descendants that outlived the child die with its group.
            kill_group();
            match (out, err) {
                (Some(stdout), Some(stderr)) => Ok(Finished { status, stdout, stderr }),
                _ => Err(RunError::Overflow(cap)),
            }
        }
    }
}

/// Reads a stream to its end; past `cap` it kills the process group (so the
/// other stream ends too) and returns `None`.
async fn read_capped<R: AsyncRead + Unpin>(stream: Option<R>, cap: usize, kill: &impl Fn()) -> Option<Vec<u8>> {
    let Some(mut stream) = stream else { return Some(Vec::new()) };
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return Some(buffer),
            Ok(n) => {
                if buffer.len() + n > cap {
                    kill();
                    return None;
                }
                buffer.extend_from_slice(&chunk[..n]);
            }
        }
    }
}
