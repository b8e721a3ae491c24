//! Keyed records, each kind a table: read, inserted, replaced, upserted and deleted the
//! same way for every kind; each kind says only how it is a row (its file:
//! `subscriptions.rs`, `principals.rs`, `catalog.rs`; replays and console sessions, kept as
//! a JSON document beside the columns they are selected by, here).

use knooppunt_store::{Replay, Session, StoreError};
use serde::de::DeserializeOwned;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::{PgStore, backend};

/// A kind of record that is a row of its own table.
pub(crate) trait Table: Sized {
    const NAME: &'static str;
    /// The key column, or columns (`entry, subscription`): the first of [`Table::COLUMNS`].
    const KEY: &'static str;
    /// Every column, the key first.
    const COLUMNS: &'static str;
    /// `$1, $2, …`, one per column.
    const PLACEHOLDERS: &'static str;
    /// The order [`PgStore::rows`] gives them in.
    const ORDER: &'static str = Self::KEY;
    /// Whether every hub keeps these in memory, so that a change bumps the version they
    /// reload at (not replays or sessions, which are read where they are needed).
    const RELOADED: bool = true;

    fn from_row(row: &Row) -> Result<Self, StoreError>;
}

/// The values of a row's columns, in the order of [`Table::COLUMNS`].
pub(crate) type Values<'a> = [&'a (dyn ToSql + Sync)];

/// How a row is written.
#[derive(Clone, Copy)]
pub(crate) enum Write {
    /// Unless its key is taken.
    Insert,
    /// In place of the row with its key, if there is one.
    Replace,
    /// Whether or not there is one.
    Upsert,
}

/// `($1, $2, …)` for a key of `n` columns.
fn key_placeholders(n: usize) -> String {
    let placeholders: Vec<String> = (1..=n).map(|n| format!("${n}")).collect();
    placeholders.join(", ")
}

impl PgStore {
    /// Writes a row as `how` says; whether one was written (with [`Write::Insert`],
    /// `false` means the key is taken; with [`Write::Replace`], that there is none).
    pub(crate) async fn write_row<T: Table>(
        &self,
        how: Write,
        values: &Values<'_>,
    ) -> Result<bool, StoreError> {
        let (name, columns, placeholders, key) = (T::NAME, T::COLUMNS, T::PLACEHOLDERS, T::KEY);
        let sql = match how {
            Write::Insert => format!(
                "INSERT INTO {name} ({columns}) VALUES ({placeholders}) \
                 ON CONFLICT ({key}) DO NOTHING"
            ),
            Write::Replace => {
                let at = key_placeholders(key.split(',').count());
                format!("UPDATE {name} SET ({columns}) = ({placeholders}) WHERE ({key}) = ({at})")
            }
            Write::Upsert => format!(
                "INSERT INTO {name} ({columns}) VALUES ({placeholders}) ON CONFLICT ({key}) \
                 DO UPDATE SET ({columns}) = ({placeholders})"
            ),
        };
        self.write::<T>(&sql, values).await
    }

    /// Deletes the row with `key` (a value per key column) and returns it.
    pub(crate) async fn delete_row<T: Table>(
        &self,
        key: &Values<'_>,
    ) -> Result<Option<T>, StoreError> {
        let sql = format!(
            "DELETE FROM {} WHERE ({}) = ({}) RETURNING {}",
            T::NAME,
            T::KEY,
            key_placeholders(key.len()),
            T::COLUMNS
        );
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(backend)?;
        let Some(row) = transaction.query_opt(&sql, key).await.map_err(backend)? else {
            return Ok(None);
        };
        if T::RELOADED {
            Self::bump(&transaction).await?;
        }
        transaction.commit().await.map_err(backend)?;
        T::from_row(&row).map(Some)
    }

    /// The row with `key` (a value per key column), if there is one.
    pub(crate) async fn row<T: Table>(&self, key: &Values<'_>) -> Result<Option<T>, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT {} FROM {} WHERE ({}) = ({})",
            T::COLUMNS,
            T::NAME,
            T::KEY,
            key_placeholders(key.len())
        );
        let row = client.query_opt(&sql, key).await.map_err(backend)?;
        row.as_ref().map(T::from_row).transpose()
    }

    /// Every row, in the order of their keys.
    pub(crate) async fn rows<T: Table>(&self) -> Result<Vec<T>, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT {} FROM {} ORDER BY {}",
            T::COLUMNS,
            T::NAME,
            T::ORDER
        );
        let rows = client.query(&sql, &[]).await.map_err(backend)?;
        rows.iter().map(T::from_row).collect()
    }

    /// Runs a write of one row of `T`; whether it wrote one. When it did and hubs keep
    /// `T` in memory, the version they reload at is bumped in the same transaction.
    async fn write<T: Table>(&self, sql: &str, values: &Values<'_>) -> Result<bool, StoreError> {
        if !T::RELOADED {
            let client = self.client().await?;
            let written = client.execute(sql, values).await.map_err(backend)?;
            return Ok(written == 1);
        }
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(backend)?;
        let written = transaction.execute(sql, values).await.map_err(backend)?;
        if written == 0 {
            return Ok(false);
        }
        Self::bump(&transaction).await?;
        transaction.commit().await.map_err(backend)?;
        Ok(true)
    }
}

/// A record kept as its JSON document (the model's own form) beside two times it is
/// selected or swept by.
pub(crate) trait Document: serde::Serialize + DeserializeOwned {
    const NAME: &'static str;
    const COLUMNS: &'static str;
    const ORDER: &'static str;
    const WHAT: &'static str;
    fn id(&self) -> &String;
    fn times(&self) -> [u64; 2];
}

impl Document for Replay {
    const NAME: &'static str = "replays";
    const COLUMNS: &'static str = "id, created_at, updated_at, body";
    const ORDER: &'static str = "created_at, id";
    const WHAT: &'static str = "a replay";
    fn id(&self) -> &String {
        &self.id
    }
    fn times(&self) -> [u64; 2] {
        [self.created_at, self.updated_at]
    }
}

impl Document for Session {
    const NAME: &'static str = "sessions";
    const COLUMNS: &'static str = "id, expires_at, last_seen_at, body";
    const ORDER: &'static str = "id";
    const WHAT: &'static str = "a console session";
    fn id(&self) -> &String {
        &self.id
    }
    fn times(&self) -> [u64; 2] {
        [self.expires_at, self.last_seen_at]
    }
}

/// A document's column values, owned: its times as PostgreSQL's `bigint` and its body.
pub(crate) struct DocumentValues {
    times: [i64; 2],
    body: String,
}

impl DocumentValues {
    pub(crate) fn new<D: Document>(document: &D) -> DocumentValues {
        DocumentValues {
            times: document.times().map(|time| time as i64),
            body: serde_json::to_string(document).expect("documents serialise"),
        }
    }

    pub(crate) fn refs<'a, D: Document>(&'a self, document: &'a D) -> [&'a (dyn ToSql + Sync); 4] {
        [document.id(), &self.times[0], &self.times[1], &self.body]
    }
}

impl<D: Document> Table for D {
    const NAME: &'static str = D::NAME;
    const KEY: &'static str = "id";
    const COLUMNS: &'static str = D::COLUMNS;
    const PLACEHOLDERS: &'static str = "$1, $2, $3, $4";
    const ORDER: &'static str = D::ORDER;
    const RELOADED: bool = false;

    fn from_row(row: &Row) -> Result<Self, StoreError> {
        serde_json::from_str(row.get("body"))
            .map_err(|e| StoreError::Corrupt(format!("{}: {e}", D::WHAT)))
    }
}
