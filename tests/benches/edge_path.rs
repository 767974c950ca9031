//! The first benchmark (run outside CI: `cargo bench -p world-tests --bench edge_path`).
//! Every figure is a ratio against a baseline measured in the same run on the
//! same machine, because these machines are noisy:
//!
//! * `tools/list` through edge → core vs a bare axum JSON-RPC echo, both at
//!   32 connections (target ≥ 0.25×);
//! * `tools/call` of the echo transition vs a loop spawning `ailang run`
//!   directly, both at 8 concurrent (target ≥ 0.5×);
//! * `tools/call` of an effectful transition (the test fixture planning one
//!   `Workspace.Read`: one interpreter run, the native handler, the effect
//!   journal and a larger commit) vs the same spawn loop, 8 concurrent over 8
//!   episodes, as an episode's effectful calls run one at a time (target
//!   ≥ 0.45×); then the same for the coding tool `ailang-read`, whose plan is a
//!   150-line module (reported, no target).
//!
//! An answer whose body is a JSON-RPC error counts as a failure, not a success.
//! Baseline and subject take turns, several rounds each, so a shift in the
//! machine's load falls on both; each round's ratio is printed and the median
//! is the result. Each loop is bounded in time; traffic stays on loopback.
//! The load generator, the core and the edge share the machine, so the core and
//! the edge each get a third of its CPUs (at least one) as async workers, as an
//! operator would size them on such a host; `TOKIO_WORKER_THREADS=N` overrides
//! that. `-- list`, `-- call` or `-- effect` runs one pair only (for profiling). Each pair
//! also reports the CPU time the core and the edge spent per answer, which
//! varies far less from run to run than throughput on a shared machine.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use world_core::capsule;
use world_tests::{Setup, World, bin, examples_dir};

/// Transitions in the effect fixtures' manifest.
const EFFECT_FIXTURES: usize = 5;

/// One measured loop.
const RUN: Duration = Duration::from_secs(3);
/// Turns of baseline and subject per pair.
const ROUNDS: usize = 3;

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
}

/// What one measured loop did.
struct Run {
    ok: u64,
    failed: u64,
    seconds: f64,
}

impl Run {
    fn rate(&self) -> f64 {
        self.ok as f64 / self.seconds
    }
}

