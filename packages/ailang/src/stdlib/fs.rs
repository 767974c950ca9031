//! std/fs: files beneath the sandbox root. Every function needs the `FS` capability.
//!
//! The root is `AILANG_FS_SANDBOX` (the current directory when unset). Paths are resolved by
//! the kernel with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` from a descriptor of
//! the root, so neither `..` nor a symlink can lead out of it, and no check-then-open race
//! exists. A file with more than one hard link is refused (a hard link to an outside file
//! passes RESOLVE_BENEATH), and so are FIFOs, sockets and devices. Writes go to a temporary
//! file in the same directory and are renamed over the target.
//!
//! `AILANG_FS_DENY_WRITE` (a comma list of names such as `.git,.github`) protects paths from
//! writes: a path with a denied segment (compared case-insensitively) is refused, and writes
//! then follow no symlink at all, so a link inside the root cannot lead a write under a
//! protected directory.

use super::io::require;
use super::{StdModule, native};
use crate::diag::Diagnostic;
use crate::eval::Interp;
use crate::value::*;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;

pub static MODULE: StdModule = StdModule {
    path: "std/fs",
    types: &[],
    funcs: &[
        native("readFile", 1, |it, a| {
            require(it, "FS")?;
            read_file(as_str(&a[0], "readFile")?).map(Value::str)
        }),
        native("writeFile", 2, |it, a| {
            require(it, "FS")?;
            write_file(as_str(&a[0], "writeFile")?, as_str(&a[1], "writeFile")?)?;
            Ok(Value::Unit)
        }),
        native("exists", 1, |it, a| {
            require(it, "FS")?;
            exists(as_str(&a[0], "exists")?).map(Value::Bool)
        }),
        // The reference's name for `exists` (a reserved word there).
        native("fileExists", 1, |it, a| {
            require(it, "FS")?;
            exists(as_str(&a[0], "fileExists")?).map(Value::Bool)
        }),
        native("listDir", 1, |it: &mut Interp, a| {
            require(it, "FS")?;
            let names = list_dir(as_str(&a[0], "listDir")?)?;
            Ok(Value::list(names.into_iter().map(Value::str).collect()))
        }),
    ],
};

/// Files larger than this are refused rather than read into memory.
const MAX_FILE_BYTES: u64 = 64 << 20;

fn fs_error(path: &str, why: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::new("RT_FS", format!("'{path}': {why}"), None)
}

fn errno_text(path: &str, e: Errno) -> Diagnostic {
    match e {
        Errno::XDEV => fs_error(path, "the path leads outside the sandbox root"),
        Errno::LOOP => fs_error(path, "too many symlinks, or a symlink the sandbox does not follow"),
        Errno::NOENT => fs_error(path, "no such file or directory"),
        other => fs_error(path, std::io::Error::from(other)),
    }
}

fn root() -> Result<OwnedFd, Diagnostic> {
    let dir = std::env::var_os("AILANG_FS_SANDBOX").unwrap_or_else(|| ".".into());
    rustix::fs::open(&dir, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).map_err(|e| {
        Diagnostic::new("RT_FS", format!("cannot open the sandbox root '{}': {e}", dir.to_string_lossy()), None)
    })
}

fn relative(path: &str) -> Result<&str, Diagnostic> {
    if path.is_empty() {
        return Err(fs_error(path, "empty path"));
    }
    if path.starts_with('/') {
        return Err(fs_error(path, "absolute paths are refused; give a path relative to the sandbox root"));
    }
    if path.contains('\0') {
        return Err(fs_error(path, "the path contains a NUL byte"));
    }
    Ok(path)
}

fn beneath(path: &str, flags: OFlags) -> Result<OwnedFd, Diagnostic> {
    beneath_with(path, flags, ResolveFlags::empty())
}

fn beneath_with(path: &str, flags: OFlags, extra: ResolveFlags) -> Result<OwnedFd, Diagnostic> {
    let root = root()?;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS | extra;
    rustix::fs::openat2(&root, relative(path)?, flags | OFlags::CLOEXEC, Mode::empty(), resolve)
        .map_err(|e| errno_text(path, e))
}

/// The names `AILANG_FS_DENY_WRITE` protects from writes, lower-cased.
fn denied_names() -> Vec<String> {
    std::env::var("AILANG_FS_DENY_WRITE")
        .unwrap_or_default()
        .split(',')
        .map(|name| name.trim().to_lowercase())
        .filter(|name| !name.is_empty())
        .collect()
}

