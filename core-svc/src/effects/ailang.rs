//! `Ailang.Check`, `Ailang.Run`, `Ailang.Discover` and `Ailang.CLI`: the tool interpreter
//! run on an episode's files, spoken to in the reference's policy-tool vocabulary.
//!
//! Requests and answers have the reference's shapes, so its coding-tools package runs here
//! unchanged: `Ailang.Check` serves `ai_check` (`{file, check, verify}` on stdout),
//! `Ailang.Discover` serves `builtins_list` (the text inventory, or JSON with the `json` flag)
//! and `examples_search`, `Ailang.Run` takes `{path, args_json, stdin, argv, caps}` and answers
//! `{admitted, exit_code, decision, limit, stdout, stderr}`, and `Ailang.CLI` knows all twenty
//! of the reference's operations, serving each or refusing it with the reason. A refusal is
//! `{"ok":false,"refused":…}` and the effect is recorded `failed`.
//!
//! A source file is never opened by the interpreter from the worktree: the core reads it
//! through the confined worktree (the kernel resolves it beneath the episode's root) and
//! stages a copy at the same relative path in a fresh temporary directory, so a symlink or a
//! hard link in the worktree cannot make the interpreter read anything outside. Outputs that
//! staged a source carry `sha256`, the ref of the bytes checked or run. `Ailang.Run` grants
//! the program `IO` and `FS`, with `std/fs` confined to the worktree by the interpreter's own
//! `openat2` sandbox. Every run has a fixed minimal environment, a time bound, capped output,
//! and counts against the core's subprocess slots.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use world_model::{HashRef, canonical_value};

use super::answer::{HandlerFailure, Output};
use super::worktree::{AccessError, ConfinementPolicy, Worktree};
use crate::limits::CAPTURED_OUTPUT;
use crate::subprocess::{self, RunError, Slots, Spawn};

/// The reference's `ailang-cli` operations. Each is served or refused with its reason
/// ([`unserved`]); reads, writes, edits and runs have their own tools.
pub const CLI_OPS: [&str; 20] = [
    "agent_prompt",
    "ai_check",
    "axioms",
    "builtins_list",
    "builtins_show",
    "check",
    "devtools_prompt",
    "docs_search",
    "examples_list",
    "examples_search",
    "examples_show",
    "examples_tags",
    "fmt",
    "iface",
    "pkg_docs",
    "policy_check",
    "prompt",
    "test",
    "tree",
    "version",
];
/// The capabilities a run may name, and the ones this core grants.
const RUN_CAPS: [&str; 5] = ["Declassify", "Env", "FS", "IO", "Net"];
const GRANTED_CAPS: [&str; 2] = ["FS", "IO"];
/// Bytes of stdout and of stderr an output carries; the rest is cut and marked.
const STREAM_CAP: usize = 256 * 1024;
/// Example hits given a source snippet.
const SNIPPETS: usize = 5;

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

/// A request refused before or while it ran: the output says why and the effect is `failed`.
struct Refusal(String);

impl From<RunError> for Refusal {
    fn from(error: RunError) -> Self {
        Refusal(error.to_string())
    }
}

/// The checked fields of one request.
struct Request<'a> {
    effect: &'a str,
    fields: &'a Map<String, Value>,
}

