//! Objects, worlds, the log and named heads: the content-addressed half of the store.

use std::collections::HashMap;

use sqlx::AnyConnection;
use world_model::HashRef;

use super::rows::{column_ref, entry_from_row, object_from_row, world_from_row};
use super::script::{KEYS_PER_READ, Script, placeholders};
use super::{
    Columns, LogEntry, REGISTRY_PREFIX, SELECTED_WORLD_HEAD, Store, StoreError, StoredObject, WorldRow, clamp_page,
};

/// `SELECT <every log entry column> FROM log_entries` followed by the given clauses.
macro_rules! select_entries {
    ($($clause:literal),*) => {
        concat!(
            "SELECT entry_index, semantics_epoch, transition_fn, interpreter, prev_entry_hash, ",
            "written_by, entry_hash, transition_ref FROM log_entries ",
            $($clause),*
        )
    };
}

impl Store {
    /// The first log entry whose commit carried `object`.
    pub async fn entry_of_object(&self, object: &HashRef) -> Result<Option<LogEntry>, StoreError> {
        let row = sqlx::query("SELECT MIN(entry_index) AS entry_index FROM commit_objects WHERE object_ref = $1")
            .bind(object.to_string())
            .fetch_one(&self.pool)
            .await?;
        match sqlx::Row::try_get::<Option<i64>, _>(&row, "entry_index")? {
            Some(index) => self.log_entry(index).await,
            None => Ok(None),
        }
    }

    // ----- objects -------------------------------------------------------

    /// Stores an object after checking its payload hashes to its ref;
    /// identical objects are kept once (the first writer's provenance wins).
    pub async fn put_object(&self, object: &StoredObject) -> Result<(), StoreError> {
        let payload = object.verify("object")?;
        let mut script = Script::new();
        insert_objects(&mut script, &[(object, payload)]);
        let _turn = self.writer_turn().await;
        script.run(&mut *self.pool.acquire().await?).await
    }

    pub async fn get_object(&self, hash: &HashRef, with_payload: bool) -> Result<Option<StoredObject>, StoreError> {
        let sql = if with_payload {
            "SELECT hash, interface_hash, semantic_id, provenance, payload FROM objects WHERE hash = $1"
        } else {
            "SELECT hash, interface_hash, semantic_id, provenance FROM objects WHERE hash = $1"
        };
        let row = sqlx::query(sql).bind(hash.to_string()).fetch_optional(&self.pool).await?;
        row.map(|row| object_from_row(&row, with_payload)).transpose()
    }

