//! The core's side of the interpreter's fork-server mode (`ailang fork-server`; its module
//! `packages/ailang/src/fork_server.rs` defines the messages): one started interpreter per
//! core that forks each capsule run.
//!
//! Starting an interpreter process is most of a short run's cost (exec, dynamic loading, the
//! C library's start-up); a child forked from one already started pays none of it. The
//! server is executed through the verified interpreter's open file, as a spawned run is, and
//! is this core's child: it dies with the core (parent-death signal) and its runs die with
//! it. Each run is prepared as a spawned one is (its own process group, parent-death signal,
//! the lowered priority the server inherits, the capsule root as working directory, exactly
//! the capsule's environment, no descriptor past stdio), is killed with its group at its
//! deadline or past its output cap by the same supervisor, and holds its slot until reaped.
//! Forked runs share the server's address layout: acceptable for a memory-safe interpreter
//! that runs no native code from a transition.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::oneshot;

use crate::subprocess::{self, Child, Finished, RunError, Running, Slot, Spawn};

/// The mode's versions this core speaks: 2 added keeping checked programs (`P`).
const VERSIONS: [u32; 2] = [1, 2];
/// The largest message the server receives (its `fork_server::MAX_MESSAGE`).
const MAX_REQUEST: usize = 64 * 1024;
/// How many prepared programs the server keeps (its `prepared::CAPACITY`).
const PREPARED: usize = 16;
/// How long a started interpreter has to announce the mode.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest message the server sends.
const MAX_REPLY: usize = 64;

/// How the core starts interpreter runs (`world-core serve --interpreter-runs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RunMode {
    /// Forked from one started interpreter when it offers the mode; else spawned.
    #[default]
    Forked,
    /// A new interpreter process per run.
    Spawned,
}

/// The fork server of the core's pinned interpreter, restarted when it has gone.
pub struct Forks {
    current: Mutex<Arc<ForkServer>>,
    restart: tokio::sync::Mutex<()>,
}

impl Forks {
    /// Starts the server of `interpreter` (open, verified); `None` when it offers no such mode.
    pub async fn start(interpreter: &std::fs::File) -> Option<Forks> {
        match ForkServer::start(interpreter).await {
            Ok(server) => {
                tracing::info!(pid = server.pid, "interpreter runs are forked from its fork server");
                Some(Forks { current: Mutex::new(Arc::new(server)), restart: tokio::sync::Mutex::new(()) })
            }
            Err(reason) => {
                tracing::info!(%reason, "interpreter runs are spawned: the interpreter offers no fork server");
                None
            }
        }
    }

    /// The running server, started again when the last one has exited; `None` when it could
    /// not be (the run is then spawned).
    pub async fn server(&self, interpreter: &std::fs::File) -> Option<Arc<ForkServer>> {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if !current.shared.closed.load(Ordering::Acquire) {
            return Some(current);
        }
        let _restarting = self.restart.lock().await;
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if !current.shared.closed.load(Ordering::Acquire) {
            return Some(current);
        }
        match ForkServer::start(interpreter).await {
            Ok(server) => {
                tracing::warn!(pid = server.pid, "the interpreter's fork server had exited and was started again");
                let server = Arc::new(server);
                *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Arc::clone(&server);
                Some(server)
            }
            Err(reason) => {
                tracing::warn!(%reason, "the interpreter's fork server could not be started again; this run is spawned");
                None
            }
        }
    }
}

/// One started `ailang fork-server`.
pub struct ForkServer {
    pid: i32,
    /// It speaks version 2: it keeps the checked programs it is sent.
    keeps_programs: bool,
    /// The programs it was asked to keep (file, module rule, source), oldest first: it keeps
    /// as many, and forgets the oldest first too.
    prepared: Mutex<VecDeque<Kept>>,
    shared: Arc<Shared>,
    /// Killed and reaped with its group when the server is dropped.
    _process: Child,
}

/// A program the server was asked to keep: its file name, module rule and source.
type Kept = (String, bool, Box<[u8]>);

struct Shared {
    socket: AsyncFd<OwnedFd>,
    /// Runs sent and not yet reported exited, by id.
    runs: Mutex<HashMap<u64, Waiting>>,
    next_id: AtomicU64,
    /// Set once the server's end is gone: nothing more will be reported.
    closed: AtomicBool,
}

struct Waiting {
    started: Option<oneshot::Sender<Result<i32, i32>>>,
    exited: oneshot::Sender<i32>,
}

