//! An episode's confined worktree: `<workspace-root>/<episode>`, held open as a directory fd,
//! and every file access of the Workspace handlers resolved beneath it by the kernel.
//!
//! No path is checked as a string and then opened: strings are only pre-screened (empty,
//! absolute, `..`, leading `-`, NUL, deny list), and the kernel then resolves each path from the
//! worktree fd with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)`, so a
//! symlink or a rename race can never carry an access outside the worktree.
//!
//! Decisions (see `ConfinementPolicy::document`, which the policy digest covers):
//! * Reads follow symlinks that stay inside the worktree; writes and edits follow none
//!   (`RESOLVE_NO_SYMLINKS`), so a link such as `notes -> .git` can never carry a write past the
//!   deny list, which is then a check on the real path.
//! * The deny list matches any path segment, not just the first, after case folding (so
//!   `.GIT/config` and `sub/.git/x` are both denied). Writes are denied under every entry; reads
//!   only under `.git` (its config can hold credentials; the other entries are plain text an agent
//!   may well need to read).
//! * A write creates the missing directories above its file (`create_parent_dirs`, on by
//!   default, since an agent lays out modules as `tools/x.ail`), one segment at a time, each
//!   made relative to its parent's descriptor beneath the worktree without following a
//!   symlink, and never under a deny-listed segment (the whole path is checked first).
//! * Only regular files with exactly one link are read or replaced: FIFOs, sockets, devices and
//!   directories are refused, and so are hard links (one to an outside file passes
//!   `RESOLVE_BENEATH`).
//! * A write never modifies a file in place: it writes a temporary file in the target's
//!   directory, fsyncs it and renames it over the target, so a crash leaves the old or the new
//!   file and a leftover temporary file is the only trace of an interrupted write.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;
use serde_json::json;
use world_model::{Episode, HashRef, canonical_value, go_quote};

/// Directory (or file) names a write may never touch, at any depth, compared after folding.
/// `git~1` is the NTFS short name of `.git`, which git itself refuses for the same reason.
pub const WRITE_DENIED: [&str; 7] = [".git", ".github", ".claude", ".ailang", ".gitmodules", ".gitattributes", "git~1"];
/// Names a read may never pass through.
const READ_DENIED: [&str; 2] = [".git", "git~1"];
/// The deny lists as the policy document states them.
const WRITE_DENY_PATTERNS: [&str; 6] =
    [".ailang/**", ".claude/**", ".git/**", ".github/**", ".gitattributes", ".gitmodules"];
const READ_DENY_PATTERNS: [&str; 1] = [".git/**"];

/// Linux's PATH_MAX: a longer path cannot be opened anyway.
const MAX_PATH_BYTES: usize = 4096;
/// A new file's mode; an existing file keeps its own permission bits.
const NEW_FILE_MODE: u32 = 0o644;
/// A directory a write creates.
const NEW_DIR_MODE: u32 = 0o755;
/// openat2 answers EAGAIN when a concurrent rename makes a `..`-free resolution racy; retrying
/// is what the man page prescribes.
const EAGAIN_RETRIES: usize = 8;

/// The limits of the Workspace handlers. Every field is part of the policy digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfinementPolicy {
    /// Largest file a read (or an edit) will load.
    pub max_read_bytes: u64,
    /// Largest content a write (or an edit's result) may store.
    pub max_write_bytes: u64,
    /// Largest request payload; JSON escaping can make it several times the content.
    pub max_payload_bytes: usize,
    /// Whether a write may create the missing directories above its file.
    pub create_parent_dirs: bool,
}

impl Default for ConfinementPolicy {
    fn default() -> Self {
        Self { max_read_bytes: 1 << 20, max_write_bytes: 1 << 20, max_payload_bytes: 8 << 20, create_parent_dirs: true }
    }
}

impl ConfinementPolicy {
    /// The policy in force for one worktree, as the JSON document its digest is taken of.
    pub fn document(&self, worktree: &Path) -> serde_json::Value {
        json!({
            "root": worktree.to_string_lossy(),
            "deny": {
                "match": "any path segment, case-folded, trailing dots and spaces ignored",
                "read": READ_DENY_PATTERNS,
                "write": WRITE_DENY_PATTERNS,
            },
            "caps": {
                "read_bytes": self.max_read_bytes,
                "write_bytes": self.max_write_bytes,
            },
            "limits": {
                "payload_bytes": self.max_payload_bytes,
                "path_bytes": MAX_PATH_BYTES,
                "hard_links": 1,
                "file_types": ["regular"],
                "resolve": ["beneath", "no_magiclinks", "no_xdev"],
                "symlinks": {"read": "followed while they stay beneath the root", "write": "never followed"},
                "write": "temporary file, fsync, rename",
                "create_parent_dirs": self.create_parent_dirs,
            },
        })
    }

    /// sha256 of the canonical JSON of [`ConfinementPolicy::document`].
    pub fn policy_digest(&self, worktree: &Path) -> HashRef {
        HashRef::of(&canonical_value(&self.document(worktree)))
    }
}

/// Why a workspace root or an episode worktree cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error("cannot resolve {}: {source}", .path.display())]
    Resolve { path: PathBuf, source: std::io::Error },
    #[error("{} is not a directory", .path.display())]
    NotDirectory { path: PathBuf },
    #[error("{} is not valid UTF-8; use a path whose every name is UTF-8", .path.display())]
    NotUtf8 { path: PathBuf },
    #[error(
        "{} lies inside the workspace root {}{how}; keep the store, the artifacts and the core's own folders outside it",
        .inner.display(), .root.display()
    )]
    Contains { root: PathBuf, inner: PathBuf, how: &'static str },
    #[error("episode worktree {} does not exist; the operator creates it (e.g. `git worktree add`)", .path.display())]
    Missing { path: PathBuf },
    #[error("episode worktree {} is a symlink; it must be a real directory under the workspace root", .path.display())]
    Symlink { path: PathBuf },
    #[error("cannot open episode worktree {}: {source}", .path.display())]
    Open { path: PathBuf, source: std::io::Error },
}

