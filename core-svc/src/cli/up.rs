//! `world-core up`: the one-command start. State lives in one directory
//! (default `./.world/`); the first run bootstraps the epoch with the sibling
//! `ailang`, commits genesis, runs the attended publish of the bundled
//! examples and coding tools on the operator's terminal, creates the demo
//! episode's worktree with a sample program and mints a demo session with the
//! coding tools' grants (attended y/N); every run then serves a core over that
//! workspace and a spawned sibling `world-edge` until Ctrl-C, and prints client
//! configurations that work as pasted. A rerun reuses the state, republishes
//! only the packages that changed, reports the session's budgets and, when one
//! is spent, offers (attended y/N) a session for a new episode: spend is
//! counted per episode, so a new session for the same one would not help.

use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;
use world_core::attended;
use world_core::limits;
use world_core::session::{self, SessionBinding, now_unix};
use world_core::store::{LockMode, OpenMode, ServingLock, Store, StoreLocation};
use world_core::subprocess::Slots;
use world_model::{Episode, Grant};

use super::serve::{self, CoreOptions, build_core, pin_interpreter, serve_grpc, shutdown_signal, store_files};
use super::{Failed, Outcome, open_store};

const EPISODE: &str = "demo";
const DEMO_GRANTS: [&str; 1] = ["world.apply=world:1000"];
const DEMO_TTL: i64 = 7 * 24 * 3600;
/// How many episodes (`demo`, `demo-2`, …) a new demo session may be offered before the
/// operator is asked to name one.
const MAX_EPISODES: usize = 100;
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
    #[arg(long, default_value = serve::LISTEN)]
    core_listen: SocketAddr,
    /// The edge's HTTP address (the one agents use).
    #[arg(long, default_value = "127.0.0.1:7644")]
    edge_listen: SocketAddr,
    /// Each coding-tool grant's budget, in calls, when a demo session is minted.
    #[arg(long, default_value_t = world_model::PRESET_BUDGET)]
    budget: i64,
}

pub async fn run(args: UpArgs) -> Outcome {
    let siblings = Siblings::find()?;
    if args.budget < 0 {
        return Err(Failed::refused("--budget must be non-negative"));
    }
    // Both addresses are claimed before anything is asked or written: a port in use ends the
    // run at once, with one line naming it.
    let listener = listen(args.core_listen, "the core's gRPC address", "--core-listen").await?;
    drop(listen(args.edge_listen, "the edge's HTTP address", "--edge-listen").await?);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&args.dir)
        .map_err(|e| Failed::fatal(format!("cannot create {}: {e}", args.dir.display())))?;
    let location = StoreLocation::Sqlite(args.dir.join("world.db"));
    let store = open_store(&location, OpenMode::CreateIfMissing).await?;

    // What this run changed, for an operator who declines the mint.
    let mut done = Vec::new();
    step("pinning the interpreter", &siblings.ailang.display().to_string());
    pin_interpreter(&store, &location, &siblings.ailang, None, &Slots::new(limits::MAX_SUBPROCESSES)).await?;
    if store.selected_head().await.map_err(Failed::fatal)?.is_none() {
        let world = world_core::genesis::commit_genesis(&store, now_unix()).await.map_err(Failed::fatal)?;
        step("committed genesis", &world.reference.to_string());
        done.push("committed genesis".to_owned());
    }

    for (i, manifest) in args.manifests.iter().enumerate() {
        let digest_file = args.dir.join(format!("published-{i}.sha256"));
        let digest = bundle_digest(manifest)?;
        if std::fs::read_to_string(&digest_file).ok().as_deref() != Some(digest.as_str()) {
            step("publishing", &manifest.display().to_string());
            // The publisher needs the store to itself: no core serves yet.
            publish(&siblings, &location, manifest).await?;
            std::fs::write(&digest_file, &digest).map_err(Failed::fatal)?;
            done.push(format!("published {}", manifest.display()));
        } else {
            step("published transitions are current", &manifest.display().to_string());
        }
    }

    let demo = Demo {
        store: &store,
        store_path: location.sqlite_path().map(Path::to_path_buf).unwrap_or_default(),
        workspace_root: args.dir.join("ws"),
        session_file: args.dir.join("session"),
        budget: args.budget,
    };
    let episode = demo.ensure_session(&mut done).await?;

    let serving_lock = ServingLock::acquire(&location, LockMode::Serve).await.map_err(Failed::fatal)?;
    let options = CoreOptions {
        ailang_bin: Some(&siblings.ailang),
        workspace_root: Some(&demo.workspace_root),
        ..Default::default()
    };
    let core = build_core(&store, &location, options).await?;
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
    let edge_url = edge_startup_url(&mut edge, args.edge_listen).await?;
    print_connection(&edge_url, &demo.session_file, &episode, &demo.workspace_root.join(episode.as_str()));

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
            "publishing {} did not complete ({status}; its reason is above); nothing is served. Run world-core up \
             again to be asked once more",
            manifest.display()
        )))
    }
}

