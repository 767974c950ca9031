//! `world-core why`: walk back from a result to everything that made it — the log entry, the
//! invocation record, its input, output and plan, each effect record with its request and
//! result, and the transition source — marking whether each object's bytes hash to its ref,
//! and tell it as a story: the transition, surface and episode, the arguments, what each effect
//! did (path, bytes, status, reason, cost, budget before → after) and the outcome, each line
//! with the refs it was read from beside it.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};
use tonic::transport::Channel;
use world_model::HashRef;
use world_proto::v1 as pb;
use world_proto::v1::store_client::StoreClient;

use world_core::store::{LogEntry, OpenMode, Receipt, Store};

use super::{Failed, Outcome, open_store, parse_location};

#[derive(clap::Args)]
pub struct WhyArgs {
    /// What to explain: a log entry index, an object ref (an effect record from a result's
    /// `world` block, an invocation record, an output, …) or an invocation id (`a2a:…`,
    /// `mcp:…`; with --store only).
    target: String,
    /// Read this store directly (a SQLite path or a postgres:// URL).
    #[arg(long, env = "WORLD_STORE", conflicts_with = "core", required_unless_present = "core")]
    store: Option<String>,
    /// Ask a serving core over gRPC instead (e.g. http://127.0.0.1:7650).
    #[arg(long, env = "WORLD_CORE")]
    core: Option<String>,
    /// The session credential for --core: the 64-hex token, or a file holding it.
    #[arg(long, env = "WORLD_SESSION", requires = "core")]
    session: Option<String>,
    /// Print the walk as JSON: every object with its verification, and the call's facts.
    #[arg(long)]
    json: bool,
}

/// Where the walk reads from.
enum Source {
    Store(Store),
    Core { client: StoreClient<Channel>, authorization: String },
}

/// Whether an object's bytes hash to its ref.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Ok,
    /// Its bytes hash to another ref.
    Mismatch,
    Absent,
}

impl Mark {
    fn word(self) -> &'static str {
        match self {
            Mark::Ok => "ok",
            Mark::Mismatch => "mismatch",
            Mark::Absent => "absent",
        }
    }

    fn shown(self) -> &'static str {
        match self {
            Mark::Ok => "ok",
            Mark::Mismatch => "MISMATCH: its bytes hash to another ref",
            Mark::Absent => "ABSENT",
        }
    }
}

/// One object of the walk.
struct Seen {
    depth: usize,
    role: String,
    reference: HashRef,
    semantic_id: String,
    mark: Mark,
    /// The payload, when it is JSON.
    json: Option<Value>,
}

/// One effect of the call: its record and the request and result it links.
struct EffectSeen {
    record: Seen,
    request: Option<Seen>,
    result: Option<Seen>,
}

/// Every object the entry leads to.
struct Walk {
    record: Seen,
    input: Option<Seen>,
    output: Option<Seen>,
    plan: Option<Seen>,
    effects: Vec<EffectSeen>,
    source: Seen,
}

impl Walk {
    /// The objects in walk order: the record, its input, output and plan, each effect record
    /// followed by its request and result, then the source.
    fn objects(&self) -> Vec<&Seen> {
        let mut all = vec![&self.record];
        all.extend([&self.input, &self.output, &self.plan].into_iter().flatten());
        for effect in &self.effects {
            all.push(&effect.record);
            all.extend([&effect.request, &effect.result].into_iter().flatten());
        }
        all.push(&self.source);
        all
    }
}

