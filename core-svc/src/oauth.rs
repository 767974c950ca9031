//! OAuth sign-in, the core's side: registering public clients, opening an approval for an
//! authorization request, telling the page where the browser goes once the operator decided,
//! and the token endpoint's two grants. Every access token is a session credential minted here
//! for the episode, grants and expiry the operator approved; the rules (redirect URIs, PKCE,
//! codes, error codes) are world_model::oauth's.
//!
//! A reused authorization code or refresh token ends the whole chain of its approval: every
//! session minted under it is deleted and no refresh token of it works again.

use world_model::oauth::{
    self, APPROVAL_TTL, CODE_TTL, MAX_CLIENT_NAME_LEN, MAX_REDIRECT_URIS, MAX_STATE_LEN, OAuthError, OAuthErrorCode,
    RedirectUri, UNNAMED_CLIENT,
};
use world_model::{Episode, Grant};
use world_proto::v1 as pb;

use crate::session;
use crate::store::{ApprovalRow, ApprovalStatus, ClientRow, NewApproval, Rotation, Store, StoreError};

/// What a client asks to be registered with (RFC 7591 §2), as the edge forwards it.
pub type Registration = pb::RegisterClientRequest;

/// An authorization request's parameters, as sent.
pub type AuthorizationRequest = pb::StartApprovalRequest;

/// What the authorization page does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalView {
    /// Show the approval code and wait for the operator.
    Pending { request: String, approval_code: String, client_name: String, redirect_uri: String, expires_at: i64 },
    /// Send the browser back to the client.
    Redirect(BrowserRedirect),
    /// Show the error; never redirect.
    Refused(OAuthError),
}

/// The client's redirect URI with the authorization response: a code, or an error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrowserRedirect {
    pub redirect_uri: String,
    pub state: Option<String>,
    pub outcome: Result<String, OAuthError>,
}

/// The token endpoint's request (RFC 6749 §4.1.3, §6), as sent.
pub type TokenRequest = pb::ExchangeTokenRequest;

/// A token response: the session credential, its lifetime and the next refresh token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuedToken {
    pub access_token: String,
    pub credential_id: String,
    pub expires_in: i64,
    pub refresh_token: String,
}

/// Random bytes for the secrets a step draws (tests pass fixed ones).
pub type Random<'a> = &'a mut (dyn FnMut() -> [u8; 32] + Send);

fn error(code: OAuthErrorCode, description: impl Into<String>) -> OAuthError {
    OAuthError::new(code, description)
}

/// The store failed: the cause is logged here, once; callers see only that they may retry.
fn store_failed(error: StoreError) -> OAuthError {
    tracing::error!(%error, "oauth: the store failed");
    OAuthError::new(OAuthErrorCode::ServerError, "the store could not complete the request; retry")
}

/// The name a person sees for a client.
pub fn shown_name(client_name: &str) -> &str {
    if client_name.is_empty() { UNNAMED_CLIENT } else { client_name }
}

pub async fn register(
    store: &Store,
    registration: Registration,
    now: i64,
    random: Random<'_>,
) -> Result<ClientRow, OAuthError> {
    let metadata = |description: String| error(OAuthErrorCode::InvalidClientMetadata, description);
    if registration.redirect_uris.is_empty() {
        return Err(error(OAuthErrorCode::InvalidRedirectUri, "redirect_uris is missing: register at least one"));
    }
    if registration.redirect_uris.len() > MAX_REDIRECT_URIS {
        return Err(error(
            OAuthErrorCode::InvalidRedirectUri,
            format!("at most {MAX_REDIRECT_URIS} redirect_uris may be registered"),
        ));
    }
    for uri in &registration.redirect_uris {
        RedirectUri::parse(uri).map_err(|e| error(OAuthErrorCode::InvalidRedirectUri, e.to_string()))?;
    }
    if !matches!(registration.token_endpoint_auth_method.as_str(), "" | "none") {
        return Err(metadata(format!(
            "token_endpoint_auth_method {:?} is not supported: only public clients (none) register here",
            registration.token_endpoint_auth_method
        )));
    }
    if let Some(grant) =
        registration.grant_types.iter().find(|g| !matches!(g.as_str(), "authorization_code" | "refresh_token"))
    {
        return Err(metadata(format!(
            "grant type {grant:?} is not supported (authorization_code and refresh_token are)"
        )));
    }
    if !registration.grant_types.is_empty() && !registration.grant_types.iter().any(|g| g == "authorization_code") {
        return Err(metadata("grant_types must include authorization_code".to_owned()));
    }
    if let Some(kind) = registration.response_types.iter().find(|r| *r != "code") {
        return Err(metadata(format!("response type {kind:?} is not supported (code is)")));
    }
    if registration.client_name.chars().count() > MAX_CLIENT_NAME_LEN
        || registration.client_name.chars().any(char::is_control)
    {
        return Err(metadata(format!(
            "client_name must be at most {MAX_CLIENT_NAME_LEN} characters without control characters"
        )));
    }
    let client = ClientRow {
        client_id: hex::encode(&random()[..16]),
        client_name: registration.client_name.trim().to_owned(),
        redirect_uris: registration.redirect_uris,
        created_at: now,
    };
    store.insert_oauth_client(&client).await.map_err(store_failed)?;
    Ok(client)
}

