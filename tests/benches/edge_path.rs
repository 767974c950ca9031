//! The benchmark suite, run outside CI:
//!
//! ```sh
//! cargo build --release --workspace --bins
//! cargo bench -p world-tests --bench edge_path [-- PART...] [--readme]
//! ```
//!
//! Every figure is measured against a baseline in the same run on the same machine, because
//! these machines are noisy. The parts (all by default):
//!
//! * `list`: `tools/list` through edge → core vs a bare axum JSON-RPC echo and vs an axum →
//!   tonic echo hop (the transport a list must cross), 32 connections each;
//! * `call`: `tools/call` of the echo transition vs a loop spawning `ailang run` directly,
//!   8 concurrent each;
//! * `effect`: `tools/call` of an effectful transition (the test fixture planning one
//!   `Workspace.Read`) and of the coding tool `ailang-read` vs the same spawn loop, 8 concurrent
//!   over 8 episodes (an episode's effectful calls run one at a time, so one episode measures
//!   latency, not throughput); and `ailang-read`'s p50 from one episode, one client;
//! * `registry`: `tools/list` with 1,000 published transitions vs with 10;
//! * `latency`: `tools/call` latency (p50, p99, one client) with 1,000,000 log entries vs an
//!   empty log, on SQLite and (with `WORLD_TEST_POSTGRES_URL`) on PostgreSQL; the history is
//!   written through the store's own commit path first (`WORLD_BENCH_ENTRIES` overrides the
//!   count, for a quicker look);
//! * peak RSS of the core and the edge over the run.
//!
//! Each throughput part runs twice: with the core and the edge sized to a third of the CPUs
//! each (at least one async worker), as an operator sizes them beside a load generator, and
//! with the runtimes' default (one worker per CPU). A JSON-RPC error counts as a failure.
//! Baseline and subject take turns, three rounds each, so a shift in the machine's load falls
//! on both; the median round is the result, and each row also gives the CPU the core and the
//! edge spent per answer, which varies far less than throughput. `--readme` writes the table
//! into README.md between its benchmark markers. Traffic stays on loopback; every loop is
//! bounded in time.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use world_core::capsule;
use world_tests::{Setup, World, bin, examples_dir, fixture, mcp_post, status_kib};

/// Transitions in the effect fixtures' manifest.
const EFFECT_FIXTURES: usize = 5;
/// One measured loop.
const RUN: Duration = Duration::from_secs(3);
/// Turns of baseline and subject per pair.
const ROUNDS: usize = 3;
/// Calls per latency sample.
const LATENCY_CALLS: usize = 1_000;
const README_BEGIN: &str = "<!-- benchmark:begin -->";
const README_END: &str = "<!-- benchmark:end -->";

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

/// One line of the results table.
struct Row {
    measure: String,
    runtime: String,
    result: String,
    target: String,
    met: Option<bool>,
    /// The CPU spent per answer, where the row measured it.
    cpu: Option<Cpu>,
    detail: String,
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    /// Peak resident set of any core and any edge the run started, in KiB.
    core_peak_kib: u64,
    edge_peak_kib: u64,
}

impl Report {
    fn add(&mut self, row: Row) {
        let met = match row.met {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "",
        };
        println!("{} [{}]: {} (target {}) {met}  {}", row.measure, row.runtime, row.result, row.target, row.detail);
        self.rows.push(row);
    }

    /// Notes the peak RSS of a world's processes before it stops.
    fn peaks(&mut self, processes: &Processes) {
        self.core_peak_kib = self.core_peak_kib.max(status_kib(processes.core, "VmHWM"));
        self.edge_peak_kib = self.edge_peak_kib.max(status_kib(processes.edge, "VmHWM"));
    }

