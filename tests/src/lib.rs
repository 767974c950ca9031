//! Harness for the end-to-end tests: real `world-core` and `world-edge`
//! processes on free loopback ports over a temporary store, attended verbs
//! driven through a pseudo-terminal, the requests clients send them (MCP,
//! A2A, gRPC) and the Python clients in `tests/python`.
//!
//! The binaries are the workspace's own build (`cargo build --workspace
//! --bins`), found next to the test executable.

pub mod otlp;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a process may take to print its startup line.
const STARTUP: Duration = Duration::from_secs(30);

/// `target/<profile>/<name>`, next to the test executable's `deps/` folder.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(Path::parent).expect("target profile directory");
    let path = dir.join(name);
    assert!(path.is_file(), "{} is missing: build the binaries first (cargo build --workspace --bins)", path.display());
    path
}

/// A child process killed (whole process group) when dropped.
pub struct Process {
    child: Child,
    pub stderr_log: PathBuf,
}

impl Process {
    /// Starts `command` in its own process group, waits for a stdout line
    /// starting with `ready_prefix` and returns the rest of that line.
    pub fn start(mut command: Command, ready_prefix: &str, log_dir: &Path, name: &str) -> (Self, String) {
        let stderr_log = log_dir.join(format!("{name}.stderr"));
        let stderr = std::fs::File::create(&stderr_log).expect("stderr log file");
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(stderr).process_group(0);
        // A test or benchmark that is killed itself (a timeout, ^C) runs no destructor: the
        // kernel then ends its servers with it. The signal follows the thread that started
        // the child, and every caller starts its servers from one that lives as long as they do.
        let parent = std::process::id();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died before the signal was asked for.
                if libc::getppid() as u32 != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let mut child = command.spawn().unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let received = lines_of(stdout);
        let process = Self { child, stderr_log };
        let deadline = Instant::now() + STARTUP;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match received.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(ready_prefix) {
                        return (process, rest.trim().to_owned());
                    }
                }
                Err(_) => panic!("{name} did not start; its stderr:\n{}", process.stderr()),
            }
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_log).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid fits i32")
    }

    /// Kills the whole process group (SIGKILL, as a crash would) and reaps the child.
    pub fn kill(&mut self) -> std::process::ExitStatus {
        // SAFETY: the child leads its own process group; kill the whole group.
        unsafe { libc::kill(-self.pid(), libc::SIGKILL) };
        self.child.wait().expect("wait for child")
    }

    /// How the process exited, if it does within `within`.
    pub fn wait_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for child") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGTERM and waits for a graceful exit.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        // SAFETY: signalling our own child's process id.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        let status = self.child.wait().expect("wait for child");
        std::mem::forget(self);
        status
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // SAFETY: the child leads its own process group; kill the whole group.
        unsafe { libc::kill(-self.pid(), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// A core and an edge serving one temporary SQLite store.
pub struct World {
    pub dir: tempfile::TempDir,
    pub store: PathBuf,
    pub core: Process,
    pub core_addr: String,
    /// `None` for a core-only world (internal gRPC callers).
    pub edge: Option<Process>,
    pub edge_url: String,
}

impl World {
    /// Starts a core (on a fresh store) and an edge in front of it.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = dir.path().join("world.db");
        let (core, core_addr) = start_core(&store, dir.path(), &[]);
        let (edge, edge_url) = start_edge(&[&core_addr], dir.path(), &[]);
        Self { dir, store, core, core_addr, edge: Some(edge), edge_url }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.edge_url)
    }

    /// Stops the edge, then the core, each gracefully so that what they still batch (spans)
    /// is sent; returns the core's and the edge's whole logs.
    pub fn stop(self) -> (String, String) {
        let edge = self.edge.expect("an edge");
        let (core_log, edge_log) = (self.core.stderr_log.clone(), edge.stderr_log.clone());
        assert!(edge.terminate().success(), "the edge stops gracefully");
        assert!(self.core.terminate().success(), "the core stops gracefully");
        let read = |log: PathBuf| std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        (read(core_log), read(edge_log))
    }

    /// Mints a session through the attended prompt, answering `y`.
    pub fn mint(&self, episode: &str, grants: &[&str], ttl: i64) -> String {
        mint(&self.store, episode, grants, ttl)
    }

    /// [`World::mint`]s a session that expires `ttl` seconds from now, for a test that uses it
    /// both while it lives and once it has ended; returns it and its [`Expiry`].
    pub fn mint_expiring(&self, episode: &str, grants: &[&str], ttl: u32) -> (String, Expiry) {
        let token = self.mint(episode, grants, i64::from(ttl));
        // An expiry is whole seconds, so the session has surely ended one second after it.
        (token, Expiry(Instant::now() + Duration::from_secs(u64::from(ttl) + 1)))
    }

    /// How many log entries the edge's `GET /v1/log` shows (at most one page).
    pub async fn log_len(&self, token: &str) -> usize {
        let response = http()
            .get(self.url("/v1/log?from=0&limit=500"))
            .header("Authorization", format!("Bearer {token}"))
            .send()
            .await
            .expect("GET /v1/log");
        assert_eq!(response.status(), reqwest::StatusCode::OK);
        let page: serde_json::Value = response.json().await.expect("a JSON log page");
        page["items"].as_array().map(Vec::len).expect("a log page")
    }

    /// Stops this world's core and serves its store again on the same address (so its edges
    /// reconnect) with `program` (a `world-core` build), `args` and `env`.
    pub fn restart_core(&mut self, program: &Path, args: &[&str], env: &[(&str, &str)]) {
        let logs = self.dir.path().join(format!("core-{}", self.core.pid()));
        std::fs::create_dir_all(&logs).expect("core log folder");
        self.core.kill();
        let (core, addr) = start_core_at(program, &self.core_addr, &self.store, &logs, args, env);
        assert_eq!(addr, self.core_addr);
        self.core = core;
    }

    /// Publishes `manifest` (`count` transitions) as a new registry revision: the core stops,
    /// since the registry has a single writer, and serves again with the interpreter on the
    /// same address, its edges untouched.
    pub fn republish(&mut self, manifest: &Path, count: usize) {
        let logs = self.dir.path().join(format!("core-{}", self.core.pid()));
        std::fs::create_dir_all(&logs).expect("core log folder");
        self.core.kill();
        publish(&self.store, manifest, count);
        let serve = serve_args(&bin("ailang"), None);
        let serve: Vec<&str> = serve.iter().map(String::as_str).collect();
        let (core, addr) = start_core_at(&bin("world-core"), &self.core_addr, &self.store, &logs, &serve, &[]);
        assert_eq!(addr, self.core_addr);
        self.core = core;
    }

    /// Republishes `manifest` (`count` transitions) with transition `id` moved to access scope
    /// `scope`, hiding it from sessions granted only its old scope.
    pub fn republish_rescoped(&mut self, manifest: &Path, count: usize, id: &str, scope: &str) {
        let mut entries: Vec<serde_json::Value> =
            serde_json::from_slice(&std::fs::read(manifest).expect("manifest")).expect("a JSON manifest");
        let entry = entries.iter_mut().find(|t| t["id"] == id).expect("the transition is in the manifest");
        entry["access"]["scope"] = serde_json::json!(scope);
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("transitions.json");
        std::fs::write(&path, serde_json::to_vec(&entries).expect("manifest bytes")).expect("write manifest");
        self.republish(&path, count);
    }

    /// A `GET` of `path` on the edge with `token`'s bearer credential, read as JSON.
    pub async fn get_json(&self, token: &str, path: &str) -> serde_json::Value {
        get_json(&self.url(path), token).await
    }

    /// One A2A request through the edge: its JSON-RPC answer, which comes with a 200.
    pub async fn a2a(&self, token: &str, body: &serde_json::Value) -> serde_json::Value {
        let response =
            a2a_post(&http(), &self.url("/a2a/"), token).body(body.to_string()).send().await.expect("POST /a2a/");
        assert_eq!(response.status(), reqwest::StatusCode::OK, "POST /a2a/ of {body}");
        response.json().await.expect("a JSON-RPC answer")
    }

    /// One MCP `tools/call` through the edge: the JSON-RPC object of its answer (the SSE
    /// event's data, or the whole-POST envelope).
    pub async fn mcp_call(&self, token: &str, tool: &str, arguments: serde_json::Value) -> serde_json::Value {
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}
        });
        let text = mcp_post(&http(), &self.url("/mcp/"), token)
            .body(body.to_string())
            .send()
            .await
            .expect("tools/call")
            .text()
            .await
            .expect("the answer's body");
        serde_json::from_str(mcp_answer(&text)).expect("a JSON-RPC object")
    }

    /// Asserts how many admissions and invocations the edge has sent to the core so far.
    pub async fn assert_core_calls(&self, admit: u64, invoke: u64) {
        let metrics = http().get(self.url("/metrics")).send().await.expect("GET /metrics").text().await.expect("body");
        for (rpc, want) in [("admit", admit), ("invoke", invoke)] {
            let prefix = format!("world_edge_core_calls_total{{rpc=\"{rpc}\"}} ");
            let sent = metrics.lines().find_map(|line| line.strip_prefix(&prefix)).map_or(0, |n| n.parse().unwrap());
            assert_eq!(sent, want, "{rpc} calls in {metrics}");
        }
    }

    /// Runs a `world-core` verb against this world's store.
    pub fn core_verb(&self, args: &[&str]) -> Output {
        let mut command = Command::new(bin("world-core"));
        command.args(args).arg("--store").arg(&self.store).env_remove("CI");
        command.output().expect("run world-core")
    }
}

