//! The effect journal and episode leases.
//!
//! An effect's intent is durable before its handler runs and is the debit of its budget;
//! its outcome and record are durable before anyone is told anything. Ordinals are gapless
//! per episode because they are assigned inside the store's write transaction, and an
//! episode's effectful calls run one at a time under a lease row, whichever core serves them.

use sqlx::Row;
use world_model::AccessTriple;

use super::journal;
use super::script::Script;
use super::{Store, StoreError, StoredObject, insert_objects};

/// Effect ids live in their own journal namespace: `effect:<episode>:<ordinal>`.
pub const EFFECT_NAMESPACE: &str = "effect:";

/// An intent the journal holds without an outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingIntent {
    pub invocation_id: String,
    pub seq: i64,
}

impl Store {
    /// What `episode` has spent, by (effect, scope): the cost of every effect intent it ever
    /// wrote (failed and indeterminate effects included; denials write none).
    pub async fn effect_spend(&self, episode: &str) -> Result<Vec<(String, String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT effect, scope, CAST(SUM(cost) AS BIGINT) AS spent FROM effect_intents WHERE episode = $1 \
             GROUP BY effect, scope ORDER BY effect, scope",
        )
        .bind(episode)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("effect")?, row.try_get("scope")?, row.try_get::<i64, _>("spent")?)))
            .collect()
    }

    /// Appends the next effect intent of `episode` with its request object, in one
    /// transaction: the ordinal is one past the episode's last, and `intent` builds the
    /// intent object once it is known. Returns the ordinal and the intent's object.
    pub async fn append_effect_intent(
        &self,
        episode: &str,
        call_id: &str,
        requirement: &AccessTriple,
        request: &StoredObject,
        intent: impl FnOnce(i64) -> StoredObject,
    ) -> Result<(i64, StoredObject), StoreError> {
        let request_payload = request.verify("request")?;
        let mut tx = self.write_tx().await?;
        let row = sqlx::query("SELECT COALESCE(MAX(ordinal), -1) AS last FROM effect_intents WHERE episode = $1")
            .bind(episode)
            .fetch_one(&mut *tx)
            .await?;
        let ordinal = row.try_get::<i64, _>("last")?.checked_add(1).ok_or_else(|| {
            StoreError::invalid("ordinal", format!("episode {episode} has exhausted its effect ordinals"))
        })?;
        let intent = intent(ordinal);
        let intent_payload = intent.verify("intent")?;
        let effect_id = format!("{EFFECT_NAMESPACE}{episode}:{ordinal}");
        let mut script = Script::new();
        insert_objects(&mut script, &[(request, request_payload), (&intent, intent_payload)]);
        journal::append_rows(&mut script, &[(effect_id.as_str(), "intent", &intent)]);
        script
            .statement(
                "INSERT INTO effect_intents (episode, ordinal, call_id, effect, scope, cost) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(episode)
            .bind(ordinal)
            .bind(call_id)
            .bind(requirement.effect.as_str())
            .bind(requirement.scope.as_str())
            .bind(requirement.cost);
        script.run(&mut tx).await?;
        tx.commit().await?;
        Ok((ordinal, intent))
    }

    /// Writes an effect's outcome with the objects it names (result, record), in one
    /// transaction. The journal holds at most one outcome per effect, after its intent.
    pub async fn append_effect_outcome(
        &self,
        effect_id: &str,
        objects: &[&StoredObject],
        outcome: &StoredObject,
    ) -> Result<(), StoreError> {
        let mut verified = Vec::with_capacity(objects.len() + 1);
        for (i, object) in objects.iter().copied().chain([outcome]).enumerate() {
            verified.push((object, object.verify(&format!("objects[{i}]"))?));
        }
        let mut tx = self.write_tx().await?;
        let (has_intent, has_outcome) = journal_kinds(&mut tx, effect_id).await?;
        if !has_intent {
            return Err(StoreError::invalid("invocationId", format!("{effect_id} has no durable intent")));
        }
        if has_outcome {
            return Err(StoreError::DuplicateInvocation { invocation_id: effect_id.to_owned(), kind: "outcome" });
        }
        let mut script = Script::new();
        insert_objects(&mut script, &verified);
        journal::append_rows(&mut script, &[(effect_id, "outcome", outcome)]);
        script.run(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The receipt of an effect: `not-started`, `indeterminate` (intent, no outcome: the
    /// handler may or may not have run) or `resolved`.
    pub async fn effect_receipt(&self, effect_id: &str) -> Result<&'static str, StoreError> {
        let (intent, outcome) = journal_kinds(&mut *self.pool.acquire().await?, effect_id).await?;
        match (intent, outcome) {
            (false, false) => Ok("not-started"),
            (true, false) => Ok("indeterminate"),
            (true, true) => Ok("resolved"),
            (false, true) => Err(StoreError::Damaged(format!("journal outcome for {effect_id} has no intent"))),
        }
    }

    /// Stores objects outside any commit (a denial's record), each verified first.
    pub async fn put_objects(&self, objects: &[&StoredObject]) -> Result<(), StoreError> {
        let mut verified = Vec::with_capacity(objects.len());
        for (i, object) in objects.iter().copied().enumerate() {
            verified.push((object, object.verify(&format!("objects[{i}]"))?));
        }
        let mut script = Script::new();
        insert_objects(&mut script, &verified);
        let _turn = self.writer_turn().await;
        script.run(&mut *self.pool.acquire().await?).await
    }

    /// Whether any effect was ever requested by the invocation `call_id`.
    pub async fn call_requested_effects(&self, call_id: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query("SELECT 1 AS present FROM effect_intents WHERE call_id = $1 LIMIT 1")
            .bind(call_id)
            .fetch_optional(&self.pool)
            .await?
            .is_some())
    }

    /// Takes `episode`'s lease for `owner` until `expires_at` if it is free or expired.
    pub async fn acquire_episode_lease(
        &self,
        episode: &str,
        owner: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        let _turn = self.writer_turn().await;
        let row = sqlx::query(
            "INSERT INTO episode_leases (episode, owner, expires_at) VALUES ($1, $2, $3) \
             ON CONFLICT (episode) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at \
             WHERE episode_leases.expires_at <= $4 RETURNING owner",
        )
        .bind(episode)
        .bind(owner)
        .bind(expires_at)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.is_some())
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
        let claims = sqlx::query("UPDATE invocation_claims SET claimed_at = 0 WHERE state = 'running'")
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok((leases, claims))
    }

    /// Intents without an outcome, oldest first, after journal sequence `after`.
    pub async fn pending_intents(&self, after: i64, limit: i64) -> Result<Vec<PendingIntent>, StoreError> {
        let rows = sqlx::query(
            "SELECT i.invocation_id, i.seq FROM journal i WHERE i.kind = 'intent' AND i.seq > $1 \
             AND NOT EXISTS (SELECT 1 FROM journal o WHERE o.invocation_id = i.invocation_id AND o.kind = 'outcome') \
             ORDER BY i.seq LIMIT $2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok(PendingIntent { invocation_id: row.try_get("invocation_id")?, seq: row.try_get("seq")? }))
            .collect()
    }
}

/// Whether the journal holds an intent and an outcome for `id`.
async fn journal_kinds(conn: &mut sqlx::AnyConnection, id: &str) -> Result<(bool, bool), StoreError> {
    let rows = sqlx::query("SELECT kind FROM journal WHERE invocation_id = $1").bind(id).fetch_all(conn).await?;
    let mut kinds = (false, false);
    for row in rows {
        match row.try_get::<String, _>("kind")?.as_str() {
            "intent" => kinds.0 = true,
            _ => kinds.1 = true,
        }
    }
    Ok(kinds)
}
