//! OAuth sign-in's rows: registered clients, approvals, the sessions minted under each approval
//! and its refresh tokens. Secrets are kept only as their hex sha256 (world_model::oauth).
//! Every step that must happen once (deciding, handing out the code, exchanging it, rotating a
//! refresh token) is a conditional update inside a write transaction, so two edges, cores or
//! CLIs racing on the same row cannot both win.

use std::collections::HashMap;

use sqlx::Row;
use sqlx::any::AnyRow;

use super::sessions::insert_session_row;
use super::{SessionRow, Store, StoreError, WriteTx};

/// A registered public client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRow {
    pub client_id: String,
    pub client_name: String,
    pub redirect_uris: Vec<String>,
    pub created_at: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalStatus {
    /// Waiting for the operator.
    Pending,
    /// Approved; the code has not reached the browser yet.
    Approved,
    Denied,
    /// The code went to the browser and waits to be exchanged.
    Issued,
    /// The code was exchanged: the approval's sessions and refresh tokens live.
    Redeemed,
    /// Ended: by a revocation or a reused code or refresh token.
    Revoked,
}

impl ApprovalStatus {
    fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Denied => "denied",
            Self::Issued => "issued",
            Self::Redeemed => "redeemed",
            Self::Revoked => "revoked",
        }
    }

    fn parse(text: &str) -> Result<Self, StoreError> {
        Ok(match text {
            "pending" => Self::Pending,
            "approved" => Self::Approved,
            "denied" => Self::Denied,
            "issued" => Self::Issued,
            "redeemed" => Self::Redeemed,
            "revoked" => Self::Revoked,
            other => return Err(StoreError::Damaged(format!("oauth approval status {other:?}"))),
        })
    }
}

/// A new authorization request.
#[derive(Clone, Debug)]
pub struct NewApproval {
    pub approval_id: String,
    pub request_hash: String,
    pub approval_code_hash: String,
    pub client_id: String,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
    pub created_at: i64,
    pub expires_at: i64,
}

/// An approval as stored, with its client's name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalRow {
    pub approval_id: String,
    pub client_id: String,
    pub client_name: String,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
    pub status: ApprovalStatus,
    pub created_at: i64,
    /// Until when the operator may decide.
    pub expires_at: i64,
    /// Set once approved.
    pub episode: Option<String>,
    pub grants_json: Option<String>,
    pub session_expires_at: Option<i64>,
    pub code_expires_at: Option<i64>,
}

/// The operator's approval: where the sessions act and until when.
#[derive(Clone, Debug)]
pub struct Approval {
    pub episode: String,
    pub grants_json: String,
    pub session_expires_at: i64,
}

/// A refresh token as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefreshRow {
    pub approval_id: String,
    pub used_at: Option<i64>,
}

/// What presenting a refresh token did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rotation {
    /// A new session and refresh token were stored.
    Rotated,
    /// The token had been used before (or its chain had ended): nothing was minted.
    Refused,
}

/// How a session was minted under an approval: the client it was approved for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionOrigin {
    pub approval_id: String,
    pub client_id: String,
    pub client_name: String,
}

/// Pending rows older than this (seconds past their expiry) are removed as new ones arrive.
const PRUNE_AFTER: i64 = 86_400;

const APPROVAL_COLUMNS: &str = "a.approval_id, a.client_id, c.client_name, a.redirect_uri, a.state, \
     a.code_challenge, a.status, a.created_at, a.expires_at, a.episode, a.grants_json, a.session_expires_at, \
     a.code_expires_at FROM oauth_approvals a JOIN oauth_clients c ON c.client_id = a.client_id";