/// The demo session: its file, the store it lives in, and the worktrees of its episodes.
struct Demo<'a> {
    store: &'a Store,
    store_path: PathBuf,
    workspace_root: PathBuf,
    session_file: PathBuf,
    /// Each coding-tool grant's budget in a session minted here.
    budget: i64,
}

/// One grant of the reused session, with what its episode has spent of it.
struct GrantLeft {
    effect: String,
    budget: i64,
    spent: i64,
    left: i64,
}

impl Demo<'_> {
    /// The episode to serve: the reused session's, or a new one's after an attended mint.
    /// `done` lists what this run changed, for the operator who declines a mint.
    async fn ensure_session(&self, done: &mut Vec<String>) -> Result<Episode, Failed> {
        let file = self.session_file.display().to_string();
        if let Ok(token) = std::fs::read_to_string(&self.session_file) {
            let header = format!("Bearer {}", token.trim());
            let resolved = session::resolve(self.store, Some(&header), now_unix()).await;
            // A session minted before the coding tools were bundled lacks their grants.
            match resolved {
                Ok(binding) if binding.grants.iter().any(|g| g.effect == world_model::SE_TOOLS_EFFECTS[0]) => {
                    return self.reuse(binding, done).await;
                }
                // Left in place until a new one is written over it.
                _ => step("the session in it is expired, unknown or lacks the coding tools' grants", &file),
            }
        }
        let episode = self.fresh_episode().await?;
        let worktree = self.worktree(&episode, done)?;
        let prompt = format!(
            "Mint a demo session for episode {episode} ({}) with worktree {} into {file}? [y/N] ",
            self.grants_shown(),
            worktree.display()
        );
        match confirm(prompt).await {
            Ok(()) => {}
            Err(refusal) => {
                let changed = if done.is_empty() {
                    "this run changed nothing".to_owned()
                } else {
                    format!("this run {} (a rerun reuses them)", done.join(", "))
                };
                return Err(Failed::refused(format!(
                    "{refusal}: no session was minted and nothing is served; {changed}. Run world-core up again \
                     and answer y to mint the demo session"
                )));
            }
        }
        self.mint(&episode).await?;
        Ok(episode)
    }

    /// Reports the reused session's budgets and, when one is spent, offers a session for a new
    /// episode.
    async fn reuse(&self, binding: SessionBinding, done: &mut Vec<String>) -> Result<Episode, Failed> {
        let episode = binding.episode;
        let file = self.session_file.display().to_string();
        step("reusing the session", &format!("{file} (episode {episode})"));
        self.worktree(&episode, done)?;
        let left = self.grants_left(&episode, &binding.grants).await?;
        let shown: Vec<String> = left.iter().map(|g| format!("{} {} of {}", g.effect, g.left, g.budget)).collect();
        step(&format!("budgets left in episode {episode}"), &shown.join(", "));
        let spent_out = |g: &&GrantLeft| g.left == 0 && g.budget > 0;
        let spent: Vec<String> = left
            .iter()
            .filter(spent_out)
            .map(|g| format!("{} (spent {} of {})", g.effect, g.spent, g.budget))
            .collect();
        if spent.is_empty() {
            return Ok(episode);
        }
        let next = self.fresh_episode().await?;
        let worktree = self.workspace_root.join(next.as_str());
        let prompt = format!(
            "Spent in episode {episode}: {}. Spend is counted per episode, so a new session for {episode} would not \
             help.\nMint a session for a new episode {next} ({}) with worktree {} and write it to {file} in place of \
             the current one? [y/N] ",
            spent.join(", "),
            self.grants_shown(),
            worktree.display()
        );
        match confirm(prompt).await {
            Ok(()) => {
                self.worktree(&next, done)?;
                self.mint(&next).await?;
                step(
                    "the files of the previous episode stay where they were",
                    &self.workspace_root.join(episode.as_str()).display().to_string(),
                );
                Ok(next)
            }
            Err(refusal) => {
                eprintln!(
                    "world-core up: {refusal}: no session was minted and {file} still holds episode {episode}'s \
                     session, which is served as it is: its calls of {} are denied. To go on, run world-core up again \
                     and answer y, or mint one yourself: world-core session mint --store {} --episode {next} --preset \
                     se-tools --out NEW-FILE",
                    left.iter().filter(spent_out).map(|g| g.effect.as_str()).collect::<Vec<_>>().join(", "),
                    shell_word(&self.store_path.display().to_string()),
                );
                Ok(episode)
            }
        }
    }

    /// Each grant with what `episode` has spent of it (the ledger `/v1/session` shows).
    async fn grants_left(&self, episode: &Episode, grants: &[Grant]) -> Result<Vec<GrantLeft>, Failed> {
        let spend = self.store.effect_spend(episode.as_str()).await.map_err(Failed::fatal)?;
        Ok(grants
            .iter()
            .zip(world_model::budget::seed_grants(grants, &spend))
            .map(|(grant, seeded)| GrantLeft {
                effect: grant.effect.clone(),
                budget: grant.budget,
                spent: world_model::budget::spent_on(grant, &spend),
                left: seeded.budget,
            })
            .collect())
    }

    /// The first of `demo`, `demo-2`, `demo-3`, … that has spent nothing yet.
    async fn fresh_episode(&self) -> Result<Episode, Failed> {
        for n in 1..=MAX_EPISODES {
            let name = if n == 1 { EPISODE.to_owned() } else { format!("{EPISODE}-{n}") };
            let episode = Episode::parse(&name).map_err(Failed::fatal)?;
            if self.store.effect_spend(episode.as_str()).await.map_err(Failed::fatal)?.is_empty() {
                return Ok(episode);
            }
        }
        Err(Failed::refused(format!(
            "episodes {EPISODE} to {EPISODE}-{MAX_EPISODES} have all spent budget: mint a session for another \
             episode with world-core session mint --store {} --episode NAME --preset se-tools",
            shell_word(&self.store_path.display().to_string())
        )))
    }

    /// The episode's worktree, made with the sample program when it is new.
    fn worktree(&self, episode: &Episode, done: &mut Vec<String>) -> Result<PathBuf, Failed> {
        let worktree = self.workspace_root.join(episode.as_str());
        std::fs::create_dir_all(&worktree)
            .map_err(|e| Failed::fatal(format!("cannot create {}: {e}", worktree.display())))?;
        let sample = worktree.join(SAMPLE_NAME);
        if !sample.exists() {
            std::fs::write(&sample, SAMPLE).map_err(Failed::fatal)?;
            step("wrote a sample program", &sample.display().to_string());
            done.push(format!("wrote {}", sample.display()));
        }
        Ok(worktree)
    }

    fn grants(&self) -> Result<Vec<Grant>, Failed> {
        let mut grants: Vec<Grant> =
            DEMO_GRANTS.iter().map(|g| Grant::parse_cli(g, 0)).collect::<Result<_, _>>().map_err(Failed::fatal)?;
        grants.extend(world_model::preset_grants("se-tools", self.budget, 0).unwrap_or_default());
        Ok(grants)
    }

    fn grants_shown(&self) -> String {
        format!("{} and the se-tools preset, {} calls each, expiry +{DEMO_TTL}s", DEMO_GRANTS.join(" "), self.budget)
    }

    /// Mints a session for `episode` and puts it in the session file at mode 0600, in place of
    /// any there: written to a new file first, then renamed over it, so the file always holds
    /// one whole credential.
    async fn mint(&self, episode: &Episode) -> Outcome {
        let minted = session::mint(self.store, episode, &self.grants()?, DEMO_TTL, now_unix(), session::random_bytes())
            .await
            .map_err(Failed::fatal)?;
        let file = &self.session_file;
        let fresh = file.with_extension("new");
        let written = (|| {
            let _ = std::fs::remove_file(&fresh);
            let mut out = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&fresh)?;
            std::io::Write::write_all(&mut out, format!("{}\n", minted.token).as_bytes())?;
            out.sync_all()?;
            std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o600))?;
            std::fs::rename(&fresh, file)
        })();
        if let Err(error) = written {
            // The credential reached nobody: take the session back.
            let _ = self.store.delete_session(&minted.credential_id).await;
            return Err(Failed::fatal(format!(
                "cannot write {}: {error}; the minted session was revoked",
                file.display()
            )));
        }
        step(
            &format!("minted a session for episode {episode}"),
            &format!("credential_id={} in {}", minted.credential_id, file.display()),
        );
        Ok(())
    }
}

