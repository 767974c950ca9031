//! The native Workspace handlers: `Workspace.Read` (`read`) and `Workspace.Write` (`write`,
//! `edit`), at scope `worktree`, over an episode's confined [`Worktree`].
//!
//! Two kinds of "no", both recorded `failed`: a malformed request (not one JSON object, an
//! unknown or case-aliased key, an op the effect does not allow, a wrong scope) is a
//! [`HandlerFailure::Failed`]; a well-formed request the worktree refuses (confinement, a
//! missing file, a cap, an ambiguous edit) answers `{"ok":false,"refused":"…"}` as a refused
//! [`Output`], so the agent reads why. Every output carries `tool` and `policy_digest` and is
//! canonical JSON; a read, write or edit that happened also carries `sha256`, the ref of the
//! bytes read or written.

use serde_json::{Map, Value};
use world_model::{HashRef, canonical_value, canonicalize, go_quote};

use super::answer::{HandlerFailure, Output};
use super::worktree::{AccessError, ConfinementPolicy, Worktree};

/// The only scope these handlers serve.
const SCOPE: &str = "worktree";

/// The Workspace handlers of this core: the confinement policy and the ref of the executable
/// that performs the effects (this binary).
#[derive(Clone, Debug)]
pub struct WorkspaceHandlers {
    policy: ConfinementPolicy,
    tool: HashRef,
}

/// One parsed request.
enum Request {
    Read { path: String },
    Write { path: String, content: String },
    Edit { path: String, old_text: String, new_text: String },
}

impl WorkspaceHandlers {
    /// The one effect of these handlers that only reads.
    pub const READ: &'static str = "Workspace.Read";
    /// The effects these handlers perform.
    pub const EFFECTS: [&'static str; 2] = [Self::READ, "Workspace.Write"];

    /// Handlers under the default policy (1 MiB read and write caps).
    pub fn new(tool: HashRef) -> Self {
        Self::with_policy(tool, ConfinementPolicy::default())
    }

    pub fn with_policy(tool: HashRef, policy: ConfinementPolicy) -> Self {
        Self { policy, tool }
    }

    pub fn policy(&self) -> &ConfinementPolicy {
        &self.policy
    }

    /// Performs one effect in `worktree` and returns its output (canonical JSON). Blocking:
    /// the caller runs it off the async threads and bounds it with its handler timeout.
    pub fn handle(
        &self,
        worktree: &Worktree,
        effect: &str,
        scope: &str,
        payload: &[u8],
    ) -> Result<Output, HandlerFailure> {
        let ops: &[&str] = match effect {
            Self::READ => &["read"],
            "Workspace.Write" => &["write", "edit"],
            other => {
                return Err(HandlerFailure::Failed(format!(
                    "no Workspace handler serves effect {}; served: Workspace.Read, Workspace.Write",
                    go_quote(other)
                )));
            }
        };
        if scope != SCOPE {
            return Err(failed(
                effect,
                format!(
                    "scope {} is not served; the Workspace handlers serve scope \"worktree\" only",
                    go_quote(scope)
                ),
            ));
        }
        let request = parse_request(effect, ops, payload, self.policy.max_payload_bytes)?;
        let answer = self.perform(worktree, &request);
        let refused = answer.is_err();
        let mut output = match answer {
            Ok(fields) => fields,
            Err(refusal @ AccessError::Refused { .. }) => {
                object([("ok", Value::Bool(false)), ("refused", Value::String(refusal.to_string()))])
            }
            Err(error @ AccessError::Io { .. }) => return Err(failed(effect, error)),
        };
        output.insert("tool".into(), Value::String(self.tool.to_string()));
        output.insert("policy_digest".into(), Value::String(self.policy.policy_digest(worktree.path()).to_string()));
        Ok(Output { bytes: canonical_value(&Value::Object(output)), refused })
    }

    fn perform(&self, worktree: &Worktree, request: &Request) -> Result<Map<String, Value>, AccessError> {
        let policy = &self.policy;
        Ok(match request {
            Request::Read { path } => {
                let content = text(path, worktree.read(path, policy)?, "read")?;
                object([
                    ("ok", Value::Bool(true)),
                    ("sha256", sha256(content.as_bytes())),
                    ("content", Value::String(content)),
                ])
            }
            Request::Write { path, content } => {
                worktree.write(path, content.as_bytes(), policy)?;
                object([
                    ("ok", Value::Bool(true)),
                    ("bytes", Value::from(content.len())),
                    ("sha256", sha256(content.as_bytes())),
                ])
            }
            Request::Edit { path, old_text, new_text } => {
                let content = text(path, worktree.read_for_edit(path, policy)?, "edited")?;
                let edited = replace_once(&content, old_text, new_text)
                    .map_err(|reason| AccessError::Refused { path: path.clone(), reason })?;
                // Episode effects run one at a time, so nothing of this episode changes the file
                // between this read and the write.
                worktree.write(path, edited.as_bytes(), policy)?;
                object([
                    ("ok", Value::Bool(true)),
                    ("bytes", Value::from(edited.len())),
                    ("sha256", sha256(edited.as_bytes())),
                ])
            }
        })
    }
}

/// `sha256:<hex>` of file bytes, the key a record is tied to the version it read or wrote by.
pub fn sha256(bytes: &[u8]) -> Value {
    Value::String(HashRef::of(bytes).to_string())
}

/// A file's bytes as text; the refusal names what is done only to text files (`read`, `edited`).
fn text(path: &str, bytes: Vec<u8>, done: &str) -> Result<String, AccessError> {
    String::from_utf8(bytes).map_err(|e| AccessError::Refused {
        path: path.to_owned(),
        reason: format!(
            "its content is not UTF-8 text (invalid byte at offset {}); only text files are {done}",
            e.utf8_error().valid_up_to()
        ),
    })
}

fn object<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(key, value)| (key.to_owned(), value)).collect()
}

