//! The interpreter archive: interpreters pinned by the sha256 of their bytes
//! at `<artifacts>/interpreters/sha256/<hex>/ailang`, each with a manifest
//! holding its verbatim `--version` output.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use world_model::{HashRef, release_of};

use crate::store::StoreLocation;
use crate::subprocess::{self, Slots, Spawn};

const VERSION_PROBE: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("--artifacts is required for a PostgreSQL store (interpreter archives live on disk)")]
    NoArtifactsDir,
    #[error("interpreter {path}: {cause}")]
    Source { path: String, cause: String },
    #[error("archive {path}: {cause}")]
    Io { path: String, cause: String },
    #[error("archived interpreter {reference} already has a manifest recording {recorded}")]
    HashMismatch { reference: HashRef, recorded: String },
    #[error("{reference} --version failed: {cause}")]
    VersionProbe { reference: HashRef, cause: String },
    #[error("interpreter {reference} is not archived in {root}")]
    Absent { reference: HashRef, root: String },
    #[error("archived interpreter {reference} has no readable manifest: {cause}")]
    Manifest { reference: HashRef, cause: String },
}

/// An archived, pinned interpreter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interpreter {
    pub reference: HashRef,
    pub path: PathBuf,
    /// Verbatim `--version` output.
    pub version: String,
}

