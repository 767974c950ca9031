//! The capsule: one transition run of the pinned interpreter in a fresh
//! temporary root with exactly three environment variables.
//!
//! The interpreter is verified against its pin when the core starts and
//! whenever its file changes, and is executed through the verified open file
//! (`/proc/self/fd/N`), so a file swapped in after verification never runs.

use std::fs::File;
use std::io::Write as _;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, Mode, OFlags, unlinkat};
use sha2::{Digest, Sha256};
use tracing::Instrument as _;
use world_model::HashRef;

use crate::archive::Interpreter;
use crate::fork_server::Forks;
use crate::limits::CAPTURED_OUTPUT;
use crate::scratch;
use crate::subprocess::{self, Finished, RunError, Slots, Spawn};

/// The transition's source in a capsule root.
pub const SOURCE_PATH: &str = "host/capsule/main.ail";
/// The call's input in a capsule root: one JSON string, the text `main` receives.
pub const ARGS_FILE: &str = "args.json";
/// The interpreter's arguments for one capsule run, relative to the root.
pub const ARGV: [&str; 9] = ["run", "--quiet", "--caps", "", "--entry", "main", "--args-file", ARGS_FILE, SOURCE_PATH];

/// The longest run whose source the fork server is asked to keep checked: checking it again
/// takes the server no longer than that, and it forks no run meanwhile.
const PREPARE_WITHIN: Duration = Duration::from_millis(50);