/// `text` with the one occurrence of `old` replaced by `new`. Occurrences are counted
/// overlapping (`aa` occurs twice in `aaa`), so the edit is never ambiguous.
fn replace_once(text: &str, old: &str, new: &str) -> Result<String, String> {
    if old.is_empty() {
        return Err("old_text is empty; it must be text that occurs exactly once in the file".to_owned());
    }
    let Some(first) = text.find(old) else {
        return Err("old_text does not occur in the file".to_owned());
    };
    let next = first + text[first..].chars().next().map_or(1, char::len_utf8);
    if text[next..].contains(old) {
        return Err(
            "old_text occurs more than once in the file; include more context so it occurs exactly once".to_owned()
        );
    }
    let mut edited = String::with_capacity(text.len() - old.len() + new.len());
    edited.push_str(&text[..first]);
    edited.push_str(new);
    edited.push_str(&text[first + old.len()..]);
    Ok(edited)
}

/// A request the handler could not act on: nothing in the worktree was changed, so the broker
/// records the effect `failed` with this reason.
fn failed(effect: &str, reason: impl std::fmt::Display) -> HandlerFailure {
    HandlerFailure::Failed(format!("{effect}: {reason}"))
}

/// Parses the payload: one JSON object (no duplicate keys, no trailing data), `op` a string the
/// effect allows, exactly that op's keys, each a string.
fn parse_request(effect: &str, ops: &[&str], payload: &[u8], max_payload: usize) -> Result<Request, HandlerFailure> {
    let request_error = |reason: String| failed(effect, reason);
    let payload_error =
        |reason: &dyn std::fmt::Display| failed(effect, format!("the payload is not one JSON object: {reason}"));
    // canonicalize refuses what serde_json would quietly accept: duplicate keys (a second `op`
    // must not win) and invalid text.
    let canonical = canonicalize(payload, max_payload).map_err(|e| payload_error(&e))?;
    let value: Value = serde_json::from_slice(&canonical).map_err(|e| payload_error(&e))?;
    let Value::Object(object) = value else {
        return Err(payload_error(&"it is not an object"));
    };
    if let Some(alias) = object.keys().find(|k| k.as_str() != "op" && k.eq_ignore_ascii_case("op")) {
        return Err(request_error(format!("key {} is a case variant of \"op\"; write \"op\"", go_quote(alias))));
    }
    let op = match object.get("op") {
        None => return Err(request_error(format!("the payload has no \"op\"; {effect} admits: {}", ops.join(", ")))),
        Some(Value::String(op)) => op.as_str(),
        Some(_) => return Err(request_error("\"op\" must be a string".to_owned())),
    };
    if !ops.contains(&op) {
        return Err(request_error(format!(
            "op {} is not served by {effect}; it admits: {}",
            go_quote(op),
            ops.join(", ")
        )));
    }
    let keys: &[&str] = match op {
        "read" => &["path"],
        "write" => &["path", "content"],
        _ => &["path", "old_text", "new_text"],
    };
    if let Some(unknown) = object.keys().find(|k| k.as_str() != "op" && !keys.contains(&k.as_str())) {
        return Err(request_error(format!(
            "unknown key {} for op {}; it admits: op, {}",
            go_quote(unknown),
            go_quote(op),
            keys.join(", ")
        )));
    }
    let field = |key: &str| -> Result<String, HandlerFailure> {
        match object.get(key) {
            Some(Value::String(text)) => Ok(text.clone()),
            Some(_) => Err(request_error(format!("{} must be a string", go_quote(key)))),
            None => Err(request_error(format!("op {} needs {}", go_quote(op), go_quote(key)))),
        }
    };
    Ok(match op {
        "read" => Request::Read { path: field("path")? },
        "write" => Request::Write { path: field("path")?, content: field("content")? },
        _ => Request::Edit { path: field("path")?, old_text: field("old_text")?, new_text: field("new_text")? },
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::fs::{FileTypeExt, MetadataExt, symlink};
    use std::path::{Path, PathBuf};

    use serde_json::json;
    use world_model::Episode;

    use super::*;

    /// A workspace root holding the worktree `ep1`, and a directory outside it holding a secret.
    struct Fixture {
        _tmp: tempfile::TempDir,
        dir: PathBuf,
        outside: PathBuf,
        worktree: Worktree,
        handlers: WorkspaceHandlers,
    }

    const SECRET: &str = "outside secret\n";

    fn fixture() -> Fixture {
        fixture_with(ConfinementPolicy::default())
    }

    fn fixture_with(policy: ConfinementPolicy) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ws");
        let dir = root.join("ep1");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        std::fs::write(dir.join("notes.txt"), "alpha\nbeta\n").unwrap();
        let worktree = Worktree::open(&root, &Episode::parse("ep1").unwrap()).unwrap();
        let handlers = WorkspaceHandlers::with_policy(HashRef::of(b"world-core"), policy);
        Fixture { _tmp: tmp, dir, outside, worktree, handlers }
    }

    impl Fixture {
        fn call(&self, effect: &str, payload: Value) -> Result<Value, HandlerFailure> {
            let output = self.handlers.handle(&self.worktree, effect, "worktree", payload.to_string().as_bytes())?;
            let bytes = output.bytes;
            assert_eq!(bytes, canonical_value(&serde_json::from_slice(&bytes).unwrap()), "output is canonical");
            let value: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(output.refused, value["ok"] == json!(false), "a refusal is flagged: {value}");
            Ok(value)
        }

        fn read(&self, path: &str) -> Value {
            self.call("Workspace.Read", json!({"op": "read", "path": path})).unwrap()
        }

        fn write(&self, path: &str, content: &str) -> Value {
            self.call("Workspace.Write", json!({"op": "write", "path": path, "content": content})).unwrap()
        }

        fn edit(&self, path: &str, old_text: &str, new_text: &str) -> Value {
            self.call(
                "Workspace.Write",
                json!({"op": "edit", "path": path, "old_text": old_text, "new_text": new_text}),
            )
            .unwrap()
        }

        /// Both trees, for "nothing changed" checks.
        fn snapshot(&self) -> BTreeMap<PathBuf, String> {
            let mut out = BTreeMap::new();
            snapshot_into(&self.dir, &mut out);
            snapshot_into(&self.outside, &mut out);
            out
        }
    }

    /// Every entry below `dir`: its kind, inode and, for files, content; symlinks not followed.
    fn snapshot_into(dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let kind = meta.file_type();
            let what = if kind.is_symlink() {
                format!("link {}", std::fs::read_link(&path).unwrap().display())
            } else if kind.is_dir() {
                snapshot_into(&path, out);
                "dir".to_owned()
            } else if kind.is_file() {
                format!("file {} {:?}", meta.ino(), std::fs::read(&path).unwrap())
            } else {
                format!("special {:o} {}", meta.mode(), meta.ino())
            };
            out.insert(path, what);
        }
    }

    /// The refusal of an output, which must be `{ok:false, refused, tool, policy_digest}`.
    #[track_caller]
    fn refused(output: &Value) -> String {
        assert_eq!(output["ok"], json!(false), "{output}");
        assert!(output["tool"].as_str().unwrap().starts_with("sha256:"), "{output}");
        assert!(output["policy_digest"].as_str().unwrap().starts_with("sha256:"), "{output}");
        assert_eq!(output.as_object().unwrap().len(), 4, "{output}");
        output["refused"].as_str().unwrap().to_owned()
    }

    /// Read, write and edit of `path` are all refused, with `reason` in the message, and
    /// nothing inside or outside the worktree changes.
    #[track_caller]
    fn all_refused(f: &Fixture, path: &str, read_reason: &str, write_reason: &str) {
        let before = f.snapshot();
        let read = refused(&f.read(path));
        assert!(read.contains(read_reason), "read {path:?}: {read}");
        let write = refused(&f.write(path, "pwned"));
        assert!(write.contains(write_reason), "write {path:?}: {write}");
        let edit = refused(&f.edit(path, "secret", "pwned"));
        assert!(edit.contains(write_reason), "edit {path:?}: {edit}");
        assert_eq!(f.snapshot(), before, "{path:?} changed the file system");
        assert_eq!(std::fs::read_to_string(f.outside.join("secret.txt")).unwrap(), SECRET);
    }

    #[test]
    fn read_answers_the_content_with_tool_and_policy_digest_in_canonical_json() {
        let f = fixture();
        let bytes = f
            .handlers
            .handle(&f.worktree, "Workspace.Read", "worktree", br#"{"path":"notes.txt","op":"read"}"#)
            .unwrap()
            .bytes;
        let digest = f.handlers.policy().policy_digest(&f.dir);
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            format!(
                r#"{{"content":"alpha\nbeta\n","ok":true,"policy_digest":"{digest}","sha256":"{}","tool":"{}"}}"#,
                HashRef::of(b"alpha\nbeta\n"),
                HashRef::of(b"world-core")
            )
        );
    }

    #[test]
    fn write_creates_or_replaces_a_file_in_an_existing_directory() {
        let f = fixture_with(ConfinementPolicy { create_parent_dirs: false, ..ConfinementPolicy::default() });
        std::fs::create_dir(f.dir.join("src")).unwrap();
        let before = f.snapshot();
        let refusal = refused(&f.write("src/new/mod.ail", "module x\n"));
        assert_eq!(
            refusal,
            "path \"src/new/mod.ail\" refused: directory \"src/new\" does not exist; writes create no directories"
        );
        assert_eq!(f.snapshot(), before);

        let output = f.write("src/mod.ail", "module x\n");
        assert_eq!(output["ok"], json!(true));
        assert_eq!(output["bytes"], json!(9));
        assert_eq!(output["sha256"], json!(HashRef::of(b"module x\n").to_string()));
        assert_eq!(std::fs::read_to_string(f.dir.join("src/mod.ail")).unwrap(), "module x\n");
        assert_eq!(f.write("notes.txt", "")["ok"], json!(true));
        assert_eq!(std::fs::read_to_string(f.dir.join("notes.txt")).unwrap(), "");
        assert_eq!(f.read("src/mod.ail")["content"], json!("module x\n"));
    }

    #[test]
    fn writes_create_missing_directories_by_default() {
        let f = fixture();
        let output = f.write("src/new/mod.ail", "module x\n");
        assert_eq!(output["ok"], json!(true));
        assert_eq!(output["bytes"], json!(9));
        assert_eq!(std::fs::read_to_string(f.dir.join("src/new/mod.ail")).unwrap(), "module x\n");
        // Still never through a symlink, nor into a denied directory.
        symlink(&f.outside, f.dir.join("out")).unwrap();
        assert!(refused(&f.write("out/made/x.txt", "x")).contains("symlink"));
        assert!(refused(&f.write("a/.git/x", "x")).contains("write deny list"));
        assert!(!f.outside.join("made").exists() && !f.dir.join("a").exists());
    }

    #[test]
    fn edit_replaces_text_that_occurs_exactly_once() {
        let f = fixture();
        let inode = std::fs::metadata(f.dir.join("notes.txt")).unwrap().ino();
        let output = f.edit("notes.txt", "beta", "gamma");
        assert_eq!(output["ok"], json!(true), "{output}");
        assert_eq!(std::fs::read_to_string(f.dir.join("notes.txt")).unwrap(), "alpha\ngamma\n");
        assert_eq!(output["sha256"], json!(HashRef::of(b"alpha\ngamma\n").to_string()));
        assert_ne!(std::fs::metadata(f.dir.join("notes.txt")).unwrap().ino(), inode, "replaced by rename");
        let names: Vec<_> = std::fs::read_dir(&f.dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["notes.txt"], "no temporary file left");
    }

    #[test]
    fn edit_refuses_old_text_found_zero_or_several_times_and_leaves_the_file() {
        let f = fixture();
        std::fs::write(f.dir.join("dup.txt"), "x = 1\nx = 1\n").unwrap();
        std::fs::write(f.dir.join("overlap.txt"), "aaa").unwrap();
        let before = f.snapshot();
        for (path, old, reason) in [
            ("notes.txt", "delta", "old_text does not occur in the file"),
            ("dup.txt", "x = 1", "old_text occurs more than once"),
            ("overlap.txt", "aa", "old_text occurs more than once"),
            ("notes.txt", "", "old_text is empty"),
            ("missing.txt", "alpha", "it does not exist"),
        ] {
            let message = refused(&f.edit(path, old, "z"));
            assert!(message.starts_with(&format!("path \"{path}\" refused: ")), "{message}");
            assert!(message.contains(reason), "{path} {old:?}: {message}");
        }
        assert_eq!(f.snapshot(), before);
    }

    #[test]
    fn paths_that_are_not_plain_relative_paths_are_refused() {
        let f = fixture();
        let outside_abs = f.outside.join("secret.txt");
        let escape = format!("../../outside/{}", "secret.txt");
        for (path, reason) in [
            ("", "it is empty"),
            (outside_abs.to_str().unwrap(), "it is absolute"),
            ("/etc/passwd", "it is absolute"),
            (escape.as_str(), "\"..\" segment"),
            ("sub/../../outside/secret.txt", "\"..\" segment"),
            ("-rf", "it starts with \"-\""),
            ("--help", "it starts with \"-\""),
            ("notes.txt\0/x", "NUL byte"),
            (".", "names the worktree itself"),
        ] {
            all_refused(&f, path, reason, reason);
        }
        assert!(!f.dir.join("-rf").exists());
    }

    #[test]
    fn symlinks_leaving_the_worktree_are_refused() {
        let f = fixture();
        symlink(f.outside.join("secret.txt"), f.dir.join("abs")).unwrap();
        symlink("../../outside/secret.txt", f.dir.join("rel")).unwrap();
        symlink(&f.outside, f.dir.join("absdir")).unwrap();
        symlink("../../outside", f.dir.join("reldir")).unwrap();
        std::fs::create_dir(f.dir.join("sub")).unwrap();
        symlink("../..", f.dir.join("sub/up")).unwrap();
        let leaves = "outside the worktree";
        let no_follow = "symlink";
        for path in ["abs", "rel", "absdir/secret.txt", "reldir/secret.txt", "sub/up/outside/secret.txt"] {
            all_refused(&f, path, leaves, no_follow);
        }
        // Creating a new file through a directory link must not create it outside either.
        all_refused(&f, "absdir/new.txt", leaves, no_follow);
        all_refused(&f, "reldir/new/deeper.txt", leaves, no_follow);
        assert!(!f.outside.join("new.txt").exists() && !f.outside.join("new").exists());
    }

    #[test]
    fn magic_links_are_refused() {
        let f = fixture();
        symlink("/proc/self/root/etc/hostname", f.dir.join("magic")).unwrap();
        symlink("/proc/self/root", f.dir.join("magicdir")).unwrap();
        symlink("/proc/self/fd/0", f.dir.join("fd0")).unwrap();
        for path in ["magic", "magicdir/etc/hostname", "fd0"] {
            all_refused(&f, path, "outside the worktree", "symlink");
        }
    }

    #[test]
    fn symlinks_inside_the_worktree_are_followed_by_reads_only() {
        let f = fixture();
        symlink("notes.txt", f.dir.join("inlink")).unwrap();
        std::fs::create_dir(f.dir.join("real")).unwrap();
        std::fs::write(f.dir.join("real/a.txt"), "a").unwrap();
        symlink("real", f.dir.join("dirlink")).unwrap();
        assert_eq!(f.read("inlink")["content"], json!("alpha\nbeta\n"));
        assert_eq!(f.read("dirlink/a.txt")["content"], json!("a"));
        let before = f.snapshot();
        assert!(refused(&f.write("inlink", "x")).contains("it is a symlink; writes never follow or replace symlinks"));
        assert!(refused(&f.write("dirlink/a.txt", "x")).contains("symlink"));
        assert!(refused(&f.edit("inlink", "alpha", "x")).contains("symlink"));
        assert_eq!(f.snapshot(), before);
    }

    #[test]
    fn fifos_sockets_and_devices_are_refused_without_blocking() {
        let f = fixture();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            f.dir.join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(f.dir.join("sock")).unwrap();
        all_refused(&f, "fifo", "it is a FIFO, not a regular file", "it is a FIFO, not a regular file");
        all_refused(&f, "sock", "socket", "socket");
        // A device node needs root; either way /dev/null through a link is refused.
        symlink("/dev/null", f.dir.join("null-link")).unwrap();
        all_refused(&f, "null-link", "outside the worktree", "symlink");
        let made = rustix::fs::mknodat(
            rustix::fs::CWD,
            f.dir.join("null"),
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::from_raw_mode(0o666),
            rustix::fs::makedev(1, 3),
        );
        if made.is_ok() {
            assert!(std::fs::symlink_metadata(f.dir.join("null")).unwrap().file_type().is_char_device());
            all_refused(&f, "null", "it is a device, not a regular file", "it is a device, not a regular file");
        }
        all_refused(&f, ".", "names the worktree itself", "names the worktree itself");
        std::fs::create_dir(f.dir.join("sub")).unwrap();
        all_refused(&f, "sub", "it is a directory", "it is a directory");
    }

    #[test]
    fn files_with_more_than_one_hard_link_are_refused() {
        let f = fixture();
        std::fs::hard_link(f.outside.join("secret.txt"), f.dir.join("hard.txt")).unwrap();
        all_refused(&f, "hard.txt", "it has 2 hard links", "it has 2 hard links");
        // Two names inside the worktree are refused alike: the link count cannot tell them apart.
        std::fs::hard_link(f.dir.join("notes.txt"), f.dir.join("twin.txt")).unwrap();
        all_refused(&f, "twin.txt", "hard links", "hard links");
    }

    #[test]
    fn writes_under_the_deny_list_are_refused_in_every_case_variant() {
        let f = fixture();
        std::fs::create_dir_all(f.dir.join(".git")).unwrap();
        std::fs::write(f.dir.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(f.dir.join(".github/workflows")).unwrap();
        std::fs::write(f.dir.join(".github/workflows/ci.yml"), "on: push\n").unwrap();
        std::fs::write(f.dir.join(".gitmodules"), "").unwrap();
        let before = f.snapshot();
        for path in [
            ".git/config",
            ".git/hooks/pre-commit",
            ".GIT/config",
            ".Git/HEAD",
            "sub/.git/config",
            ".git",
            ".git./config",
            "GIT~1/config",
            ".github/workflows/ci.yml",
            ".GITHUB/workflows/new.yml",
            ".claude/settings.json",
            ".Claude/settings.json",
            ".ailang/cache",
            ".AILANG/x",
            ".gitmodules",
            ".GitModules",
            "lib/.gitattributes",
            ".GITATTRIBUTES",
        ] {
            let write = refused(&f.write(path, "pwned"));
            assert!(write.contains("is on the write deny list"), "{path}: {write}");
            let edit = refused(&f.edit(path, "[core]", "pwned"));
            assert!(edit.contains("is on the write deny list"), "{path}: {edit}");
        }
        assert_eq!(f.snapshot(), before, "nothing was created or changed");

        // Reads: .git is never read; the other entries are ordinary text.
        assert!(refused(&f.read(".git/config")).contains("under .git, which is never read"));
        assert!(refused(&f.read(".GIT/config")).contains("never read"));
        assert_eq!(f.read(".github/workflows/ci.yml")["content"], json!("on: push\n"));
        // Nor through a symlink into it, nor written through one.
        symlink(".git", f.dir.join("gitlink")).unwrap();
        symlink(".git/config", f.dir.join("config-link")).unwrap();
        assert!(refused(&f.read("gitlink/config")).contains("symlink into .git"));
        assert!(refused(&f.read("config-link")).contains("symlink into .git"));
        assert!(refused(&f.write("gitlink/config", "pwned")).contains("symlink"));
        assert!(refused(&f.edit("config-link", "[core]", "pwned")).contains("symlink"));
        assert_eq!(std::fs::read_to_string(f.dir.join(".git/config")).unwrap(), "[core]\n");
    }

    #[test]
    fn reads_and_writes_over_the_caps_are_refused() {
        let policy = ConfinementPolicy { max_read_bytes: 16, max_write_bytes: 8, ..ConfinementPolicy::default() };
        let f = fixture_with(policy);
        std::fs::write(f.dir.join("16.txt"), "0123456789abcdef").unwrap();
        std::fs::write(f.dir.join("17.txt"), "0123456789abcdefg").unwrap();
        assert_eq!(f.read("16.txt")["content"], json!("0123456789abcdef"));
        assert!(refused(&f.read("17.txt")).contains("larger than the read cap of 16 bytes"));

        let before = f.snapshot();
        assert_eq!(f.write("8.txt", "01234567")["ok"], json!(true));
        std::fs::remove_file(f.dir.join("8.txt")).unwrap();
        assert!(refused(&f.write("9.txt", "012345678")).contains("the content is 9 bytes; the write cap is 8 bytes"));
        assert!(refused(&f.write("notes.txt", "012345678")).contains("write cap"));
        // An edit whose result exceeds the write cap, and one of a file over the read cap.
        std::fs::write(f.dir.join("small.txt"), "abc").unwrap();
        assert!(refused(&f.edit("small.txt", "b", "bbbbbbbb")).contains("write cap"));
        assert!(refused(&f.edit("17.txt", "g", "h")).contains("read cap"));
        std::fs::remove_file(f.dir.join("small.txt")).unwrap();
        assert_eq!(f.snapshot(), before);
    }

    #[test]
    fn reads_and_edits_of_non_utf8_files_are_refused() {
        let f = fixture();
        std::fs::write(f.dir.join("bin"), b"ok\xff\xfe").unwrap();
        assert!(refused(&f.read("bin")).contains("is not UTF-8 text (invalid byte at offset 2)"));
        assert!(refused(&f.edit("bin", "ok", "no")).contains("not UTF-8"));
        assert_eq!(std::fs::read(f.dir.join("bin")).unwrap(), b"ok\xff\xfe");
    }

    #[test]
    fn writes_through_a_file_or_over_a_directory_are_refused() {
        let f = fixture();
        std::fs::create_dir(f.dir.join("sub")).unwrap();
        let before = f.snapshot();
        assert!(refused(&f.write("notes.txt/x", "x")).contains("not a directory"));
        assert!(refused(&f.write("sub", "x")).contains("it is a directory"));
        assert!(refused(&f.write("sub/", "x")).contains("it is a directory"));
        assert_eq!(f.snapshot(), before);
    }

    #[test]
    fn malformed_requests_are_handler_failures_that_change_nothing() {
        let f = fixture();
        let before = f.snapshot();
        let fail = |effect: &str, scope: &str, payload: &[u8]| -> String {
            f.handlers.handle(&f.worktree, effect, scope, payload).unwrap_err().to_string()
        };
        let read = br#"{"op":"read","path":"notes.txt"}"#;
        for (effect, scope, payload, message) in [
            ("Workspace.Exec", "worktree", &read[..], "no Workspace handler serves effect \"Workspace.Exec\""),
            ("Workspace.Read", "repo", &read[..], "scope \"repo\" is not served"),
            ("Workspace.Read", "", &read[..], "scope \"\" is not served"),
            ("Workspace.Read", "worktree", b"read notes.txt", "the payload is not one JSON object"),
            ("Workspace.Read", "worktree", br#"{"op":"read","path":"a"} {}"#, "not one JSON object"),
            ("Workspace.Read", "worktree", br#"["read","a"]"#, "it is not an object"),
            ("Workspace.Read", "worktree", br#"{"op":"read","op":"write","path":"a"}"#, "duplicate"),
            ("Workspace.Read", "worktree", br#"{"op":"read","OP":"write","path":"a"}"#, "key \"OP\" is a case variant"),
            (
                "Workspace.Write",
                "worktree",
                br#"{"Op":"write","path":"a","content":""}"#,
                "key \"Op\" is a case variant",
            ),
            (
                "Workspace.Read",
                "worktree",
                br#"{"path":"a"}"#,
                "the payload has no \"op\"; Workspace.Read admits: read",
            ),
            ("Workspace.Read", "worktree", br#"{"op":1,"path":"a"}"#, "\"op\" must be a string"),
            (
                "Workspace.Read",
                "worktree",
                br#"{"op":"write","path":"a","content":""}"#,
                "op \"write\" is not served by Workspace.Read",
            ),
            ("Workspace.Read", "worktree", br#"{"op":"edit","path":"a","old_text":"","new_text":""}"#, "not served"),
            (
                "Workspace.Write",
                "worktree",
                read,
                "op \"read\" is not served by Workspace.Write; it admits: write, edit",
            ),
            (
                "Workspace.Read",
                "worktree",
                br#"{"op":"read","path":"a","mode":"x"}"#,
                "unknown key \"mode\" for op \"read\"",
            ),
            ("Workspace.Read", "worktree", br#"{"op":"read","Path":"a"}"#, "unknown key \"Path\""),
            ("Workspace.Write", "worktree", br#"{"op":"write","path":"a"}"#, "op \"write\" needs \"content\""),
            (
                "Workspace.Write",
                "worktree",
                br#"{"op":"write","path":"a","content":3}"#,
                "\"content\" must be a string",
            ),
            ("Workspace.Write", "worktree", br#"{"op":"edit","path":"a","old_text":"x"}"#, "needs \"new_text\""),
            ("Workspace.Read", "worktree", br#"{"op":"read","path":null}"#, "\"path\" must be a string"),
        ] {
            let error = fail(effect, scope, payload);
            assert!(error.contains(message), "{}: {error}", String::from_utf8_lossy(payload));
        }
        assert_eq!(f.snapshot(), before);
    }
}
