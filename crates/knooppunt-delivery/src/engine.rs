//! The delivery workers: one task per active subscription leases due deliveries from the
//! store, sends them, and records every result durably before it takes the next.
//!
//! Ordered subscriptions have one delivery in flight, oldest first, so a failing event holds
//! back only its own subscription; unordered ones up to `max_in_flight`. Each subscription
//! has its own task and its own limits, so a slow or failing sink never slows another.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::HeaderValue;
use knooppunt_store::{
    Attempt, Delivery, DeliveryChange, DeliveryConfig, Ordering, Store, Subscription,
    SubscriptionState, Verdict,
};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::outcome::{Outcome, Response, classify, verdict};
use crate::sink::{self, Handshake};

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
}

impl Default for DeliveryOptions {
    fn default() -> Self {
        DeliveryOptions {
            origin: "knooppunt".into(),
            max_in_flight: 16,
            idle_poll: Duration::from_secs(1),
            request_rate: 600,
            handshake_timeout: Duration::from_secs(10),
        }
    }
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
}

/// The running delivery workers; cheap to clone.
#[derive(Clone)]
pub struct Deliverer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Deliverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deliverer").finish_non_exhaustive()
    }
}

struct Inner {
    store: Arc<dyn Store>,
    client: reqwest::Client,
    origin: HeaderValue,
    options: DeliveryOptions,
    workers: Mutex<HashMap<String, Worker>>,
    last: Mutex<HashMap<String, LastDelivery>>,
    /// Subscriptions the workers disabled (their sink answered 410), for the API's registry.
    retired: mpsc::UnboundedSender<Subscription>,
    stop: watch::Sender<bool>,
}

struct Worker {
    wake: Arc<Notify>,
    /// The subscription as it is now: a change reaches the worker without a restart, so
    /// attempts in flight are never abandoned by an update.
    current: watch::Sender<Arc<Subscription>>,
    /// Tells this worker alone to stop taking deliveries.
    retire: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Deliverer {
    /// Starts with no workers; [`Deliverer::sync`] each subscription to start its worker.
    /// The receiver yields every subscription a worker disabled after a 410.
    pub fn new(
        store: Arc<dyn Store>,
        options: DeliveryOptions,
    ) -> Result<(Deliverer, mpsc::UnboundedReceiver<Subscription>), String> {
        let origin = HeaderValue::try_from(options.origin.as_str()).map_err(|_| {
            format!(
                "the origin `{}` is not a valid header value",
                options.origin
            )
        })?;
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| format!("cannot build the HTTP client: {error}"))?;
        let (retired, retirements) = mpsc::unbounded_channel();
        let (stop, _) = watch::channel(false);
        let deliverer = Deliverer {
            inner: Arc::new(Inner {
                store,
                client,
                origin,
                options,
                workers: Mutex::new(HashMap::new()),
                last: Mutex::new(HashMap::new()),
                retired,
                stop,
            }),
        };
        Ok((deliverer, retirements))
    }

    pub fn options(&self) -> &DeliveryOptions {
        &self.inner.options
    }

    /// Starts, restarts or stops the worker of a subscription after it was created, changed
    /// or loaded: only active subscriptions have one.
    pub fn sync(&self, subscription: &Subscription) {
        if subscription.state != SubscriptionState::Active || *self.inner.stop.borrow() {
            self.remove(&subscription.id);
            return;
        }
        let mut workers = self.inner.workers.lock().expect("workers lock");
        if let Some(worker) = workers.get(&subscription.id)
            && !worker.task.is_finished()
        {
            worker.current.send_replace(Arc::new(subscription.clone()));
            worker.wake.notify_one();
            return;
        }
        let wake = Arc::new(Notify::new());
        let (current, watched) = watch::channel(Arc::new(subscription.clone()));
        let (retire, retired) = watch::channel(false);
        let task = tokio::spawn(run(
            Arc::clone(&self.inner),
            watched,
            retired,
            Arc::clone(&wake),
        ));
        workers.insert(
            subscription.id.clone(),
            Worker {
                wake,
                current,
                retire,
                task,
            },
        );
    }

    /// Stops a subscription's worker (deleted, disabled or pending): it takes nothing more,
    /// and the attempts in flight finish and record their results.
    pub fn remove(&self, id: &str) {
        if let Some(worker) = self.inner.workers.lock().expect("workers lock").remove(id) {
            let _ = worker.retire.send(true);
        }
    }

