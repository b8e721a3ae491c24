//! What the delivery engine's parts share: its settings and what it reports
//! ([`DeliveryOptions`], [`Observer`], [`Gone`], [`LastDelivery`]), and the state the
//! engine, its workers and the hubs' sharing read and change ([`Inner`]: the store, the
//! connections, the workers, the cuts). The parts import it; it imports none of them.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::HeaderValue;
use knooppunt_store::{Cluster, DeliveryQueue, Store, Subscription, Verdict, now_ms};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

use crate::share::Share;
use crate::sink::address::SinkNetworks;
use crate::sink::connections::{ConnectionLimits, Connections};
use crate::supervise::{Heartbeat, Supervision};

/// Settings of the delivery workers.
#[derive(Debug, Clone)]
pub struct DeliveryOptions {
    /// The hub's name, sent as `WebHook-Request-Origin`.
    pub origin: String,
    /// Deliveries in flight at once per unordered subscription.
    pub max_in_flight: usize,
    /// How often an idle worker looks for due deliveries it was not told about.
    pub idle_poll: Duration,
    /// The rate the hub asks for in the handshake (`WebHook-Request-Rate`, per minute).
    pub request_rate: u32,
    /// How long the validation handshake may take.
    pub handshake_timeout: Duration,
    /// CA certificates (PEM) to trust for `https` sinks next to the operating system's, for
    /// sinks whose certificates come from a private or government CA; empty for none.
    pub extra_root_certificates: Vec<u8>,
    /// The bounds on outbound connections, and each sink's breaker.
    pub connections: ConnectionLimits,
    /// The longest `Retry-After` the hub honours as given; a longer one is shortened to it.
    pub max_retry_after: Duration,
    /// The reserved networks (loopback, private, ...) the hub may still deliver to.
    pub sink_networks: SinkNetworks,
    /// A lease on a delivery lasts twice the subscription's `timeout` (the wait for a
    /// connection, then the attempt) plus this, for recording the result. When a hub dies,
    /// another takes its leased deliveries over once their leases run out.
    pub lease_margin: Duration,
    /// The hub's Ed25519 keys for `v1a` signatures (none: `v1` only).
    pub hub_keys: crate::sink::http::signing::HubKeys,
    /// Whether a delivered event leaves a receipt (who received what, for the audit trail).
    pub receipts: bool,
}

impl Default for DeliveryOptions {
    fn default() -> Self {
        DeliveryOptions {
            origin: "knooppunt".into(),
            max_in_flight: 16,
            idle_poll: Duration::from_secs(1),
            request_rate: 600,
            handshake_timeout: Duration::from_secs(10),
            extra_root_certificates: Vec::new(),
            connections: ConnectionLimits::default(),
            max_retry_after: Duration::from_secs(24 * 60 * 60),
            sink_networks: SinkNetworks::default(),
            lease_margin: Duration::from_secs(30),
            hub_keys: crate::sink::http::signing::HubKeys::none(),
            receipts: true,
        }
    }
}

/// Told about every delivery attempt, for metrics.
pub trait Observer: Send + Sync + 'static {
    /// What the hub decided after an attempt to deliver to `subscription` (`verdict`:
    /// delivered, retry or dead letter); `status` the sink's HTTP status if it answered;
    /// `elapsed` how long the request took.
    fn attempt(
        &self,
        subscription: &str,
        verdict: &Verdict,
        status: Option<u16>,
        elapsed: Duration,
    );

    /// A delivery of subscription `subscription` became a dead letter, for `reason`.
    fn dead_lettered(&self, subscription: &str, reason: &str) {
        let _ = (subscription, reason);
    }

    /// An attempt of subscription `subscription` opened its sink's breaker, after
    /// `failures` failures in a row.
    fn breaker_opened(&self, subscription: &str, failures: u32) {
        let _ = (subscription, failures);
    }

    /// A push delivery of an event of `bytes` (its JSON) is finished, delivered or a dead
    /// letter, and its result is on disk: it left its subscription's backlog.
    fn finished(&self, bytes: u64) {
        let _ = bytes;
    }

    /// `count` events were handed to a pull consumer.
    fn received(&self, count: usize) {
        let _ = count;
    }

    /// A pull consumer settled `count` events: `acknowledged`, `released`, `rejected` or
    /// `renewed`; or the hub gave them up (`deadLetter`) when it would hand them out again.
    fn settled(&self, outcome: &'static str, count: usize) {
        let _ = (outcome, count);
    }
}

/// An observer that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unobserved;

impl Observer for Unobserved {
    fn attempt(&self, _: &str, _: &Verdict, _: Option<u16>, _: Duration) {}
}

/// A sink answered 410 Gone to a delivery of a subscription. The worker has stopped taking
/// deliveries; the broker decides the rest (the subscription may have a new sink by now).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gone {
    pub subscription: String,
    /// The sink that answered 410.
    pub sink: String,
}

