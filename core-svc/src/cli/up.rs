//! `world-core up`: the one-command start. State lives in one directory
//! (default `./.world/`); the first run bootstraps the epoch with the sibling
//! `ailang`, commits genesis, runs the attended publish of the bundled
//! examples and coding tools on the operator's terminal, creates the demo
//! episode's worktree with a sample program and mints a demo session with the
//! coding tools' grants (attended y/N); every run then serves a core over that
//! workspace and a spawned sibling `world-edge` until Ctrl-C. A rerun reuses
//! the state and republishes only the packages that changed.

use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;
use world_core::attended;
use world_core::limits::Limits;
use world_core::session::{self, now_unix};
use world_core::store::{LockMode, OpenMode, ServingLock, StoreLocation};
use world_core::subprocess::Slots;
use world_model::{Episode, Grant};

use super::serve::{CoreOptions, build_core, pin_interpreter, serve_grpc, shutdown_signal, store_files};
use super::{Failed, Outcome, open_store};

const EPISODE: &str = "demo";
const DEMO_GRANTS: [&str; 1] = ["world.apply=world:1000"];
const DEMO_TTL: i64 = 7 * 24 * 3600;
/// The sample program a fresh demo worktree starts with.
const SAMPLE_NAME: &str = "hello.ail";
const SAMPLE: &str = r#"-- A transition: main takes the caller's arguments as JSON text and returns a JSON object.
module hello

import std/json (decode, encode, getString, jo, js, kv)
import std/option (getOrElse)

export func main(input: string) -> string {
  let name = match decode(input) {
    Ok(args) => getOrElse(getString(args, "name"), "world"),
    Err(_) => "world"
  } in
  encode(jo([kv("greeting", js("hello, ${name}"))]))
}
"#;

#[derive(clap::Args)]
pub struct UpArgs {
    /// Where the store, archives, worktree and session file live.
    #[arg(long, env = "WORLD_UP_DIR", default_value = ".world")]
    dir: PathBuf,
    /// The bundled manifests to publish, each on its own (paths in them are relative to the
    /// current directory).
    #[arg(
        long = "manifest",
        default_values = ["packages/examples/transitions.json", "packages/se-tools/transitions.json"]
    )]
    manifests: Vec<PathBuf>,
    /// The core's gRPC address.
    #[arg(long, default_value = "127.0.0.1:7650")]
    core_listen: SocketAddr,
    /// The edge's HTTP address (the one agents use).
    #[arg(long, default_value = "127.0.0.1:7644")]
    edge_listen: SocketAddr,
}

