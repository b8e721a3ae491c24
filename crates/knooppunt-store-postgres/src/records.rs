//! [`knooppunt_store::Records`] on PostgreSQL: subscriptions, principals, the catalog,
//! grants, replays and sessions, each a table.

use super::*;

impl knooppunt_store::Records for PgStore {
    fn insert_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let params = subscriptions::params(subscription);
            if !self.insert_row::<Subscription>(&params.refs()).await? {
                return Err(StoreError::Conflict(subscription.id.clone()));
            }
            Ok(())
        })
    }

    fn update_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let params = subscriptions::params(subscription);
            self.replace_row::<Subscription>(&params.refs()).await
        })
    }

    fn delete_subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>> {
        Box::pin(async move {
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

    fn subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>> {
        Box::pin(self.row::<Subscription>(id))
    }

    fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>> {
        Box::pin(self.rows::<Subscription>())
    }

    fn insert_principal<'a>(&'a self, principal: &'a StoredPrincipal) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let params = principals::Params::new(principal);
            if !self
                .insert_row::<StoredPrincipal>(&params.refs(principal))
                .await?
            {
                return Err(StoreError::NameTaken(principal.name.clone()));
            }
            Ok(())
        })
    }

    fn update_principal<'a>(&'a self, principal: &'a StoredPrincipal) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let params = principals::Params::new(principal);
            self.replace_row::<StoredPrincipal>(&params.refs(principal))
                .await
        })
    }

    fn delete_principal<'a>(&'a self, name: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { self.delete_row::<StoredPrincipal>(&[&name]).await })
    }

    fn insert_catalog_entry<'a>(&'a self, entry: &'a CatalogEntry) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let params = catalog::Params::new(entry);
            if !self.insert_row::<CatalogEntry>(&params.refs(entry)).await? {
                return Err(StoreError::Conflict(entry.id.clone()));
            }
            Ok(())
        })
    }

    fn update_catalog_entry<'a>(&'a self, entry: &'a CatalogEntry) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let params = catalog::Params::new(entry);
            self.replace_row::<CatalogEntry>(&params.refs(entry)).await
        })
    }

    fn delete_catalog_entry<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { self.delete_row::<CatalogEntry>(&[&id]).await })
    }

    fn catalog_entries(&self) -> StoreFuture<'_, Vec<CatalogEntry>> {
        Box::pin(self.rows::<CatalogEntry>())
    }

    fn put_replay<'a>(
        &'a self,
        replay: &'a Replay,
        expected: Option<u64>,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let client = self.client().await?;
            let body = serde_json::to_string(replay).expect("replays serialise");
            let changed = match expected {
                None => {
                    client
                        .execute(
                            "INSERT INTO replays (id, created_at, updated_at, body) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",
                            &[
                                &replay.id,
                                &(replay.created_at as i64),
                                &(replay.updated_at as i64),
                                &body,
                            ],
                        )
                        .await
                }
                Some(expected) => {
                    client
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
                }
            }
            .map_err(backend)?;
            Ok(changed == 1)
        })
    }

    fn replays(&self) -> StoreFuture<'_, Vec<Replay>> {
        Box::pin(self.documents(("replays", "a replay"), "created_at, id"))
    }

    fn delete_replay<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.delete_document("replays", id))
    }

    fn put_session<'a>(&'a self, session: &'a Session) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            let body = serde_json::to_string(session).expect("sessions serialise");
            client
                .execute(
                    "INSERT INTO sessions (id, expires_at, last_seen_at, body) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE \
                     SET expires_at = $2, last_seen_at = $3, body = $4",
                    &[
                        &session.id,
                        &(session.expires_at as i64),
                        &(session.last_seen_at as i64),
                        &body,
                    ],
                )
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Session>> {
        Box::pin(self.document(("sessions", "a session"), id))
    }

    fn delete_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.delete_document("sessions", id))
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

    fn put_grant<'a>(&'a self, grant: &'a Grant) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let params = catalog::grant_params(grant);
            self.upsert_row::<Grant>(&params.refs(grant)).await
        })
    }

    fn delete_grant<'a>(&'a self, entry: &'a str, subscription: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { self.delete_row::<Grant>(&[&entry, &subscription]).await })
    }

    fn grants(&self) -> StoreFuture<'_, Vec<Grant>> {
        Box::pin(self.rows::<Grant>())
    }

    fn principals(&self) -> StoreFuture<'_, Vec<StoredPrincipal>> {
        Box::pin(self.rows::<StoredPrincipal>())
    }
}
