//! `ailang fork-server`: one started interpreter that forks a fresh child per run.
//!
//! A host that runs many short programs pays a process start per run (exec, dynamic
//! loading, the C library's start-up); forking an interpreter that has already started does
//! not. The host starts `ailang fork-server` with one end of a `SOCK_SEQPACKET` unix socket
//! as its stdin and sends one message per run. The server is single-threaded and never runs
//! a program itself: each run is a child that is prepared exactly as a host prepares a
//! spawned `ailang`, then runs the CLI.
//!
//! Messages (integers little-endian):
//!
//! * server → host, once at start: `H`, version (u32). A host that receives anything else,
//!   or nothing, spawns each run instead.
//! * host → server: `R`, id (u64), argument count (u32), the arguments (without the program
//!   name), then `KEY=VALUE` environment entries, each NUL-terminated; three descriptors ride
//!   along: the directory the run starts in, and the write ends of its stdout and stderr. The
//!   child takes its own process group and SIGKILL on the server's death, `fchdir`s into the
//!   directory, has `/dev/null` as stdin, exactly the environment given and no other
//!   descriptor, and runs the CLI on the arguments.
//! * server → host: `S`, id, pid (i32) once forked; or `F`, id, errno (i32) when it was not.
//! * host → server: `K`, id: kill the run's process group (if it has not been reaped).
//! * server → host: `E`, id, wait status (i32) once the run has exited, its group has been
//!   killed (so nothing it started outlives it) and it has been reaped.
//! * host → server (version 2): `P`, module rule (u8: 1 when module paths are relaxed), the
//!   file name and a NUL, then the source: keep this program loaded and checked, so that a
//!   run of exactly that source, file name and rule starts evaluating at once
//!   ([`crate::prepared`]; the last [`crate::prepared::CAPACITY`] are kept). The server
//!   runs no program, but this makes it parse and check one, so a host sends it only for a
//!   source a run of its own has just loaded and checked successfully, under the run's
//!   limits: the work is deterministic, so it is bounded by what that run was allowed.
//!
//! The server exits, killing what still runs, when the host closes its end.

use std::collections::HashMap;
use std::ffi::CString;
use std::io::Error;

/// What `H` announces.
pub const VERSION: u32 = 2;
/// The largest message either side sends.
pub const MAX_MESSAGE: usize = 64 * 1024;

/// Serves runs on the socket at stdin until the host closes it; `run` is the CLI (arguments
/// without the program name, returning the exit code). Returns the server's exit code.
pub fn serve(run: fn(Vec<String>) -> i32) -> i32 {
    match Server::start().and_then(|mut server| server.serve(run)) {
        Ok(()) => 0,
        Err(error) => {
            eprintln!("ailang fork-server: {error}");
            1
        }
    }
}

struct Server {
    socket: libc::c_int,
    children: libc::c_int,
    null: libc::c_int,
    /// The signal mask before SIGCHLD was blocked: what each run starts with.
    mask: libc::sigset_t,
    /// Runs not yet reaped, by pid.
    running: HashMap<libc::pid_t, u64>,
}

/// A run's request, decoded.
struct Request {
    id: u64,
    args: Vec<String>,
    env: Vec<CString>,
    /// Start directory, stdout, stderr.
    fds: [libc::c_int; 3],
}

fn check(result: libc::c_int) -> Result<libc::c_int, Error> {
    if result == -1 { Err(Error::last_os_error()) } else { Ok(result) }
}