    fn table(&self) -> String {
        let mut table = String::from(
            "| measure | runtime | result | target | | CPU per answer: core + its interpreter runs, edge |\n| --- | --- | --- | --- | --- | --- |\n",
        );
        for row in &self.rows {
            let met = match row.met {
                Some(true) => "met",
                Some(false) => "**missed**",
                None => "",
            };
            let cpu = row.cpu.as_ref().map(Cpu::to_string).unwrap_or_default();
            table.push_str(&format!(
                "| {} | {} | {} | {} | {met} | {cpu} |\n",
                row.measure, row.runtime, row.result, row.target
            ));
        }
        table.push_str(&format!(
            "| peak RSS under load | both | core {:.0} MiB, edge {:.0} MiB | | | |\n",
            self.core_peak_kib as f64 / 1024.0,
            self.edge_peak_kib as f64 / 1024.0
        ));
        table
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

/// CPU time a process has used so far, in microseconds: its own (user and system), and
/// that of its children it has reaped.
fn cpu_micros(pid: i32) -> (f64, f64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime, stime, cutime and cstime are the
    // 12th to the 15th.
    let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ((ticks(11) + ticks(12)) * 1e6 / per_second, (ticks(13) + ticks(14)) * 1e6 / per_second)
}

/// The live children of a process (the core's fork server, say).
fn children(pid: i32) -> Vec<i32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    tasks
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| list.split_whitespace().filter_map(|child| child.parse().ok()).collect::<Vec<_>>())
        .collect()
}

/// CPU time so far, in µs: the core's own; its interpreter runs' (spawned runs it reaped,
/// and its fork server with the runs that reaped); the edge's.
#[derive(Clone, Copy, Default)]
struct Cpu {
    core: f64,
    runs: f64,
    edge: f64,
}

impl Cpu {
    fn since(self, before: Cpu) -> Cpu {
        Cpu { core: self.core - before.core, runs: self.runs - before.runs, edge: self.edge - before.edge }
    }

    fn add(self, more: Cpu) -> Cpu {
        Cpu { core: self.core + more.core, runs: self.runs + more.runs, edge: self.edge + more.edge }
    }

    fn per(self, answers: u64) -> Cpu {
        let n = answers.max(1) as f64;
        Cpu { core: self.core / n, runs: self.runs / n, edge: self.edge / n }
    }
}

impl std::fmt::Display for Cpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.0} µs + {:.0} µs, {:.0} µs", self.core, self.runs, self.edge)
    }
}

/// The served processes whose CPU time a measured loop is charged with.
struct Processes {
    core: i32,
    edge: i32,
}

impl Processes {
    fn of(world: &World) -> Processes {
        Processes { core: world.core.pid(), edge: world.edge.as_ref().expect("an edge").pid() }
    }

    fn cpu(&self) -> Cpu {
        let (core, reaped) = cpu_micros(self.core);
        let forked: f64 = children(self.core).into_iter().map(cpu_micros).map(|(own, runs)| own + runs).sum();
        Cpu { core, runs: reaped + forked, edge: cpu_micros(self.edge).0 }
    }
}

/// The outcome of [`compare`]: the median ratio of subject to baseline, and a description.
struct Compared {
    ratio: f64,
    detail: String,
    failures: u64,
    /// CPU per subject answer.
    cpu: Cpu,
}

/// Runs `baseline` and `subject` in turns, [`ROUNDS`] each.
async fn compare<B, BF, S, SF>(versus: &str, processes: &Processes, baseline: B, subject: S) -> Compared
where
    B: Fn() -> BF,
    BF: std::future::Future<Output = Run>,
    S: Fn() -> SF,
    SF: std::future::Future<Output = Run>,
{
    let mut ratios = Vec::with_capacity(ROUNDS);
    let (mut answers, mut failures, mut cpu) = (0, 0, Cpu::default());
    let (mut subject_rate, mut baseline_rate) = (0.0, 0.0);
    for _ in 0..ROUNDS {
        let base = baseline().await;
        let before = processes.cpu();
        let run = subject().await;
        cpu = cpu.add(processes.cpu().since(before));
        answers += run.ok;
        failures += run.failed + base.failed;
        subject_rate += run.rate() / ROUNDS as f64;
        baseline_rate += base.rate() / ROUNDS as f64;
        ratios.push(run.rate() / base.rate());
    }
    let rounds: Vec<String> = ratios.iter().map(|ratio| format!("{ratio:.2}")).collect();
    ratios.sort_by(f64::total_cmp);
    let cpu = cpu.per(answers);
    Compared {
        ratio: ratios[ROUNDS / 2],
        detail: format!(
            "{subject_rate:.0}/s vs {versus} {baseline_rate:.0}/s; rounds {}; failures {failures}; CPU per answer: core \
             + its runs, edge {cpu}",
            rounds.join(" "),
        ),
        failures,
        cpu,
    }
}