impl Store {
    pub async fn insert_oauth_client(&self, client: &ClientRow) -> Result<(), StoreError> {
        let uris = serde_json::to_string(&client.redirect_uris).map_err(|e| StoreError::Damaged(e.to_string()))?;
        let _turn = self.writer_turn().await;
        sqlx::query(
            "INSERT INTO oauth_clients (client_id, client_name, redirect_uris_json, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(client.client_id.as_str())
        .bind(client.client_name.as_str())
        .bind(uris)
        .bind(client.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn oauth_client(&self, client_id: &str) -> Result<Option<ClientRow>, StoreError> {
        const SQL: &str =
            "SELECT client_id, client_name, redirect_uris_json, created_at FROM oauth_clients WHERE client_id = $1";
        self.row_by(SQL, client_id, |row| {
            let uris: String = row.try_get("redirect_uris_json")?;
            Ok(ClientRow {
                client_id: row.try_get("client_id")?,
                client_name: row.try_get("client_name")?,
                redirect_uris: serde_json::from_str(&uris)
                    .map_err(|e| StoreError::Damaged(format!("oauth client redirect URIs: {e}")))?,
                created_at: row.try_get("created_at")?,
            })
        })
        .await
    }

    /// Stores a pending approval; false when its approval code's digest is taken (the caller
    /// draws a new request). Requests that ended long ago without a session are removed here.
    pub async fn insert_oauth_approval(&self, approval: &NewApproval) -> Result<bool, StoreError> {
        let mut tx = self.write_tx().await?;
        sqlx::query(
            "DELETE FROM oauth_approvals WHERE status IN ('pending', 'approved', 'denied', 'issued') \
             AND expires_at < $1",
        )
        .bind(approval.created_at - PRUNE_AFTER)
        .execute(&mut *tx)
        .await?;
        let inserted = sqlx::query(
            "INSERT INTO oauth_approvals (approval_id, request_hash, approval_code_hash, client_id, redirect_uri, \
             state, code_challenge, status, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9) ON CONFLICT DO NOTHING",
        )
        .bind(approval.approval_id.as_str())
        .bind(approval.request_hash.as_str())
        .bind(approval.approval_code_hash.as_str())
        .bind(approval.client_id.as_str())
        .bind(approval.redirect_uri.as_str())
        .bind(approval.state.as_deref())
        .bind(approval.code_challenge.as_str())
        .bind(approval.created_at)
        .bind(approval.expires_at)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        tx.commit().await?;
        Ok(inserted)
    }

    pub async fn oauth_approval(&self, approval_id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        self.approval_where("a.approval_id = $1", approval_id).await
    }

    /// The approval the page's request handle names.
    pub async fn oauth_approval_by_request(&self, request_hash: &str) -> Result<Option<ApprovalRow>, StoreError> {
        self.approval_where("a.request_hash = $1", request_hash).await
    }

    /// The approval an approval code names.
    pub async fn oauth_approval_by_code(&self, approval_code_hash: &str) -> Result<Option<ApprovalRow>, StoreError> {
        self.approval_where("a.approval_code_hash = $1", approval_code_hash).await
    }

    /// The approval an authorization code was issued for.
    pub async fn oauth_approval_by_authorization_code(
        &self,
        code_hash: &str,
    ) -> Result<Option<ApprovalRow>, StoreError> {
        self.approval_where("a.code_hash = $1", code_hash).await
    }

    async fn approval_where(&self, condition: &str, value: &str) -> Result<Option<ApprovalRow>, StoreError> {
        let sql = format!("SELECT {APPROVAL_COLUMNS} WHERE {condition}");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(value).fetch_optional(&self.pool).await?;
        row.as_ref().map(approval_from_row).transpose()
    }

    /// Records the operator's decision (`None`: denied) on a pending approval that has not
    /// expired at `now`; false when it was no longer pending or had expired.
    pub async fn decide_oauth_approval(
        &self,
        approval_id: &str,
        decision: Option<&Approval>,
        now: i64,
    ) -> Result<bool, StoreError> {
        let _turn = self.writer_turn().await;
        let status = if decision.is_some() { ApprovalStatus::Approved } else { ApprovalStatus::Denied };
        let result = sqlx::query(
            "UPDATE oauth_approvals SET status = $1, episode = $2, grants_json = $3, session_expires_at = $4 \
             WHERE approval_id = $5 AND status = 'pending' AND expires_at >= $6",
        )
        .bind(status.as_str())
        .bind(decision.map(|d| d.episode.as_str()))
        .bind(decision.map(|d| d.grants_json.as_str()))
        .bind(decision.map(|d| d.session_expires_at))
        .bind(approval_id)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    /// Hands out the approved approval's one authorization code; false when it was not (or no
    /// longer) approved and waiting for its code.
    pub async fn issue_oauth_code(
        &self,
        approval_id: &str,
        code_hash: &str,
        code_expires_at: i64,
    ) -> Result<bool, StoreError> {
        let _turn = self.writer_turn().await;
        let result = sqlx::query(
            "UPDATE oauth_approvals SET status = 'issued', code_hash = $1, code_expires_at = $2 \
             WHERE approval_id = $3 AND status = 'approved'",
        )
        .bind(code_hash)
        .bind(code_expires_at)
        .bind(approval_id)
        .execute(&self.pool)
        .await?;
        Ok(result.rows_affected() == 1)
    }

    /// Exchanges an issued code: the approval becomes redeemed and `session` and its refresh
    /// token are stored, all or nothing. False (nothing written) when the code had been
    /// exchanged already or its chain had ended.
    pub async fn redeem_oauth_code(
        &self,
        approval_id: &str,
        session: &SessionRow,
        refresh_hash: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.write_tx().await?;
        let claimed =
            sqlx::query("UPDATE oauth_approvals SET status = 'redeemed' WHERE approval_id = $1 AND status = 'issued'")
                .bind(approval_id)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                == 1;
        if !claimed {
            return Ok(false);
        }
        insert_chained_session(&mut tx, approval_id, session, refresh_hash).await?;
        tx.commit().await?;
        Ok(true)
    }

    pub async fn oauth_refresh_token(&self, token_hash: &str) -> Result<Option<RefreshRow>, StoreError> {
        const SQL: &str = "SELECT approval_id, used_at FROM oauth_refresh_tokens WHERE token_hash = $1";
        self.row_by(SQL, token_hash, |row| {
            Ok(RefreshRow { approval_id: row.try_get("approval_id")?, used_at: row.try_get("used_at")? })
        })
        .await
    }

    /// Spends a refresh token of a redeemed approval and stores `session` with its successor,
    /// all or nothing; `Refused` (nothing written) when the token was spent already or the
    /// approval's chain has ended.
    pub async fn rotate_oauth_refresh(
        &self,
        token_hash: &str,
        approval_id: &str,
        session: &SessionRow,
        next_hash: &str,
        now: i64,
    ) -> Result<Rotation, StoreError> {
        let mut tx = self.write_tx().await?;
        let spent = sqlx::query(
            "UPDATE oauth_refresh_tokens SET used_at = $1 WHERE token_hash = $2 AND approval_id = $3 \
             AND used_at IS NULL",
        )
        .bind(now)
        .bind(token_hash)
        .bind(approval_id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        let live = sqlx::query("SELECT status FROM oauth_approvals WHERE approval_id = $1")
            .bind(approval_id)
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| row.try_get::<String, _>("status"))
            .transpose()?
            .is_some_and(|status| status == ApprovalStatus::Redeemed.as_str());
        if !(spent && live) {
            return Ok(Rotation::Refused);
        }
        insert_chained_session(&mut tx, approval_id, session, next_hash).await?;
        tx.commit().await?;
        Ok(Rotation::Rotated)
    }

    /// Ends an approval's chain: every session minted under it is deleted, its refresh tokens
    /// are spent and it is revoked. Returns the deleted sessions' credential ids.
    pub async fn end_oauth_chain(&self, approval_id: &str, now: i64) -> Result<Vec<String>, StoreError> {
        let mut tx = self.write_tx().await?;
        let ended = end_chain(&mut tx, approval_id, now).await?;
        tx.commit().await?;
        Ok(ended)
    }

    /// `session revoke` of one credential: a session minted under an approval takes the
    /// approval's whole chain with it; any other is deleted alone. Returns the deleted ids.
    pub async fn revoke_session(&self, credential_id: &str, now: i64) -> Result<Vec<String>, StoreError> {
        let mut tx = self.write_tx().await?;
        let approval: Option<String> = sqlx::query("SELECT approval_id FROM oauth_sessions WHERE credential_id = $1")
            .bind(credential_id)
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| row.try_get("approval_id"))
            .transpose()?;
        let revoked = match approval {
            Some(approval_id) => end_chain(&mut tx, &approval_id, now).await?,
            None => {
                let deleted = sqlx::query("DELETE FROM sessions WHERE credential_id = $1")
                    .bind(credential_id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if deleted > 0 { vec![credential_id.to_owned()] } else { Vec::new() }
            }
        };
        tx.commit().await?;
        Ok(revoked)
    }

    /// `session revoke --episode`: every session of the episode, and every approval in it
    /// ended so no refresh token mints another. Returns the deleted ids.
    pub async fn revoke_episode(&self, episode: &str, now: i64) -> Result<Vec<String>, StoreError> {
        let mut tx = self.write_tx().await?;
        let approvals: Vec<String> = sqlx::query(
            "SELECT approval_id FROM oauth_approvals WHERE episode = $1 AND status IN ('approved', 'issued', 'redeemed')",
        )
        .bind(episode)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| row.try_get("approval_id"))
        .collect::<Result<_, _>>()?;
        let mut revoked = Vec::new();
        for approval_id in &approvals {
            revoked.extend(end_chain(&mut tx, approval_id, now).await?);
        }
        let ids: Vec<String> = sqlx::query("SELECT credential_id FROM sessions WHERE episode = $1")
            .bind(episode)
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|row| row.try_get("credential_id"))
            .collect::<Result<_, _>>()?;
        sqlx::query("DELETE FROM sessions WHERE episode = $1").bind(episode).execute(&mut *tx).await?;
        tx.commit().await?;
        revoked.extend(ids);
        revoked.sort();
        revoked.dedup();
        Ok(revoked)
    }

    /// The sessions minted under approvals, by credential id, with the client each was for.
    pub async fn session_origins(&self) -> Result<HashMap<String, SessionOrigin>, StoreError> {
        let rows = sqlx::query(
            "SELECT s.credential_id, a.approval_id, c.client_id, c.client_name FROM oauth_sessions s \
             JOIN oauth_approvals a ON a.approval_id = s.approval_id \
             JOIN oauth_clients c ON c.client_id = a.client_id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("credential_id")?,
                    SessionOrigin {
                        approval_id: row.try_get("approval_id")?,
                        client_id: row.try_get("client_id")?,
                        client_name: row.try_get("client_name")?,
                    },
                ))
            })
            .collect()
    }
}