/// Checks `--workspace-root`: it is canonicalised, must be a directory, and none of
/// `must_lie_outside` (the store file, the artifacts, the core's own folders) may lie inside it —
/// neither as written nor after resolving symlinks (for a path that does not exist yet, through
/// its nearest existing ancestor). Returns the canonical root.
pub fn validate_workspace_root(root: &Path, must_lie_outside: &[&Path]) -> Result<PathBuf, WorktreeError> {
    let canonical =
        std::fs::canonicalize(root).map_err(|source| WorktreeError::Resolve { path: root.to_owned(), source })?;
    if !canonical.is_dir() {
        return Err(WorktreeError::NotDirectory { path: canonical });
    }
    if canonical.to_str().is_none() {
        return Err(WorktreeError::NotUtf8 { path: canonical });
    }
    let lexical_root = lexical_absolute(root)?;
    for inner in must_lie_outside {
        let lexical = lexical_absolute(inner)?;
        if lexical.starts_with(&lexical_root) || lexical.starts_with(&canonical) {
            return Err(WorktreeError::Contains { root: canonical, inner: inner.to_path_buf(), how: "" });
        }
        let resolved = resolve_existing_prefix(inner)?;
        if resolved.starts_with(&canonical) {
            return Err(WorktreeError::Contains {
                root: canonical,
                inner: inner.to_path_buf(),
                how: " once symlinks are resolved",
            });
        }
    }
    Ok(canonical)
}

/// `path` made absolute against the current directory, with `.` and `..` removed lexically.
fn lexical_absolute(path: &Path) -> Result<PathBuf, WorktreeError> {
    let absolute =
        std::path::absolute(path).map_err(|source| WorktreeError::Resolve { path: path.to_owned(), source })?;
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// `path` with symlinks resolved: its nearest existing ancestor canonicalised, the rest (which
/// does not exist, so holds no symlink) appended lexically.
fn resolve_existing_prefix(path: &Path) -> Result<PathBuf, WorktreeError> {
    let absolute =
        std::path::absolute(path).map_err(|source| WorktreeError::Resolve { path: path.to_owned(), source })?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        match std::fs::canonicalize(existing) {
            Ok(mut resolved) => {
                for component in rest.iter().rev() {
                    match component {
                        Component::CurDir => {}
                        Component::ParentDir => {
                            resolved.pop();
                        }
                        other => resolved.push(other),
                    }
                }
                return Ok(resolved);
            }
            Err(source) => match (existing.parent(), existing.components().next_back()) {
                (Some(parent), Some(last)) => {
                    rest.push(last);
                    existing = parent;
                }
                _ => return Err(WorktreeError::Resolve { path: path.to_owned(), source }),
            },
        }
    }
}

/// An episode's worktree, held open: every access below resolves from this fd, so renaming or
/// replacing `<root>/<episode>` afterwards cannot redirect it.
#[derive(Debug)]
pub struct Worktree {
    dir: OwnedFd,
    path: PathBuf,
}

/// Why a file access did not happen.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// Confinement or an ordinary file problem: the caller's answer, not the core's failure.
    #[error("path {} refused: {reason}", go_quote(.path))]
    Refused { path: String, reason: String },
    /// An unexpected I/O error; nothing in the worktree was changed.
    #[error("{doing} {}: {source}", go_quote(.path))]
    Io { path: String, doing: &'static str, source: std::io::Error },
}

impl AccessError {
    fn refused(path: &str, reason: impl Into<String>) -> Self {
        AccessError::Refused { path: path.to_owned(), reason: reason.into() }
    }
}

/// Whether an access reads, or leads to a write (an edit reads with write rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

impl Worktree {
    /// Opens `<workspace_root>/<episode>`: it must exist and be a directory reached without a
    /// symlink. The core never creates it.
    pub fn open(workspace_root: &Path, episode: &Episode) -> Result<Worktree, WorktreeError> {
        let path = workspace_root.join(episode.as_str());
        if path.to_str().is_none() {
            return Err(WorktreeError::NotUtf8 { path });
        }
        let root = rustix::fs::open(workspace_root, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| WorktreeError::Open { path: workspace_root.to_owned(), source: e.into() })?;
        let dir = openat2_retry(
            root.as_fd(),
            episode.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )
        .map_err(|errno| match errno {
            Errno::NOENT => WorktreeError::Missing { path: path.clone() },
            Errno::LOOP => WorktreeError::Symlink { path: path.clone() },
            Errno::NOTDIR => WorktreeError::NotDirectory { path: path.clone() },
            other => WorktreeError::Open { path: path.clone(), source: other.into() },
        })?;
        Ok(Worktree { dir, path })
    }

    /// `<root>/<episode>` as opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes of a regular, singly linked file at `path`, at most `max_read_bytes`.
    /// Symlinks that stay inside the worktree are followed; `.git` is never read.
    pub fn read(&self, path: &str, policy: &ConfinementPolicy) -> Result<Vec<u8>, AccessError> {
        let rel = RelPath::parse(path, Access::Read)?;
        let file = match self.open_file(&rel, ResolveFlags::NO_SYMLINKS) {
            Err(AccessError::Refused { .. }) if self.has_symlink(&rel) => {
                // The path goes through a symlink: resolve it (still beneath the worktree) and
                // apply the read deny list to where it really leads.
                let file = self.open_file(&rel, ResolveFlags::empty())?;
                self.check_resolved_read(&rel, &file)?;
                file
            }
            other => other?,
        };
        read_regular(file, &rel, policy.max_read_bytes)
    }

