//! The capsule: one transition run of the pinned interpreter in a fresh
//! temporary root with exactly three environment variables.
//!
//! The interpreter is verified against its pin when the core starts and
//! whenever its file changes, and is executed through the verified open file
//! (`/proc/self/fd/N`), so a file swapped in after verification never runs.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tracing::Instrument as _;
use world_model::HashRef;

use crate::archive::Interpreter;
use crate::subprocess::{self, Finished, RunError, Slots, Spawn};

/// Per-stream capture cap of a capsule run.
pub const CAPSULE_OUTPUT_CAP: usize = 8 * 1024 * 1024;

/// The transition's source in a capsule root.
pub const SOURCE_PATH: &str = "host/capsule/main.ail";
/// The call's input in a capsule root: one JSON string, the text `main` receives.
pub const ARGS_FILE: &str = "args.json";
/// The interpreter's arguments for one capsule run, relative to the root.
pub const ARGV: [&str; 9] = ["run", "--quiet", "--caps", "", "--entry", "main", "--args-file", ARGS_FILE, SOURCE_PATH];

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

/// Writes `source` at [`SOURCE_PATH`] under `root`.
pub fn stage_source(root: &Path, source: &[u8]) -> std::io::Result<()> {
    let path = root.join(SOURCE_PATH);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, source)
}

/// Runs `source` with `input` (the text `main` receives) within `timeout`.
pub async fn run(
    interpreter: &VerifiedInterpreter,
    source: &[u8],
    input: &str,
    slots: &Slots,
    timeout: Duration,
) -> Result<Finished, CapsuleError> {
    let slot = slots.try_take()?;
    interpreter.ensure_verified()?;
    let root =
        tempfile::Builder::new().prefix("world-capsule-").tempdir().map_err(|e| CapsuleError::Root(e.to_string()))?;
    let stage = || -> std::io::Result<()> {
        stage_source(root.path(), source)?;
        std::fs::write(root.path().join(ARGS_FILE), serde_json::Value::String(input.to_owned()).to_string())
    };
    stage().map_err(|e| CapsuleError::Root(e.to_string()))?;
    let spawn = environment(root.path())
        .into_iter()
        .fold(Spawn::executing(&interpreter.file, root.path()).args(ARGV), |spawn, (key, value)| spawn.env(key, value));
    let span = tracing::info_span!(
        "capsule.run",
        "world.interpreter.ref" = %interpreter.interpreter.reference,
        process.exit.code = tracing::field::Empty,
    );
    let finished = subprocess::run(spawn, slot, timeout, CAPSULE_OUTPUT_CAP).instrument(span.clone()).await?;
    if let Some(code) = finished.status.code() {
        span.record("process.exit.code", code);
    }
    Ok(finished)
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
        Box::pin(run(&self.interpreter, source, input, &self.slots, timeout))
    }
}
