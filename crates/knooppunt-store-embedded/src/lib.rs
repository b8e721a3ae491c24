//! The embedded store: an append-only event log for accepted events and the delivery state,
//! sled (0.34) for subscriptions, and the queues in memory.
//!
//! On disk, in the data directory:
//! - `events/`: the event log (`event_log.rs`): every accepted event with the subscriptions
//!   it was routed to, and every change to the delivery state, in order, one `fdatasync` per
//!   group of appends;
//! - sled tree `subscriptions` (id → JSON, flushed on every change), and `principals` (name →
//!   JSON, likewise).
//!
//! In memory, rebuilt from the log at start-up: per subscription the pending deliveries in
//! acceptance order (`pending.rs`) and its dead letters, where each event is in the log
//! (`event_index.rs`), and for duplicate detection a 128-bit keyed hash of each event's
//! `source` and `id` (`dedupe.rs`, owned by the committer). Segments are kept until both the
//! retention and the duplicate window have passed, so the log always holds what duplicate
//! detection needs.
//!
//! Appends are encoded into the group that is filling and answered by one committer thread
//! (`committer.rs`) after the `write` and `fdatasync` that cover the whole group; one
//! committer means records reach the log in the order their numbers were handed out, and
//! no async task ever blocks on a disk write.

mod backup;
mod by_trait;
mod committer;
mod dedupe;
mod event_cache;
mod event_index;
mod event_log;
mod group_commit;
mod pending;
mod queues;
mod receipts;
mod records;
mod word_hash;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

pub use self::backup::{MAGIC as BACKUP_MAGIC, restore};
use self::committer::{Answer, Shared};
use self::dedupe::{Dedupe, DedupeHasher};
use self::event_log::EventLog;
use self::group_commit::GroupCommit;
use self::queues::Queues;
use self::records::{CatalogRecord, GrantRecord, PrincipalRecord, SubscriptionRecord};
use knooppunt_store::{
    Appended, DeadLetter, Delivery, DeliveryChange, DiskUsage, NewEvent, QueueStats, Receipt,
    StoredEvent, Swept, Verdict,
};
use knooppunt_store::{AuditEntry, AuditRange, AuditRecord};
use knooppunt_store::{
    CatalogEntry, Grant, Replay, Session, Store, StoreError, StoreFuture, StoredPrincipal,
    Subscription,
};

/// A new segment is started once the active one is this large.
const DEFAULT_SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

/// sled's own default is 1 GiB, which it fills with every page written (receipts, the
/// audit trail, …). The registry keeps every subscription in memory of its own, so sled's
/// cache only needs the pages being written; and sled counts less than its pages take (at
/// 16 MiB, ~35 MB of its allocations were live after the fan-out). At 4 MiB the
/// 10,000-subscription fan-out peaks ~20 MiB lower than at 16 MiB, with delivery as fast
/// (issue 41, `fanout` in BENCHMARKS.md).
const DEFAULT_CACHE_BYTES: u64 = 4 * 1024 * 1024;

/// Settings of the embedded store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SledOptions {
    /// The size at which the event log starts a new segment; retention deletes whole
    /// segments.
    pub segment_bytes: u64,
    /// The most memory sled keeps of the records' pages (subscriptions, principals, receipts,
    /// the audit trail, …) before it evicts the least recently used.
    pub cache_bytes: u64,
}

impl Default for SledOptions {
    fn default() -> Self {
        SledOptions {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            cache_bytes: DEFAULT_CACHE_BYTES,
        }
    }
}

/// The embedded store: the log (events and the changes of their deliveries) in segment files
/// of its own, the records (subscriptions, principals, catalog, grants, …) in sled; cheap to
/// clone.
#[derive(Debug, Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    trees: Trees,
    /// The event log's directory.
    log_dir: std::path::PathBuf,
    /// Reads events back from the log.
    readers: Arc<event_log::Readers>,
    /// Events read recently or just written, shared by their deliveries (the committer
    /// holds it too).
    events: Arc<event_cache::EventCache>,
    queues: Arc<RwLock<Queues>>,
    commit: GroupCommit,
    /// The group commit of the event log, shared with its committer thread.
    log: Arc<Shared>,
    committer: Mutex<Option<JoinHandle<()>>>,
    /// Held while audit entries are chained and inserted: one chain.
    audit_writer: Mutex<()>,
    /// Files delivery receipts off the delivery path.
    receipts: receipts::Writer,
    /// The hubs said alive, with when ([`Cluster::hubs_alive`]); in memory, as only one
    /// process opens the store.
    hubs: Mutex<std::collections::BTreeMap<String, std::time::Instant>>,
    /// The sinks paused ([`Cluster::pause_sink`]), until when; in memory like the hubs.
    sink_pauses: Mutex<BTreeMap<String, u64>>,
}

