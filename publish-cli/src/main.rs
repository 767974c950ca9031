//! `world-publish`: the attended, offline writer of a store's transition
//! registry. Every fence refusal prints one `STOP fence=… [reason=…]` line
//! (then an indented detail) and exits 3; nothing is written.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use world_core::archive::{Archive, Interpreter};
use world_core::attended;
use world_core::limits;
use world_core::publish::{self, Outcome};
use world_core::store::{LockError, LockMode, OpenMode, ServingLock, Store, StoreLocation};
use world_core::subprocess::Slots;
use world_model::HashRef;

#[derive(Parser)]
#[command(
    name = "world-publish",
    version,
    about = "The attended, offline writer of a World store's transition registry",
    after_help = "Exit codes: 0 done · 1 failed · 2 usage · 3 STOP (a fence refused; nothing happened)"
)]
struct Cli {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Subcommand)]
enum Verb {
    /// Publish a descriptor manifest into the store's transition registry
    /// (attended: type the confirmation phrase at the terminal; the core
    /// must not be serving the store).
    Transitions(TransitionsArgs),
}

#[derive(clap::Args)]
struct TransitionsArgs {
    /// The store: a SQLite file path or a postgres:// URL.
    #[arg(long, env = "WORLD_STORE", default_value = "")]
    store: String,
    /// The descriptor manifest (a JSON array); transitionFnFile paths are
    /// relative to the current directory.
    #[arg(long, default_value = "")]
    manifest: String,
    /// Archive this interpreter now (as serve does) and pin it.
    #[arg(long)]
    ailang_bin: Option<PathBuf>,
    /// Pin an interpreter already archived next to the store.
    #[arg(long)]
    interpreter_ref: Option<String>,
    /// Where interpreter archives live (default `<store>.artifacts/` for SQLite).
    #[arg(long, env = "WORLD_ARTIFACTS")]
    artifacts: Option<PathBuf>,
    /// Refused: this verb performs no public write.
    #[arg(long)]
    live: bool,
}

/// How a run ended, for the exit code.
enum End {
    Done,
    Failed(String),
    Usage(String),
    Stop { fence: &'static str, reason: &'static str, detail: String },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Verb::Transitions(args) = cli.verb;
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("world-publish: cannot start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(transitions(args)) {
        End::Done => ExitCode::SUCCESS,
        End::Failed(message) => {
            eprintln!("world-publish transitions: {message}");
            ExitCode::from(1)
        }
        End::Usage(message) => {
            eprintln!("world-publish transitions: {message}");
            ExitCode::from(2)
        }
        End::Stop { fence, reason, detail } => {
            eprintln!("STOP fence={fence} reason={reason}");
            eprintln!("  {detail}");
            ExitCode::from(3)
        }
    }
}

async fn transitions(args: TransitionsArgs) -> End {
    if args.live {
        return End::Stop {
            fence: "mode",
            reason: "transitions-is-read-only",
            detail: "transitions performs no public write; --live is refused rather than ignored".into(),
        };
    }
    if args.store.trim().is_empty() {
        return End::Stop {
            fence: "store",
            reason: "absent",
            detail: "--store names the world database this publish is recorded in".into(),
        };
    }
    if args.manifest.trim().is_empty() {
        return End::Usage("--manifest names the descriptor manifest file".into());
    }
    let location = match StoreLocation::parse(&args.store) {
        Ok(location) => location,
        Err(error) => return End::Usage(error),
    };
    let unopenable = |cause: String| End::Stop {
        fence: "store",
        reason: "unopenable",
        detail: format!("opening {} failed: {cause}", location.redacted()),
    };
    // Taken before the store opens and held to the end: no core may serve
    // while the registry is written.
    let _lock = match ServingLock::acquire(&location, LockMode::Exclusive).await {
        Ok(lock) => lock,
        Err(error @ LockError::Held(_)) => {
            eprintln!(
                "world-publish transitions: {error} — the transition registry is written under single-writer \
                 authority; stop the core first"
            );
            return unopenable(error.to_string());
        }
        Err(error) => return unopenable(error.to_string()),
    };
    let store = match Store::open(&location, OpenMode::CreateIfMissing).await {
        Ok(store) => store,
        Err(error) => return unopenable(error.to_string()),
    };
    let end = publish_with(&store, &location, args).await;
    store.close().await;
    end
}

