//! Sessions: minting bearer credentials and resolving them on every request.

use world_model::registry::TRANSITION_REGISTRY;
use world_model::{
    Credential, Episode, Grant, HashRef, SessionDenial, mint_token_hex, parse_authorization, resolve_expiry,
};

use crate::store::{Reader, SessionRow, Store, StoreError};

/// A live session, as resolved for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionBinding {
    pub episode: Episode,
    pub grants: Vec<Grant>,
    pub expires_at: i64,
    pub created_at: i64,
    /// The transition registry's head, read in the same statement as the session.
    pub registry_head: Option<HashRef>,
}

impl SessionBinding {
    /// Whose calls this session reads: every episode's while it holds a live `Log.Read` at
    /// `world` (checked on each request, never debited), else its own episode's.
    pub fn reader(&self, now: i64) -> Reader {
        if world_model::reads_every_episode(&self.grants, now) {
            Reader::Everything
        } else {
            Reader::Episode(self.episode.as_str().to_owned())
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("session denied: {}", .0.code())]
    Denied(SessionDenial),
    /// Not a denial: the store could not answer.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Resolves an `Authorization` header value, fresh from the store.
pub async fn resolve(store: &Store, authorization: Option<&str>, now: i64) -> Result<SessionBinding, ResolveError> {
    let credential = parse_authorization(authorization).map_err(ResolveError::Denied)?;
    let (row, registry_head) = store
        .session_and_registry_head(&credential.credential_id(), TRANSITION_REGISTRY)
        .await?
        .ok_or(ResolveError::Denied(SessionDenial::Unknown))?;
    resolve_expiry(now, row.expires_at).map_err(ResolveError::Denied)?;
    // A row we cannot read is treated as no row: it grants nothing.
    let unknown = || ResolveError::Denied(SessionDenial::Unknown);
    let grants: Vec<Grant> = serde_json::from_str(&row.grants_json).map_err(|_| unknown())?;
    let episode = Episode::parse(&row.episode).map_err(|_| unknown())?;
    Ok(SessionBinding { episode, grants, expires_at: row.expires_at, created_at: row.created_at, registry_head })
}

/// What minting produced. `token` is the bearer credential: shown once, never stored.
pub struct Minted {
    pub token: String,
    pub credential_id: String,
    pub expires_at: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum MintError {
    #[error("at least one --grant EFFECT=SCOPE:BUDGET is required")]
    NoGrants,
    #[error("--ttl must be non-negative")]
    NegativeTtl,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Grants specs are applied with the session's expiry (`now + ttl`).
pub async fn mint(
    store: &Store,
    episode: &Episode,
    grants: &[Grant],
    ttl_seconds: i64,
    now: i64,
    random: [u8; 32],
) -> Result<Minted, MintError> {
    if grants.is_empty() {
        return Err(MintError::NoGrants);
    }
    if ttl_seconds < 0 {
        return Err(MintError::NegativeTtl);
    }
    let (minted, row) = new_session(episode, grants, now.saturating_add(ttl_seconds), now, random)?;
    store.insert_session(&row).await?;
    Ok(minted)
}

/// A new session credential and the row that stores it (not yet stored): its grants expire
/// with it, at `expires_at`.
pub fn new_session(
    episode: &Episode,
    grants: &[Grant],
    expires_at: i64,
    now: i64,
    random: [u8; 32],
) -> Result<(Minted, SessionRow), StoreError> {
    let grants: Vec<Grant> = grants.iter().map(|g| Grant { expires_at, ..g.clone() }).collect();
    let token = mint_token_hex(random);
    let credential =
        Credential::from_token(&token).map_err(|_| StoreError::Damaged("minted token is malformed".into()))?;
    let credential_id = credential.credential_id();
    let grants_json = serde_json::to_string(&grants).map_err(|e| StoreError::Damaged(e.to_string()))?;
    let row = SessionRow {
        credential_id: credential_id.clone(),
        episode: episode.as_str().to_owned(),
        grants_json,
        expires_at,
        created_at: now,
    };
    Ok((Minted { token, credential_id, expires_at }, row))
}

/// 32 bytes from the operating system's CSPRNG.
pub fn random_bytes() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes);
    bytes
}

/// Unix seconds.
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
