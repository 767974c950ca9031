//! The commit journal: one intent and at most one outcome per invocation id,
//! ordered by a gapless sequence written under the store's write lock.

use std::collections::HashMap;

use serde_json::json;
use sqlx::AnyConnection;
use world_model::{HashRef, canonical_value};

use super::script::{KEYS_PER_READ, ROWS_PER_INSERT, Script, placeholders};
use super::{Columns, Commit, Receipt, StoreError, StoredObject};

pub const INTENT_SEMANTIC_ID: &str = "world/journal-intent/v1";
pub const OUTCOME_SEMANTIC_ID: &str = "world/journal-outcome/v1";
const PROVENANCE: &str = "store/journal";

/// The fields of an intent that identify the commit it announces. The
/// logical time is deliberately left out: a resend seconds later is the same commit.
#[derive(Debug, PartialEq, Eq)]
pub struct IntentKey {
    pub invocation_id: String,
    pub world_ref: HashRef,
    pub entry_hash: HashRef,
    pub observed_head: Option<HashRef>,
    pub prev_entry_hash: HashRef,
    pub transition_fn: HashRef,
    pub transition_ref: HashRef,
    pub interpreter: HashRef,
}

impl IntentKey {
    pub fn of(commit: &Commit, invocation_id: &str) -> Self {
        Self {
            invocation_id: invocation_id.to_owned(),
            world_ref: commit.next_world.reference,
            entry_hash: commit.entry.entry_hash,
            observed_head: commit.observed_head,
            prev_entry_hash: commit.entry.prev_entry_hash,
            transition_fn: commit.entry.transition_fn,
            transition_ref: commit.entry.transition_ref,
            interpreter: commit.entry.interpreter,
        }
    }

    /// The intent object announcing this commit.
    pub(super) fn object(&self, logical_time: i64) -> StoredObject {
        let payload = canonical_value(&json!({
            "invocationId": self.invocation_id,
            "worldRef": self.world_ref.to_string(),
            "entryHash": self.entry_hash.to_string(),
            "observedHead": self.observed_head.map(|h| h.to_string()).unwrap_or_default(),
            "prevEntryHash": self.prev_entry_hash.to_string(),
            "transitionFn": self.transition_fn.to_string(),
            "transitionRef": self.transition_ref.to_string(),
            "interpreter": self.interpreter.to_string(),
            "logicalTime": logical_time,
        }));
        StoredObject::new(INTENT_SEMANTIC_ID, PROVENANCE, payload)
    }

    fn decode(payload: &[u8]) -> Result<Self, StoreError> {
        let value: serde_json::Value =
            serde_json::from_slice(payload).map_err(|e| StoreError::Damaged(format!("journal intent: {e}")))?;
        let text = |key: &str| -> Result<&str, StoreError> {
            value
                .get(key)
                .and_then(|v| v.as_str())
                .ok_or_else(|| StoreError::Damaged(format!("journal intent lacks {key}")))
        };
        let reference = |key: &str| -> Result<HashRef, StoreError> {
            HashRef::parse(text(key)?).map_err(|e| StoreError::Damaged(format!("journal intent {key}: {e}")))
        };
        Ok(Self {
            invocation_id: text("invocationId")?.to_owned(),
            world_ref: reference("worldRef")?,
            entry_hash: reference("entryHash")?,
            observed_head: HashRef::parse_optional(text("observedHead")?)
                .map_err(|e| StoreError::Damaged(format!("journal intent observedHead: {e}")))?,
            prev_entry_hash: reference("prevEntryHash")?,
            transition_fn: reference("transitionFn")?,
            transition_ref: reference("transitionRef")?,
            interpreter: reference("interpreter")?,
        })
    }
}

#[derive(Default)]
pub(super) struct JournalState {
    pub intent: Option<IntentKey>,
    pub outcome_ref: Option<HashRef>,
}

pub(super) async fn state(conn: &mut AnyConnection, invocation_id: &str) -> Result<JournalState, StoreError> {
    let mut states = states(conn, &[invocation_id]).await?;
    Ok(states.remove(invocation_id).unwrap_or_default())
}

/// The journal state of each id that has any journal row, in one statement.
pub(super) async fn states(
    conn: &mut AnyConnection,
    invocation_ids: &[&str],
) -> Result<HashMap<String, JournalState>, StoreError> {
    let mut states = HashMap::new();
    if invocation_ids.is_empty() {
        return Ok(states);
    }
    let sql = states_sql(invocation_ids.len());
    let query = invocation_ids.iter().fold(sqlx::query(sqlx::AssertSqlSafe(sql)), |query, id| query.bind(*id));
    for row in query.fetch_all(&mut *conn).await? {
        add_state(&mut states, &row)?;
    }
    Ok(states)
}

