//! The delivery workers: one task per active subscription leases due deliveries from the
//! store, sends them, and records every result durably before it takes the next.
//!
//! Ordered subscriptions have one delivery in flight, oldest first, so a failing event holds
//! back only its own subscription; unordered ones up to `max_in_flight`. Each subscription
//! has its own task and its own limits, so a slow or failing sink never slows another.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use http::HeaderValue;
use knooppunt_store::{Store, Subscription, SubscriptionState};
use tokio::sync::{Notify, mpsc, watch};

use crate::breaker::SinkHealth;
use crate::push::supervise;
use crate::share::{SAY_ALIVE_EVERY, SILENT_FOR, Share};
use crate::sink::Handshake;
use crate::sink::address::AddressRefused;
use crate::sink::connections::Connections;
use crate::state::{DeliveryOptions, Gone, Inner, LastDelivery, Observer, Worker};
use crate::supervise::Heartbeat;
use crate::supervise::WorkerHealth;

/// The running delivery workers; cheap to clone.
#[derive(Clone)]
pub struct Deliverer {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Deliverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliverer").finish_non_exhaustive()
    }
}

pub use knooppunt_store::now_ms;

impl Deliverer {
    /// Starts with no workers; [`Deliverer::sync`] each subscription to start its worker.
    /// The receiver yields every [`Gone`]: a sink that answered 410, whose worker stopped.
    pub fn new(
        store: Arc<dyn Store>,
        options: DeliveryOptions,
        observer: Arc<dyn Observer>,
    ) -> Result<(Deliverer, mpsc::UnboundedReceiver<Gone>), String> {
        let origin = HeaderValue::try_from(options.origin.as_str()).map_err(|_| {
            format!(
                "the origin `{}` is not a valid header value",
                options.origin
            )
        })?;
        let connections = Connections::new(
            options.connections,
            &options.extra_root_certificates,
            options.sink_networks.clone(),
        )?;
        let (gone, gone_reports) = mpsc::unbounded_channel();
        let hub = format!(
            "{}/{}/{:08x}",
            options.origin,
            std::process::id(),
            fastrand::u32(..)
        );
        let deliverer = Deliverer {
            inner: Arc::new(Inner::new(
                store,
                connections,
                origin,
                options,
                observer,
                gone,
                hub,
            )),
        };
        Ok((deliverer, gone_reports))
    }

    /// Joins the hubs sharing the store: says this hub is alive, takes its share of every
    /// subscription's slots and granted rate (before any worker sends), and keeps saying it
    /// until [`Deliverer::shutdown`] (see `share.rs`). Without it a hub takes all of
    /// them, as the only one.
    pub async fn share_work(&self) {
        say_alive(&self.inner).await;
        hear_pauses(&self.inner).await;
        tokio::spawn(keep_saying_alive(Arc::clone(&self.inner)));
    }

    /// A sink (by scheme, host and port) asked a hub sharing the store to send nothing
    /// before `until_ms`: this hub keeps to it too.
    pub fn sink_paused(&self, sink: &str, until_ms: u64) {
        self.inner.pause_told(sink, until_ms);
    }

    /// How many hubs share the deliveries, as this hub last heard.
    pub fn hubs(&self) -> usize {
        self.inner.share().borrow().hubs
    }

    pub fn options(&self) -> &DeliveryOptions {
        self.inner.options()
    }

    /// Starts, restarts or stops the worker of a subscription after it was created, changed
    /// or loaded: only active push subscriptions have one (a pull subscription's consumers
    /// call [`Deliverer::receive`]).
    pub fn sync(&self, subscription: &Arc<Subscription>) {
        if subscription.state() != SubscriptionState::Active || self.inner.is_stopping() {
            self.remove(&subscription.id);
            return;
        }
        if subscription.is_pull() {
            if let Some(worker) = self.inner.workers().remove(&subscription.id) {
                let _ = worker.retire.send(true);
            }
            self.watch(&subscription.id).notify_waiters();
            return;
        }
        let mut workers = self.inner.workers();
        if let Some(worker) = workers.get(&subscription.id)
            && !worker.task.is_finished()
        {
            worker.current.send_replace(Arc::clone(subscription));
            worker.wake.notify_one();
            return;
        }
        let wake = Arc::new(Notify::new());
        let recall = Arc::new(AtomicBool::new(false));
        let (current, watched) = watch::channel(Arc::clone(subscription));
        let (retire, retired) = watch::channel(false);
        let heartbeat = Arc::new(Heartbeat::default());
        let task = tokio::spawn(supervise(
            Arc::clone(&self.inner),
            watched,
            retired,
            Arc::clone(&wake),
            Arc::clone(&recall),
            Arc::clone(&heartbeat),
        ));
        workers.insert(
            subscription.id.clone(),
            Worker {
                wake,
                recall,
                current,
                retire,
                task,
                heartbeat,
            },
        );
    }