impl Request<'_> {
    fn text(&self, key: &str) -> Result<Option<&str>, Refusal> {
        match self.fields.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(Refusal(format!("{key} must be a string"))),
        }
    }

    fn needed(&self, op: &str, key: &str) -> Result<&str, Refusal> {
        self.text(key)?.ok_or_else(|| Refusal(format!("op {op:?} needs {key}")))
    }

    fn allow(&self, keys: &[&str]) -> Result<(), Refusal> {
        match self.fields.keys().find(|k| !keys.contains(&k.as_str())) {
            Some(unknown) => Err(Refusal(format!(
                "unknown key {unknown:?} for {}; this request takes {}",
                self.effect,
                keys.join(", ")
            ))),
            None => Ok(()),
        }
    }

    /// The `flags` object (`{"json": ""}` is the only flag, for ops with a JSON form).
    fn json_flag(&self, op: &str, admitted: bool) -> Result<bool, Refusal> {
        match self.fields.get("flags") {
            None => Ok(false),
            Some(Value::Object(flags)) => {
                for (name, value) in flags {
                    if !value.is_string() {
                        return Err(Refusal("flags must be an object of string values".into()));
                    }
                    if name != "json" || !admitted {
                        return Err(Refusal(format!(
                            "flag {name:?} is not admitted for op {op:?}{}",
                            if admitted { "; the only flag is {\"json\": \"\"}" } else { "; it takes no flags" }
                        )));
                    }
                }
                Ok(!flags.is_empty())
            }
            Some(_) => Err(Refusal("flags must be an object of string values".into())),
        }
    }
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
    ) -> Result<Output, HandlerFailure> {
        let fail = |reason: String| HandlerFailure::Failed(format!("{effect}: {reason}"));
        if scope != "worktree" {
            return Err(fail(format!("scope {scope:?} is not served; the only scope is \"worktree\"")));
        }
        let fields: Map<String, Value> =
            serde_json::from_slice(payload).map_err(|e| fail(format!("the payload is not one JSON object: {e}")))?;
        let request = Request { effect, fields: &fields };
        // Boxed: the operations' futures nest several interpreter runs, too deep for a worker
        // thread's stack in an unoptimised build.
        let answer = match effect {
            "Ailang.Run" => Box::pin(self.run(worktree, &request)).await,
            _ => Box::pin(self.operation(worktree, &request)).await,
        };
        let (mut output, refused) = match answer {
            Ok(fields) => (fields, false),
            Err(Refusal(why)) => (Map::from_iter([("ok".into(), json!(false)), ("refused".into(), json!(why))]), true),
        };
        output.insert("tool".into(), json!(self.tool.to_string()));
        output.insert("policy_digest".into(), json!(self.policy.policy_digest(worktree.path()).to_string()));
        Ok(Output { bytes: canonical_value(&Value::Object(output)), refused })
    }

    /// A policy-tool request `{op, …}` to `Ailang.Check`, `Ailang.Discover` or `Ailang.CLI`.
    async fn operation(&self, worktree: &Arc<Worktree>, request: &Request<'_>) -> Result<Map<String, Value>, Refusal> {
        if let Some(alias) = request
            .fields
            .keys()
            .find(|k| ["op", "flags"].iter().any(|name| k.as_str() != *name && k.eq_ignore_ascii_case(name)))
        {
            return Err(Refusal(format!("key {alias:?} differs from a known key only in case")));
        }
        let op = request.text("op")?.ok_or_else(|| Refusal(format!("{} needs an op", request.effect)))?;
        let served: &[&str] = match request.effect {
            "Ailang.Check" => &["ai_check"],
            "Ailang.Discover" => &["builtins_list", "examples_search"],
            _ if CLI_OPS.contains(&op) => &CLI_OPS,
            _ => {
                return Err(Refusal(format!(
                    "op {op:?} is not an ailang-cli op; reads, writes and edits have their own tools, and run is ailang-run"
                )));
            }
        };
        if !served.contains(&op) {
            return Err(Refusal(format!(
                "op {op:?} is not in {}'s op allowlist: {}",
                request.effect,
                served.join(", ")
            )));
        }
        if let Some(why) = unserved(op) {
            return Err(Refusal(format!("op {op:?} is not served by World-rs: {why}")));
        }
        request.allow(match request.effect {
            "Ailang.Check" => &["op", "path"],
            "Ailang.Discover" => &["op", "flags", "query"],
            _ => &["op", "path", "module", "query", "package", "flags"],
        })?;
        let json = |admitted| request.json_flag(op, admitted);
        match op {
            "ai_check" => {
                json(false)?;
                self.ai_check(worktree, request.needed(op, "path")?).await
            }
            "check" => {
                let path = request.needed(op, "path")?;
                let argv = if json(true)? {
                    vec!["check", "--json", "--relax-modules", path]
                } else {
                    vec!["check", "--relax-modules", path]
                };
                self.command(worktree, &argv, Some(path)).await
            }
            "test" => {
                json(false)?;
                if request.text("package")?.is_some() {
                    return Err(Refusal(
                        "test with package is not served by World-rs: it has no packages; test one file with path"
                            .into(),
                    ));
                }
                let path = request.needed(op, "path")?;
                self.command(worktree, &["test", "--relax-modules", path], Some(path)).await
            }
            "builtins_list" => self.builtins_list(worktree, json(true)?).await,
            "builtins_show" => {
                let name = request.needed(op, "module")?;
                self.command(worktree, &json_form(vec!["builtins", "show", name], json(true)?), None).await
            }
            "examples_list" => self.command(worktree, &json_form(vec!["examples", "list"], json(true)?), None).await,
            "examples_search" => {
                json(false)?;
                self.examples_search(worktree, request.needed(op, "query")?).await
            }
            "examples_show" => {
                let name = request.needed(op, "module")?;
                self.command(worktree, &json_form(vec!["examples", "show", name], json(true)?), None).await
            }
            "iface" => {
                let module = request.needed(op, "module")?;
                self.command(worktree, &json_form(vec!["iface", module], json(true)?), None).await
            }
            "prompt" | "agent_prompt" => self.command(worktree, &json_form(vec!["prompt"], json(true)?), None).await,
            "policy_check" => {
                json(false)?;
                self.policy_check(worktree, request.needed(op, "path")?).await
            }
            _ => {
                json(false)?;
                self.command(worktree, &["--version"], None).await
            }
        }
    }

    /// `ai_check`: the checker's report in the reference's `{file, check, verify}` shape. The
    /// reference also verifies contracts with Z3; World-rs's interpreter has no verifier, so
    /// `verify` says it did not run and why, and the type check stands alone.
    async fn ai_check(&self, worktree: &Arc<Worktree>, path: &str) -> Result<Map<String, Value>, Refusal> {
        let mut output = self.command(worktree, &["check", "--json", "--relax-modules", path], Some(path)).await?;
        let report = output.get("stdout").and_then(Value::as_str).and_then(|s| serde_json::from_str::<Value>(s).ok());
        if let Some(Value::Object(report)) = report {
            let take = |key: &str| report.get(key).cloned().unwrap_or(Value::Null);
            let shaped = json!({
                "file": path,
                "check": {
                    "passed": take("passed"),
                    "error_count": take("error_count"),
                    "errors": take("errors"),
                    "warnings": report.get("warnings").cloned().unwrap_or_else(|| json!([])),
                },
                "verify": {
                    "available": false,
                    "verified": 0,
                    "counterexample": 0,
                    "skipped": 0,
                    "errors": 0,
                    "results": [],
                    "reason": "contract verification (Z3) is not run: World-rs's interpreter has no SMT verifier, \
                               so requires/ensures are checked for types only",
                },
            });
            output.insert("stdout".into(), json!(shaped.to_string()));
        }
        Ok(output)
    }

    /// `builtins_list`: the reference's text inventory (`Total: N builtins`, then one builtin a
    /// line: name, `[effect]` or `[pure]`, module), or the JSON inventory with the json flag.
    async fn builtins_list(&self, worktree: &Arc<Worktree>, json_form: bool) -> Result<Map<String, Value>, Refusal> {
        let mut output = self.command(worktree, &["builtins", "list", "--json"], None).await?;
        if json_form {
            return Ok(output);
        }
        output.insert("argv".into(), json!(["ailang", "builtins", "list"]));
        let inventory =
            output.get("stdout").and_then(Value::as_str).and_then(|s| serde_json::from_str::<Value>(s).ok());
        let Some(Value::Array(entries)) = inventory.and_then(|mut v| v.get_mut("builtins").map(Value::take)) else {
            return Ok(output);
        };
        let field = |entry: &Value, key: &str| entry.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        let mut lines: Vec<(String, String, String)> = entries
            .iter()
            .map(|e| {
                let effect = field(e, "effect").to_lowercase();
                (field(e, "name"), if effect.is_empty() { "pure".into() } else { effect }, field(e, "module"))
            })
            .collect();
        lines.sort();
        let mut text = format!("Total: {} builtins\n\n", lines.len());
        for (name, effect, module) in &lines {
            text.push_str(&format!("  {name:<30} [{effect}] {module}\n"));
        }
        output.insert("stdout".into(), json!(text));
        Ok(output)
    }

    /// `examples_search`: the interpreter's text answer, plus `matches` (name, path,
    /// description, and for the first hits the first source line holding a query word).
    async fn examples_search(&self, worktree: &Arc<Worktree>, query: &str) -> Result<Map<String, Value>, Refusal> {
        let words: Vec<&str> = query.split_whitespace().collect();
        if words.is_empty() {
            return Err(Refusal("query names no word to look for".into()));
        }
        let mut text_argv = vec!["examples", "search"];
        text_argv.extend(&words);
        let mut output = self.command(worktree, &text_argv, None).await?;
        let mut json_argv = text_argv.clone();
        json_argv.push("--json");
        let found = self.exec(worktree, &json_argv, None).await?;
        let hits = serde_json::from_slice::<Value>(&found.stdout)
            .ok()
            .and_then(|mut v| v.get_mut("examples").map(Value::take))
            .and_then(|v| if let Value::Array(items) = v { Some(items) } else { None })
            .unwrap_or_default();
        let lowered: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
        let mut matches = Vec::with_capacity(hits.len());
        for (index, hit) in hits.iter().enumerate() {
            let name = hit.get("name").and_then(Value::as_str).unwrap_or_default();
            let file = hit.get("file").and_then(Value::as_str).unwrap_or_default();
            let path = match &self.examples {
                Some(dir) => file.strip_prefix(&format!("{}/", dir.display())).unwrap_or(file),
                None => file,
            };
            let description = hit.get("description").cloned().unwrap_or(json!(""));
            let mut entry = json!({"name": name, "path": path, "description": description});
            if index < SNIPPETS {
                let shown = self.exec(worktree, &["examples", "show", name, "--json"], None).await?;
                let source = serde_json::from_slice::<Value>(&shown.stdout)
                    .ok()
                    .and_then(|v| v.get("source").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_default();
                let holds = |line: &str| {
                    let lower = line.to_lowercase();
                    lowered.iter().any(|w| lower.contains(w.as_str()))
                };
                // Code before comments: the description already carries the leading comments.
                let code = source.lines().enumerate().find(|(_, l)| !l.trim_start().starts_with("--") && holds(l));
                if let Some((line, text)) = code.or_else(|| source.lines().enumerate().find(|(_, l)| holds(l))) {
                    entry["line"] = json!(line + 1);
                    entry["snippet"] = json!(text.trim().chars().take(200).collect::<String>());
                }
            }
            matches.push(entry);
        }
        output.insert("count".into(), json!(matches.len()));
        output.insert("matches".into(), Value::Array(matches));
        Ok(output)
    }

    /// `policy_check`: what `Ailang.Run` would decide for the file's `main`, without running it.
    async fn policy_check(&self, worktree: &Arc<Worktree>, path: &str) -> Result<Map<String, Value>, Refusal> {
        let (_, sha256) = self.stage_only(worktree, path).await?;
        let entry = self.entry(worktree, path).await?;
        let decision = decide(&entry, &GRANTED_CAPS);
        let ok = decision["ok"] == json!(true);
        Ok(Map::from_iter([
            ("ok".into(), json!(ok)),
            ("argv".into(), json!(["ailang", "iface", path, "--json"])),
            ("exit_code".into(), json!(if ok { 0 } else { 1 })),
            ("stdout".into(), json!(json!({"file": path, "decision": decision}).to_string())),
            ("stderr".into(), json!("")),
            ("sha256".into(), json!(sha256)),
        ]))
    }

    /// `Ailang.Run`: `{path, args_json?, stdin?, argv?, caps?}` (no op), answered as
    /// `{admitted, exit_code, decision, limit, stdout, stderr}`. A program whose effects are not
    /// all granted never runs (`admitted: false`, `decision.missing_from_policy`).
    async fn run(&self, worktree: &Arc<Worktree>, request: &Request<'_>) -> Result<Map<String, Value>, Refusal> {
        let keys = ["path", "args_json", "stdin", "argv", "caps"];
        if let Some(alias) =
            request.fields.keys().find(|k| keys.iter().any(|name| k.as_str() != *name && k.eq_ignore_ascii_case(name)))
        {
            return Err(Refusal(format!("key {alias:?} differs from a known key only in case")));
        }
        request.allow(&keys)?;
        let path = request.text("path")?.filter(|p| !p.is_empty()).ok_or_else(|| Refusal("path is required".into()))?;
        let args = match request.text("args_json")? {
            Some(text) => Some(
                serde_json::from_str::<Value>(text)
                    .map_err(|e| Refusal(format!("args_json must be a string holding JSON: {e}")))?,
            ),
            None => None,
        };
        if request.text("stdin")?.is_some_and(|s| !s.is_empty()) {
            return Err(Refusal("stdin is not served by World-rs: a run's standard input is empty".into()));
        }
        match request.fields.get("argv") {
            None => {}
            Some(Value::Array(items)) if items.is_empty() => {}
            Some(Value::Array(_)) => {
                return Err(Refusal(
                    "argv is not served by World-rs: the entry receives args_json only, so pass the values there"
                        .into(),
                ));
            }
            Some(_) => return Err(Refusal("argv must be an array of strings".into())),
        }
        let caps = run_caps(request.fields.get("caps"))?;

        let (_, sha256) = self.stage_only(worktree, path).await?;
        let entry = self.entry(worktree, path).await?;
        let decision = decide(&entry, &caps);
        let mut output = Map::new();
        output.insert("sha256".into(), json!(sha256));
        output.insert("limit".into(), Value::Null);
        if decision["ok"] != json!(true) {
            let missing = decision["missing_from_policy"].clone();
            output.insert("admitted".into(), json!(false));
            output.insert("exit_code".into(), json!(2));
            output.insert("decision".into(), decision);
            output.insert("stdout".into(), json!(""));
            output.insert(
                "stderr".into(),
                json!(format!(
                    "policy: not run: the program's effects {missing} are not in the allowed capabilities {caps:?}"
                )),
            );
            return Ok(output);
        }
        let args = entry_arguments(&entry, args);
        let caps_arg = caps.join(",");
        let mut argv = vec!["run", "--quiet", "--caps", caps_arg.as_str(), "--entry", "main"];
        if let Some(args) = &args {
            argv.extend(["--args-json", args.as_str()]);
        }
        argv.push(path);
        output.insert("admitted".into(), json!(true));
        output.insert("decision".into(), decision);
        match self.exec_staged(worktree, &argv, Some(path), true).await?.0 {
            Ok(finished) => {
                output.insert("exit_code".into(), json!(finished.status.code()));
                stream(&mut output, "stdout", &finished.stdout);
                stream(&mut output, "stderr", &finished.stderr);
            }
            // A run stopped at a limit answers the limit, as the reference's supervisor does.
            Err(limit @ (RunError::Timeout(_) | RunError::Overflow(_))) => {
                let stage = if matches!(limit, RunError::Timeout(_)) { "timeout" } else { "output" };
                output.insert("exit_code".into(), Value::Null);
                output.insert(
                    "limit".into(),
                    json!({"reason": limit.to_string(), "stage": stage, "timeout_ms": self.timeout.as_millis() as u64}),
                );
                output.insert("stdout".into(), json!(""));
                output.insert("stderr".into(), json!(""));
            }
            Err(other) => return Err(other.into()),
        }
        output.insert("argv".into(), json!(shown(&argv)));
        Ok(output)
    }

    /// What the file's `main` takes and which effects it declares (`iface --json`); `None`
    /// when the interpreter cannot read the module (the run then reports why).
    async fn entry(&self, worktree: &Arc<Worktree>, path: &str) -> Result<Option<Entry>, Refusal> {
        let finished = self.exec(worktree, &["iface", path, "--json"], Some(path)).await?;
        if !finished.success() {
            return Ok(None);
        }
        let iface: Value = serde_json::from_slice(&finished.stdout).unwrap_or(Value::Null);
        let main = iface
            .get("functions")
            .and_then(Value::as_array)
            .and_then(|fs| fs.iter().find(|f| f.get("name").and_then(Value::as_str) == Some("main")));
        Ok(main.map(|main| {
            let text = |key: &str| main.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
            let effects =
                text("effect").split(',').map(str::trim).filter(|e| !e.is_empty()).map(str::to_owned).collect();
            Entry { params: parameters(&text("signature")), effects }
        }))
    }

    /// Runs one interpreter command on an optional staged source: `{ok, argv, exit_code,
    /// stdout, stderr}` (`ok` is a zero exit), with `sha256` when a source was staged.
    async fn command(
        &self,
        worktree: &Arc<Worktree>,
        argv: &[&str],
        source: Option<&str>,
    ) -> Result<Map<String, Value>, Refusal> {
        let (finished, sha256) = self.exec_staged(worktree, argv, source, false).await?;
        let finished = finished?;
        let mut output = Map::new();
        output.insert("ok".into(), json!(finished.success()));
        output.insert("argv".into(), json!(shown(argv)));
        output.insert("exit_code".into(), json!(finished.status.code()));
        stream(&mut output, "stdout", &finished.stdout);
        stream(&mut output, "stderr", &finished.stderr);
        if let Some(sha256) = sha256 {
            output.insert("sha256".into(), json!(sha256));
        }
        Ok(output)
    }

    async fn exec(
        &self,
        worktree: &Arc<Worktree>,
        argv: &[&str],
        source: Option<&str>,
    ) -> Result<subprocess::Finished, Refusal> {
        Ok(self.exec_staged(worktree, argv, source, false).await?.0?)
    }

    /// Reads `path` through the confined worktree, for its refusal and its `sha256` alone.
    async fn stage_only(&self, worktree: &Arc<Worktree>, path: &str) -> Result<(tempfile::TempDir, String), Refusal> {
        let (handle, policy, path) = (Arc::clone(worktree), self.policy.clone(), path.to_owned());
        tokio::task::spawn_blocking(move || stage(&handle, Some(&path), &policy))
            .await
            .map_err(|e| Refusal(format!("staging ended abnormally: {e}")))?
            .map(|(dir, sha)| (dir, sha.unwrap_or_default()))
    }

    /// Stages `source` (when given) and runs the interpreter with `argv` in the staging root:
    /// how the run ended, and the ref of the staged bytes.
    async fn exec_staged(
        &self,
        worktree: &Arc<Worktree>,
        argv: &[&str],
        source: Option<&str>,
        sandboxed: bool,
    ) -> Result<(Result<subprocess::Finished, RunError>, Option<String>), Refusal> {
        let (handle, policy, source) = (Arc::clone(worktree), self.policy.clone(), source.map(str::to_owned));
        let (stage, sha256) = tokio::task::spawn_blocking(move || stage(&handle, source.as_deref(), &policy))
            .await
            .map_err(|e| Refusal(format!("staging ended abnormally: {e}")))??;
        let slot = self.slots.try_take().map_err(|e| Refusal(format!("the tool cannot run now: {e}")))?;
        let mut spawn = Spawn::new(&self.program, stage.path())
            .args(argv.iter())
            .env("PATH", "/usr/bin:/bin")
            .env("LANG", "C")
            .env("LC_ALL", "C")
            .env("HOME", stage.path())
            .env("AILANG_CACHE_DIR", stage.path().join(".cache"))
            .env("AILANG_RELAX_MODULES", "1");
        if sandboxed {
            spawn = spawn
                .env("AILANG_FS_SANDBOX", worktree.path())
                .env("AILANG_FS_DENY_WRITE", super::worktree::WRITE_DENIED.join(","));
        }
        if let Some(examples) = &self.examples {
            spawn = spawn.env("AILANG_EXAMPLES", examples);
        }
        Ok((Box::pin(subprocess::run(spawn, slot, self.timeout, CAPTURED_OUTPUT)).await, sha256))
    }
}