pub async fn run(args: WhyArgs) -> Outcome {
    let source = match (&args.store, &args.core) {
        (Some(store), _) => Source::Store(open_store(&parse_location(store)?, OpenMode::MustExist).await?),
        (None, Some(core)) => {
            let token = match &args.session {
                Some(value) if std::path::Path::new(value).is_file() => std::fs::read_to_string(value)
                    .map_err(|e| Failed::refused(format!("--session {value}: {e}")))?
                    .trim()
                    .to_owned(),
                Some(value) => value.trim().to_owned(),
                None => return Err(Failed::refused("--core needs --session (or WORLD_SESSION): reads need a session")),
            };
            let client = StoreClient::connect(core.clone())
                .await
                .map_err(|e| Failed::fatal(format!("cannot reach the core at {core}: {e}")))?;
            Source::Core { client, authorization: format!("Bearer {token}") }
        }
        (None, None) => return Err(Failed::refused("give --store or --core")),
    };
    let entry = source.resolve(&args.target).await?;
    let walk = walk(&source, &entry).await?;
    let entry_ok = world_core::genesis::entry_hash(&entry) == entry.entry_hash;
    let story = Story::of(&entry, &walk);
    if args.json {
        let objects: Vec<Value> = walk
            .objects()
            .iter()
            .map(|n| json!({"role": n.role, "ref": n.reference.to_string(), "semanticId": n.semantic_id, "verified": n.mark.word(), "depth": n.depth}))
            .collect();
        let mut out = json!({
            "entry": {
                "index": entry.entry_index,
                "entryHash": entry.entry_hash.to_string(),
                "verified": if entry_ok { "ok" } else { "mismatch" },
                "writtenBy": entry.written_by,
                "transitionFn": entry.transition_fn.to_string(),
                "interpreter": entry.interpreter.to_string(),
            },
            "objects": objects,
        });
        if let Some(call) = story.call_json() {
            out["call"] = call;
        }
        println!("{out}");
    } else {
        print!("{}", story.text(&entry, &walk, entry_ok));
    }
    if !entry_ok || walk.objects().iter().any(|n| n.mark != Mark::Ok) {
        return Err(Failed::refused("some objects of this walk do not verify (marked above)"));
    }
    Ok(())
}

impl Source {
    /// The log entry `target` names.
    async fn resolve(&self, target: &str) -> Result<LogEntry, Failed> {
        let missing = |what: String| Failed::refused(what);
        if let Ok(index) = target.parse::<i64>() {
            return self.entry(index).await?.ok_or_else(|| missing(format!("no log entry {index}")));
        }
        if let Ok(reference) = HashRef::parse(target) {
            return self.entry_of(&reference).await?.ok_or_else(|| {
                missing(format!("no log entry carries {reference}; is it an object of a committed call?"))
            });
        }
        if target.contains(':') {
            let Source::Store(store) = self else {
                return Err(Failed::refused(
                    "an invocation id needs --store; over --core give the entry index (A2A results carry metadata.entry_index) or an effect record ref",
                ));
            };
            let receipt = store.receipt(target).await.map_err(Failed::fatal)?;
            let Receipt::Resolved { result_ref } = receipt else {
                return Err(Failed::refused(format!("{target} did not commit (its receipt is {})", receipt.state())));
            };
            let world = store.world(&result_ref).await.map_err(Failed::fatal)?.ok_or_else(|| {
                Failed::fatal(format!("{target} committed world {result_ref}, which the store does not hold"))
            })?;
            return self
                .entry(world.revision)
                .await?
                .ok_or_else(|| missing(format!("no log entry {}", world.revision)));
        }
        Err(Failed::refused(format!("{target:?} is neither an entry index, a sha256 ref nor an invocation id")))
    }

    async fn entry(&self, index: i64) -> Result<Option<LogEntry>, Failed> {
        match self {
            Source::Store(store) => store.log_entry(index).await.map_err(Failed::fatal),
            Source::Core { client, authorization } => {
                let request = pb::GetLogEntryRequest { index };
                let entry = ask(client, authorization, request, |mut c, r| async move { c.get_log_entry(r).await });
                entry.await?.map(entry_from_wire).transpose()
            }
        }
    }