    /// Replaces a subscription's worker with a new one: the old one (stopped by a 410 from a
    /// sink the subscription no longer has) finishes its attempts, the new one delivers.
    pub fn restart(&self, subscription: &Arc<Subscription>) {
        self.remove(&subscription.id);
        self.sync(subscription);
    }

    /// Stops a subscription's worker (deleted, disabled or pending): it takes nothing more,
    /// and the attempts in flight finish and record their results.
    pub fn remove(&self, id: &str) {
        self.inner.forget_readers_of(id);
        if let Some(worker) = self.inner.workers().remove(id) {
            let _ = worker.retire.send(true);
        }
    }

    /// Tells the workers of these subscriptions that deliveries were queued.
    pub fn wake<'a>(&self, ids: impl IntoIterator<Item = &'a String>) {
        self.inner.wake(ids);
    }

    /// Deliveries of this subscription were withdrawn (shed into dead letters, or an
    /// approval revoked): its worker gives back the deliveries it leased ahead and has not
    /// sent, and leases again, so that it sends none of the withdrawn from there. An
    /// attempt already sending cannot be called back. Other hubs sharing the store hear of
    /// it from the store ([`knooppunt_store::StoreChange::Withdrawn`]).
    pub fn recall(&self, id: &str) {
        if let Some(worker) = self.inner.workers().get(id) {
            worker.recall();
        }
    }

    /// Cuts subscription `id`'s deliveries taken so far: once this returns, none of them
    /// starts an attempt (pushed) or is handed to a consumer (pulled); the ones that started
    /// before may still finish. What its worker leased ahead is given back. Returns the
    /// moment of the cut (milliseconds since the Unix epoch): after it, only what is leased
    /// from now on is sent. Whoever takes a right away withdraws what may no longer be sent
    /// first, then cuts, so that nothing leased afterwards is among it.
    pub async fn cut(&self, id: &str) -> u64 {
        let cut = self.inner.cut_of(id);
        let _turn = cut.turn.lock().await;
        cut.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        cut.gate.wait_for_earlier_passes().await;
        let at = now_ms();
        self.recall(id);
        at
    }

    /// The publishes of the events accepted here recently, which their attempts' spans
    /// continue ([`crate::trace`]).
    pub fn traces(&self) -> &crate::trace::Links {
        self.inner.traces()
    }

    /// This hub's id among the hubs sharing the store.
    pub fn hub_id(&self) -> &str {
        self.inner.hub()
    }

    /// How many cuts subscription `id` had: read it before checking that work may begin,
    /// and [`Deliverer::receive`] refuses to hand out anything once another came.
    pub fn cuts_of(&self, id: &str) -> u64 {
        self.inner
            .cut_of(id)
            .generation
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// [`Deliverer::recall`] for every subscription.
    pub fn recall_all(&self) {
        for worker in self.inner.workers().values() {
            worker.recall();
        }
    }

    /// Tells every worker (and every waiting pull consumer) to look for due deliveries.
    pub fn wake_all(&self) {
        let workers = self.inner.workers();
        for worker in workers.values() {
            worker.wake.notify_one();
        }
        self.inner.wake_all_readers();
    }

    /// The hub is closing: every reader waiting for events (a pull `receive`, a stream) is
    /// answered now with what there is, and later ones do not wait. The workers go on until
    /// [`Deliverer::shutdown`].
    pub fn release_waiting(&self) {
        self.inner.close();
    }

    /// True once [`Deliverer::release_waiting`] was called: readers should not wait.
    pub fn closing(&self) -> watch::Receiver<bool> {
        self.inner.closing()
    }

    /// Whether the workers run (they stop only at shutdown).
    pub fn is_running(&self) -> bool {
        !self.inner.is_stopping()
    }

    pub fn last_delivery(&self, id: &str) -> Option<LastDelivery> {
        self.inner.last_delivery(id)
    }

    /// A subscription's latest attempts on this hub since it started, newest first (at most
    /// [`RECENT_ATTEMPTS`]).
    pub fn recent_attempts(&self, id: &str) -> Vec<LastDelivery> {
        self.inner.recent_attempts(id)
    }

    /// Sends a test event to a subscription's sink once, as its deliveries go, and tells
    /// how the sink answered (not queued, not retried; kept among its recent attempts).
    pub async fn send_test(
        &self,
        subscription: &Subscription,
        event: knooppunt_store::StoredEvent,
    ) -> LastDelivery {
        crate::push::send_test(&self.inner, subscription, event).await
    }

    /// The breaker of the sink of `url`, as this hub sees it.
    pub fn sink_health(&self, url: &str) -> SinkHealth {
        self.inner.connections().health_of(url)
    }

    /// Every sink (scheme, host and port) this hub delivers to, with whether its breaker
    /// is open, in order.
    pub fn breakers(&self) -> Vec<(String, bool)> {
        self.inner.connections().breakers()
    }

    /// The sinks (scheme, host and port) whose breaker is open on this hub.
    pub fn open_sinks(&self) -> Vec<String> {
        self.inner.connections().open_sinks()
    }

    /// `content` signed with the hub's current Ed25519 key: its `kid` and the signature;
    /// `None` when the hub has no key.
    pub fn sign_with_hub_key(&self, content: &[u8]) -> Option<(String, Vec<u8>)> {
        self.inner.options().hub_keys.sign_current(content)
    }

    /// The hub's public keys for `v1a` signatures that sign now, the current one first.
    pub fn public_keys(&self) -> Vec<crate::sink::http::signing::PublicKey> {
        self.inner
            .options()
            .hub_keys
            .public(std::time::SystemTime::now())
    }

    /// How the workers fare: panics caught, restarts, and the workers stuck now (a worker
    /// whose task ended although it was not stopped counts as stuck too).
    pub fn health(&self) -> WorkerHealth {
        let now = now_ms();
        let mut stuck: Vec<String> = self
            .inner
            .workers()
            .iter()
            .filter(|(_, worker)| worker.task.is_finished() || worker.heartbeat.stuck(now))
            .map(|(id, _)| id.clone())
            .collect();
        stuck.sort();
        let supervision = &self.inner.supervision();
        WorkerHealth {
            attempt_panics: supervision
                .attempt_panics
                .load(std::sync::atomic::Ordering::Relaxed),
            worker_restarts: supervision
                .worker_restarts
                .load(std::sync::atomic::Ordering::Relaxed),
            stuck,
            hubs: self.hubs(),
        }
    }

    /// Checks a sink's address when a subscription is registered (connections are checked
    /// again, every time).
    pub async fn check_sink_address(&self, sink: &str) -> Result<(), AddressRefused> {
        self.inner.options().sink_networks.check_address(sink).await
    }

    /// Asks a subscription's sink for its consent: the validation handshake of an HTTP sink
    /// (presenting the subscription's client certificate, if it has one), a connection with
    /// the subscription's credentials to a broker.
    pub async fn handshake(
        &self,
        subscription: &knooppunt_store::Subscription,
        callback: &str,
    ) -> Handshake {
        self.inner
            .sinks()
            .consent(
                subscription,
                callback,
                self.inner.options().handshake_timeout,
            )
            .await
    }

    /// POSTs `body` (JSON) with `headers` to `url` once, through the same guards as
    /// deliveries (the SSRF guard, the connection limits), within the handshake timeout:
    /// the status the receiver answered, or why there was none. For checks a protocol makes
    /// before a subscription starts (a ZGW abonnement's test notificatie).
    pub async fn probe(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<u16, String> {
        let within = self.inner.options().handshake_timeout;
        self.inner
            .sinks()
            .http()
            .probe(url, headers, body, within)
            .await
    }

    /// Stops taking new deliveries and waits up to `grace` for the attempts in flight (their
    /// results are recorded); what is still running then is abandoned and retried after the
    /// next start.
    pub async fn shutdown(&self, grace: Duration) {
        self.inner.stop();
        self.inner.close();
        let workers: Vec<Worker> = self
            .inner
            .workers()
            .drain()
            .map(|(_, worker)| worker)
            .collect();
        let deadline = tokio::time::Instant::now() + grace;
        for worker in workers {
            let abort = worker.task.abort_handle();
            if tokio::time::timeout_at(deadline, worker.task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        // The others take this hub's share at once, not after its silence.
        if let Err(error) = self.inner.cluster().hub_leaves(self.inner.hub()).await {
            tracing::warn!(%error, "Telling the store this hub stops failed.");
        }
    }
}

/// Says this hub is alive and updates its share.
pub(crate) async fn say_alive(inner: &Inner) {
    let alive_ms = SILENT_FOR.as_millis() as u64;
    match inner.cluster().hubs_alive(inner.hub(), alive_ms).await {
        Ok(alive) => {
            let share = Share::of(&alive, inner.hub());
            if inner.take_share(share) {
                tracing::info!(
                    hubs = share.hubs,
                    rank = share.rank,
                    "The hubs sharing the deliveries changed."
                );
            }
        }
        // The share stays as it was; the others forget this hub if it stays silent.
        Err(error) => tracing::warn!(%error, "Saying this hub is alive to the store failed."),
    }
}

/// Keeps to the pauses sinks asked the other hubs for (missed notices included).
pub(crate) async fn hear_pauses(inner: &Inner) {
    match inner.cluster().sinks_paused(now_ms()).await {
        Ok(paused) => {
            for (sink, until_ms) in paused {
                inner.pause_told(&sink, until_ms);
            }
        }
        Err(error) => tracing::warn!(%error, "Reading the sinks' pauses from the store failed."),
    }
}

/// Says this hub is alive every [`SAY_ALIVE_EVERY`] until the hub stops.
pub(crate) async fn keep_saying_alive(inner: Arc<Inner>) {
    let mut stop = inner.stopping();
    loop {
        tokio::select! {
            () = tokio::time::sleep(SAY_ALIVE_EVERY) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        say_alive(&inner).await;
        hear_pauses(&inner).await;
    }
}
