//! The hub's durable state behind one trait, [`Store`], so that the embedded default
//! ([`EmbeddedStore`]) and a shared database can serve the same hub.
//!
//! **Durability invariant:** a write method returns `Ok` only when the change is on disk.
//!
//! It holds the subscriptions and the accepted events with their pending deliveries, through
//! operations that make sense for every backend: an atomic append of events with their
//! deliveries and duplicate detection, per-subscription queues in acceptance order, leases
//! on due deliveries for the delivery workers, durable attempt results (delivered, retry,
//! dead letter), dead letters, and a retention sweep.

pub mod audit;
mod catalog;
mod principal;
mod protocol;
mod queue;
mod record;
mod replay;
mod session;
mod subscription;

use std::future::Future;
use std::pin::Pin;

pub use audit::{
    AuditEntry, AuditRange, AuditRecord, Broken, GENESIS, SelectionCheck, SelectionChecked,
    StartAnchor, verify as verify_audit,
};
pub use catalog::{
    ApprovalPolicy, CatalogEntry, Decision, Grant, GrantState, SchemaCheck, TypeMatch,
};
pub use principal::{PreviousToken, StoredPrincipal, StoredZgwClient};
pub use queue::{
    Appended, Attempt, DeadLetter, Delivery, DeliveryChange, NewEvent, QueueStats, Receipt,
    StoredEvent, Swept, Verdict, event_size,
};
pub use record::{AnyRecord, Key, Kind, Record, RecordRef};
pub use replay::{Replay, ReplayState};
pub use session::Session;
pub use subscription::{
    AmqpSettings, CONFIG_KEYS, ClientCertificate, ConfigDefaults, ConfigError, ConfigKey,
    ConfigValues, Consent, DeliveryConfig, DeliveryMode, Disabled, HttpSettings, MqttSettings,
    MqttVersion, NatsSettings, Ordering, Protocol, ProtocolSettings, SigningSecrets, Sink,
    SinkCredential, Status, StatusColumns, Subscription, SubscriptionConfig, SubscriptionState,
    Transfer, Validation, parse_iso8601_duration,
};

/// Milliseconds since the Unix epoch: the hub's one clock for stored times.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The disk a store takes ([`Store::disk_usage`]), in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskUsage {
    /// All of it (on PostgreSQL: the database).
    pub total_bytes: u64,
    /// Of which the retained events (the embedded store's log; PostgreSQL's `events` table
    /// with its indexes).
    pub event_bytes: u64,
    /// Room left on the file system the store writes to, where the backend can tell (the
    /// embedded store; a database server's disk is not the hub's to see).
    pub free_bytes: Option<u64>,
}

/// What another hub sharing the store changed (see [`Cluster::watch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreChange {
    /// Subscriptions or principals were created, changed or deleted: reload them.
    Subscriptions,
    /// Deliveries were queued for these subscriptions; `None`: maybe for any (after a lost
    /// connection, say).
    Deliveries(Option<Vec<String>>),
    /// Pending deliveries of these subscriptions were withdrawn (shed, revoked or retired
    /// into dead letters): a worker holding some of them leased ahead gives them back
    /// unsent. `None`: maybe of any.
    Withdrawn(Option<Vec<String>>),
    /// A sink asked one of the hubs to send nothing before `until_ms` ([`Cluster::pause_sink`]).
    SinkPaused { sink: String, until_ms: u64 },
}

/// Called with each [`StoreChange`]; it must return quickly (it runs on the store's task).
pub type ChangeListener = std::sync::Arc<dyn Fn(StoreChange) + Send + Sync>;

