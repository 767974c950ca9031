//! An episode's worktree, `<workspace-root>/<episode>`, and every path opened in it.
//!
//! Paths are resolved by the kernel beneath the worktree's directory descriptor (`openat2`
//! with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`), never by checking a string and then
//! opening it, so no symlink, `..` or `/proc` magic link can reach outside. Writes follow no
//! symlink at all (a link inside the worktree could otherwise lead a write under the deny
//! list), replace files atomically, and refuse files with more than one hard link (a hard
//! link to an outside file passes `RESOLVE_BENEATH`).

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use serde_json::json;
use world_model::{Episode, HashRef, canonical_value};

/// Path segments no write may touch, compared case-insensitively, anywhere in the path
/// (stricter than matching at the worktree root only).
pub const DENY: [&str; 6] = [".git", ".github", ".claude", ".ailang", ".gitmodules", ".gitattributes"];

#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error("{path}: {cause}")]
    Io { path: String, cause: String },
    #[error("{0} is not a directory")]
    NotADirectory(String),
    #[error("{inner} lies inside the workspace root {root}; keep the store and its artifacts outside it")]
    Contains { root: String, inner: String },
    #[error("episode worktree {0} is reached through a symlink; worktrees must be real directories")]
    Symlink(String),
}

fn io_error(path: &Path, cause: impl std::fmt::Display) -> WorktreeError {
    WorktreeError::Io { path: path.display().to_string(), cause: cause.to_string() }
}

/// Checks `--workspace-root`: an existing directory holding none of `must_lie_outside`.
pub fn validate_workspace_root(root: &Path, must_lie_outside: &[&Path]) -> Result<PathBuf, WorktreeError> {
    let canonical = std::fs::canonicalize(root).map_err(|e| io_error(root, e))?;
    if !canonical.is_dir() {
        return Err(WorktreeError::NotADirectory(canonical.display().to_string()));
    }
    for inner in must_lie_outside {
        let absolute = std::path::absolute(inner).map_err(|e| io_error(inner, e))?;
        if absolute.starts_with(root) || absolute.starts_with(&canonical) || resolved(&absolute).starts_with(&canonical)
        {
            return Err(WorktreeError::Contains {
                root: canonical.display().to_string(),
                inner: inner.display().to_string(),
            });
        }
    }
    Ok(canonical)
}

