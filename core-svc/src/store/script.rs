//! Write statements built apart from running them, so one batch of writes runs the same on
//! a sqlx connection (PostgreSQL, and SQLite outside the hot paths) and on a direct SQLite
//! connection (see `direct`).

use std::fmt::Write;

use sqlx::any::AnyArguments;
use sqlx::{AnyConnection, Arguments};

use super::StoreError;

/// Rows per multi-row INSERT: far below either backend's limit on bound values.
pub(super) const ROWS_PER_INSERT: usize = 100;
/// Keys per `IN (…)` list of a read: far below either backend's limit on bound values.
pub(super) const KEYS_PER_READ: usize = 500;

/// One bound value.
#[derive(Debug)]
pub(super) enum Value {
    Int(i64),
    /// An integer column's NULL.
    NoInt,
    Text(String),
    Blob(Vec<u8>),
}

impl From<i64> for Value {
    fn from(value: i64) -> Self {
        Value::Int(value)
    }
}

impl From<Option<i64>> for Value {
    fn from(value: Option<i64>) -> Self {
        value.map_or(Value::NoInt, Value::Int)
    }
}

impl From<String> for Value {
    fn from(value: String) -> Self {
        Value::Text(value)
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Value::Text(value.to_owned())
    }
}

impl From<&[u8]> for Value {
    fn from(value: &[u8]) -> Self {
        Value::Blob(value.to_vec())
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Int(value) => ValueRef::Integer(*value),
            Value::NoInt => ValueRef::Null,
            Value::Text(value) => ValueRef::Text(value.as_bytes()),
            Value::Blob(value) => ValueRef::Blob(value),
        }))
    }
}

#[derive(Default)]
pub(super) struct Script {
    /// Each statement with its values, which its `$1`, `$2`, … name in order.
    statements: Vec<(String, Vec<Value>)>,
}

impl Script {
    pub(super) fn new() -> Self {
        Self::default()
    }

    /// Appends a statement whose placeholders are numbered `$1`, `$2`, … in the order they
    /// first appear; bind its values next, in that order.
    pub(super) fn statement(&mut self, sql: &str) -> &mut Self {
        self.statements.push((sql.to_owned(), Vec::new()));
        self
    }

    pub(super) fn bind(&mut self, value: impl Into<Value>) -> &mut Self {
        let (_, values) = self.statements.last_mut().expect("a value is bound to a statement");
        values.push(value.into());
        self
    }

    /// `insert` (`INSERT INTO t (a, b)`) of every row, in as few statements as possible;
    /// `tail` follows the VALUES list and `bind` binds one row's `columns` values.
    pub(super) fn insert_rows<T>(
        &mut self,
        insert: &str,
        columns: usize,
        tail: &str,
        rows: &[T],
        bind: impl Fn(&mut Self, &T),
    ) {
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            self.statement(&format!("{insert} VALUES {} {tail}", placeholders(chunk.len(), columns)));
            for row in chunk {
                bind(self, row);
            }
        }
    }

    pub(super) async fn run(self, conn: &mut AnyConnection) -> Result<(), StoreError> {
        for (sql, values) in self.statements {
            let mut arguments = AnyArguments::default();
            for value in values {
                let added = match value {
                    Value::Int(value) => arguments.add(value),
                    Value::NoInt => arguments.add(None::<i64>),
                    Value::Text(value) => arguments.add(value),
                    Value::Blob(value) => arguments.add(value),
                };
                added.map_err(sqlx::Error::Encode)?;
            }
            sqlx::query_with(sqlx::AssertSqlSafe(sql), arguments).execute(&mut *conn).await?;
        }
        Ok(())
    }

    /// Runs the script on a direct SQLite connection; statements repeat from batch to batch,
    /// so they are prepared once and kept.
    pub(super) fn run_direct(self, conn: &rusqlite::Connection) -> Result<(), StoreError> {
        for (sql, values) in self.statements {
            conn.prepare_cached(&sql)?.execute(rusqlite::params_from_iter(values.iter()))?;
        }
        Ok(())
    }
}

/// `($1, $2), ($3, $4)` for `rows` rows of `columns` values.
pub(super) fn placeholders(rows: usize, columns: usize) -> String {
    let mut out = String::with_capacity(rows * columns * 5);
    for r in 0..rows {
        out.push_str(if r == 0 { "(" } else { ", (" });
        for c in 1..=columns {
            let _ = write!(out, "{}${}", if c == 1 { "" } else { ", " }, r * columns + c);
        }
        out.push(')');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_number_rows_then_columns() {
        assert_eq!(placeholders(2, 2), "($1, $2), ($3, $4)");
        assert_eq!(placeholders(1, 3), "($1, $2, $3)");
        assert_eq!(placeholders(0, 3), "");
    }

    #[test]
    fn rows_are_inserted_a_hundred_per_statement() {
        let mut script = Script::new();
        let rows: Vec<i64> = (0..250).collect();
        script.insert_rows("INSERT INTO a (x, y)", 2, "", &rows, |script, row| {
            script.bind(*row).bind("y");
        });
        let sizes: Vec<usize> = script.statements.iter().map(|(_, values)| values.len()).collect();
        assert_eq!(sizes, [200, 200, 100]);
        assert!(script.statements[2].0.ends_with("($99, $100) "), "{}", script.statements[2].0);
    }
}