/// A throughput row: the ratio against `target` (a floor); failures miss the target.
fn ratio_row(measure: &str, runtime: &str, compared: Compared, target: Option<f64>) -> Row {
    Row {
        measure: measure.to_owned(),
        runtime: runtime.to_owned(),
        result: format!("{:.2}×", compared.ratio),
        target: target.map(|t| format!("≥ {t}×")).unwrap_or_default(),
        met: target.map(|t| compared.ratio >= t && compared.failures == 0),
        cpu: Some(compared.cpu),
        detail: compared.detail,
    }
}

/// A JSON-RPC success: one response (an SSE event's `data:` line, or a JSON body) that is an
/// object carrying `result`. Every server measured here writes `result` or `error` right after
/// `id`, so the head of the response tells the two apart; the load generator never parses a
/// large result (a 1,000-tool list), which would cost it, on the same CPUs, more than the
/// servers it measures. A body cut short fails the HTTP read or the closing brace.
fn is_success(body: &str) -> bool {
    let json = match body.strip_prefix("event: message\ndata: ") {
        Some(event) => match event.strip_suffix("\n\n") {
            Some(data) if !data.contains('\n') => data,
            _ => return false,
        },
        None => body.trim_end(),
    };
    let head = &json[..json.floor_char_boundary(HEAD)];
    // Whatever follows `result` within the head is inside it.
    let (result, error) = (head.find(r#""result":"#), head.find(r#""error":"#));
    json.starts_with('{') && json.ends_with('}') && result.is_some_and(|r| error.is_none_or(|e| e > r))
}

/// Enough of a response to hold its `jsonrpc`, `id` and the name of `result` or `error`.
const HEAD: usize = 96;

/// Sends a prepared request; a success is a JSON-RPC result.
async fn succeeded(request: reqwest::RequestBuilder) -> bool {
    match request.send().await {
        Ok(response) => is_success(&response.text().await.unwrap_or_default()),
        Err(_) => false,
    }
}

fn list_reply(request: &[u8]) -> axum::Json<serde_json::Value> {
    let request: serde_json::Value = serde_json::from_slice(request).unwrap_or_default();
    axum::Json(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"tools": []}}))
}

async fn serve_axum(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{address}/rpc")
}

/// A bare axum JSON-RPC echo.
async fn bare_echo() -> String {
    let app = axum::Router::new()
        .route("/rpc", axum::routing::post(|body: axum::body::Bytes| async move { list_reply(&body) }));
    serve_axum(app).await
}

/// An axum JSON-RPC endpoint that makes one gRPC call (tonic's health check) to a tonic
/// server before answering: the hop every edge request crosses, with no logic on either side.
async fn tonic_hop() -> String {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (_reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(async move {
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let _ = tonic::transport::Server::builder().add_service(health).serve_with_incoming(incoming).await;
    });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}")).unwrap().connect_lazy();
    let app = axum::Router::new().route(
        "/rpc",
        axum::routing::post(move |body: axum::body::Bytes| {
            let mut client = HealthClient::new(channel.clone());
            async move {
                match client.check(HealthCheckRequest { service: String::new() }).await {
                    Ok(_) => list_reply(&body),
                    Err(status) => axum::Json(
                        json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32603, "message": status.to_string()}}),
                    ),
                }
            }
        }),
    );
    serve_axum(app).await
}

/// `concurrency` workers posting `body` to the MCP endpoint with the session's credential.
async fn mcp_loop(client: &reqwest::Client, mcp: &str, token: &str, concurrency: usize, body: &'static str) -> Run {
    let (client, mcp, token) = (client.clone(), mcp.to_owned(), token.to_owned());
    measure(concurrency, move || succeeded(mcp_post(&client, &mcp, &token).body(body))).await
}