impl Server {
    fn start() -> Result<Server, Error> {
        // SAFETY: plain system calls on descriptors and structures owned by this function.
        unsafe {
            let mut kind: libc::c_int = 0;
            let mut len = size_of::<libc::c_int>() as libc::socklen_t;
            let is_socket = libc::getsockopt(0, libc::SOL_SOCKET, libc::SO_TYPE, (&raw mut kind).cast(), &mut len) == 0;
            if !is_socket || kind != libc::SOCK_SEQPACKET {
                return Err(Error::other("stdin is not a SOCK_SEQPACKET socket: a host starts this mode"));
            }
            let socket = check(libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3))?;
            let null = check(libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC))?;
            check(libc::dup2(null, 0))?;
            let mut sigchld: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut sigchld);
            libc::sigaddset(&mut sigchld, libc::SIGCHLD);
            let mut mask: libc::sigset_t = std::mem::zeroed();
            check(libc::sigprocmask(libc::SIG_BLOCK, &sigchld, &mut mask))?;
            let children = check(libc::signalfd(-1, &sigchld, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK))?;
            let server = Server { socket, children, null, mask, running: HashMap::new() };
            let mut hello = vec![b'H'];
            hello.extend_from_slice(&VERSION.to_le_bytes());
            server.send(&hello)?;
            Ok(server)
        }
    }

    fn serve(&mut self, run: fn(Vec<String>) -> i32) -> Result<(), Error> {
        let mut buffer = vec![0u8; MAX_MESSAGE];
        loop {
            let mut ready =
                [self.socket, self.children].map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
            // SAFETY: polls two descriptors this server owns.
            if unsafe { libc::poll(ready.as_mut_ptr(), 2, -1) } == -1 {
                let error = Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error);
            }
            if ready[1].revents != 0 {
                self.reap()?;
            }
            if ready[0].revents != 0 {
                match self.receive(&mut buffer)? {
                    Received::Closed => {
                        self.kill_all();
                        return Ok(());
                    }
                    Received::Run(request) => self.start_run(request, run)?,
                    Received::Prepare { file, relax, source } => prepare(file, relax, source),
                    Received::Kill(id) => self.kill(id),
                    Received::Refused(id, errno) => self.reply(b'F', id, errno)?,
                    Received::Ignored => {}
                }
            }
        }
    }

    fn send(&self, message: &[u8]) -> Result<(), Error> {
        // SAFETY: sends bytes from a live slice on our socket.
        let sent = unsafe { libc::send(self.socket, message.as_ptr().cast(), message.len(), libc::MSG_NOSIGNAL) };
        if sent == -1 { Err(Error::last_os_error()) } else { Ok(()) }
    }

    fn reply(&self, kind: u8, id: u64, value: i32) -> Result<(), Error> {
        let mut message = Vec::with_capacity(13);
        message.push(kind);
        message.extend_from_slice(&id.to_le_bytes());
        message.extend_from_slice(&value.to_le_bytes());
        self.send(&message)
    }

    fn receive(&self, buffer: &mut [u8]) -> Result<Received, Error> {
        const FDS: usize = 3;
        // u64s keep the control buffer aligned for cmsghdr.
        let mut control = [0u64; 8];
        let mut iov = libc::iovec { iov_base: buffer.as_mut_ptr().cast(), iov_len: buffer.len() };
        // SAFETY: an all-zero msghdr is valid; its pointers are set to live buffers below.
        let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
        header.msg_iov = &mut iov;
        header.msg_iovlen = 1;
        header.msg_control = control.as_mut_ptr().cast();
        header.msg_controllen = size_of_val(&control);
        // SAFETY: receives into the buffers `header` points at.
        let n = unsafe { libc::recvmsg(self.socket, &mut header, libc::MSG_CMSG_CLOEXEC) };
        if n == -1 {
            let error = Error::last_os_error();
            return match error.kind() {
                std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock => Ok(Received::Ignored),
                _ => Err(error),
            };
        }
        if n == 0 {
            return Ok(Received::Closed);
        }
        let mut fds = Vec::new();
        // SAFETY: walks the control messages the kernel wrote into `control`.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&header);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize) / size_of::<libc::c_int>();
                    let data = libc::CMSG_DATA(cmsg) as *const libc::c_int;
                    fds.extend((0..count).map(|i| data.add(i).read_unaligned()));
                }
                cmsg = libc::CMSG_NXTHDR(&header, cmsg);
            }
        }
        let message = &buffer[..n as usize];
        let id = message.get(1..9).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
        let truncated = header.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0;
        let request = match (message[0], id) {
            (b'K', Some(id)) if fds.is_empty() => return Ok(Received::Kill(id)),
            (b'P', _) if fds.is_empty() && !truncated => return Ok(decode_prepare(&message[1..])),
            (b'R', Some(id)) if !truncated && fds.len() == FDS => {
                decode_run(id, &message[9..], [fds[0], fds[1], fds[2]])
            }
            (b'R', Some(id)) => Err(id),
            _ => {
                close_all(&fds);
                return Ok(Received::Ignored);
            }
        };
        Ok(match request {
            Ok(request) => Received::Run(request),
            Err(id) => {
                close_all(&fds);
                Received::Refused(id, libc::EINVAL)
            }
        })
    }

    fn start_run(&mut self, request: Request, run: fn(Vec<String>) -> i32) -> Result<(), Error> {
        // SAFETY: this process is single-threaded, so the child may do anything the parent could.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            self.become_run(request, run);
        }
        let errno = Error::last_os_error().raw_os_error().unwrap_or(libc::EAGAIN);
        close_all(&request.fds);
        if pid == -1 {
            return self.reply(b'F', request.id, errno);
        }
        self.running.insert(pid, request.id);
        self.reply(b'S', request.id, pid)
    }

    /// The child: prepared as a spawned `ailang` would be, then the CLI. Never returns.
    fn become_run(&self, request: Request, run: fn(Vec<String>) -> i32) -> ! {
        let [dir, stdout, stderr] = request.fds;
        // SAFETY: system calls on this child's own descriptors, mask and environment; the
        // child is single-threaded, so changing the environment races with nothing.
        unsafe {
            let parent = libc::getppid();
            let ready = libc::sigprocmask(libc::SIG_SETMASK, &self.mask, std::ptr::null_mut()) == 0
                && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0
                // The server died before the line above: nothing would end this run with it.
                && libc::getppid() == parent
                && libc::setpgid(0, 0) == 0
                && libc::fchdir(dir) == 0
                && libc::dup2(self.null, 0) == 0
                && libc::dup2(stdout, 1) == 1
                && libc::dup2(stderr, 2) == 2
                && libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) == 0
                && libc::clearenv() == 0
                && request.env.iter().all(|entry| libc::putenv(entry.as_ptr().cast_mut()) == 0);
            if !ready {
                let error = Error::last_os_error();
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    format!("ailang fork-server: cannot prepare the run: {error}\n").as_bytes(),
                );
                libc::_exit(127);
            }
            // `putenv` keeps pointers into the strings: they live until the process exits.
            std::mem::forget(request.env);
        }
        let code = std::panic::catch_unwind(move || run(request.args)).unwrap_or(101);
        std::process::exit(code)
    }

    fn kill(&self, id: u64) {
        if let Some((pid, _)) = self.running.iter().find(|(_, run)| **run == id) {
            // SAFETY: signals the group of an unreaped child of ours, so the id is not reused.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    }

    fn kill_all(&self) {
        for pid in self.running.keys() {
            // SAFETY: as in `kill`.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    }

    /// Reports every run that has exited, after killing what it left in its group.
    fn reap(&mut self) -> Result<(), Error> {
        let mut drained = [0u8; 128 * 8];
        // SAFETY: reads pending signal records into a local buffer.
        while unsafe { libc::read(self.children, drained.as_mut_ptr().cast(), drained.len()) } > 0 {}
        loop {
            // SAFETY: an all-zero siginfo_t is valid; waitid fills it.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
            // SAFETY: looks at (without reaping) any exited child of ours.
            if unsafe { libc::waitid(libc::P_ALL, 0, &mut info, flags) } == -1 {
                return Ok(()); // ECHILD: none left
            }
            // SAFETY: waitid filled a SIGCHLD record (or left it zeroed: no child).
            let pid = unsafe { info.si_pid() };
            if pid == 0 {
                return Ok(());
            }
            let mut status = 0;
            // SAFETY: the exited leader is unreaped, so its group id still names its group;
            // then reaps exactly that child.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            if let Some(id) = self.running.remove(&pid) {
                self.reply(b'E', id, status)?;
            }
        }
    }
}

enum Received {
    Run(Request),
    Kill(u64),
    Prepare {
        file: String,
        relax: bool,
        source: String,
    },
    /// A run that cannot start, with the errno to answer.
    Refused(u64, i32),
    Ignored,
    Closed,
}

fn close_all(fds: &[libc::c_int]) {
    for fd in fds {
        // SAFETY: closes descriptors received with this message, which we own.
        unsafe { libc::close(*fd) };
    }
}

/// A `P` message after its kind; one that is not well formed is ignored, as nothing waits
/// for its answer.
fn decode_prepare(body: &[u8]) -> Received {
    let Some((&rule, rest)) = body.split_first() else { return Received::Ignored };
    let Some(end) = rest.iter().position(|b| *b == 0) else { return Received::Ignored };
    match (rule, std::str::from_utf8(&rest[..end]), std::str::from_utf8(&rest[end + 1..])) {
        (0 | 1, Ok(file), Ok(source)) => {
            Received::Prepare { file: file.to_owned(), relax: rule == 1, source: source.to_owned() }
        }
        _ => Received::Ignored,
    }
}

/// Loads and checks a program on a large stack, as a run would, and keeps it.
fn prepare(file: String, relax: bool, source: String) {
    // The program stays in this thread's table; only whether it was kept crosses back.
    let kept = crate::stack::run_on_big_stack(move || crate::prepared::prepare(&file, &source, relax));
    if let Err(error) = kept {
        eprintln!("ailang fork-server: cannot set up a stack to check a program: {error}");
    }
}

/// The arguments and environment of an `R` message after its id.
fn decode_run(id: u64, body: &[u8], fds: [libc::c_int; 3]) -> Result<Request, u64> {
    let (count, strings) = body.split_first_chunk::<4>().ok_or(id)?;
    let count = u32::from_le_bytes(*count) as usize;
    let strings = strings.strip_suffix(&[0]).ok_or(id)?;
    let mut parts = strings.split(|b| *b == 0);
    let args = parts
        .by_ref()
        .take(count)
        .map(|part| String::from_utf8(part.to_vec()).map_err(|_| id))
        .collect::<Result<Vec<_>, _>>()?;
    if args.len() != count {
        return Err(id);
    }
    let env = parts
        .filter(|entry| entry.contains(&b'='))
        .map(|entry| CString::new(entry).map_err(|_| id))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Request { id, args, env, fds })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_request_decodes_into_arguments_and_environment() {
        let body = [&2u32.to_le_bytes()[..], b"run\0main.ail\0A=1\0B=x=y\0"].concat();
        let request = decode_run(7, &body, [3, 4, 5]).unwrap();
        assert_eq!(request.args, ["run", "main.ail"]);
        assert_eq!(request.env, [c"A=1", c"B=x=y"]);
        assert_eq!((request.id, request.fds), (7, [3, 4, 5]));
    }

    #[test]
    fn a_prepare_message_names_the_rule_the_file_and_the_source() {
        let Received::Prepare { file, relax, source } = decode_prepare(b"\x01main.ail\0module main\n") else {
            panic!("not decoded");
        };
        assert_eq!((file.as_str(), relax, source.as_str()), ("main.ail", true, "module main\n"));
        for bad in [&b""[..], b"\x01main.ail", b"\x02main.ail\0x", b"\x00main.ail\0\xff"] {
            assert!(matches!(decode_prepare(bad), Received::Ignored), "{bad:?}");
        }
    }

    #[test]
    fn a_malformed_run_request_is_refused_by_id() {
        let short = [&3u32.to_le_bytes()[..], b"run\0main.ail\0"].concat();
        assert_eq!(decode_run(9, &short, [0; 3]).err(), Some(9));
        assert_eq!(decode_run(9, b"\x01\0\0\0run", [0; 3]).err(), Some(9), "unterminated");
        assert_eq!(decode_run(9, b"\x01", [0; 3]).err(), Some(9));
        let not_text = [&1u32.to_le_bytes()[..], b"\xff\0"].concat();
        assert_eq!(decode_run(9, &not_text, [0; 3]).err(), Some(9));
    }
}
