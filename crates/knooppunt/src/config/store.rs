//! `[store]` and `[log]`.

use super::*;

/// The store's backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum StoreBackend {
    /// The embedded store in `server.data_dir` (one hub).
    #[default]
    Embedded,
    /// A PostgreSQL database at `store.url`, which several hubs can share.
    Postgres,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct StoreConfig {
    /// `embedded` (the default, in `server.data_dir`) or `postgres`.
    pub(crate) backend: StoreBackend,
    /// For `postgres`: `postgres://user:password@host:port/database`. The schema is created
    /// and migrated at start-up.
    pub(crate) url: Option<String>,
    /// For `postgres`: connections in this hub's pool (2 to 1000).
    pub(crate) pool_size: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            backend: StoreBackend::Embedded,
            url: None,
            pool_size: 16,
        }
    }
}

impl StoreConfig {
    /// The PostgreSQL settings, when the backend is `postgres`.
    pub(crate) fn postgres(&self) -> anyhow::Result<Option<knooppunt_store_postgres::PgOptions>> {
        if self.backend != StoreBackend::Postgres {
            return Ok(None);
        }
        let Some(url) = self.url.as_deref().filter(|u| !u.trim().is_empty()) else {
            bail!(
                "store.url: the postgres backend needs a URL, e.g. \
                 postgres://knooppunt:secret@db.example.nl:5432/knooppunt (or set KNOOPPUNT_STORE_URL)"
            );
        };
        if !(2..=1000).contains(&self.pool_size) {
            bail!("store.pool_size: must be from 2 to 1000");
        }
        let mut options = knooppunt_store_postgres::PgOptions::new(url);
        options.pool_size = self.pool_size;
        Ok(Some(options))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct LogConfig {
    /// The level (`error`, `warn`, `info`, `debug`, `trace`), or a filter such as
    /// `info,knooppunt_delivery=debug`.
    pub(crate) level: String,
    /// `pretty` (for people) or `json` (one object per line, for log collectors).
    pub(crate) format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            format: LogFormat::Pretty,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogFormat {
    Pretty,
    Json,
}
