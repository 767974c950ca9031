//! Scratch roots in the temporary directory: capsule roots (`world-capsule-…`) and the
//! Ailang.* handlers' staging roots (`world-tool-…`). A root is named for the process that
//! made it — `<kind><pid>.<start>.<pid namespace>-<random>`, the start being the kernel's
//! start time of that process — so a core starting later can tell the roots of a core that is
//! no longer running (which a SIGKILL leaves behind) from those of one that still is, and
//! removes only the former. Nothing else in the temporary directory is ever touched: a name
//! that does not parse, a root of another pid namespace or another user, and anything that is
//! not a plain directory are left alone.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::OnceLock;

/// Capsule roots.
pub const CAPSULE: &str = "world-capsule-";
/// The Ailang.* handlers' staging roots.
pub const TOOL: &str = "world-tool-";
const SWEPT: [&str; 2] = [CAPSULE, TOOL];

/// A process as the owner of roots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Owner {
    pid: u32,
    /// Clock ticks after boot at which the process started: with the pid, names it uniquely.
    start: u64,
    /// The inode of its pid namespace: pids name processes only within one.
    namespace: u64,
}

impl Owner {
    fn tag(&self) -> String {
        format!("{}.{}.{}", self.pid, self.start, self.namespace)
    }

    /// The owner a root's name records after its kind prefix, when it is one of ours.
    fn parse(rest: &str) -> Option<Owner> {
        let (tag, random) = rest.split_once('-')?;
        if random.is_empty() || !random.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        let mut parts = tag.split('.').map(|part| {
            (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit())).then(|| part.parse::<u64>().ok()).flatten()
        });
        let (pid, start, namespace) = (parts.next()??, parts.next()??, parts.next()??);
        if parts.next().is_some() {
            return None;
        }
        Some(Owner { pid: u32::try_from(pid).ok()?, start, namespace })
    }
}

/// This process, or `None` where `/proc` cannot say (its roots then carry no owner, and no
/// sweep ever removes them).
fn this_process() -> Option<Owner> {
    static THIS: OnceLock<Option<Owner>> = OnceLock::new();
    *THIS.get_or_init(|| {
        let pid = std::process::id();
        Some(Owner { pid, start: start_time(pid).ok()??.0, namespace: pid_namespace()? })
    })
}

fn pid_namespace() -> Option<u64> {
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// The start time of process `pid` and whether it has ended (a zombie runs nothing again);
/// `Ok(None)` when there is no such process.
fn start_time(pid: u32) -> std::io::Result<Option<(u64, bool)>> {
    let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    // The command name (field 2) is parenthesised and may hold anything; fields 3… follow
    // the last ')': the state is field 3, the start time field 22.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let unreadable = || std::io::Error::other(format!("/proc/{pid}/stat is not in the expected form"));
    let state = fields.first().ok_or_else(unreadable)?;
    let start = fields.get(19).and_then(|field| field.parse().ok()).ok_or_else(unreadable)?;
    Ok(Some((start, matches!(*state, "Z" | "X"))))
}

/// The prefix of a new root of `kind` ([`CAPSULE`], [`TOOL`]) made by this process.
pub fn root_prefix(kind: &str) -> String {
    match this_process() {
        Some(owner) => format!("{kind}{}-", owner.tag()),
        None => kind.to_owned(),
    }
}

/// Whether `owner` has stopped running, as far as this process can tell.
fn stopped(owner: Owner, this: Owner) -> bool {
    if owner.namespace != this.namespace {
        return false;
    }
    match start_time(owner.pid) {
        Ok(None) => true,
        Ok(Some((start, ended))) => start != owner.start || ended,
        Err(_) => false,
    }
}

/// What a sweep did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    pub removed: usize,
    /// Roots of stopped cores that could not be removed (each is logged).
    pub failed: usize,
}