/// When a session from [`World::mint_expiring`] has surely ended.
pub struct Expiry(Instant);

impl Expiry {
    /// Sleeps until the session has ended.
    pub async fn pass(&self) {
        tokio::time::sleep(self.0.saturating_duration_since(Instant::now())).await;
    }
}

/// The echo transition's manifest, as `packages/examples` ships it.
pub fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packages/examples")
}

impl World {
    /// A world serving the echo transition: the store is bootstrapped by a
    /// first serve with the interpreter, the examples manifest is published
    /// through the attended prompt, genesis is committed, then a core with
    /// the interpreter and an edge start.
    pub fn with_echo() -> Self {
        Self::with_echo_env(&[])
    }

    /// Like [`World::with_echo`], with `env` added to the serving core's and the edge's
    /// environment.
    pub fn with_echo_env(env: &[(&str, &str)]) -> Self {
        let mut world = Self::echo_core_env(env);
        world.attach_edge(&[], env);
        world
    }

    /// Puts an edge started with `edge_args` and `env` in front of a core-only world's core.
    pub fn attach_edge(&mut self, edge_args: &[&str], env: &[(&str, &str)]) {
        assert!(self.edge.is_none(), "the world has an edge already");
        let (edge, edge_url) = start_edge_with_env(&[&self.core_addr], self.dir.path(), edge_args, env);
        self.edge = Some(edge);
        self.edge_url = edge_url;
    }