/// [`states`] on a direct SQLite connection.
pub(super) fn states_direct(
    conn: &rusqlite::Connection,
    invocation_ids: &[&str],
) -> Result<HashMap<String, JournalState>, StoreError> {
    let mut states = HashMap::new();
    if invocation_ids.is_empty() {
        return Ok(states);
    }
    let mut statement = conn.prepare_cached(&states_sql(invocation_ids.len()))?;
    let mut rows = statement.query(rusqlite::params_from_iter(invocation_ids))?;
    while let Some(row) = rows.next()? {
        add_state(&mut states, row)?;
    }
    Ok(states)
}

fn states_sql(ids: usize) -> String {
    format!(
        "SELECT j.invocation_id, j.kind, o.payload FROM journal j JOIN objects o ON o.hash = j.object_ref \
         WHERE j.invocation_id IN {}",
        placeholders(1, ids)
    )
}

/// Adds one journal row (invocation id, kind, the payload of its object) to `states`.
fn add_state(states: &mut HashMap<String, JournalState>, row: &(impl Columns + ?Sized)) -> Result<(), StoreError> {
    let kind = row.text("kind")?;
    let payload = row.blob("payload")?;
    let state = states.entry(row.text("invocation_id")?).or_default();
    match kind.as_str() {
        "intent" => state.intent = Some(IntentKey::decode(&payload)?),
        "outcome" => state.outcome_ref = Some(outcome_result(&payload)?),
        other => return Err(StoreError::Damaged(format!("journal row of kind {other:?}"))),
    }
    Ok(())
}

pub(super) async fn receipt(conn: &mut AnyConnection, invocation_id: &str) -> Result<Receipt, StoreError> {
    let state = state(conn, invocation_id).await?;
    Ok(match (state.intent, state.outcome_ref) {
        (None, None) => Receipt::NotStarted,
        (Some(_), None) => Receipt::Indeterminate,
        (Some(_), Some(result_ref)) => Receipt::Resolved { result_ref },
        (None, Some(_)) => {
            return Err(StoreError::Damaged(format!("journal outcome for {invocation_id} has no intent")));
        }
    })
}

pub(super) async fn commit_times(
    conn: &mut AnyConnection,
    invocation_ids: &[&str],
) -> Result<HashMap<String, i64>, StoreError> {
    let mut times = HashMap::with_capacity(invocation_ids.len());
    for chunk in invocation_ids.chunks(KEYS_PER_READ) {
        let sql = format!(
            "SELECT j.invocation_id, o.payload FROM journal j JOIN objects o ON o.hash = j.object_ref \
             WHERE j.kind = 'outcome' AND j.invocation_id IN {}",
            placeholders(1, chunk.len())
        );
        let query = chunk.iter().fold(sqlx::query(sqlx::AssertSqlSafe(sql)), |query, id| query.bind(*id));
        for row in query.fetch_all(&mut *conn).await? {
            let outcome: serde_json::Value = serde_json::from_slice(&row.blob("payload")?)
                .map_err(|e| StoreError::Damaged(format!("journal outcome is not JSON: {e}")))?;
            if let Some(time) = outcome.get("logicalTime").and_then(serde_json::Value::as_i64) {
                times.insert(row.text("invocation_id")?, time);
            }
        }
    }
    Ok(times)
}

/// The outcome object saying `invocation_id` committed `result_ref`.
pub(super) fn committed_outcome_object(invocation_id: &str, result_ref: &HashRef, logical_time: i64) -> StoredObject {
    let payload = canonical_value(&json!({
        "invocationId": invocation_id,
        "status": "committed",
        "resultRef": result_ref.to_string(),
        "logicalTime": logical_time,
    }));
    StoredObject::new(OUTCOME_SEMANTIC_ID, PROVENANCE, payload)
}

/// Appends journal rows (invocation id, kind, stored object) to `script`, numbered on from
/// the last sequence number; the caller holds the write lock and stores the objects first.
pub(super) fn append_rows(script: &mut Script, rows: &[(&str, &str, &StoredObject)]) {
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let arms: Vec<String> = (0..chunk.len())
            .map(|i| {
                format!(
                    "SELECT newest.m + {}, ${}, ${}, ${} FROM (SELECT COALESCE(MAX(seq), 0) AS m FROM journal) AS newest",
                    i + 1,
                    3 * i + 1,
                    3 * i + 2,
                    3 * i + 3
                )
            })
            .collect();
        script.statement(&format!(
            "INSERT INTO journal (seq, kind, invocation_id, object_ref) {}",
            arms.join(" UNION ALL ")
        ));
        for (id, kind, object) in chunk {
            script.bind(*kind).bind(*id).bind(object.hash.to_string());
        }
    }
}

fn outcome_result(payload: &[u8]) -> Result<HashRef, StoreError> {
    let value: serde_json::Value =
        serde_json::from_slice(payload).map_err(|e| StoreError::Damaged(format!("journal outcome: {e}")))?;
    let text = value
        .get("resultRef")
        .and_then(|v| v.as_str())
        .ok_or_else(|| StoreError::Damaged("journal outcome lacks resultRef".into()))?;
    HashRef::parse(text).map_err(|e| StoreError::Damaged(format!("journal outcome resultRef: {e}")))
}