/// Asks `prompt` at the terminal (y/N); `Err` says why nothing was minted.
async fn confirm(prompt: String) -> Result<(), String> {
    let answer = tokio::task::spawn_blocking(move || attended::confirm_yes("session mint", &prompt)).await;
    match answer {
        Ok(Ok(())) => Ok(()),
        Ok(Err(attended::AttendedError::Declined { .. })) => Err("the mint was not confirmed".to_owned()),
        Ok(Err(refusal)) => Err(refusal.to_string()),
        Err(error) => Err(format!("the mint prompt ended abnormally: {error}")),
    }
}

/// Binds `address`; one line naming it when it is taken.
async fn listen(address: SocketAddr, what: &str, flag: &str) -> Result<TcpListener, Failed> {
    TcpListener::bind(address).await.map_err(|e| {
        let cause = if e.kind() == std::io::ErrorKind::AddrInUse { "it is already in use".to_owned() } else { e.to_string() };
        Failed::refused(format!(
            "cannot listen on {address} ({what}): {cause}; stop what listens there or choose another address with {flag}"
        ))
    })
}

async fn edge_startup_url(edge: &mut tokio::process::Child, address: SocketAddr) -> Result<String, Failed> {
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
        _ => Err(Failed::fatal(format!("the edge did not start listening on {address}; its own message is above"))),
    }
}

