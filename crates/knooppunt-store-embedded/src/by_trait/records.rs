//! [`knooppunt_store::Records`] on the embedded store: each kind of record a sled tree,
//! written, read and removed the same way for every kind.

use knooppunt_store::{AnyRecord, Key, Kind, RecordRef};

use super::*;

impl EmbeddedStore {
    /// The tree a kind of record is kept in.
    fn tree(&self, kind: Kind) -> &sled::Tree {
        let trees = &self.inner.trees;
        match kind {
            Kind::Subscription => &trees.subscriptions,
            Kind::Principal => &trees.principals,
            Kind::CatalogEntry => &trees.catalog,
            Kind::Grant => &trees.grants,
            Kind::Replay => &trees.replays,
            Kind::Session => &trees.sessions,
        }
    }
}

/// A key as the bytes it is in its tree.
fn key_bytes(key: Key<'_>) -> Vec<u8> {
    match key {
        Key::One(id) => id.as_bytes().to_vec(),
        Key::Grant {
            entry,
            subscription,
        } => grant_key(entry, subscription),
    }
}

/// A record as the bytes it is in its tree: this backend's own record formats.
fn record_bytes(record: RecordRef<'_>) -> Vec<u8> {
    match record {
        RecordRef::Subscription(s) => encode(s),
        RecordRef::Principal(p) => encode_principal(p),
        RecordRef::CatalogEntry(e) => encode_catalog_entry(e),
        RecordRef::Grant(g) => {
            serde_json::to_vec(&GrantRecord::from(g)).expect("records always serialise")
        }
        RecordRef::Replay(r) => serde_json::to_vec(r).expect("replays serialise"),
        RecordRef::Session(s) => serde_json::to_vec(s).expect("sessions serialise"),
    }
}

/// A record of `kind` read from its bytes.
fn read_record(kind: Kind, bytes: &[u8]) -> Result<AnyRecord, StoreError> {
    fn json<T: serde::de::DeserializeOwned>(kind: Kind, bytes: &[u8]) -> Result<T, StoreError> {
        serde_json::from_slice(bytes)
            .map_err(|e| StoreError::Corrupt(format!("{}: {e}", kind.name())))
    }
    Ok(match kind {
        Kind::Subscription => AnyRecord::Subscription(decode(bytes)?),
        Kind::Principal => AnyRecord::Principal(decode_principal(bytes)?),
        Kind::CatalogEntry => AnyRecord::CatalogEntry(decode_catalog_entry(bytes)?),
        Kind::Grant => AnyRecord::Grant(decode_grant(bytes)?),
        Kind::Replay => AnyRecord::Replay(json(kind, bytes)?),
        Kind::Session => AnyRecord::Session(json(kind, bytes)?),
    })
}

impl knooppunt_store::Records for EmbeddedStore {
    fn insert<'a>(&'a self, record: RecordRef<'a>) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let kind = record.kind();
            let key = key_bytes(record.key());
            let taken = || record.taken();
            self.insert_record(self.tree(kind), &key, record_bytes(record), taken)
                .await?;
            if let RecordRef::Subscription(subscription) = record {
                self.queues().live.insert(subscription.id.clone());
            }
            Ok(())
        })
    }

    fn replace<'a>(&'a self, record: RecordRef<'a>) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let key = key_bytes(record.key());
            self.replace_record(self.tree(record.kind()), &key, record_bytes(record))
                .await
        })
    }

    fn put<'a>(&'a self, record: RecordRef<'a>) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let key = key_bytes(record.key());
            self.put_record(self.tree(record.kind()), key, record_bytes(record))
                .await
        })
    }

    fn remove<'a>(&'a self, kind: Kind, key: Key<'a>) -> StoreFuture<'a, Option<AnyRecord>> {
        Box::pin(async move {
            self.writable()?;
            let Some(old) = self.tree(kind).remove(key_bytes(key)).map_err(backend)? else {
                return Ok(None);
            };
            // Removed even when unreadable: the error says so after the commit.
            let removed = read_record(kind, &old);
            if let Ok(AnyRecord::Subscription(deleted)) = &removed {
                self.inner
                    .trees
                    .former_owners
                    .insert(deleted.id.as_bytes(), deleted.owner.as_bytes())
                    .map_err(backend)?;
            }
            self.commit().await?;
            if let Ok(AnyRecord::Subscription(deleted)) = &removed {
                let mut queues = self.queues();
                queues.live.remove(&deleted.id);
                queues.pending.remove(&deleted.id);
                queues.dead.remove(&deleted.id);
            }
            removed.map(Some)
        })
    }

    fn get<'a>(&'a self, kind: Kind, key: Key<'a>) -> StoreFuture<'a, Option<AnyRecord>> {
        Box::pin(async move {
            let found = self.tree(kind).get(key_bytes(key)).map_err(backend)?;
            found.map(|bytes| read_record(kind, &bytes)).transpose()
        })
    }

    fn all(&self, kind: Kind) -> StoreFuture<'_, Vec<AnyRecord>> {
        Box::pin(async move {
            let mut all = Self::all_records(self.tree(kind), |bytes| read_record(kind, bytes))?;
            if kind == Kind::Replay {
                let started = |record: &AnyRecord| match record {
                    AnyRecord::Replay(replay) => (replay.created_at, replay.id.clone()),
                    _ => (0, String::new()),
                };
                all.sort_by_key(started);
            }
            Ok(all)
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
            let bytes = record_bytes(RecordRef::Replay(replay));
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
}