/// `argv` with `--json` after it when the request asked for the JSON form.
fn json_form(mut argv: Vec<&str>, json: bool) -> Vec<&str> {
    if json {
        argv.push("--json");
    }
    argv
}

/// Why World-rs refuses one of the reference's `ailang-cli` operations.
fn unserved(op: &str) -> Option<&'static str> {
    Some(match op {
        "fmt" => "its interpreter has no formatter; write the file as you want it with ailang-write",
        "docs_search" => "it serves no documentation corpus; use examples_search, builtins_show or prompt",
        "axioms" => "its interpreter has no axioms catalogue; prompt describes the language",
        "devtools_prompt" => "its interpreter has no developer-tools prompt; use prompt",
        "examples_tags" => "its examples corpus has no tags; use examples_list or examples_search",
        "pkg_docs" => "it has no package registry; iface shows a std module's or a file's interface",
        "tree" => "its interpreter has no import-tree view; iface shows what a file exports",
        _ => return None,
    })
}

/// What a run needs to know of its entry.
struct Entry {
    /// The parameter types, as written in the signature.
    params: Vec<String>,
    effects: Vec<String>,
}

/// The run decision, in the reference's spirit: admitted when every effect the entry declares
/// is among the granted capabilities. Without an entry (the module does not load, or has no
/// `main`) the run itself reports why.
fn decide(entry: &Option<Entry>, caps: &[&str]) -> Value {
    let effects: Vec<&str> = entry.iter().flat_map(|e| e.effects.iter().map(String::as_str)).collect();
    let missing: Vec<&str> = effects.iter().copied().filter(|e| !caps.contains(e)).collect();
    json!({
        "ok": missing.is_empty(),
        "security_mode": "restricted",
        "allowed_caps": caps,
        "program_effects": effects,
        "missing_from_policy": missing,
        "entry": "main",
    })
}