/// The capsule's three environment variables for a root at `root`.
pub fn environment(root: &Path) -> [(&'static str, PathBuf); 3] {
    [
        ("AILANG_FS_SANDBOX", root.to_owned()),
        ("AILANG_RELAX_MODULES", PathBuf::from("1")),
        ("AILANG_CACHE_DIR", root.join(".cache")),
    ]
}

#[derive(Debug, thiserror::Error)]
pub enum CapsuleError {
    #[error("the archived interpreter no longer matches its pin {pin}: {cause}")]
    Integrity { pin: HashRef, cause: String },
    #[error("capsule root: {0}")]
    Root(String),
    #[error(transparent)]
    Run(#[from] RunError),
}

/// Identity of the file's current contents, cheap to compare per run.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
    ctime: i64,
    ctime_nsec: i64,
}

fn stamp(file: &File) -> std::io::Result<Stamp> {
    let m = file.metadata()?;
    Ok(Stamp {
        size: m.size(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec(),
        ctime: m.ctime(),
        ctime_nsec: m.ctime_nsec(),
    })
}

/// The pinned interpreter, held open and verified.
pub struct VerifiedInterpreter {
    pub interpreter: Interpreter,
    file: File,
    verified: Mutex<Stamp>,
}

impl VerifiedInterpreter {
    /// Opens the archived file and checks that its bytes hash to the pin.
    pub fn open(interpreter: Interpreter) -> Result<Self, CapsuleError> {
        let integrity = |cause: String| CapsuleError::Integrity { pin: interpreter.reference, cause };
        let file = File::open(&interpreter.path).map_err(|e| integrity(e.to_string()))?;
        let verified = verify(&file, &interpreter.reference).map_err(integrity)?;
        Ok(Self { interpreter, file, verified: Mutex::new(verified) })
    }

    /// The open, verified file (what runs are executed from).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Re-hashes only when the open file's stamp changed since the last check.
    fn ensure_verified(&self) -> Result<(), CapsuleError> {
        let pin = self.interpreter.reference;
        let integrity = |cause: String| CapsuleError::Integrity { pin, cause };
        let current = stamp(&self.file).map_err(|e| integrity(e.to_string()))?;
        let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if *verified != current {
            *verified = verify(&self.file, &pin).map_err(integrity)?;
        }
        Ok(())
    }
}

fn verify(file: &File, pin: &HashRef) -> Result<Stamp, String> {
    use std::io::{Read, Seek};
    let before = stamp(file).map_err(|e| e.to_string())?;
    let mut reader = file;
    reader.rewind().map_err(|e| e.to_string())?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 256 * 1024];
    loop {
        let n = reader.read(&mut buffer).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    let actual = HashRef::from_digest(hasher.finalize().into());
    if actual != *pin {
        return Err(format!("its bytes hash to {actual}"));
    }
    if stamp(file).map_err(|e| e.to_string())? != before {
        return Err("the file changed while it was being verified".into());
    }
    Ok(before)
}

/// The directory capsule roots are made in, held open: each root is made, opened and removed
/// relative to it, so no call walks its path.
#[derive(Clone)]
pub struct RootsDir {
    path: PathBuf,
    dir: Arc<OwnedFd>,
}

impl RootsDir {
    pub fn open(path: &Path) -> std::io::Result<RootsDir> {
        let dir = rustix::fs::open(path, DIRECTORY, Mode::empty())?;
        Ok(RootsDir { path: path.to_owned(), dir: Arc::new(dir) })
    }
}

/// A fresh root laid out as the capsule's argv names it, removed when dropped. Both steps
/// work relative to descriptors of the directories made: per call they neither walk a path
/// nor follow a link the run may have left behind.
pub struct Root {
    path: PathBuf,
    parent: Arc<OwnedFd>,
    name: String,
    root: OwnedFd,
    host: OwnedFd,
    capsule: OwnedFd,
    /// Whether [`ARGS_FILE`] was written.
    args: bool,
}

/// [`SOURCE_PATH`]'s directories and file, as [`Root`] makes them.
const SOURCE_DIRS: [&str; 2] = ["host", "capsule"];
const SOURCE_FILE: &str = "main.ail";
/// How a directory of a root is opened.
const DIRECTORY: OFlags = OFlags::RDONLY.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

impl Root {
    /// A root named `prefix…` in the temporary directory holding `source` at [`SOURCE_PATH`]
    /// and, when given, `args` at [`ARGS_FILE`]. The name records this process as its maker
    /// ([`scratch::root_prefix`]), so a root a killed core leaves is removed at the next start.
    pub fn stage(prefix: &str, source: &[u8], args: Option<&[u8]>) -> std::io::Result<Root> {
        Root::stage_in(&RootsDir::open(&std::env::temp_dir())?, prefix, source, args)
    }

    /// [`Root::stage`] in `parent`.
    pub fn stage_in(parent: &RootsDir, prefix: &str, source: &[u8], args: Option<&[u8]>) -> std::io::Result<Root> {
        let prefix = scratch::root_prefix(prefix);
        let mut attempts = 0;
        let name = loop {
            let name = format!("{prefix}{}", hex::encode(&crate::session::random_bytes()[..8]));
            match rustix::fs::mkdirat(&*parent.dir, name.as_str(), Mode::RWXU) {
                Ok(()) => break name,
                Err(rustix::io::Errno::EXIST) if attempts < 8 => attempts += 1,
                Err(error) => return Err(error.into()),
            }
        };
        let path = parent.path.join(&name);
        let made = || -> std::io::Result<(OwnedFd, OwnedFd, OwnedFd)> {
            let subdir = |parent: &OwnedFd, name: &str| -> std::io::Result<OwnedFd> {
                rustix::fs::mkdirat(parent, name, Mode::RWXU)?;
                Ok(rustix::fs::openat(parent, name, DIRECTORY, Mode::empty())?)
            };
            let root = rustix::fs::openat(&*parent.dir, name.as_str(), DIRECTORY, Mode::empty())?;
            let host = subdir(&root, SOURCE_DIRS[0])?;
            let capsule = subdir(&host, SOURCE_DIRS[1])?;
            write_new(&capsule, SOURCE_FILE, source)?;
            if let Some(args) = args {
                write_new(&root, ARGS_FILE, args)?;
            }
            Ok((root, host, capsule))
        };
        match made() {
            Ok((root, host, capsule)) => {
                Ok(Root { path, parent: Arc::clone(&parent.dir), name, root, host, capsule, args: args.is_some() })
            }
            Err(error) => {
                let _ = std::fs::remove_dir_all(&path);
                Err(error)
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        // What the root was made with, deepest first; a run that added (or took away)
        // anything sends the removal the thorough way.
        let removed = unlinkat(&self.capsule, SOURCE_FILE, AtFlags::empty()).is_ok()
            && unlinkat(&self.host, SOURCE_DIRS[1], AtFlags::REMOVEDIR).is_ok()
            && unlinkat(&self.root, SOURCE_DIRS[0], AtFlags::REMOVEDIR).is_ok()
            && (!self.args || unlinkat(&self.root, ARGS_FILE, AtFlags::empty()).is_ok())
            && unlinkat(&*self.parent, self.name.as_str(), AtFlags::REMOVEDIR).is_ok();
        if !removed
            && let Err(error) = std::fs::remove_dir_all(&self.path)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(root = %self.path.display(), %error, "a capsule root could not be removed");
        }
    }
}

fn write_new(dir: &OwnedFd, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
    File::from(rustix::fs::openat(dir, name, flags, Mode::RUSR | Mode::WUSR)?).write_all(bytes)
}

/// Where capsule roots are made: `configured` when given; else the temporary directory when it
/// is memory-backed, else `/dev/shm` when that is and may be written, else the temporary
/// directory. A root is written, read once and removed per call: on a disk that is metadata
/// work (and journal commits) a tmpfs does not do.
pub fn roots_dir(configured: Option<&Path>) -> PathBuf {
    let temp = std::env::temp_dir();
    choose_roots_dir(configured, &[&temp, Path::new("/dev/shm")], usable_memory_dir).unwrap_or(temp)
}

fn choose_roots_dir(
    configured: Option<&Path>,
    candidates: &[&Path],
    memory_backed: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    configured.or_else(|| candidates.iter().copied().find(|dir| memory_backed(dir))).map(Path::to_path_buf)
}

/// A directory on tmpfs or ramfs that this process may create entries in.
fn usable_memory_dir(dir: &Path) -> bool {
    // ramfs has no constant in libc.
    const RAMFS_MAGIC: libc::c_long = 0x8584_58f6;
    let memory = rustix::fs::statfs(dir).is_ok_and(|fs| matches!(fs.f_type, libc::TMPFS_MAGIC | RAMFS_MAGIC));
    memory && rustix::fs::access(dir, rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK).is_ok()
}

/// What runs a transition: the seam between the invocation rules and the interpreter, so
/// the rules can be tested in-process with a scripted runner while `tests/` runs the real one.
pub trait Runner: Send + Sync {
    /// The pin of the interpreter this runner executes.
    fn interpreter_ref(&self) -> HashRef;
    /// Subprocess slots in use now.
    fn slots_in_use(&self) -> usize;
    /// Runs `source` with `input` (the text `main` receives) within `timeout`.
    fn run<'a>(
        &'a self,
        source: &'a [u8],
        input: &'a str,
        timeout: Duration,
    ) -> futures::future::BoxFuture<'a, Result<Finished, CapsuleError>>;
}

/// The production runner: the verified, pinned interpreter under the core's slot limit.
pub struct Capsule {
    pub interpreter: VerifiedInterpreter,
    pub slots: Slots,
    /// Where each run's root is made ([`roots_dir`]).
    pub roots: RootsDir,
    /// The interpreter's fork server, when runs are forked.
    pub forks: Option<Forks>,
}

impl Capsule {
    /// Runs `source` with `input` (the text `main` receives) within `timeout`, in a fresh root:
    /// forked from the interpreter's fork server when there is one, else spawned.
    pub async fn execute(&self, source: &[u8], input: &str, timeout: Duration) -> Result<Finished, CapsuleError> {
        let slot = self.slots.try_take()?;
        let interpreter = &self.interpreter;
        interpreter.ensure_verified()?;
        let args = serde_json::to_vec(input).map_err(|e| CapsuleError::Root(e.to_string()))?;
        let root = Root::stage_in(&self.roots, scratch::CAPSULE, source, Some(&args))
            .map_err(|e| CapsuleError::Root(e.to_string()))?;
        let environment = environment(&root.path);
        let span = tracing::info_span!(
            "capsule.run",
            "world.interpreter.ref" = %interpreter.interpreter.reference,
            process.exit.code = tracing::field::Empty,
        );
        let server = match &self.forks {
            Some(forks) => forks.server(&interpreter.file).await,
            None => None,
        };
        let finished = match server {
            Some(server) => {
                let started = Instant::now();
                let run = server.run(&ARGV, &environment, root.root.as_fd(), slot, timeout, CAPTURED_OUTPUT);
                let finished = run.instrument(span.clone()).await?;
                // The run loaded and checked the source, quickly: the server, which forks
                // every run one at a time, may do the same once to keep it checked. The
                // capsule's environment relaxes module paths.
                if finished.success() && started.elapsed() <= PREPARE_WITHIN {
                    server.prepare(SOURCE_PATH, true, source).await;
                }
                finished
            }
            None => {
                let spawn = environment
                    .into_iter()
                    .fold(Spawn::executing(&interpreter.file, &root.path).args(ARGV), |spawn, (key, value)| {
                        spawn.env(key, value)
                    });
                subprocess::run(spawn, slot, timeout, CAPTURED_OUTPUT).instrument(span.clone()).await?
            }
        };
        if let Some(code) = finished.status.code() {
            span.record("process.exit.code", code);
        }
        Ok(finished)
    }
}

impl Runner for Capsule {
    fn interpreter_ref(&self) -> HashRef {
        self.interpreter.interpreter.reference
    }

    fn slots_in_use(&self) -> usize {
        self.slots.in_use()
    }

    fn run<'a>(
        &'a self,
        source: &'a [u8],
        input: &'a str,
        timeout: Duration,
    ) -> futures::future::BoxFuture<'a, Result<Finished, CapsuleError>> {
        Box::pin(self.execute(source, input, timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(dir: &Path) -> Vec<String> {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(next) = stack.pop() {
            for entry in std::fs::read_dir(&next).unwrap() {
                let path = entry.unwrap().path();
                found.push(path.strip_prefix(dir).unwrap().display().to_string());
                if path.is_dir() && !path.is_symlink() {
                    stack.push(path);
                }
            }
        }
        found.sort();
        found
    }

    #[test]
    fn a_root_holds_the_source_and_the_input_where_the_argv_names_them_and_goes_when_dropped() {
        let root = Root::stage("t-", b"module source", Some(br#""{}""#)).unwrap();
        let path = root.path.clone();
        assert_eq!(tree(&path), ["args.json", "host", "host/capsule", "host/capsule/main.ail"]);
        assert_eq!(std::fs::read(path.join(SOURCE_PATH)).unwrap(), b"module source");
        assert_eq!(std::fs::read(path.join(ARGS_FILE)).unwrap(), br#""{}""#);
        drop(root);
        assert!(!path.exists());
    }

    #[test]
    fn roots_go_where_configured_else_in_the_first_memory_backed_candidate() {
        let (temp, shm, mine) = (Path::new("/t"), Path::new("/s"), Path::new("/mine"));
        let only = |memory: &'static str| move |dir: &Path| dir == Path::new(memory);
        assert_eq!(choose_roots_dir(Some(mine), &[temp, shm], only("/t")).as_deref(), Some(mine));
        assert_eq!(choose_roots_dir(None, &[temp, shm], only("/t")).as_deref(), Some(temp));
        assert_eq!(choose_roots_dir(None, &[temp, shm], only("/s")).as_deref(), Some(shm));
        assert_eq!(choose_roots_dir(None, &[temp, shm], only("/x")), None);
        // A directory on disk is not memory-backed; a root is made in the one given.
        let disk = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        assert!(!usable_memory_dir(disk.path()));
        let root = Root::stage_in(&RootsDir::open(disk.path()).unwrap(), "t-", b"m", None).unwrap();
        assert_eq!(root.path().parent(), Some(disk.path()));
    }

    #[test]
    fn roots_are_made_and_removed_in_the_directory_held_open_without_walking_its_path() {
        let base = tempfile::tempdir().unwrap();
        let (named, moved) = (base.path().join("roots"), base.path().join("moved"));
        std::fs::create_dir(&named).unwrap();
        let roots = RootsDir::open(&named).unwrap();
        std::fs::rename(&named, &moved).unwrap();
        let root = Root::stage_in(&roots, "t-", b"m", None).unwrap();
        let name = root.path().file_name().unwrap().to_owned();
        assert!(moved.join(&name).join(SOURCE_PATH).is_file());
        drop(root);
        assert_eq!(std::fs::read_dir(&moved).unwrap().count(), 0);
    }

    #[test]
    fn a_root_staged_without_input_holds_only_the_source() {
        let root = Root::stage("t-", b"m", None).unwrap();
        let path = root.path.clone();
        assert_eq!(tree(&path), ["host", "host/capsule", "host/capsule/main.ail"]);
        drop(root);
        assert!(!path.exists());
    }

    #[test]
    fn a_root_a_run_added_to_is_removed_whole() {
        let root = Root::stage("t-", b"m", Some(b"\"\"")).unwrap();
        let path = root.path.clone();
        std::fs::create_dir_all(path.join(".cache/deep")).unwrap();
        std::fs::write(path.join(".cache/deep/x"), b"x").unwrap();
        std::fs::write(path.join("host/capsule/extra"), b"x").unwrap();
        drop(root);
        assert!(!path.exists());
    }

    #[test]
    fn removing_a_root_never_follows_a_link_a_run_left_in_place_of_its_directories() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(outside.path().join("capsule")).unwrap();
        std::fs::write(outside.path().join("capsule/main.ail"), b"keep").unwrap();
        std::fs::write(outside.path().join("args.json"), b"keep").unwrap();
        let root = Root::stage("t-", b"m", Some(b"\"\"")).unwrap();
        let path = root.path.clone();
        std::fs::rename(path.join("host"), path.join("moved")).unwrap();
        std::os::unix::fs::symlink(outside.path(), path.join("host")).unwrap();
        drop(root);
        assert!(!path.exists());
        assert_eq!(tree(outside.path()), ["args.json", "capsule", "capsule/main.ail"]);
    }
}
