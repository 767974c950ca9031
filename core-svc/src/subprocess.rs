//! Bounded child processes: their own process group (killed whole on
//! timeout or overflow), capped stdout and stderr, and a process-wide slot
//! limit that refuses rather than queues.
//!
//! Children are started the way `posix_spawn` starts them, with
//! `clone(CLONE_VM | CLONE_VFORK)`: the child borrows the core's memory for
//! the few system calls before `execve`, so starting one costs no copy of the
//! core's page tables and no copy-on-write faults in the core afterwards
//! (a `fork` of the core per call was most of a call's CPU). Unlike
//! `posix_spawn` it can also set `PR_SET_PDEATHSIG`: a core that dies
//! abruptly (SIGKILL, OOM) runs no destructor, and the kernel still ends its
//! children with it, so no interpreter outlives its core.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::unix::pipe;

/// How much lower than the core's the children's CPU priority is: interpreters saturating the
/// CPUs must not starve the core's own threads (admission, the store, health), which then
/// hold the write lock longer and answer every caller late.
const CHILD_NICENESS: libc::c_int = 10;

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

/// What to run: a program, its arguments, its working directory and its whole
/// environment (empty unless the caller adds to it). Stdin is `/dev/null` unless given.
pub struct Spawn {
    program: PathBuf,
    /// The child's stdin, when not `/dev/null`; kept open by the caller until started.
    stdin: Option<RawFd>,
    /// The open file `program` names (`/proc/self/fd/N`), kept open in the child until execve.
    program_fd: Option<RawFd>,
    args: Vec<OsString>,
    cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
}

impl Spawn {
    pub fn new(program: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            stdin: None,
            program_fd: None,
            args: Vec::new(),
            cwd: cwd.into(),
            env: Vec::new(),
        }
    }

    /// Executes exactly the open `file` (through `/proc/self/fd/N`), whatever its path now names.
    pub fn executing(file: &std::fs::File, cwd: impl Into<PathBuf>) -> Self {
        let fd = file.as_raw_fd();
        Self { program_fd: Some(fd), ..Self::new(format!("/proc/self/fd/{fd}"), cwd) }
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args.extend(args.into_iter().map(|arg| arg.as_ref().to_owned()));
        self
    }

    /// Gives the child `fd` as its stdin.
    pub(crate) fn stdin(mut self, fd: &impl AsRawFd) -> Self {
        self.stdin = Some(fd.as_raw_fd());
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        let key = key.as_ref();
        self.env.retain(|(existing, _)| existing != key);
        self.env.push((key.to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Adds this process's environment, less the variables named in `removed`.
    pub fn inherit_env_except(mut self, removed: &[&str]) -> Self {
        for (key, value) in std::env::vars_os() {
            if !removed.iter().any(|name| key == OsStr::new(name)) {
                self = self.env(key, value);
            }
        }
        self
    }
}

/// Runs `spawn` to completion within `timeout`, capturing at most `cap`
/// bytes of each stream. The slot is released when the child has been reaped.
pub async fn run(spawn: Spawn, _slot: Slot, timeout: Duration, cap: usize) -> Result<Finished, RunError> {
    let mut child = start(&spawn)
        .map_err(|cause| RunError::Spawn { program: spawn.program.display().to_string(), cause: cause.to_string() })?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    supervise(&mut child, stdout, stderr, timeout, cap).await
}

/// A started run the supervisor can end and wait for.
pub(crate) trait Running {
    /// Kills the run's process group now, if it has not been reaped.
    fn kill_group(&self);
    /// The run's exit status once it has been reaped.
    fn wait(&mut self) -> impl Future<Output = std::io::Result<std::process::ExitStatus>> + Send;
}

/// Reads both streams of `child` (at most `cap` bytes each) and waits for it, within
/// `timeout`; past either, its group is killed.
pub(crate) async fn supervise<R: Running>(
    child: &mut R,
    stdout: Option<pipe::Receiver>,
    stderr: Option<pipe::Receiver>,
    timeout: Duration,
    cap: usize,
) -> Result<Finished, RunError> {
    let work = async {
        let kill = || child.kill_group();
        let (out, err) = tokio::join!(read_capped(stdout, cap, &kill), read_capped(stderr, cap, &kill));
        let status = child.wait().await.map_err(|e| RunError::Wait(e.to_string()))?;
        Ok::<_, RunError>((status, out, err))
    };
    let outcome = tokio::time::timeout(timeout, work).await;
    // A child still running (deadline, overflow) dies with its group here.
    child.kill_group();
    match outcome {
        Err(_) => Err(RunError::Timeout(timeout)),
        Ok(Err(error)) => Err(error),
        Ok(Ok((status, Some(stdout), Some(stderr)))) => Ok(Finished { status, stdout, stderr }),
        Ok(Ok(_)) => Err(RunError::Overflow(cap)),
    }
}

/// The least room a read of a run's output gets.
const READ_CHUNK: usize = 4096;

/// Reads a stream to its end; past `cap` it kills the process group (so the
/// other stream ends too) and returns `None`.
async fn read_capped<R: AsyncRead + Unpin>(stream: Option<R>, cap: usize, kill: &impl Fn()) -> Option<Vec<u8>> {
    let Some(mut stream) = stream else { return Some(Vec::new()) };
    // Read straight into the buffer's spare room: a chunk array would sit, zeroed, in every
    // run's future, which is moved and boxed whole.
    let mut buffer = Vec::new();
    loop {
        buffer.reserve(READ_CHUNK);
        match stream.read_buf(&mut buffer).await {
            Ok(0) | Err(_) => return Some(buffer),
            Ok(_) if buffer.len() > cap => {
                kill();
                return None;
            }
            Ok(_) => {}
        }
    }
}

/// A started child: its pid (leader of its own process group), a pidfd that
/// becomes readable when it exits, and the read ends of its output pipes.
/// Dropped unreaped, it kills the group and reaps it in the background.
pub(crate) struct Child {
    pid: libc::pid_t,
    exited: Option<AsyncFd<OwnedFd>>,
    pub(crate) stdout: Option<pipe::Receiver>,
    pub(crate) stderr: Option<pipe::Receiver>,
}

impl Child {
    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }
}

impl Running for Child {
    fn kill_group(&self) {
        if self.exited.is_some() {
            // SAFETY: signals the process group this unreaped child leads.
            unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        }
    }

    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let exited = self.exited.as_ref().expect("a child is waited for once");
        loop {
            let mut ready = exited.readable().await?;
            // The exited leader is still unreaped, so its group id cannot be reused yet:
            // descendants that outlived it die with its group.
            self.kill_group();
            if let Some(status) = try_reap(self.pid)? {
                self.exited = None;
                return Ok(status);
            }
            ready.clear_ready();
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill_group();
        if self.exited.take().is_some() {
            let pid = self.pid;
            let reap = move || {
                let mut status = 0;
                // SAFETY: waits for our own killed child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
            };
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => drop(handle.spawn_blocking(reap)),
                Err(_) => reap(),
            }
        }
    }
}