#[derive(Debug, Clone)]
struct Trees {
    db: sled::Db,
    subscriptions: sled::Tree,
    principals: sled::Tree,
    catalog: sled::Tree,
    grants: sled::Tree,
    /// The audit trail: sequence number (big endian) → the entry as JSON.
    audit: sled::Tree,
    /// Replay jobs: id → the job as JSON.
    replays: sled::Tree,
    /// Console sessions: id → the session as JSON.
    sessions: sled::Tree,
    /// Receipts by block of events, in chunks (`receipts.rs`).
    receipts: sled::Tree,
    /// Receipts by subscription in delivery order, in chunks (`receipts.rs`).
    received: sled::Tree,
    /// Deleted subscriptions: id → the owner they had (their receipts keep naming it).
    former_owners: sled::Tree,
}

impl Drop for Inner {
    /// Ends the committer thread and waits for it, so that the store is closed when the last
    /// handle is dropped (and can be opened again at once).
    fn drop(&mut self) {
        self.receipts.close();
        self.log.close();
        if let Some(committer) = self.committer.lock().expect("committer lock").take() {
            let _ = committer.join();
        }
    }
}

fn decode_audit(bytes: &[u8]) -> Result<AuditEntry, StoreError> {
    serde_json::from_slice(bytes)
        .map_err(|error| StoreError::Corrupt(format!("an audit entry is unreadable: {error}")))
}

fn backend(error: sled::Error) -> StoreError {
    StoreError::Backend(error.to_string())
}

/// A subscription read from its record in sled.
fn decode(bytes: &[u8]) -> Result<Subscription, StoreError> {
    let record = serde_json::from_slice::<SubscriptionRecord>(bytes)
        .map_err(|error| StoreError::Corrupt(format!("a subscription record: {error}")))?;
    Subscription::try_from(record)
        .map_err(|why| StoreError::Corrupt(format!("a subscription record: {why}")))
}

/// A subscription's record in sled.
fn encode(subscription: &Subscription) -> Vec<u8> {
    serde_json::to_vec(&SubscriptionRecord::from(subscription)).expect("records always serialise")
}

fn decode_principal(bytes: &[u8]) -> Result<StoredPrincipal, StoreError> {
    serde_json::from_slice::<PrincipalRecord>(bytes)
        .map(StoredPrincipal::from)
        .map_err(|error| StoreError::Corrupt(format!("a principal record: {error}")))
}

fn decode_catalog_entry(bytes: &[u8]) -> Result<CatalogEntry, StoreError> {
    let record = serde_json::from_slice::<CatalogRecord>(bytes)
        .map_err(|error| StoreError::Corrupt(format!("a catalog record: {error}")))?;
    CatalogEntry::try_from(record)
        .map_err(|why| StoreError::Corrupt(format!("a catalog record: {why}")))
}

fn encode_catalog_entry(entry: &CatalogEntry) -> Vec<u8> {
    serde_json::to_vec(&CatalogRecord::from(entry)).expect("records always serialise")
}

/// A grant's key: its entry and subscription, apart.
fn grant_key(entry: &str, subscription: &str) -> Vec<u8> {
    [entry.as_bytes(), b"\0", subscription.as_bytes()].concat()
}

fn decode_grant(bytes: &[u8]) -> Result<Grant, StoreError> {
    let record = serde_json::from_slice::<GrantRecord>(bytes)
        .map_err(|error| StoreError::Corrupt(format!("a grant record: {error}")))?;
    Grant::try_from(record).map_err(|why| StoreError::Corrupt(format!("a grant record: {why}")))
}

fn encode_principal(principal: &StoredPrincipal) -> Vec<u8> {
    serde_json::to_vec(&PrincipalRecord::from(principal)).expect("records always serialise")
}

/// The format of the data directory this release reads and writes. A directory without a
/// recorded format is of format 1: every release before formats were recorded wrote it.
/// Raise it with every change an earlier release would misread; this release then refuses
/// a directory of a newer format instead of serving it wrongly.
pub const FORMAT_VERSION: u32 = 1;

/// Where the format is recorded: a key of sled's default tree.
const FORMAT_KEY: &[u8] = b"knooppunt.format";