    /// Like [`World::with_echo`], without an edge.
    pub fn echo_core() -> Self {
        Self::echo_core_env(&[])
    }

    fn echo_core_env(env: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = dir.path().join("world.db");
        Self::echo_core_on(dir, store, None, &[], env)
    }

    /// An echo world on `store` (a SQLite path or a PostgreSQL URL); a
    /// PostgreSQL store keeps its archives in `artifacts`.
    /// `extra` are further `serve` flags (limits, say) for the serving core.
    /// `env` is added to the serving core's environment.
    pub fn echo_core_on(
        dir: tempfile::TempDir,
        store: PathBuf,
        artifacts: Option<&Path>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let serve_args = bootstrap_store(&store, dir.path(), &examples_dir().join("transitions.json"), 1, artifacts);
        let mut serve_args: Vec<&str> = serve_args.iter().map(String::as_str).collect();
        serve_args.extend_from_slice(extra);
        let (core, core_addr) = start_core_with_env(&store, dir.path(), &serve_args, env);
        Self { dir, store, core, core_addr, edge: None, edge_url: String::new() }
    }
}

/// `tests/fixtures/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

/// The invoke fixture: the echo, the test programs (spin, divide, …) and the transitions a
/// session must not see (another scope, a name too long for MCP).
pub fn invoke_fixture() -> PathBuf {
    fixture("invoke/transitions.json")
}