pub async fn run(args: UpArgs) -> Outcome {
    let siblings = Siblings::find()?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&args.dir)
        .map_err(|e| Failed::fatal(format!("cannot create {}: {e}", args.dir.display())))?;
    let location = StoreLocation::Sqlite(args.dir.join("world.db"));
    let store = open_store(&location, OpenMode::CreateIfMissing).await?;

    step("pinning the interpreter", &siblings.ailang.display().to_string());
    pin_interpreter(&store, &location, &siblings.ailang, None, &Slots::new(Limits::default().max_subprocesses)).await?;
    if store.selected_head().await.map_err(Failed::fatal)?.is_none() {
        let world = world_core::genesis::commit_genesis(&store, now_unix()).await.map_err(Failed::fatal)?;
        step("committed genesis", &world.reference.to_string());
    }

    for (i, manifest) in args.manifests.iter().enumerate() {
        let digest_file = args.dir.join(format!("published-{i}.sha256"));
        let digest = bundle_digest(manifest)?;
        if std::fs::read_to_string(&digest_file).ok().as_deref() != Some(digest.as_str()) {
            step("publishing", &manifest.display().to_string());
            // The publisher needs the store to itself: no core serves yet.
            publish(&siblings, &location, manifest).await?;
            std::fs::write(&digest_file, &digest).map_err(Failed::fatal)?;
        } else {
            step("published transitions are current", &manifest.display().to_string());
        }
    }

    let episode = Episode::parse(EPISODE).map_err(Failed::fatal)?;
    let workspace_root = args.dir.join("ws");
    let worktree = workspace_root.join(EPISODE);
    std::fs::create_dir_all(&worktree).map_err(Failed::fatal)?;
    let sample = worktree.join(SAMPLE_NAME);
    if !sample.exists() {
        std::fs::write(&sample, SAMPLE).map_err(Failed::fatal)?;
        step("wrote a sample program", &sample.display().to_string());
    }
    let session_file = args.dir.join("session");
    ensure_session(&store, &episode, &session_file).await?;

    let serving_lock = ServingLock::acquire(&location, LockMode::Serve).await.map_err(Failed::fatal)?;
    let options =
        CoreOptions { ailang_bin: Some(&siblings.ailang), workspace_root: Some(&workspace_root), ..Default::default() };
    let core = build_core(&store, &location, options).await?;
    let listener = TcpListener::bind(args.core_listen)
        .await
        .map_err(|e| Failed::fatal(format!("cannot listen on {}: {e}", args.core_listen)))?;
    let core_address = listener.local_addr().map_err(Failed::fatal)?;
    let shutdown = shutdown_signal().map_err(Failed::fatal)?;
    let (stop_server, server_stopped) = tokio::sync::oneshot::channel::<()>();
    let watched = store_files(&location, &serving_lock)?;
    let server = tokio::spawn(async move {
        serve_grpc(core, listener, &location, watched, async {
            let _ = server_stopped.await;
        })
        .await
    });

    let mut edge = tokio::process::Command::new(&siblings.edge)
        .arg("--listen")
        .arg(args.edge_listen.to_string())
        .arg("--core")
        .arg(format!("http://{core_address}"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Failed::fatal(format!("cannot start {}: {e}", siblings.edge.display())))?;
    let edge_url = edge_startup_url(&mut edge).await?;
    print_connection(&edge_url, &session_file);

    let mut server = server;
    let mut served = None;
    tokio::select! {
        () = shutdown => {}
        status = edge.wait() => {
            eprintln!("world-core up: the edge exited ({}); stopping", status.map(|s| s.to_string()).unwrap_or_default());
        }
        // The core stopped by itself: its store went away.
        ended = &mut server => served = Some(ended),
    }
    if let Some(pid) = edge.id().and_then(|id| i32::try_from(id).ok()) {
        // SAFETY: signals the edge child we spawned.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let _ = edge.wait().await;
    let _ = stop_server.send(());
    let served = match served {
        Some(served) => served,
        None => server.await,
    };
    served.map_err(Failed::fatal)??;
    store.close().await;
    eprintln!("world-core up: stopped");
    Ok(())
}

/// The sibling binaries of this `world-core`.
struct Siblings {
    ailang: PathBuf,
    publish: PathBuf,
    edge: PathBuf,
}

impl Siblings {
    fn find() -> Result<Self, Failed> {
        let exe = std::env::current_exe().map_err(Failed::fatal)?;
        let dir = exe.parent().unwrap_or(Path::new("."));
        let sibling = |name: &str| {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(Failed::refused(format!(
                    "{} is missing next to world-core: build the workspace (cargo build --release --workspace --bins)",
                    path.display()
                )))
            }
        };
        Ok(Self { ailang: sibling("ailang")?, publish: sibling("world-publish")?, edge: sibling("world-edge")? })
    }
}

fn step(what: &str, detail: &str) {
    eprintln!("world-core up: {what}: {detail}");
}