/// A plain loop posting `body` to `url` at `concurrency`.
fn post_loop(
    client: &reqwest::Client,
    url: &str,
    concurrency: usize,
    body: &'static str,
) -> impl Future<Output = Run> + use<> {
    let (client, url) = (client.clone(), url.to_owned());
    measure(concurrency, move || succeeded(client.post(&url).body(body)))
}

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
const ECHO_CALL: &str =
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tools_decho","arguments":{"a":1}}}"#;

/// The spawn loop every call pair is measured against: exactly the capsule's argv and
/// environment running the echo transition, no World around it.
fn spawn_loop(root: &Path) -> impl Future<Output = Run> + use<> {
    let ailang = bin("ailang");
    let root = root.to_path_buf();
    measure(8, move || {
        let mut command = tokio::process::Command::new(&ailang);
        command.args(capsule::ARGV).current_dir(&root).env_clear().envs(capsule::environment(&root));
        async move { command.output().await.is_ok_and(|o| o.status.success() && o.stdout == b"{\"echo\":{\"a\":1}}\n") }
    })
}

/// A capsule root staged with the echo transition and `{"a":1}`.
fn echo_root() -> capsule::Root {
    let source = std::fs::read(examples_dir().join("echo.ail")).unwrap();
    capsule::Root::stage("world-bench-", &source, Some(br#""{\"a\":1}""#)).unwrap()
}

/// How the served processes' async runtimes are sized.
#[derive(Clone, Copy)]
enum Runtime {
    /// A third of the CPUs each, at least one worker.
    Sized,
    /// Tokio's default: one worker per CPU.
    Default,
}

impl Runtime {
    fn label(self) -> String {
        let cpus = std::thread::available_parallelism().map_or(2, usize::from);
        match self {
            Runtime::Sized => format!("sized ({} worker)", (cpus / 3).max(1)),
            Runtime::Default => format!("default ({cpus} workers)"),
        }
    }

    /// The environment the served processes get.
    fn env(self, capsules: &'static str) -> Vec<(&'static str, String)> {
        let cpus = std::thread::available_parallelism().map_or(2, usize::from);
        let workers = match self {
            Runtime::Sized => (cpus / 3).max(1),
            Runtime::Default => cpus,
        };
        vec![("TMPDIR", capsules.to_owned()), ("TOKIO_WORKER_THREADS", workers.to_string())]
    }
}

fn env_refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// A manifest of `count` echo transitions, written to `dir`.
fn echo_manifest(dir: &Path, count: usize) -> PathBuf {
    let entries: Vec<serde_json::Value> = (0..count)
        .map(|i| {
            json!({"id": format!("bench.t{i:04}"), "title": format!("Echo {i}"), "description": "echo, one of many",
                "transitionFnFile": "packages/examples/echo.ail", "inputSchema": {"type": "object"},
                "outputSchema": {"type": "object"}, "access": {"effect": "world.apply", "scope": "world", "cost": 1},
                "declaredEffects": []})
        })
        .collect();
    let path = dir.join(format!("transitions-{count}.json"));
    std::fs::write(&path, serde_json::to_vec(&entries).unwrap()).unwrap();
    path
}

async fn list_and_call(client: &reqwest::Client, runtime: Runtime, capsules: &'static str, report: &mut Report) {
    let env = runtime.env(capsules);
    let world = World::with_echo_env(&env_refs(&env));
    let token = world.mint("bench", &["world.apply=world:100000000"], 3600);
    let processes = Processes::of(&world);
    let mcp = world.url("/mcp/");

    let (echo, hop) = (bare_echo().await, tonic_hop().await);
    let subject = || mcp_loop(client, &mcp, &token, 32, LIST);
    let compared = compare("bare echo", &processes, || post_loop(client, &echo, 32, LIST), subject).await;
    report.add(ratio_row("`tools/list` vs a bare axum echo", &runtime.label(), compared, Some(0.25)));
    let compared = compare("axum → tonic hop", &processes, || post_loop(client, &hop, 32, LIST), subject).await;
    report.add(ratio_row("`tools/list` vs an axum → tonic hop", &runtime.label(), compared, Some(0.8)));

    let root = echo_root();
    let subject = || mcp_loop(client, &mcp, &token, 8, ECHO_CALL);
    let compared = compare("spawn loop", &processes, || spawn_loop(root.path()), subject).await;
    report.add(ratio_row("`tools/call` echo vs spawning `ailang run`", &runtime.label(), compared, Some(0.8)));
    report.peaks(&processes);
}

/// An effectful transition measured against the spawn loop.
struct Effectful<'a> {
    measure: &'a str,
    manifest: PathBuf,
    transitions: usize,
    tool: &'a str,
    target: Option<f64>,
    /// Also measure one episode's p50 under this ceiling (the name of the row, and ms).
    p50: Option<(&'a str, f64)>,
}

async fn effectful(
    client: &reqwest::Client,
    runtime: Runtime,
    capsules: &'static str,
    subject: Effectful<'_>,
    report: &mut Report,
) {
    const EPISODES: usize = 8;
    let workspace = tempfile::tempdir().unwrap();
    for episode in 0..EPISODES {
        let worktree = workspace.path().join(format!("bench{episode}"));
        std::fs::create_dir(&worktree).unwrap();
        std::fs::write(worktree.join("hello.txt"), "hello, world\n").unwrap();
    }
    let root = workspace.path().display().to_string();
    let core_args = ["--workspace-root", root.as_str()];
    let env = runtime.env(capsules);
    let env = env_refs(&env);
    let setup = Setup { core_args: &core_args, env: &env, ..Setup::default() };
    let world = World::published(&subject.manifest, subject.transitions, setup);
    let tokens: Vec<String> = (0..EPISODES)
        .map(|episode| world.mint(&format!("bench{episode}"), &["Workspace.Read=worktree:100000000"], 3600))
        .collect();
    let processes = Processes::of(&world);
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
            let request = mcp_post(&client, &mcp, token).body(body);
            succeeded(request)
        })
    };
    let compared = compare("spawn loop", &processes, || spawn_loop(echo.path()), call).await;
    report.add(ratio_row(subject.measure, &runtime.label(), compared, subject.target));
    if let Some((measure, ceiling)) = subject.p50 {
        let before = processes.cpu();
        let (p50, p99) = latency(client, &world, &tokens[0], body).await;
        let cpu = processes.cpu().since(before).per(LATENCY_CALLS as u64);
        let ms = p50.as_secs_f64() * 1e3;
        report.add(Row {
            measure: measure.to_owned(),
            runtime: runtime.label(),
            result: format!("{ms:.2} ms"),
            target: format!("≤ {ceiling} ms"),
            met: Some(ms <= ceiling),
            cpu: Some(cpu),
            detail: format!("p99 {:.2} ms", p99.as_secs_f64() * 1e3),
        });
    }
    report.peaks(&processes);
}