impl ForkServer {
    async fn start(interpreter: &std::fs::File) -> Result<ForkServer, String> {
        let (host, server) = socket_pair().map_err(|e| format!("cannot make its socket: {e}"))?;
        let spawn = Spawn::executing(interpreter, "/").args(["fork-server"]).stdin(&server);
        let mut process = subprocess::start(&spawn).map_err(|e| format!("cannot start it: {e}"))?;
        drop(server);
        let pid = process.pid();
        let interest = tokio::io::Interest::READABLE | tokio::io::Interest::WRITABLE;
        // SAFETY: the AsyncFd owns the descriptor, so it stays open and the same while registered.
        let socket =
            unsafe { AsyncFd::register_with_interest(host, interest) }.map_err(|e| e.into_parts().1.to_string())?;
        // The server writes to stderr only why it stopped; its stdout stays unused.
        if let Some(stderr) = process.stderr.take() {
            tokio::spawn(log_lines(stderr));
        }
        let hello = tokio::time::timeout(PROBE_TIMEOUT, receive(&socket)).await;
        let version = match hello {
            Ok(Ok(Some(message))) if let Some(version) = announced(&message) => version,
            Ok(Ok(_)) => return Err("it did not announce the mode".into()),
            Ok(Err(error)) => return Err(error.to_string()),
            Err(_) => return Err(format!("it announced nothing within {PROBE_TIMEOUT:?}")),
        };
        let shared = Arc::new(Shared {
            socket,
            runs: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
        });
        tokio::spawn(dispatch_replies(Arc::clone(&shared)));
        let prepared = Mutex::new(VecDeque::with_capacity(PREPARED));
        Ok(ForkServer { pid, keeps_programs: version >= 2, prepared, shared, _process: process })
    }

    /// Runs the interpreter on `args` with exactly `env`, starting in the directory `cwd` (whose
    /// path the environment names), within `timeout` and `cap` bytes per stream.
    pub async fn run(
        &self,
        args: &[&str],
        env: &[(&str, PathBuf)],
        cwd: BorrowedFd<'_>,
        _slot: Slot,
        timeout: Duration,
        cap: usize,
    ) -> Result<Finished, RunError> {
        let spawn_error = |cause: String| RunError::Spawn { program: "the interpreter's fork server".into(), cause };
        let (stdout, stdout_write) = subprocess::owned_pipe().map_err(|e| spawn_error(e.to_string()))?;
        let (stderr, stderr_write) = subprocess::owned_pipe().map_err(|e| spawn_error(e.to_string()))?;
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (started, started_reply) = oneshot::channel();
        let (exited, exited_reply) = oneshot::channel();
        self.shared
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Waiting { started: Some(started), exited });
        // From here a dropped run is killed and forgotten.
        let mut run = ForkedRun { shared: Arc::clone(&self.shared), id, exited: Some(exited_reply) };
        let request = encode_run(id, args, env);
        let fds = [cwd.as_raw_fd(), stdout_write.as_raw_fd(), stderr_write.as_raw_fd()];
        send(&self.shared.socket, &request, &fds).await.map_err(|e| spawn_error(e.to_string()))?;
        drop((stdout_write, stderr_write));
        // One deadline for the whole run, the fork included.
        let deadline = tokio::time::Instant::now() + timeout;
        match tokio::time::timeout_at(deadline, started_reply).await {
            Err(_) => return Err(RunError::Timeout(timeout)),
            Ok(Ok(Ok(_pid))) => {}
            Ok(Ok(Err(errno))) => return Err(spawn_error(std::io::Error::from_raw_os_error(errno).to_string())),
            Ok(Err(_)) => return Err(spawn_error("it exited".into())),
        }
        let stdout = subprocess::receiver(stdout).map_err(|e| RunError::Wait(e.to_string()))?;
        let stderr = subprocess::receiver(stderr).map_err(|e| RunError::Wait(e.to_string()))?;
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        match subprocess::supervise(&mut run, Some(stdout), Some(stderr), remaining, cap).await {
            // Reported with the run's whole deadline, as a spawned run's is.
            Err(RunError::Timeout(_)) => Err(RunError::Timeout(timeout)),
            outcome => outcome,
        }
    }

    /// Asks the server to keep `source` loaded and checked as `file` (module paths relaxed
    /// when `relax`), so that later runs of it start evaluating at once. Only for a source
    /// a run has just loaded and checked successfully, with that file name and rule: that
    /// run's limits are what bound the server's work (the mode's `P` message). Asked once per
    /// program while the server keeps it; a source too large for one message is not kept.
    pub async fn prepare(&self, file: &str, relax: bool, source: &[u8]) {
        if !self.keeps_programs || 2 + file.len() + 1 + source.len() > MAX_REQUEST {
            return;
        }
        let same = |(f, r, s): &Kept| f == file && *r == relax && **s == *source;
        {
            let mut prepared = self.prepared.lock().unwrap_or_else(|p| p.into_inner());
            if prepared.iter().any(same) {
                return;
            }
            if prepared.len() == PREPARED {
                prepared.pop_front();
            }
            prepared.push_back((file.to_owned(), relax, source.into()));
        }
        let message = [&[b'P', u8::from(relax)][..], file.as_bytes(), &[0], source].concat();
        if let Err(error) = send(&self.shared.socket, &message, &[]).await {
            tracing::debug!(%error, "the interpreter's fork server was not asked to keep a program");
            self.prepared.lock().unwrap_or_else(|p| p.into_inner()).retain(|kept| !same(kept));
        }
    }
}