/// Removes, from the temporary directory and `capsule_roots` (where capsule roots are made,
/// when that is elsewhere), the capsule and tool roots of cores that are no longer running.
pub fn remove_leftovers(capsule_roots: &Path) -> Swept {
    let Some(this) = this_process() else { return Swept::default() };
    let temp = std::env::temp_dir();
    let mut swept = remove_leftovers_in(&temp, this);
    if capsule_roots != temp {
        let more = remove_leftovers_in(capsule_roots, this);
        swept.removed += more.removed;
        swept.failed += more.failed;
    }
    swept
}

fn remove_leftovers_in(dir: &Path, this: Owner) -> Swept {
    let mut swept = Swept::default();
    let Ok(entries) = std::fs::read_dir(dir) else { return swept };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let user = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(owner) = SWEPT.iter().find_map(|kind| Owner::parse(name.strip_prefix(kind)?)) else { continue };
        // Never follows a link, never touches what another user made.
        let Ok(metadata) = entry.path().symlink_metadata() else { continue };
        if !metadata.is_dir() || metadata.uid() != user || !stopped(owner, this) {
            continue;
        }
        match std::fs::remove_dir_all(entry.path()) {
            Ok(()) => swept.removed += 1,
            Err(error) => {
                tracing::warn!(root = %entry.path().display(), %error, "a root left by a stopped core could not be removed");
                swept.failed += 1;
            }
        }
    }
    swept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn this() -> Owner {
        this_process().expect("/proc describes this process")
    }

    /// An owner that ran and has stopped: a child that exited, reaped.
    fn stopped_owner() -> Owner {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = start_time(pid).unwrap().unwrap().0;
        child.wait().unwrap();
        Owner { pid, start, ..this() }
    }

    #[test]
    fn a_root_name_records_its_owner_and_nothing_else_parses() {
        let prefix = root_prefix(CAPSULE);
        let name = format!("{prefix}Ab12Cd");
        assert_eq!(Owner::parse(name.strip_prefix(CAPSULE).unwrap()), Some(this()));
        for other in ["", "12.3.4", "12.3.4-", "12.3-abc", "12.3.4.5-abc", "a.3.4-abc", "12.3.4-ab/c", "-1.3.4-abc"] {
            assert_eq!(Owner::parse(other), None, "{other:?}");
        }
    }

    #[test]
    fn only_roots_of_stopped_owners_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dead = stopped_owner();
        let reused = Owner { start: this().start + 1, ..this() };
        let elsewhere = Owner { namespace: this().namespace + 1, ..dead };
        let make = |name: String| {
            std::fs::create_dir_all(tmp.path().join(&name).join("host/capsule")).unwrap();
            name
        };
        let removed = [
            make(format!("{CAPSULE}{}-aaaaaa", dead.tag())),
            make(format!("{TOOL}{}-bbbbbb", dead.tag())),
            // This pid, another start time: the pid was reused, so its maker has stopped.
            make(format!("{CAPSULE}{}-cccccc", reused.tag())),
        ];
        let kept = [
            make(format!("{CAPSULE}{}-dddddd", this().tag())),
            make(format!("{CAPSULE}{}-eeeeee", elsewhere.tag())),
            make(format!("{CAPSULE}unmarked")),
            make(format!("world-bench-{}-ffffff", dead.tag())),
            make("unrelated".to_owned()),
        ];
        std::fs::write(tmp.path().join(format!("{TOOL}{}-gggggg", dead.tag())), b"a file").unwrap();
        std::os::unix::fs::symlink(
            tmp.path().join("unrelated"),
            tmp.path().join(format!("{TOOL}{}-hhhhhh", dead.tag())),
        )
        .unwrap();

        assert_eq!(remove_leftovers_in(tmp.path(), this()), Swept { removed: 3, failed: 0 });
        for name in removed {
            assert!(!tmp.path().join(&name).exists(), "{name} stayed");
        }
        for name in kept {
            assert!(tmp.path().join(&name).join("host/capsule").is_dir(), "{name} went");
        }
        assert!(tmp.path().join(format!("{TOOL}{}-gggggg", dead.tag())).is_file());
        assert!(tmp.path().join(format!("{TOOL}{}-hhhhhh", dead.tag())).is_symlink());
    }
}