/// Runs `concurrency` workers calling `once` until `RUN` elapses.
async fn measure<F, Fut>(concurrency: usize, once: F) -> Run
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let tally = Arc::new(Tally::default());
    let once = Arc::new(once);
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (tally, once) = (Arc::clone(&tally), Arc::clone(&once));
            tokio::spawn(async move {
                while started.elapsed() < RUN {
                    if once().await {
                        tally.ok.fetch_add(1, Ordering::Relaxed);
                    } else {
                        tally.failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        let _ = worker.await;
    }
    Run {
        ok: tally.ok.load(Ordering::Relaxed),
        failed: tally.failed.load(Ordering::Relaxed),
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// User and system CPU time a process has used so far, in microseconds.
fn cpu_micros(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) * 1e6 / per_second
}

/// The served processes whose CPU time a measured loop is charged with.
struct Processes {
    core: i32,
    edge: i32,
}

impl Processes {
    fn cpu(&self) -> (f64, f64) {
        (cpu_micros(self.core), cpu_micros(self.edge))
    }
}

/// Runs `baseline` and `subject` in turns, [`ROUNDS`] each, and prints one line for the pair:
/// the median of the rounds' ratios, each round's ratio, and the CPU the core and the edge
/// spent per subject answer over all rounds.
async fn compare<B, BF, S, SF>(
    label: &str,
    versus: &str,
    target: Option<f64>,
    processes: &Processes,
    baseline: B,
    subject: S,
) where
    B: Fn() -> BF,
    BF: std::future::Future<Output = Run>,
    S: Fn() -> SF,
    SF: std::future::Future<Output = Run>,
{
    let mut ratios = Vec::with_capacity(ROUNDS);
    let (mut answers, mut failures, mut core_cpu, mut edge_cpu) = (0, 0, 0.0, 0.0);
    let (mut subject_rate, mut baseline_rate) = (0.0, 0.0);
    for _ in 0..ROUNDS {
        let base = baseline().await;
        let (core, edge) = processes.cpu();
        let run = subject().await;
        let (core_after, edge_after) = processes.cpu();
        core_cpu += core_after - core;
        edge_cpu += edge_after - edge;
        answers += run.ok;
        failures += run.failed + base.failed;
        subject_rate += run.rate() / ROUNDS as f64;
        baseline_rate += base.rate() / ROUNDS as f64;
        ratios.push(run.rate() / base.rate());
    }
    let rounds: Vec<String> = ratios.iter().map(|ratio| format!("{ratio:.2}")).collect();
    ratios.sort_by(f64::total_cmp);
    let per_answer = |cpu: f64| cpu / answers.max(1) as f64;
    let target = target.map(|target| format!("target ≥ {target}×; ")).unwrap_or_default();
    println!(
        "{label}  edge→core {subject_rate:7.0}/s  {versus} {baseline_rate:7.0}/s  ratio {:.2}× ({target}\
         rounds {})  failures {failures}  CPU per answer: core {:.0} µs, edge {:.0} µs",
        ratios[ROUNDS / 2],
        rounds.join(" "),
        per_answer(core_cpu),
        per_answer(edge_cpu),
    );
}

/// A JSON-RPC success: an SSE `data:` line (or a JSON body) whose object has `result`.
fn is_success(body: &str) -> bool {
    let json = body.lines().find_map(|l| l.strip_prefix("data: ")).unwrap_or(body);
    serde_json::from_str::<serde_json::Value>(json).is_ok_and(|v| v.get("result").is_some() && v.get("error").is_none())
}

async fn bare_echo() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/rpc",
        axum::routing::post(|body: axum::body::Bytes| async move {
            let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            axum::Json(serde_json::json!({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": []}}))
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{address}/rpc")
}

/// Sends a prepared request; a success is a JSON-RPC result.
async fn succeeded(request: reqwest::RequestBuilder) -> bool {
    match request.send().await {
        Ok(response) => is_success(&response.text().await.unwrap_or_default()),
        Err(_) => false,
    }
}

/// `concurrency` workers posting `body` to the MCP endpoint with the session's credential.
async fn mcp_loop(client: &reqwest::Client, mcp: &str, token: &str, concurrency: usize, body: &'static str) -> Run {
    let (client, mcp, authorization) = (client.clone(), mcp.to_owned(), format!("Bearer {token}"));
    measure(concurrency, move || {
        let request = client
            .post(&mcp)
            .header("Authorization", &authorization)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .body(body);
        succeeded(request)
    })
    .await
}

fn main() {
    // The load generator keeps one worker per CPU whatever TOKIO_WORKER_THREADS says, so that
    // variable sizes only the served processes.
    let cpus = std::thread::available_parallelism().map_or(2, usize::from);
    let served = std::env::var("TOKIO_WORKER_THREADS").unwrap_or_else(|_| (cpus / 3).max(1).to_string());
    println!("async workers: load generator {cpus}, core {served}, edge {served}");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(cpus).enable_all().build().unwrap();
    runtime.block_on(run(&served));
}

async fn run(served_workers: &str) {
    // Capsule roots on a tmpfs, as the compose deployment has them: making and removing a
    // root per call is then cheap, the store stays on disk.
    let capsules = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
    let world = World::with_echo_env(&[("TMPDIR", capsules), ("TOKIO_WORKER_THREADS", served_workers)]);
    let token = world.mint("bench", &["world.apply=world:100000000"], 3600);
    let client = reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap();
    let mcp = world.url("/mcp/");

    let processes = Processes { core: world.core.pid(), edge: world.edge.as_ref().expect("an edge").pid() };

    let only = std::env::args().skip(1).find(|arg| !arg.starts_with('-'));
    let runs = |pair: &str| only.as_deref().is_none_or(|only| only == pair);
    if runs("list") {
        list_pair(&client, &mcp, &token, &processes).await;
    }
    if runs("call") {
        call_pair(&client, &mcp, &token, &processes).await;
    }
    if runs("effect") {
        drop(world);
        let fixture = Effectful {
            label: "Workspace.Read",
            manifest: world_tests::fixture("effects/transitions.json"),
            transitions: EFFECT_FIXTURES,
            tool: "fx_dread",
            target: Some(0.45),
        };
        effect_pair(&client, capsules, served_workers, fixture).await;
        let coding_tool = Effectful {
            label: "ailang-read",
            manifest: examples_dir().join("../se-tools/transitions.json"),
            transitions: 8,
            tool: "ailang-read",
            target: None,
        };
        effect_pair(&client, capsules, served_workers, coding_tool).await;
    }
}

/// The spawn loop every call pair is measured against: exactly the capsule's argv and
/// environment running the echo transition, no World around it.
fn spawn_loop(root: &std::path::Path) -> impl Future<Output = Run> + use<> {
    let ailang = bin("ailang");
    let root = root.to_path_buf();
    measure(8, move || {
        let mut command = tokio::process::Command::new(&ailang);
        command.args(capsule::ARGV).current_dir(&root).env_clear().envs(capsule::environment(&root));
        async move { command.output().await.is_ok_and(|o| o.status.success() && o.stdout == b"{\"echo\":{\"a\":1}}\n") }
    })
}

/// A capsule root staged with the echo transition and `{"a":1}`.
fn echo_root() -> tempfile::TempDir {
    let source = std::fs::read(examples_dir().join("echo.ail")).unwrap();
    let root = tempfile::tempdir().unwrap();
    capsule::stage_source(root.path(), &source).unwrap();
    std::fs::write(root.path().join(capsule::ARGS_FILE), r#""{\"a\":1}""#).unwrap();
    root
}

/// An effectful transition measured against the spawn loop.
struct Effectful<'a> {
    label: &'a str,
    manifest: std::path::PathBuf,
    transitions: usize,
    tool: &'a str,
    target: Option<f64>,
}

async fn effect_pair(client: &reqwest::Client, capsules: &str, served_workers: &str, subject: Effectful<'_>) {
    const EPISODES: usize = 8;
    let workspace = tempfile::tempdir().unwrap();
    for episode in 0..EPISODES {
        let worktree = workspace.path().join(format!("bench{episode}"));
        std::fs::create_dir(&worktree).unwrap();
        std::fs::write(worktree.join("hello.txt"), "hello, world\n").unwrap();
    }
    let root = workspace.path().display().to_string();
    let core_args = ["--workspace-root", root.as_str()];
    let env = [("TMPDIR", capsules), ("TOKIO_WORKER_THREADS", served_workers)];
    let world = World::published(
        &subject.manifest,
        subject.transitions,
        Setup { core_args: &core_args, env: &env, ..Setup::default() },
    );
    let tokens: Vec<String> = (0..EPISODES)
        .map(|episode| world.mint(&format!("bench{episode}"), &["Workspace.Read=worktree:100000000"], 3600))
        .collect();
    let processes = Processes { core: world.core.pid(), edge: world.edge.as_ref().expect("an edge").pid() };
    let echo = echo_root();
    let (mcp, tokens) = (world.url("/mcp/"), Arc::new(tokens));
    let body: &'static str = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"{}","arguments":{{"path":"hello.txt"}}}}}}"#,
        subject.tool
    )
    .leak();
    let call = || {
        let (client, mcp, tokens) = (client.clone(), mcp.clone(), Arc::clone(&tokens));
        let next = Arc::new(AtomicU64::new(0));
        measure(8, move || {
            let token = &tokens[next.fetch_add(1, Ordering::Relaxed) as usize % tokens.len()];
            let request = client
                .post(&mcp)
                .header("Authorization", format!("Bearer {token}"))
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .body(body);
            succeeded(request)
        })
    };
    compare(subject.label, "spawn loop", subject.target, &processes, || spawn_loop(echo.path()), call).await;
}

async fn list_pair(client: &reqwest::Client, mcp: &str, token: &str, processes: &Processes) {
    let echo = bare_echo().await;
    let baseline = || {
        let (client, echo) = (client.clone(), echo.clone());
        measure(32, move || {
            let request = client.post(&echo).body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
            succeeded(request)
        })
    };
    let subject = || mcp_loop(client, mcp, token, 32, r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
    compare("tools/list", "bare echo", Some(0.25), processes, baseline, subject).await;
}

async fn call_pair(client: &reqwest::Client, mcp: &str, token: &str, processes: &Processes) {
    let root = echo_root();
    let baseline = || spawn_loop(root.path());
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tools_decho","arguments":{"a":1}}}"#;
    let subject = || mcp_loop(client, mcp, token, 8, call);
    compare("tools/call", "spawn loop", Some(0.5), processes, baseline, subject).await;
}