fn try_reap(pid: libc::pid_t) -> std::io::Result<Option<std::process::ExitStatus>> {
    let mut status = 0;
    // SAFETY: polls our own child without blocking.
    match unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } {
        0 => Ok(None),
        -1 => Err(std::io::Error::last_os_error()),
        _ => Ok(Some(std::process::ExitStatus::from_raw(status))),
    }
}

/// Everything the child needs, prepared before it exists: between `clone`
/// and `execve` it may only make system calls (no allocation, no locks).
struct ChildPlan {
    path: CString,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    /// The one descriptor above stderr the child keeps (the program's), or -1.
    program_fd: RawFd,
    parent: libc::pid_t,
    last_signal: libc::c_int,
    signal_mask: libc::sigset_t,
    /// Set by a child that could not reach `execve`; read once the parent resumes.
    errno: AtomicI32,
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in an argument"))
}

pub(crate) fn owned_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills both descriptors on success, which we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both are fresh descriptors owned by no one else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub(crate) fn receiver(read_end: OwnedFd) -> std::io::Result<pipe::Receiver> {
    // SAFETY: sets a status flag on a descriptor we own.
    if unsafe { libc::fcntl(read_end.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    pipe::Receiver::from_owned_fd_unchecked(read_end)
}

fn dev_null() -> std::io::Result<RawFd> {
    static DEV_NULL: OnceLock<std::fs::File> = OnceLock::new();
    if let Some(file) = DEV_NULL.get() {
        return Ok(file.as_raw_fd());
    }
    let file = std::fs::File::open("/dev/null")?;
    Ok(DEV_NULL.get_or_init(|| file).as_raw_fd())
}

const CHILD_STACK: usize = 64 * 1024;

pub(crate) fn start(spawn: &Spawn) -> std::io::Result<Child> {
    let path = cstring(spawn.program.as_os_str().as_bytes())?;
    let args = std::iter::once(spawn.program.as_os_str())
        .chain(spawn.args.iter().map(OsString::as_os_str))
        .map(|arg| cstring(arg.as_bytes()))
        .collect::<std::io::Result<Vec<_>>>()?;
    let env = spawn
        .env
        .iter()
        .map(|(key, value)| cstring(&[key.as_bytes(), b"=", value.as_bytes()].concat()))
        .collect::<std::io::Result<Vec<_>>>()?;
    let (stdout_read, stdout_write) = owned_pipe()?;
    let (stderr_read, stderr_write) = owned_pipe()?;
    let mut plan = ChildPlan {
        path,
        argv: args.iter().map(|arg| arg.as_ptr()).chain(std::iter::once(std::ptr::null())).collect(),
        envp: env.iter().map(|pair| pair.as_ptr()).chain(std::iter::once(std::ptr::null())).collect(),
        cwd: cstring(spawn.cwd.as_os_str().as_bytes())?,
        stdin: match spawn.stdin {
            Some(fd) => fd,
            None => dev_null()?,
        },
        stdout: stdout_write.as_raw_fd(),
        stderr: stderr_write.as_raw_fd(),
        program_fd: spawn.program_fd.unwrap_or(-1),
        // SAFETY: getpid has no preconditions.
        parent: unsafe { libc::getpid() },
        last_signal: libc::SIGRTMAX(),
        // SAFETY: an all-zero sigset_t is a valid (empty) set; filled below.
        signal_mask: unsafe { std::mem::zeroed() },
        errno: AtomicI32::new(0),
    };
    let mut stack = vec![0u8; CHILD_STACK];
    // SAFETY: with every signal blocked, no handler of ours can run on the
    // child's borrowed memory before it has reset them; CLONE_VFORK suspends
    // this thread until the child has called execve or exited, so `plan`,
    // `args`, `env` and `stack` outlive its use of them.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut plan.signal_mask);
        let top = stack.as_mut_ptr().add(CHILD_STACK);
        let top = top.sub(top as usize % 16);
        let pid = libc::clone(
            child_main,
            top.cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&raw mut plan).cast(),
        );
        let clone_error = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &plan.signal_mask, std::ptr::null_mut());
        if pid == -1 {
            return Err(clone_error);
        }
        pid
    };
    drop((stdout_write, stderr_write));
    let errno = plan.errno.load(Ordering::Acquire);
    if errno != 0 {
        let mut status = 0;
        // SAFETY: the child has exited (it reported why); reap it.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(std::io::Error::from_raw_os_error(errno));
    }
    let mut child = Child { pid, exited: None, stdout: None, stderr: None };
    // SAFETY: pidfd_open takes a pid (our unreaped child, so not reused) and flags.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        let error = std::io::Error::last_os_error();
        // SAFETY: nothing else will reap this child; kill its group and reap it.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
            libc::waitpid(pid, &mut 0, 0);
        }
        return Err(error);
    }
    // SAFETY: a fresh descriptor owned by no one else (pidfds are close-on-exec); the
    // AsyncFd owns it, so it stays open and the same while registered.
    child.exited = Some(unsafe {
        let pidfd = OwnedFd::from_raw_fd(pidfd as RawFd);
        AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE).map_err(|e| e.into_parts().1)?
    });
    child.stdout = Some(receiver(stdout_read)?);
    child.stderr = Some(receiver(stderr_read)?);
    Ok(child)
}

