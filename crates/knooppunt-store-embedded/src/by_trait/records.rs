//! [`knooppunt_store::Records`] on the embedded store: each kind of record a sled tree.

use super::*;

impl knooppunt_store::Records for EmbeddedStore {
    fn insert_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.insert_record(
                &self.inner.trees.subscriptions,
                subscription.id.as_bytes(),
                encode(subscription),
                || StoreError::Conflict(subscription.id.clone()),
            )
            .await?;
            self.queues().live.insert(subscription.id.clone());
            Ok(())
        })
    }

    fn update_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, bool> {
        Box::pin(self.replace_record(
            &self.inner.trees.subscriptions,
            subscription.id.as_bytes(),
            encode(subscription),
        ))
    }

    fn delete_subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>> {
        Box::pin(async move {
            self.writable()?;
            let removed = self
                .inner
                .trees
                .subscriptions
                .remove(id.as_bytes())
                .map_err(backend)?;
            let Some(old) = removed else {
                return Ok(None);
            };
            let deleted = decode(&old)?;
            self.inner
                .trees
                .former_owners
                .insert(id.as_bytes(), deleted.owner.as_bytes())
                .map_err(backend)?;
            self.commit().await?;
            let mut queues = self.queues();
            queues.live.remove(id);
            queues.pending.remove(id);
            queues.dead.remove(id);
            drop(queues);
            Ok(Some(deleted))
        })
    }

    fn former_owner<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<String>> {
        Box::pin(async move {
            let found = self
                .inner
                .trees
                .former_owners
                .get(id.as_bytes())
                .map_err(backend)?;
            Ok(found.map(|owner| String::from_utf8_lossy(&owner).into_owned()))
        })
    }

    fn subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>> {
        Box::pin(async move {
            let found = self
                .inner
                .trees
                .subscriptions
                .get(id.as_bytes())
                .map_err(backend)?;
            found.map(|bytes| decode(&bytes)).transpose()
        })
    }

    fn insert_principal<'a>(&'a self, principal: &'a StoredPrincipal) -> StoreFuture<'a, ()> {
        Box::pin(self.insert_record(
            &self.inner.trees.principals,
            principal.name.as_bytes(),
            encode_principal(principal),
            || StoreError::NameTaken(principal.name.clone()),
        ))
    }

    fn update_principal<'a>(&'a self, principal: &'a StoredPrincipal) -> StoreFuture<'a, bool> {
        Box::pin(self.replace_record(
            &self.inner.trees.principals,
            principal.name.as_bytes(),
            encode_principal(principal),
        ))
    }

    fn delete_principal<'a>(&'a self, name: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.remove_committed(&self.inner.trees.principals, name.as_bytes()))
    }

    fn insert_catalog_entry<'a>(&'a self, entry: &'a CatalogEntry) -> StoreFuture<'a, ()> {
        Box::pin(self.insert_record(
            &self.inner.trees.catalog,
            entry.id.as_bytes(),
            encode_catalog_entry(entry),
            || StoreError::Conflict(entry.id.clone()),
        ))
    }

    fn update_catalog_entry<'a>(&'a self, entry: &'a CatalogEntry) -> StoreFuture<'a, bool> {
        Box::pin(self.replace_record(
            &self.inner.trees.catalog,
            entry.id.as_bytes(),
            encode_catalog_entry(entry),
        ))
    }

    fn delete_catalog_entry<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.remove_committed(&self.inner.trees.catalog, id.as_bytes()))
    }

    fn catalog_entries(&self) -> StoreFuture<'_, Vec<CatalogEntry>> {
        Box::pin(async move { Self::all_records(&self.inner.trees.catalog, decode_catalog_entry) })
    }

    fn put_replay<'a>(
        &'a self,
        replay: &'a Replay,
        expected: Option<u64>,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            self.writable()?;
            let tree = &self.inner.trees.replays;
            let current = tree.get(replay.id.as_bytes()).map_err(backend)?;
            let matches = match (&current, expected) {
                (None, None) => true,
                (Some(bytes), Some(expected)) => {
                    let stored: Replay = serde_json::from_slice(bytes)
                        .map_err(|e| StoreError::Corrupt(format!("replay `{}`: {e}", replay.id)))?;
                    stored.updated_at == expected
                }
                _ => false,
            };
            if !matches {
                return Ok(false);
            }
            let bytes = serde_json::to_vec(replay).expect("replays serialise");
            let swapped = tree
                .compare_and_swap(replay.id.as_bytes(), current, Some(bytes))
                .map_err(backend)?;
            if swapped.is_err() {
                return Ok(false);
            }
            self.commit().await?;
            Ok(true)
        })
    }

    fn replays(&self) -> StoreFuture<'_, Vec<Replay>> {
        Box::pin(async move {
            let mut replays: Vec<Replay> = Self::all_records(&self.inner.trees.replays, |bytes| {
                serde_json::from_slice(bytes)
                    .map_err(|e| StoreError::Corrupt(format!("a replay: {e}")))
            })?;
            replays.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
            Ok(replays)
        })
    }

    fn delete_replay<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.remove_committed(&self.inner.trees.replays, id.as_bytes()))
    }

    fn put_session<'a>(&'a self, session: &'a Session) -> StoreFuture<'a, ()> {
        Box::pin(self.put_record(
            &self.inner.trees.sessions,
            session.id.as_bytes(),
            serde_json::to_vec(session).expect("sessions serialise"),
        ))
    }

    fn session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Session>> {
        Box::pin(async move {
            let Some(bytes) = self
                .inner
                .trees
                .sessions
                .get(id.as_bytes())
                .map_err(backend)?
            else {
                return Ok(None);
            };
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| StoreError::Corrupt(format!("a session: {e}")))
        })
    }

    fn delete_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.remove_committed(&self.inner.trees.sessions, id.as_bytes()))
    }

    fn sweep_sessions(&self, now_ms: u64, idle_before_ms: u64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            self.writable()?;
            let tree = &self.inner.trees.sessions;
            let mut ended = 0;
            for entry in tree.iter() {
                let (key, bytes) = entry.map_err(backend)?;
                // An unreadable session is no session: it goes too.
                let over = serde_json::from_slice::<Session>(&bytes).map_or(true, |session| {
                    session.expires_at <= now_ms || session.last_seen_at < idle_before_ms
                });
                if over && tree.remove(key).map_err(backend)?.is_some() {
                    ended += 1;
                }
            }
            if ended > 0 {
                self.commit().await?;
            }
            Ok(ended)
        })
    }

    fn put_grant<'a>(&'a self, grant: &'a Grant) -> StoreFuture<'a, ()> {
        Box::pin(self.put_record(
            &self.inner.trees.grants,
            grant_key(&grant.entry, &grant.subscription),
            serde_json::to_vec(&GrantRecord::from(grant)).expect("records always serialise"),
        ))
    }

    fn delete_grant<'a>(&'a self, entry: &'a str, subscription: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.remove_committed(&self.inner.trees.grants, grant_key(entry, subscription)))
    }

    fn grants(&self) -> StoreFuture<'_, Vec<Grant>> {
        Box::pin(async move { Self::all_records(&self.inner.trees.grants, decode_grant) })
    }

    fn principals(&self) -> StoreFuture<'_, Vec<StoredPrincipal>> {
        Box::pin(async move { Self::all_records(&self.inner.trees.principals, decode_principal) })
    }

    fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>> {
        Box::pin(async move { Self::all_records(&self.inner.trees.subscriptions, decode) })
    }
}
