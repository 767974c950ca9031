//! `world-core serve`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use world_core::archive::{Archive, Interpreter};
use world_core::capsule::{Capsule, VerifiedInterpreter};
use world_core::fork_server::{Forks, RunMode};
use world_core::limits::{self, Limits, STORE_GONE_GRACE};
use world_core::store::{
    Backend, Liveness, LockMode, OpenMode, ServingLock, Store, StoreFiles, StoreLocation, WATCH_INTERVAL,
};
use world_core::subprocess::Slots;
use world_core::{Core, registry};

use super::{Failed, Outcome, open_store, parse_location};

/// The core's gRPC address unless one is given (`serve --listen`, `up --core-listen`).
pub const LISTEN: &str = "127.0.0.1:7650";

#[derive(clap::Args)]
pub struct ServeArgs {
    /// The store: a SQLite file path or a postgres:// URL (created when missing).
    #[arg(long, env = "WORLD_STORE")]
    store: String,
    /// The gRPC listen address (port 0 picks a free port; the startup line names it).
    #[arg(long, env = "WORLD_LISTEN", default_value = LISTEN)]
    listen: SocketAddr,
    /// The pinned AILANG interpreter; without it there is no coordinator and
    /// invocations answer "not available".
    #[arg(long, env = "WORLD_AILANG_BIN")]
    ailang_bin: Option<PathBuf>,
    /// Where interpreter archives live (default `<store>.artifacts/` for SQLite;
    /// required for PostgreSQL).
    #[arg(long, env = "WORLD_ARTIFACTS")]
    artifacts: Option<PathBuf>,
    /// Episode worktrees live at `<DIR>/<episode>` (created by the operator); effectful
    /// transitions are served only with it. The store and artifacts must lie outside it.
    #[arg(long, env = "WORLD_WORKSPACE_ROOT")]
    workspace_root: Option<PathBuf>,
    /// The interpreter the Ailang.* handlers run (default: the pinned --ailang-bin).
    #[arg(long, env = "WORLD_TOOL_AILANG_BIN")]
    tool_ailang_bin: Option<PathBuf>,
    /// The examples corpus the Ailang.* handlers search (default: the interpreter's bundled one).
    #[arg(long, env = "WORLD_EXAMPLES_DIR")]
    examples_dir: Option<PathBuf>,
    /// Where each call's capsule root is made (default: the temporary directory when it is
    /// memory-backed, else /dev/shm when it is, else the temporary directory).
    #[arg(long, env = "WORLD_CAPSULE_DIR")]
    capsule_dir: Option<PathBuf>,
    /// How interpreter runs start: `forked` from one started interpreter when it offers a
    /// fork server (else spawned), or `spawned`, a new process per run.
    #[arg(long, env = "WORLD_INTERPRETER_RUNS", value_enum, default_value_t = RunMode::Forked)]
    interpreter_runs: RunMode,
    #[command(flatten)]
    limits: LimitArgs,
    /// This core's identity among the cores of one store (default `<hostname>:<listen
    /// address>`): a core restarted with the same identity ends its dead run's claims and
    /// leases. Two live cores of one store never share one.
    #[arg(long, env = "WORLD_CORE_ID")]
    core_id: Option<String>,
    /// Serve Prometheus metrics (`GET /metrics`) on this address.
    #[arg(long, env = "WORLD_METRICS_LISTEN")]
    metrics_listen: Option<SocketAddr>,
}

/// Invocation limits (the reference's defaults).
#[derive(clap::Args, Clone, Copy)]
pub struct LimitArgs {
    /// Seconds one invocation may take, end to end (at least 2); an effectful call's plan,
    /// handler, finish and commit each get a share of it.
    #[arg(long, env = "WORLD_INVOCATION_TIMEOUT", default_value_t = limits::INVOCATION.as_secs())]
    invocation_timeout: u64,
    /// Interpreter subprocesses that may run at once; calls beyond are refused, not queued.
    #[arg(long, env = "WORLD_MAX_SUBPROCESSES", default_value_t = limits::MAX_SUBPROCESSES)]
    max_subprocesses: usize,
    /// Largest canonical input (arguments) in bytes.
    #[arg(long, env = "WORLD_MAX_INPUT_BYTES", default_value_t = limits::MAX_INPUT)]
    max_input_bytes: usize,
    /// Largest transition output in bytes.
    #[arg(long, env = "WORLD_MAX_OUTPUT_BYTES", default_value_t = limits::MAX_OUTPUT)]
    max_output_bytes: usize,
}