async fn insert_chained_session(
    tx: &mut WriteTx,
    approval_id: &str,
    session: &SessionRow,
    refresh_hash: &str,
) -> Result<(), StoreError> {
    insert_session_row(tx, session).await?;
    sqlx::query("INSERT INTO oauth_sessions (credential_id, approval_id) VALUES ($1, $2)")
        .bind(session.credential_id.as_str())
        .bind(approval_id)
        .execute(&mut **tx)
        .await?;
    sqlx::query("INSERT INTO oauth_refresh_tokens (token_hash, approval_id, issued_at) VALUES ($1, $2, $3)")
        .bind(refresh_hash)
        .bind(approval_id)
        .bind(session.created_at)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn end_chain(tx: &mut WriteTx, approval_id: &str, now: i64) -> Result<Vec<String>, StoreError> {
    let ids: Vec<String> = sqlx::query(
        "SELECT s.credential_id FROM oauth_sessions o JOIN sessions s ON s.credential_id = o.credential_id \
         WHERE o.approval_id = $1 ORDER BY s.credential_id",
    )
    .bind(approval_id)
    .fetch_all(&mut **tx)
    .await?
    .iter()
    .map(|row| row.try_get("credential_id"))
    .collect::<Result<_, _>>()?;
    sqlx::query(
        "DELETE FROM sessions WHERE credential_id IN (SELECT credential_id FROM oauth_sessions WHERE approval_id = $1)",
    )
    .bind(approval_id)
    .execute(&mut **tx)
    .await?;
    sqlx::query("UPDATE oauth_refresh_tokens SET used_at = $1 WHERE approval_id = $2 AND used_at IS NULL")
        .bind(now)
        .bind(approval_id)
        .execute(&mut **tx)
        .await?;
    sqlx::query("UPDATE oauth_approvals SET status = 'revoked' WHERE approval_id = $1")
        .bind(approval_id)
        .execute(&mut **tx)
        .await?;
    Ok(ids)
}

fn approval_from_row(row: &AnyRow) -> Result<ApprovalRow, StoreError> {
    Ok(ApprovalRow {
        approval_id: row.try_get("approval_id")?,
        client_id: row.try_get("client_id")?,
        client_name: row.try_get("client_name")?,
        redirect_uri: row.try_get("redirect_uri")?,
        state: row.try_get("state")?,
        code_challenge: row.try_get("code_challenge")?,
        status: ApprovalStatus::parse(&row.try_get::<String, _>("status")?)?,
        created_at: row.try_get("created_at")?,
        expires_at: row.try_get("expires_at")?,
        episode: row.try_get("episode")?,
        grants_json: row.try_get("grants_json")?,
        session_expires_at: row.try_get("session_expires_at")?,
        code_expires_at: row.try_get("code_expires_at")?,
    })
}