async fn registry_sizes(client: &reqwest::Client, runtime: Runtime, capsules: &'static str, report: &mut Report) {
    let dir = tempfile::tempdir().unwrap();
    let env = runtime.env(capsules);
    let env = env_refs(&env);
    let setup = Setup { env: &env, ..Setup::default() };
    let small = World::published(&echo_manifest(dir.path(), 10), 10, setup);
    let large = World::published(&echo_manifest(dir.path(), 1_000), 1_000, setup);
    let small_token = small.mint("bench", &["world.apply=world:100000000"], 3600);
    let large_token = large.mint("bench", &["world.apply=world:100000000"], 3600);
    let (small_mcp, large_mcp) = (small.url("/mcp/"), large.url("/mcp/"));
    let processes = Processes::of(&large);
    let baseline = || mcp_loop(client, &small_mcp, &small_token, 32, LIST);
    let subject = || mcp_loop(client, &large_mcp, &large_token, 32, LIST);
    let compared = compare("10 transitions", &processes, baseline, subject).await;
    report.add(ratio_row("`tools/list` of 1,000 transitions vs of 10", &runtime.label(), compared, Some(0.5)));
    report.peaks(&processes);
    report.peaks(&Processes::of(&small));
}

/// p50 and p99 of `LATENCY_CALLS` sequential `tools/call`s (`body`) from one client.
async fn latency(client: &reqwest::Client, world: &World, token: &str, body: &'static str) -> (Duration, Duration) {
    let mcp = world.url("/mcp/");
    let mut samples = Vec::with_capacity(LATENCY_CALLS);
    for _ in 0..LATENCY_CALLS {
        let request = mcp_post(client, &mcp, token).body(body);
        let started = Instant::now();
        assert!(succeeded(request).await, "a latency sample call failed");
        samples.push(started.elapsed());
    }
    samples.sort();
    (samples[LATENCY_CALLS / 2], samples[LATENCY_CALLS * 99 / 100])
}

