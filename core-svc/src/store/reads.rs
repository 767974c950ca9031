//! Who reads what (DESIGN "Reads are granted"): the one rule every read of the log and its
//! objects goes through. A reader of one episode reads the entries its episode's commits logged
//! and the objects its episode's writes hold (the same bytes may belong to several episodes),
//! plus the entries and objects of no episode (genesis, sources, registries, epochs,
//! interpreter records). A reader of every episode (an operator on the store, a session
//! holding `Log.Read` at `world`) reads everything. What a reader may not read reads exactly
//! as what is absent.
//!
//! The episodes are written with the entries and objects, in the same transaction (the
//! `episode` columns of `log_entries` and `objects`, and `object_episodes` for the same bytes
//! written for another episode), so deciding a read is an index lookup beside the read itself.

use std::collections::{BTreeSet, HashMap};

use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use world_model::{HashRef, effect};

use super::rows::{column_ref, entry_from_row, object_from_row};
use super::script::{KEYS_PER_READ, Script, placeholders};
use super::{Columns, LogEntry, Store, StoreError, StoredObject, clamp_page};

/// The episode of entries and objects that belong to none; no episode is empty.
pub(super) const NO_EPISODE: &str = "";

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

/// Who a read is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reader {
    /// Every episode: the operator's direct reads, and sessions holding `Log.Read` at `world`.
    Everything,
    /// The caller's own episode (and what belongs to no episode).
    Episode(String),
}

const ENTRY_COLUMNS: &str = "entry_index, semantics_epoch, transition_fn, interpreter, prev_entry_hash, written_by, \
                             entry_hash, transition_ref";

impl Reader {
    fn episode(&self) -> Option<&str> {
        match self {
            Reader::Everything => None,
            Reader::Episode(episode) => Some(episode),
        }
    }

    /// `AND …` keeping the objects (aliased `o`) this reader reads, its episode bound at `$n`.
    fn objects_clause(&self, n: usize) -> String {
        match self {
            Reader::Everything => String::new(),
            // The object's first write names its episode on its row; others have rows of their own.
            Reader::Episode(_) => format!(
                " AND (o.episode IN ('', ${n}) OR EXISTS (SELECT 1 FROM object_episodes r \
                 WHERE r.object_ref = o.hash AND r.episode IN ('', ${n})))"
            ),
        }
    }

    /// `AND …` keeping the entries (aliased `e`) this reader reads, its episode bound at `$n`.
    fn entries_clause(&self, n: usize) -> String {
        match self {
            Reader::Everything => String::new(),
            Reader::Episode(_) => format!(" AND e.episode IN ('', ${n})"),
        }
    }

    /// [`Self::entries_clause`] for an entry already read with its episode.
    fn reads_entry(&self, episode: &str) -> bool {
        match self {
            Reader::Everything => true,
            Reader::Episode(own) => episode == NO_EPISODE || episode == own,
        }
    }
}

/// The store's reads as one reader may make them.
pub struct Reads<'a> {
    store: &'a Store,
    reader: &'a Reader,
}

impl Store {
    /// The reads `reader` may make; the store's own read methods are [`Reader::Everything`]'s.
    pub fn reads<'a>(&'a self, reader: &'a Reader) -> Reads<'a> {
        Reads { store: self, reader }
    }
}