    /// The bytes of the file an edit will replace, read with the write rules: no symlink
    /// anywhere on the path and nothing under the write deny list.
    pub fn read_for_edit(&self, path: &str, policy: &ConfinementPolicy) -> Result<Vec<u8>, AccessError> {
        let rel = RelPath::parse(path, Access::Write)?;
        let file = self.open_file(&rel, ResolveFlags::NO_SYMLINKS)?;
        read_regular(file, &rel, policy.max_read_bytes)
    }

    /// Replaces (or creates) the file at `path` with `content`, atomically: a temporary file in
    /// the same directory, written, fsync'd, then renamed over the target. Missing parent
    /// directories are created only when the policy allows it. No symlink is followed and the
    /// write deny list applies.
    pub fn write(&self, path: &str, content: &[u8], policy: &ConfinementPolicy) -> Result<(), AccessError> {
        let rel = RelPath::parse(path, Access::Write)?;
        let len = u64::try_from(content.len()).unwrap_or(u64::MAX);
        if len > policy.max_write_bytes {
            return Err(AccessError::refused(
                &rel.text,
                format!("the content is {len} bytes; the write cap is {} bytes", policy.max_write_bytes),
            ));
        }
        let (parent_segments, name) = rel.split_last();
        let parent = self.open_parent(&rel, parent_segments, policy.create_parent_dirs)?;
        let existing = existing_target(&parent, name, &rel)?;
        replace_in(&parent, name, content, existing.as_ref(), &rel)
    }

    /// Opens the file at `rel` for reading, without blocking on a FIFO or taking a terminal,
    /// and refuses anything that is not a regular file with exactly one link.
    fn open_file(&self, rel: &RelPath, extra: ResolveFlags) -> Result<File, AccessError> {
        let fd = openat2_retry(
            self.dir.as_fd(),
            rel.joined.as_str(),
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
            confined() | extra,
        )
        .map_err(|errno| resolve_refusal(errno, rel, "open", !extra.is_empty()))?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| io_error(rel, "inspect", e))?;
        check_regular_single(&stat, rel)?;
        Ok(File::from(fd))
    }

    /// Whether some prefix of `rel` is a symlink (resolved without following any).
    fn has_symlink(&self, rel: &RelPath) -> bool {
        (1..=rel.segments.len()).any(|n| {
            let prefix = rel.segments[..n].join("/");
            match openat2_retry(
                self.dir.as_fd(),
                prefix.as_str(),
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
                confined() | ResolveFlags::NO_SYMLINKS,
            ) {
                Ok(fd) => rustix::fs::fstat(&fd).is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink),
                Err(_) => false,
            }
        })
    }

    /// Applies the read deny list to the real location of an opened file. Fails closed: when
    /// the location cannot be told (no /proc), the read is refused.
    fn check_resolved_read(&self, rel: &RelPath, file: &File) -> Result<(), AccessError> {
        let unknown = || AccessError::refused(&rel.text, "it leads through a symlink whose target cannot be verified");
        let here = fd_path(self.dir.as_fd()).ok_or_else(unknown)?;
        let there = fd_path(file.as_fd()).ok_or_else(unknown)?;
        let inside = there.strip_prefix(&here).map_err(|_| unknown())?;
        let denied = inside.components().any(|c| c.as_os_str().to_str().is_some_and(|s| is_denied(s, Access::Read)));
        if denied {
            return Err(AccessError::refused(&rel.text, "it leads through a symlink into .git, which is never read"));
        }
        Ok(())
    }

    /// Opens the directory that will hold the target one segment at a time, each resolved
    /// beneath the worktree without following a symlink, creating missing ones if `create`.
    fn open_parent(&self, rel: &RelPath, segments: &[String], create: bool) -> Result<OwnedFd, AccessError> {
        let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let resolve = confined() | ResolveFlags::NO_SYMLINKS;
        let mut current = openat2_retry(self.dir.as_fd(), ".", dir_flags, Mode::empty(), resolve)
            .map_err(|e| io_error(rel, "open the worktree for", e))?;
        for (depth, segment) in segments.iter().enumerate() {
            let opened = match openat2_retry(current.as_fd(), segment.as_str(), dir_flags, Mode::empty(), resolve) {
                Err(Errno::NOENT) if !create => {
                    let missing = segments[..=depth].join("/");
                    return Err(AccessError::refused(
                        &rel.text,
                        format!("directory {} does not exist; writes create no directories", go_quote(&missing)),
                    ));
                }
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(current.as_fd(), segment.as_str(), Mode::from_raw_mode(NEW_DIR_MODE)) {
                        // EEXIST: another writer made it, or a dangling symlink holds the name;
                        // the open below tells which.
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(errno) => return Err(resolve_refusal(errno, rel, "create a directory for", true)),
                    }
                    openat2_retry(current.as_fd(), segment.as_str(), dir_flags, Mode::empty(), resolve)
                }
                other => other,
            };
            current = opened.map_err(|errno| resolve_refusal(errno, rel, "open a directory of", true))?;
        }
        Ok(current)
    }
}

/// The resolution every access uses: beneath the fd, no magic links, no mount crossing (a bind
/// mount inside a worktree would otherwise lead anywhere).
fn confined() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | ResolveFlags::NO_XDEV
}

fn openat2_retry(
    dir: BorrowedFd<'_>,
    path: &str,
    flags: OFlags,
    mode: Mode,
    resolve: ResolveFlags,
) -> Result<OwnedFd, Errno> {
    let mut attempt = 0;
    loop {
        match rustix::fs::openat2(dir, path, flags, mode, resolve) {
            Err(Errno::AGAIN) if attempt < EAGAIN_RETRIES => attempt += 1,
            other => return other,
        }
    }
}

/// The path the kernel holds for an open fd (the magic link's target, read, never followed).
fn fd_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()
}