/// What happened at a subscription's last delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastDelivery {
    /// Milliseconds since the Unix epoch.
    pub at: u64,
    /// The event's sequence number.
    pub seq: u64,
    pub status: Option<u16>,
    pub error: Option<String>,
    /// `delivered`, `retry` or `deadLetter`.
    pub outcome: &'static str,
    /// How long the request took (none for a pull consumer's acknowledgement).
    pub duration_ms: Option<u64>,
    /// What the sink said when it refused: kept for the newest such attempt of a
    /// subscription only (older attempts drop theirs), so that it costs at most one
    /// [`crate::outcome::SinkAnswer`] per subscription.
    pub answer: Option<Box<crate::outcome::SinkAnswer>>,
}

/// How many of a subscription's latest attempts each hub keeps in memory.
pub const RECENT_ATTEMPTS: usize = 50;

/// The state of the delivery engine that its parts share. Its fields are its own: the
/// parts read and change it through the methods below.
pub(crate) struct Inner {
    /// What delivery needs of the store: its queue (and the events it holds)...
    queue: Arc<dyn DeliveryQueue>,
    /// ...and the hubs sharing it.
    cluster: Arc<dyn Cluster>,
    connections: Arc<Connections>,
    /// Every protocol's sinks.
    sinks: crate::sink::Sinks,
    options: DeliveryOptions,
    workers: Mutex<HashMap<String, Worker>>,
    /// Per subscription, what readers waiting for its events wake up to (pull consumers,
    /// streams; [`Deliverer::watch`]).
    watchers: Mutex<HashMap<String, Arc<Notify>>>,
    /// Per subscription, its latest attempts, oldest first (at most [`RECENT_ATTEMPTS`]).
    last: Mutex<HashMap<String, std::collections::VecDeque<LastDelivery>>>,
    /// Sinks that answered 410, for the broker to act on.
    gone: mpsc::UnboundedSender<Gone>,
    observer: Arc<dyn Observer>,
    stop: watch::Sender<bool>,
    /// True once the hub is closing: readers waiting for events (long polls) are answered
    /// at once, so that a shutdown never waits for them.
    closing: watch::Sender<bool>,
    supervision: Supervision,
    /// This hub's id among the hubs sharing the store (see `share.rs`).
    hub: String,
    /// This hub's share of each subscription's slots and rate.
    share: watch::Sender<Share>,
    /// Per subscription, its cuts (made on first use, kept while the hub runs: one small
    /// record per subscription).
    cuts: Mutex<HashMap<String, Arc<crate::gate::Cut>>>,
    /// The publishes of recent events, for their attempts' traces.
    traces: crate::trace::Links,
}

pub(crate) struct Worker {
    pub(crate) wake: Arc<Notify>,
    /// Set when deliveries of the subscription were withdrawn: the worker gives back what
    /// it leased ahead ([`Deliverer::recall`]).
    pub(crate) recall: Arc<AtomicBool>,
    /// The subscription as it is now: a change reaches the worker without a restart, so
    /// attempts in flight are never abandoned by an update.
    pub(crate) current: watch::Sender<Arc<Subscription>>,
    /// Tells this worker alone to stop taking deliveries.
    pub(crate) retire: watch::Sender<bool>,
    pub(crate) task: JoinHandle<()>,
    pub(crate) heartbeat: Arc<Heartbeat>,
}

impl Worker {
    /// Has the worker give back what it leased ahead, at its next turn (now).
    pub(crate) fn recall(&self) {
        self.recall.store(true, std::sync::atomic::Ordering::SeqCst);
        self.wake.notify_one();
    }
}