/// A boxed future, so that [`Store`] can be used as `dyn Store`.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store takes no writes now (closed, or stopped after a failed write): another hub
    /// or a restart can; the caller may try again later.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    #[error("the store failed: {0}")]
    Backend(String),
    #[error("a stored record is corrupt: {0}")]
    Corrupt(String),
    #[error("a subscription with id `{0}` already exists")]
    Conflict(String),
    #[error("a principal named `{0}` already exists")]
    NameTaken(String),
    /// A result carried a lease token that is no longer the delivery's: the lease ran out
    /// and the delivery was leased again (by another worker or hub), whose result counts.
    #[error(
        "the lease on the delivery of event {seq} to subscription `{subscription}` is no longer held"
    )]
    StaleLease { subscription: String, seq: u64 },
    /// The backend does not do this (the message says what to do instead).
    #[error("{0}")]
    Unsupported(String),
}

/// What a backup of the store holds ([`Store::backup`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupSummary {
    /// Segments of the event log copied.
    pub segments: u64,
    /// Bytes of the event log copied.
    pub log_bytes: u64,
    /// Records per tree of records.
    pub records: std::collections::BTreeMap<String, u64>,
    /// Files kept beside the store (the audit trail's checkpoint).
    pub files: Vec<String>,
}

/// Keyed records: subscriptions, principals, catalog entries, grants, replays and
/// console sessions.
///
/// A backend writes the generic core, once for every [`Kind`]; the typed wrappers below it
/// (`insert_subscription`, `principals`, …) are the same for every backend. Only what is
/// not a plain keyed record is its own method: a deleted subscription's owner, a replay's
/// compare-and-swap and the sweep of ended sessions.
pub trait Records: Send + Sync {
    /// Stores a new record; [`RecordRef::taken`] (`Conflict`, or `NameTaken` for a
    /// principal) when its key is taken. A subscription's queue is open from then on.
    fn insert<'a>(&'a self, record: RecordRef<'a>) -> StoreFuture<'a, ()>;

    /// Replaces the record with the same key; `false` when there is none (nothing is
    /// written).
    fn replace<'a>(&'a self, record: RecordRef<'a>) -> StoreFuture<'a, bool>;

    /// Stores a record in place of the one with the same key, if there is one.
    fn put<'a>(&'a self, record: RecordRef<'a>) -> StoreFuture<'a, ()>;

    /// Removes a record and returns it. A subscription takes its pending deliveries and
    /// dead letters with it, and its owner stays known ([`Records::former_owner`]) so that
    /// its receipts keep naming it.
    fn remove<'a>(&'a self, kind: Kind, key: Key<'a>) -> StoreFuture<'a, Option<AnyRecord>>;

    /// The record of `kind` with `key`, if there is one (a session expired or not).
    fn get<'a>(&'a self, kind: Kind, key: Key<'a>) -> StoreFuture<'a, Option<AnyRecord>>;

    /// Every record of `kind`: in key order (a subscription's id is its creation order; a
    /// grant's key is its entry, then its subscription), replays oldest first.
    fn all(&self, kind: Kind) -> StoreFuture<'_, Vec<AnyRecord>>;

    /// The owner of subscription `id` when it was deleted, if it was.
    fn former_owner<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<String>>;

    /// Stores a replay job: a new one when `expected` is `None` (`false` if its id is
    /// taken), else in place of the stored one only if that one's `updated_at` is
    /// `expected` (`false` when another hub changed it meanwhile, or it is gone).
    fn put_replay<'a>(&'a self, replay: &'a Replay, expected: Option<u64>)
    -> StoreFuture<'a, bool>;

    /// Removes the sessions that expired before `now_ms` or were last seen before
    /// `idle_before_ms`; returns how many.
    fn sweep_sessions(&self, now_ms: u64, idle_before_ms: u64) -> StoreFuture<'_, u64>;

    // The typed wrappers.

    /// Stores a new subscription; fails with [`StoreError::Conflict`] if the id is taken.
    fn insert_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, ()> {
        self.insert(subscription.as_record())
    }

    /// Replaces a subscription; `false` when there is none with that id (nothing is written).
    fn update_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, bool> {
        self.replace(subscription.as_record())
    }

    /// Removes a subscription, with its pending deliveries, and returns it (see
    /// [`Records::remove`]).
    fn delete_subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>> {
        removed(self.remove(Kind::Subscription, Key::One(id)))
    }