impl Reads<'_> {
    /// Binds the reader's episode, when it has one, as the next value of `query`.
    fn bind_episode<'q>(&self, query: AnyQuery<'q>) -> AnyQuery<'q> {
        match self.reader.episode() {
            Some(episode) => query.bind(episode.to_owned()),
            None => query,
        }
    }

    /// The store, for what belongs to no episode (worlds, heads, receipts, commit times).
    pub fn store(&self) -> &Store {
        self.store
    }

    /// The payloads of those of `refs` the store holds and this reader reads, a query per
    /// [`KEYS_PER_READ`] refs.
    pub async fn payloads(&self, refs: &[HashRef]) -> Result<HashMap<HashRef, Vec<u8>>, StoreError> {
        let mut found = HashMap::with_capacity(refs.len());
        for chunk in refs.chunks(KEYS_PER_READ) {
            let sql = format!(
                "SELECT hash, payload FROM objects o WHERE o.hash IN {}{}",
                placeholders(1, chunk.len()),
                self.reader.objects_clause(chunk.len() + 1)
            );
            let query = chunk.iter().fold(sqlx::query(sqlx::AssertSqlSafe(sql)), |q, r| q.bind(r.to_string()));
            for row in self.bind_episode(query).fetch_all(&self.store.pool).await? {
                found.insert(column_ref(&row, "hash")?, row.blob("payload")?);
            }
        }
        Ok(found)
    }

    pub async fn object(&self, hash: &HashRef, with_payload: bool) -> Result<Option<StoredObject>, StoreError> {
        let columns = if with_payload {
            "hash, interface_hash, semantic_id, provenance, payload"
        } else {
            "hash, interface_hash, semantic_id, provenance"
        };
        let sql = format!("SELECT {columns} FROM objects o WHERE o.hash = $1{}", self.reader.objects_clause(2));
        let query = self.bind_episode(sqlx::query(sqlx::AssertSqlSafe(sql)).bind(hash.to_string()));
        let row = query.fetch_optional(&self.store.pool).await?;
        row.map(|row| object_from_row(&row, with_payload)).transpose()
    }

    /// Objects with this semantic id in ascending hash order, strictly after `after`, without
    /// payloads.
    pub async fn objects_by_semantic_id(
        &self,
        semantic_id: &str,
        after: Option<&HashRef>,
        limit: u32,
    ) -> Result<Vec<StoredObject>, StoreError> {
        // The index holds every kind but those calls write, and a query may use it only if it
        // states the index's condition; a call's kind is walked in hash order instead.
        let indexed =
            if EPISODE_KINDS.contains(&semantic_id) { String::new() } else { format!(" AND {}", indexed_kinds()) };
        let sql = format!(
            "SELECT hash, interface_hash, semantic_id, provenance FROM objects o \
             WHERE o.semantic_id = $1{indexed} AND o.hash > $2{} ORDER BY o.hash LIMIT $3",
            self.reader.objects_clause(4)
        );
        let query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(semantic_id.to_owned())
            .bind(after.map(|a| a.to_string()).unwrap_or_default())
            .bind(i64::from(clamp_page(limit)));
        let rows = self.bind_episode(query).fetch_all(&self.store.pool).await?;
        rows.iter().map(|row| object_from_row(row, false)).collect()
    }

    /// The first log entry this reader reads whose commit carried `object`: the same bytes
    /// committed by two episodes lead each to its own entry.
    pub async fn entry_of_object(&self, object: &HashRef) -> Result<Option<LogEntry>, StoreError> {
        // The entry on the object's row carried it first; `commit_objects` holds the others.
        let carried = "SELECT entry_index FROM objects WHERE hash = $1 AND entry_index IS NOT NULL \
                       UNION ALL SELECT entry_index FROM commit_objects WHERE object_ref = $1";
        let sql = match self.reader {
            Reader::Everything => format!("SELECT MIN(c.entry_index) AS entry_index FROM ({carried}) AS c"),
            Reader::Episode(_) => format!(
                "SELECT MIN(c.entry_index) AS entry_index FROM ({carried}) AS c \
                 JOIN log_entries e ON e.entry_index = c.entry_index WHERE true{}",
                self.reader.entries_clause(2)
            ),
        };
        let query = self.bind_episode(sqlx::query(sqlx::AssertSqlSafe(sql)).bind(object.to_string()));
        let row = query.fetch_one(&self.store.pool).await?;
        match sqlx::Row::try_get::<Option<i64>, _>(&row, "entry_index")? {
            Some(index) => self.log_entry(index).await,
            None => Ok(None),
        }
    }

    pub async fn log_entry(&self, index: i64) -> Result<Option<LogEntry>, StoreError> {
        let sql = format!(
            "SELECT {ENTRY_COLUMNS} FROM log_entries e WHERE e.entry_index = $1{}",
            self.reader.entries_clause(2)
        );
        let row = self
            .bind_episode(sqlx::query(sqlx::AssertSqlSafe(sql)).bind(index))
            .fetch_optional(&self.store.pool)
            .await?;
        row.map(|row| entry_from_row(&row)).transpose()
    }

    /// The entries this reader reads among the consecutive ones from `from` upward (at most
    /// `limit` of them), stopping at the first index the log does not hold.
    pub async fn log_page(&self, from: i64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let limit = clamp_page(limit);
        let Some(last) = from.checked_add(i64::from(limit) - 1) else {
            return Ok(Vec::new());
        };
        let sql = format!(
            "SELECT {ENTRY_COLUMNS}, episode FROM log_entries WHERE entry_index >= $1 AND entry_index <= $2 \
             ORDER BY entry_index"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(from).bind(last).fetch_all(&self.store.pool).await?;
        let mut page = Vec::with_capacity(rows.len());
        for (expected, row) in (from..).zip(rows.iter()) {
            let entry = entry_from_row(row)?;
            if entry.entry_index != expected {
                break;
            }
            if self.reader.reads_entry(&row.text("episode")?) {
                page.push(entry);
            }
        }
        Ok(page)
    }

    /// Up to `limit` entries this reader reads below `before` (from the newest when `None`),
    /// newest first.
    pub async fn log_page_newest_first(&self, before: Option<i64>, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let before = before.unwrap_or(i64::MAX);
        let limit = i64::from(clamp_page(limit));
        let rows = match self.reader.episode() {
            None => {
                let sql = format!(
                    "SELECT {ENTRY_COLUMNS} FROM log_entries WHERE entry_index < $1 ORDER BY entry_index DESC LIMIT $2"
                );
                sqlx::query(sqlx::AssertSqlSafe(sql)).bind(before).bind(limit).fetch_all(&self.store.pool).await?
            }
            // One arm per episode read, each walking the (episode, entry_index) index in order,
            // so a page costs its rows however many entries other episodes logged.
            Some(episode) => {
                let sql = format!(
                    "SELECT {ENTRY_COLUMNS} FROM (SELECT {ENTRY_COLUMNS} FROM log_entries \
                     WHERE episode = '' AND entry_index < $1 ORDER BY entry_index DESC LIMIT $2) AS none \
                     UNION ALL SELECT {ENTRY_COLUMNS} FROM (SELECT {ENTRY_COLUMNS} FROM log_entries \
                     WHERE episode = $3 AND entry_index < $4 ORDER BY entry_index DESC LIMIT $5) AS own \
                     ORDER BY entry_index DESC LIMIT $6"
                );
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(before)
                    .bind(limit)
                    .bind(episode.to_owned())
                    .bind(before)
                    .bind(limit)
                    .bind(limit)
                    .fetch_all(&self.store.pool)
                    .await?
            }
        };
        rows.iter().map(entry_from_row).collect()
    }
}