    /// Tells the workers of these subscriptions that deliveries were queued.
    pub fn wake<'a>(&self, ids: impl IntoIterator<Item = &'a String>) {
        let workers = self.inner.workers.lock().expect("workers lock");
        for id in ids {
            if let Some(worker) = workers.get(id) {
                worker.wake.notify_one();
            }
        }
    }

    pub fn last_delivery(&self, id: &str) -> Option<LastDelivery> {
        self.inner.last.lock().expect("last lock").get(id).cloned()
    }

    /// Sends the validation handshake for a subscription.
    pub async fn handshake(&self, sink: &str, callback: &str) -> Handshake {
        sink::handshake(
            &self.inner.client,
            sink,
            &self.inner.options.origin,
            self.inner.options.request_rate,
            callback,
            self.inner.options.handshake_timeout,
        )
        .await
    }

    /// Stops taking new deliveries and waits up to `grace` for the attempts in flight (their
    /// results are recorded); what is still running then is abandoned and retried after the
    /// next start.
    pub async fn shutdown(&self, grace: Duration) {
        let _ = self.inner.stop.send(true);
        let workers: Vec<Worker> = self
            .inner
            .workers
            .lock()
            .expect("workers lock")
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
    }
}

/// What a worker derives from its subscription.
struct Settings {
    subscription: Arc<Subscription>,
    config: DeliveryConfig,
    ordered: bool,
    limit: usize,
    lease_ms: u64,
    spacing: Option<Duration>,
}

impl Settings {
    fn of(subscription: Arc<Subscription>, max_in_flight: usize) -> Settings {
        let config = subscription.delivery_config();
        let ordered = config.ordering == Ordering::Ordered;
        Settings {
            config,
            ordered,
            limit: if ordered { 1 } else { max_in_flight.max(1) },
            // Long enough for the attempt and recording its result.
            lease_ms: (config.timeout + Duration::from_secs(30)).as_millis() as u64,
            spacing: subscription
                .allowed_rate
                .filter(|rate| *rate > 0)
                .map(|rate| Duration::from_secs_f64(60.0 / f64::from(rate))),
            subscription,
        }
    }
}

/// A subscription's worker: lease, send, record, until stopped.
async fn run(
    inner: Arc<Inner>,
    mut current: watch::Receiver<Arc<Subscription>>,
    mut retired: watch::Receiver<bool>,
    wake: Arc<Notify>,
) {
    let max_in_flight = inner.options.max_in_flight;
    let mut settings = Settings::of(Arc::clone(&current.borrow_and_update()), max_in_flight);
    let mut attempts = JoinSet::new();
    let mut next_start = tokio::time::Instant::now();
    let mut stop = inner.stop.subscribe();
    // Set by an attempt that got 410 Gone: take nothing more.
    let gone = Arc::new(AtomicBool::new(false));
    let id = settings.subscription.id.clone();
    let id = id.as_str();
    loop {
        if *stop.borrow() || *retired.borrow() || gone.load(AtomicOrdering::SeqCst) {
            break;
        }
        if current.has_changed().unwrap_or(false) {
            settings = Settings::of(Arc::clone(&current.borrow_and_update()), max_in_flight);
        }
        let Settings {
            ref subscription,
            config,
            ordered,
            limit,
            lease_ms,
            spacing,
        } = settings;
        while attempts.try_join_next().is_some() {}
        let free = limit.saturating_sub(attempts.len());
        let leased = if free == 0 {
            Vec::new()
        } else {
            match inner
                .store
                .lease(id, now_ms(), lease_ms, free, ordered)
                .await
            {
                Ok(leased) => leased,
                Err(error) => {
                    tracing::warn!(subscription = id, %error, "Leasing deliveries failed.");
                    Vec::new()
                }
            }
        };
        if leased.is_empty() {
            let idle = inner.options.idle_poll;
            let wait = match inner.store.next_due(id, ordered).await {
                Ok(Some(due)) => Duration::from_millis(due.saturating_sub(now_ms())).min(idle),
                _ => idle,
            };
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => {}
                _ = retired.changed() => {}
                Some(_) = attempts.join_next(), if !attempts.is_empty() => {}
            }
            continue;
        }
        for delivery in leased {
            if let Some(spacing) = spacing {
                tokio::time::sleep_until(next_start).await;
                next_start = tokio::time::Instant::now() + spacing;
            }
            let (inner, subscription) = (Arc::clone(&inner), Arc::clone(subscription));
            let gone = Arc::clone(&gone);
            attempts.spawn(async move {
                attempt(&inner, &subscription, config, delivery, &gone).await;
            });
        }
    }
    // Stopping: let the attempts in flight finish and record their results.
    while attempts.join_next().await.is_some() {}
}