/// The child's side, on its borrowed stack: only async-signal-safe calls.
extern "C" fn child_main(plan: *mut libc::c_void) -> libc::c_int {
    // SAFETY: the parent passed a live ChildPlan and is suspended until we exec or exit.
    let plan = unsafe { &*(plan as *const ChildPlan) };
    // SAFETY: each call is a plain system call on values prepared by the parent.
    unsafe {
        // Until it execs, the child holds copies of all the core's descriptors (its listening
        // sockets among them): a core killed meanwhile would leave them open for as long as
        // the child takes, and a core restarted in its place could not bind its address.
        // Keep stdio and the program's file; drop the rest at once.
        let stdio =
            libc::dup2(plan.stdin, 0) >= 0 && libc::dup2(plan.stdout, 1) >= 0 && libc::dup2(plan.stderr, 2) >= 0;
        if stdio {
            // Best effort: execve closes them anyway (all are close-on-exec).
            if plan.program_fd > 3 {
                libc::syscall(libc::SYS_close_range, 3u32, plan.program_fd as u32 - 1, 0u32);
            }
            libc::syscall(libc::SYS_close_range, (plan.program_fd.max(2) + 1) as u32, u32::MAX, 0u32);
        }
        // Handlers are the parent's code on the parent's memory: none may run here.
        for signal in 1..=plan.last_signal {
            let mut action: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut action) == 0
                && action.sa_sigaction != libc::SIG_IGN
                && action.sa_sigaction != libc::SIG_DFL
            {
                action.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
        let ready = stdio
            && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0
            // The core died before the line above: nothing would end this child with it.
            && libc::getppid() == plan.parent
            && libc::setpgid(0, 0) == 0
            && libc::chdir(plan.cwd.as_ptr()) == 0
            && libc::pthread_sigmask(libc::SIG_SETMASK, &plan.signal_mask, std::ptr::null_mut()) == 0;
        if ready {
            // Best effort (the result is no reason to refuse a run).
            libc::nice(CHILD_NICENESS);
            libc::execve(plan.path.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
        }
        let errno = *libc::__errno_location();
        plan.errno.store(if errno == 0 { libc::ECHILD } else { errno }, Ordering::Release);
        libc::_exit(127)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Spawn {
        Spawn::new("/bin/sh", "/").args(["-c", script]).env("PATH", "/usr/bin:/bin")
    }

    async fn run_sh(script: &str, timeout: Duration, cap: usize) -> Result<Finished, RunError> {
        run(sh(script), Slots::new(1).try_take().unwrap(), timeout, cap).await
    }

    #[tokio::test]
    async fn captures_both_streams_and_the_exit_status() {
        let finished = run_sh("printf out; printf err >&2; exit 3", Duration::from_secs(10), 1024).await.unwrap();
        assert_eq!((finished.stdout.as_slice(), finished.stderr.as_slice()), (&b"out"[..], &b"err"[..]));
        assert_eq!(finished.status.code(), Some(3));
    }

    #[tokio::test]
    async fn the_environment_is_exactly_what_was_given_and_stdin_is_empty() {
        let spawn = Spawn::new("/usr/bin/env", "/tmp").env("ONLY", "this");
        let finished = run(spawn, Slots::new(1).try_take().unwrap(), Duration::from_secs(10), 1024).await.unwrap();
        assert_eq!(finished.stdout, b"ONLY=this\n");
        let finished = run_sh("pwd; cat", Duration::from_secs(10), 1024).await.unwrap();
        assert_eq!(finished.stdout, b"/\n");
    }

    #[tokio::test]
    async fn an_open_program_file_runs_and_is_the_only_descriptor_kept_past_stdio() {
        // Opened without close-on-exec: any descriptor the child did not drop itself shows below.
        let leaked = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: clearing the flags of a descriptor we own.
        assert_eq!(unsafe { libc::fcntl(leaked.as_raw_fd(), libc::F_SETFD, 0) }, 0);
        let shell = std::fs::File::open("/bin/sh").unwrap();
        let spawn = Spawn::executing(&shell, "/").args(["-c", "exec ls /proc/self/fd"]).env("PATH", "/usr/bin:/bin");
        let finished = run(spawn, Slots::new(1).try_take().unwrap(), Duration::from_secs(10), 1024).await.unwrap();
        assert!(finished.success(), "{}", String::from_utf8_lossy(&finished.stderr));
        // 0, 1, 2 and the directory `ls` itself opened.
        assert_eq!(String::from_utf8_lossy(&finished.stdout).split_whitespace().count(), 4, "{finished:?}");
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error() {
        let spawn = Spawn::new("/nonexistent/interpreter", "/");
        let error = run(spawn, Slots::new(1).try_take().unwrap(), Duration::from_secs(10), 1024).await.unwrap_err();
        assert!(
            matches!(&error, RunError::Spawn { cause, .. } if cause.contains("No such file")),
            "unexpected error: {error}"
        );
        let spawn = Spawn::new("/bin/true", "/nonexistent-directory");
        let error = run(spawn, Slots::new(1).try_take().unwrap(), Duration::from_secs(10), 1024).await.unwrap_err();
        assert!(matches!(error, RunError::Spawn { .. }), "unexpected error: {error}");
    }

    #[tokio::test]
    async fn a_slow_process_and_its_group_are_killed_at_the_deadline() {
        let error = run_sh("sleep 30 & sleep 30", Duration::from_millis(200), 1024).await.unwrap_err();
        assert!(matches!(error, RunError::Timeout(_)), "unexpected error: {error}");
    }

    #[tokio::test]
    async fn output_past_the_cap_kills_the_process() {
        let error = run_sh("yes", Duration::from_secs(10), 64 * 1024).await.unwrap_err();
        assert!(matches!(error, RunError::Overflow(_)), "unexpected error: {error}");
    }

    #[tokio::test]
    async fn slots_refuse_rather_than_queue() {
        let slots = Slots::new(1);
        let held = slots.try_take().unwrap();
        assert!(matches!(slots.try_take(), Err(RunError::NoSlot(1))));
        drop(held);
        assert_eq!(slots.in_use(), 0);
        assert!(slots.try_take().is_ok());
    }
}