/// Adds the episode rows of the objects of a store from before version 8 to `script`:
/// `(object, episode)` pairs, each written once however often it repeats.
fn insert_object_episodes(script: &mut Script, pairs: &[(HashRef, &str)]) {
    let mut seen = std::collections::HashSet::with_capacity(pairs.len());
    let unique: Vec<_> = pairs.iter().filter(|pair| seen.insert(**pair)).collect();
    let insert = "INSERT INTO object_episodes (object_ref, episode)";
    script.insert_rows(
        insert,
        2,
        "ON CONFLICT (object_ref, episode) DO NOTHING",
        &unique,
        |script, (hash, episode)| {
            script.bind(hash.to_string()).bind(*episode);
        },
    );
}

/// The semantic ids of the objects an episode's calls and effects write. A store from before
/// episodes were recorded leaves those it cannot trace to an episode to readers of every
/// episode; every other object it holds belongs to no episode. In this order, they are the
/// kinds the semantic-id index leaves out (`indexed_kinds`).
const EPISODE_KINDS: [&str; 11] = [
    "world/invocation-input/v1",
    "world/invocation-output/v1",
    "world/invocation-record/v1",
    "world/invocation-record/v2",
    "world/effect-plan/v1",
    super::journal::INTENT_SEMANTIC_ID,
    super::journal::OUTCOME_SEMANTIC_ID,
    effect::REQUEST,
    effect::RESULT,
    effect::RECORD,
    effect::INTENT,
];

