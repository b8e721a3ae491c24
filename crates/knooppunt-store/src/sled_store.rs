//! The embedded store on sled. Records are JSON; every write is followed by a flush, so a
//! write that returned `Ok` survives a crash.
//!
//! Trees: `subscriptions` (id → subscription).

use std::path::Path;

use crate::{Store, StoreError, StoreFuture, Subscription};

/// The sled-backed store; cheap to clone (sled handles are reference-counted).
#[derive(Debug, Clone)]
pub struct SledStore {
    db: sled::Db,
    subscriptions: sled::Tree,
}

fn backend(error: sled::Error) -> StoreError {
    StoreError::Backend(error.to_string())
}

fn decode(bytes: &[u8]) -> Result<Subscription, StoreError> {
    serde_json::from_slice(bytes).map_err(|error| StoreError::Corrupt(error.to_string()))
}

fn encode(subscription: &Subscription) -> Vec<u8> {
    serde_json::to_vec(subscription).expect("subscriptions always serialise")
}

impl SledStore {
    /// Opens (or creates) the store in `directory`.
    pub fn open(directory: &Path) -> Result<SledStore, StoreError> {
        let db = sled::Config::new()
            .path(directory)
            .open()
            .map_err(|error| {
                StoreError::Backend(format!("cannot open {}: {error}", directory.display()))
            })?;
        let subscriptions = db.open_tree("subscriptions").map_err(backend)?;
        Ok(SledStore { db, subscriptions })
    }

    async fn flush(&self) -> Result<(), StoreError> {
        self.db.flush_async().await.map_err(backend)?;
        Ok(())
    }
}

impl Store for SledStore {
    fn insert_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let inserted = self
                .subscriptions
                .compare_and_swap(
                    subscription.id.as_bytes(),
                    None as Option<&[u8]>,
                    Some(encode(subscription)),
                )
                .map_err(backend)?;
            if inserted.is_err() {
                return Err(StoreError::Conflict(subscription.id.clone()));
            }
            self.flush().await
        })
    }

    fn update_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let key = subscription.id.as_bytes();
            let updated = self
                .subscriptions
                .fetch_and_update(key, |old| old.map(|_| encode(subscription)))
                .map_err(backend)?;
            if updated.is_none() {
                return Ok(false);
            }
            self.flush().await?;
            Ok(true)
        })
    }

    fn delete_subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>> {
        Box::pin(async move {
            let Some(old) = self.subscriptions.remove(id.as_bytes()).map_err(backend)? else {
                return Ok(None);
            };
            self.flush().await?;
            decode(&old).map(Some)
        })
    }

    fn subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>> {
        Box::pin(async move {
            match self.subscriptions.get(id.as_bytes()).map_err(backend)? {
                Some(bytes) => decode(&bytes).map(Some),
                None => Ok(None),
            }
        })
    }

    fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>> {
        Box::pin(async move {
            self.subscriptions
                .iter()
                .values()
                .map(|bytes| decode(&bytes.map_err(backend)?))
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subscription(id: &str) -> Subscription {
        Subscription {
            id: id.into(),
            owner: "gemeente".into(),
            sink: "http://127.0.0.1:9/sink".into(),
            protocol: "HTTP".into(),
            source: None,
            types: vec!["nl.brp.x".into()],
            filters: vec![serde_json::json!({"prefix": {"type": "nl."}})],
            protocol_settings: Default::default(),
            sink_credential: Some(crate::SinkCredential::Plain {
                identifier: "hub".into(),
                secret: "s3cret".into(),
            }),
            config: Default::default(),
            created_at: 1,
            updated_at: 1,
        }
    }

    #[tokio::test]
    async fn subscriptions_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = SledStore::open(dir.path()).unwrap();
            store.insert_subscription(&subscription("b")).await.unwrap();
            store.insert_subscription(&subscription("a")).await.unwrap();
            assert!(matches!(
                store.insert_subscription(&subscription("a")).await,
                Err(StoreError::Conflict(id)) if id == "a"
            ));
            let mut changed = subscription("b");
            changed.sink = "http://127.0.0.1:9/other".into();
            assert!(store.update_subscription(&changed).await.unwrap());
            assert!(
                !store
                    .update_subscription(&subscription("zzz"))
                    .await
                    .unwrap()
            );
        }
        let store = SledStore::open(dir.path()).unwrap();
        let all = store.subscriptions().await.unwrap();
        let ids: Vec<_> = all.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(all[1].sink, "http://127.0.0.1:9/other");
        assert_eq!(all[0], subscription("a"), "every field round-trips");
        assert_eq!(
            store.delete_subscription("a").await.unwrap(),
            Some(subscription("a"))
        );
        assert_eq!(store.delete_subscription("a").await.unwrap(), None);
        assert_eq!(store.subscription("a").await.unwrap(), None);
    }
}