/// `path` with its nearest existing ancestor's symlinks resolved.
fn resolved(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut current = path.to_path_buf();
    loop {
        if let Ok(real) = std::fs::canonicalize(&current) {
            return rest.iter().rev().fold(real, |acc: PathBuf, part| acc.join(part));
        }
        match (current.file_name().map(|n| n.to_owned()), current.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                current = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Caps of the confinement policy.
#[derive(Clone, Debug)]
pub struct ConfinementPolicy {
    pub max_read_bytes: u64,
    pub max_write_bytes: u64,
}

impl Default for ConfinementPolicy {
    fn default() -> Self {
        Self { max_read_bytes: 1024 * 1024, max_write_bytes: 1024 * 1024 }
    }
}

impl ConfinementPolicy {
    /// The sha256 of the canonical JSON of the policy in force for `worktree`.
    pub fn digest(&self, worktree: &Worktree) -> HashRef {
        HashRef::of(&canonical_value(&json!({
            "root": worktree.path.display().to_string(),
            "deny": DENY.iter().map(|d| format!("{d}/**")).collect::<Vec<_>>(),
            "caps": {"max_read_bytes": self.max_read_bytes, "max_write_bytes": self.max_write_bytes},
            "limits": {
                "resolve": "beneath the worktree, no magic links",
                "writes_follow_symlinks": false,
                "hard_links": "refused",
                "special_files": "refused",
            },
        })))
    }
}

/// A refused path: the handler answers `{"ok":false,"refused":…}`.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused(pub String);

/// An episode's worktree, held open.
#[derive(Debug)]
pub struct Worktree {
    dir: OwnedFd,
    path: PathBuf,
}

const BENEATH: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);
const NO_LINKS: ResolveFlags = BENEATH.union(ResolveFlags::NO_SYMLINKS);

impl Worktree {
    /// `<workspace_root>/<episode>`: it must exist, be a directory and be reached without a
    /// symlink. The core never creates it.
    pub fn open(workspace_root: &Path, episode: &Episode) -> Result<Worktree, WorktreeError> {
        let root =
            rustix::fs::open(workspace_root, OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
                .map_err(|e| io_error(workspace_root, e))?;
        let path = workspace_root.join(episode.as_str());
        let dir = rustix::fs::openat2(
            &root,
            episode.as_str(),
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
            NO_LINKS,
        )
        .map_err(|e| match e {
            Errno::LOOP => WorktreeError::Symlink(path.display().to_string()),
            Errno::NOTDIR => WorktreeError::NotADirectory(path.display().to_string()),
            e => io_error(&path, e),
        })?;
        Ok(Worktree { dir, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads a regular file of at most `max` bytes.
    pub fn read(&self, path: &str, max: u64) -> Result<Vec<u8>, Refused> {
        check_path(path)?;
        let fd = self.open_beneath(path, OFlags::RDONLY, BENEATH)?;
        let stat = regular_single_link(&fd, path)?;
        if stat.st_size as u64 > max {
            return Err(refused(path, format!("it is {} bytes; at most {max} may be read", stat.st_size)));
        }
        let mut bytes = Vec::new();
        std::fs::File::from(fd)
            .take(max + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| refused(path, format!("reading it failed: {e}")))?;
        if bytes.len() as u64 > max {
            return Err(refused(path, format!("it grew past {max} bytes while being read")));
        }
        Ok(bytes)
    }

    /// Replaces (or creates) a regular file atomically: a temporary file in the same
    /// directory, written and synced, then renamed over the target.
    pub fn write(&self, path: &str, content: &[u8], max: u64) -> Result<(), Refused> {
        check_path(path)?;
        check_deny(path)?;
        if content.len() as u64 > max {
            return Err(refused(path, format!("the content is {} bytes; at most {max} may be written", content.len())));
        }
        let (parent, name) = match path.rsplit_once('/') {
            Some((parent, name)) => (parent, name),
            None => ("", path),
        };
        if name.is_empty() || name == "." {
            return Err(refused(path, "it names a directory, not a file".into()));
        }
        let parent_fd = if parent.is_empty() {
            self.dir.try_clone().map_err(|e| refused(path, e.to_string()))?
        } else {
            let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC;
            rustix::fs::openat2(self.dir.as_fd(), parent, flags, Mode::empty(), NO_LINKS).map_err(|e| match e {
                Errno::NOENT => refused(path, format!("its directory {parent:?} does not exist; writes create none")),
                e => open_refusal(path, e),
            })?
        };
        let mode = match rustix::fs::openat2(
            &parent_fd,
            name,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
            NO_LINKS,
        ) {
            Ok(existing) => {
                Mode::from_raw_mode(regular_single_link(&existing, path)?.st_mode) & Mode::from_raw_mode(0o777)
            }
            Err(Errno::NOENT) => Mode::from_raw_mode(0o644),
            Err(e) => return Err(open_refusal(path, e)),
        };
        let temporary = format!(".{name}.world-{}.tmp", hex::encode(&crate::session::random_bytes()[..8]));
        let file = rustix::fs::openat(
            &parent_fd,
            temporary.as_str(),
            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            mode,
        )
        .map_err(|e| refused(path, format!("cannot create a temporary file beside it: {e}")))?;
        let written = (|| -> std::io::Result<()> {
            let mut file = std::fs::File::from(file);
            file.write_all(content)?;
            file.sync_all()?;
            rustix::fs::renameat(&parent_fd, temporary.as_str(), &parent_fd, name)?;
            rustix::fs::fsync(&parent_fd)?;
            Ok(())
        })();
        if let Err(error) = written {
            let _ = rustix::fs::unlinkat(&parent_fd, temporary.as_str(), AtFlags::empty());
            return Err(refused(path, format!("writing it failed: {error}")));
        }
        Ok(())
    }

    fn open_beneath(&self, path: &str, flags: OFlags, resolve: ResolveFlags) -> Result<OwnedFd, Refused> {
        // O_NONBLOCK: opening a FIFO must never wait for a writer; O_NOCTTY: no terminal.
        let flags = flags | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        rustix::fs::openat2(self.dir.as_fd(), path, flags, Mode::empty(), resolve).map_err(|e| open_refusal(path, e))
    }
}

fn refused(path: &str, why: String) -> Refused {
    Refused(format!("path {path:?} refused: {why}"))
}

fn open_refusal(path: &str, errno: Errno) -> Refused {
    let why = match errno {
        Errno::XDEV => "it resolves outside the worktree".to_owned(),
        Errno::LOOP => "it goes through a symlink, which writes never follow".to_owned(),
        Errno::NOENT => "it does not exist".to_owned(),
        Errno::NOTDIR => "a part of it is not a directory".to_owned(),
        Errno::ISDIR => "it is a directory".to_owned(),
        Errno::ACCESS | Errno::PERM => "permission denied".to_owned(),
        other => format!("it cannot be opened: {other}"),
    };
    refused(path, why)
}

fn regular_single_link(fd: &OwnedFd, path: &str) -> Result<rustix::fs::Stat, Refused> {
    let stat = rustix::fs::fstat(fd).map_err(|e| refused(path, format!("cannot stat it: {e}")))?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Err(refused(path, "it is a directory".into())),
        FileType::Fifo => return Err(refused(path, "it is a FIFO".into())),
        FileType::Socket => return Err(refused(path, "it is a socket".into())),
        FileType::CharacterDevice | FileType::BlockDevice => return Err(refused(path, "it is a device".into())),
        _ => return Err(refused(path, "it is not a regular file".into())),
    }
    if stat.st_nlink > 1 {
        return Err(refused(path, format!("it has {} hard links; only files with one are served", stat.st_nlink)));
    }
    Ok(stat)
}

/// The path rule every tool shares: relative, non-empty, no `..` segment, no leading `-`.
pub fn check_path(path: &str) -> Result<(), Refused> {
    let rule = "it must be relative and non-empty, with no \"..\" segment and no leading \"-\"";
    if path.is_empty() || path.starts_with('/') || path.starts_with('-') || path.split('/').any(|s| s == "..") {
        return Err(refused(path, rule.into()));
    }
    if path.contains('\0') {
        return Err(refused(path, "it contains a NUL byte".into()));
    }
    Ok(())
}

fn check_deny(path: &str) -> Result<(), Refused> {
    for segment in path.split('/') {
        let lower = segment.to_lowercase();
        if let Some(denied) = DENY.iter().find(|d| **d == lower) {
            return Err(refused(path, format!("{denied} is on the deny list; it is never written")));
        }
    }
    Ok(())
}