    fn subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>> {
        one(self.get(Kind::Subscription, Key::One(id)))
    }

    /// Every subscription, in id order (which is creation order).
    fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>> {
        every(self.all(Kind::Subscription))
    }

    /// Stores a new principal; fails with [`StoreError::NameTaken`] if the name is taken.
    fn insert_principal<'a>(&'a self, principal: &'a StoredPrincipal) -> StoreFuture<'a, ()> {
        self.insert(principal.as_record())
    }

    /// Replaces a principal; `false` when there is none with that name.
    fn update_principal<'a>(&'a self, principal: &'a StoredPrincipal) -> StoreFuture<'a, bool> {
        self.replace(principal.as_record())
    }

    /// Removes a principal; `false` when there was none with that name.
    fn delete_principal<'a>(&'a self, name: &'a str) -> StoreFuture<'a, bool> {
        gone(self.remove(Kind::Principal, Key::One(name)))
    }

    /// Every principal, in name order.
    fn principals(&self) -> StoreFuture<'_, Vec<StoredPrincipal>> {
        every(self.all(Kind::Principal))
    }

    /// Stores a new catalog entry; `Conflict` when its id is taken.
    fn insert_catalog_entry<'a>(&'a self, entry: &'a CatalogEntry) -> StoreFuture<'a, ()> {
        self.insert(entry.as_record())
    }

    /// Replaces a catalog entry; `false` when there is none with that id.
    fn update_catalog_entry<'a>(&'a self, entry: &'a CatalogEntry) -> StoreFuture<'a, bool> {
        self.replace(entry.as_record())
    }

    /// Removes a catalog entry; `false` when there was none with that id.
    fn delete_catalog_entry<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        gone(self.remove(Kind::CatalogEntry, Key::One(id)))
    }

    /// Every catalog entry, in id order.
    fn catalog_entries(&self) -> StoreFuture<'_, Vec<CatalogEntry>> {
        every(self.all(Kind::CatalogEntry))
    }

    /// Stores a grant, replacing the one of its entry and subscription.
    fn put_grant<'a>(&'a self, grant: &'a Grant) -> StoreFuture<'a, ()> {
        self.put(grant.as_record())
    }

    /// Removes the grant of an entry and a subscription; `false` when there was none.
    fn delete_grant<'a>(&'a self, entry: &'a str, subscription: &'a str) -> StoreFuture<'a, bool> {
        gone(self.remove(
            Kind::Grant,
            Key::Grant {
                entry,
                subscription,
            },
        ))
    }

    /// Every grant, by entry and then subscription.
    fn grants(&self) -> StoreFuture<'_, Vec<Grant>> {
        every(self.all(Kind::Grant))
    }

    /// Every replay job, oldest first.
    fn replays(&self) -> StoreFuture<'_, Vec<Replay>> {
        every(self.all(Kind::Replay))
    }

    /// Removes a replay job; `false` when there was none with that id.
    fn delete_replay<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        gone(self.remove(Kind::Replay, Key::One(id)))
    }

    /// Stores a console session, in place of one with the same id.
    fn put_session<'a>(&'a self, session: &'a Session) -> StoreFuture<'a, ()> {
        self.put(session.as_record())
    }

    /// The session with this id, if there is one (expired or not).
    fn session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Session>> {
        one(self.get(Kind::Session, Key::One(id)))
    }

    /// Removes a session; `false` when there was none with that id.
    fn delete_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        gone(self.remove(Kind::Session, Key::One(id)))
    }
}