/// Writes `entries` log entries through the store's commit path, each with an input, an
/// output and a record object and its journal rows, as a pure call leaves them.
async fn seed_history(location: &world_core::store::StoreLocation, entries: usize) {
    use world_core::genesis::seal;
    use world_core::store::{Commit, LogEntry, OpenMode, Planner, Store, StoredObject, WorldRow};
    let store = Store::open(location, OpenMode::MustExist).await.expect("open the store to seed it");
    let started = Instant::now();
    const IN_FLIGHT: usize = 256;
    let mut done = 0;
    while done < entries {
        let wave = IN_FLIGHT.min(entries - done);
        let commits = (done..done + wave).map(|n| {
            let store = store.clone();
            async move {
                let id = format!("bench:seed:{n}");
                let planner: Planner = Box::new(move |world: &WorldRow| {
                    let object =
                        |kind: &str| StoredObject::new(kind, "bench/seed", format!("{{\"n\":{n}}}").into_bytes());
                    let (input, output, record) =
                        (object("bench/input/v1"), object("bench/output/v1"), object("bench/record/v1"));
                    let entry = LogEntry {
                        entry_index: world.revision + 1,
                        semantics_epoch: 1,
                        transition_fn: input.hash,
                        interpreter: input.hash,
                        prev_entry_hash: world.log_head,
                        written_by: "bench/seed".into(),
                        entry_hash: record.hash,
                        transition_ref: record.hash,
                    };
                    let (entry, next_world) = seal(entry, output.hash);
                    Commit {
                        invocation_id: Some(format!("bench:seed:{n}")),
                        episode: None,
                        observed_head: Some(world.reference),
                        objects: vec![input, output, record],
                        next_world,
                        entry,
                        logical_time: 1_700_000_000,
                        effect_outcomes: Vec::new(),
                    }
                });
                store.commit_next(&id, planner, false, Duration::from_secs(60)).await.expect("a seeding commit");
            }
        });
        futures::future::join_all(commits).await;
        done += wave;
        if done % 100_000 < IN_FLIGHT || done == entries {
            println!("  seeded {done} of {entries} entries in {:.0} s", started.elapsed().as_secs_f64());
        }
    }
    store.close().await;
}

async fn latency_rows(
    client: &reqwest::Client,
    backend: &str,
    store: PathBuf,
    artifacts: Option<&Path>,
    entries: usize,
    report: &mut Report,
) {
    let runtime = Runtime::Sized;
    let env = runtime.env("/dev/shm");
    let env = env_refs(&env);
    let dir = tempfile::tempdir().unwrap();
    let mut world = World::echo_core_on(dir, store.clone(), artifacts, &[], &env);
    world.attach_edge(&[], &env);
    let token = world.mint("bench", &["world.apply=world:100000000"], 36_000);
    let (empty_p50, empty_p99) = latency(client, &world, &token, ECHO_CALL).await;

    // The history goes in while no core serves (SQLite's serving lock is exclusive).
    world.core.kill();
    let location = if backend == "SQLite" {
        world_core::store::StoreLocation::Sqlite(store)
    } else {
        world_core::store::StoreLocation::Postgres(store.display().to_string())
    };
    seed_history(&location, entries).await;
    let serve = world_tests::serve_args(&bin("ailang"), artifacts);
    let serve: Vec<&str> = serve.iter().map(String::as_str).collect();
    world.restart_core(&bin("world-core"), &serve, &env);
    let (full_p50, full_p99) = latency(client, &world, &token, ECHO_CALL).await;
    report.peaks(&Processes::of(&world));

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let ratio = full_p50.as_secs_f64() / empty_p50.as_secs_f64();
    report.add(Row {
        measure: format!("`tools/call` p50 at {entries} entries vs empty, {backend}"),
        runtime: runtime.label(),
        result: format!("{ratio:.2}× ({:.2} ms vs {:.2} ms)", ms(full_p50), ms(empty_p50)),
        target: "≤ 1.1×".into(),
        met: Some(ratio <= 1.1),
        cpu: None,
        detail: format!("p99 {:.2} ms vs {:.2} ms", ms(full_p99), ms(empty_p99)),
    });
    report.add(Row {
        measure: format!("`tools/call` p99 at {entries} entries vs empty, {backend}"),
        runtime: runtime.label(),
        result: format!("{:.2} ms vs {:.2} ms", ms(full_p99), ms(empty_p99)),
        target: String::new(),
        met: None,
        cpu: None,
        detail: String::new(),
    });
}

