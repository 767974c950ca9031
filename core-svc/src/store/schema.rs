//! Versioned migrations, one script per version for both backends. A store whose
//! version is newer than this build knows is refused without being touched.

use sqlx::{AnyConnection, Row};

use super::{Backend, StoreError};

struct Migration {
    version: i64,
    script: &'static str,
}

/// Migration `$version`: `migrations/$file.sql`.
macro_rules! migration {
    ($version:literal, $file:literal) => {
        Migration { version: $version, script: include_str!(concat!("../../migrations/", $file, ".sql")) }
    };
}

const MIGRATIONS: &[Migration] = &[
    migration!(1, "0001_initial"),
    migration!(2, "0002_drop_unread_indexes"),
    migration!(3, "0003_effects"),
    migration!(4, "0004_effect_spend"),
    migration!(5, "0005_core_liveness"),
    migration!(6, "0006_oauth"),
    migration!(7, "0007_episode_reads"),
    migration!(8, "0008_object_pages"),
];

/// The words the two dialects spell differently, as the scripts write them: `{int}` is a 64-bit
/// integer (SQLite's `INTEGER`, so that an `INTEGER PRIMARY KEY` stays the rowid), `{bytes}` a
/// byte string, `{without_rowid}` SQLite's clause for a table keyed by its primary key alone.
fn dialect(backend: Backend) -> [(&'static str, &'static str); 4] {
    match backend {
        Backend::Sqlite => {
            [("{backend}", "SQLite"), ("{int}", "INTEGER"), ("{bytes}", "BLOB"), ("{without_rowid}", " WITHOUT ROWID")]
        }
        Backend::Postgres => {
            [("{backend}", "PostgreSQL"), ("{int}", "BIGINT"), ("{bytes}", "BYTEA"), ("{without_rowid}", "")]
        }
    }
}

/// A migration script in `backend`'s dialect.
fn render(script: &str, backend: Backend) -> String {
    dialect(backend).iter().fold(script.to_owned(), |sql, (word, spelling)| sql.replace(word, spelling))
}

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 8;

/// Brings the store to [`SCHEMA_VERSION`] inside the caller's write
/// transaction (which already excludes concurrent migrators).
pub(super) async fn migrate(conn: &mut AnyConnection, backend: Backend, location: &str) -> Result<(), StoreError> {
    let current = current_version(conn, backend, location).await?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::FutureSchema {
            location: location.to_owned(),
            found: current,
            supported: SCHEMA_VERSION,
        });
    }
    if current == 0 {
        sqlx::raw_sql("CREATE TABLE world_schema (version BIGINT NOT NULL)").execute(&mut *conn).await?;
        sqlx::raw_sql("INSERT INTO world_schema (version) VALUES (0)").execute(&mut *conn).await?;
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version > current) {
        // The scripts are this build's own constants; only the dialect's words are put in.
        sqlx::raw_sql(sqlx::AssertSqlSafe(render(migration.script, backend))).execute(&mut *conn).await?;
        if migration.version == 7 {
            // Which episode each entry and object of an older store belongs to is in its
            // payloads (JSON), which are read here rather than by either database's SQL.
            super::reads::backfill(conn).await?;
        }
        sqlx::query("UPDATE world_schema SET version = $1").bind(migration.version).execute(&mut *conn).await?;
    }
    Ok(())
}

async fn current_version(conn: &mut AnyConnection, backend: Backend, location: &str) -> Result<i64, StoreError> {
    let tables_sql = match backend {
        Backend::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        Backend::Postgres => "SELECT tablename::text AS name FROM pg_tables WHERE schemaname = current_schema()",
    };
    let tables: Vec<String> = sqlx::query(tables_sql)
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| row.try_get::<String, _>("name"))
        .collect::<Result<_, _>>()?;
    if !tables.iter().any(|t| t == "world_schema") {
        if tables.is_empty() {
            return Ok(0);
        }
        return Err(StoreError::NotAWorldStore { location: location.to_owned() });
    }
    let row = sqlx::query("SELECT version FROM world_schema").fetch_optional(&mut *conn).await?;
    match row {
        Some(row) => Ok(row.try_get::<i64, _>("version")?),
        None => Err(StoreError::Damaged("world_schema has no version row".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_script_renders_to_plain_sql_in_both_dialects() {
        for migration in MIGRATIONS {
            for backend in [Backend::Sqlite, Backend::Postgres] {
                let sql = render(migration.script, backend);
                assert!(!sql.contains(['{', '}']), "migration {} keeps a placeholder: {sql}", migration.version);
            }
        }
        // Reads state the semantic-id index's condition to use it, so they must word it alike.
        let words = |text: &str| text.split_whitespace().collect::<String>();
        let partial = format!("ONobjects(semantic_id,hash)WHERE{};", words(&super::super::reads::indexed_kinds()));
        assert!(words(MIGRATIONS[7].script).contains(&partial), "{partial}");
        let initial = MIGRATIONS[0].script;
        assert!(render(initial, Backend::Sqlite).contains("entry_index INTEGER PRIMARY KEY"));
        assert!(render(initial, Backend::Postgres).contains("entry_index BIGINT PRIMARY KEY"));
    }
}