impl Default for LimitArgs {
    fn default() -> Self {
        Self {
            invocation_timeout: limits::INVOCATION.as_secs(),
            max_subprocesses: limits::MAX_SUBPROCESSES,
            max_input_bytes: limits::MAX_INPUT,
            max_output_bytes: limits::MAX_OUTPUT,
        }
    }
}

impl LimitArgs {
    /// The limits these flags ask for, or why they cannot serve.
    fn limits(&self) -> Result<Limits, Failed> {
        let limits = Limits {
            max_input: self.max_input_bytes,
            max_output: self.max_output_bytes,
            max_subprocesses: self.max_subprocesses.max(1),
            ..Limits::default()
        };
        limits
            .with_invocation(std::time::Duration::from_secs(self.invocation_timeout))
            .map_err(|reason| Failed::refused(format!("--invocation-timeout {}: {reason}", self.invocation_timeout)))
    }
}

pub async fn run(args: ServeArgs) -> Outcome {
    let location = parse_location(&args.store)?;
    // Refused before the store is touched.
    args.limits.limits()?;
    let core_id = match &args.core_id {
        Some(id) => valid_core_id(id)?,
        None => None,
    };
    let store = open_store(&location, OpenMode::CreateIfMissing).await?;
    let serving_lock = ServingLock::acquire(&location, LockMode::Serve).await.map_err(Failed::fatal)?;
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| Failed::fatal(format!("cannot listen on {}: {e}", args.listen)))?;
    let core_id = match core_id {
        Some(id) => id,
        None => default_core_id(listener.local_addr().map_err(Failed::fatal)?),
    };
    // Before anything writes a claim, lease or intent in this core's name.
    let _liveness = Liveness::start(&store, &core_id).await.map_err(Failed::fatal)?;
    tracing::info!(core = %core_id, owner = %store.owner(), "serving as this core");
    let options = CoreOptions {
        ailang_bin: args.ailang_bin.as_deref(),
        artifacts: args.artifacts.as_deref(),
        workspace_root: args.workspace_root.as_deref(),
        tool_ailang_bin: args.tool_ailang_bin.as_deref(),
        examples_dir: args.examples_dir.as_deref(),
        capsule_dir: args.capsule_dir.as_deref(),
        interpreter_runs: args.interpreter_runs,
        limits: args.limits,
    };
    let core = build_core(&store, &location, options).await?;
    // Handlers go in before the startup line, so a signal sent as soon as
    // the line is read is a graceful stop, not the default termination.
    let shutdown = shutdown_signal().map_err(Failed::fatal)?;
    if let Some(address) = args.metrics_listen {
        serve_metrics(Arc::clone(&core), address).await?;
    }
    let watched = store_files(&location, &serving_lock)?;
    serve_grpc(core, listener, &location, watched, shutdown).await?;
    store.close().await;
    tracing::info!("world-core stopped");
    Ok(())
}

/// `--core-id`, checked: printable and short, since logs and rows carry it.
fn valid_core_id(id: &str) -> Result<Option<String>, Failed> {
    if id.is_empty() || id.len() > 200 || id.chars().any(char::is_control) {
        return Err(Failed::refused(format!(
            "--core-id {id:?}: give 1 to 200 printable characters naming this core among the store's cores"
        )));
    }
    Ok(Some(id.to_owned()))
}

/// `<hostname>:<listen address>`: stable across restarts of one core, distinct between the
/// cores of one host (each listens on its own address).
fn default_core_id(listen: SocketAddr) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}:{listen}")
}

/// How a core is built.
#[derive(Default)]
pub struct CoreOptions<'a> {
    pub ailang_bin: Option<&'a Path>,
    pub artifacts: Option<&'a Path>,
    pub workspace_root: Option<&'a Path>,
    pub tool_ailang_bin: Option<&'a Path>,
    pub examples_dir: Option<&'a Path>,
    pub capsule_dir: Option<&'a Path>,
    pub interpreter_runs: RunMode,
    pub limits: LimitArgs,
}