/// A mode, owner and group to carry over from the file a write replaces.
struct Existing {
    mode: u32,
    uid: u32,
    gid: u32,
}

/// What stands at `name` in `parent` now, looked at through an O_PATH fd (so nothing is
/// opened for real: a device or a FIFO is never touched).
fn existing_target(parent: &OwnedFd, name: &str, rel: &RelPath) -> Result<Option<Existing>, AccessError> {
    let fd = match openat2_retry(
        parent.as_fd(),
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        confined() | ResolveFlags::NO_SYMLINKS,
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(errno) => return Err(resolve_refusal(errno, rel, "inspect", true)),
    };
    let stat = rustix::fs::fstat(&fd).map_err(|e| io_error(rel, "inspect", e))?;
    if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink {
        return Err(AccessError::refused(&rel.text, "it is a symlink; writes never follow or replace symlinks"));
    }
    check_regular_single(&stat, rel)?;
    Ok(Some(Existing { mode: stat.st_mode & 0o777, uid: stat.st_uid, gid: stat.st_gid }))
}

/// Writes `content` to a fresh temporary file in `parent` and renames it over `name`.
fn replace_in(
    parent: &OwnedFd,
    name: &str,
    content: &[u8],
    existing: Option<&Existing>,
    rel: &RelPath,
) -> Result<(), AccessError> {
    let (temp_name, temp) = create_temp(parent, rel)?;
    let written = fill_temp(temp, content, existing, rel).and_then(|()| {
        rustix::fs::renameat(parent, temp_name.as_str(), parent, name).map_err(|e| rename_error(e, rel))
    });
    if let Err(error) = written {
        // Best effort: a leftover temporary file is harmless, only untidy.
        let _ = rustix::fs::unlinkat(parent, temp_name.as_str(), AtFlags::empty());
        return Err(error);
    }
    // The rename is done and visible; this only makes it survive a power cut, so its failure
    // does not turn a completed write into a failed one.
    let _ = rustix::fs::fsync(parent);
    Ok(())
}

fn create_temp(parent: &OwnedFd, rel: &RelPath) -> Result<(String, OwnedFd), AccessError> {
    let mut attempt = 0;
    loop {
        let random = crate::session::random_bytes();
        let temp_name = format!(".world-write-{}.tmp", hex::encode(&random[..8]));
        match openat2_retry(
            parent.as_fd(),
            temp_name.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
            confined() | ResolveFlags::NO_SYMLINKS,
        ) {
            Ok(fd) => return Ok((temp_name, fd)),
            Err(Errno::EXIST) if attempt < 3 => attempt += 1,
            Err(errno) => return Err(resolve_refusal(errno, rel, "create a temporary file for", true)),
        }
    }
}

fn fill_temp(temp: OwnedFd, content: &[u8], existing: Option<&Existing>, rel: &RelPath) -> Result<(), AccessError> {
    let mode = existing.map_or(NEW_FILE_MODE, |e| e.mode);
    rustix::fs::fchmod(&temp, Mode::from_raw_mode(mode)).map_err(|e| io_error(rel, "set the mode of", e))?;
    if let Some(existing) = existing {
        let stat = rustix::fs::fstat(&temp).map_err(|e| io_error(rel, "inspect", e))?;
        if (stat.st_uid, stat.st_gid) != (existing.uid, existing.gid) {
            // Keep the file's owner when the core may (it runs as root); otherwise the file
            // becomes the core's, which is what any editor running as this user would do.
            let _ = rustix::fs::fchown(
                &temp,
                Some(rustix::fs::Uid::from_raw(existing.uid)),
                Some(rustix::fs::Gid::from_raw(existing.gid)),
            );
        }
    }
    let mut file = File::from(temp);
    file.write_all(content).map_err(|e| write_error(e, rel))?;
    file.sync_all().map_err(|e| write_error(e, rel))?;
    Ok(())
}

fn write_error(error: std::io::Error, rel: &RelPath) -> AccessError {
    match error.raw_os_error().map(Errno::from_raw_os_error) {
        Some(Errno::NOSPC) => AccessError::refused(&rel.text, "the file system has no space left"),
        Some(Errno::DQUOT) => AccessError::refused(&rel.text, "the disk quota is exhausted"),
        Some(Errno::FBIG) => AccessError::refused(&rel.text, "the file is too large for the file system"),
        _ => AccessError::Io { path: rel.text.clone(), doing: "write", source: error },
    }
}

fn rename_error(errno: Errno, rel: &RelPath) -> AccessError {
    match errno {
        Errno::ISDIR | Errno::NOTEMPTY | Errno::EXIST => {
            AccessError::refused(&rel.text, "it became a directory while being written")
        }
        other => resolve_refusal(other, rel, "rename into", false),
    }
}

/// Loads an opened regular file, refusing it above the cap (checked on its size and again on
/// what is actually read, should it grow meanwhile).
fn read_regular(file: File, rel: &RelPath, cap: u64) -> Result<Vec<u8>, AccessError> {
    let over = || AccessError::refused(&rel.text, format!("the file is larger than the read cap of {cap} bytes"));
    let size =
        file.metadata().map_err(|e| AccessError::Io { path: rel.text.clone(), doing: "inspect", source: e })?.len();
    if size > cap {
        return Err(over());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| AccessError::Io {
        path: rel.text.clone(),
        doing: "read",
        source: e,
    })?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > cap {
        return Err(over());
    }
    Ok(bytes)
}

