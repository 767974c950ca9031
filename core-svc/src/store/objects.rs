//! Objects, worlds, the log and named heads: the content-addressed half of the store.

use std::collections::{HashMap, HashSet};

use sqlx::AnyConnection;
use world_model::HashRef;

use super::reads::{NO_EPISODE, Reader};
use super::rows::{column_ref, world_from_row};
use super::script::{Script, Value};
use super::{LogEntry, REGISTRY_PREFIX, SELECTED_WORLD_HEAD, Store, StoreError, StoredObject, WorldRow};

impl Store {
    /// The first log entry whose commit carried `object`.
    pub async fn entry_of_object(&self, object: &HashRef) -> Result<Option<LogEntry>, StoreError> {
        self.reads(&Reader::Everything).entry_of_object(object).await
    }

    // ----- objects -------------------------------------------------------

    /// Stores an object of no episode (a source, a registry, an epoch, an interpreter record)
    /// after checking its payload hashes to its ref; identical objects are kept once (the
    /// first writer's provenance wins).
    pub async fn put_object(&self, object: &StoredObject) -> Result<(), StoreError> {
        object.verify("object")?;
        let mut script = Script::new();
        insert_objects(&mut script, &[ObjectWrite::of(object, NO_EPISODE)]);
        let _turn = self.writer_turn().await;
        script.run(&mut *self.pool.acquire().await?).await
    }

    pub async fn get_object(&self, hash: &HashRef, with_payload: bool) -> Result<Option<StoredObject>, StoreError> {
        self.reads(&Reader::Everything).object(hash, with_payload).await
    }

    // ----- worlds, log, heads --------------------------------------------

    pub async fn selected_head(&self) -> Result<Option<HashRef>, StoreError> {
        head(&mut *self.pool.acquire().await?, SELECTED_WORLD_HEAD).await
    }

    pub async fn world(&self, reference: &HashRef) -> Result<Option<WorldRow>, StoreError> {
        const SQL: &str = "SELECT world_ref, revision, state_root, log_head FROM worlds WHERE world_ref = $1";
        self.row_by(SQL, &reference.to_string(), world_from_row).await
    }

    pub async fn log_entry(&self, index: i64) -> Result<Option<LogEntry>, StoreError> {
        self.reads(&Reader::Everything).log_entry(index).await
    }

    /// Consecutive entries from `from` upward, stopping at the first absent index.
    pub async fn log_page(&self, from: i64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        self.reads(&Reader::Everything).log_page(from, limit).await
    }

    /// The payloads of those of `refs` the store holds, a query per [`KEYS_PER_READ`] refs.
    pub async fn payloads(&self, refs: &[HashRef]) -> Result<HashMap<HashRef, Vec<u8>>, StoreError> {
        self.reads(&Reader::Everything).payloads(refs).await
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

/// One object to write: a verified object, the episode it is written for ([`NO_EPISODE`] for
/// none) and the entry whose commit carries it, if a commit does.
pub(super) struct ObjectWrite<'a> {
    pub object: &'a StoredObject,
    pub episode: &'a str,
    pub entry: Option<i64>,
}

impl<'a> ObjectWrite<'a> {
    /// `object`, verified when it was made or checked, written outside any commit.
    pub(super) fn of(object: &'a StoredObject, episode: &'a str) -> Self {
        Self { object, episode, entry: None }
    }
}

/// Adds verified objects to `script` in as few statements as possible. A hash already stored,
/// or repeated in `writes`, keeps its first row, which names its first write's episode and
/// entry; every other episode or entry a write brings gains a row of its own in
/// `object_episodes` or `commit_objects` (schema version 8).
pub(super) fn insert_objects(script: &mut Script, writes: &[ObjectWrite<'_>]) {
    let mut seen = HashSet::with_capacity(writes.len());
    let unique: Vec<_> = writes.iter().filter(|write| seen.insert(write.object.hash)).collect();
    let insert = "INSERT INTO objects (hash, interface_hash, semantic_id, provenance, payload, episode, entry_index)";
    script.insert_rows(insert, 7, "ON CONFLICT (hash) DO NOTHING", &unique, |script, write| {
        let object = write.object;
        script
            .bind(object.hash.to_string())
            .bind(object.interface_hash.to_string())
            .bind(object.semantic_id.as_str())
            .bind(object.provenance.as_str())
            .bind(object.payload.as_deref().unwrap_or_default())
            .bind(write.episode)
            .bind(write.entry);
    });
    let episodes: Vec<_> = writes.iter().map(|w| (w.object.hash, w.episode)).collect();
    insert_beside_first_writer(script, "object_episodes", "episode", &episodes);
    let entries: Vec<_> = writes.iter().filter_map(|w| Some((w.object.hash, w.entry?))).collect();
    insert_beside_first_writer(script, "commit_objects", "entry_index", &entries);
}

/// Rows `(object_ref, column)` of `table` for those of `pairs` whose object's row names another
/// value in its own `column`, each pair once. It runs after the objects' insert, so it compares
/// with the row each object has now; a row from before version 8 names none, and keeps gaining
/// rows.
fn insert_beside_first_writer<T>(script: &mut Script, table: &str, column: &str, pairs: &[(HashRef, T)])
where
    T: Copy + Eq + std::hash::Hash + Into<Value>,
{
    let mut seen = HashSet::with_capacity(pairs.len());
    let unique: Vec<_> = pairs.iter().filter(|pair| seen.insert(**pair)).collect();
    script.insert_rows(
        &format!("INSERT INTO {table} (object_ref, {column}) SELECT v.column1, v.column2 FROM ("),
        2,
        &format!(
            ") AS v JOIN objects o ON o.hash = v.column1 WHERE o.{column} IS NULL OR o.{column} <> v.column2 \
             ON CONFLICT (object_ref, {column}) DO NOTHING"
        ),
        &unique,
        |script, (hash, value)| {
            script.bind(hash.to_string()).bind(*value);
        },
    );
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
