//! Command-line surface of `world-core`.

mod serve;
mod session;
mod up;
mod why;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use world_core::store::{OpenMode, Store, StoreError, StoreLocation};

#[derive(Parser)]
#[command(name = "world-core", version, about = "The World core: store, sessions, registry and invocation over gRPC")]
struct Cli {
    /// Log line format on stderr.
    #[arg(long, global = true, env = "WORLD_LOG_FORMAT", value_enum, default_value = "human")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Human,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the world.v1 gRPC API over a store.
    Serve(serve::ServeArgs),
    /// Mint, list and revoke session credentials (works while a core serves).
    #[command(subcommand)]
    Session(session::SessionCommand),
    /// Commit the genesis world (revision 0) to a store that has no head yet.
    Genesis(GenesisArgs),
    /// The one-command start: bootstrap, publish the bundled examples and
    /// mint a demo session on first run (attended), then serve a core and an
    /// edge until Ctrl-C.
    Up(up::UpArgs),
    /// Walk back from a result (an entry index, an object ref or an invocation id) to
    /// everything that made it, verifying each object's hash.
    Why(why::WhyArgs),
}

#[derive(clap::Args)]
struct GenesisArgs {
    /// The store: a SQLite file path or a postgres:// URL (created when missing).
    #[arg(long, env = "WORLD_STORE")]
    store: String,
}

/// A failed verb: the message for stderr and the exit code.
pub struct Failed {
    code: u8,
    message: String,
}

impl Failed {
    /// A usage error or a refusal: exit 1.
    pub fn refused(message: impl ToString) -> Self {
        Self { code: 1, message: message.to_string() }
    }

    /// The store or the runtime failed: exit 2.
    pub fn fatal(message: impl ToString) -> Self {
        Self { code: 2, message: message.to_string() }
    }
}

pub type Outcome = Result<(), Failed>;

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("world-core: cannot start the async runtime: {error}");
            return ExitCode::from(2);
        }
    };
    let serving = matches!(cli.command, Command::Serve(_) | Command::Up(_));
    let mut logged = false;
    let outcome = runtime.block_on(async {
        // Inside the runtime: the OTLP gRPC exporter needs one alive.
        let telemetry = match world_telemetry::init("world-core", cli.log_format.into()) {
            Ok(telemetry) => telemetry,
            Err(error) => return Err(Failed::fatal(error)),
        };
        let outcome = match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Session(command) => session::run(command).await,
            Command::Genesis(args) => genesis(args).await,
            Command::Up(args) => up::run(args).await,
            Command::Why(args) => why::run(args).await,
        };
        // A serving core that cannot start or go on is an operator's matter: its reason is one
        // ERROR line of the core's log (which may be JSON), not a line beside it.
        if let Err(failed) = &outcome
            && serving
            && failed.code == 2
        {
            tracing::error!("{}", failed.message);
            logged = true;
        }
        // Flushing blocks on the exporter's own thread.
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
        outcome
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failed) => {
            if !logged {
                eprintln!("world-core: {}", failed.message);
            }
            ExitCode::from(failed.code)
        }
    }
}

impl From<LogFormat> for world_telemetry::LogFormat {
    fn from(format: LogFormat) -> Self {
        match format {
            LogFormat::Human => Self::Human,
            LogFormat::Json => Self::Json,
        }
    }
}

pub fn parse_location(text: &str) -> Result<StoreLocation, Failed> {
    StoreLocation::parse(text).map_err(Failed::refused)
}

pub async fn open_store(location: &StoreLocation, mode: OpenMode) -> Result<Store, Failed> {
    Store::open(location, mode).await.map_err(|error| match error {
        StoreError::Missing(_) => Failed::refused(error),
        error => Failed::fatal(format!("cannot open world store {location}: {error}")),
    })
}

async fn genesis(args: GenesisArgs) -> Outcome {
    let location = parse_location(&args.store)?;
    let store = open_store(&location, OpenMode::CreateIfMissing).await?;
    let result = world_core::genesis::commit_genesis(&store, world_core::session::now_unix()).await;
    store.close().await;
    match result {
        Ok(world) => {
            println!("genesis committed: world {} (revision 0, entry 0) in {location}", world.reference);
            Ok(())
        }
        Err(StoreError::Conflict { selected, .. }) => Err(Failed::refused(format!(
            "refusing: {location} already has a selected world head ({}); genesis is only for a store with none",
            selected.map(|h| h.to_string()).unwrap_or_default()
        ))),
        Err(error) => Err(Failed::fatal(format!("genesis failed: {error}"))),
    }
}