/// A run the server has been asked for; dropped before it was reaped, it is killed.
struct ForkedRun {
    shared: Arc<Shared>,
    id: u64,
    /// Until the exit has been reported.
    exited: Option<oneshot::Receiver<i32>>,
}

impl Running for ForkedRun {
    fn kill_group(&self) {
        if self.exited.is_some() {
            // The server kills only runs it has not reaped, so a late request is harmless.
            let _ = try_send(&self.shared.socket, &[&[b'K'][..], &self.id.to_le_bytes()].concat());
        }
    }

    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let exited = self.exited.as_mut().expect("a run is waited for once");
        let status = exited.await.map_err(|_| std::io::Error::other("the fork server exited before the run"))?;
        self.exited = None;
        Ok(std::process::ExitStatus::from_raw(status))
    }
}

impl Drop for ForkedRun {
    fn drop(&mut self) {
        self.kill_group();
        self.shared.runs.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.id);
    }
}

/// Hands each reply to the run it names, until the server's end closes.
async fn dispatch_replies(shared: Arc<Shared>) {
    loop {
        let message = match receive(&shared.socket).await {
            Ok(Some(message)) => message,
            Ok(None) => break,
            Err(error) => {
                tracing::warn!(%error, "reading the interpreter's fork server failed");
                break;
            }
        };
        let Some((kind, id, value)) = decode_reply(&message) else {
            tracing::warn!(
                bytes = message.len(),
                "the interpreter's fork server sent a message this core does not know"
            );
            continue;
        };
        let mut runs = shared.runs.lock().unwrap_or_else(|p| p.into_inner());
        match kind {
            b'S' => {
                if let Some(started) = runs.get_mut(&id).and_then(|run| run.started.take()) {
                    let _ = started.send(Ok(value));
                }
            }
            b'F' => {
                if let Some(mut run) = runs.remove(&id)
                    && let Some(started) = run.started.take()
                {
                    let _ = started.send(Err(value));
                }
            }
            b'E' => {
                if let Some(run) = runs.remove(&id) {
                    let _ = run.exited.send(value);
                }
            }
            _ => tracing::warn!(kind, "the interpreter's fork server sent a reply this core does not know"),
        }
    }
    shared.closed.store(true, Ordering::Release);
    // Every run still waiting learns that no report will come.
    shared.runs.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

async fn log_lines(stderr: tokio::net::unix::pipe::Receiver) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::warn!(line = %world_model::quote_for_log(&line), "the interpreter's fork server");
    }
}

fn encode_run(id: u64, args: &[&str], env: &[(&str, PathBuf)]) -> Vec<u8> {
    let mut message = vec![b'R'];
    message.extend_from_slice(&id.to_le_bytes());
    message.extend_from_slice(&(args.len() as u32).to_le_bytes());
    for arg in args {
        message.extend_from_slice(arg.as_bytes());
        message.push(0);
    }
    for (key, value) in env {
        message.extend_from_slice(key.as_bytes());
        message.push(b'=');
        message.extend_from_slice(OsStr::as_bytes(value.as_os_str()));
        message.push(0);
    }
    message
}

/// The version a server's hello announces, when this core speaks it.
fn announced(hello: &[u8]) -> Option<u32> {
    let version = u32::from_le_bytes(hello.strip_prefix(b"H")?.try_into().ok()?);
    VERSIONS.contains(&version).then_some(version)
}

