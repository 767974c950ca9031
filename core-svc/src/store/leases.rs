//! Claims and leases, both held in the database so any core sees them: an invocation
//! claim is the in-flight guard and the record of which call an id names; an episode lease
//! makes one episode's effectful calls run one at a time, whichever core serves them.
//!
//! Both end when their owner ends them, when they expire (their owner set the expiry past
//! anything its call can still do), or when their owner is dead for certain (`liveness`).

use sqlx::Row;

use super::liveness::owner_gone;
use super::{Backend, Store, StoreError};

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
    /// Claims `invocation_id` for the call with `digest`, for `owner` until `expires_at`.
    /// A running claim that has expired or whose owner is dead may be taken over: a commit
    /// is still single because the journal entry is unique per id.
    pub async fn claim_invocation(
        &self,
        invocation_id: &str,
        digest: &str,
        owner: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<Claim, StoreError> {
        let mut tx = self.write_tx().await?;
        let existing =
            sqlx::query("SELECT call_digest, state, owner, expires_at FROM invocation_claims WHERE invocation_id = $1")
                .bind(invocation_id)
                .fetch_optional(&mut *tx)
                .await?;
        let claim = match existing {
            None => Claim::Acquired,
            Some(row) => {
                let existing_digest: String = row.try_get("call_digest")?;
                let state: String = row.try_get("state")?;
                let holder: String = row.try_get("owner")?;
                let held_until: i64 = row.try_get("expires_at")?;
                if existing_digest != digest {
                    Claim::DifferentCall
                } else if state == "committed" {
                    Claim::Committed
                } else if held_until <= now || owner_gone(&mut tx, self.backend, &holder).await? {
                    Claim::Acquired
                } else {
                    Claim::InFlight
                }
            }
        };
        if claim == Claim::Acquired {
            // A new id, or a running claim of the same call taken over: either way the row
            // becomes ours.
            sqlx::query(
                "INSERT INTO invocation_claims (invocation_id, call_digest, state, owner, claimed_at, expires_at) \
                 VALUES ($1, $2, 'running', $3, $4, $5) ON CONFLICT (invocation_id) DO UPDATE \
                 SET owner = excluded.owner, claimed_at = excluded.claimed_at, expires_at = excluded.expires_at",
            )
            .bind(invocation_id)
            .bind(digest)
            .bind(owner)
            .bind(now)
            .bind(expires_at)
            .execute(&mut *tx)
            .await?;
        }
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

    /// Takes `episode`'s lease for the turn `owner` of this core until `expires_at` if it is
    /// free or expired, or (`ask_holder`) held by a core that is dead.
    pub async fn acquire_episode_lease(
        &self,
        episode: &str,
        owner: &str,
        now: i64,
        expires_at: i64,
        ask_holder: bool,
    ) -> Result<bool, StoreError> {
        let core = self.owner();
        let taken = {
            let _turn = self.writer_turn().await;
            sqlx::query(
                "INSERT INTO episode_leases (episode, owner, expires_at, core) VALUES ($1, $2, $3, $5) \
                 ON CONFLICT (episode) DO UPDATE \
                 SET owner = excluded.owner, expires_at = excluded.expires_at, core = excluded.core \
                 WHERE episode_leases.expires_at <= $4 RETURNING owner",
            )
            .bind(episode)
            .bind(owner)
            .bind(expires_at)
            .bind(now)
            .bind(core)
            .fetch_optional(&self.pool)
            .await?
            .is_some()
        };
        if taken || !ask_holder || self.backend != Backend::Postgres {
            return Ok(taken);
        }
        let mut tx = self.write_tx().await?;
        let Some(row) = sqlx::query("SELECT owner, core FROM episode_leases WHERE episode = $1")
            .bind(episode)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(false);
        };
        let (holder, holder_core): (String, String) = (row.try_get("owner")?, row.try_get("core")?);
        if holder_core == core || !owner_gone(&mut tx, self.backend, &holder_core).await? {
            tx.commit().await?;
            return Ok(false);
        }
        let taken = sqlx::query(
            "UPDATE episode_leases SET owner = $2, expires_at = $3, core = $4 WHERE episode = $1 AND owner = $5",
        )
        .bind(episode)
        .bind(owner)
        .bind(expires_at)
        .bind(core)
        .bind(&holder)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        tx.commit().await?;
        Ok(taken)
    }

    /// Gives `episode`'s lease back if `owner` still holds it.
    pub async fn release_episode_lease(&self, episode: &str, owner: &str) -> Result<(), StoreError> {
        let _turn = self.writer_turn().await;
        sqlx::query("DELETE FROM episode_leases WHERE episode = $1 AND owner = $2")
            .bind(episode)
            .bind(owner)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Startup of the only core that may serve this store (a SQLite store's serving lock is
    /// exclusive): every lease and running claim it finds belongs to a core that died, so
    /// their episodes and ids are free again at once rather than when they expire.
    pub async fn release_dead_owners(&self) -> Result<(u64, u64), StoreError> {
        let mut tx = self.write_tx().await?;
        let leases = sqlx::query("DELETE FROM episode_leases").execute(&mut *tx).await?.rows_affected();
        let claims = sqlx::query("UPDATE invocation_claims SET expires_at = 0 WHERE state = 'running'")
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok((leases, claims))
    }
}
