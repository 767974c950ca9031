//! Session rows. Only the sha256 of a credential is ever stored.

use sqlx::AnyConnection;
use world_model::HashRef;

use super::{Columns, SessionRow, Store, StoreError};

/// `session list` shows at most this many rows.
pub const SESSION_LIST_LIMIT: i64 = 500;

impl Store {
    /// Inserts a new session; a credential id collision is an error, never absorbed.
    pub async fn insert_session(&self, row: &SessionRow) -> Result<(), StoreError> {
        let _turn = self.writer_turn().await;
        insert_session_row(&mut *self.pool.acquire().await?, row).await
    }

    /// One primary-key lookup, fresh on every request.
    pub async fn session(&self, credential_id: &str) -> Result<Option<SessionRow>, StoreError> {
        const SQL: &str =
            "SELECT credential_id, episode, grants_json, expires_at, created_at FROM sessions WHERE credential_id = $1";
        self.row_by(SQL, credential_id, session_from_row).await
    }

    /// The session and the named registry's head in one statement: admission needs both, fresh,
    /// on every request.
    pub async fn session_and_registry_head(
        &self,
        credential_id: &str,
        registry: &str,
    ) -> Result<Option<(SessionRow, Option<HashRef>)>, StoreError> {
        const SQL: &str = "SELECT credential_id, episode, grants_json, expires_at, created_at, \
                           (SELECT ref FROM heads WHERE name = $2) AS registry_head \
                           FROM sessions WHERE credential_id = $1";
        let key = super::registry_key(registry);
        let decode = |row: &dyn Columns| -> Result<(SessionRow, Option<HashRef>), StoreError> {
            Ok((session_from_row(row)?, super::optional_column_ref(row, "registry_head")?))
        };
        if let Some(direct) = &self.direct {
            return direct.read(|conn| {
                let mut statement = conn.prepare_cached(SQL)?;
                let mut rows = statement.query(rusqlite::named_params! {"$1": credential_id, "$2": key})?;
                rows.next()?.map(|row| decode(row)).transpose()
            });
        }
        let row = sqlx::query(SQL).bind(credential_id).bind(key).fetch_optional(&self.pool).await?;
        row.map(|row| decode(&row)).transpose()
    }

    pub async fn list_sessions(&self, episode: Option<&str>) -> Result<Vec<SessionRow>, StoreError> {
        let rows = match episode {
            Some(episode) => {
                sqlx::query(
                    "SELECT credential_id, episode, grants_json, expires_at, created_at FROM sessions \
                     WHERE episode = $1 ORDER BY created_at, credential_id LIMIT $2",
                )
                .bind(episode)
                .bind(SESSION_LIST_LIMIT)
                .fetch_all(&self.pool)
                .await?
            }
            None => {
                sqlx::query(
                    "SELECT credential_id, episode, grants_json, expires_at, created_at FROM sessions \
                     ORDER BY created_at, credential_id LIMIT $1",
                )
                .bind(SESSION_LIST_LIMIT)
                .fetch_all(&self.pool)
                .await?
            }
        };
        rows.iter().map(session_from_row).collect()
    }

    /// Deletes one session; false when there was none.
    pub async fn delete_session(&self, credential_id: &str) -> Result<bool, StoreError> {
        let _turn = self.writer_turn().await;
        let result = sqlx::query("DELETE FROM sessions WHERE credential_id = $1")
            .bind(credential_id)
            .execute(&self.pool)
            .await?;
        Ok(result.rows_affected() > 0)
    }
}

/// [`Store::insert_session`] on `conn`, for a caller that writes more beside it.
pub(super) async fn insert_session_row(conn: &mut AnyConnection, row: &SessionRow) -> Result<(), StoreError> {
    let result = sqlx::query(
        "INSERT INTO sessions (credential_id, episode, grants_json, expires_at, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (credential_id) DO NOTHING",
    )
    .bind(row.credential_id.as_str())
    .bind(row.episode.as_str())
    .bind(row.grants_json.as_str())
    .bind(row.expires_at)
    .bind(row.created_at)
    .execute(conn)
    .await?;
    if result.rows_affected() == 0 {
        return Err(StoreError::SessionExists(row.credential_id.clone()));
    }
    Ok(())
}

fn session_from_row(row: &(impl Columns + ?Sized)) -> Result<SessionRow, StoreError> {
    Ok(SessionRow {
        credential_id: row.text("credential_id")?,
        episode: row.text("episode")?,
        grants_json: row.text("grants_json")?,
        expires_at: row.int("expires_at")?,
        created_at: row.int("created_at")?,
    })
}