/// How many transitions the invoke fixture publishes.
pub const INVOKE_TRANSITIONS: usize = 10;

/// The MCP tools a `world.apply=world:…` session lists over the invoke fixture, in order:
/// neither the transition under another scope nor the one whose name would be too long.
pub const INVOKE_TOOLS: [&str; 8] = [
    "tests_darray",
    "tests_ddivide",
    "tests_dintmain",
    "tests_dnamed",
    "tests_dnomain",
    "tests_dspin",
    "tests_duntyped_uschema",
    "tools_decho",
];

/// How [`World::published`] sets a world up.
#[derive(Clone, Copy, Debug)]
pub struct Setup<'a> {
    /// Commit genesis before serving.
    pub genesis: bool,
    /// Serve with the interpreter (without it the core has no coordinator).
    pub interpreter: bool,
    /// Extra `world-edge` flags.
    pub edge_args: &'a [&'a str],
    /// Extra `world-core serve` flags.
    pub core_args: &'a [&'a str],
    /// Added to the serving core's and the edge's environment.
    pub env: &'a [(&'a str, &'a str)],
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Setup { genesis: true, interpreter: true, edge_args: &[], core_args: &[], env: &[] }
    }
}

impl World {
    /// A world serving the invoke fixture (see [`invoke_fixture`]).
    pub fn invoke(setup: Setup) -> Self {
        Self::published(&invoke_fixture(), INVOKE_TRANSITIONS, setup)
    }

    /// A world serving the `count` transitions of `manifest` (published through the attended
    /// prompt after a bootstrap serve with the interpreter), set up as `setup` says.
    pub fn published(manifest: &Path, count: usize, setup: Setup) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = dir.path().join("world.db");
        let ailang = bin("ailang");
        let with_interpreter = serve_args(&ailang, None);
        let with_interpreter: Vec<&str> = with_interpreter.iter().map(String::as_str).collect();
        let (bootstrap, _) = start_core(&store, dir.path(), &with_interpreter);
        assert!(bootstrap.terminate().success(), "the bootstrap serve did not stop cleanly");
        publish(&store, manifest, count);
        if setup.genesis {
            commit_genesis(&store);
        }
        let mut serve: Vec<&str> = if setup.interpreter { with_interpreter.clone() } else { Vec::new() };
        serve.extend_from_slice(setup.core_args);
        let (core, core_addr) = start_core_with_env(&store, dir.path(), &serve, setup.env);
        let (edge, edge_url) = start_edge_with_env(&[&core_addr], dir.path(), setup.edge_args, setup.env);
        Self { dir, store, core, core_addr, edge: Some(edge), edge_url }
    }

    /// Another edge in front of this world's core, with its own flags; returns it and its URL.
    pub fn extra_edge(&self, edge_args: &[&str]) -> (Process, String) {
        static EXTRA: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        // Each edge logs to its own folder so no edge's stderr log replaces another's.
        let n = EXTRA.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let logs = self.dir.path().join(format!("edge-{n}"));
        std::fs::create_dir_all(&logs).expect("edge log folder");
        start_edge(&[&self.core_addr], &logs, edge_args)
    }
}

