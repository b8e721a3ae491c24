//! The embedded store on sled (0.34). Records are JSON. Every write method returns only after
//! `Db::flush_async` (write-out and fsync) has covered its write; concurrent writers share one
//! flush (group commit).
//!
//! Trees:
//! - `subscriptions`: id → `Subscription`
//! - `events`: seq (u64, big-endian) → `StoredEvent`
//! - `dedupe`: source NUL id → (seq, accepted_at)
//! - `deliveries`: subscription id NUL seq (big-endian) → `Delivery`, so that a prefix scan
//!   walks one subscription's queue in acceptance order.
//!
//! Appends are serialised (a short in-memory critical section) so that sequence numbers are
//! committed in the order they are handed out: a reader never sees seq 6 before seq 5.

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use serde::Serialize;
use serde::de::DeserializeOwned;
use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError};

use crate::queue::{Appended, Delivery, NewEvent, StoredEvent, Swept};
use crate::{Store, StoreError, StoreFuture, Subscription};

/// The sled-backed store; cheap to clone (sled handles are reference-counted).
#[derive(Debug, Clone)]
pub struct SledStore {
    inner: std::sync::Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    db: sled::Db,
    subscriptions: sled::Tree,
    events: sled::Tree,
    dedupe: sled::Tree,
    deliveries: sled::Tree,
    append: Mutex<()>,
    commit: GroupCommit,
}

/// Many writers, one fsync: a writer whose write is already covered by a finished flush
/// returns at once; otherwise one writer flushes for everyone who wrote before it started.
#[derive(Debug, Default)]
struct GroupCommit {
    written: AtomicU64,
    flushed: AtomicU64,
    flushing: tokio::sync::Mutex<()>,
}

impl GroupCommit {
    /// Call after a write is applied; returns when a `flush` that started after the write
    /// has finished.
    async fn commit<F, Fut>(&self, flush: F) -> Result<(), StoreError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<(), StoreError>>,
    {
        let mine = self.written.fetch_add(1, AtomicOrdering::SeqCst) + 1;
        let _flushing = self.flushing.lock().await;
        if self.flushed.load(AtomicOrdering::SeqCst) >= mine {
            return Ok(());
        }
        let target = self.written.load(AtomicOrdering::SeqCst);
        flush().await?;
        self.flushed.fetch_max(target, AtomicOrdering::SeqCst);
        Ok(())
    }
}

fn backend(error: sled::Error) -> StoreError {
    StoreError::Backend(error.to_string())
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|error| StoreError::Corrupt(error.to_string()))
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("records always serialise")
}

fn dedupe_key(source: &str, id: &str) -> Vec<u8> {
    [source.as_bytes(), &[0], id.as_bytes()].concat()
}

fn queue_prefix(subscription: &str) -> Vec<u8> {
    [subscription.as_bytes(), &[0]].concat()
}

fn delivery_key(subscription: &str, seq: u64) -> Vec<u8> {
    [subscription.as_bytes(), &[0], &seq.to_be_bytes()].concat()
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
        let tree = |name: &str| db.open_tree(name).map_err(backend);
        Ok(SledStore {
            inner: std::sync::Arc::new(Inner {
                subscriptions: tree("subscriptions")?,
                events: tree("events")?,
                dedupe: tree("dedupe")?,
                deliveries: tree("deliveries")?,
                db,
                append: Mutex::new(()),
                commit: GroupCommit::default(),
            }),
        })
    }

    async fn commit(&self) -> Result<(), StoreError> {
        let db = &self.inner.db;
        self.inner
            .commit
            .commit(|| async { db.flush_async().await.map(drop).map_err(backend) })
            .await
    }

    fn append_now(
        &self,
        new_events: &[NewEvent],
        now: u64,
        window: u64,
    ) -> Result<Vec<Appended>, StoreError> {
        let inner = &self.inner;
        let _serialised = inner.append.lock().expect("append lock");
        let trees = (&inner.events, &inner.dedupe, &inner.deliveries);
        let result = trees.transaction(|(events, dedupe, deliveries)| {
            let mut outcomes = Vec::with_capacity(new_events.len());
            for new in new_events {
                let key = dedupe_key(&new.source, &new.id);
                if let Some(previous) = dedupe.get(&key)? {
                    let (seq, accepted_at): (u64, u64) = serde_json::from_slice(&previous)
                        .map_err(|e| ConflictableTransactionError::Abort(e.to_string()))?;
                    if now.saturating_sub(accepted_at) < window {
                        outcomes.push(Appended::Duplicate { seq });
                        continue;
                    }
                }
                let seq = events.generate_id()?;
                let event = StoredEvent {
                    seq,
                    source: new.source.clone(),
                    id: new.id.clone(),
                    accepted_at: now,
                    json: new.json.clone(),
                    subscriptions: new.subscriptions.clone(),
                };
                events.insert(&seq.to_be_bytes(), encode(&event))?;
                dedupe.insert(key, encode(&(seq, now)))?;
                for subscription in &new.subscriptions {
                    let delivery = Delivery::new(subscription.clone(), seq, now);
                    deliveries.insert(delivery_key(subscription, seq), encode(&delivery))?;
                }
                outcomes.push(Appended::Accepted { seq });
            }
            Ok(outcomes)
        });
        result.map_err(|error| match error {
            TransactionError::Abort(why) => StoreError::Corrupt(why),
            TransactionError::Storage(error) => backend(error),
        })
    }

    fn sweep_now(&self, now: u64, retention: u64, window: u64) -> Result<Swept, StoreError> {
        let inner = &self.inner;
        let mut swept = Swept::default();
        for entry in inner.events.iter() {
            let (key, bytes) = entry.map_err(backend)?;
            let event: StoredEvent = decode(&bytes)?;
            if now.saturating_sub(event.accepted_at) < retention {
                break;
            }
            let mut pending = false;
            for subscription in &event.subscriptions {
                if inner
                    .deliveries
                    .contains_key(delivery_key(subscription, event.seq))
                    .map_err(backend)?
                {
                    pending = true;
                    break;
                }
            }
            if !pending {
                inner.events.remove(key).map_err(backend)?;
                swept.events += 1;
            }
        }
        for entry in inner.dedupe.iter() {
            let (key, bytes) = entry.map_err(backend)?;
            let (_, accepted_at): (u64, u64) = decode(&bytes)?;
            if now.saturating_sub(accepted_at) >= window {
                inner.dedupe.remove(key).map_err(backend)?;
                swept.dedupe_entries += 1;
            }
        }
        Ok(swept)
    }
}

