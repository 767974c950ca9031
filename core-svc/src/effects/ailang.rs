//! `Ailang.Check`, `Ailang.Run`, `Ailang.Discover` and `Ailang.CLI`: the tool interpreter
//! run on an episode's files.
//!
//! A source file is never opened by the interpreter from the worktree: the core reads it
//! through the confined worktree (the kernel resolves it beneath the episode's root) and
//! stages a copy at the same relative path in a fresh temporary directory, so a symlink or a
//! hard link in the worktree cannot make the interpreter read anything outside. `Ailang.Run`
//! grants the program `IO` and `FS`, with `std/fs` confined to the worktree by the
//! interpreter's own `openat2` sandbox. Every run has a fixed minimal environment, a time
//! bound, capped output, and counts against the core's subprocess slots.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use world_model::{HashRef, canonical_value};

use super::handlers::HandlerFailure;
use super::worktree::{AccessError, ConfinementPolicy, Worktree};
use crate::subprocess::{self, Slots, Spawn};

/// The ops `Ailang.CLI` runs; everything else is refused (reads, writes and runs have
/// their own tools).
pub const CLI_OPS: [&str; 10] = [
    "check",
    "test",
    "builtins_list",
    "builtins_show",
    "examples_list",
    "examples_search",
    "examples_show",
    "iface",
    "prompt",
    "version",
];
/// Bytes of stdout and of stderr an output carries; the rest is cut and marked.
const STREAM_CAP: usize = 256 * 1024;
/// Bytes a run may write to one stream before it is killed.
const RUN_OUTPUT_CAP: usize = 8 * 1024 * 1024;

#[derive(Clone)]
pub struct AilangHandlers {
    /// The tool interpreter's executable and its ref.
    program: PathBuf,
    tool: HashRef,
    examples: Option<PathBuf>,
    slots: Slots,
    timeout: Duration,
    policy: ConfinementPolicy,
}