impl Interpreter {
    /// The release string epochs nominate.
    pub fn release(&self) -> String {
        release_of(&self.version)
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Manifest {
    hash: String,
    version: String,
    size: u64,
    os: String,
    arch: String,
}

#[derive(Clone, Debug)]
pub struct Archive {
    root: PathBuf,
}

impl Archive {
    /// `--artifacts`, or `<store>.artifacts/` beside a SQLite store.
    pub fn for_store(location: &StoreLocation, artifacts: Option<&Path>) -> Result<Self, ArchiveError> {
        let root = match (artifacts, location) {
            (Some(dir), _) => dir.to_path_buf(),
            (None, StoreLocation::Sqlite(path)) => {
                let mut name = path.clone().into_os_string();
                name.push(".artifacts");
                PathBuf::from(name)
            }
            (None, StoreLocation::Postgres(_)) => return Err(ArchiveError::NoArtifactsDir),
        };
        // Interpreters run with other working directories: keep paths absolute.
        let root = std::path::absolute(&root).map_err(|e| io_error(&root, e))?;
        Ok(Self { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn interpreters(&self) -> PathBuf {
        self.root.join("interpreters")
    }

    fn slot(&self, reference: &HashRef) -> PathBuf {
        self.interpreters().join("sha256").join(reference.hex())
    }

    /// Archives `binary` (idempotently) and returns its pin.
    pub async fn archive(&self, binary: &Path, slots: &Slots) -> Result<Interpreter, ArchiveError> {
        let this = self.clone();
        let source = binary.to_path_buf();
        let (reference, size, fresh) = tokio::task::spawn_blocking(move || this.copy_in(&source))
            .await
            .map_err(|e| ArchiveError::Io { path: binary.display().to_string(), cause: e.to_string() })??;
        let slot = self.slot(&reference);
        let path = slot.join("ailang");
        if !fresh {
            return self.resolve(&reference);
        }
        let version = probe_version(&path, &reference, slots).await?;
        let manifest = Manifest {
            hash: reference.to_string(),
            version: version.clone(),
            size,
            os: std::env::consts::OS.to_owned(),
            arch: std::env::consts::ARCH.to_owned(),
        };
        let mut text = serde_json::to_string_pretty(&manifest).map_err(|e| io_error(&slot, e))?;
        text.push('\n');
        write_atomically(&slot.join("manifest.json"), text.as_bytes())?;
        Ok(Interpreter { reference, path, version })
    }

    /// Streams `source` into the archive while hashing it. Returns its ref,
    /// size, and whether a manifest still has to be written.
    fn copy_in(&self, source: &Path) -> Result<(HashRef, u64, bool), ArchiveError> {
        let source_error = |cause: String| ArchiveError::Source { path: source.display().to_string(), cause };
        let metadata = std::fs::metadata(source).map_err(|e| source_error(e.to_string()))?;
        if !metadata.is_file() {
            return Err(source_error("not a regular file".into()));
        }
        let interpreters = self.interpreters();
        std::fs::create_dir_all(&interpreters).map_err(|e| io_error(&interpreters, e))?;
        let mut input = std::fs::File::open(source).map_err(|e| source_error(e.to_string()))?;
        let mut temp = tempfile::NamedTempFile::new_in(&interpreters).map_err(|e| io_error(&interpreters, e))?;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let mut buffer = vec![0u8; 256 * 1024];
        loop {
            let n = input.read(&mut buffer).map_err(|e| source_error(e.to_string()))?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            temp.write_all(&buffer[..n]).map_err(|e| io_error(temp.path(), e))?;
            size += n as u64;
        }
        let reference = HashRef::from_digest(hasher.finalize().into());
        let slot = self.slot(&reference);
        let manifest_path = slot.join("manifest.json");
        if let Ok(text) = std::fs::read_to_string(&manifest_path) {
            let manifest: Manifest =
                serde_json::from_str(&text).map_err(|e| ArchiveError::Manifest { reference, cause: e.to_string() })?;
            if manifest.hash != reference.to_string() {
                return Err(ArchiveError::HashMismatch { reference, recorded: manifest.hash });
            }
            return Ok((reference, size, false));
        }
        temp.as_file().sync_all().map_err(|e| io_error(temp.path(), e))?;
        set_mode(temp.path(), 0o555)?;
        std::fs::create_dir_all(&slot).map_err(|e| io_error(&slot, e))?;
        temp.persist(slot.join("ailang")).map_err(|e| io_error(&slot, e.error))?;
        Ok((reference, size, true))
    }

    /// The archived interpreter named by `reference`, with its manifest.
    pub fn resolve(&self, reference: &HashRef) -> Result<Interpreter, ArchiveError> {
        let slot = self.slot(reference);
        let path = slot.join("ailang");
        if !path.is_file() {
            return Err(ArchiveError::Absent { reference: *reference, root: self.root.display().to_string() });
        }
        let manifest_error = |cause: String| ArchiveError::Manifest { reference: *reference, cause };
        let text = std::fs::read_to_string(slot.join("manifest.json")).map_err(|e| manifest_error(e.to_string()))?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| manifest_error(e.to_string()))?;
        if manifest.hash != reference.to_string() {
            return Err(ArchiveError::HashMismatch { reference: *reference, recorded: manifest.hash });
        }
        Ok(Interpreter { reference: *reference, path, version: manifest.version })
    }
}

/// `<interp> --version` in a scrubbed environment; the verbatim combined output.
async fn probe_version(path: &Path, reference: &HashRef, slots: &Slots) -> Result<String, ArchiveError> {
    let probe_error = |cause: String| ArchiveError::VersionProbe { reference: *reference, cause };
    let spawn = Spawn::new(path, path.parent().unwrap_or(Path::new("/"))).args(["--version"]);
    let slot = slots.try_take().map_err(|e| probe_error(e.to_string()))?;
    let finished =
        subprocess::run(spawn, slot, VERSION_PROBE, 64 * 1024).await.map_err(|e| probe_error(e.to_string()))?;
    if !finished.success() {
        return Err(probe_error(format!(
            "exit {}: {}",
            finished.status,
            String::from_utf8_lossy(&finished.stderr).trim()
        )));
    }
    let mut output = finished.stdout;
    output.extend_from_slice(&finished.stderr);
    String::from_utf8(output).map_err(|_| probe_error("the output is not UTF-8".into()))
}

fn io_error(path: &Path, error: impl ToString) -> ArchiveError {
    ArchiveError::Io { path: path.display().to_string(), cause: error.to_string() }
}

fn set_mode(path: &Path, mode: u32) -> Result<(), ArchiveError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|e| io_error(path, e))
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ArchiveError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io_error(dir, e))?;
    temp.write_all(bytes).map_err(|e| io_error(path, e))?;
    temp.as_file().sync_all().map_err(|e| io_error(path, e))?;
    set_mode(temp.path(), 0o644)?;
    temp.persist(path).map_err(|e| io_error(path, e.error))?;
    Ok(())
}
