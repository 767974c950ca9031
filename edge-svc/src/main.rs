//! `world-edge`: parse flags, set up logging and tracing, serve.

use anyhow::Context as _;
use clap::Parser as _;
use world_edge::{EdgeArgs, LogFormat};

/// Request handling allocates many small short-lived buffers; glibc's allocator made a
/// tenth of the CPU time on the request path.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A failure ends the edge with one line on stderr (no backtrace, whatever RUST_BACKTRACE
/// says) and exit code 2.
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("world-edge: {error:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run() -> anyhow::Result<()> {
    let args = EdgeArgs::parse();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    runtime.block_on(async {
        // Inside the runtime: the OTLP gRPC exporter needs one alive.
        let format = match args.log_format {
            LogFormat::Human => world_telemetry::LogFormat::Human,
            LogFormat::Json => world_telemetry::LogFormat::Json,
        };
        let telemetry = world_telemetry::init("world-edge", format)?;
        let served = world_edge::serve(args).await;
        // Flushing blocks on the exporter's own thread.
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
        served.map_err(anyhow::Error::from)
    })
}