/// Regular files with one link only.
fn plain_file(path: &str, st: &rustix::fs::Stat) -> Result<(), Diagnostic> {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Err(fs_error(path, "is a directory")),
        other => return Err(fs_error(path, format!("is not a regular file ({other:?})"))),
    }
    if st.st_nlink > 1 {
        return Err(fs_error(path, "has more than one hard link; such files are refused"));
    }
    Ok(())
}

pub fn read_file(path: &str) -> Result<String, Diagnostic> {
    // O_NONBLOCK: opening a FIFO must not wait for a writer before it is refused.
    let fd = beneath(path, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY)?;
    let st = rustix::fs::fstat(&fd).map_err(|e| errno_text(path, e))?;
    plain_file(path, &st)?;
    if st.st_size as u64 > MAX_FILE_BYTES {
        return Err(fs_error(path, format!("is larger than {MAX_FILE_BYTES} bytes")));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd).read_to_end(&mut bytes).map_err(|e| fs_error(path, e))?;
    String::from_utf8(bytes).map_err(|_| fs_error(path, "is not valid UTF-8"))
}

/// The directory part (or ".") and the final name of a relative path.
fn split_parent(path: &str) -> Result<(&str, &str), Diagnostic> {
    let trimmed = path.trim_end_matches('/');
    let (dir, name) = match trimmed.rfind('/') {
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => (".", trimmed),
    };
    if name.is_empty() || name == "." || name == ".." {
        return Err(fs_error(path, "does not name a file"));
    }
    Ok((if dir.is_empty() { "." } else { dir }, name))
}

pub fn write_file(path: &str, content: &str) -> Result<(), Diagnostic> {
    let denied = denied_names();
    if let Some(segment) = path.split('/').find(|segment| denied.contains(&segment.to_lowercase())) {
        return Err(fs_error(path, format!("{segment} is protected from writes (AILANG_FS_DENY_WRITE)")));
    }
    let (dir, name) = split_parent(relative(path)?)?;
    let no_links = if denied.is_empty() { ResolveFlags::empty() } else { ResolveFlags::NO_SYMLINKS };
    let dirfd = beneath_with(dir, OFlags::PATH | OFlags::DIRECTORY, no_links)?;
    match rustix::fs::statat(&dirfd, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if !denied.is_empty() && FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
            return Err(fs_error(path, "is a symlink; protected writes follow none"));
        }
        Ok(st) => plain_file(path, &st)?,
        Err(Errno::NOENT) => {}
        Err(e) => return Err(errno_text(path, e)),
    }
    // The directory was opened O_PATH; the temporary file needs a real directory fd.
    let dirfd = rustix::fs::openat(&dirfd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| errno_text(path, e))?;
    let tmp = format!(".{name}.ailang-tmp-{}", std::process::id());
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd =
        rustix::fs::openat(&dirfd, tmp.as_str(), flags, Mode::from_raw_mode(0o644)).map_err(|e| errno_text(path, e))?;
    let mut file = std::fs::File::from(fd);
    let written = file.write_all(content.as_bytes()).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(&dirfd, tmp.as_str(), AtFlags::empty());
        return Err(fs_error(path, e));
    }
    rustix::fs::renameat(&dirfd, tmp.as_str(), &dirfd, name).map_err(|e| {
        let _ = rustix::fs::unlinkat(&dirfd, tmp.as_str(), AtFlags::empty());
        errno_text(path, e)
    })
}

pub fn exists(path: &str) -> Result<bool, Diagnostic> {
    match beneath(path, OFlags::PATH) {
        Ok(_) => Ok(true),
        Err(d) if d.message.ends_with("no such file or directory") => Ok(false),
        Err(d) => Err(d),
    }
}

pub fn list_dir(path: &str) -> Result<Vec<String>, Diagnostic> {
    let fd = beneath(path, OFlags::RDONLY | OFlags::DIRECTORY)?;
    let dir = rustix::fs::Dir::read_from(&fd).map_err(|e| errno_text(path, e))?;
    let mut names = Vec::new();
    for entry in dir {
        let entry = entry.map_err(|e| errno_text(path, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name != "." && name != ".." {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}