impl Inner {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        connections: Connections,
        origin: HeaderValue,
        options: DeliveryOptions,
        observer: Arc<dyn Observer>,
        gone: mpsc::UnboundedSender<Gone>,
        hub: String,
    ) -> Inner {
        let connections = Arc::new(connections);
        let sinks = crate::sink::Sinks::new(
            &connections,
            (options.origin.clone(), origin),
            options.hub_keys.clone(),
            options.request_rate,
        );
        Inner {
            queue: Arc::clone(&store) as Arc<dyn DeliveryQueue>,
            cluster: store,
            connections,
            sinks,
            options,
            workers: Mutex::new(HashMap::new()),
            watchers: Mutex::new(HashMap::new()),
            last: Mutex::new(HashMap::new()),
            gone,
            observer,
            stop: watch::channel(false).0,
            closing: watch::channel(false).0,
            supervision: Supervision::default(),
            hub,
            share: watch::channel(Share::default()).0,
            cuts: Mutex::default(),
            traces: crate::trace::Links::default(),
        }
    }

    /// The store's delivery queue.
    pub(crate) fn queue(&self) -> &Arc<dyn DeliveryQueue> {
        &self.queue
    }

    /// The hubs sharing the store.
    pub(crate) fn cluster(&self) -> &Arc<dyn Cluster> {
        &self.cluster
    }

    pub(crate) fn connections(&self) -> &Connections {
        &self.connections
    }

    pub(crate) fn traces(&self) -> &crate::trace::Links {
        &self.traces
    }

    /// Every protocol's sinks.
    pub(crate) fn sinks(&self) -> &crate::sink::Sinks {
        &self.sinks
    }

    pub(crate) fn options(&self) -> &DeliveryOptions {
        &self.options
    }

    pub(crate) fn observer(&self) -> &dyn Observer {
        &*self.observer
    }

    pub(crate) fn supervision(&self) -> &Supervision {
        &self.supervision
    }

    /// This hub's id among the hubs sharing the store.
    pub(crate) fn hub(&self) -> &str {
        &self.hub
    }

    /// The workers, by subscription.
    pub(crate) fn workers(&self) -> std::sync::MutexGuard<'_, HashMap<String, Worker>> {
        self.workers.lock().expect("workers lock")
    }

    /// What readers waiting for subscription `id`'s events wake up to.
    pub(crate) fn watcher(&self, id: &str) -> Arc<Notify> {
        Arc::clone(
            self.watchers
                .lock()
                .expect("watchers lock")
                .entry(id.to_owned())
                .or_default(),
        )
    }

    /// Tells the workers of these subscriptions, and the readers waiting for their events,
    /// that deliveries were queued: each map locked once for them all (every publish calls
    /// this).
    pub(crate) fn wake<'a>(&self, ids: impl IntoIterator<Item = &'a String>) {
        let workers = self.workers();
        let watchers = self.watchers.lock().expect("watchers lock");
        for id in ids {
            if let Some(worker) = workers.get(id) {
                worker.wake.notify_one();
            }
            if let Some(wake) = watchers.get(id) {
                wake.notify_waiters();
            }
        }
    }

    /// Wakes every reader waiting for events.
    pub(crate) fn wake_all_readers(&self) {
        for wake in self.watchers.lock().expect("watchers lock").values() {
            wake.notify_waiters();
        }
    }

    /// Wakes the readers waiting for subscription `id`'s events and forgets their wake-up
    /// (the subscription's worker stops).
    pub(crate) fn forget_readers_of(&self, id: &str) {
        if let Some(wake) = self.watchers.lock().expect("watchers lock").remove(id) {
            wake.notify_waiters();
        }
    }

    /// The workers stop taking deliveries (at shutdown).
    pub(crate) fn stop(&self) {
        self.stop.send_replace(true);
    }

    pub(crate) fn is_stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// Changes to true when the workers are to stop.
    pub(crate) fn stopping(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// The hub is closing: readers waiting for events are answered now, later ones do not
    /// wait.
    pub(crate) fn close(&self) {
        self.closing.send_replace(true);
        self.wake_all_readers();
    }

    /// Changes to true when the hub is closing.
    pub(crate) fn closing(&self) -> watch::Receiver<bool> {
        self.closing.subscribe()
    }

    /// This hub's share of each subscription's slots and rate, as it changes.
    pub(crate) fn share(&self) -> watch::Receiver<Share> {
        self.share.subscribe()
    }

    /// Takes `share` as this hub's share; true if it changed.
    pub(crate) fn take_share(&self, share: Share) -> bool {
        self.share.send_if_modified(|current| {
            let changed = *current != share;
            *current = share;
            changed
        })
    }

    /// Tells the broker a sink answered 410.
    pub(crate) fn report_gone(&self, gone: Gone) {
        // The broker stopped listening only when the hub stops.
        let _ = self.gone.send(gone);
    }

    /// Keeps a subscription's last attempt for the API (a lock a panic poisoned still
    /// serves).
    pub(crate) fn remember_last(&self, id: &str, last: LastDelivery) {
        let mut all = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Found without allocating the key: this runs after every attempt.
        let Some(recent) = all.get_mut(id) else {
            all.insert(id.to_owned(), std::collections::VecDeque::from([last]));
            return;
        };
        if recent.len() == RECENT_ATTEMPTS {
            recent.pop_front();
        }
        // One sink answer per subscription: the newest.
        if last.answer.is_some() {
            for older in recent.iter_mut() {
                older.answer = None;
            }
        }
        recent.push_back(last);
    }

    /// Subscription `id`'s latest attempts on this hub, newest first.
    pub(crate) fn recent_attempts(&self, id: &str) -> Vec<LastDelivery> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .map(|recent| recent.iter().rev().cloned().collect())
            .unwrap_or_default()
    }

    /// Subscription `id`'s last attempt on this hub.
    pub(crate) fn last_delivery(&self, id: &str) -> Option<LastDelivery> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .and_then(|recent| recent.back().cloned())
    }

    /// Subscription `id`'s cuts.
    pub(crate) fn cut_of(&self, id: &str) -> Arc<crate::gate::Cut> {
        Arc::clone(
            self.cuts
                .lock()
                .expect("cuts lock")
                .entry(id.to_owned())
                .or_default(),
        )
    }

    /// A sink asked a hub for a pause until `until_ms` (told through the store).
    pub(crate) fn pause_told(&self, sink: &str, until_ms: u64) {
        let wait = Duration::from_millis(until_ms.saturating_sub(now_ms()));
        let wait = crate::outcome::honoured_wait(wait, self.options.max_retry_after);
        self.connections
            .pause_told(sink, tokio::time::Instant::now() + wait);
    }
}