/// Opens a pending approval for an authorization request, or says where the browser goes (or
/// that it goes nowhere) instead.
pub async fn start(
    store: &Store,
    request: AuthorizationRequest,
    now: i64,
    random: Random<'_>,
) -> Result<ApprovalView, OAuthError> {
    let refused = |description: String| Ok(ApprovalView::Refused(error(OAuthErrorCode::InvalidRequest, description)));
    if request.client_id.is_empty() {
        return refused("client_id is missing".to_owned());
    }
    let Some(client) = store.oauth_client(&request.client_id).await.map_err(store_failed)? else {
        return Ok(ApprovalView::Refused(error(
            OAuthErrorCode::InvalidClient,
            format!("client_id {:?} is not registered here; the client must register first", request.client_id),
        )));
    };
    let redirect_uri = match (request.redirect_uri.as_str(), client.redirect_uris.as_slice()) {
        ("", [only]) => only.clone(),
        ("", _) => return refused("redirect_uri is missing".to_owned()),
        (requested, registered) => {
            let admitted = registered.iter().any(|uri| RedirectUri::parse(uri).is_ok_and(|uri| uri.admits(requested)));
            if !admitted {
                return refused(format!(
                    "redirect_uri {requested:?} is not registered for {}",
                    shown_name(&client.client_name)
                ));
            }
            requested.to_owned()
        }
    };
    // From here the redirect URI is the client's own: refusals go back to it.
    let back = |state: Option<String>, code: OAuthErrorCode, description: &str| {
        Ok(ApprovalView::Redirect(BrowserRedirect {
            redirect_uri: redirect_uri.clone(),
            state,
            outcome: Err(error(code, description)),
        }))
    };
    if request.state.as_ref().is_some_and(|state| state.len() > MAX_STATE_LEN) {
        return back(None, OAuthErrorCode::InvalidRequest, "state is longer than 1000 characters");
    }
    let state = request.state;
    if request.response_type != "code" {
        return back(state, OAuthErrorCode::UnsupportedResponseType, "response_type must be code");
    }
    if request.code_challenge.is_empty() {
        return back(state, OAuthErrorCode::InvalidRequest, "code_challenge is missing: PKCE with S256 is required");
    }
    if request.code_challenge_method != "S256" {
        return back(
            state,
            OAuthErrorCode::InvalidRequest,
            "code_challenge_method must be S256 (plain is not accepted)",
        );
    }
    if !oauth::challenge_is_well_formed(&request.code_challenge) {
        return back(
            state,
            OAuthErrorCode::InvalidRequest,
            "code_challenge must be the unpadded base64url SHA-256 of the verifier (43 characters)",
        );
    }
    // An approval code's digest may collide with a live one's; a new request handle draws
    // another code.
    for _ in 0..4 {
        let handle = oauth::secret_text(random());
        let approval_code = oauth::approval_code_for(&handle);
        let approval = NewApproval {
            approval_id: hex::encode(&random()[..16]),
            request_hash: oauth::secret_digest(&handle),
            approval_code_hash: oauth::approval_code_digest(&approval_code).unwrap_or_default(),
            client_id: client.client_id.clone(),
            redirect_uri: redirect_uri.clone(),
            state: state.clone(),
            code_challenge: request.code_challenge.clone(),
            created_at: now,
            expires_at: now + APPROVAL_TTL,
        };
        if store.insert_oauth_approval(&approval).await.map_err(store_failed)? {
            return Ok(ApprovalView::Pending {
                request: handle,
                approval_code,
                client_name: shown_name(&client.client_name).to_owned(),
                redirect_uri,
                expires_at: approval.expires_at,
            });
        }
    }
    Err(error(OAuthErrorCode::TemporarilyUnavailable, "no free approval code could be drawn; retry"))
}