/// One attempt: send, classify, record.
async fn attempt(
    inner: &Arc<Inner>,
    subscription: &Subscription,
    config: DeliveryConfig,
    delivery: Delivery,
    gone: &AtomicBool,
) {
    let id = subscription.id.as_str();
    let event = match inner.store.event(delivery.seq).await {
        Ok(Some(event)) => event,
        Ok(None) => {
            tracing::error!(
                subscription = id,
                seq = delivery.seq,
                "A pending delivery's event is gone."
            );
            return;
        }
        Err(error) => {
            tracing::warn!(subscription = id, seq = delivery.seq, %error, "Reading an event failed; the delivery will be tried again.");
            return;
        }
    };
    let at = now_ms();
    let (response, outcome) = match sink::delivery_message(&event.json, config.mode) {
        Ok(message) => {
            let response = sink::deliver(
                &inner.client,
                subscription,
                &inner.origin,
                message,
                config.timeout,
            )
            .await;
            let outcome = classify(&response, SystemTime::now());
            (response, outcome)
        }
        Err(why) => (Response::Failed(why), Outcome::Rejected),
    };
    if outcome == Outcome::Gone {
        gone.store(true, AtomicOrdering::SeqCst);
    }
    let attempts = delivery.attempts + 1;
    let verdict = verdict(
        &outcome,
        &config,
        attempts,
        event.accepted_at,
        now_ms(),
        fastrand::f64(),
    );
    let (status, error) = match &response {
        Response::Status { code, .. } if (200..300).contains(code) => (Some(*code), None),
        Response::Status { code, .. } => (Some(*code), Some(format!("the sink answered {code}"))),
        Response::Timeout => (
            None,
            Some(format!(
                "no answer within {} ms",
                config.timeout.as_millis()
            )),
        ),
        Response::Failed(why) => (None, Some(why.clone())),
    };
    let label = match &verdict {
        Verdict::Delivered => "delivered",
        Verdict::Retry { .. } => "retry",
        Verdict::DeadLetter { .. } => "deadLetter",
    };
    tracing::debug!(
        subscription = id,
        seq = delivery.seq,
        attempts,
        status,
        outcome = label,
        "Delivery attempt."
    );
    let change = DeliveryChange::Attempted(Attempt {
        subscription: id.to_owned(),
        seq: delivery.seq,
        at,
        status,
        error: error.clone(),
        verdict,
    });
    if let Err(error) = inner.store.record(vec![change]).await {
        tracing::error!(subscription = id, seq = delivery.seq, %error, "Recording a delivery attempt failed; the delivery will be tried again.");
    }
    inner.last.lock().expect("last lock").insert(
        id.to_owned(),
        LastDelivery {
            at,
            seq: delivery.seq,
            status,
            error,
            outcome: label,
        },
    );
    if outcome == Outcome::Gone {
        // Not from inside the worker's own task set: retiring stops the worker.
        tokio::spawn(retire(Arc::clone(inner), id.to_owned()));
    }
}

/// The sink answered 410: disable the subscription and turn what is pending into dead
/// letters.
async fn retire(inner: Arc<Inner>, id: String) {
    if let Some(worker) = inner.workers.lock().expect("workers lock").remove(&id) {
        let _ = worker.retire.send(true);
    }
    let mut subscription = match inner.store.subscription(&id).await {
        Ok(Some(subscription)) => subscription,
        Ok(None) => return,
        Err(error) => {
            tracing::error!(subscription = %id, %error, "Disabling a subscription failed.");
            return;
        }
    };
    subscription.state = SubscriptionState::Disabled;
    subscription.updated_at = now_ms();
    let retire = DeliveryChange::Retire {
        subscription: id.clone(),
        at: now_ms(),
        reason: "the sink answered 410 Gone: the subscription is disabled".into(),
    };
    let stored = match inner.store.update_subscription(&subscription).await {
        Ok(_) => inner.store.record(vec![retire]).await,
        Err(error) => Err(error),
    };
    match stored {
        Ok(()) => {
            tracing::warn!(subscription = %id, sink = %subscription.sink, "The sink answered 410 Gone; the subscription is disabled and its pending deliveries are dead letters.");
            let _ = inner.retired.send(subscription);
        }
        Err(error) => {
            tracing::error!(subscription = %id, %error, "Disabling a subscription failed.");
        }
    }
}
