//! [`knooppunt_store::Records`] on PostgreSQL: subscriptions, principals, the catalog,
//! grants, replays and sessions, each a table written through the generic helpers of
//! `table.rs`.

use knooppunt_store::{AnyRecord, Key, Kind, RecordRef};

use super::*;
use crate::table::{DocumentValues, Write};

impl PgStore {
    /// Writes a record as `how` says; whether a row was written.
    async fn write_record(&self, how: Write, record: RecordRef<'_>) -> Result<bool, StoreError> {
        match record {
            RecordRef::Subscription(s) => {
                let params = subscriptions::params(s);
                self.write_row::<Subscription>(how, &params.refs()).await
            }
            RecordRef::Principal(p) => {
                let params = principals::Params::new(p);
                self.write_row::<StoredPrincipal>(how, &params.refs(p))
                    .await
            }
            RecordRef::CatalogEntry(e) => {
                let params = catalog::Params::new(e);
                self.write_row::<CatalogEntry>(how, &params.refs(e)).await
            }
            RecordRef::Grant(g) => {
                let params = catalog::grant_params(g);
                self.write_row::<Grant>(how, &params.refs(g)).await
            }
            RecordRef::Replay(r) => {
                let values = DocumentValues::new(r);
                self.write_row::<Replay>(how, &values.refs(r)).await
            }
            RecordRef::Session(s) => {
                let values = DocumentValues::new(s);
                self.write_row::<Session>(how, &values.refs(s)).await
            }
        }
    }

    /// Removes a subscription with its deliveries and dead letters, keeping its owner, in
    /// one transaction.
    async fn delete_subscription_row(&self, id: &str) -> Result<Option<Subscription>, StoreError> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(backend)?;
        let sql = format!(
            "DELETE FROM subscriptions WHERE id = $1 RETURNING {}",
            subscriptions::COLUMNS
        );
        let Some(row) = transaction.query_opt(&sql, &[&id]).await.map_err(backend)? else {
            return Ok(None);
        };
        let deleted = subscriptions::from_row(&row)?;
        transaction
            .execute(
                "INSERT INTO former_subscriptions (id, owner) VALUES ($1, $2)
                 ON CONFLICT (id) DO UPDATE SET owner = excluded.owner",
                &[&id, &deleted.owner],
            )
            .await
            .map_err(backend)?;
        for table in ["deliveries", "dead_letters"] {
            transaction
                .execute(
                    &format!("DELETE FROM {table} WHERE subscription = $1"),
                    &[&id],
                )
                .await
                .map_err(backend)?;
        }
        Self::bump(&transaction).await?;
        transaction.commit().await.map_err(backend)?;
        Ok(Some(deleted))
    }
}

/// `$body` with `$t` the type of records of `$kind`.
macro_rules! each_kind {
    ($kind:expr, |$t:ident| $body:expr) => {
        match $kind {
            Kind::Subscription => {
                type $t = Subscription;
                $body
            }
            Kind::Principal => {
                type $t = StoredPrincipal;
                $body
            }
            Kind::CatalogEntry => {
                type $t = CatalogEntry;
                $body
            }
            Kind::Grant => {
                type $t = Grant;
                $body
            }
            Kind::Replay => {
                type $t = Replay;
                $body
            }
            Kind::Session => {
                type $t = Session;
                $body
            }
        }
    };
}
/// A key as the values of its columns.
fn key_values<'a>(key: &'a Key<'a>) -> Vec<&'a (dyn tokio_postgres::types::ToSql + Sync)> {
    match key {
        Key::One(id) => vec![id],
        Key::Grant {
            entry,
            subscription,
        } => vec![entry, subscription],
    }
}

impl knooppunt_store::Records for PgStore {
    fn insert<'a>(&'a self, record: RecordRef<'a>) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            if !self.write_record(Write::Insert, record).await? {
                return Err(record.taken());
            }
            Ok(())
        })
    }

    fn replace<'a>(&'a self, record: RecordRef<'a>) -> StoreFuture<'a, bool> {
        Box::pin(self.write_record(Write::Replace, record))
    }

    fn put<'a>(&'a self, record: RecordRef<'a>) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.write_record(Write::Upsert, record).await?;
            Ok(())
        })
    }

    fn remove<'a>(&'a self, kind: Kind, key: Key<'a>) -> StoreFuture<'a, Option<AnyRecord>> {
        Box::pin(async move {
            if let (Kind::Subscription, Key::One(id)) = (kind, key) {
                let deleted = self.delete_subscription_row(id).await?;
                return Ok(deleted.map(AnyRecord::from));
            }
            let key = key_values(&key);
            Ok(each_kind!(kind, |T| self
                .delete_row::<T>(&key)
                .await?
                .map(AnyRecord::from)))
        })
    }

    fn get<'a>(&'a self, kind: Kind, key: Key<'a>) -> StoreFuture<'a, Option<AnyRecord>> {
        Box::pin(async move {
            let key = key_values(&key);
            Ok(each_kind!(kind, |T| self
                .row::<T>(&key)
                .await?
                .map(AnyRecord::from)))
        })
    }

    fn all(&self, kind: Kind) -> StoreFuture<'_, Vec<AnyRecord>> {
        Box::pin(async move {
            Ok(each_kind!(kind, |T| {
                let rows = self.rows::<T>().await?;
                rows.into_iter().map(AnyRecord::from).collect()
            }))
        })
    }

    fn former_owner<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<String>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT owner FROM former_subscriptions WHERE id = $1",
                    &[&id],
                )
                .await
                .map_err(backend)?;
            Ok(row.map(|row| row.get(0)))
        })
    }

    fn put_replay<'a>(
        &'a self,
        replay: &'a Replay,
        expected: Option<u64>,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let Some(expected) = expected else {
                return self
                    .write_record(Write::Insert, RecordRef::Replay(replay))
                    .await;
            };
            let client = self.client().await?;
            let body = serde_json::to_string(replay).expect("replays serialise");
            let changed = client
                .execute(
                    "UPDATE replays SET updated_at = $2, body = $3 \
                     WHERE id = $1 AND updated_at = $4",
                    &[
                        &replay.id,
                        &(replay.updated_at as i64),
                        &body,
                        &(expected as i64),
                    ],
                )
                .await
                .map_err(backend)?;
            Ok(changed == 1)
        })
    }

    fn sweep_sessions(&self, now_ms: u64, idle_before_ms: u64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            client
                .execute(
                    "DELETE FROM sessions WHERE expires_at <= $1 OR last_seen_at < $2",
                    &[&(now_ms as i64), &(idle_before_ms as i64)],
                )
                .await
                .map_err(backend)
        })
    }
}