/// The manifest's bytes and every source file it names: republish when any changes.
fn bundle_digest(manifest: &Path) -> Result<String, Failed> {
    let bytes = std::fs::read(manifest)
        .map_err(|e| Failed::refused(format!("cannot read the bundled manifest {}: {e}", manifest.display())))?;
    let entries: Vec<serde_json::Value> = serde_json::from_slice(&bytes)
        .map_err(|e| Failed::refused(format!("{} is not a manifest: {e}", manifest.display())))?;
    let mut hasher = Sha256::new();
    hasher.update(&bytes);
    for entry in entries {
        if let Some(file) = entry.get("transitionFnFile").and_then(|f| f.as_str()) {
            let source = std::fs::read(file).map_err(|e| Failed::refused(format!("cannot read {file}: {e}")))?;
            hasher.update(file.as_bytes());
            hasher.update(&source);
        }
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Runs the sibling `world-publish` on the operator's terminal: the
/// operator types the phrase; there is no bypass.
async fn publish(siblings: &Siblings, location: &StoreLocation, manifest: &Path) -> Outcome {
    let store = location.sqlite_path().map(|p| p.display().to_string()).unwrap_or_default();
    let status = tokio::process::Command::new(&siblings.publish)
        .args(["transitions", "--store", &store, "--manifest"])
        .arg(manifest)
        .arg("--ailang-bin")
        .arg(&siblings.ailang)
        .status()
        .await
        .map_err(|e| Failed::fatal(format!("cannot run {}: {e}", siblings.publish.display())))?;
    if status.success() {
        Ok(())
    } else {
        Err(Failed::refused(format!(
            "publishing the bundled transitions did not complete ({status}); nothing is served"
        )))
    }
}

/// Reuses the session in `file` while it is live; otherwise mints one
/// (attended y/N) and writes it there at mode 0600.
async fn ensure_session(store: &world_core::store::Store, episode: &Episode, file: &Path) -> Outcome {
    if let Ok(token) = std::fs::read_to_string(file) {
        let header = format!("Bearer {}", token.trim());
        // A session minted before the coding tools were bundled lacks their grants.
        let current = session::resolve(store, Some(&header), now_unix())
            .await
            .is_ok_and(|binding| binding.grants.iter().any(|g| g.effect == world_model::SE_TOOLS_EFFECTS[0]));
        if current {
            step("reusing the demo session", &file.display().to_string());
            return Ok(());
        }
        std::fs::remove_file(file).map_err(Failed::fatal)?;
    }
    let mut grants: Vec<Grant> =
        DEMO_GRANTS.iter().map(|g| Grant::parse_cli(g, 0)).collect::<Result<_, _>>().map_err(Failed::fatal)?;
    grants.extend(world_model::preset_grants("se-tools", world_model::PRESET_BUDGET, 0).unwrap_or_default());
    let prompt = format!(
        "Mint a demo session for episode {episode} ({} and the se-tools preset, {} calls each, expiry +{DEMO_TTL}s) into {}? [y/N] ",
        DEMO_GRANTS.join(" "),
        world_model::PRESET_BUDGET,
        file.display()
    );
    tokio::task::spawn_blocking(move || attended::confirm_yes("session mint", &prompt))
        .await
        .map_err(Failed::fatal)?
        .map_err(Failed::refused)?;
    let minted = session::mint(store, episode, &grants, DEMO_TTL, now_unix(), session::random_bytes())
        .await
        .map_err(Failed::fatal)?;
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
        .map_err(|e| Failed::fatal(format!("cannot write {}: {e}", file.display())))?;
    std::io::Write::write_all(&mut out, format!("{}\n", minted.token).as_bytes()).map_err(Failed::fatal)?;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600)).map_err(Failed::fatal)?;
    step("minted a demo session", &format!("credential_id={} in {}", minted.credential_id, file.display()));
    Ok(())
}

async fn edge_startup_url(edge: &mut tokio::process::Child) -> Result<String, Failed> {
    let stdout = edge.stdout.take().ok_or_else(|| Failed::fatal("the edge has no stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let wait = async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(url) = line.strip_prefix("world-edge listening on ") {
                return Some(url.trim().to_owned());
            }
        }
        None
    };
    match tokio::time::timeout(std::time::Duration::from_secs(30), wait).await {
        Ok(Some(url)) => Ok(url),
        _ => Err(Failed::fatal("the edge did not report its listening address")),
    }
}

fn print_connection(edge_url: &str, session_file: &Path) {
    let mcp = format!("{edge_url}/mcp/");
    let session = std::fs::canonicalize(session_file).unwrap_or_else(|_| session_file.to_path_buf());
    println!("world is up.");
    println!("  MCP URL:   {mcp}");
    println!("  A2A URL:   {edge_url}/a2a/");
    println!("  session:   {} (the bearer credential; keep it private)", session.display());
    println!();
    println!("Claude Code:");
    println!(
        "  claude mcp add --transport http world {mcp} --header \"Authorization: Bearer $(cat {})\"",
        session.display()
    );
    println!("MCP client configuration (put the file's contents after \"Bearer \"):");
    println!(
        "  {{\"mcpServers\":{{\"world\":{{\"type\":\"http\",\"url\":\"{mcp}\",\"headers\":{{\"Authorization\":\"Bearer <contents of {}>\"}}}}}}}}",
        session.display()
    );
    println!();
    println!("Try this (the agent's worktree is .world/ws/{EPISODE}/):");
    println!("  1. list the tools (tools/list): ailang-read, ailang-write, ailang-edit, ailang-check, ailang-run, …");
    println!("  2. read the sample: ailang-read {{\"path\": \"{SAMPLE_NAME}\"}}");
    println!("  3. check it:        ailang-check {{\"path\": \"{SAMPLE_NAME}\"}}");
    println!("Ctrl-C stops the core and the edge.");
}