/// Archives and pins the interpreter (bootstrapping epoch 1 for its
/// release) when one is given, and builds the core around the store.
pub async fn build_core(
    store: &Store,
    location: &StoreLocation,
    options: CoreOptions<'_>,
) -> Result<Arc<Core>, Failed> {
    let CoreOptions {
        ailang_bin,
        artifacts,
        workspace_root,
        tool_ailang_bin,
        examples_dir,
        capsule_dir,
        interpreter_runs,
        limits,
    } = options;
    let roots = world_core::capsule::roots_dir(capsule_dir);
    remove_leftover_roots(roots.clone()).await;
    recover(store).await?;
    let Some(binary) = ailang_bin else {
        if workspace_root.is_some() {
            tracing::warn!("--workspace-root has no effect without --ailang-bin: there is no coordinator");
        }
        tracing::warn!("serving without --ailang-bin: there is no coordinator; invocations answer \"not available\"");
        return Ok(Arc::new(Core::new(store.clone(), limits.limits()?)));
    };
    let limits = limits.limits()?;
    let slots = Slots::new(limits.max_subprocesses);
    let interpreter = pin_interpreter(store, location, binary, artifacts, &slots).await?;
    let archive_root = Archive::for_store(location, artifacts).map_err(Failed::refused)?.root().to_path_buf();
    let tool = ToolOptions {
        program: tool_ailang_bin.map_or_else(|| interpreter.path.clone(), Path::to_path_buf),
        examples: examples_dir.map(Path::to_path_buf),
        slots: slots.clone(),
        timeout: limits.tool(),
    };
    let verified =
        VerifiedInterpreter::open(interpreter).map_err(|e| Failed::fatal(format!("startup failed at archive: {e}")))?;
    let effects = match workspace_root {
        Some(root) => Some(effect_handlers(root, location, &archive_root, tool)?),
        None => {
            tracing::info!("serving without --workspace-root: effectful transitions are refused (R8)");
            None
        }
    };
    tracing::info!(roots = %roots.display(), "capsule roots are made here");
    let forks = match interpreter_runs {
        RunMode::Forked => Forks::start(verified.file()).await,
        RunMode::Spawned => None,
    };
    let roots = world_core::capsule::RootsDir::open(&roots)
        .map_err(|e| Failed::fatal(format!("cannot open the capsule roots directory {}: {e}", roots.display())))?;
    let capsule = Capsule { interpreter: verified, slots, roots, forks };
    let core = Core::with_coordinator(store.clone(), capsule, limits, effects);
    world_core::effects::recovery::report_pending(&core.store, &core.metrics)
        .await
        .map_err(|e| Failed::fatal(format!("startup failed at recovery: {e}")))?;
    Ok(Arc::new(core))
}

/// Capsule and tool roots a killed core left in the temporary directory or in `capsule_roots`
/// go before this core makes its own; those of cores still running stay.
async fn remove_leftover_roots(capsule_roots: PathBuf) {
    match tokio::task::spawn_blocking(move || world_core::scratch::remove_leftovers(&capsule_roots)).await {
        Ok(swept) => tracing::info!(
            removed = swept.removed,
            failed = swept.failed,
            "removed {} capsule and tool roots left by cores no longer running",
            swept.removed
        ),
        Err(error) => tracing::warn!(%error, "the sweep of leftover capsule and tool roots did not finish"),
    }
}

/// A SQLite store has one serving core (its serving lock is exclusive), so leases and
/// running claims found at start are a dead core's: free them now. On PostgreSQL other cores
/// may be alive; a dead one's claims and leases end when they are next asked for
/// (`store::liveness`).
async fn recover(store: &Store) -> Result<(), Failed> {
    if store.backend() == Backend::Sqlite {
        let (leases, claims) =
            store.release_dead_owners().await.map_err(|e| Failed::fatal(format!("startup failed at recovery: {e}")))?;
        if leases + claims > 0 {
            tracing::warn!(leases, claims, "recovery: freed the episode leases and claims of a core that stopped");
        }
    }
    Ok(())
}

/// The effect handlers over `root`, which must hold neither the store nor its artifacts.
/// What the Ailang.* handlers run with.
struct ToolOptions {
    program: PathBuf,
    examples: Option<PathBuf>,
    slots: Slots,
    timeout: std::time::Duration,
}

fn effect_handlers(
    root: &Path,
    location: &StoreLocation,
    archive_root: &Path,
    tool: ToolOptions,
) -> Result<Arc<world_core::effects::handlers::Effects>, Failed> {
    use world_core::effects::{ailang::AilangHandlers, handlers::Effects, workspace::WorkspaceHandlers, worktree};
    let mut outside: Vec<&Path> = vec![archive_root];
    if let Some(path) = location.sqlite_path() {
        outside.push(path);
    }
    let root = worktree::validate_workspace_root(root, &outside)
        .map_err(|e| Failed::refused(format!("--workspace-root {}: {e}", root.display())))?;
    let core = world_core::effects::core_binary_ref()
        .map_err(|e| Failed::fatal(format!("startup failed at effects: cannot hash this binary: {e}")))?;
    if let Some(examples) = &tool.examples
        && !examples.is_dir()
    {
        return Err(Failed::refused(format!("--examples-dir {}: not a directory", examples.display())));
    }
    let tool_ref = world_core::effects::file_ref(&tool.program)
        .map_err(|e| Failed::refused(format!("--tool-ailang-bin {}: cannot read it: {e}", tool.program.display())))?;
    tracing::info!(root = %root.display(), tool = %tool_ref, "serving effects in episode worktrees under the workspace root");
    let ailang = AilangHandlers::new(tool.program, tool_ref, tool.examples, tool.slots, tool.timeout);
    Ok(Arc::new(Effects::new(root, WorkspaceHandlers::new(core), ailang)))
}