/// One record of `R`, read by the generic core.
fn one<R: Record>(read: StoreFuture<'_, Option<AnyRecord>>) -> StoreFuture<'_, Option<R>> {
    Box::pin(async move { read.await?.map(R::from_any).transpose() })
}

/// The record of `R` the generic core removed.
fn removed<R: Record>(remove: StoreFuture<'_, Option<AnyRecord>>) -> StoreFuture<'_, Option<R>> {
    one(remove)
}

/// Whether the generic core removed a record.
fn gone(remove: StoreFuture<'_, Option<AnyRecord>>) -> StoreFuture<'_, bool> {
    Box::pin(async move { Ok(remove.await?.is_some()) })
}

/// Every record of `R`, read by the generic core.
fn every<R: Record>(read: StoreFuture<'_, Vec<AnyRecord>>) -> StoreFuture<'_, Vec<R>> {
    Box::pin(async move { read.await?.into_iter().map(R::from_any).collect() })
}

/// The event log: accepted events, their receipts, and the retention sweep.
pub trait EventLog: Send + Sync {
    /// Appends events atomically, each with one pending delivery per subscription, in
    /// acceptance order, and returns only when all of it is on disk. An event whose `source`
    /// and `id` were accepted less than `dedupe_window_ms` ago is reported as a duplicate and
    /// not stored again (also within one call).
    fn append_events(
        &self,
        events: Vec<NewEvent>,
        now_ms: u64,
        dedupe_window_ms: u64,
    ) -> StoreFuture<'_, Vec<Appended>>;

    /// An accepted event, shared: the workers delivering it to many subscriptions hold one
    /// copy, and a backend reads it once however many deliveries ask for it.
    fn event(&self, seq: u64) -> StoreFuture<'_, Option<std::sync::Arc<StoredEvent>>>;

    /// Up to `limit` retained events numbered above `after`, in acceptance order, for
    /// readers that keep their own position (a resumable stream, a replay). What it returns
    /// is always a prefix: no event it leaves out now can later appear with a smaller number
    /// than the last one returned (on PostgreSQL, events of appends still running wait, and
    /// every event after them, until those end).
    fn events_after(
        &self,
        after: u64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<std::sync::Arc<StoredEvent>>>;

    /// Events numbered up to this one may have been removed by the retention sweep (0: none
    /// was); a reader positioned before it may have missed events.
    fn swept_through(&self) -> StoreFuture<'_, u64>;

    /// A number at or before the first retained event accepted at or after `at_ms` (reading
    /// [`EventLog::events_after`] it finds every such event; acceptance times are only nearly in
    /// number order, so a reader also checks each event's time).
    fn seq_before(&self, at_ms: u64) -> StoreFuture<'_, u64>;

    /// The receipts of event `seq`: which subscriptions took it and when, by subscription
    /// (the first receipt of each). A delivery recorded as [`Verdict::Delivered`] leaves one
    /// (the embedded store files them within seconds of the result, which is durable at
    /// once).
    fn receipts_of_event(&self, seq: u64) -> StoreFuture<'_, Vec<Receipt>>;

    /// Up to `limit` receipts of a subscription in the order they were delivered, after
    /// `after` (a cursor this method gave), and the cursor after the last one when there
    /// may be more.
    fn receipts_of_subscription<'a>(
        &'a self,
        subscription: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> StoreFuture<'a, (Vec<Receipt>, Option<String>)>;

    /// Removes receipts delivered before `before_ms` (in whole batches on the embedded
    /// store: a batch goes once all of it is older); returns how many.
    fn sweep_receipts(&self, before_ms: u64) -> StoreFuture<'_, u64>;

    /// Removes events accepted more than `retention_ms` ago whose deliveries are all finished,
    /// and duplicate-detection entries older than `dedupe_window_ms`.
    fn sweep(
        &self,
        now_ms: u64,
        retention_ms: u64,
        dedupe_window_ms: u64,
    ) -> StoreFuture<'_, Swept>;
}

/// The delivery queue: what delivery needs (lease, record a result, give back), dead
/// letters and queue sizes.
pub trait DeliveryQueue: EventLog + Send + Sync {
    /// Leases up to `limit` due deliveries of a subscription (`next_attempt_at <= now_ms`,
    /// not leased) until `now_ms + lease_ms`, in acceptance order, each under a new token
    /// ([`Delivery::lease`]) that no other lease of this store has. With `ordered`, the
    /// oldest pending delivery and those after it in a row, each due and not leased, and
    /// none after one that is not (so nothing while the oldest is leased): one holder
    /// sends them one after the other. A backend may lease fewer in a row, but always the
    /// oldest when it is due. A lease
    /// that runs out (its holder died or hangs, or a pull consumer kept the event without
    /// settling it) frees the delivery for the next lease, and counts as an attempt then:
    /// the delivery comes back with `attempts` one higher (on the embedded store only until
    /// a restart, as leases themselves).
    fn lease<'a>(
        &'a self,
        subscription: &'a str,
        now_ms: u64,
        lease_ms: u64,
        limit: usize,
        ordered: bool,
    ) -> StoreFuture<'a, Vec<Delivery>>;

    /// Extends lease `lease` on the delivery of event `seq` to `until_ms`, if that lease
    /// still holds it (once it ran out and another lease took the delivery, or its result
    /// was recorded, it does not); whether it did. For consumers that hold a lock while
    /// they work (pull delivery).
    fn renew<'a>(
        &'a self,
        subscription: &'a str,
        seq: u64,
        lease: u64,
        until_ms: u64,
    ) -> StoreFuture<'a, bool>;

    /// Gives back leases that were not used (the worker leased ahead of its free slots and
    /// then stopped, or its sink's breaker opened): each delivery of `(seq, lease)` whose
    /// lease that still is becomes available again at once, as if that lease had never
    /// been taken (no attempt is counted for it); the others are left as they are. Returns
    /// how many were given back.
    fn release<'a>(
        &'a self,
        subscription: &'a str,
        leases: &'a [(u64, u64)],
    ) -> StoreFuture<'a, u64>;

    /// When the subscription's next unleased delivery is due (for an ordered subscription:
    /// its oldest one, if not leased), if it has one.
    fn next_due<'a>(&'a self, subscription: &'a str, ordered: bool)
    -> StoreFuture<'a, Option<u64>>;

    /// Records changes to the delivery state, in order, and returns when they are on disk.
    /// A change to a delivery or dead letter that no longer exists is ignored, with one
    /// exception: a delivered attempt whose delivery is no longer pending (withdrawn,
    /// retired or given up while the attempt was under way) turns its dead letter, if any,
    /// into a delivery with a receipt, for the sink took the event. An attempt
    /// whose [`Attempt::lease`] is not the delivery's current lease (it ran out and the
    /// delivery was leased again, or its result was recorded already) is refused with
    /// [`StoreError::StaleLease`], and then nothing of the call is recorded.
    fn record(&self, changes: Vec<DeliveryChange>) -> StoreFuture<'_, ()>;

    /// Records the results of push delivery attempts as [`DeliveryQueue::record`] does, except that
    /// a backend may answer once they are written and applied, and put them on disk with its
    /// next sync soon after: a result lost in a crash of the machine (not of the process)
    /// only means that its delivery is made again. The embedded store syncs them with the
    /// next group that holds an event or another change, or within 100 ms; PostgreSQL
    /// commits them without waiting for the WAL flush, a small group of an unordered
    /// subscription's results after waiting up to 5 ms for more. By default it is
    /// [`DeliveryQueue::record`].
    fn record_results(&self, changes: Vec<DeliveryChange>) -> StoreFuture<'_, ()> {
        self.record(changes)
    }

    /// Up to `limit` of a subscription's pending deliveries (leased or not), as their
    /// events' sequence numbers in acceptance order, after event `after`.
    fn pending_seqs<'a>(
        &'a self,
        subscription: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<u64>>;

    /// Turns the pending deliveries of `subscription` whose events `picked` chooses into
    /// dead letters with `reason` ([`DeliveryChange::Withdraw`]), a page at a time; returns
    /// how many it chose. Deliveries queued meanwhile are the caller's to keep out.
    fn withdraw<'a>(
        &'a self,
        subscription: &'a str,
        picked: &'a (dyn Fn(&StoredEvent) -> bool + Send + Sync),
        at: u64,
        reason: &'a str,
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            const PAGE: usize = 1000;
            let (mut after, mut chosen) = (None, 0);
            loop {
                let page = self.pending_seqs(subscription, after, PAGE).await?;
                let mut seqs = Vec::new();
                for &seq in &page {
                    if let Some(event) = self.event(seq).await?
                        && picked(&event)
                    {
                        seqs.push(seq);
                    }
                }
                chosen += seqs.len() as u64;
                if !seqs.is_empty() {
                    self.record(vec![DeliveryChange::Withdraw {
                        subscription: subscription.to_owned(),
                        seqs,
                        at,
                        reason: reason.to_owned(),
                    }])
                    .await?;
                }
                match page.last() {
                    Some(&last) if page.len() == PAGE => after = Some(last),
                    _ => return Ok(chosen),
                }
            }
        })
    }

    /// A subscription's dead letters in acceptance order, starting after event `after`.
    fn dead_letters<'a>(
        &'a self,
        subscription: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<DeadLetter>>;

    fn dead_letter<'a>(
        &'a self,
        subscription: &'a str,
        seq: u64,
    ) -> StoreFuture<'a, Option<DeadLetter>>;

    /// Removes up to `limit` dead letters that became dead letters before `before_ms`,
    /// the oldest first, durably; returns how many each subscription lost (in subscription
    /// order). Their events can then go with the retention sweep.
    fn sweep_dead_letters(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<(String, u64)>>;

    /// Every subscription's queue size, oldest pending event and dead letters.
    fn queue_stats(&self) -> StoreFuture<'_, Vec<QueueStats>>;

    /// One subscription's [`QueueStats`] (`None` when it does not exist), without reading
    /// every other's: a page showing some subscriptions of a large hub asks for each.
    fn queue_stats_of<'a>(&'a self, subscription: &'a str) -> StoreFuture<'a, Option<QueueStats>> {
        Box::pin(async move {
            Ok(self
                .queue_stats()
                .await?
                .into_iter()
                .find(|stats| stats.subscription == subscription))
        })
    }
}