fn check_regular_single(stat: &Stat, rel: &RelPath) -> Result<(), AccessError> {
    let kind = match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => None,
        FileType::Directory => Some("a directory"),
        FileType::Fifo => Some("a FIFO"),
        FileType::Socket => Some("a socket"),
        FileType::CharacterDevice | FileType::BlockDevice => Some("a device"),
        FileType::Symlink => Some("a symlink"),
        FileType::Unknown => Some("of an unknown kind"),
    };
    if let Some(kind) = kind {
        return Err(AccessError::refused(&rel.text, format!("it is {kind}, not a regular file")));
    }
    if stat.st_nlink != 1 {
        return Err(AccessError::refused(
            &rel.text,
            format!("it has {} hard links; only files with exactly one link are used", stat.st_nlink),
        ));
    }
    Ok(())
}

/// Turns a resolution error into the caller's refusal (confinement or an ordinary file
/// problem), or an I/O failure when it is neither.
fn resolve_refusal(errno: Errno, rel: &RelPath, doing: &'static str, no_symlinks: bool) -> AccessError {
    let reason = match errno {
        Errno::NOENT => "it does not exist",
        Errno::XDEV => "it resolves outside the worktree (a symlink leaving it, or a mount point)",
        Errno::LOOP if no_symlinks => "it goes through a symlink, which writes and edits never follow",
        Errno::LOOP => "it resolves through a magic link or too many symlinks",
        Errno::NOTDIR => "one of its parents is not a directory",
        Errno::ISDIR => "it is a directory, not a regular file",
        Errno::NXIO => "it is a socket or a device, not a regular file",
        Errno::ACCESS | Errno::PERM => "permission denied",
        Errno::NAMETOOLONG => "a name in it is too long",
        Errno::ROFS => "the file system is read-only",
        Errno::NOSPC => "the file system has no space left",
        Errno::DQUOT => "the disk quota is exhausted",
        Errno::MLINK => "the directory holds too many entries",
        other => return io_error(rel, doing, other),
    };
    AccessError::refused(&rel.text, reason)
}

fn io_error(rel: &RelPath, doing: &'static str, errno: Errno) -> AccessError {
    AccessError::Io { path: rel.text.clone(), doing, source: errno.into() }
}

/// A relative path that passed the string-level screening: its `.` and empty segments dropped,
/// nothing else changed (no `..` exists to resolve).
#[derive(Debug)]
struct RelPath {
    /// As the caller wrote it, for messages.
    text: String,
    segments: Vec<String>,
    joined: String,
}

impl RelPath {
    fn parse(text: &str, access: Access) -> Result<RelPath, AccessError> {
        let refuse = |reason: &str| Err(AccessError::refused(text, reason));
        if text.is_empty() {
            return refuse("it is empty; name a file relative to the worktree");
        }
        if text.contains('\0') {
            return refuse("it contains a NUL byte");
        }
        if text.len() > MAX_PATH_BYTES {
            return refuse("it is longer than 4096 bytes");
        }
        if text.starts_with('/') {
            return refuse("it is absolute; paths are relative to the worktree");
        }
        if text.starts_with('-') {
            return refuse("it starts with \"-\"");
        }
        if text.split('/').any(|s| s == "..") {
            return refuse("it has a \"..\" segment");
        }
        let segments: Vec<String> = text.split('/').filter(|s| !s.is_empty() && *s != ".").map(str::to_owned).collect();
        if segments.is_empty() {
            return refuse("it names the worktree itself, not a file");
        }
        if let Some(denied) = segments.iter().find(|s| is_denied(s, access)) {
            let reason = match access {
                Access::Read => format!("segment {} is under .git, which is never read", go_quote(denied)),
                Access::Write => format!(
                    "segment {} is on the write deny list ({})",
                    go_quote(denied),
                    WRITE_DENY_PATTERNS.join(", ")
                ),
            };
            return Err(AccessError::refused(text, reason));
        }
        let joined = segments.join("/");
        Ok(RelPath { text: text.to_owned(), segments, joined })
    }

    fn split_last(&self) -> (&[String], &str) {
        match self.segments.split_last() {
            Some((last, parents)) => (parents, last.as_str()),
            // parse never yields an empty path
            None => (&[], "."),
        }
    }
}

/// Whether a path segment is on the deny list for `access`, compared the way case-insensitive
/// file systems and git itself compare names: Unicode lower case (with `ſ` as `s`; `K` already
/// lowers to `k`), ignoring the code points HFS+ ignores, and trailing dots and spaces (NTFS).
fn is_denied(segment: &str, access: Access) -> bool {
    let mut folded: String = segment
        .chars()
        .filter(|c| !is_ignorable(*c))
        .flat_map(char::to_lowercase)
        .map(|c| if c == 'ſ' { 's' } else { c })
        .collect();
    while folded.ends_with('.') || folded.ends_with(' ') {
        folded.pop();
    }
    let list: &[&str] = match access {
        Access::Read => &READ_DENIED,
        Access::Write => &WRITE_DENIED,
    };
    list.contains(&folded.as_str())
}

