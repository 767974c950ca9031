//! What the store-backed suites share: a fresh, empty store location of each backend, and one
//! test per backend for each rule.

use sqlx::Connection;
use world_core::store::StoreLocation;

/// Keeps a fresh location alive: the SQLite file's directory, or nothing (a PostgreSQL test
/// database outlives its test with the throwaway cluster).
pub enum Fresh {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres,
}

/// A new SQLite file, or a new database on the server `WORLD_TEST_POSTGRES_URL` names.
pub async fn fresh_location(backend: &str) -> (StoreLocation, Fresh) {
    match backend {
        "sqlite" => {
            let dir = tempfile::tempdir().expect("temp dir");
            (StoreLocation::Sqlite(dir.path().join("world.db")), Fresh::Sqlite(dir))
        }
        _ => {
            let admin = std::env::var("WORLD_TEST_POSTGRES_URL").expect(
                "WORLD_TEST_POSTGRES_URL is not set: run the tests with tests/run.sh, which starts a throwaway \
                 PostgreSQL, or set it to an admin URL of a server the tests may create databases on",
            );
            sqlx::any::install_default_drivers();
            let mut random = [0u8; 6];
            rand::fill(&mut random);
            let name = format!("world_test_{}", hex::encode(random));
            let mut conn = sqlx::AnyConnection::connect(&admin).await.expect("connect to the PostgreSQL admin URL");
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
                .execute(&mut conn)
                .await
                .expect("create test database");
            let base = admin.rsplit_once('/').map(|(base, _)| base).expect("admin URL names a database");
            (StoreLocation::Postgres(format!("{base}/{name}")), Fresh::Postgres)
        }
    }
}

/// One `#[tokio::test]` per backend (modules `sqlite` and `postgres`) for each named
/// `async fn(T)`: the test calls `$fresh(backend)`, an `async fn(&str) -> (T, Fresh)` of the
/// including file, and passes it the `T`, keeping the guard alive until it returns.
macro_rules! both_backends {
    ($fresh:ident; $($name:ident),* $(,)?) => {
        $crate::common::both_backends!(@backend sqlite, $fresh; $($name),*);
        $crate::common::both_backends!(@backend postgres, $fresh; $($name),*);
    };
    (@backend $backend:ident, $fresh:ident; $($name:ident),*) => {
        mod $backend {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (subject, _guard) = super::$fresh(stringify!($backend)).await;
                super::$name(subject).await;
            })*
        }
    };
}
pub(crate) use both_backends;