/// The condition of the `objects_by_semantic_id` index (schema version 8): every kind but
/// [`EPISODE_KINDS`], which calls write several of each.
pub(super) fn indexed_kinds() -> String {
    let kinds = EPISODE_KINDS.iter().map(|kind| format!("'{kind}'")).collect::<Vec<_>>().join(", ");
    format!("semantic_id NOT IN ({kinds})")
}

/// Records the episodes of what a store written before schema version 7 holds, inside the
/// migration's transaction: each invocation entry's episode from its record, each committed
/// object's from its entries, each journaled object's (and the effect objects it names) from
/// its journal id; everything else of no episode. Entries of commits that named no episode
/// (genesis, REST commits) belong to none, as they did when they were written.
pub(super) async fn backfill(conn: &mut AnyConnection) -> Result<(), StoreError> {
    backfill_entries(conn).await?;
    // Committed objects belong to their entries' episodes.
    sqlx::query(
        "INSERT INTO object_episodes (object_ref, episode) SELECT DISTINCT c.object_ref, e.episode \
         FROM commit_objects c JOIN log_entries e ON e.entry_index = c.entry_index",
    )
    .execute(&mut *conn)
    .await?;
    backfill_journal(conn).await?;
    // The rest belongs to no episode, unless it is of a kind only episodes write.
    let sql = format!(
        "INSERT INTO object_episodes (object_ref, episode) SELECT o.hash, '' FROM objects o \
         WHERE o.{} AND NOT EXISTS (SELECT 1 FROM object_episodes r WHERE r.object_ref = o.hash)",
        indexed_kinds()
    );
    sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *conn).await?;
    Ok(())
}

/// Rows the backfill reads at a time, so a large store's payloads never sit in memory at once.
const BACKFILL_BATCH: i64 = 1_000;

/// The next page of a backfill's keyset walk: `query` takes the key to start after (`$1`) and
/// the page size (`$2`) and orders by `key`, which `after` then moves to.
async fn next_batch(
    conn: &mut AnyConnection,
    query: &'static str,
    key: &str,
    after: &mut i64,
) -> Result<Vec<AnyRow>, StoreError> {
    let rows = sqlx::query(query).bind(*after).bind(BACKFILL_BATCH).fetch_all(&mut *conn).await?;
    if let Some(last) = rows.last() {
        *after = last.int(key)?;
    }
    Ok(rows)
}

/// Each invocation entry gets the episode its record names.
async fn backfill_entries(conn: &mut AnyConnection) -> Result<(), StoreError> {
    const RECORDS: &str = "SELECT e.entry_index, o.payload FROM log_entries e JOIN objects o ON o.hash = e.transition_ref \
         WHERE e.entry_index > $1 AND o.semantic_id IN ('world/invocation-record/v1', 'world/invocation-record/v2') \
         ORDER BY e.entry_index LIMIT $2";
    let mut after = -1;
    loop {
        let rows = next_batch(conn, RECORDS, "entry_index", &mut after).await?;
        if rows.is_empty() {
            return Ok(());
        }
        let mut by_episode: HashMap<String, Vec<i64>> = HashMap::new();
        for row in &rows {
            if let Some(episode) = json_episode(&row.blob("payload")?, "episodeId") {
                by_episode.entry(episode).or_default().push(row.int("entry_index")?);
            }
        }
        let mut script = Script::new();
        for (episode, indexes) in &by_episode {
            script.statement(&format!(
                "UPDATE log_entries SET episode = $1 WHERE entry_index IN {}",
                in_list(2, indexes.len())
            ));
            script.bind(episode.as_str());
            for index in indexes {
                script.bind(*index);
            }
        }
        script.run(&mut *conn).await?;
    }
}