/// `serve` arguments pinning `ailang` (and naming the artifacts directory).
pub fn serve_args(ailang: &Path, artifacts: Option<&Path>) -> Vec<String> {
    let mut args = vec!["--ailang-bin".to_owned(), ailang.display().to_string()];
    if let Some(dir) = artifacts {
        args.extend(["--artifacts".to_owned(), dir.display().to_string()]);
    }
    args
}

/// Makes `store` ready to serve `count` transitions of `manifest`: a first serve with the
/// interpreter creates it and stops, the manifest is published (its archives in `artifacts`,
/// which a PostgreSQL store needs) and genesis is committed. Returns the `serve` arguments that
/// pin the interpreter and name `artifacts`.
pub fn bootstrap_store(
    store: &Path,
    log_dir: &Path,
    manifest: &Path,
    count: usize,
    artifacts: Option<&Path>,
) -> Vec<String> {
    let serve = serve_args(&bin("ailang"), artifacts);
    let args: Vec<&str> = serve.iter().map(String::as_str).collect();
    let (bootstrap, _) = start_core(store, log_dir, &args);
    assert!(bootstrap.terminate().success(), "the bootstrap serve did not stop cleanly");
    publish_with(store, manifest, count, artifacts);
    commit_genesis(store);
    serve
}

/// `world-core genesis` on `store`.
pub fn commit_genesis(store: &Path) {
    let genesis = Command::new(bin("world-core")).args(["genesis", "--store"]).arg(store).output().expect("genesis");
    assert!(genesis.status.success(), "genesis: {}", String::from_utf8_lossy(&genesis.stderr));
}

/// `world-publish transitions` from the repository root, typing the phrase.
pub fn publish(store: &Path, manifest: &Path, count: usize) {
    publish_with(store, manifest, count, None)
}

pub fn publish_with(store: &Path, manifest: &Path, count: usize, artifacts: Option<&Path>) {
    let mut command = Command::new(bin("world-publish"));
    command
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args(["transitions", "--store"])
        .arg(store)
        .arg("--manifest")
        .arg(manifest)
        .arg("--ailang-bin")
        .arg(bin("ailang"));
    if let Some(dir) = artifacts {
        command.arg("--artifacts").arg(dir);
    }
    let shown = world_core::store::redact_url_password(&store.display().to_string());
    let phrase = format!("publish {count} transitions to {shown}\n");
    let run = run_attended(command, &phrase);
    assert!(run.status.success(), "publish failed: {}\n{}", run.stdout, run.stderr);
}

/// Starts `world-core serve` on a free loopback port; returns it and `host:port`.
pub fn start_core(store: &Path, log_dir: &Path, extra: &[&str]) -> (Process, String) {
    start_core_with_env(store, log_dir, extra, &[])
}