/// The audit trail: appended in a hash chain, read in ranges, swept by retention.
pub trait AuditLog: Send + Sync {
    /// Appends records to the audit trail, each chained after the one before
    /// ([`AuditEntry::seal`]; with several hubs, one chain in the store's order), and returns
    /// their entries once they are on disk (committed).
    fn append_audit(&self, records: Vec<AuditRecord>) -> StoreFuture<'_, Vec<AuditEntry>>;

    /// Audit entries in sequence order.
    fn audit_entries(&self, range: AuditRange) -> StoreFuture<'_, Vec<AuditEntry>>;

    /// The newest audit entry (the chain's head as the store holds it), if there is one.
    fn audit_last(&self) -> StoreFuture<'_, Option<AuditEntry>>;

    /// Removes the audit entries up to entry `through`, all at once or none, never the
    /// newest (it carries the chain on); returns how many. Retention calls it once the trail
    /// records the removal ([`audit::RETENTION`]), which anchors the trail's new start.
    fn remove_audit_through(&self, through: u64) -> StoreFuture<'_, u64>;
}

/// The hubs sharing the store: who is alive, what they applied, sinks' pauses, and the
/// changes other hubs made.
pub trait Cluster: Send + Sync {
    /// Says that the hub `hub` (an id it chose when it started) is alive now, forgets the
    /// hubs not said alive for `alive_ms`, and answers the ids of the hubs alive, sorted,
    /// `hub` among them: the hubs that share this store's deliveries, so that each can take
    /// its share of a subscription's slots and of the rate its sink granted. "Now" is the
    /// store's clock (with several hubs, the database's), so the hubs' clocks need not agree.
    fn hubs_alive<'a>(&'a self, hub: &'a str, alive_ms: u64) -> StoreFuture<'a, Vec<String>>;