    async fn entry_of(&self, reference: &HashRef) -> Result<Option<LogEntry>, Failed> {
        match self {
            Source::Store(store) => store.entry_of_object(reference).await.map_err(Failed::fatal),
            Source::Core { client, authorization } => {
                let request = pb::ObjectEntryRequest { r#ref: reference.to_string() };
                let entry = ask(client, authorization, request, |mut c, r| async move { c.object_entry(r).await });
                entry.await?.map(entry_from_wire).transpose()
            }
        }
    }

    /// An object's semantic id and payload, if the store holds it.
    async fn object(&self, reference: &HashRef) -> Result<Option<(String, Vec<u8>)>, Failed> {
        match self {
            Source::Store(store) => Ok(store
                .get_object(reference, true)
                .await
                .map_err(Failed::fatal)?
                .map(|o| (o.semantic_id, o.payload.unwrap_or_default()))),
            Source::Core { client, authorization } => {
                let request = pb::GetObjectRequest { r#ref: reference.to_string(), with_payload: true };
                let object = ask(client, authorization, request, |mut c, r| async move { c.get_object(r).await });
                Ok(object.await?.map(|o| (o.semantic_id, o.payload.unwrap_or_default())))
            }
        }
    }
}

/// A read over `--core`: `call` with the session credential attached, answering the value,
/// `None` when the core has no such thing, or why it refused.
async fn ask<Q, R, Fut>(
    client: &StoreClient<Channel>,
    authorization: &str,
    message: Q,
    call: impl FnOnce(StoreClient<Channel>, tonic::Request<Q>) -> Fut,
) -> Result<Option<R::Value>, Failed>
where
    R: world_proto::Outcome<Error = pb::Failure>,
    Fut: Future<Output = Result<tonic::Response<R>, tonic::Status>>,
{
    let mut request = tonic::Request::new(message);
    let value =
        authorization.parse().map_err(|_| Failed::refused("the session credential is not a valid header value"))?;
    request.metadata_mut().insert("authorization", value);
    let reply = call(client.clone(), request).await.map_err(Failed::fatal)?;
    match reply.into_inner().into_result() {
        Some(Ok(value)) => Ok(Some(value)),
        Some(Err(f)) if f.code == "not_found" => Ok(None),
        Some(Err(f)) => Err(Failed::refused(format!("{}: {}", f.code, f.message))),
        None => Err(Failed::fatal("the core answered without an outcome")),
    }
}

fn entry_from_wire(e: pb::LogEntry) -> Result<LogEntry, Failed> {
    let parse = |field: &str, text: &str| HashRef::parse(text).map_err(|e| Failed::fatal(format!("{field}: {e}")));
    Ok(LogEntry {
        entry_index: e.entry_index,
        semantics_epoch: e.semantics_epoch,
        transition_fn: parse("transitionFn", &e.transition_fn)?,
        interpreter: parse("interpreter", &e.interpreter)?,
        prev_entry_hash: parse("prevEntryHash", &e.prev_entry_hash)?,
        written_by: e.written_by,
        entry_hash: parse("entryHash", &e.entry_hash)?,
        transition_ref: parse("transitionRef", &e.transition_ref)?,
    })
}

/// Every object the entry leads to.
async fn walk(source: &Source, entry: &LogEntry) -> Result<Walk, Failed> {
    let record = visit(source, 0, "record", entry.transition_ref).await?;
    let linked = |key: &str| -> Option<HashRef> {
        record.json.as_ref()?.get(key)?.as_str().and_then(|r| HashRef::parse(r).ok())
    };
    let (input_ref, output_ref, plan_ref) = (linked("input"), linked("output"), linked("plan"));
    let effect_refs: Vec<HashRef> = record
        .json
        .as_ref()
        .and_then(|r| r.get("effects"))
        .and_then(Value::as_array)
        .map(|refs| refs.iter().filter_map(|r| r.as_str().and_then(|r| HashRef::parse(r).ok())).collect())
        .unwrap_or_default();
    let input = visit_named(source, 1, "input", input_ref).await?;
    let output = visit_named(source, 1, "output", output_ref).await?;
    let plan = visit_named(source, 1, "plan", plan_ref).await?;
    let mut effects = Vec::with_capacity(effect_refs.len());
    for (i, reference) in effect_refs.into_iter().enumerate() {
        let record = visit(source, 1, &format!("effect {i}"), reference).await?;
        let linked = |key: &str| -> Option<HashRef> {
            let text = record.json.as_ref()?.get(key)?.as_str().filter(|r| !r.is_empty())?;
            HashRef::parse(text).ok()
        };
        // A denial writes its record only: the request it names was never stored.
        let denied = record.json.as_ref().and_then(|r| r.get("allowed")).and_then(Value::as_bool) == Some(false);
        let (request_ref, result_ref) = (linked("requestRef").filter(|_| !denied), linked("resultRef"));
        let request = visit_named(source, 2, "request", request_ref).await?;
        let result = visit_named(source, 2, "result", result_ref).await?;
        effects.push(EffectSeen { record, request, result });
    }
    let source_seen = visit(source, 0, "source", entry.transition_fn).await?;
    Ok(Walk { record, input, output, plan, effects, source: source_seen })
}

/// Reads one object of the walk and checks that its bytes hash to its ref.
async fn visit(source: &Source, depth: usize, role: &str, reference: HashRef) -> Result<Seen, Failed> {
    let (semantic_id, mark, json) = match source.object(&reference).await? {
        None => (String::new(), Mark::Absent, None),
        Some((semantic_id, bytes)) => {
            let mark = if HashRef::of(&bytes) == reference { Mark::Ok } else { Mark::Mismatch };
            (semantic_id, mark, serde_json::from_slice::<Value>(&bytes).ok())
        }
    };
    Ok(Seen { depth, role: role.to_owned(), reference, semantic_id, mark, json })
}

/// [`visit`] of a ref the record may leave out.
async fn visit_named(
    source: &Source,
    depth: usize,
    role: &str,
    reference: Option<HashRef>,
) -> Result<Option<Seen>, Failed> {
    match reference {
        Some(reference) => Ok(Some(visit(source, depth, role, reference).await?)),
        None => Ok(None),
    }
}

// ----- the story --------------------------------------------------------------------------------

/// Characters of the story column the refs beside it are aligned after.
const STORY_WIDTH: usize = 64;
/// Characters of a value (arguments, a reason, an output field) shown before it is cut.
const SHOWN_CHARS: usize = 120;

/// What the walk says happened, read from the objects' payloads. Every fact is optional: a
/// record of an older or newer shape, or an object the walk could not read, leaves it out.
struct Story {
    transition: Option<String>,
    surface: Option<&'static str>,
    episode: Option<String>,
    invocation: Option<String>,
    arguments: Option<Value>,
    plan: Option<PlanStory>,
    effects: Vec<EffectStory>,
    outcome: Option<OutcomeStory>,
}

struct PlanStory {
    effects: usize,
    finish: bool,
}

/// One effect, told.
struct EffectStory {
    id: Option<String>,
    effect: String,
    scope: String,
    /// What it did to what: `read hello.ail`, `run main.ail with args {"n":2}`.
    action: String,
    path: Option<String>,
    /// `ok`, `failed` or `denied`.
    status: &'static str,
    denial: Option<String>,
    reason: Option<String>,
    bytes: Option<u64>,
    sha256: Option<String>,
    exit_code: Option<i64>,
    cost: Option<i64>,
    budget_before: Option<i64>,
    budget_after: Option<i64>,
}

struct OutcomeStory {
    ok: Option<bool>,
    refused: Option<String>,
    /// A few scalar fields of the output, shown as `key value`.
    facts: Vec<(String, String)>,
    /// The statuses of the effects its `world` block lists.
    effects: Vec<String>,
}

impl Story {
    fn of(entry: &LogEntry, walk: &Walk) -> Story {
        let record = walk.record.json.as_ref();
        let text = |key: &str| record.and_then(|r| r.get(key)).and_then(Value::as_str).map(str::to_owned);
        let surface = match entry.written_by.as_str() {
            "coordinator:mcp" => Some("MCP"),
            "coordinator:a2a" => Some("A2A"),
            _ => None,
        };
        let plan_json = walk.plan.as_ref().and_then(|p| p.json.as_ref());
        let planned: Vec<&Value> = plan_json
            .and_then(|p| p.get("effects"))
            .and_then(Value::as_array)
            .map(|e| e.iter().collect())
            .unwrap_or_default();
        let plan = plan_json.map(|p| PlanStory {
            effects: planned.len(),
            finish: p.get("finish").and_then(Value::as_bool).unwrap_or(false),
        });
        // Records are in plan order, one per planned effect.
        let effects =
            walk.effects.iter().enumerate().map(|(i, seen)| EffectStory::of(seen, planned.get(i).copied())).collect();
        Story {
            transition: text("skillId"),
            surface,
            episode: text("episodeId"),
            invocation: text("invocationId"),
            arguments: walk.input.as_ref().and_then(|i| i.json.clone()),
            plan,
            effects,
            outcome: walk.output.as_ref().and_then(|o| o.json.as_ref()).map(OutcomeStory::of),
        }
    }

    /// The story as text, each line with the refs it was read from beside it.
    fn text(&self, entry: &LogEntry, walk: &Walk, entry_ok: bool) -> String {
        let mut out = String::new();
        let mark = if entry_ok { "ok" } else { "MISMATCH" };
        let _ = writeln!(
            out,
            "entry {}  {}  {mark}  (written by {})",
            entry.entry_index, entry.entry_hash, entry.written_by
        );
        if let Some(transition) = &self.transition {
            let mut line = transition.clone();
            if let Some(surface) = self.surface {
                let _ = write!(line, " over {surface}");
            }
            if let Some(episode) = &self.episode {
                let _ = write!(line, ", episode {episode}");
            }
            if let Some(invocation) = &self.invocation {
                let _ = write!(line, ", invocation {invocation}");
            }
            let _ = writeln!(out, "{line}");
        }
        let record_line = if self.transition.is_some() {
            "the invocation record".to_owned()
        } else {
            walk.record.semantic_id.clone()
        };
        section(&mut out, "record", &[record_line], &[&walk.record]);
        if let Some(input) = &walk.input {
            let shown = self.arguments.as_ref().map_or_else(|| "(not JSON)".to_owned(), |a| shorten(&a.to_string()));
            section(&mut out, "arguments", &[shown], &[input]);
        }
        if let (Some(plan), Some(seen)) = (&self.plan, &walk.plan) {
            let mut line = match plan.effects {
                0 => "no effects: the transition refused before acting".to_owned(),
                1 => "1 effect".to_owned(),
                n => format!("{n} effects"),
            };
            if plan.finish {
                line.push_str(", then a finish phase");
            }
            section(&mut out, "plan", &[line], &[seen]);
        } else if let Some(seen) = &walk.plan {
            section(&mut out, "plan", &["(not readable)".to_owned()], &[seen]);
        }
        for (story, seen) in self.effects.iter().zip(&walk.effects) {
            let label = story.id.as_ref().map_or_else(|| "effect".to_owned(), |id| format!("effect {id}"));
            let refs: Vec<&Seen> =
                std::iter::once(&seen.record).chain(seen.request.iter()).chain(seen.result.iter()).collect();
            section(&mut out, &label, &story.lines(), &refs);
        }
        if let Some(output) = &walk.output {
            let line = self.outcome.as_ref().map_or_else(|| "(not JSON)".to_owned(), OutcomeStory::line);
            section(&mut out, "outcome", &[line], &[output]);
        }
        let source_line =
            self.transition.as_ref().map_or_else(|| "the transition source".to_owned(), |t| format!("{t}'s source"));
        section(&mut out, "source", &[source_line], &[&walk.source]);
        let _ = writeln!(
            out,
            "  {:<11} {}  (the archived binary; verified when a core pins it)",
            "interpreter", entry.interpreter
        );
        out
    }

    /// The call's facts for `--json`; `None` for an entry that is no call.
    fn call_json(&self) -> Option<Value> {
        let transition = self.transition.as_ref()?;
        let effects: Vec<Value> = self.effects.iter().map(EffectStory::json).collect();
        let mut call = Map::new();
        call.insert("transition".into(), json!(transition));
        insert_some(&mut call, "surface", self.surface.map(|s| json!(s)));
        insert_some(&mut call, "episode", self.episode.as_ref().map(|e| json!(e)));
        insert_some(&mut call, "invocation", self.invocation.as_ref().map(|i| json!(i)));
        insert_some(&mut call, "arguments", self.arguments.clone());
        insert_some(&mut call, "plan", self.plan.as_ref().map(|p| json!({"effects": p.effects, "finish": p.finish})));
        call.insert("effects".into(), Value::Array(effects));
        insert_some(&mut call, "outcome", self.outcome.as_ref().map(OutcomeStory::json));
        Some(Value::Object(call))
    }
}

impl EffectStory {
    fn of(seen: &EffectSeen, planned: Option<&Value>) -> EffectStory {
        let record = seen.record.json.as_ref();
        let result = seen.result.as_ref().and_then(|r| r.json.as_ref());
        let field = |value: Option<&Value>, key: &str| value.and_then(|v| v.get(key)).cloned();
        let text = |value: Option<&Value>, key: &str| {
            value.and_then(|v| v.get(key)).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned)
        };
        let number = |value: Option<&Value>, key: &str| value.and_then(|v| v.get(key)).and_then(Value::as_i64);
        let effect = text(record, "effect").unwrap_or_else(|| "an effect".to_owned());
        let payload = planned.and_then(|p| p.get("payload"));
        let allowed = field(record, "allowed").and_then(|v| v.as_bool());
        let failed = field(record, "failed").and_then(|v| v.as_bool()).unwrap_or(false);
        let status = match (allowed, failed) {
            (Some(false), _) => "denied",
            (Some(true), true) => "failed",
            (Some(true), false) => "ok",
            (None, _) => "unknown",
        };
        // A record that says why itself wins; otherwise the handler's answer in its result.
        let reason = text(record, "reason")
            .or_else(|| text(result, "reason"))
            .or_else(|| text(result, "refused"))
            .or_else(|| text(result, "error"));
        let bytes = result.and_then(|r| {
            r.get("bytes").and_then(Value::as_u64).or_else(|| r.get("content")?.as_str().map(|c| c.len() as u64))
        });
        EffectStory {
            id: text(planned, "id"),
            action: action(&effect, payload),
            path: text(payload, "path"),
            effect,
            scope: text(record, "scope").unwrap_or_default(),
            status,
            denial: text(record, "denial"),
            reason,
            bytes,
            sha256: text(result, "sha256"),
            exit_code: number(result, "exit_code"),
            cost: number(record, "cost"),
            budget_before: number(record, "budgetBefore"),
            budget_after: number(record, "budgetAfter"),
        }
    }

    fn lines(&self) -> Vec<String> {
        let mut what = self.effect.clone();
        if !self.scope.is_empty() {
            let _ = write!(what, " at {}", self.scope);
        }
        let _ = write!(what, ": {}", self.action);
        let mut status = match (self.status, &self.denial) {
            ("denied", Some(label)) => format!("denied: {} ({label})", denial_words(label)),
            (word, _) => word.to_owned(),
        };
        match (&self.reason, self.status) {
            // A record from before refusals were recorded `failed`.
            (Some(reason), "ok") => {
                let _ = write!(status, ", but the handler refused: {}", shorten(reason));
            }
            (Some(reason), _) => {
                let _ = write!(status, ": {}", shorten(reason));
            }
            (None, _) => {}
        }
        let mut facts = Vec::new();
        if let Some(bytes) = self.bytes {
            facts.push(format!("{bytes} bytes"));
        }
        if let Some(sha256) = &self.sha256 {
            facts.push(sha256.clone());
        }
        if let Some(code) = self.exit_code {
            facts.push(format!("exit code {code}"));
        }
        if !facts.is_empty() {
            let _ = write!(status, " — {}", facts.join(", "));
        }
        let mut lines = vec![what, status];
        if let (Some(cost), Some(before), Some(after)) = (self.cost, self.budget_before, self.budget_after) {
            lines.push(format!("cost {cost}, budget {before} → {after}"));
        }
        lines
    }

    fn json(&self) -> Value {
        let mut effect = Map::new();
        insert_some(&mut effect, "id", self.id.as_ref().map(|v| json!(v)));
        effect.insert("effect".into(), json!(self.effect));
        effect.insert("scope".into(), json!(self.scope));
        effect.insert("action".into(), json!(self.action));
        insert_some(&mut effect, "path", self.path.as_ref().map(|v| json!(v)));
        effect.insert("status".into(), json!(self.status));
        insert_some(&mut effect, "denial", self.denial.as_ref().map(|v| json!(v)));
        insert_some(&mut effect, "reason", self.reason.as_ref().map(|v| json!(v)));
        insert_some(&mut effect, "bytes", self.bytes.map(|v| json!(v)));
        insert_some(&mut effect, "sha256", self.sha256.as_ref().map(|v| json!(v)));
        insert_some(&mut effect, "exitCode", self.exit_code.map(|v| json!(v)));
        insert_some(&mut effect, "cost", self.cost.map(|v| json!(v)));
        insert_some(&mut effect, "budgetBefore", self.budget_before.map(|v| json!(v)));
        insert_some(&mut effect, "budgetAfter", self.budget_after.map(|v| json!(v)));
        Value::Object(effect)
    }
}

impl OutcomeStory {
    /// Output fields that are plumbing, not the answer.
    const QUIET: [&'static str; 6] = ["ok", "refused", "world", "tool", "policy_digest", "status"];
    const FACTS: usize = 4;

    fn of(output: &Value) -> OutcomeStory {
        let facts = output
            .as_object()
            .map(|fields| {
                fields
                    .iter()
                    .filter(|(key, value)| {
                        !Self::QUIET.contains(&key.as_str())
                            && !value.is_object()
                            && !value.is_array()
                            && value.as_str() != Some("")
                    })
                    .take(Self::FACTS)
                    .map(|(key, value)| (key.clone(), shorten(&value.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        OutcomeStory {
            ok: output.get("ok").and_then(Value::as_bool),
            refused: output.get("refused").and_then(Value::as_str).map(str::to_owned),
            facts,
            effects: output
                .pointer("/world/effects")
                .and_then(Value::as_array)
                .map(|effects| effects.iter().filter_map(|e| e.get("status")?.as_str().map(str::to_owned)).collect())
                .unwrap_or_default(),
        }
    }

    fn line(&self) -> String {
        let mut line = match (&self.refused, self.ok) {
            (Some(refused), _) => format!("refused: {}", shorten(refused)),
            (None, Some(true)) => "ok".to_owned(),
            (None, Some(false)) => "not ok".to_owned(),
            (None, None) if self.effects.is_empty() => "answered".to_owned(),
            (None, None) => format!("no answer of its own; its effects ended {}", self.effects.join(", ")),
        };
        if !self.facts.is_empty() {
            let facts: Vec<String> = self.facts.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = write!(line, "; {}", facts.join(", "));
        }
        line
    }

    fn json(&self) -> Value {
        let mut outcome = Map::new();
        insert_some(&mut outcome, "ok", self.ok.map(Value::Bool));
        insert_some(&mut outcome, "refused", self.refused.as_ref().map(|r| json!(r)));
        Value::Object(outcome)
    }
}

/// What an effect did to what, from its planned payload: its op (or the effect's own verb),
/// its path, and any other argument but file content.
fn action(effect: &str, payload: Option<&Value>) -> String {
    let Some(Value::Object(fields)) = payload else {
        return "(the plan is not readable)".to_owned();
    };
    let verb = fields.get("op").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| {
        match effect {
            "Workspace.Read" => "read",
            "Workspace.Write" => "write",
            "Ailang.Check" => "check",
            "Ailang.Run" => "run",
            _ => "call",
        }
        .to_owned()
    });
    let mut action = verb;
    if let Some(path) = fields.get("path").and_then(Value::as_str) {
        let _ = write!(action, " {path}");
    }
    for (key, value) in fields {
        if matches!(key.as_str(), "op" | "path" | "content" | "old_text" | "new_text") {
            continue;
        }
        let shown = match (key.as_str(), value) {
            ("args_json", Value::String(text)) => shorten(text),
            _ => shorten(&value.to_string()),
        };
        let label = if key == "args_json" { "with args" } else { key.as_str() };
        let _ = write!(action, " {label} {shown}");
    }
    action
}

/// A denial label in words.
fn denial_words(label: &str) -> &'static str {
    match label {
        "denied:budget" => "the episode has spent this grant's budget",
        "denied:effect-name" => "the session holds no grant for this effect",
        "denied:scope" => "no grant covers this scope",
        "denied:expired" => "the grant has expired",
        _ => "the grant law refused it",
    }
}

/// `text` on one line, cut at [`SHOWN_CHARS`] characters with what was cut said.
fn shorten(text: &str) -> String {
    let one_line = text.replace('\n', "\\n");
    match one_line.char_indices().nth(SHOWN_CHARS) {
        None => one_line,
        Some((end, _)) => format!("{}… ({} bytes in all)", &one_line[..end], text.len()),
    }
}

fn insert_some(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.to_owned(), value);
    }
}

/// One labelled part of the story: its lines, with the refs they were read from beside them.
fn section(out: &mut String, label: &str, lines: &[String], refs: &[&Seen]) {
    for i in 0..lines.len().max(refs.len()) {
        let label = if i == 0 { label } else { "" };
        let line = lines.get(i).map_or("", String::as_str);
        let story = format!("  {label:<11} {line}");
        match refs.get(i) {
            None => {
                let _ = writeln!(out, "{}", story.trim_end());
            }
            // A longer line pushes its ref further right rather than onto a line of its own.
            Some(seen) => {
                let _ = writeln!(out, "{story:STORY_WIDTH$}  {}", beside(seen));
            }
        }
    }
}

/// An object's role, ref and mark, as printed beside the story.
fn beside(seen: &Seen) -> String {
    let role = seen.role.strip_prefix("effect ").map_or(seen.role.as_str(), |_| "record");
    format!("{role:<8} {}  {}", seen.reference, seen.mark.shown())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_effect_action_names_its_op_its_path_and_its_other_arguments_but_never_file_content() {
        let table = [
            ("Workspace.Read", json!({"op": "read", "path": "a.ail"}), "read a.ail"),
            ("Workspace.Write", json!({"op": "write", "path": "a.ail", "content": "secret"}), "write a.ail"),
            ("Workspace.Write", json!({"op": "edit", "path": "a.ail", "old_text": "x", "new_text": "y"}), "edit a.ail"),
            ("Ailang.Check", json!({"op": "check", "path": "a.ail"}), "check a.ail"),
            ("Ailang.Run", json!({"path": "a.ail", "args_json": "{\"n\":2}"}), "run a.ail with args {\"n\":2}"),
            ("Ailang.Run", json!({"path": "a.ail", "args_json": {"n": 2}}), "run a.ail with args {\"n\":2}"),
            ("Ailang.Discover", json!({"op": "examples_search", "query": "json"}), "examples_search query \"json\""),
            ("Other.Effect", json!({}), "call"),
        ];
        for (effect, payload, want) in table {
            assert_eq!(action(effect, Some(&payload)), want, "{effect} {payload}");
        }
        assert_eq!(action("Workspace.Read", None), "(the plan is not readable)");
    }

    #[test]
    fn shown_values_stay_on_one_line_and_say_how_much_was_cut() {
        assert_eq!(shorten("a\nb"), "a\\nb");
        let long = "x".repeat(SHOWN_CHARS + 5);
        assert_eq!(shorten(&long), format!("{}… ({} bytes in all)", "x".repeat(SHOWN_CHARS), long.len()));
        let wide = "é".repeat(SHOWN_CHARS + 1);
        assert!(shorten(&wide).starts_with(&"é".repeat(SHOWN_CHARS)), "cut on a character boundary");
    }

    fn seen(role: &str, json: Value) -> Seen {
        Seen {
            depth: 1,
            role: role.to_owned(),
            reference: HashRef::of(json.to_string().as_bytes()),
            semantic_id: String::new(),
            mark: Mark::Ok,
            json: Some(json),
        }
    }

    fn record(allowed: bool, failed: bool, denial: &str, before: i64, after: i64) -> Value {
        json!({"effect": "Ailang.Run", "scope": "worktree", "cost": 1, "budgetBefore": before, "budgetAfter": after,
               "allowed": allowed, "failed": failed, "denial": denial})
    }

    #[test]
    fn an_effect_is_told_with_its_status_reason_bytes_sha256_and_budget_when_its_objects_hold_them() {
        let planned = json!({"id": "e1", "payload": {"path": "main.ail", "args_json": "\"x\""}});
        let sha = format!("sha256:{}", "ab".repeat(32));
        let table = [
            (
                record(true, false, "", 3, 2),
                Some(json!({"ok": true, "exit_code": 0, "sha256": sha})),
                vec![
                    "Ailang.Run at worktree: run main.ail with args \"x\"".to_owned(),
                    format!("ok — {sha}, exit code 0"),
                    "cost 1, budget 3 → 2".to_owned(),
                ],
            ),
            // A refusal recorded failed, its reason in its result.
            (
                record(true, true, "", 3, 2),
                Some(json!({"ok": false, "refused": "path \"main.ail\" refused: no such file", "sha256": sha})),
                vec![
                    "Ailang.Run at worktree: run main.ail with args \"x\"".to_owned(),
                    format!("failed: path \"main.ail\" refused: no such file — {sha}"),
                    "cost 1, budget 3 → 2".to_owned(),
                ],
            ),
            // A refusal recorded ok, as records were before refusals were recorded failed.
            (
                record(true, false, "", 3, 2),
                Some(json!({"ok": false, "refused": "no such file"})),
                vec![
                    "Ailang.Run at worktree: run main.ail with args \"x\"".to_owned(),
                    "ok, but the handler refused: no such file".to_owned(),
                    "cost 1, budget 3 → 2".to_owned(),
                ],
            ),
            // A failure with no result says only that it failed.
            (
                record(true, true, "", 3, 2),
                None,
                vec![
                    "Ailang.Run at worktree: run main.ail with args \"x\"".to_owned(),
                    "failed".to_owned(),
                    "cost 1, budget 3 → 2".to_owned(),
                ],
            ),
            (
                record(false, false, "denied:effect-name", 0, 0),
                None,
                vec![
                    "Ailang.Run at worktree: run main.ail with args \"x\"".to_owned(),
                    "denied: the session holds no grant for this effect (denied:effect-name)".to_owned(),
                    "cost 1, budget 0 → 0".to_owned(),
                ],
            ),
        ];
        for (record, result, want) in table {
            let effect = EffectSeen {
                record: seen("effect 0", record),
                request: None,
                result: result.map(|r| seen("result", r)),
            };
            let story = EffectStory::of(&effect, Some(&planned));
            assert_eq!(story.lines(), want);
            assert_eq!(story.json()["path"], "main.ail");
        }
    }

    #[test]
    fn every_denial_label_has_words() {
        for denial in [
            world_model::Denial::EffectName,
            world_model::Denial::Scope,
            world_model::Denial::Expired,
            world_model::Denial::Budget,
        ] {
            assert_ne!(denial_words(denial.label()), denial_words("denied:unheard-of"), "{denial}");
        }
    }
}
