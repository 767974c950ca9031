//! Several write statements sent as one. On SQLite each query is a round trip to the
//! driver's worker thread, a wake-up on each side that on a busy machine costs more than the
//! statement, so a script runs there as one multi-statement query; PostgreSQL prepares one
//! statement at a time, so there it runs statement by statement.

use std::fmt::Write;

use sqlx::any::AnyArguments;
use sqlx::encode::Encode;
use sqlx::error::BoxDynError;
use sqlx::types::Type;
use sqlx::{Any, AnyConnection, Arguments};

use super::{Backend, StoreError};

/// Rows per multi-row INSERT: far below either backend's limit on bound values.
pub(super) const ROWS_PER_INSERT: usize = 100;
/// A SQLite query takes further statements until it holds this many values, below a stock
/// SQLite's limit of 32766 on one query's highest `$N` (a statement adds at most
/// `ROWS_PER_INSERT` rows of a few columns).
const VALUES_PER_SQLITE_QUERY: usize = 16_384;

pub(super) struct Script {
    backend: Backend,
    /// On SQLite one query (more only for very large scripts), whose `$N` number its values.
    queries: Vec<(String, AnyArguments)>,
    /// The first value that failed to encode; the script then does not run.
    unbound: Option<BoxDynError>,
}

impl Script {
    pub(super) fn new(backend: Backend) -> Self {
        Self { backend, queries: Vec::new(), unbound: None }
    }

    /// Appends a statement whose placeholders are numbered `$1`, `$2`, … from its own first
    /// value; bind its values next, in that order.
    pub(super) fn statement(&mut self, sql: &str) -> &mut Self {
        match (self.backend, self.queries.last_mut()) {
            (Backend::Sqlite, Some((script, arguments))) if arguments.len() < VALUES_PER_SQLITE_QUERY => {
                script.push_str(";\n");
                renumber(sql, arguments.len(), script);
            }
            _ => self.queries.push((sql.to_owned(), AnyArguments::default())),
        }
        self
    }

    pub(super) fn bind<'t, T: Encode<'t, Any> + Type<Any>>(&mut self, value: T) -> &mut Self {
        let (_, arguments) = self.queries.last_mut().expect("a value is bound to a statement");
        if let Err(error) = arguments.add(value)
            && self.unbound.is_none()
        {
            self.unbound = Some(error);
        }
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
        if let Some(error) = self.unbound {
            return Err(sqlx::Error::Encode(error).into());
        }
        for (sql, arguments) in self.queries {
            sqlx::query_with(sqlx::AssertSqlSafe(sql), arguments).execute(&mut *conn).await?;
        }
        Ok(())
    }
}

/// `sql` with every `$N` raised by `offset`, appended to `out`. The store's own statements
/// hold no `$` but in placeholders.
fn renumber(sql: &str, offset: usize, out: &mut String) {
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits].parse::<usize>() {
            Ok(n) => {
                let _ = write!(out, "{}", n + offset);
            }
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
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
    fn renumbering_raises_every_placeholder_and_nothing_else() {
        let mut out = String::new();
        renumber("UPDATE t SET a = $1 WHERE b IN ($2, $10) AND c = 'x'", 7, &mut out);
        assert_eq!(out, "UPDATE t SET a = $8 WHERE b IN ($9, $17) AND c = 'x'");
        let mut out = String::new();
        renumber("SELECT $", 3, &mut out);
        assert_eq!(out, "SELECT $");
    }

    #[test]
    fn sqlite_scripts_are_one_query_postgres_scripts_one_per_statement() {
        let build = |backend| {
            let mut script = Script::new(backend);
            script.statement("INSERT INTO a (x) VALUES ($1)").bind(1_i64);
            script.statement("INSERT INTO b (x, y) VALUES ($1, $2)").bind(2_i64).bind("y");
            script
        };
        let sqlite = build(Backend::Sqlite);
        assert_eq!(sqlite.queries.len(), 1);
        assert_eq!(sqlite.queries[0].0, "INSERT INTO a (x) VALUES ($1);\nINSERT INTO b (x, y) VALUES ($2, $3)");
        assert_eq!(sqlite.queries[0].1.len(), 3);
        let mut large = Script::new(Backend::Sqlite);
        for i in 0..=VALUES_PER_SQLITE_QUERY as i64 {
            large.statement("INSERT INTO a (x) VALUES ($1)").bind(i);
        }
        let sizes: Vec<usize> = large.queries.iter().map(|(_, arguments)| arguments.len()).collect();
        assert_eq!(sizes, [VALUES_PER_SQLITE_QUERY, 1]);
        assert_eq!(large.queries[1].0, "INSERT INTO a (x) VALUES ($1)");
        let postgres = build(Backend::Postgres);
        let sql: Vec<&str> = postgres.queries.iter().map(|(sql, _)| sql.as_str()).collect();
        assert_eq!(sql, ["INSERT INTO a (x) VALUES ($1)", "INSERT INTO b (x, y) VALUES ($1, $2)"]);
    }
}