    /// Says that hub `hub` applied every change up to `version` of
    /// [`Cluster::subscriptions_version`]: it reloaded what it keeps in memory and acted on it
    /// (a right taken away is cut there). A backend only one hub writes keeps nothing.
    fn hub_applied<'a>(&'a self, hub: &'a str, version: u64) -> StoreFuture<'a, ()> {
        let _ = (hub, version);
        Box::pin(async { Ok(()) })
    }

    /// The hubs said alive within `alive_ms`, other than `hub`, that have not applied
    /// `version` yet ([`Cluster::hub_applied`]), sorted. A backend only one hub writes has
    /// none.
    fn hubs_behind<'a>(
        &'a self,
        hub: &'a str,
        version: u64,
        alive_ms: u64,
    ) -> StoreFuture<'a, Vec<String>> {
        let _ = (hub, version, alive_ms);
        Box::pin(async { Ok(Vec::new()) })
    }

    /// The hub `hub` stops: the others leave it out from their next [`Cluster::hubs_alive`].
    fn hub_leaves<'a>(&'a self, hub: &'a str) -> StoreFuture<'a, ()>;

    /// A sink asked (with `Retry-After`) that nothing be sent to it before `until_ms`
    /// (milliseconds since the Unix epoch): kept for every hub sharing this store, a later
    /// time replacing an earlier one and never the reverse, and told to them at once
    /// ([`StoreChange::SinkPaused`]). `sink` names it by scheme, host and port.
    fn pause_sink<'a>(&'a self, sink: &'a str, until_ms: u64) -> StoreFuture<'a, ()>;

    /// The sinks paused past `now_ms`, with until when, in the order of their names.
    fn sinks_paused(&self, now_ms: u64) -> StoreFuture<'_, Vec<(String, u64)>>;

    /// A number that changes whenever any hub sharing this store changes a subscription or
    /// a principal, so that each hub can tell when to reload them. A backend only one hub writes (the
    /// embedded one) answers 0 always: that hub makes every change itself.
    fn subscriptions_version(&self) -> StoreFuture<'_, u64> {
        Box::pin(async { Ok(0) })
    }

    /// Tells `listener` of changes made through this store by other hubs (and possibly by
    /// this one), as soon as the backend learns of them, so that a hub reacts at once
    /// instead of at its next poll. Best effort: the polls stay the safety net. A backend
    /// only one hub writes has nothing to tell.
    fn watch(&self, listener: ChangeListener) {
        let _ = listener;
    }
}

