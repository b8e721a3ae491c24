//! Keyed records kept as rows of their own table (subscriptions, principals, catalog
//! entries, grants): read, inserted, replaced, upserted and deleted the same way for every
//! kind; each kind says only how it is a row (its file: `subscriptions.rs`,
//! `principals.rs`, `catalog.rs`). Records kept as a JSON document beside a few columns to select them by
//! (replays, console sessions) are read and deleted the same way for every kind too.

use knooppunt_store::StoreError;
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

    fn from_row(row: &Row) -> Result<Self, StoreError>;
}

/// The values of a row's columns, in the order of [`Table::COLUMNS`].
pub(crate) type Values<'a> = [&'a (dyn ToSql + Sync)];

impl PgStore {
    /// Inserts a row unless its key is taken (then `false`, nothing written); bumps the
    /// version the hubs reload at.
    pub(crate) async fn insert_row<T: Table>(
        &self,
        values: &Values<'_>,
    ) -> Result<bool, StoreError> {
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) DO NOTHING",
            T::NAME,
            T::COLUMNS,
            T::PLACEHOLDERS,
            T::KEY
        );
        self.write_and_bump(&sql, values).await
    }

    /// Replaces the row with the key of `values` (`$1`); `false` when there is none.
    pub(crate) async fn replace_row<T: Table>(
        &self,
        values: &Values<'_>,
    ) -> Result<bool, StoreError> {
        let sql = format!(
            "UPDATE {} SET ({}) = ({}) WHERE {} = $1",
            T::NAME,
            T::COLUMNS,
            T::PLACEHOLDERS,
            T::KEY
        );
        self.write_and_bump(&sql, values).await
    }

    /// Inserts the row, or replaces the one with its key; bumps the version.
    pub(crate) async fn upsert_row<T: Table>(&self, values: &Values<'_>) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO {name} ({columns}) VALUES ({placeholders}) ON CONFLICT ({key}) \
             DO UPDATE SET ({columns}) = ({placeholders})",
            name = T::NAME,
            columns = T::COLUMNS,
            placeholders = T::PLACEHOLDERS,
            key = T::KEY
        );
        self.write_and_bump(&sql, values).await.map(|_| ())
    }

    /// Deletes the row with `key` (a value per key column); `false` when there is none.
    pub(crate) async fn delete_row<T: Table>(&self, key: &Values<'_>) -> Result<bool, StoreError> {
        let placeholders: Vec<String> = (1..=key.len()).map(|n| format!("${n}")).collect();
        let sql = format!(
            "DELETE FROM {} WHERE ({}) = ({})",
            T::NAME,
            T::KEY,
            placeholders.join(", ")
        );
        self.write_and_bump(&sql, key).await
    }

    /// The row with `key`, if there is one.
    pub(crate) async fn row<T: Table>(&self, key: &str) -> Result<Option<T>, StoreError> {
        let client = self.client().await?;
        let sql = format!(
            "SELECT {} FROM {} WHERE {} = $1",
            T::COLUMNS,
            T::NAME,
            T::KEY
        );
        let row = client.query_opt(&sql, &[&key]).await.map_err(backend)?;
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

    /// Deletes document `id` of `table` (`replays`, `sessions`); `false` when there is
    /// none. No version bump: no hub keeps these in memory.
    pub(crate) async fn delete_document(&self, table: &str, id: &str) -> Result<bool, StoreError> {
        let client = self.client().await?;
        let sql = format!("DELETE FROM {table} WHERE id = $1");
        let removed = client.execute(&sql, &[&id]).await.map_err(backend)?;
        Ok(removed == 1)
    }

    /// Document `id` of `table`, if there is one; `what` names it in a corruption report.
    pub(crate) async fn document<T: DeserializeOwned>(
        &self,
        (table, what): (&str, &str),
        id: &str,
    ) -> Result<Option<T>, StoreError> {
        let client = self.client().await?;
        let sql = format!("SELECT body FROM {table} WHERE id = $1");
        let row = client.query_opt(&sql, &[&id]).await.map_err(backend)?;
        row.map(|row| parse(row.get(0), what)).transpose()
    }

    /// Every document of `table`, in the order of `order_by`.
    pub(crate) async fn documents<T: DeserializeOwned>(
        &self,
        (table, what): (&str, &str),
        order_by: &str,
    ) -> Result<Vec<T>, StoreError> {
        let client = self.client().await?;
        let sql = format!("SELECT body FROM {table} ORDER BY {order_by}");
        let rows = client.query(&sql, &[]).await.map_err(backend)?;
        rows.iter().map(|row| parse(row.get(0), what)).collect()
    }
}

fn parse<T: DeserializeOwned>(body: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(body).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}
