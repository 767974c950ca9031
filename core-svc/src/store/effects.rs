//! The effect journal: intents (staged in the writer's batch, `batch`), outcomes, receipts
//! and each episode's spend. The order these writes must keep is the broker's rule
//! (`effects::broker`). Ordinals are gapless per episode because they are assigned inside
//! the store's write transaction.

use sqlx::Row;
use world_model::AccessTriple;

use std::collections::{BTreeMap, HashMap};

use super::journal;
use super::script::Script;
use super::tx::{Tx, on_writer};
use super::{Columns, ObjectWrite, Store, StoreError, StoredObject, insert_objects};

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
    /// wrote (failed and indeterminate effects included; denials write none). Every effectful
    /// call reads it, so on SQLite it runs inline like admission's session read.
    pub async fn effect_spend(&self, episode: &str) -> Result<Vec<(String, String, i64)>, StoreError> {
        const SQL: &str = "SELECT effect, scope, spent FROM effect_spend WHERE episode = $1 ORDER BY effect, scope";
        let decode = |row: &dyn Columns| Ok((row.text("effect")?, row.text("scope")?, row.int("spent")?));
        if let Some(direct) = &self.direct {
            return direct.read(|conn| {
                let mut statement = conn.prepare_cached(SQL)?;
                let mut rows = statement.query(rusqlite::named_params! {"$1": episode})?;
                let mut spend = Vec::new();
                while let Some(row) = rows.next()? {
                    spend.push(decode(row)?);
                }
                Ok(spend)
            });
        }
        let rows = sqlx::query(SQL).bind(episode).fetch_all(&self.pool).await?;
        rows.iter().map(|row| decode(row)).collect()
    }

    /// Writes an effect's outcome with the objects it names (result, record), in one
    /// transaction. The journal holds at most one outcome per effect, after its intent.
    pub async fn append_effect_outcome(
        &self,
        effect_id: &str,
        objects: &[&StoredObject],
        outcome: &StoredObject,
    ) -> Result<(), StoreError> {
        for (i, object) in objects.iter().copied().chain([outcome]).enumerate() {
            object.verify(&format!("objects[{i}]"))?;
        }
        let (episode, _) = world_model::effect::parse_invocation_id(effect_id)
            .map_err(|e| StoreError::invalid("invocationId", e.to_string()))?;
        let episode = episode.to_owned();
        let (store, effect_id) = (self.clone(), effect_id.to_owned());
        let objects: Vec<StoredObject> = objects.iter().map(|o| (*o).clone()).collect();
        let outcome = outcome.clone();
        on_writer(async move {
            let mut tx = store.begin(store.writer_turn().await).await?;
            let kinds = tx.texts("SELECT kind FROM journal WHERE invocation_id = $1", &effect_id).await?;
            if !kinds.iter().any(|k| k == "intent") {
                return Err(StoreError::invalid("invocationId", format!("{effect_id} has no durable intent")));
            }
            if kinds.iter().any(|k| k == "outcome") {
                return Err(StoreError::DuplicateInvocation { invocation_id: effect_id, kind: "outcome" });
            }
            let verified: Vec<_> =
                objects.iter().chain([&outcome]).map(|o| ObjectWrite::of(o, episode.as_str())).collect();
            let mut script = Script::new();
            insert_objects(&mut script, &verified);
            journal::append_rows(&mut script, &[(effect_id.as_str(), "outcome", &outcome)]);
            tx.write(script).await?;
            tx.commit().await
        })
        .await
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

    /// Stores objects of `episode` outside any commit (the records of denied effects of a call
    /// that does not commit), each verified first.
    pub async fn put_objects(&self, episode: &str, objects: &[&StoredObject]) -> Result<(), StoreError> {
        let mut verified = Vec::with_capacity(objects.len());
        for (i, object) in objects.iter().copied().enumerate() {
            object.verify(&format!("objects[{i}]"))?;
            verified.push(ObjectWrite::of(object, episode));
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

    /// The process (`<core>/<incarnation>`) that wrote the effect intent `effect_id`; empty
    /// for intents written before stores recorded it, `None` for no such intent.
    pub async fn effect_intent_writer(&self, effect_id: &str) -> Result<Option<String>, StoreError> {
        let Some((episode, ordinal)) = effect_id.strip_prefix(EFFECT_NAMESPACE).and_then(|id| id.rsplit_once(':'))
        else {
            return Ok(None);
        };
        let Ok(ordinal) = ordinal.parse::<i64>() else { return Ok(None) };
        let row = sqlx::query("SELECT core FROM effect_intents WHERE episode = $1 AND ordinal = $2")
            .bind(episode)
            .bind(ordinal)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|row| row.try_get("core")).transpose()?)
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

/// An effect intent waiting for its ordinal.
pub(super) struct NewIntent {
    episode: String,
    call_id: String,
    requirement: AccessTriple,
    request: StoredObject,
    build: Box<dyn FnOnce(i64) -> StoredObject + Send>,
}

impl NewIntent {
    /// The intent of `call_id`'s effect `requirement` with its request object; `build` makes
    /// the intent object once the ordinal is known.
    pub(super) fn new(
        episode: &str,
        call_id: &str,
        requirement: &AccessTriple,
        request: &StoredObject,
        build: impl FnOnce(i64) -> StoredObject + Send + 'static,
    ) -> Self {
        Self {
            episode: episode.to_owned(),
            call_id: call_id.to_owned(),
            requirement: requirement.clone(),
            request: request.clone(),
            build: Box::new(build),
        }
    }
}

/// An intent given its ordinal inside a write transaction, to be written with its batch.
pub(super) struct StagedIntent {
    pub(super) ordinal: i64,
    pub(super) intent: StoredObject,
    episode: String,
    call_id: String,
    requirement: AccessTriple,
    request: StoredObject,
}

/// Gives `new` the next ordinal of its episode: one past the last durable one, or past the
/// last one this batch staged (`last_ordinals`).
pub(super) async fn stage_intent(
    tx: &mut Tx<'_>,
    new: NewIntent,
    last_ordinals: &mut HashMap<String, i64>,
) -> Result<StagedIntent, StoreError> {
    let NewIntent { episode, call_id, requirement, request, build } = new;
    let last = match last_ordinals.get(&episode) {
        Some(last) => *last,
        None => {
            tx.integer("SELECT COALESCE(MAX(ordinal), -1) FROM effect_intents WHERE episode = $1", &episode).await?
        }
    };
    let ordinal = last.checked_add(1).ok_or_else(|| {
        StoreError::invalid("ordinal", format!("episode {episode} has exhausted its effect ordinals"))
    })?;
    let intent = build(ordinal);
    intent.verify("intent")?;
    last_ordinals.insert(episode.clone(), ordinal);
    Ok(StagedIntent { ordinal, intent, episode, call_id, requirement, request })
}

/// The writes of staged intents: request and intent objects, journal rows, intent rows (each
/// naming `core`, the process that writes them) and the episodes' spend.
pub(super) fn write_intents(script: &mut Script, staged: &[&StagedIntent], core: &str) {
    if staged.is_empty() {
        return;
    }
    let objects: Vec<_> = staged
        .iter()
        .flat_map(|s| [ObjectWrite::of(&s.request, s.episode.as_str()), ObjectWrite::of(&s.intent, s.episode.as_str())])
        .collect();
    insert_objects(script, &objects);
    let ids: Vec<String> = staged.iter().map(|s| format!("{EFFECT_NAMESPACE}{}:{}", s.episode, s.ordinal)).collect();
    let rows: Vec<(&str, &str, &StoredObject)> =
        staged.iter().zip(&ids).map(|(s, id)| (id.as_str(), "intent", &s.intent)).collect();
    journal::append_rows(script, &rows);
    let insert = "INSERT INTO effect_intents (episode, ordinal, call_id, effect, scope, cost, core)";
    script.insert_rows(insert, 7, "", staged, |script, s| {
        let requirement = &s.requirement;
        script
            .bind(s.episode.as_str())
            .bind(s.ordinal)
            .bind(s.call_id.as_str())
            .bind(requirement.effect.as_str())
            .bind(requirement.scope.as_str())
            .bind(requirement.cost)
            .bind(core);
    });
    // One row per key: an upsert may not touch a row twice in one statement.
    let mut spend: BTreeMap<(&str, &str, &str), i64> = BTreeMap::new();
    for s in staged {
        let requirement = &s.requirement;
        let key = (s.episode.as_str(), requirement.effect.as_str(), requirement.scope.as_str());
        *spend.entry(key).or_default() += requirement.cost;
    }
    let spend: Vec<_> = spend.into_iter().collect();
    let insert = "INSERT INTO effect_spend (episode, effect, scope, spent)";
    let tail = "ON CONFLICT (episode, effect, scope) DO UPDATE SET spent = effect_spend.spent + excluded.spent";
    script.insert_rows(insert, 4, tail, &spend, |script, ((episode, effect, scope), spent)| {
        script.bind(*episode).bind(*effect).bind(*scope).bind(*spent);
    });
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
