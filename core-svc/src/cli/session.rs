//! `world-core session mint|approve|deny|list|revoke`: act on the store directly, beside
//! a serving core if there is one (sessions are read fresh per request). `approve` and `deny`
//! decide an MCP client's sign-in by the approval code its sign-in page shows.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use clap::Subcommand;
use world_core::session::{self, now_unix};
use world_core::store::{Approval, OpenMode, SessionOrigin, SessionRow};
use world_core::{attended, oauth};
use world_model::{Episode, Grant};

use super::{Failed, Outcome, open_store, parse_location};

#[derive(Subcommand)]
pub enum SessionCommand {
    /// Mint a session credential (attended: confirm y/N at the terminal).
    Mint {
        /// The store: a SQLite file path or a postgres:// URL.
        #[arg(long, env = "WORLD_STORE")]
        store: String,
        #[command(flatten)]
        terms: SessionTerms,
        /// Write the credential to this new file (mode 0600) instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Approve an MCP client's sign-in by the approval code its sign-in page shows (attended:
    /// confirm y/N at the terminal); the client receives a session of these terms.
    Approve {
        /// The approval code shown on the sign-in page (XXXX-XXXX).
        code: String,
        #[arg(long, env = "WORLD_STORE")]
        store: String,
        #[command(flatten)]
        terms: SessionTerms,
    },
    /// Deny an MCP client's sign-in by the approval code its sign-in page shows.
    Deny {
        /// The approval code shown on the sign-in page (XXXX-XXXX).
        code: String,
        #[arg(long, env = "WORLD_STORE")]
        store: String,
    },
    /// List sessions (never shows credentials).
    List {
        #[arg(long, env = "WORLD_STORE")]
        store: String,
        /// Only this episode's sessions.
        #[arg(long)]
        episode: Option<String>,
        /// Print a JSON array instead of text rows.
        #[arg(long)]
        json: bool,
    },
    /// Revoke one session by credential id, or every session of an episode.
    Revoke {
        #[arg(long, env = "WORLD_STORE")]
        store: String,
        /// The credential id (64 hex) shown by mint and list.
        #[arg(required_unless_present = "episode", conflicts_with = "episode")]
        credential_id: Option<String>,
        #[arg(long)]
        episode: Option<String>,
    },
}

/// What a session is for: its episode, grants and lifetime (`mint` and `approve` alike).
#[derive(clap::Args)]
pub struct SessionTerms {
    /// The episode the session acts in (budget ledger and worktree name).
    #[arg(long)]
    episode: String,
    /// A grant EFFECT=SCOPE:BUDGET (repeatable; the budget follows the last ':').
    #[arg(long = "grant", value_name = "EFFECT=SCOPE:BUDGET", required_unless_present = "preset")]
    grants: Vec<String>,
    /// Grants by name: `se-tools` grants every coding-tool effect (Workspace.Read,
    /// Workspace.Write, Ailang.Check, Ailang.Run, Ailang.Discover, Ailang.CLI) at scope
    /// worktree; `operator` grants Log.Read at scope world: reading every episode's calls.
    #[arg(long, value_parser = ["se-tools", "operator"])]
    preset: Option<String>,
    /// Each preset grant's budget, in calls.
    #[arg(long, default_value_t = world_model::PRESET_BUDGET, requires = "preset")]
    budget: i64,
    /// Seconds until the session and its grants expire.
    #[arg(long, default_value_t = 3600)]
    ttl: i64,
}

impl SessionTerms {
    /// The episode and grants, checked; grants expire when the session does, stamped later.
    fn parse(&self) -> Result<(Episode, Vec<Grant>), Failed> {
        let episode = Episode::parse(&self.episode).map_err(|e| Failed::refused(format!("invalid --episode: {e}")))?;
        if self.ttl < 0 {
            return Err(Failed::refused("--ttl must be non-negative"));
        }
        let mut grants: Vec<Grant> = self
            .grants
            .iter()
            .map(|spec| Grant::parse_cli(spec, 0))
            .collect::<Result<_, _>>()
            .map_err(Failed::refused)?;
        if let Some(name) = &self.preset {
            if self.budget < 0 {
                return Err(Failed::refused("--budget must be non-negative"));
            }
            grants.extend(world_model::preset_grants(name, self.budget, 0).unwrap_or_default());
        }
        Ok((episode, grants))
    }
}

pub async fn run(command: SessionCommand) -> Outcome {
    match command {
        SessionCommand::Mint { store, terms, out } => mint(&store, &terms, out).await,
        SessionCommand::Approve { code, store, terms } => approve(&store, &code, &terms).await,
        SessionCommand::Deny { code, store } => deny(&store, &code).await,
        SessionCommand::List { store, episode, json } => list(&store, episode.as_deref(), json).await,
        SessionCommand::Revoke { store, credential_id, episode } => revoke(&store, credential_id, episode).await,
    }
}

async fn mint(store: &str, terms: &SessionTerms, out: Option<PathBuf>) -> Outcome {
    let (episode, grants) = terms.parse()?;
    let ttl = terms.ttl;
    if let Some(path) = &out
        && path.exists()
    {
        return Err(Failed::refused(format!("refusing: --out {} already exists; choose a new file", path.display())));
    }
    let location = parse_location(store)?;
    let store = open_store(&location, OpenMode::MustExist).await?;

    let prompt = format!(
        "Confirm mint for episode {episode} ({} grant(s), expiry +{ttl}s) with a session credential? [y/N] ",
        grants.len()
    );
    let confirmed = tokio::task::spawn_blocking(move || attended::confirm_yes("session mint", &prompt))
        .await
        .map_err(Failed::fatal)?;
    confirmed.map_err(Failed::refused)?;

    let minted = session::mint(&store, &episode, &grants, ttl, now_unix(), session::random_bytes())
        .await
        .map_err(Failed::fatal)?;
    eprintln!(
        "world-core session mint: credential_id={} (episode {episode}, {} grant(s), expires {})",
        minted.credential_id,
        grants.len(),
        minted.expires_at
    );
    match out {
        None => println!("{}", minted.token),
        Some(path) => {
            if let Err(error) = write_secret(&path, &minted.token) {
                // The credential reached nobody: take the session back.
                let _ = store.delete_session(&minted.credential_id).await;
                return Err(Failed::fatal(format!(
                    "cannot write {}: {error}; the minted session was revoked",
                    path.display()
                )));
            }
            println!(
                "minted session credential for episode {episode}: {} grant(s), expires epoch {}, written to {}",
                grants.len(),
                minted.expires_at,
                path.display()
            );
        }
    }
    store.close().await;
    Ok(())
}

/// `session approve CODE`: the sign-in waiting with that approval code gets a session of
/// `terms`, once the operator confirms at the terminal; its page then sends the browser back
/// to the client with an authorization code.
async fn approve(store: &str, code: &str, terms: &SessionTerms) -> Outcome {
    let (episode, grants) = terms.parse()?;
    let ttl = terms.ttl;
    let location = parse_location(store)?;
    let store = open_store(&location, OpenMode::MustExist).await?;
    let approval = oauth::pending_approval(&store, code, now_unix()).await.map_err(decide_failed)?;
    let prompt = format!(
        "Approve sign-in of {} (the browser returns to {}) for episode {episode} ({} grant(s), expiry +{ttl}s) \
         with a session credential? [y/N] ",
        approval.client_name,
        approval.redirect_uri,
        grants.len()
    );
    let confirmed = tokio::task::spawn_blocking(move || attended::confirm_yes("session approve", &prompt))
        .await
        .map_err(Failed::fatal)?;
    confirmed.map_err(Failed::refused)?;
    let grants_json = serde_json::to_string(&grants).map_err(Failed::fatal)?;
    let now = now_unix();
    let decision =
        Approval { episode: episode.as_str().to_owned(), grants_json, session_expires_at: now.saturating_add(ttl) };
    let decided =
        store.decide_oauth_approval(&approval.approval_id, Some(&decision), now).await.map_err(Failed::fatal)?;
    store.close().await;
    if !decided {
        return Err(Failed::refused(
            "refusing: the sign-in is no longer waiting (it expired or was decided meanwhile); nothing was approved",
        ));
    }
    println!(
        "approved sign-in of {} for episode {episode}: {} grant(s), expires epoch {}; its page now returns to the client",
        approval.client_name,
        grants.len(),
        decision.session_expires_at
    );
    Ok(())
}

/// `session deny CODE`: the sign-in's page sends the browser back with `access_denied`.
async fn deny(store: &str, code: &str) -> Outcome {
    let location = parse_location(store)?;
    let store = open_store(&location, OpenMode::MustExist).await?;
    let now = now_unix();
    let approval = oauth::pending_approval(&store, code, now).await.map_err(decide_failed)?;
    let decided = store.decide_oauth_approval(&approval.approval_id, None, now).await.map_err(Failed::fatal)?;
    store.close().await;
    if !decided {
        return Err(Failed::refused(
            "refusing: the sign-in is no longer waiting (it expired or was decided meanwhile)",
        ));
    }
    println!("denied sign-in of {}; its page now returns to the client with access_denied", approval.client_name);
    Ok(())
}

fn decide_failed(error: oauth::DecideError) -> Failed {
    match error {
        oauth::DecideError::Store(error) => Failed::fatal(error),
        refused => Failed::refused(format!("refusing: {refused}")),
    }
}

/// Creates a new file readable by its owner only.
fn write_secret(path: &std::path::Path, token: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    file.write_all(format!("{token}\n").as_bytes())?;
    file.sync_all()
}

async fn list(store: &str, episode: Option<&str>, json: bool) -> Outcome {
    let location = parse_location(store)?;
    let store = open_store(&location, OpenMode::MustExist).await?;
    let rows = store.list_sessions(episode).await.map_err(Failed::fatal)?;
    let origins = store.session_origins().await.map_err(Failed::fatal)?;
    store.close().await;
    let now = now_unix();
    if json {
        let items: Vec<serde_json::Value> =
            rows.iter().map(|row| session_json(row, origins.get(&row.credential_id), now)).collect();
        let text = serde_json::to_string_pretty(&items).map_err(Failed::fatal)?;
        println!("{text}");
        return Ok(());
    }
    for row in &rows {
        let live = if now > row.expires_at { "expired" } else { "live" };
        let grants: Vec<String> =
            decoded_grants(row).iter().map(|g| format!("{}={}:{}", g.effect, g.scope, g.budget)).collect();
        let minted = match origins.get(&row.credential_id) {
            Some(origin) => format!("approved for {:?}", origin.client_name),
            None => "minted at the terminal".to_owned(),
        };
        println!(
            "{}  {:<12} {:<7} expires {}  {}  ({minted})",
            row.credential_id,
            row.episode,
            live,
            rfc3339_utc(row.expires_at),
            grants.join(" ")
        );
    }
    println!("{} session credential(s)", rows.len());
    Ok(())
}

fn decoded_grants(row: &SessionRow) -> Vec<Grant> {
    let mut grants: Vec<Grant> = serde_json::from_str(&row.grants_json).unwrap_or_default();
    grants.sort_by(|a, b| (&a.effect, &a.scope).cmp(&(&b.effect, &b.scope)));
    grants
}

fn session_json(row: &SessionRow, origin: Option<&SessionOrigin>, now: i64) -> serde_json::Value {
    let minted = match origin {
        Some(origin) => serde_json::json!({
            "by": "approval",
            "clientId": origin.client_id,
            "clientName": origin.client_name,
        }),
        None => serde_json::json!({"by": "terminal"}),
    };
    serde_json::json!({
        "credentialId": row.credential_id,
        "episode": row.episode,
        "live": now <= row.expires_at,
        "createdAt": row.created_at,
        "expiresAt": row.expires_at,
        "grants": decoded_grants(row),
        "minted": minted,
    })
}

async fn revoke(store_text: &str, credential_id: Option<String>, episode: Option<String>) -> Outcome {
    let location = parse_location(store_text)?;
    if let Some(id) = &credential_id
        && (id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(Failed::refused(format!("credential id {id:?} is not 64 hex characters")));
    }
    let store = open_store(&location, OpenMode::MustExist).await?;
    // A session minted under a sign-in approval takes the approval's other sessions and
    // refresh tokens with it.
    let revoked = match (&credential_id, &episode) {
        (Some(id), _) => store.revoke_session(&id.to_ascii_lowercase(), now_unix()).await.map_err(Failed::fatal)?,
        (None, Some(episode)) => store.revoke_episode(episode, now_unix()).await.map_err(Failed::fatal)?,
        (None, None) => return Err(Failed::refused("pass a credential id or --episode")),
    };
    store.close().await;
    if revoked.is_empty() {
        return Err(Failed::refused(match (credential_id, episode) {
            (Some(id), _) => format!(
                "refusing: no session credential {id} in {location} (already revoked, or minted in another store); nothing was revoked"
            ),
            (None, episode) => {
                format!("refusing: episode {} has no session credential in {location}", episode.unwrap_or_default())
            }
        }));
    }
    for id in revoked {
        println!("revoked session credential {id}");
    }
    Ok(())
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC).
pub fn rfc3339_utc(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Civil-from-days (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs % 3600 / 60, secs % 60)
}

#[cfg(test)]
mod tests {
    use super::rfc3339_utc;

    #[test]
    fn unix_seconds_render_as_rfc3339_utc() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339_utc(1_796_230_861), "2026-12-02T17:01:01Z");
    }
}
