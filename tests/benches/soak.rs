//! The soak, run outside CI:
//!
//! ```sh
//! cargo build --release --workspace --bins
//! cargo bench -p world-tests --bench soak            # 10 minutes; WORLD_SOAK_SECONDS=N for another length
//! ```
//!
//! Mixed load through one edge and one core for the whole run: MCP `tools/list`, pure
//! `tools/call`, effectful `tools/call` (one `Workspace.Read`) and A2A `tasks/send`, from eight
//! clients. Every 10 s the core's and the edge's resident memory and the period's latency
//! percentiles and failures are written to `target/soak/soak.csv`, and at the end a small SVG
//! plot of both to `target/soak/soak.svg`. It passes when no request failed and the resident
//! memory after warm-up (the first minute) stays flat: the last third's mean within 10% of the
//! first third's.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use world_tests::{Setup, World, examples_dir, fixture, mcp_answer, mcp_post, status_kib};

const SAMPLE: Duration = Duration::from_secs(10);
const WARM_UP: Duration = Duration::from_secs(60);
const CLIENTS: usize = 8;

/// One 10 s period.
struct Sample {
    at: f64,
    core_rss_kib: u64,
    edge_rss_kib: u64,
    answers: usize,
    failed: usize,
    p50_ms: f64,
    p99_ms: f64,
}

/// Latencies and failures of the current period.
#[derive(Default)]
struct Period {
    latencies: Vec<Duration>,
    failed: usize,
}

fn is_success(body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(mcp_answer(body))
        .is_ok_and(|v| v.get("result").is_some() && v.get("error").is_none())
}

/// The i-th request of client `c`: list, pure call, effectful call, A2A, in turn.
fn request(i: usize, c: usize, mcp: &str, a2a: &str) -> (String, String) {
    match i % 4 {
        0 => (mcp.to_owned(), r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.to_owned()),
        1 => (
            mcp.to_owned(),
            json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tools_decho","arguments":{"c":c,"i":i}}})
                .to_string(),
        ),
        2 => (
            mcp.to_owned(),
            json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fx_dread","arguments":{"path":"hello.txt"}}})
                .to_string(),
        ),
        _ => (
            a2a.to_owned(),
            json!({"jsonrpc":"2.0","id":4,"method":"tasks/send","params":{"id":format!("soak-{c}-{i}"),
                "metadata":{"skill_id":"tools.echo"},"message":{"role":"user","parts":[{"type":"data","data":{"i":i}}]}}})
            .to_string(),
        ),
    }
}