fn decode_reply(message: &[u8]) -> Option<(u8, u64, i32)> {
    let (&kind, rest) = message.split_first()?;
    let (id, rest) = rest.split_first_chunk::<8>()?;
    let value = <[u8; 4]>::try_from(rest).ok()?;
    Some((kind, u64::from_le_bytes(*id), i32::from_le_bytes(value)))
}

fn socket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair fills both descriptors on success, which we then own.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors owned by no one else; ours is made non-blocking for the runtime.
    unsafe {
        if libc::fcntl(fds[0], libc::F_SETFL, libc::O_NONBLOCK) != 0 {
            let error = std::io::Error::last_os_error();
            libc::close(fds[0]);
            libc::close(fds[1]);
            return Err(error);
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

/// The next message, or `None` once the server's end is closed.
async fn receive(socket: &AsyncFd<OwnedFd>) -> std::io::Result<Option<Vec<u8>>> {
    loop {
        let mut ready = socket.readable().await?;
        let mut buffer = [0u8; MAX_REPLY];
        let received = ready.try_io(|fd| {
            // SAFETY: receives into a local buffer from our socket.
            let n = unsafe { libc::recv(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len(), libc::MSG_DONTWAIT) };
            if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(n as usize) }
        });
        match received {
            Ok(Ok(0)) => return Ok(None),
            Ok(Ok(n)) => return Ok(Some(buffer[..n].to_vec())),
            Ok(Err(error)) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(Err(error)) if error.raw_os_error() == Some(libc::ECONNRESET) => return Ok(None),
            Ok(Err(error)) => return Err(error),
            Err(_would_block) => {}
        }
    }
}

/// Sends one message with `fds` attached, waiting while the socket is full.
async fn send(socket: &AsyncFd<OwnedFd>, message: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    loop {
        let mut ready = socket.writable().await?;
        match ready.try_io(|fd| send_now(fd.as_raw_fd(), message, fds)) {
            Ok(Err(error)) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(result) => return result,
            Err(_would_block) => {}
        }
    }
}

fn try_send(socket: &AsyncFd<OwnedFd>, message: &[u8]) -> std::io::Result<()> {
    send_now(socket.get_ref().as_raw_fd(), message, &[])
}

fn send_now(socket: RawFd, message: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    let payload = size_of_val(fds) as u32;
    // u64s keep the control buffer aligned for cmsghdr; room for a few descriptors.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec { iov_base: message.as_ptr().cast_mut().cast(), iov_len: message.len() };
    // SAFETY: an all-zero msghdr is valid; its pointers are set to live buffers below, and the
    // control message is written within `control` (CMSG_SPACE of a few descriptors).
    unsafe {
        let mut header: libc::msghdr = std::mem::zeroed();
        header.msg_iov = &mut iov;
        header.msg_iovlen = 1;
        if !fds.is_empty() {
            let space = libc::CMSG_SPACE(payload) as usize;
            assert!(space <= size_of_val(&control), "too many descriptors for one message");
            header.msg_control = control.as_mut_ptr().cast();
            header.msg_controllen = space;
            let cmsg = libc::CMSG_FIRSTHDR(&header);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(payload) as usize;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast::<RawFd>(), fds.len());
        }
        if libc::sendmsg(socket, &header, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) == -1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_request_carries_the_arguments_then_the_environment() {
        let message = encode_run(5, &["run", "main.ail"], &[("A", PathBuf::from("/r"))]);
        assert_eq!(message, [&b"R"[..], &5u64.to_le_bytes(), &2u32.to_le_bytes(), b"run\0main.ail\0A=/r\0"].concat());
    }

    #[test]
    fn a_hello_is_understood_only_in_a_version_this_core_speaks() {
        let hello = |version: u32| [&b"H"[..], &version.to_le_bytes()].concat();
        assert_eq!(announced(&hello(1)), Some(1));
        assert_eq!(announced(&hello(2)), Some(2));
        assert_eq!(announced(&hello(3)), None);
        assert_eq!(announced(b"H\x02\0\0"), None);
        assert_eq!(announced(&[b"S", &hello(2)[1..]].concat()), None);
    }

    #[test]
    fn replies_decode_or_are_refused() {
        let reply = [&b"E"[..], &9u64.to_le_bytes(), &(-1i32).to_le_bytes()].concat();
        assert_eq!(decode_reply(&reply), Some((b'E', 9, -1)));
        assert_eq!(decode_reply(&reply[..12]), None);
        assert_eq!(decode_reply(&[reply.as_slice(), b"x"].concat()), None);
    }
}
