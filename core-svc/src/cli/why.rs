//! `world-core why`: walk back from a result to everything that made it — the log entry, the
//! invocation record, its input, output and plan, each effect record with its request and
//! result, and the transition source — marking whether each object's bytes hash to its ref.

use std::fmt::Write as _;

use serde_json::{Value, json};
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
    /// Print the walk as JSON.
    #[arg(long)]
    json: bool,
}

/// Where the walk reads from.
enum Source {
    Store(Store),
    Core { client: StoreClient<Channel>, authorization: String },
}

/// One object of the walk.
struct Node {
    depth: usize,
    role: String,
    reference: HashRef,
    semantic_id: String,
    /// `ok`, `mismatch` (its bytes hash to another ref) or `absent`.
    mark: &'static str,
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
    let nodes = walk(&source, &entry).await?;
    let entry_ok = world_core::genesis::entry_hash(&entry) == entry.entry_hash;
    if args.json {
        let objects: Vec<Value> = nodes
            .iter()
            .map(|n| json!({"role": n.role, "ref": n.reference.to_string(), "semanticId": n.semantic_id, "verified": n.mark, "depth": n.depth}))
            .collect();
        let out = json!({
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
        println!("{out}");
    } else {
        let mut text = String::new();
        let mark = if entry_ok { "ok" } else { "MISMATCH" };
        let _ = writeln!(
            text,
            "entry {}  {}  {mark}  (written by {})",
            entry.entry_index, entry.entry_hash, entry.written_by
        );
        for node in &nodes {
            let indent = "  ".repeat(node.depth + 1);
            let mark = match node.mark {
                "ok" => "ok",
                "mismatch" => "MISMATCH: its bytes hash to another ref",
                _ => "ABSENT",
            };
            let _ = writeln!(text, "{indent}{:<12} {}  {}  {mark}", node.role, node.reference, node.semantic_id);
        }
        let _ =
            writeln!(text, "  interpreter  {}  (the archived binary; verified when a core pins it)", entry.interpreter);
        print!("{text}");
    }
    if !entry_ok || nodes.iter().any(|n| n.mark != "ok") {
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
                let reply = client
                    .clone()
                    .get_log_entry(authorized(pb::GetLogEntryRequest { index }, authorization)?)
                    .await
                    .map_err(Failed::fatal)?
                    .into_inner();
                entry_reply(reply.outcome.map(|o| match o {
                    pb::get_log_entry_reply::Outcome::Entry(e) => Ok(e),
                    pb::get_log_entry_reply::Outcome::Failure(f) => Err(f),
                }))
            }
        }
    }

