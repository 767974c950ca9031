//! Versioned migrations, one script per version and backend. A store whose
//! version is newer than this build knows is refused without being touched.

use sqlx::{AnyConnection, Row};

use super::{Backend, StoreError};

struct Migration {
    version: i64,
    sqlite: &'static str,
    postgres: &'static str,
}

/// Migration `$version`: `migrations/sqlite/$file.sql` and `migrations/postgres/$file.sql`.
macro_rules! migration {
    ($version:literal, $file:literal) => {
        Migration {
            version: $version,
            sqlite: include_str!(concat!("../../migrations/sqlite/", $file, ".sql")),
            postgres: include_str!(concat!("../../migrations/postgres/", $file, ".sql")),
        }
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
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 7;

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
        let script = match backend {
            Backend::Sqlite => migration.sqlite,
            Backend::Postgres => migration.postgres,
        };
        sqlx::raw_sql(script).execute(&mut *conn).await?;
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