impl Store for SledStore {
    fn insert_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let inserted = self
                .inner
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
            self.commit().await
        })
    }

    fn update_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let key = subscription.id.as_bytes();
            let updated = self
                .inner
                .subscriptions
                .fetch_and_update(key, |old| old.map(|_| encode(subscription)))
                .map_err(backend)?;
            if updated.is_none() {
                return Ok(false);
            }
            self.commit().await?;
            Ok(true)
        })
    }

    fn delete_subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>> {
        Box::pin(async move {
            let inner = &self.inner;
            let Some(old) = inner.subscriptions.remove(id.as_bytes()).map_err(backend)? else {
                return Ok(None);
            };
            for key in inner.deliveries.scan_prefix(queue_prefix(id)).keys() {
                inner
                    .deliveries
                    .remove(key.map_err(backend)?)
                    .map_err(backend)?;
            }
            self.commit().await?;
            decode(&old).map(Some)
        })
    }

    fn subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>> {
        Box::pin(async move {
            match self
                .inner
                .subscriptions
                .get(id.as_bytes())
                .map_err(backend)?
            {
                Some(bytes) => decode(&bytes).map(Some),
                None => Ok(None),
            }
        })
    }

    fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>> {
        Box::pin(async move {
            self.inner
                .subscriptions
                .iter()
                .values()
                .map(|bytes| decode(&bytes.map_err(backend)?))
                .collect()
        })
    }

    fn append_events<'a>(
        &'a self,
        events: &'a [NewEvent],
        now_ms: u64,
        dedupe_window_ms: u64,
    ) -> StoreFuture<'a, Vec<Appended>> {
        Box::pin(async move {
            let outcomes = self.append_now(events, now_ms, dedupe_window_ms)?;
            if outcomes
                .iter()
                .any(|o| matches!(o, Appended::Accepted { .. }))
            {
                self.commit().await?;
            }
            Ok(outcomes)
        })
    }

    fn event(&self, seq: u64) -> StoreFuture<'_, Option<StoredEvent>> {
        Box::pin(async move {
            match self.inner.events.get(seq.to_be_bytes()).map_err(backend)? {
                Some(bytes) => decode(&bytes).map(Some),
                None => Ok(None),
            }
        })
    }

    fn pending_deliveries<'a>(
        &'a self,
        subscription: &'a str,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(async move {
            self.inner
                .deliveries
                .scan_prefix(queue_prefix(subscription))
                .values()
                .take(limit)
                .map(|bytes| decode(&bytes.map_err(backend)?))
                .collect()
        })
    }

    fn sweep(
        &self,
        now_ms: u64,
        retention_ms: u64,
        dedupe_window_ms: u64,
    ) -> StoreFuture<'_, Swept> {
        Box::pin(async move {
            let swept = self.sweep_now(now_ms, retention_ms, dedupe_window_ms)?;
            if swept != Swept::default() {
                self.commit().await?;
            }
            Ok(swept)
        })
    }
}

#[cfg(test)]
mod tests;
