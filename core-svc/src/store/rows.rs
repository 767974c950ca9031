//! Result rows as typed records, read the same from sqlx rows and direct SQLite rows.

use sqlx::Row;
use sqlx::any::AnyRow;
use world_model::HashRef;

use super::{LogEntry, Store, StoreError, StoredObject, WorldRow};

/// A result row's columns by name, read the same from a sqlx row and a direct SQLite row.
pub(super) trait Columns {
    fn text(&self, column: &str) -> Result<String, StoreError>;
    fn optional_text(&self, column: &str) -> Result<Option<String>, StoreError>;
    fn int(&self, column: &str) -> Result<i64, StoreError>;
    fn blob(&self, column: &str) -> Result<Vec<u8>, StoreError>;
}

/// Implements [`Columns`] for a row type through its by-name getter (`try_get` on sqlx rows,
/// `get` on rusqlite rows): the two getters take different trait bounds, so one generic body
/// cannot serve both.
macro_rules! columns_through {
    ($row:ty, $get:ident) => {
        impl Columns for $row {
            fn text(&self, column: &str) -> Result<String, StoreError> {
                Ok(self.$get(column)?)
            }

            fn optional_text(&self, column: &str) -> Result<Option<String>, StoreError> {
                Ok(self.$get(column)?)
            }

            fn int(&self, column: &str) -> Result<i64, StoreError> {
                Ok(self.$get(column)?)
            }

            fn blob(&self, column: &str) -> Result<Vec<u8>, StoreError> {
                Ok(self.$get(column)?)
            }
        }
    };
}

columns_through!(AnyRow, try_get);
columns_through!(rusqlite::Row<'_>, get);

impl Store {
    /// The row `sql` finds by its one parameter, `key`, decoded; `None` when there is none.
    pub(super) async fn row_by<T>(
        &self,
        sql: &'static str,
        key: &str,
        decode: impl FnOnce(&AnyRow) -> Result<T, StoreError>,
    ) -> Result<Option<T>, StoreError> {
        let row = sqlx::query(sql).bind(key).fetch_optional(&self.pool).await?;
        row.as_ref().map(decode).transpose()
    }
}

pub(super) fn column_ref(row: &(impl Columns + ?Sized), column: &str) -> Result<HashRef, StoreError> {
    parse_column_ref(column, &row.text(column)?)
}

pub(super) fn optional_column_ref(row: &(impl Columns + ?Sized), column: &str) -> Result<Option<HashRef>, StoreError> {
    row.optional_text(column)?.map(|text| parse_column_ref(column, &text)).transpose()
}

pub(super) fn parse_column_ref(column: &str, text: &str) -> Result<HashRef, StoreError> {
    HashRef::parse(text).map_err(|e| StoreError::Damaged(format!("{column} {text:?}: {e}")))
}

pub(super) fn object_from_row(row: &(impl Columns + ?Sized), with_payload: bool) -> Result<StoredObject, StoreError> {
    Ok(StoredObject {
        hash: column_ref(row, "hash")?,
        interface_hash: column_ref(row, "interface_hash")?,
        semantic_id: row.text("semantic_id")?,
        provenance: row.text("provenance")?,
        payload: if with_payload { Some(row.blob("payload")?) } else { None },
    })
}

pub(super) fn world_from_row(row: &(impl Columns + ?Sized)) -> Result<WorldRow, StoreError> {
    Ok(WorldRow {
        reference: column_ref(row, "world_ref")?,
        revision: row.int("revision")?,
        state_root: column_ref(row, "state_root")?,
        log_head: column_ref(row, "log_head")?,
    })
}

pub(super) fn entry_from_row(row: &(impl Columns + ?Sized)) -> Result<LogEntry, StoreError> {
    Ok(LogEntry {
        entry_index: row.int("entry_index")?,
        semantics_epoch: row.int("semantics_epoch")?,
        transition_fn: column_ref(row, "transition_fn")?,
        interpreter: column_ref(row, "interpreter")?,
        prev_entry_hash: column_ref(row, "prev_entry_hash")?,
        written_by: row.text("written_by")?,
        entry_hash: column_ref(row, "entry_hash")?,
        transition_ref: column_ref(row, "transition_ref")?,
    })
}