pub fn start_core_with_env(store: &Path, log_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> (Process, String) {
    start_core_at(&bin("world-core"), &format!("{}:0", loopback_address()), store, log_dir, extra, env)
}

/// A free `IP:PORT` on a loopback address of its own, for a server told where to listen (a
/// core's metrics): no other test binds or connects from that address meanwhile.
pub fn free_listen_address() -> String {
    let ip = loopback_address();
    let probe = std::net::TcpListener::bind((ip, 0)).expect("bind a loopback port");
    format!("{ip}:{}", probe.local_addr().expect("a bound address").port())
}

/// A loopback address of its own for a core (127.0.0.0/8 is all loopback): a core restarted
/// on its address finds its port free, since no other test's connection or listener on
/// 127.0.0.1 can have taken it meanwhile.
fn loopback_address() -> std::net::Ipv4Addr {
    let [a, b, c, ..] = world_core::session::random_bytes();
    std::net::Ipv4Addr::new(127, a, b, c.clamp(2, 254))
}

/// Starts `program serve` (a `world-core` build) listening on `listen`.
pub fn start_core_at(
    program: &Path,
    listen: &str,
    store: &Path,
    log_dir: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Process, String) {
    let mut command = Command::new(program);
    command.envs(env.iter().copied());
    command.args(["serve", "--listen", listen, "--store"]).arg(store).args(extra);
    command.env_remove("WORLD_AILANG_BIN");
    let (process, url) = Process::start(command, "world-core listening on grpc://", log_dir, "core");
    (process, url)
}

/// Starts `world-edge` against the given cores; returns it and its base URL.
pub fn start_edge(cores: &[&str], log_dir: &Path, extra: &[&str]) -> (Process, String) {
    start_edge_with_env(cores, log_dir, extra, &[])
}

pub fn start_edge_with_env(cores: &[&str], log_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> (Process, String) {
    let mut command = Command::new(bin("world-edge"));
    command.envs(env.iter().copied());
    command.args(["--listen", "127.0.0.1:0"]);
    for core in cores {
        command.arg("--core").arg(format!("http://{core}"));
    }
    command.args(extra);
    let (process, addr) = Process::start(command, "world-edge listening on http://", log_dir, "edge");
    (process, format!("http://{addr}"))
}

/// `world-core session mint` answered `y` at its terminal prompt; returns the credential.
pub fn mint(store: &Path, episode: &str, grants: &[&str], ttl: i64) -> String {
    let mut command = Command::new(bin("world-core"));
    command.args(["session", "mint", "--episode", episode, "--ttl", &ttl.to_string(), "--store"]).arg(store);
    for grant in grants {
        command.args(["--grant", grant]);
    }
    let run = run_attended(command, "y\n");
    assert!(run.status.success(), "mint failed: {}\nterminal: {}", run.stderr, run.terminal);
    let token = run.stdout.trim().to_owned();
    assert_eq!(token.len(), 64, "mint prints the credential alone: {:?}", run.stdout);
    token
}

/// What an attended command did.
pub struct AttendedRun {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// Everything written to the terminal (the prompt).
    pub terminal: String,
}

/// Runs `command` with a new pseudo-terminal as its controlling terminal
/// (stdin is not the terminal), types `answer` at it, and collects the
/// output. `CI` is removed from the child's environment only.
pub fn run_attended(command: Command, answer: &str) -> AttendedRun {
    let (child, terminal) = spawn_attended(command, answer);
    let output = child.wait_with_output().expect("wait for attended command");
    let terminal = terminal.join().unwrap_or_default();
    AttendedRun {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        terminal,
    }
}

/// Runs `command` in a new session with no controlling terminal (as under
/// setsid, cron or an agent harness), `CI` removed.
pub fn run_without_terminal(mut command: Command) -> Output {
    command.env_remove("CI");
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    command.output().expect("run without a terminal")
}

/// Starts `command` (stdout and stderr piped) with a new pseudo-terminal as
/// its controlling terminal, types `answer` at it, and returns the child and
/// a thread collecting what the child writes to the terminal.
pub fn spawn_attended(mut command: Command, answer: &str) -> (Child, std::thread::JoinHandle<String>) {
    let (master, slave) = open_pty();
    let slave_fd = slave.as_raw_fd();
    command.env_remove("CI").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::ioctl(slave_fd, libc::TIOCSCTTY as _, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn().expect("spawn attended command");
    drop(slave);
    let mut terminal = std::fs::File::from(master);
    terminal.write_all(answer.as_bytes()).expect("type at the terminal");
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once the child closes its side ends the read.
        while let Ok(n) = terminal.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    (child, reader)
}

fn open_pty() -> (OwnedFd, OwnedFd) {
    let mut master = 0;
    let mut slave = 0;
    // SAFETY: openpty writes two new descriptors we then own.
    let rc =
        unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just returned by openpty.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// An environment variable `tests/run.sh` sets; `what` says what it names, for one set by hand.
pub fn required_env(name: &str, what: &str) -> String {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is not set: run the tests with tests/run.sh, or set it to {what}"))
}

/// The tests' python (`WORLD_TEST_PYTHON`), which has `tests/python/requirements.txt`: the
/// MCP and A2A SDKs, FastMCP and Playwright.
pub fn test_python() -> String {
    required_env("WORLD_TEST_PYTHON", "a python with tests/python/requirements.txt installed")
}

/// `tests/python/<script>` as a command of the tests' python.
pub fn python_script(script: &str) -> Command {
    let mut command = Command::new(test_python());
    command.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("python").join(script));
    command
}

/// Runs the Python client `tests/python/<script>` with `args` to its end; the one JSON object
/// it prints.
pub fn run_python_client(script: &str, args: &[&str]) -> serde_json::Value {
    let run = python_script(script).args(args).output().unwrap_or_else(|e| panic!("run {script}: {e}"));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{script} failed: {}\n{stdout}", String::from_utf8_lossy(&run.stderr));
    serde_json::from_str(stdout.trim()).expect("the client prints one JSON object")
}

/// A process's `/proc/<pid>/status` size `field` (`VmRSS`, `VmHWM`, …) in KiB; 0 when it
/// cannot be read.
pub fn status_kib(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The lines a child prints on `stdout`, as they come (read on a thread of their own).
pub fn lines_of(stdout: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    received
}

/// A reqwest client that does not follow redirects.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client")
}

/// A `GET` of `url` with `token`'s bearer credential, read as JSON.
pub async fn get_json(url: &str, token: &str) -> serde_json::Value {
    http()
        .get(url)
        .header("Authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .json()
        .await
        .expect("a JSON answer")
}

/// A POST to an MCP endpoint as a Streamable HTTP client sends it: with `token` as its bearer
/// credential, a JSON body, and an `Accept` of both JSON and SSE.
pub fn mcp_post(client: &reqwest::Client, url: &str, token: &str) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("Authorization", format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
}

/// The JSON-RPC text of an MCP answer: its SSE event's data, or the whole body of a JSON reply.
pub fn mcp_answer(text: &str) -> &str {
    text.lines().find_map(|line| line.strip_prefix("data: ")).unwrap_or(text)
}

/// How one JSON-RPC call through an edge ended, as the tests that break things under it judge
/// it: a result or a clean refusal, never a broken answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The JSON-RPC result.
    Result(serde_json::Value),
    /// A JSON-RPC error: a clean refusal (a core was down, say).
    Refused(i64),
    /// A transport failure, a status other than 200, a cut reply or a body that is not one
    /// whole JSON-RPC answer.
    Broken(String),
}

/// `body` POSTed to an edge's `/mcp/` or `/a2a/` endpoint `url` with MCP's headers (A2A ignores
/// `Accept`), and how the call ended.
pub async fn json_rpc(url: &str, token: &str, body: &serde_json::Value) -> Answer {
    let response = match mcp_post(&http(), url, token).body(body.to_string()).send().await {
        Ok(response) => response,
        Err(error) => return Answer::Broken(format!("request: {error}")),
    };
    let status = response.status();
    let text = match response.text().await {
        Ok(text) => text,
        Err(error) => return Answer::Broken(format!("body: {error}")),
    };
    if status != reqwest::StatusCode::OK {
        return Answer::Broken(format!("HTTP {status}: {text}"));
    }
    match serde_json::from_str::<serde_json::Value>(mcp_answer(&text)) {
        Ok(answer) if answer.get("result").is_some() => Answer::Result(answer["result"].clone()),
        Ok(answer) => match answer["error"]["code"].as_i64() {
            Some(code) => Answer::Refused(code),
            None => Answer::Broken(text),
        },
        Err(_) => Answer::Broken(text),
    }
}

/// A POST to an A2A endpoint with `token` as its bearer credential and a JSON body.
pub fn a2a_post(client: &reqwest::Client, url: &str, token: &str) -> reqwest::RequestBuilder {
    client.post(url).header("Authorization", format!("Bearer {token}")).header("Content-Type", "application/json")
}

/// The seed's A2A `tasks/send` (JSON-RPC id 1) of task `task` to skill `skill`, its one part
/// carrying `data`.
pub fn tasks_send(task: &str, skill: &str, data: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"id":task,"metadata":{"skill_id":skill},
        "message":{"role":"user","parts":[{"type":"data","data":data}]}}})
}