/// The operations the hub needs from its durable state: every part, and the store's own
/// health.
pub trait Store: Records + EventLog + DeliveryQueue + AuditLog + Cluster + 'static {
    /// Whether the store can take writes now (for readiness checks); the error says why not.
    fn check(&self) -> StoreFuture<'_, ()>;

    /// How much disk the store takes, as far as the backend can tell.
    fn disk_usage(&self) -> StoreFuture<'_, DiskUsage>;

    /// Writes a consistent copy of the store, with `beside` (files the hub keeps next to
    /// it, by name), to `out` while the hub goes on serving. Blocking: call it off the
    /// async runtime. A backend whose data lives elsewhere (PostgreSQL: `pg_dump`) answers
    /// [`StoreError::Unsupported`], saying so.
    fn backup(
        &self,
        out: &mut dyn std::io::Write,
        beside: &[(String, Vec<u8>)],
    ) -> Result<BackupSummary, StoreError> {
        let _ = (out, beside);
        Err(StoreError::Unsupported(
            "this store is not backed up by the hub".into(),
        ))
    }
}

/// What tests and tools look at in a store, beside what the hub runs on ([`Store`]): the
/// workers never list a queue, they lease from it.
pub trait Inspect: Store {
    /// The first `limit` pending deliveries of a subscription, in acceptance order.
    fn pending_deliveries<'a>(
        &'a self,
        subscription: &'a str,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Delivery>>;
}