/// The format of the directory sled opened as `db`: refused when newer than this release
/// knows; recorded (as [`FORMAT_VERSION`]) when missing or older.
fn check_format(db: &sled::Db, directory: &Path) -> Result<(), StoreError> {
    let stored = db.get(FORMAT_KEY).map_err(backend)?;
    let found = match &stored {
        None => 1,
        Some(bytes) => <[u8; 4]>::try_from(bytes.as_ref())
            .map(u32::from_be_bytes)
            .map_err(|_| {
                StoreError::Corrupt(format!(
                    "the format version of {} is unreadable",
                    directory.display()
                ))
            })?,
    };
    if found > FORMAT_VERSION {
        return Err(StoreError::Unsupported(format!(
            "the data directory {} has format version {found}, newer than this hub knows \
             ({FORMAT_VERSION}): run the release that wrote it, or restore the backup taken \
             before the upgrade (docs/operating.md, \"Upgrade\")",
            directory.display()
        )));
    }
    if stored.is_none() || found < FORMAT_VERSION {
        db.insert(FORMAT_KEY, &FORMAT_VERSION.to_be_bytes())
            .map_err(backend)?;
        db.flush().map_err(backend)?;
    }
    Ok(())
}

/// How long opening waits for sled's lock on the directory: a store closed in this process a
/// moment ago can hold it briefly while sled's background work winds down.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// Opens sled in `directory`, waiting up to [`LOCK_WAIT`] for its lock.
fn open_sled(directory: &Path, cache_bytes: u64) -> Result<sled::Db, StoreError> {
    // sled reports a held lock as an `Other` I/O error with this text.
    let locked = |error: &sled::Error| {
        matches!(error, sled::Error::Io(io) if io.kind() == std::io::ErrorKind::WouldBlock
            || io.to_string().contains("could not acquire lock"))
    };
    let started = std::time::Instant::now();
    loop {
        // No periodic flush: every write that must be durable flushes itself (`commit`), and
        // the receipt writer flushes its own batches now and then; a flush every half
        // second would put an fsync beside the event log's every time (measured in
        // docs/benchmarks-log.md).
        match sled::Config::new()
            .path(directory)
            .flush_every_ms(None)
            .cache_capacity(cache_bytes)
            .open()
        {
            Ok(db) => return Ok(db),
            Err(error) if locked(&error) && started.elapsed() < LOCK_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(error) if locked(&error) => {
                return Err(StoreError::Backend(format!(
                    "cannot open {}: the data directory is in use by another process (is another \
                     hub running on it?)",
                    directory.display()
                )));
            }
            Err(error) => {
                return Err(StoreError::Backend(format!(
                    "cannot open {}: {error}",
                    directory.display()
                )));
            }
        }
    }
}

impl EmbeddedStore {
    /// Opens (or creates) the store in `directory` with the default settings.
    pub fn open(directory: &Path) -> Result<EmbeddedStore, StoreError> {
        EmbeddedStore::open_with(directory, SledOptions::default())
    }