/// Where the page holding `request` stands: still waiting, or where the browser goes now. An
/// approved request hands out its one authorization code here.
pub async fn await_decision(
    store: &Store,
    request: &str,
    now: i64,
    random: Random<'_>,
) -> Result<ApprovalView, OAuthError> {
    let unknown = || {
        ApprovalView::Refused(error(
            OAuthErrorCode::InvalidRequest,
            "this sign-in request is unknown or already finished; start again from your client",
        ))
    };
    let Some(approval) = store.oauth_approval_by_request(&oauth::secret_digest(request)).await.map_err(store_failed)?
    else {
        return Ok(unknown());
    };
    let redirect = |outcome| {
        ApprovalView::Redirect(BrowserRedirect {
            redirect_uri: approval.redirect_uri.clone(),
            state: approval.state.clone(),
            outcome,
        })
    };
    let denied = |description: &str| Ok(redirect(Err(error(OAuthErrorCode::AccessDenied, description))));
    match approval.status {
        ApprovalStatus::Pending if now > approval.expires_at => {
            denied("the sign-in expired before the operator approved it")
        }
        ApprovalStatus::Pending => Ok(ApprovalView::Pending {
            request: request.to_owned(),
            approval_code: oauth::approval_code_for(request),
            client_name: shown_name(&approval.client_name).to_owned(),
            redirect_uri: approval.redirect_uri.clone(),
            expires_at: approval.expires_at,
        }),
        ApprovalStatus::Denied => denied("the operator denied this sign-in"),
        ApprovalStatus::Approved => {
            let code = oauth::secret_text(random());
            let issued = store
                .issue_oauth_code(&approval.approval_id, &oauth::secret_digest(&code), now + CODE_TTL)
                .await
                .map_err(store_failed)?;
            Ok(if issued { redirect(Ok(code)) } else { unknown() })
        }
        ApprovalStatus::Issued | ApprovalStatus::Redeemed | ApprovalStatus::Revoked => Ok(unknown()),
    }
}

/// The token endpoint: an authorization code or a refresh token exchanged for a new session
/// credential and the next refresh token.
pub async fn exchange(
    store: &Store,
    request: TokenRequest,
    now: i64,
    random: Random<'_>,
) -> Result<IssuedToken, OAuthError> {
    let missing = |name: &str| error(OAuthErrorCode::InvalidRequest, format!("{name} is missing"));
    let grant = |description: &str| error(OAuthErrorCode::InvalidGrant, description);
    if request.grant_type.is_empty() {
        return Err(missing("grant_type"));
    }
    if !matches!(request.grant_type.as_str(), "authorization_code" | "refresh_token") {
        return Err(error(
            OAuthErrorCode::UnsupportedGrantType,
            format!("grant_type {:?} is not supported (authorization_code and refresh_token are)", request.grant_type),
        ));
    }
    if request.client_id.is_empty() {
        return Err(missing("client_id"));
    }
    if store.oauth_client(&request.client_id).await.map_err(store_failed)?.is_none() {
        return Err(error(OAuthErrorCode::InvalidClient, "client_id is not registered here"));
    }
    if request.grant_type == "refresh_token" {
        return refresh(store, request, now, random).await;
    }
    for (name, value) in [("code", &request.code), ("redirect_uri", &request.redirect_uri)] {
        if value.is_empty() {
            return Err(missing(name));
        }
    }
    if request.code_verifier.is_empty() {
        return Err(error(OAuthErrorCode::InvalidRequest, "code_verifier is missing: PKCE is required"));
    }
    let Some(approval) =
        store.oauth_approval_by_authorization_code(&oauth::secret_digest(&request.code)).await.map_err(store_failed)?
    else {
        return Err(grant("the authorization code is unknown"));
    };
    if approval.client_id != request.client_id {
        return Err(grant("the authorization code was issued to another client"));
    }
    match approval.status {
        ApprovalStatus::Issued => {}
        ApprovalStatus::Redeemed | ApprovalStatus::Revoked => {
            end_chain(store, &approval.approval_id, now).await?;
            return Err(grant("the authorization code was already used; every session issued under it has been ended"));
        }
        _ => return Err(grant("the authorization code is unknown")),
    }
    if approval.code_expires_at.is_none_or(|expires| now > expires) {
        return Err(grant("the authorization code has expired; sign in again"));
    }
    if request.redirect_uri != approval.redirect_uri {
        return Err(grant("redirect_uri does not match the authorization request"));
    }
    if !oauth::verifier_matches(&request.code_verifier, &approval.code_challenge) {
        return Err(grant("code_verifier does not match the code_challenge"));
    }
    let (token, row, refresh_token) = mint_for(&approval, now, random)?;
    let refresh_hash = oauth::secret_digest(&refresh_token);
    if !store.redeem_oauth_code(&approval.approval_id, &row, &refresh_hash).await.map_err(store_failed)? {
        end_chain(store, &approval.approval_id, now).await?;
        return Err(grant("the authorization code was already used; every session issued under it has been ended"));
    }
    Ok(IssuedToken {
        expires_in: token.expires_at - now,
        access_token: token.token,
        credential_id: token.credential_id,
        refresh_token,
    })
}