/// Code points HFS+ drops when comparing names (the set git's `is_hfs_dotgit` skips).
fn is_ignorable(c: char) -> bool {
    matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, symlink};

    use proptest::prelude::*;

    use super::*;

    fn episode(name: &str) -> Episode {
        Episode::parse(name).unwrap()
    }

    #[test]
    fn workspace_root_is_canonicalised_and_must_be_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        let canonical = std::fs::canonicalize(&root).unwrap();
        let dotted = tmp.path().join("ws/./../ws");
        assert_eq!(validate_workspace_root(&dotted, &[]).unwrap(), canonical);

        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(validate_workspace_root(&file, &[]), Err(WorktreeError::NotDirectory { .. })));
        let missing = tmp.path().join("missing");
        assert!(matches!(validate_workspace_root(&missing, &[]), Err(WorktreeError::Resolve { .. })));
    }

    #[test]
    fn workspace_root_refuses_core_paths_inside_it_lexically_and_through_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        let outside = tmp.path().join("state/store.db");
        let link_to_root = tmp.path().join("via");
        symlink(&root, &link_to_root).unwrap();
        let link_to_parent = root.join("up");
        symlink(tmp.path(), &link_to_parent).unwrap();

        // Allowed: the store beside the root, and a path that only reaches the root through a
        // symlink inside it but lies outside.
        validate_workspace_root(&root, &[&outside, tmp.path().join("ws-other/x").as_path()]).unwrap();

        let inside: [PathBuf; 6] = [
            root.join("store.db"),                   // does not exist, lexically inside
            root.join("a/b/c/artifacts"),            // deep, nothing exists below the root
            tmp.path().join("state/../ws/store.db"), // `..` written out
            link_to_root.join("store.db"),           // inside once the symlink resolves
            link_to_root.join("new/dir"),            // nearest existing ancestor is the symlink
            root.clone(),                            // the root itself
        ];
        for path in &inside {
            let error = validate_workspace_root(&root, &[&outside, path]).unwrap_err();
            assert!(matches!(error, WorktreeError::Contains { .. }), "{}: {error}", path.display());
            assert!(error.to_string().contains("lies inside the workspace root"), "{error}");
        }
        // A root given through a symlink is checked as its canonical self.
        let error = validate_workspace_root(&link_to_root, &[&root.join("db")]).unwrap_err();
        assert!(matches!(error, WorktreeError::Contains { .. }), "{error}");
        // A filesystem root holds everything.
        assert!(validate_workspace_root(Path::new("/"), &[&outside]).is_err());
    }

    #[test]
    fn worktree_must_exist_be_a_directory_and_be_reached_without_a_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir(root.join("ep1")).unwrap();
        std::fs::write(root.join("ep2"), "x").unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        symlink(root.join("real"), root.join("ep3")).unwrap();
        symlink("real", root.join("ep4")).unwrap();

        let worktree = Worktree::open(root, &episode("ep1")).unwrap();
        assert_eq!(worktree.path(), root.join("ep1"));
        assert!(matches!(Worktree::open(root, &episode("ep2")), Err(WorktreeError::NotDirectory { .. })));
        assert!(matches!(Worktree::open(root, &episode("ep3")), Err(WorktreeError::Symlink { .. })));
        assert!(matches!(Worktree::open(root, &episode("ep4")), Err(WorktreeError::Symlink { .. })));
        let missing = Worktree::open(root, &episode("ep9")).unwrap_err();
        assert!(matches!(missing, WorktreeError::Missing { .. }));
        assert!(missing.to_string().contains("the operator creates it"), "{missing}");
        // A magic link is a symlink too.
        assert!(matches!(
            Worktree::open(Path::new("/proc/self"), &episode("root")),
            Err(WorktreeError::Symlink { .. })
        ));
        assert!(!root.join("ep9").exists(), "the core never creates a worktree");
    }

    #[test]
    fn the_worktree_fd_keeps_accesses_in_the_directory_that_was_opened() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("ep1")).unwrap();
        let worktree = Worktree::open(tmp.path(), &episode("ep1")).unwrap();
        // Swapping the directory for a symlink afterwards redirects nothing.
        std::fs::rename(tmp.path().join("ep1"), tmp.path().join("moved")).unwrap();
        std::fs::create_dir(tmp.path().join("elsewhere")).unwrap();
        symlink(tmp.path().join("elsewhere"), tmp.path().join("ep1")).unwrap();
        worktree.write("a.txt", b"x", &ConfinementPolicy::default()).unwrap();
        assert_eq!(std::fs::read(tmp.path().join("moved/a.txt")).unwrap(), b"x");
        assert!(!tmp.path().join("elsewhere/a.txt").exists());
    }

    #[test]
    fn deny_list_matches_any_segment_case_folded() {
        for segment in [
            ".git",
            ".GIT",
            ".Git",
            ".git.",
            ".git ",
            ".gi\u{200c}t",
            "\u{feff}.git",
            "git~1",
            "GIT~1",
            ".github",
            ".GitHub",
            ".claude",
            ".CLAUDE",
            ".ailang",
            ".AiLang",
            ".gitmodules",
            ".GITMODULES",
            ".gitmodule\u{17f}",
            ".gitattributes",
            ".GitAttributes",
            ".gitattribute\u{17f}",
        ] {
            assert!(is_denied(segment, Access::Write), "write {segment:?}");
        }
        for segment in [".gitignore", ".git-blame", "git", ".gith", "x.git", ".githubx", ".gıt", "claude", ".pi"] {
            assert!(!is_denied(segment, Access::Write), "write {segment:?}");
        }
        assert!(is_denied(".GIT", Access::Read));
        for segment in [".github", ".claude", ".ailang", ".gitmodules", ".gitattributes"] {
            assert!(!is_denied(segment, Access::Read), "read {segment:?}");
        }
        let denied = RelPath::parse("src/sub/.Git/config", Access::Write).unwrap_err();
        assert_eq!(
            denied.to_string(),
            "path \"src/sub/.Git/config\" refused: segment \".Git\" is on the write deny list \
             (.ailang/**, .claude/**, .git/**, .github/**, .gitattributes, .gitmodules)"
        );
    }

    #[test]
    fn path_screening_refuses_before_the_kernel_sees_the_path() {
        for (path, reason) in [
            ("", "it is empty; name a file relative to the worktree"),
            ("/etc/passwd", "it is absolute; paths are relative to the worktree"),
            ("//etc/passwd", "it is absolute; paths are relative to the worktree"),
            ("..", "it has a \"..\" segment"),
            ("../x", "it has a \"..\" segment"),
            ("a/../../x", "it has a \"..\" segment"),
            ("a/..", "it has a \"..\" segment"),
            ("-rf", "it starts with \"-\""),
            ("a\0b", "it contains a NUL byte"),
            (".", "it names the worktree itself, not a file"),
            ("./", "it names the worktree itself, not a file"),
        ] {
            let error = RelPath::parse(path, Access::Read).unwrap_err();
            assert_eq!(error.to_string(), format!("path {} refused: {reason}", go_quote(path)));
        }
        let long = "a/".repeat(2100);
        assert!(RelPath::parse(&long, Access::Read).is_err());
        // A segment that merely starts with dots is a name, and `.` segments drop out.
        let ok = RelPath::parse("./a//..b/./c", Access::Read).unwrap();
        assert_eq!(ok.joined, "a/..b/c");
    }

    #[test]
    fn policy_digest_is_the_sha256_of_the_canonical_policy_document_and_stable() {
        let policy = ConfinementPolicy::default();
        let root = Path::new("/srv/ws/ep1");
        let document = canonical_value(&policy.document(root));
        assert_eq!(
            String::from_utf8(document.clone()).unwrap(),
            concat!(
                r#"{"caps":{"read_bytes":1048576,"write_bytes":1048576},"#,
                r#""deny":{"match":"any path segment, case-folded, trailing dots and spaces ignored","#,
                r#""read":[".git/**"],"#,
                r#""write":[".ailang/**",".claude/**",".git/**",".github/**",".gitattributes",".gitmodules"]},"#,
                r#""limits":{"create_parent_dirs":true,"file_types":["regular"],"hard_links":1,"path_bytes":4096,"#,
                r#""payload_bytes":8388608,"#,
                r#""resolve":["beneath","no_magiclinks","no_xdev"],"#,
                r#""symlinks":{"read":"followed while they stay beneath the root","write":"never followed"},"#,
                r#""write":"temporary file, fsync, rename"},"#,
                r#""root":"/srv/ws/ep1"}"#
            )
        );
        assert_eq!(policy.policy_digest(root), HashRef::of(&document));
        assert_eq!(policy.policy_digest(root), ConfinementPolicy::default().policy_digest(root));
        assert_ne!(policy.policy_digest(root), policy.policy_digest(Path::new("/srv/ws/ep2")));
        let smaller = ConfinementPolicy { max_write_bytes: 10, ..ConfinementPolicy::default() };
        assert_ne!(policy.policy_digest(root), smaller.policy_digest(root));
        let flat = ConfinementPolicy { create_parent_dirs: false, ..ConfinementPolicy::default() };
        assert_ne!(policy.policy_digest(root), flat.policy_digest(root));
    }

    #[test]
    fn a_write_replaces_the_file_by_rename_keeping_its_mode_and_leaving_no_temporary_file() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ep1");
        std::fs::create_dir(&dir).unwrap();
        let target = dir.join("a.txt");
        std::fs::write(&target, "old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
        let before = std::fs::metadata(&target).unwrap().ino();
        // A reader holding the old file keeps seeing the old bytes: the file was replaced, not
        // rewritten in place.
        let held = std::fs::File::open(&target).unwrap();

        let worktree = Worktree::open(tmp.path(), &episode("ep1")).unwrap();
        worktree.write("a.txt", b"new", &ConfinementPolicy::default()).unwrap();

        let after = std::fs::metadata(&target).unwrap();
        assert_ne!(after.ino(), before);
        assert_eq!(after.permissions().mode() & 0o777, 0o640);
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        let mut old = String::new();
        (&held).read_to_string(&mut old).unwrap();
        assert_eq!(old, "old");
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["a.txt"]);

        let flat = ConfinementPolicy { create_parent_dirs: false, ..ConfinementPolicy::default() };
        let error = worktree.write("new/deep/b.txt", b"b", &flat).unwrap_err();
        assert_eq!(
            error.to_string(),
            "path \"new/deep/b.txt\" refused: directory \"new\" does not exist; writes create no directories"
        );
        assert!(!dir.join("new").exists());
        worktree.write("new/deep/b.txt", b"b", &ConfinementPolicy::default()).unwrap();
        let created = std::fs::metadata(dir.join("new/deep/b.txt")).unwrap();
        assert_eq!(created.permissions().mode() & 0o777, 0o644);
        assert_eq!(std::fs::metadata(dir.join("new/deep")).unwrap().permissions().mode() & 0o777, 0o755);
    }

    #[test]
    fn a_leftover_temporary_file_does_not_disturb_later_writes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ep1");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(".world-write-0011223344556677.tmp"), "partial").unwrap();
        std::fs::write(dir.join("a.txt"), "old").unwrap();
        let worktree = Worktree::open(tmp.path(), &episode("ep1")).unwrap();
        worktree.write("a.txt", b"new", &ConfinementPolicy::default()).unwrap();
        assert_eq!(std::fs::read(dir.join("a.txt")).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    }

    #[test]
    fn magic_links_are_refused_even_where_they_are_entries_of_the_worktree() {
        // /proc/self/fd is a real directory whose entries are magic links: the one place a
        // worktree can hold one without a mount.
        let outside = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(outside.path(), "secret").unwrap();
        let held = std::fs::File::open(outside.path()).unwrap();
        let worktree = Worktree::open(Path::new("/proc/self"), &episode("fd")).unwrap();
        let name = held.as_raw_fd().to_string();
        let error = worktree.read(&name, &ConfinementPolicy::default()).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("path \"{name}\" refused: it resolves through a magic link or too many symlinks")
        );
        let error = worktree.write(&name, b"changed", &ConfinementPolicy::default()).unwrap_err();
        assert!(error.to_string().ends_with("it is a symlink; writes never follow or replace symlinks"), "{error}");
        assert_eq!(std::fs::read(outside.path()).unwrap(), b"secret");
    }

    /// Every file beneath `dir` that is not beneath `except`, with its bytes (symlinks as
    /// their targets), in a stable order.
    fn snapshot(dir: &Path, except: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                out.push((path.clone(), std::fs::read_link(&path).unwrap().into_os_string().into_encoded_bytes()));
            } else if meta.is_dir() {
                out.push((path.clone(), b"dir".to_vec()));
                if path != except {
                    snapshot(&path, except, out);
                }
            } else {
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }

    /// Link targets that leave the worktree, re-enter it, point into `.git`, loop, or name a
    /// magic link; `{outside}` and `{inside}` are absolute paths of the case's directories.
    const LINK_TARGETS: [&str; 14] = [
        "../../outside/secret.txt",
        "../../outside",
        "{outside}/secret.txt",
        "{outside}",
        "{inside}/a.txt",
        "../ep1/a.txt",
        "..",
        "/",
        "a.txt",
        "sub",
        ".git",
        ".git/config",
        "loop",
        "/proc/self/root",
    ];

    const SEGMENTS: [&str; 17] = [
        "a.txt",
        "sub",
        "b.txt",
        "..",
        ".",
        "",
        "l1",
        "l2",
        "loop",
        ".git",
        "config",
        "outside",
        "secret.txt",
        ".GIT",
        "new.txt",
        "ep1",
        "git~1",
    ];

    #[derive(Clone, Copy, Debug)]
    enum Op {
        Read,
        Edit,
        Write { create_parents: bool },
    }

    /// Paths by the links (and on through them) most of the time, since that is where an escape
    /// would be; otherwise any mix of segments, or absolute paths.
    fn access_path() -> impl Strategy<Value = String> {
        let through_link = (
            prop::sample::select(vec!["l1", "sub/l2", "loop", "./l1", "sub//l2"]),
            prop::sample::select(vec!["", "", "/secret.txt", "/a.txt", "/config", "/dir/x.txt", "/b.txt", "/new.txt"]),
        )
            .prop_map(|(link, rest)| format!("{link}{rest}"));
        prop_oneof![
            4 => through_link,
            3 => prop::collection::vec(prop::sample::select(SEGMENTS.to_vec()), 1..5).prop_map(|s| s.join("/")),
            1 => prop::collection::vec(prop::sample::select(SEGMENTS.to_vec()), 1..4).prop_map(|s| format!("/{}", s.join("/"))),
            1 => Just("{outside}/secret.txt".to_owned()),
            1 => Just("{inside}/a.txt".to_owned()),
        ]
    }

    proptest! {
        #![proptest_config(crate::fuzzing::config(96))]

        /// Random symlinks in and around a worktree, then random reads, edits and writes by
        /// random paths (`..`, `.`, empty and absolute ones included): a read returns only bytes
        /// of a file inside the worktree and outside `.git`, and nothing outside the worktree,
        /// nor its `.git`, ever changes.
        #[test]
        fn no_access_reaches_outside_the_worktree(
            links in prop::collection::vec(
                (prop::sample::select(vec!["l1", "sub/l2", "loop"]), prop::sample::select(LINK_TARGETS.to_vec())),
                0..4,
            ),
            ops in prop::collection::vec(
                (
                    prop_oneof![
                        Just(Op::Read),
                        Just(Op::Edit),
                        any::<bool>().prop_map(|create_parents| Op::Write { create_parents }),
                    ],
                    access_path(),
                ),
                1..8,
            ),
        ) {
            let tmp = tempfile::tempdir().unwrap();
            let outside = tmp.path().join("outside");
            let inside = tmp.path().join("ws/ep1");
            std::fs::create_dir_all(outside.join("dir")).unwrap();
            std::fs::create_dir_all(inside.join("sub")).unwrap();
            std::fs::create_dir_all(inside.join(".git")).unwrap();
            std::fs::write(outside.join("secret.txt"), "OUTSIDE secret").unwrap();
            std::fs::write(outside.join("dir/x.txt"), "OUTSIDE x").unwrap();
            std::fs::write(tmp.path().join("ws/beside.txt"), "OUTSIDE beside").unwrap();
            std::fs::write(inside.join("a.txt"), "inside a").unwrap();
            std::fs::write(inside.join("sub/b.txt"), "inside b").unwrap();
            std::fs::write(inside.join(".git/config"), "GIT config").unwrap();
            let fill = |text: &str| {
                text.replace("{outside}", outside.to_str().unwrap()).replace("{inside}", inside.to_str().unwrap())
            };
            for (name, target) in &links {
                let _ = symlink(fill(target), inside.join(name));
            }
            let mut before = Vec::new();
            snapshot(tmp.path(), &inside, &mut before);
            let mut git_before = Vec::new();
            snapshot(&inside.join(".git"), Path::new(""), &mut git_before);

            let worktree = Worktree::open(&tmp.path().join("ws"), &episode("ep1")).unwrap();
            for (op, path) in &ops {
                let path = fill(path);
                let policy = ConfinementPolicy {
                    create_parent_dirs: matches!(op, Op::Write { create_parents: true }),
                    ..ConfinementPolicy::default()
                };
                let read = match op {
                    Op::Read => worktree.read(&path, &policy),
                    Op::Edit => worktree.read_for_edit(&path, &policy),
                    Op::Write { .. } => worktree.write(&path, b"inside written", &policy).map(|()| Vec::new()),
                };
                if let Ok(bytes) = read {
                    let text = String::from_utf8_lossy(&bytes);
                    prop_assert!(bytes.is_empty() || text.starts_with("inside"), "{:?} {} read {:?} with links {:?}", op, path, text, links);
                }
            }
            let mut after = Vec::new();
            snapshot(tmp.path(), &inside, &mut after);
            prop_assert_eq!(before, after, "outside the worktree, after {:?} with links {:?}", ops, links);
            let mut git_after = Vec::new();
            snapshot(&inside.join(".git"), Path::new(""), &mut git_after);
            prop_assert_eq!(git_before, git_after, "the worktree's .git, after {:?} with links {:?}", ops, links);
        }
    }
}