/// Archives `binary` next to the store and bootstraps epoch 1 for its release.
pub async fn pin_interpreter(
    store: &Store,
    location: &StoreLocation,
    binary: &Path,
    artifacts: Option<&Path>,
    slots: &Slots,
) -> Result<Interpreter, Failed> {
    let archive = Archive::for_store(location, artifacts).map_err(Failed::refused)?;
    let interpreter =
        archive.archive(binary, slots).await.map_err(|e| Failed::fatal(format!("startup failed at archive: {e}")))?;
    let release = interpreter.release();
    registry::bootstrap_epochs(store, &release)
        .await
        .map_err(|e| Failed::fatal(format!("startup failed at registry-bootstrap: {e}")))?;
    tracing::info!(interpreter = %interpreter.reference, %release, "interpreter archived and pinned");
    Ok(interpreter)
}

/// Prints the startup line and serves until `shutdown` resolves, or until a SQLite store's file
/// or serving lock is removed or replaced ([`StoreFiles`]): then calls in flight answer "not
/// committed" and the core stops with the reason, a fatal failure.
pub async fn serve_grpc(
    core: Arc<Core>,
    listener: TcpListener,
    location: &StoreLocation,
    watched: Option<StoreFiles>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Outcome {
    let address = listener.local_addr().map_err(Failed::fatal)?;
    let gone = core.store_gone.clone();
    if let Some(files) = watched {
        let gone = gone.clone();
        tokio::spawn(async move { gone.declare(files.changed(WATCH_INTERVAL).await) });
    }
    let router = world_core::grpc::router(core).map_err(Failed::fatal)?;
    println!("world-core listening on grpc://{address}");
    tracing::info!(%address, store = %location, "world-core serving");
    // Small request/reply frames: without TCP_NODELAY each one can wait out
    // a delayed ACK (~40 ms) on loopback.
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let stopping = async {
        tokio::select! {
            () = shutdown => {}
            () = gone.wait() => {}
        }
    };
    let served = router.serve_with_incoming_shutdown(incoming, stopping);
    // Calls in flight have their answer at once when the store goes; the rest get a moment.
    let abandoned = async {
        gone.wait().await;
        tokio::time::sleep(STORE_GONE_GRACE).await;
    };
    tokio::select! {
        served = served => served.map_err(|e| Failed::fatal(format!("the gRPC server failed: {e}")))?,
        () = abandoned => {}
    }
    match gone.reason() {
        Some(reason) => Err(Failed::fatal(format!(
            "stopped serving: {reason}; whatever this core committed from then on is lost with it, and calls \
             in flight were answered as not committed. Restore the store (or point --store at the right \
             one) and start the core again"
        ))),
        None => Ok(()),
    }
}

/// The files a SQLite core serves from, as it opened them, for [`serve_grpc`] to watch.
pub fn store_files(location: &StoreLocation, serving_lock: &ServingLock) -> Result<Option<StoreFiles>, Failed> {
    let (Some(store), Some((lock_path, lock))) = (location.sqlite_path(), serving_lock.file()) else {
        return Ok(None);
    };
    let files = StoreFiles::new(store, lock_path, lock)
        .map_err(|e| Failed::fatal(format!("cannot watch the store {}: {e}", store.display())))?;
    Ok(Some(files))
}

/// Installs SIGINT and SIGTERM handlers now; the future resolves on either.
pub fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutdown requested; draining");
    })
}

/// `GET /metrics` in Prometheus text on its own listener, in the background.
pub async fn serve_metrics(core: Arc<Core>, address: SocketAddr) -> Outcome {
    let listener = TcpListener::bind(address)
        .await
        .map_err(|e| Failed::fatal(format!("cannot listen for metrics on {address}: {e}")))?;
    let bound = listener.local_addr().map_err(Failed::fatal)?;
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let core = Arc::clone(&core);
            async move { ([("content-type", "text/plain; version=0.0.4")], core.render_metrics()) }
        }),
    );
    println!("world-core metrics on http://{bound}/metrics");
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "the metrics listener failed");
        }
    });
    Ok(())
}