/// `text` as one shell word: as it is when it holds only characters no shell treats
/// specially, single-quoted otherwise.
fn shell_word(text: &str) -> String {
    let plain = !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,=".contains(&b));
    if plain { text.to_owned() } else { format!("'{}'", text.replace('\'', r"'\''")) }
}

/// The `.mcp.json` `up` prints, `"URL"` standing for the edge's MCP URL. Written out rather
/// than serialized so the keys keep the order people read them in.
const MCP_JSON: &str = r#"{
  "mcpServers": {
    "world": {
      "type": "http",
      "url": "URL",
      "headers": {
        "Authorization": "Bearer ${WORLD_SESSION}"
      }
    }
  }
}"#;

/// The client configurations, each ready to paste: Claude Code's command (the shell reads
/// the session file when it runs), and a `.mcp.json` whose header names `${WORLD_SESSION}`,
/// which the client expands from the environment the export line sets.
fn print_connection(edge_url: &str, session_file: &Path, episode: &Episode, worktree: &Path) {
    let mcp = format!("{edge_url}/mcp/");
    let session = std::fs::canonicalize(session_file).unwrap_or_else(|_| session_file.to_path_buf());
    let worktree = std::fs::canonicalize(worktree).unwrap_or_else(|_| worktree.to_path_buf());
    let read_session = format!("$(cat {})", shell_word(&session.display().to_string()));
    println!("world is up.");
    println!("  MCP URL:   {mcp}");
    println!("  A2A URL:   {edge_url}/a2a/");
    println!("  explorer:  {edge_url}/ui/ (paste the session credential)");
    println!("  session:   {} (episode {episode}; the bearer credential, keep it private)", session.display());
    println!();
    println!("Claude Code: run this in a shell");
    println!("  claude mcp add --transport http world {mcp} --header \"Authorization: Bearer {read_session}\"");
    println!();
    println!(
        "Or a .mcp.json (Claude Code reads the one in its project directory). In the shell that starts the client:"
    );
    println!("  export WORLD_SESSION=\"{read_session}\"");
    println!("and in .mcp.json:");
    let url = serde_json::Value::from(mcp.as_str()).to_string();
    println!("{}", MCP_JSON.replace("\"URL\"", &url));
    println!();
    println!("Try this (the agent's worktree is {}/):", worktree.display());
    println!("  1. list the tools (tools/list): ailang-read, ailang-write, ailang-edit, ailang-check, ailang-run, …");
    println!("  2. read the sample: ailang-read {{\"path\": \"{SAMPLE_NAME}\"}}");
    println!("  3. check it:        ailang-check {{\"path\": \"{SAMPLE_NAME}\"}}");
    println!("Ctrl-C stops the core and the edge.");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_one_shell_word() {
        let table = [
            ("/home/me/.world/session", "/home/me/.world/session"),
            ("/tmp/my dir/session", "'/tmp/my dir/session'"),
            ("/tmp/it's/session", r"'/tmp/it'\''s/session'"),
            ("/tmp/$HOME/`x`", "'/tmp/$HOME/`x`'"),
            ("", "''"),
        ];
        for (path, want) in table {
            assert_eq!(shell_word(path), want, "{path}");
        }
    }

    #[test]
    fn the_printed_mcp_json_is_the_configuration_with_the_url_in_place() {
        let url = serde_json::Value::from("http://127.0.0.1:7644/mcp/").to_string();
        let config: serde_json::Value = serde_json::from_str(&MCP_JSON.replace("\"URL\"", &url)).unwrap();
        assert_eq!(
            config,
            serde_json::json!({"mcpServers": {"world": {
                "type": "http",
                "url": "http://127.0.0.1:7644/mcp/",
                "headers": {"Authorization": "Bearer ${WORLD_SESSION}"},
            }}})
        );
    }
}