/// Journaled objects belong to the episode their journal id names, and so do the effect
/// objects an intent or outcome names (an uncommitted call's request, result and record).
async fn backfill_journal(conn: &mut AnyConnection) -> Result<(), StoreError> {
    const JOURNALED: &str = "SELECT j.seq, j.invocation_id, j.object_ref, o.payload FROM journal j \
         JOIN objects o ON o.hash = j.object_ref WHERE j.seq > $1 ORDER BY j.seq LIMIT $2";
    let mut after = 0;
    loop {
        let rows = next_batch(conn, JOURNALED, "seq", &mut after).await?;
        if rows.is_empty() {
            return Ok(());
        }
        let mut pairs: BTreeSet<(HashRef, String)> = BTreeSet::new();
        let mut records = Vec::new();
        for row in &rows {
            let Some(episode) = journal_episode(&row.text("invocation_id")?) else { continue };
            pairs.insert((column_ref(row, "object_ref")?, episode.clone()));
            let payload = row.blob("payload")?;
            if let Some(request) = json_ref(&payload, "requestRef") {
                pairs.insert((request, episode.clone()));
            }
            if let Some(record) = json_ref(&payload, "recordRef") {
                pairs.insert((record, episode.clone()));
                records.push((record, episode));
            }
        }
        for (record, episode) in records {
            let row = sqlx::query("SELECT payload FROM objects WHERE hash = $1")
                .bind(record.to_string())
                .fetch_optional(&mut *conn)
                .await?;
            let Some(payload) = row.map(|row| row.blob("payload")).transpose()? else { continue };
            for key in ["requestRef", "resultRef"] {
                if let Some(named) = json_ref(&payload, key) {
                    pairs.insert((named, episode.clone()));
                }
            }
        }
        let pairs: Vec<(HashRef, &str)> = pairs.iter().map(|(hash, episode)| (*hash, episode.as_str())).collect();
        let mut script = Script::new();
        insert_object_episodes(&mut script, &pairs);
        script.run(&mut *conn).await?;
    }
}

/// `($n, $n+1, …)` for `count` values.
fn in_list(n: usize, count: usize) -> String {
    let list: Vec<String> = (n..n + count).map(|i| format!("${i}")).collect();
    format!("({})", list.join(", "))
}

/// The episode a journal id names: `a2a:<episode>:<task>`, `mcp:<episode>:<task>`,
/// `effect:<episode>:<ordinal>`; `None` for `rest:` ids and anything else.
fn journal_episode(id: &str) -> Option<String> {
    let (namespace, rest) = id.split_once(':')?;
    if !["a2a", "mcp", "effect"].contains(&namespace) {
        return None;
    }
    let (episode, _) = rest.split_once(':')?;
    world_model::Episode::parse(episode).ok().map(|episode| episode.as_str().to_owned())
}

/// The valid episode a JSON payload names under `key`.
fn json_episode(payload: &[u8], key: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(payload).ok()?;
    let episode = world_model::Episode::parse(value.get(key)?.as_str()?).ok()?;
    Some(episode.as_str().to_owned())
}

/// The ref a JSON payload names under `key`.
fn json_ref(payload: &[u8], key: &str) -> Option<HashRef> {
    let value: serde_json::Value = serde_json::from_slice(payload).ok()?;
    HashRef::parse(value.get(key)?.as_str()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_ids_name_their_episode() {
        assert_eq!(journal_episode("a2a:ep-1:task:with:colons").as_deref(), Some("ep-1"));
        assert_eq!(journal_episode("mcp:ep2:abc").as_deref(), Some("ep2"));
        assert_eq!(journal_episode("effect:ep3:0").as_deref(), Some("ep3"));
        for id in ["rest:x", "rest:ep:x", "a2a:Bad:x", "a2a:ep", "other:ep:x", ""] {
            assert_eq!(journal_episode(id), None, "{id}");
        }
    }

    #[test]
    fn readers_read_their_episode_and_none() {
        let own = Reader::Episode("ep1".into());
        assert!(own.reads_entry("ep1") && own.reads_entry(NO_EPISODE) && !own.reads_entry("ep2"));
        assert!(Reader::Everything.reads_entry("ep2"));
        assert_eq!(Reader::Everything.entries_clause(2), "");
        assert_eq!(own.entries_clause(2), " AND e.episode IN ('', $2)");
    }
}