async fn publish_with(store: &Store, location: &StoreLocation, args: TransitionsArgs) -> End {
    let bytes = match std::fs::read(&args.manifest) {
        Ok(bytes) => bytes,
        Err(error) => return End::Failed(format!("read manifest: {error}")),
    };
    let entries = match publish::parse_manifest(&bytes, &args.manifest) {
        Ok(entries) => entries,
        Err(error) => return End::Failed(error),
    };
    // The phrase names the store without its password (secrets are never shown).
    if let Some(stop) = attended_gate(entries.len(), &args.manifest, &location.redacted()) {
        return stop;
    }
    let archive = match Archive::for_store(location, args.artifacts.as_deref()) {
        Ok(archive) => archive,
        Err(error) => return End::Failed(error.to_string()),
    };
    let slots = Slots::new(limits::MAX_SUBPROCESSES);
    let interpreter = match pin(&archive, args.ailang_bin.as_deref(), args.interpreter_ref.as_deref(), &slots).await {
        Ok(interpreter) => interpreter,
        Err(error) => return End::Failed(error),
    };
    let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let changes = match publish::build_changes(store, &interpreter, entries, &base, &slots).await {
        Ok(changes) => changes,
        Err(error) => return End::Failed(error),
    };
    let outcome = match publish::publish_set(store, &archive, &changes, &slots).await {
        Ok(outcome) => outcome,
        Err(error) => return End::Failed(error),
    };
    if let Some(epoch) = changes.derived_epoch {
        println!(
            "semantics epoch {epoch} derived from world/epoch-registry/v1 for interpreter release {:?}",
            interpreter.release()
        );
    }
    match outcome {
        Outcome::Published { revision, head } => println!(
            "published transition registry revision {revision} (head {head}); the daemon's A2A card will list these \
             skills on its next read"
        ),
        Outcome::Unchanged { revision, head } => {
            println!("transition registry UNCHANGED at revision {revision} (head {head}); nothing written")
        }
    }
    End::Done
}

/// The CI tripwire, the controlling terminal, and the typed phrase.
fn attended_gate(count: usize, manifest: &str, store: &str) -> Option<End> {
    if attended::ci_is_set() {
        return Some(End::Stop {
            fence: "ci",
            reason: "ci",
            detail: "CI is set; this command is never run in CI".into(),
        });
    }
    let mut terminal = match attended::open_terminal() {
        Ok(terminal) => terminal,
        Err(error) => {
            return Some(End::Stop {
                fence: "tty",
                reason: "no-controlling-terminal",
                detail: format!(
                    "opening /dev/tty failed: {error}; there is no controlling terminal here (an agent harness, setsid, \
                     cron or CI). fix: run it yourself from a terminal window (an IDE terminal pane works); an agent \
                     cannot run this step"
                ),
            });
        }
    };
    let phrase = format!("publish {count} transitions to {store}");
    let prompt = format!(
        "Type exactly, to write a LOCAL transition-registry revision ({count} descriptor(s) from {manifest}):\n  {phrase}\n> "
    );
    match attended::ask_terminal(&mut terminal, &prompt) {
        Ok(Some(line)) if line.trim() == phrase => None,
        Ok(Some(_)) => Some(End::Stop {
            fence: "confirmation",
            reason: "mismatch",
            detail: format!(
                "the typed line is not the required confirmation phrase; nothing was written. Run it again and type \
                 exactly: {phrase}"
            ),
        }),
        Ok(None) | Err(_) => Some(End::Stop {
            fence: "confirmation",
            reason: "eof",
            detail: "the terminal closed before a confirmation line was typed".into(),
        }),
    }
}

/// Exactly one of `--ailang-bin` (archived now) or `--interpreter-ref` (already archived).
async fn pin(
    archive: &Archive,
    binary: Option<&Path>,
    reference: Option<&str>,
    slots: &Slots,
) -> Result<Interpreter, String> {
    match (binary, reference) {
        (Some(_), Some(_)) => Err("give exactly one of --ailang-bin or --interpreter-ref".into()),
        (None, None) => Err("the interpreter pin is required: --ailang-bin B archives B now (as the core does at \
                             startup), or --interpreter-ref R names an interpreter already archived next to the store"
            .into()),
        (Some(binary), None) => archive.archive(binary, slots).await.map_err(|e| format!("archive interpreter: {e}")),
        (None, Some(text)) => {
            let reference = HashRef::parse(text).map_err(|e| format!("--interpreter-ref: {e}"))?;
            archive
                .resolve(&reference)
                .map_err(|e| format!("interpreter \"{reference}\" is not archived next to the store: {e}"))
        }
    }
}