    /// Objects with this semantic id in ascending hash order, strictly after
    /// `after`, without payloads.
    pub async fn objects_by_semantic_id(
        &self,
        semantic_id: &str,
        after: Option<&HashRef>,
        limit: u32,
    ) -> Result<Vec<StoredObject>, StoreError> {
        let after = after.map(|a| a.to_string()).unwrap_or_default();
        let rows = sqlx::query(
            "SELECT hash, interface_hash, semantic_id, provenance FROM objects \
             WHERE semantic_id = $1 AND hash > $2 ORDER BY hash LIMIT $3",
        )
        .bind(semantic_id)
        .bind(after)
        .bind(i64::from(clamp_page(limit)))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|row| object_from_row(row, false)).collect()
    }

    // ----- worlds, log, heads --------------------------------------------

    pub async fn selected_head(&self) -> Result<Option<HashRef>, StoreError> {
        head(&mut *self.pool.acquire().await?, SELECTED_WORLD_HEAD).await
    }

    pub async fn world(&self, reference: &HashRef) -> Result<Option<WorldRow>, StoreError> {
        let row = sqlx::query("SELECT world_ref, revision, state_root, log_head FROM worlds WHERE world_ref = $1")
            .bind(reference.to_string())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| world_from_row(&row)).transpose()
    }

    pub async fn log_entry(&self, index: i64) -> Result<Option<LogEntry>, StoreError> {
        let row = sqlx::query(select_entries!("WHERE entry_index = $1")).bind(index).fetch_optional(&self.pool).await?;
        row.map(|row| entry_from_row(&row)).transpose()
    }

    /// Consecutive entries from `from` upward, stopping at the first absent index.
    pub async fn log_page(&self, from: i64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let limit = clamp_page(limit);
        let Some(last) = from.checked_add(i64::from(limit) - 1) else {
            return Ok(Vec::new());
        };
        let rows = sqlx::query(select_entries!("WHERE entry_index >= $1 AND entry_index <= $2 ORDER BY entry_index"))
            .bind(from)
            .bind(last)
            .fetch_all(&self.pool)
            .await?;
        let mut page = Vec::with_capacity(rows.len());
        for (expected, row) in (from..).zip(rows.iter()) {
            let entry = entry_from_row(row)?;
            if entry.entry_index != expected {
                break;
            }
            page.push(entry);
        }
        Ok(page)
    }

    /// Up to `limit` entries below `before` (from the newest when `None`), newest first.
    pub async fn log_page_newest_first(&self, before: Option<i64>, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let rows = sqlx::query(select_entries!("WHERE entry_index < $1 ORDER BY entry_index DESC LIMIT $2"))
            .bind(before.unwrap_or(i64::MAX))
            .bind(i64::from(clamp_page(limit)))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(entry_from_row).collect()
    }

    /// The payloads of those of `refs` the store holds, a query per [`KEYS_PER_READ`] refs.
    pub async fn payloads(&self, refs: &[HashRef]) -> Result<HashMap<HashRef, Vec<u8>>, StoreError> {
        let mut found = HashMap::with_capacity(refs.len());
        for chunk in refs.chunks(KEYS_PER_READ) {
            let sql = format!("SELECT hash, payload FROM objects WHERE hash IN {}", placeholders(1, chunk.len()));
            let query = chunk.iter().fold(sqlx::query(sqlx::AssertSqlSafe(sql)), |q, r| q.bind(r.to_string()));
            for row in query.fetch_all(&self.pool).await? {
                found.insert(column_ref(&row, "hash")?, row.blob("payload")?);
            }
        }
        Ok(found)
    }

    // ----- registry heads ------------------------------------------------

    pub async fn registry_head(&self, name: &str) -> Result<Option<HashRef>, StoreError> {
        head(&mut *self.pool.acquire().await?, &registry_key(name)).await
    }

    /// Moves a registry head from `expected` (`None`: must be absent) to
    /// `next`, which must be a stored object.
    pub async fn compare_and_set_registry_head(
        &self,
        name: &str,
        expected: Option<&HashRef>,
        next: &HashRef,
    ) -> Result<(), StoreError> {
        let mut tx = self.write_tx().await?;
        if !object_exists(&mut tx, next).await? {
            return Err(StoreError::invalid("registry head", format!("{next} is not a stored object")));
        }
        let key = registry_key(name);
        let actual = head(&mut tx, &key).await?;
        if actual.as_ref() != expected {
            return Err(StoreError::RegistryConflict { name: name.to_owned(), expected: expected.copied(), actual });
        }
        let mut script = Script::new();
        set_head(&mut script, &key, next);
        script.run(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }
}

pub(super) fn registry_key(name: &str) -> String {
    format!("{REGISTRY_PREFIX}{name}")
}

/// Adds verified objects (each with its payload) to `script` in as few statements as
/// possible; a hash already stored, or repeated in `objects`, keeps its first row.
pub(super) fn insert_objects(script: &mut Script, objects: &[(&StoredObject, &[u8])]) {
    let mut seen = std::collections::HashSet::with_capacity(objects.len());
    let unique: Vec<_> = objects.iter().filter(|(object, _)| seen.insert(object.hash)).collect();
    let insert = "INSERT INTO objects (hash, interface_hash, semantic_id, provenance, payload)";
    script.insert_rows(insert, 5, "ON CONFLICT (hash) DO NOTHING", &unique, |script, (object, payload)| {
        script
            .bind(object.hash.to_string())
            .bind(object.interface_hash.to_string())
            .bind(object.semantic_id.as_str())
            .bind(object.provenance.as_str())
            .bind(*payload);
    });
}

pub(super) async fn object_exists(conn: &mut AnyConnection, hash: &HashRef) -> Result<bool, StoreError> {
    Ok(sqlx::query("SELECT 1 AS present FROM objects WHERE hash = $1")
        .bind(hash.to_string())
        .fetch_optional(conn)
        .await?
        .is_some())
}

pub(super) async fn head(conn: &mut AnyConnection, name: &str) -> Result<Option<HashRef>, StoreError> {
    let row = sqlx::query("SELECT ref FROM heads WHERE name = $1").bind(name).fetch_optional(conn).await?;
    row.map(|row| column_ref(&row, "ref")).transpose()
}

pub(super) fn set_head(script: &mut Script, name: &str, value: &HashRef) {
    script
        .statement("INSERT INTO heads (name, ref) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET ref = excluded.ref")
        .bind(name)
        .bind(value.to_string());
}