impl AilangHandlers {
    pub const EFFECTS: [&'static str; 4] = ["Ailang.Check", "Ailang.Run", "Ailang.Discover", "Ailang.CLI"];

    pub fn new(program: PathBuf, tool: HashRef, examples: Option<PathBuf>, slots: Slots, timeout: Duration) -> Self {
        Self { program, tool, examples, slots, timeout, policy: ConfinementPolicy::default() }
    }

    pub async fn handle(
        &self,
        worktree: &Arc<Worktree>,
        effect: &str,
        scope: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, HandlerFailure> {
        let fail = |reason: String| HandlerFailure::Failed(format!("{effect}: {reason}"));
        if scope != "worktree" {
            return Err(fail(format!("scope {scope:?} is not served; the only scope is \"worktree\"")));
        }
        let request: Map<String, Value> =
            serde_json::from_slice(payload).map_err(|e| fail(format!("the payload is not one JSON object: {e}")))?;
        if let Some(alias) = request.keys().find(|k| {
            let lower = k.to_ascii_lowercase();
            ["op", "path", "flags", "args_json"].contains(&lower.as_str()) && lower != k.as_str()
        }) {
            return Err(fail(format!("key {alias:?} differs from a known key only in case")));
        }
        let text = |key: &str| -> Result<Option<&str>, HandlerFailure> {
            match request.get(key) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s)),
                Some(_) => Err(fail(format!("{key} must be a string"))),
            }
        };
        let allow = |keys: &[&str]| -> Result<(), HandlerFailure> {
            match request.keys().find(|k| !keys.contains(&k.as_str())) {
                Some(unknown) => Err(fail(format!("unknown key {unknown:?}; this request takes {}", keys.join(", ")))),
                None => Ok(()),
            }
        };
        let op = text("op")?;
        let invocation = match (effect, op) {
            ("Ailang.Run", None) => {
                allow(&["path", "args_json"])?;
                let path = text("path")?.ok_or_else(|| fail("path is required".into()))?;
                let args = match text("args_json")? {
                    Some(json) => {
                        serde_json::from_str::<Value>(json)
                            .map_err(|e| fail(format!("args_json must hold JSON: {e}")))?;
                        json
                    }
                    None => "null",
                };
                Invocation::run(path, args)
            }
            ("Ailang.Check", Some("check")) => {
                allow(&["op", "path"])?;
                Invocation::with_source(&["check", "--json", "--relax-modules"], text("path")?, &fail)?
            }
            ("Ailang.Discover", Some("builtins_list")) => {
                allow(&["op"])?;
                Invocation::plain(&["builtins", "list", "--json"])
            }
            ("Ailang.Discover", Some("examples_search")) => {
                allow(&["op", "query"])?;
                let query = text("query")?.ok_or_else(|| fail("query is required".into()))?;
                Invocation::plain(&["examples", "search", query, "--json"])
            }
            ("Ailang.CLI", Some(op)) if CLI_OPS.contains(&op) => {
                allow(&["op", "path", "module", "query", "package", "flags"])?;
                cli(op, &request, &fail)?
            }
            ("Ailang.CLI", Some(op)) => {
                return Err(fail(format!(
                    "op {op:?} is not an ailang-cli op; reads, writes and edits have their own tools, and run is ailang-run"
                )));
            }
            (_, op) => return Err(fail(format!("op {op:?} is not served by {effect}"))),
        };
        let output = match self.run(worktree, invocation).await {
            Ok(fields) => fields,
            Err(Refusal(why)) => Map::from_iter([("ok".to_owned(), json!(false)), ("refused".to_owned(), json!(why))]),
        };
        Ok(self.finish(output, worktree))
    }

    fn finish(&self, mut output: Map<String, Value>, worktree: &Worktree) -> Vec<u8> {
        output.insert("tool".into(), json!(self.tool.to_string()));
        output.insert("policy_digest".into(), json!(self.policy.policy_digest(worktree.path()).to_string()));
        canonical_value(&Value::Object(output))
    }

    async fn run(&self, worktree: &Arc<Worktree>, invocation: Invocation) -> Result<Map<String, Value>, Refusal> {
        let (source, worktree_handle, policy) = (invocation.source.clone(), Arc::clone(worktree), self.policy.clone());
        let stage = tokio::task::spawn_blocking(move || stage(&worktree_handle, source.as_deref(), &policy))
            .await
            .map_err(|e| Refusal(format!("staging ended abnormally: {e}")))??;
        let slot = self.slots.try_take().map_err(|e| Refusal(format!("the tool cannot run now: {e}")))?;
        let mut spawn = Spawn::new(&self.program, stage.path())
            .args(invocation.argv.iter())
            .env("PATH", "/usr/bin:/bin")
            .env("LANG", "C")
            .env("LC_ALL", "C")
            .env("HOME", stage.path())
            .env("AILANG_CACHE_DIR", stage.path().join(".cache"))
            .env("AILANG_RELAX_MODULES", "1");
        if invocation.sandboxed {
            spawn = spawn
                .env("AILANG_FS_SANDBOX", worktree.path())
                .env("AILANG_FS_DENY_WRITE", super::worktree::WRITE_DENIED.join(","));
        }
        if let Some(examples) = &self.examples {
            spawn = spawn.env("AILANG_EXAMPLES", examples);
        }
        let finished =
            subprocess::run(spawn, slot, self.timeout, RUN_OUTPUT_CAP).await.map_err(|e| Refusal(e.to_string()))?;
        let mut output = Map::new();
        output.insert("ok".into(), json!(true));
        output.insert("argv".into(), json!(invocation.shown_argv()));
        output.insert("exit_code".into(), json!(finished.status.code()));
        stream(&mut output, "stdout", &finished.stdout);
        stream(&mut output, "stderr", &finished.stderr);
        Ok(output)
    }
}

/// A fresh directory holding a copy of the worktree file `source` (read through the confined
/// worktree) at the same relative path.
fn stage(worktree: &Worktree, source: Option<&str>, policy: &ConfinementPolicy) -> Result<tempfile::TempDir, Refusal> {
    let stage = tempfile::Builder::new()
        .prefix(&crate::scratch::root_prefix(crate::scratch::TOOL))
        .tempdir()
        .map_err(|e| Refusal(format!("cannot make a staging directory: {e}")))?;
    if let Some(path) = source {
        let bytes = worktree.read(path, policy).map_err(|e| match e {
            AccessError::Refused { reason, .. } => Refusal(format!("path {path:?} refused: {reason}")),
            other => Refusal(other.to_string()),
        })?;
        let staged = stage.path().join(path);
        if let Some(parent) = staged.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Refusal(format!("staging {path:?}: {e}")))?;
        }
        std::fs::write(&staged, bytes).map_err(|e| Refusal(format!("staging {path:?}: {e}")))?;
    }
    Ok(stage)
}