async fn refresh(
    store: &Store,
    request: TokenRequest,
    now: i64,
    random: Random<'_>,
) -> Result<IssuedToken, OAuthError> {
    let grant = |description: &str| error(OAuthErrorCode::InvalidGrant, description);
    if request.refresh_token.is_empty() {
        return Err(error(OAuthErrorCode::InvalidRequest, "refresh_token is missing"));
    }
    let token_hash = oauth::secret_digest(&request.refresh_token);
    let Some(stored) = store.oauth_refresh_token(&token_hash).await.map_err(store_failed)? else {
        return Err(grant("the refresh token is unknown"));
    };
    let Some(approval) = store.oauth_approval(&stored.approval_id).await.map_err(store_failed)? else {
        return Err(grant("the refresh token is unknown"));
    };
    if approval.client_id != request.client_id {
        return Err(grant("the refresh token was issued to another client"));
    }
    let reused = "the refresh token was already used; every session issued under this sign-in has been ended";
    if stored.used_at.is_some() {
        end_chain(store, &approval.approval_id, now).await?;
        return Err(grant(reused));
    }
    if approval.status != ApprovalStatus::Redeemed {
        return Err(grant("this sign-in was revoked; sign in again"));
    }
    let (token, row, refresh_token) = mint_for(&approval, now, random)?;
    let next_hash = oauth::secret_digest(&refresh_token);
    match store
        .rotate_oauth_refresh(&token_hash, &approval.approval_id, &row, &next_hash, now)
        .await
        .map_err(store_failed)?
    {
        Rotation::Rotated => Ok(IssuedToken {
            expires_in: token.expires_at - now,
            access_token: token.token,
            credential_id: token.credential_id,
            refresh_token,
        }),
        Rotation::Refused => {
            end_chain(store, &approval.approval_id, now).await?;
            Err(grant(reused))
        }
    }
}

/// A new session of the approval's episode and grants, ending when the approval does, and a
/// refresh token; nothing is stored yet.
fn mint_for(
    approval: &ApprovalRow,
    now: i64,
    random: Random<'_>,
) -> Result<(session::Minted, crate::store::SessionRow, String), OAuthError> {
    let damaged =
        || store_failed(StoreError::Damaged(format!("oauth approval {} is incomplete", approval.approval_id)));
    let expires_at = approval.session_expires_at.ok_or_else(damaged)?;
    if now >= expires_at {
        return Err(error(OAuthErrorCode::InvalidGrant, "the approval has expired; sign in again"));
    }
    let episode = approval.episode.as_deref().and_then(|e| Episode::parse(e).ok()).ok_or_else(damaged)?;
    let grants: Vec<Grant> =
        approval.grants_json.as_deref().and_then(|g| serde_json::from_str(g).ok()).ok_or_else(damaged)?;
    let (minted, row) = session::new_session(&episode, &grants, expires_at, now, random()).map_err(store_failed)?;
    Ok((minted, row, oauth::secret_text(random())))
}

async fn end_chain(store: &Store, approval_id: &str, now: i64) -> Result<(), OAuthError> {
    let ended = store.end_oauth_chain(approval_id, now).await.map_err(store_failed)?;
    tracing::warn!(
        approval = approval_id,
        sessions = ended.len(),
        "oauth: a code or refresh token was reused; the sign-in's sessions were ended"
    );
    Ok(())
}

/// Why `session approve|deny` cannot act on an approval code.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("{0:?} is not an approval code (8 letters and digits, shown as XXXX-XXXX on the sign-in page)")]
    Malformed(String),
    #[error("no sign-in is waiting with approval code {0}; check the code on the sign-in page")]
    Unknown(String),
    #[error("the sign-in with approval code {0} expired; ask the client to sign in again")]
    Expired(String),
    #[error("the sign-in with approval code {code} was already {status}; nothing was changed")]
    Decided { code: String, status: &'static str },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The pending approval an approval code names, still open at `now`.
pub async fn pending_approval(store: &Store, typed: &str, now: i64) -> Result<ApprovalRow, DecideError> {
    let code = oauth::normalize_approval_code(typed).ok_or_else(|| DecideError::Malformed(typed.to_owned()))?;
    let shown = format!("{}-{}", &code[..4], &code[4..]);
    let approval =
        store.oauth_approval_by_code(&oauth::secret_digest(&code)).await?.ok_or(DecideError::Unknown(shown.clone()))?;
    match approval.status {
        ApprovalStatus::Pending if now > approval.expires_at => Err(DecideError::Expired(shown)),
        ApprovalStatus::Pending => Ok(approval),
        ApprovalStatus::Denied => Err(DecideError::Decided { code: shown, status: "denied" }),
        _ => Err(DecideError::Decided { code: shown, status: "approved" }),
    }
}