    /// Opens (or creates) the store in `directory`, replaying the event log.
    pub fn open_with(directory: &Path, options: SledOptions) -> Result<EmbeddedStore, StoreError> {
        let db = open_sled(directory, options.cache_bytes)?;
        check_format(&db, directory)?;
        let tree = |name: &str| db.open_tree(name).map_err(backend);
        let trees = Trees {
            subscriptions: tree("subscriptions")?,
            principals: tree("principals")?,
            catalog: tree("catalog")?,
            grants: tree("grants")?,
            audit: tree("audit")?,
            replays: tree("replays")?,
            sessions: tree("sessions")?,
            receipts: tree("receipts_by_event")?,
            received: tree("receipts_by_subscription")?,
            former_owners: tree("former_owners")?,
            db: db.clone(),
        };
        let mut queues = Queues::default();
        for key in trees.subscriptions.iter().keys() {
            let key = key.map_err(backend)?;
            queues
                .live
                .insert(String::from_utf8_lossy(&key).into_owned());
        }
        let log_dir = directory.join("events");
        let hasher = DedupeHasher::default();
        let mut dedupe = Dedupe::default();
        // Room for the identities of every event the log holds, made once: grown step by
        // step, the vectors outgrown stay with the allocator (the index grows in chunks).
        dedupe.reserve_replayed(event_log::count_events(&log_dir)?);
        let log = EventLog::open(&log_dir, options.segment_bytes, |entry, location| {
            queues.replay(entry, location, &hasher, &mut dedupe);
        })?;
        dedupe.replayed();
        queues.swept_through = log.first_seq().saturating_sub(1);
        let readers = log.readers();
        let queues = Arc::new(RwLock::new(queues));
        let events = Arc::new(event_cache::EventCache::default());
        let shared = Shared::new(
            Arc::clone(&queues),
            log.last_seq() + 1,
            hasher,
            dedupe,
            Arc::clone(&events),
        );
        let receipt_writer = receipts::Writer::start(
            trees.db.clone(),
            trees.receipts.clone(),
            trees.received.clone(),
        )
        .map_err(|error| {
            StoreError::Backend(format!("cannot start the receipt writer: {error}"))
        })?;
        let committer = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("knooppunt-store-committer".into())
                .spawn(move || committer::run(log, &shared))
                .map_err(|error| {
                    StoreError::Backend(format!("cannot start the committer: {error}"))
                })?
        };
        drop(db);
        Ok(EmbeddedStore {
            inner: Arc::new(Inner {
                log_dir: log_dir.clone(),
                trees,
                readers,
                events,
                queues,
                commit: GroupCommit::default(),
                log: shared,
                committer: Mutex::new(Some(committer)),
                audit_writer: Mutex::new(()),
                receipts: receipt_writer,
                hubs: Mutex::default(),
                sink_pauses: Mutex::default(),
            }),
        })
    }

    /// Stops taking writes, as after a failed write: every write answers
    /// [`StoreError::Unavailable`] until the store is opened again. Reads go on.
    pub fn close(&self) {
        self.inner.log.close();
    }

    /// Flushes sled; returns after the group flush that covers the caller's write.
    async fn commit(&self) -> Result<(), StoreError> {
        let db = &self.inner.trees.db;
        self.inner
            .commit
            .commit(|| async { db.flush_async().await.map(drop).map_err(backend) })
            .await
    }

    // Keyed records, one tree per kind, written the same way for every kind.

    /// Writes a new record under `key`, durably; `taken` is the error when the key is.
    async fn insert_record(
        &self,
        tree: &sled::Tree,
        key: &[u8],
        record: Vec<u8>,
        taken: impl FnOnce() -> StoreError,
    ) -> Result<(), StoreError> {
        self.writable()?;
        let inserted = tree
            .compare_and_swap(key, None as Option<&[u8]>, Some(record))
            .map_err(backend)?;
        if inserted.is_err() {
            return Err(taken());
        }
        self.commit().await
    }

    /// Replaces the record under `key`, durably; `false` (nothing written) when there is
    /// none.
    async fn replace_record(
        &self,
        tree: &sled::Tree,
        key: &[u8],
        record: Vec<u8>,
    ) -> Result<bool, StoreError> {
        self.writable()?;
        let updated = tree
            .fetch_and_update(key, |old| old.map(|_| record.clone()))
            .map_err(backend)?;
        if updated.is_none() {
            return Ok(false);
        }
        self.commit().await?;
        Ok(true)
    }

    /// Writes the record under `key` whether or not there is one, durably.
    async fn put_record(
        &self,
        tree: &sled::Tree,
        key: impl AsRef<[u8]>,
        record: Vec<u8>,
    ) -> Result<(), StoreError> {
        self.writable()?;
        tree.insert(key, record).map_err(backend)?;
        self.commit().await
    }

    /// Every record of a kind, in the order of their keys.
    fn all_records<T>(
        tree: &sled::Tree,
        decode: impl Fn(&[u8]) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        tree.iter()
            .values()
            .map(|bytes| decode(&bytes.map_err(backend)?))
            .collect()
    }

    /// The sinks paused, until when ([`Cluster::pause_sink`]); a poisoned lock still holds
    /// them (each change leaves the map whole).
    fn sink_pauses(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, u64>> {
        self.inner
            .sink_pauses
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Refuses subscription writes once the store takes no more (closed, or its log failed),
    /// as the log refuses events then.
    fn writable(&self) -> Result<(), StoreError> {
        match self.inner.log.refusal() {
            Some(message) => Err(StoreError::Unavailable(message.into())),
            None => Ok(()),
        }
    }

    /// [`DeliveryQueue::record`], or [`DeliveryQueue::record_results`] when not `durable`.
    fn record_with(&self, changes: Vec<DeliveryChange>, durable: bool) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let taken = self.take_results(&changes)?;
            let receipts: Vec<(u64, String, u64)> = changes
                .iter()
                .filter_map(|change| match change {
                    DeliveryChange::Attempted(a)
                        if a.receipt && a.verdict == Verdict::Delivered =>
                    {
                        Some((a.seq, a.subscription.clone(), a.at))
                    }
                    _ => None,
                })
                .collect();
            if let Err(error) = answered(self.inner.log.record(changes, durable)).await {
                // Not written: each result's delivery goes back to its lease, so that its
                // holder may record it again, or the lease lapses as after a crash.
                let mut queues = self.queues();
                for (subscription, seq, token, until) in taken {
                    if let Some(queue) = queues.pending.get_mut(&subscription) {
                        queue.restore(&subscription, seq, token, until);
                    }
                }
                return Err(error);
            }
            if !receipts.is_empty() {
                // The delivery state is in the log already; receipts follow.
                self.inner.receipts.keep(receipts);
            }
            Ok(())
        })
    }

    /// Checks the lease token of every attempt in `changes` and takes their deliveries out
    /// of reach of new leases until the committer applies the results: all of them, or, if
    /// one token is stale, none. The check is made here, before the log, so that the log
    /// holds only results that counted and replaying it needs no tokens. What was taken, as
    /// `(subscription, seq, token, leased until)`, to restore if the results are not
    /// written.
    fn take_results(
        &self,
        changes: &[DeliveryChange],
    ) -> Result<Vec<(String, u64, u64, u64)>, StoreError> {
        let mut queues = self.queues();
        let attempts = || {
            changes.iter().filter_map(|change| match change {
                DeliveryChange::Attempted(attempt) => Some(attempt),
                _ => None,
            })
        };
        for attempt in attempts() {
            let held = queues
                .pending
                .get(&attempt.subscription)
                .is_none_or(|queue| queue.holds(attempt.seq, attempt.lease));
            if !held {
                return Err(StoreError::StaleLease {
                    subscription: attempt.subscription.clone(),
                    seq: attempt.seq,
                });
            }
        }
        let mut taken = Vec::new();
        for attempt in attempts() {
            if let Some(queue) = queues.pending.get_mut(&attempt.subscription)
                && let Some(until) = queue.take_result(&attempt.subscription, attempt.seq)
            {
                let subscription = attempt.subscription.clone();
                taken.push((subscription, attempt.seq, attempt.lease, until));
            }
        }
        Ok(taken)
    }

    fn queues(&self) -> std::sync::RwLockWriteGuard<'_, Queues> {
        self.inner.queues.write().expect("queues lock")
    }
}