/// `message` to the core with `token` as its bearer credential, as the edge sends a call.
pub fn authorized<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert("authorization", format!("Bearer {token}").parse().expect("a credential header"));
    request
}

/// An `Invoke` of `transition` as the A2A task `task` on `arguments`, with `token`'s credential:
/// what the edge sends the core for a `tasks/send`.
pub fn a2a_invoke(
    token: &str,
    transition: &str,
    task: &str,
    arguments: &[u8],
) -> tonic::Request<world_proto::v1::InvokeRequest> {
    let message = world_proto::v1::InvokeRequest {
        surface: "a2a".into(),
        transition_id: transition.into(),
        task_id: task.into(),
        arguments: arguments.to_vec(),
        ..Default::default()
    };
    authorized(message, token)
}

/// The core build with fault points; `tests/run.sh` builds it.
pub fn faults_core() -> PathBuf {
    let path = bin("world-core").with_file_name("world-core-faults");
    assert!(
        path.is_file(),
        "{} is missing: run tests/run.sh, or cargo build -p world-core --features fault-points --bin world-core-faults",
        path.display()
    );
    path
}

/// The arguments of the `fx.scripted_write` fixture: a plan of one `Workspace.Write` of
/// `path` in the episode's worktree.
pub fn scripted_write_args(path: &str) -> serde_json::Value {
    serde_json::json!({"plan":{"plan":"world/effect-plan/v1","finish":false,"result":null,"effects":[
        {"id":"e1","effect":"Workspace.Write","scope":"worktree","cost":1,
         "payload":{"op":"write","path":path,"content":"written"}}]}})
}