fn main() {
    let seconds = std::env::var("WORLD_SOAK_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(600u64);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let passed = runtime.block_on(soak(Duration::from_secs(seconds)));
    std::process::exit(if passed { 0 } else { 1 });
}

async fn soak(length: Duration) -> bool {
    let workspace = tempfile::tempdir().unwrap();
    for c in 0..CLIENTS {
        std::fs::create_dir(workspace.path().join(format!("soak{c}"))).unwrap();
        std::fs::write(workspace.path().join(format!("soak{c}/hello.txt")), "hello, soak\n").unwrap();
    }
    let root = workspace.path().display().to_string();
    let core_args = ["--workspace-root", root.as_str()];
    let capsules = if Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
    let env = [("TMPDIR", capsules)];
    // The echo example beside the effect fixtures, in one manifest.
    let read =
        |path: PathBuf| -> Vec<serde_json::Value> { serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap() };
    let mut transitions = read(examples_dir().join("transitions.json"));
    transitions.extend(read(fixture("effects/transitions.json")));
    let manifest = workspace.path().join("transitions.json");
    std::fs::write(&manifest, serde_json::to_vec(&transitions).unwrap()).unwrap();
    let setup = Setup { core_args: &core_args, env: &env, ..Setup::default() };
    let world = World::published(&manifest, transitions.len(), setup);
    let grants = ["world.apply=world:1000000000", "Workspace.Read=worktree:1000000000"];
    let tokens: Vec<String> = (0..CLIENTS).map(|c| world.mint(&format!("soak{c}"), &grants, 86_400)).collect();
    let (core, edge) = (world.core.pid(), world.edge.as_ref().expect("an edge").pid());
    let (mcp, a2a) = (world.url("/mcp/"), world.url("/a2a/"));
    println!(
        "soak: {} s of mixed load from {CLIENTS} clients; sampling every {} s",
        length.as_secs(),
        SAMPLE.as_secs()
    );

    let period = Arc::new(Mutex::new(Period::default()));
    let started = Instant::now();
    let client = reqwest::Client::new();
    let clients: Vec<_> = tokens
        .into_iter()
        .enumerate()
        .map(|(c, token)| {
            let (client, period, mcp, a2a) = (client.clone(), Arc::clone(&period), mcp.clone(), a2a.clone());
            tokio::spawn(async move {
                let mut i = 0;
                while started.elapsed() < length {
                    let (url, body) = request(i, c, &mcp, &a2a);
                    let sent = Instant::now();
                    // MCP's headers on both surfaces: the A2A endpoint ignores `Accept`.
                    let response = mcp_post(&client, &url, &token).body(body).send().await;
                    let ok = match response {
                        Ok(response) => is_success(&response.text().await.unwrap_or_default()),
                        Err(_) => false,
                    };
                    let mut period = period.lock().unwrap();
                    period.latencies.push(sent.elapsed());
                    period.failed += usize::from(!ok);
                    i += 1;
                }
            })
        })
        .collect();

    let mut samples = Vec::new();
    while started.elapsed() < length {
        tokio::time::sleep(SAMPLE.min(length.saturating_sub(started.elapsed()))).await;
        let Period { mut latencies, failed } = std::mem::take(&mut *period.lock().unwrap());
        latencies.sort();
        let percentile = |p: usize| latencies.get(latencies.len() * p / 100).map_or(0.0, |d| d.as_secs_f64() * 1e3);
        let sample = Sample {
            at: started.elapsed().as_secs_f64(),
            core_rss_kib: status_kib(core, "VmRSS"),
            edge_rss_kib: status_kib(edge, "VmRSS"),
            answers: latencies.len(),
            failed,
            p50_ms: percentile(50),
            p99_ms: percentile(99),
        };
        println!(
            "soak: {:>5.0} s  core {:>7} KiB  edge {:>7} KiB  {:>6} answers  {} failed  p50 {:.1} ms  p99 {:.1} ms",
            sample.at,
            sample.core_rss_kib,
            sample.edge_rss_kib,
            sample.answers,
            sample.failed,
            sample.p50_ms,
            sample.p99_ms
        );
        samples.push(sample);
    }
    for client in clients {
        let _ = client.await;
    }

    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/soak");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("soak.csv"), csv(&samples)).unwrap();
    std::fs::write(out.join("soak.svg"), svg(&samples)).unwrap();
    println!("soak: wrote {0}/soak.csv and {0}/soak.svg", out.display());

    let failed: usize = samples.iter().map(|s| s.failed).sum();
    let answered: usize = samples.iter().map(|s| s.answers).sum();
    let settled: Vec<&Sample> = samples.iter().filter(|s| s.at > WARM_UP.as_secs_f64()).collect();
    let flat = |rss: fn(&Sample) -> u64| {
        let third = settled.len() / 3;
        if third == 0 {
            return true;
        }
        let mean = |part: &[&Sample]| part.iter().map(|s| rss(s) as f64).sum::<f64>() / part.len() as f64;
        mean(&settled[settled.len() - third..]) <= 1.1 * mean(&settled[..third])
    };
    let (core_flat, edge_flat) = (flat(|s| s.core_rss_kib), flat(|s| s.edge_rss_kib));
    println!(
        "soak: {answered} answers, {failed} failed; resident memory after warm-up flat: core {core_flat}, edge {edge_flat}"
    );
    failed == 0 && core_flat && edge_flat
}

fn csv(samples: &[Sample]) -> String {
    let mut csv = String::from("seconds,core_rss_kib,edge_rss_kib,answers,failed,p50_ms,p99_ms\n");
    for s in samples {
        let _ = writeln!(
            csv,
            "{:.0},{},{},{},{},{:.2},{:.2}",
            s.at, s.core_rss_kib, s.edge_rss_kib, s.answers, s.failed, s.p50_ms, s.p99_ms
        );
    }
    csv
}

/// Two stacked line charts: resident memory (core, edge) and latency (p50, p99).
fn svg(samples: &[Sample]) -> String {
    const WIDTH: f64 = 640.0;
    const HEIGHT: f64 = 160.0;
    let end = samples.last().map_or(1.0, |s| s.at).max(1.0);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{}" font-family="sans-serif" font-size="11">"#,
        2.0 * HEIGHT + 60.0
    );
    let mut chart = |top: f64, title: &str, unit: &str, series: &[(&str, &str, Vec<f64>)]| {
        let max = series.iter().flat_map(|(_, _, v)| v.iter().copied()).fold(1e-9, f64::max) * 1.1;
        let _ = write!(
            svg,
            r##"<text x="4" y="{}">{title} (max {max:.1} {unit})</text><rect x="40" y="{}" width="{}" height="{HEIGHT}" fill="none" stroke="#999"/>"##,
            top + 12.0,
            top + 18.0,
            WIDTH - 50.0
        );
        for (i, (name, colour, values)) in series.iter().enumerate() {
            let points: Vec<String> = samples
                .iter()
                .zip(values)
                .map(|(s, v)| {
                    format!("{:.1},{:.1}", 40.0 + (WIDTH - 50.0) * s.at / end, top + 18.0 + HEIGHT * (1.0 - v / max))
                })
                .collect();
            let _ = write!(
                svg,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/><text x="{}" y="{}" fill="{colour}">{name}</text>"#,
                points.join(" "),
                WIDTH - 160.0 + 70.0 * i as f64,
                top + 12.0
            );
        }
    };
    let mib = |f: fn(&Sample) -> u64| samples.iter().map(|s| f(s) as f64 / 1024.0).collect::<Vec<_>>();
    chart(
        0.0,
        "resident memory",
        "MiB",
        &[("core", "#1f77b4", mib(|s| s.core_rss_kib)), ("edge", "#ff7f0e", mib(|s| s.edge_rss_kib))],
    );
    let ms = |f: fn(&Sample) -> f64| samples.iter().map(f).collect::<Vec<_>>();
    chart(
        HEIGHT + 30.0,
        "latency",
        "ms",
        &[("p50", "#2ca02c", ms(|s| s.p50_ms)), ("p99", "#d62728", ms(|s| s.p99_ms))],
    );
    svg.push_str("</svg>\n");
    svg
}