/// The `--args-json` text for the entry. Absent arguments default to `""` for an entry taking
/// one `string`, to nothing for an entry taking none, else `null`; for an entry taking one
/// `string`, a value that is not a string is passed as its JSON text.
fn entry_arguments(entry: &Option<Entry>, args: Option<Value>) -> Option<String> {
    let one_string = entry.as_ref().is_some_and(|e| e.params == ["string"]);
    let no_params = entry.as_ref().is_some_and(|e| e.params.is_empty());
    match args {
        None if one_string => Some("\"\"".into()),
        None if no_params => None,
        None => Some("null".into()),
        Some(value @ Value::String(_)) => Some(value.to_string()),
        Some(value) if one_string => Some(Value::String(value.to_string()).to_string()),
        Some(value) => Some(value.to_string()),
    }
}

/// The parameter types of a signature `(a, b) -> r ! {…}`, split at top-level commas.
fn parameters(signature: &str) -> Vec<String> {
    let Some(inner) = signature.strip_prefix('(') else { return Vec::new() };
    let mut depth = 0usize;
    let mut params = Vec::new();
    let mut current = String::new();
    for c in inner.chars() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => break,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                params.push(current.trim().to_owned());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        params.push(current.trim().to_owned());
    }
    params
}

/// The run's capabilities: absent is `[FS, IO]`; otherwise distinct names the reference knows,
/// of which this core grants IO and FS only.
fn run_caps(value: Option<&Value>) -> Result<Vec<&'static str>, Refusal> {
    let Some(value) = value else { return Ok(GRANTED_CAPS.to_vec()) };
    let Value::Array(items) = value else {
        return Err(Refusal("caps must be an array of capability names".into()));
    };
    if items.is_empty() {
        return Err(Refusal("caps names no capability".into()));
    }
    let mut caps = Vec::new();
    for item in items {
        let name = item.as_str().unwrap_or_default();
        let Some(known) = RUN_CAPS.iter().find(|c| **c == name) else {
            return Err(Refusal(format!("unknown capability {item}; caps admits only: {}", RUN_CAPS.join(", "))));
        };
        if caps.contains(known) {
            return Err(Refusal(format!("capability {name:?} is listed twice")));
        }
        if !GRANTED_CAPS.contains(known) {
            return Err(Refusal(format!(
                "capability {name:?} is not enabled by the operator: World-rs runs programs with IO and FS only"
            )));
        }
        caps.push(*known);
    }
    caps.sort();
    Ok(caps)
}