/// A new, empty database on the PostgreSQL server `WORLD_TEST_POSTGRES_URL` names; returns its URL.
pub async fn fresh_postgres_store() -> String {
    let admin = required_env("WORLD_TEST_POSTGRES_URL", "an admin URL of a server the tests may create databases on");
    fresh_postgres_database(&admin).await
}

/// A [`fresh_postgres_store`] and a temporary folder for what the cores serving it keep on
/// disk: their logs, and in `artifacts` the interpreter archives, which the database does not
/// hold.
pub struct PostgresStore {
    pub url: String,
    pub dir: tempfile::TempDir,
    pub artifacts: PathBuf,
}

impl PostgresStore {
    pub async fn fresh() -> PostgresStore {
        let url = fresh_postgres_store().await;
        let dir = tempfile::tempdir().expect("temp dir");
        let artifacts = dir.path().join("artifacts");
        PostgresStore { url, dir, artifacts }
    }
}

/// A new, empty database on the PostgreSQL server `admin` names; returns its URL.
pub async fn fresh_postgres_database(admin: &str) -> String {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut random = [0u8; 6];
    getrandom_fill(&mut random);
    let name = format!("world_e2e_{}", random.iter().map(|b| format!("{b:02x}")).collect::<String>());
    let mut conn = sqlx::AnyConnection::connect(admin).await.expect("connect to the PostgreSQL admin URL");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .expect("create database");
    let base = admin.rsplit_once('/').map(|(base, _)| base).expect("the admin URL names a database");
    format!("{base}/{name}")
}

fn getrandom_fill(bytes: &mut [u8]) {
    use std::io::Read;
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(bytes)).expect("/dev/urandom");
}