/// Waits for the committer's answer.
async fn answered<T>(answer: Answer<T>) -> Result<T, StoreError> {
    answer
        .await
        .map_err(|_| StoreError::Unavailable("the store's committer stopped".into()))?
}

impl Store for EmbeddedStore {
    fn backup(
        &self,
        out: &mut dyn std::io::Write,
        beside: &[(String, Vec<u8>)],
    ) -> Result<knooppunt_store::BackupSummary, StoreError> {
        EmbeddedStore::backup(self, out, beside)
    }

    fn disk_usage(&self) -> StoreFuture<'_, DiskUsage> {
        Box::pin(async move {
            let events_dir = &self.inner.log_dir;
            let mut event_bytes = 0;
            for entry in std::fs::read_dir(events_dir).map_err(|e| {
                StoreError::Backend(format!("cannot list {}: {e}", events_dir.display()))
            })? {
                event_bytes += entry.and_then(|e| e.metadata()).map_or(0, |m| m.len());
            }
            let records = self.inner.trees.db.size_on_disk().map_err(backend)?;
            Ok(DiskUsage {
                total_bytes: event_bytes + records,
                event_bytes,
                free_bytes: fs2::available_space(events_dir).ok(),
            })
        })
    }

    fn check(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            if let Some(why) = self.inner.log.refusal() {
                return Err(StoreError::Backend(why.into()));
            }
            // A read through sled: fails when sled cannot serve it.
            self.inner
                .trees
                .subscriptions
                .first()
                .map(drop)
                .map_err(backend)
        })
    }
}

impl knooppunt_store::Inspect for EmbeddedStore {
    fn pending_deliveries<'a>(
        &'a self,
        subscription: &'a str,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(async move {
            let queues = self.inner.queues.read().expect("queues lock");
            Ok(queues
                .pending
                .get(subscription)
                .map(|queue| queue.deliveries(subscription).take(limit).collect())
                .unwrap_or_default())
        })
    }
}

#[cfg(test)]
mod tests;
