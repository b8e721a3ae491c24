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
//! Appends go to one writer thread: it takes every append waiting, applies them in one sled
//! transaction, flushes once and answers them all. One writer means sequence numbers commit
//! in the order they are handed out (a reader never sees seq 6 before seq 5), and no async
//! task ever blocks on sled's write path.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sled::Transactional;
use sled::transaction::{ConflictableTransactionError, TransactionError};

use crate::queue::{Appended, Delivery, NewEvent, StoredEvent, Swept};
use crate::{Store, StoreError, StoreFuture, Subscription};

/// The sled-backed store; cheap to clone (sled handles are reference-counted).
#[derive(Debug, Clone)]
pub struct SledStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    trees: Trees,
    commit: GroupCommit,
    /// Appends for the writer thread; taken on drop so that the thread ends.
    appends: Mutex<Option<mpsc::Sender<AppendRequest>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug, Clone)]
struct Trees {
    db: sled::Db,
    subscriptions: sled::Tree,
    events: sled::Tree,
    dedupe: sled::Tree,
    deliveries: sled::Tree,
}

struct AppendRequest {
    events: Vec<NewEvent>,
    now: u64,
    window: u64,
    reply: tokio::sync::oneshot::Sender<Result<Vec<Appended>, StoreError>>,
}

impl Drop for Inner {
    /// Ends the writer thread and waits for it, so that the database is closed when the last
    /// handle is dropped (and can be opened again at once).
    fn drop(&mut self) {
        drop(self.appends.lock().expect("appends lock").take());
        if let Some(writer) = self.writer.lock().expect("writer lock").take() {
            let _ = writer.join();
        }
    }
}

/// The most appends one transaction takes.
const MAX_GROUP: usize = 1024;

/// The writer thread: one transaction and one flush for every append waiting.
fn write_appends(trees: Trees, requests: mpsc::Receiver<AppendRequest>) {
    while let Ok(first) = requests.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match requests.try_recv() {
                Ok(request) => group.push(request),
                Err(_) => break,
            }
        }
        let result = trees.append_group(&group).and_then(|outcomes| {
            let accepted = outcomes
                .iter()
                .flatten()
                .any(|o| matches!(o, Appended::Accepted { .. }));
            if accepted {
                trees.db.flush().map_err(backend)?;
            }
            Ok(outcomes)
        });
        match result {
            Ok(outcomes) => {
                for (request, outcome) in group.into_iter().zip(outcomes) {
                    let _ = request.reply.send(Ok(outcome));
                }
            }
            Err(error) => {
                let message = error.to_string();
                for request in group {
                    let _ = request
                        .reply
                        .send(Err(StoreError::Backend(message.clone())));
                }
            }
        }
    }
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

impl Trees {
    /// Applies the appends of a group in one transaction; one list of outcomes per append.
    fn append_group(&self, group: &[AppendRequest]) -> Result<Vec<Vec<Appended>>, StoreError> {
        let trees = (&self.events, &self.dedupe, &self.deliveries);
        let result = trees.transaction(|(events, dedupe, deliveries)| {
            let mut all = Vec::with_capacity(group.len());
            for request in group {
                let (now, window) = (request.now, request.window);
                let mut outcomes = Vec::with_capacity(request.events.len());
                for new in &request.events {
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
                all.push(outcomes);
            }
            Ok(all)
        });
        result.map_err(|error| match error {
            TransactionError::Abort(why) => StoreError::Corrupt(why),
            TransactionError::Storage(error) => backend(error),
        })
    }
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
        let trees = Trees {
            subscriptions: tree("subscriptions")?,
            events: tree("events")?,
            dedupe: tree("dedupe")?,
            deliveries: tree("deliveries")?,
            db,
        };
        let (appends, requests) = mpsc::channel();
        let writer_trees = trees.clone();
        let writer = std::thread::Builder::new()
            .name("knooppunt-store-writer".into())
            .spawn(move || write_appends(writer_trees, requests))
            .map_err(|error| StoreError::Backend(format!("cannot start the writer: {error}")))?;
        Ok(SledStore {
            inner: Arc::new(Inner {
                trees,
                commit: GroupCommit::default(),
                appends: Mutex::new(Some(appends)),
                writer: Mutex::new(Some(writer)),
            }),
        })
    }

    async fn commit(&self) -> Result<(), StoreError> {
        let db = &self.inner.trees.db;
        self.inner
            .commit
            .commit(|| async { db.flush_async().await.map(drop).map_err(backend) })
            .await
    }

    fn sweep_now(&self, now: u64, retention: u64, window: u64) -> Result<Swept, StoreError> {
        let inner = &self.inner.trees;
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
                .trees
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
                .trees
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
            let inner = &self.inner.trees;
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
                .trees
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
                .trees
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
            let (reply, answer) = tokio::sync::oneshot::channel();
            let request = AppendRequest {
                events: events.to_vec(),
                now: now_ms,
                window: dedupe_window_ms,
                reply,
            };
            let sent = match &*self.inner.appends.lock().expect("appends lock") {
                Some(appends) => appends.send(request).is_ok(),
                None => false,
            };
            if !sent {
                return Err(StoreError::Backend("the store is closed".into()));
            }
            answer
                .await
                .map_err(|_| StoreError::Backend("the store's writer stopped".into()))?
        })
    }

    fn event(&self, seq: u64) -> StoreFuture<'_, Option<StoredEvent>> {
        Box::pin(async move {
            match self
                .inner
                .trees
                .events
                .get(seq.to_be_bytes())
                .map_err(backend)?
            {
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
                .trees
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
