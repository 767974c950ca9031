//! Invocation claims: the database-enforced in-flight guard and the record
//! of which call an invocation id names.

use sqlx::Row;

use super::{Store, StoreError};

/// What claiming an invocation id found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The id is ours to run now.
    Acquired,
    /// The same call already committed under this id: reconcile, run nothing.
    Committed,
    /// The same call is running elsewhere (another request or core).
    InFlight,
    /// The id names a different call.
    DifferentCall,
}

impl Store {
    /// Claims `invocation_id` for the call with `digest`. A running claim
    /// older than `stale_before` (its owner died) may be taken over: a commit
    /// is still single because the journal entry is unique per id.
    pub async fn claim_invocation(
        &self,
        invocation_id: &str,
        digest: &str,
        owner: &str,
        now: i64,
        stale_before: i64,
    ) -> Result<Claim, StoreError> {
        let mut tx = self.write_tx().await?;
        let existing =
            sqlx::query("SELECT call_digest, state, claimed_at FROM invocation_claims WHERE invocation_id = $1")
                .bind(invocation_id)
                .fetch_optional(&mut *tx)
                .await?;
        let claim = match existing {
            None => {
                sqlx::query(
                    "INSERT INTO invocation_claims (invocation_id, call_digest, state, owner, claimed_at) \
                     VALUES ($1, $2, 'running', $3, $4)",
                )
                .bind(invocation_id)
                .bind(digest)
                .bind(owner)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                Claim::Acquired
            }
            Some(row) => {
                let existing_digest: String = row.try_get("call_digest")?;
                let state: String = row.try_get("state")?;
                let claimed_at: i64 = row.try_get("claimed_at")?;
                if existing_digest != digest {
                    Claim::DifferentCall
                } else if state == "committed" {
                    Claim::Committed
                } else if claimed_at < stale_before {
                    sqlx::query("UPDATE invocation_claims SET owner = $2, claimed_at = $3 WHERE invocation_id = $1")
                        .bind(invocation_id)
                        .bind(owner)
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                    Claim::Acquired
                } else {
                    Claim::InFlight
                }
            }
        };
        tx.commit().await?;
        Ok(claim)
    }

    /// Ends a claim: a committed call keeps its row (resends reconcile
    /// against it); any other ending frees the id for a new attempt.
    pub async fn release_invocation(&self, invocation_id: &str, committed: bool) -> Result<(), StoreError> {
        let sql = if committed {
            "UPDATE invocation_claims SET state = 'committed' WHERE invocation_id = $1"
        } else {
            "DELETE FROM invocation_claims WHERE invocation_id = $1 AND state = 'running'"
        };
        let _turn = self.writer_turn().await;
        sqlx::query(sql).bind(invocation_id).execute(&self.pool).await?;
        Ok(())
    }
}