/// A refusal the output reports as `{"ok":false,"refused":…}`.
struct Refusal(String);

/// One interpreter command: its arguments, the worktree file staged for it, and whether it
/// runs the program with FS confined to the worktree.
struct Invocation {
    argv: Vec<String>,
    source: Option<String>,
    sandboxed: bool,
}

impl Invocation {
    fn plain(argv: &[&str]) -> Self {
        Self { argv: argv.iter().map(|a| a.to_string()).collect(), source: None, sandboxed: false }
    }

    fn with_source(
        argv: &[&str],
        path: Option<&str>,
        fail: &dyn Fn(String) -> HandlerFailure,
    ) -> Result<Self, HandlerFailure> {
        let path = path.ok_or_else(|| fail("path is required".into()))?;
        let mut invocation = Self::plain(argv);
        invocation.argv.push(path.to_owned());
        invocation.source = Some(path.to_owned());
        Ok(invocation)
    }

    fn run(path: &str, args_json: &str) -> Self {
        let argv = ["run", "--quiet", "--caps", "IO,FS", "--entry", "main", "--args-json", args_json, path];
        Self { argv: argv.iter().map(|a| a.to_string()).collect(), source: Some(path.to_owned()), sandboxed: true }
    }

    /// The command line as an agent would type it.
    fn shown_argv(&self) -> Vec<String> {
        std::iter::once("ailang".to_owned()).chain(self.argv.iter().cloned()).collect()
    }
}

/// An `Ailang.CLI` op as an interpreter command; boolean flags are `{"json": ""}`.
fn cli(
    op: &str,
    request: &Map<String, Value>,
    fail: &dyn Fn(String) -> HandlerFailure,
) -> Result<Invocation, HandlerFailure> {
    let field = |key: &str| -> Result<Option<&str>, HandlerFailure> {
        match request.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(fail(format!("{key} must be a string"))),
        }
    };
    let json_flag = match request.get("flags") {
        None => false,
        Some(Value::Object(flags)) => {
            for (name, value) in flags {
                if name != "json" || value != "" {
                    return Err(fail(format!("flag {name:?} is not admitted; the only flag is {{\"json\": \"\"}}")));
                }
            }
            !flags.is_empty()
        }
        Some(_) => return Err(fail("argument \"flags\" must be an object of string values".into())),
    };
    let needed = |key: &str| field(key)?.ok_or_else(|| fail(format!("op {op} needs {key}")));
    let mut invocation = match op {
        "check" => Invocation::with_source(&["check", "--relax-modules"], field("path")?, fail)?,
        "test" => Invocation::with_source(&["test", "--relax-modules"], field("path")?, fail)?,
        "builtins_list" => Invocation::plain(&["builtins", "list"]),
        "builtins_show" => Invocation::plain(&["builtins", "show", needed("module")?]),
        "examples_list" => Invocation::plain(&["examples", "list"]),
        "examples_search" => Invocation::plain(&["examples", "search", needed("query")?]),
        "examples_show" => Invocation::plain(&["examples", "show", needed("module")?]),
        "iface" => Invocation::plain(&["iface", needed("module")?]),
        "prompt" => Invocation::plain(&["prompt"]),
        _ => Invocation::plain(&["--version"]),
    };
    if json_flag && !matches!(op, "test" | "version") {
        // `check` takes its flags before the file; the others after their words.
        match invocation.source {
            Some(_) => invocation.argv.insert(1, "--json".into()),
            None => invocation.argv.push("--json".into()),
        }
    }
    Ok(invocation)
}

/// Adds a captured stream, cut at [`STREAM_CAP`] bytes (on a character boundary).
fn stream(output: &mut Map<String, Value>, name: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let mut end = text.len().min(STREAM_CAP);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    output.insert(name.into(), json!(&text[..end]));
    if end < text.len() {
        output.insert(format!("{name}_truncated"), json!(true));
    }
}