    async fn entry_of(&self, reference: &HashRef) -> Result<Option<LogEntry>, Failed> {
        match self {
            Source::Store(store) => store.entry_of_object(reference).await.map_err(Failed::fatal),
            Source::Core { client, authorization } => {
                let request = pb::ObjectEntryRequest { r#ref: reference.to_string() };
                let reply = client
                    .clone()
                    .object_entry(authorized(request, authorization)?)
                    .await
                    .map_err(Failed::fatal)?
                    .into_inner();
                entry_reply(reply.outcome.map(|o| match o {
                    pb::object_entry_reply::Outcome::Entry(e) => Ok(e),
                    pb::object_entry_reply::Outcome::Failure(f) => Err(f),
                }))
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
                let reply = client
                    .clone()
                    .get_object(authorized(request, authorization)?)
                    .await
                    .map_err(Failed::fatal)?
                    .into_inner();
                match reply.outcome {
                    Some(pb::get_object_reply::Outcome::Object(o)) => {
                        Ok(Some((o.semantic_id, o.payload.unwrap_or_default())))
                    }
                    Some(pb::get_object_reply::Outcome::Failure(f)) if f.code == "not_found" => Ok(None),
                    Some(pb::get_object_reply::Outcome::Failure(f)) => {
                        Err(Failed::refused(format!("{}: {}", f.code, f.message)))
                    }
                    None => Err(Failed::fatal("the core answered without an outcome")),
                }
            }
        }
    }
}

fn authorized<T>(message: T, authorization: &str) -> Result<tonic::Request<T>, Failed> {
    let mut request = tonic::Request::new(message);
    let value =
        authorization.parse().map_err(|_| Failed::refused("the session credential is not a valid header value"))?;
    request.metadata_mut().insert("authorization", value);
    Ok(request)
}

fn entry_reply(outcome: Option<Result<pb::LogEntry, pb::Failure>>) -> Result<Option<LogEntry>, Failed> {
    let parse = |field: &str, text: &str| HashRef::parse(text).map_err(|e| Failed::fatal(format!("{field}: {e}")));
    match outcome {
        Some(Ok(e)) => Ok(Some(LogEntry {
            entry_index: e.entry_index,
            semantics_epoch: e.semantics_epoch,
            transition_fn: parse("transitionFn", &e.transition_fn)?,
            interpreter: parse("interpreter", &e.interpreter)?,
            prev_entry_hash: parse("prevEntryHash", &e.prev_entry_hash)?,
            written_by: e.written_by,
            entry_hash: parse("entryHash", &e.entry_hash)?,
            transition_ref: parse("transitionRef", &e.transition_ref)?,
        })),
        Some(Err(f)) if f.code == "not_found" => Ok(None),
        Some(Err(f)) => Err(Failed::refused(format!("{}: {}", f.code, f.message))),
        None => Err(Failed::fatal("the core answered without an outcome")),
    }
}

/// Every object the entry leads to, in walk order.
async fn walk(source: &Source, entry: &LogEntry) -> Result<Vec<Node>, Failed> {
    let mut nodes = Vec::new();
    let record = visit(source, &mut nodes, 0, "record", entry.transition_ref).await?;
    if let Some(record) = record {
        for (role, key) in [("input", "input"), ("output", "output"), ("plan", "plan")] {
            if let Some(reference) = record.get(key).and_then(Value::as_str).and_then(|r| HashRef::parse(r).ok()) {
                visit(source, &mut nodes, 1, role, reference).await?;
            }
        }
        let effects: Vec<HashRef> = record
            .get("effects")
            .and_then(Value::as_array)
            .map(|refs| refs.iter().filter_map(|r| r.as_str().and_then(|r| HashRef::parse(r).ok())).collect())
            .unwrap_or_default();
        for (i, reference) in effects.into_iter().enumerate() {
            let effect = visit(source, &mut nodes, 1, &format!("effect {i}"), reference).await?;
            for (role, key) in [("request", "requestRef"), ("result", "resultRef")] {
                let linked = effect.as_ref().and_then(|e| e.get(key)).and_then(Value::as_str).filter(|r| !r.is_empty());
                if let Some(reference) = linked.and_then(|r| HashRef::parse(r).ok()) {
                    visit(source, &mut nodes, 2, role, reference).await?;
                }
            }
        }
    }
    visit(source, &mut nodes, 0, "source", entry.transition_fn).await?;
    Ok(nodes)
}

/// Adds one object to the walk; returns its payload as JSON when it is JSON.
async fn visit(
    source: &Source,
    nodes: &mut Vec<Node>,
    depth: usize,
    role: &str,
    reference: HashRef,
) -> Result<Option<Value>, Failed> {
    let (semantic_id, mark, payload) = match source.object(&reference).await? {
        None => (String::new(), "absent", None),
        Some((semantic_id, bytes)) => {
            let mark = if HashRef::of(&bytes) == reference { "ok" } else { "mismatch" };
            (semantic_id, mark, serde_json::from_slice::<Value>(&bytes).ok())
        }
    };
    nodes.push(Node { depth, role: role.to_owned(), reference, semantic_id, mark });
    Ok(payload)
}
