//! `world-edge`: parse flags, set up logging on stderr, serve.

use anyhow::Context as _;
use clap::Parser as _;
use tracing_subscriber::EnvFilter;
use world_edge::{EdgeArgs, LogFormat};

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() -> anyhow::Result<()> {
    let args = EdgeArgs::parse();
    init_logging(args.log_format);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    runtime.block_on(world_edge::serve(args))?;
    Ok(())
}