fn write_readme(table: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let (Some(begin), Some(end)) = (readme.find(README_BEGIN), readme.find(README_END)) else {
        panic!("README.md has no {README_BEGIN} … {README_END} block");
    };
    let cpus = std::thread::available_parallelism().map_or(2, usize::from);
    let generated = format!(
        "{README_BEGIN}\n<!-- written by `cargo bench -p world-tests --bench edge_path -- --readme` -->\n\nMeasured on {cpus} CPUs.\n\n{table}"
    );
    let updated = format!("{}{generated}{}", &readme[..begin], &readme[end..]);
    std::fs::write(&path, updated).expect("write README.md");
    println!("wrote the results table into {}", path.display());
}

fn main() {
    // The load generator keeps one worker per CPU; the served processes are sized per part.
    let cpus = std::thread::available_parallelism().map_or(2, usize::from);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(cpus).enable_all().build().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let readme = args.iter().any(|arg| arg == "--readme");
    let parts: Vec<&str> = args.iter().filter(|arg| !arg.starts_with('-')).map(String::as_str).collect();
    let runs = |part: &str| parts.is_empty() || parts.contains(&part);
    // Capsule roots on a tmpfs, as the compose deployment has them: making and removing a
    // root per call is then cheap, the store stays on disk.
    let capsules = if Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
    let client = reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap();
    let mut report = Report::default();
    for runtime in [Runtime::Sized, Runtime::Default] {
        if runs("list") || runs("call") {
            list_and_call(&client, runtime, capsules, &mut report).await;
        }
        if runs("effect") {
            let fixture = Effectful {
                measure: "effectful `tools/call` (one `Workspace.Read`) vs spawning `ailang run`",
                manifest: fixture("effects/transitions.json"),
                transitions: EFFECT_FIXTURES,
                tool: "fx_dread",
                target: Some(0.45),
                p50: None,
            };
            effectful(&client, runtime, capsules, fixture, &mut report).await;
            let coding_tool = Effectful {
                measure: "`ailang-read` (a 150-line plan) from 8 episodes vs spawning `ailang run`",
                manifest: examples_dir().join("../se-tools/transitions.json"),
                transitions: 8,
                tool: "ailang-read",
                target: Some(0.5),
                p50: Some(("`ailang-read` p50, one episode, one client", 2.5)),
            };
            effectful(&client, runtime, capsules, coding_tool, &mut report).await;
        }
        if runs("registry") {
            registry_sizes(&client, runtime, capsules, &mut report).await;
        }
    }
    if runs("latency") {
        let entries = std::env::var("WORLD_BENCH_ENTRIES").ok().and_then(|n| n.parse().ok()).unwrap_or(1_000_000);
        let dir = tempfile::tempdir().unwrap();
        latency_rows(&client, "SQLite", dir.path().join("world.db"), None, entries, &mut report).await;
        match std::env::var("WORLD_TEST_POSTGRES_URL") {
            Ok(admin) => {
                let url = world_tests::fresh_postgres_database(&admin).await;
                let artifacts = dir.path().join("artifacts");
                latency_rows(&client, "PostgreSQL", PathBuf::from(url), Some(&artifacts), entries, &mut report).await;
            }
            Err(_) => println!("latency on PostgreSQL not measured: set WORLD_TEST_POSTGRES_URL to an admin URL"),
        }
    }
    let table = report.table();
    println!("\n{table}");
    if readme {
        write_readme(&table);
    }
}
