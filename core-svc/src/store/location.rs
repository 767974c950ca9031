//! Where a store lives: a SQLite file or a PostgreSQL URL.

use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    Sqlite(PathBuf),
    Postgres(String),
}

impl StoreLocation {
    /// `postgres://…` / `postgresql://…` is PostgreSQL; anything else is a SQLite file path.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("the store location is empty: pass a SQLite file path or a postgres:// URL".into());
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            return Ok(Self::Postgres(text.to_owned()));
        }
        if let Some(rest) = text.strip_prefix("sqlite://").or_else(|| text.strip_prefix("sqlite:")) {
            return Ok(Self::Sqlite(PathBuf::from(rest)));
        }
        Ok(Self::Sqlite(PathBuf::from(text)))
    }

    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            Self::Sqlite(path) => Some(path),
            Self::Postgres(_) => None,
        }
    }

    /// The location as shown in health, logs and prompts: a PostgreSQL URL
    /// loses its password.
    pub fn redacted(&self) -> String {
        match self {
            Self::Sqlite(path) => path.display().to_string(),
            Self::Postgres(url) => redact_url_password(url),
        }
    }
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// Removes the password of `scheme://user:password@host/…`, keeping the rest verbatim.
pub fn redact_url_password(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let authority_start = scheme_end + 3;
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    let Some(at) = authority.rfind('@') else {
        return url.to_owned();
    };
    let userinfo = &authority[..at];
    let Some(colon) = userinfo.find(':') else {
        return url.to_owned();
    };
    format!("{}{}:***{}", &url[..authority_start], &userinfo[..colon], &url[authority_start + at..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_urls_are_recognised_and_sqlite_is_the_default() {
        assert_eq!(
            StoreLocation::parse("postgres://u@h/db").unwrap(),
            StoreLocation::Postgres("postgres://u@h/db".into())
        );
        assert_eq!(StoreLocation::parse("w.db").unwrap(), StoreLocation::Sqlite("w.db".into()));
        assert_eq!(StoreLocation::parse("sqlite:///tmp/w.db").unwrap(), StoreLocation::Sqlite("/tmp/w.db".into()));
        assert!(StoreLocation::parse("").is_err());
    }

    #[test]
    fn a_password_never_survives_redaction() {
        for (url, shown) in [
            ("postgres://world:s3cret@127.0.0.1:5432/world", "postgres://world:***@127.0.0.1:5432/world"),
            ("postgres://world@127.0.0.1/world", "postgres://world@127.0.0.1/world"),
            ("postgresql://a:b:c@h/d?x=1", "postgresql://a:***@h/d?x=1"),
            ("postgres://h/d", "postgres://h/d"),
        ] {
            assert_eq!(redact_url_password(url), shown);
        }
    }
}