/// A fresh directory holding a copy of the worktree file `source` (read through the confined
/// worktree) at the same relative path, and the ref of the bytes staged.
fn stage(
    worktree: &Worktree,
    source: Option<&str>,
    policy: &ConfinementPolicy,
) -> Result<(tempfile::TempDir, Option<String>), Refusal> {
    let stage = tempfile::Builder::new()
        .prefix(&crate::scratch::root_prefix(crate::scratch::TOOL))
        .tempdir()
        .map_err(|e| Refusal(format!("cannot make a staging directory: {e}")))?;
    let Some(path) = source else { return Ok((stage, None)) };
    let bytes = worktree.read(path, policy).map_err(|e| match e {
        AccessError::Refused { reason, .. } => Refusal(format!("path {path:?} refused: {reason}")),
        other => Refusal(other.to_string()),
    })?;
    let staged = stage.path().join(path);
    if let Some(parent) = staged.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Refusal(format!("staging {path:?}: {e}")))?;
    }
    std::fs::write(&staged, &bytes).map_err(|e| Refusal(format!("staging {path:?}: {e}")))?;
    Ok((stage, Some(HashRef::of(&bytes).to_string())))
}

/// The command line as an agent would type it.
fn shown(argv: &[&str]) -> Vec<String> {
    std::iter::once("ailang").chain(argv.iter().copied()).map(str::to_owned).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(params: &[&str], effects: &[&str]) -> Option<Entry> {
        Some(Entry {
            params: params.iter().map(|p| p.to_string()).collect(),
            effects: effects.iter().map(|e| e.to_string()).collect(),
        })
    }

    #[test]
    fn parameters_split_at_top_level_commas() {
        assert_eq!(parameters("(string) -> string ! {IO}"), ["string"]);
        assert_eq!(parameters("() -> int"), Vec::<String>::new());
        assert_eq!(
            parameters("(int, [(int, string)], {a: int, b: int}) -> int"),
            ["int", "[(int, string)]", "{a: int, b: int}"]
        );
    }

    #[test]
    fn arguments_are_taken_the_natural_way() {
        let string_entry = entry(&["string"], &[]);
        let int_entry = entry(&["int"], &[]);
        let none = entry(&[], &[]);
        let text = |v: &str| Some(serde_json::from_str::<Value>(v).unwrap());
        assert_eq!(entry_arguments(&string_entry, None).as_deref(), Some("\"\""));
        assert_eq!(entry_arguments(&int_entry, None).as_deref(), Some("null"));
        assert_eq!(entry_arguments(&none, None), None);
        assert_eq!(entry_arguments(&string_entry, text("\"hi\"")).as_deref(), Some("\"hi\""));
        assert_eq!(entry_arguments(&string_entry, text("{\"n\":2}")).as_deref(), Some("\"{\\\"n\\\":2}\""));
        assert_eq!(entry_arguments(&int_entry, text("2")).as_deref(), Some("2"));
        assert_eq!(entry_arguments(&None, text("[1]")).as_deref(), Some("[1]"));
    }

    #[test]
    fn a_run_is_admitted_only_when_its_effects_are_granted() {
        let io = decide(&entry(&["string"], &["IO"]), &GRANTED_CAPS);
        assert_eq!((io["ok"].clone(), io["missing_from_policy"].clone()), (json!(true), json!([])));
        let net = decide(&entry(&["string"], &["IO", "Net"]), &GRANTED_CAPS);
        assert_eq!((net["ok"].clone(), net["missing_from_policy"].clone()), (json!(false), json!(["Net"])));
        assert_eq!(decide(&entry(&[], &["FS"]), &["IO"])["missing_from_policy"], json!(["FS"]));
    }

    #[test]
    fn caps_are_checked_like_the_references() {
        let caps = |v: Value| run_caps(Some(&v)).map_err(|Refusal(why)| why);
        assert_eq!(run_caps(None).ok(), Some(vec!["FS", "IO"]));
        assert_eq!(caps(json!(["IO", "FS"])).unwrap(), ["FS", "IO"]);
        assert_eq!(caps(json!(["IO"])).unwrap(), ["IO"]);
        assert!(caps(json!([])).unwrap_err().contains("names no capability"));
        assert!(caps(json!("IO")).unwrap_err().contains("must be an array"));
        assert!(caps(json!(["IO", "IO"])).unwrap_err().contains("listed twice"));
        assert!(caps(json!(["Disk"])).unwrap_err().contains("unknown capability \"Disk\""));
        assert!(caps(json!(["Net"])).unwrap_err().contains("not enabled by the operator"));
    }

    #[test]
    fn every_reference_cli_op_is_served_or_refused_with_a_reason() {
        let refused: Vec<&str> = CLI_OPS.iter().copied().filter(|op| unserved(op).is_some()).collect();
        assert_eq!(refused, ["axioms", "devtools_prompt", "docs_search", "examples_tags", "fmt", "pkg_docs", "tree"]);
    }
}
