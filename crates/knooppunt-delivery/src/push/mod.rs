//! One subscription's worker: it leases due deliveries, sends each ([`attempt`]), and records
//! the result before the delivery can be leased again; a 410 stops the worker and is
//! reported to the broker ([`Gone`]).

mod attempt;
mod recording;
mod sending;

pub(crate) use attempt::send_test;
pub(crate) use sending::Sending;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering as AtomicOrdering};
use std::time::Duration;

use knooppunt_store::{Delivery, DeliveryConfig, Ordering, Status, Subscription};
use tokio::sync::{Notify, watch};

use crate::breaker::Gate;
use crate::outcome::{Outcome, Response};
use crate::share::Share;
use crate::state::{DeliveryOptions, Inner};
use crate::supervise::{CatchUnwind, Heartbeat};
use attempt::{Connection, attempt};
use knooppunt_store::now_ms;
use recording::{Attempted, InOrder, Recording};
use sending::{AHEAD_PER_SLOT, InFlight, ORDERED_WINDOW, RECORDING_PER_SLOT};

/// Runs a worker, and runs it again after a panic in its loop (a second later, unless the
/// hub stops or the worker is retired meanwhile): no panic leaves a subscription without
/// its worker.
pub(crate) async fn supervise(
    inner: Arc<Inner>,
    current: watch::Receiver<Arc<Subscription>>,
    retired: watch::Receiver<bool>,
    wake: Arc<Notify>,
    recall: Arc<AtomicBool>,
    heartbeat: Arc<Heartbeat>,
) {
    let id = current.borrow().id.clone();
    loop {
        let worker = run(
            Arc::clone(&inner),
            current.clone(),
            retired.clone(),
            Arc::clone(&wake),
            Arc::clone(&recall),
            Arc::clone(&heartbeat),
        );
        let Err(why) = CatchUnwind::new(worker).await else {
            return;
        };
        inner.supervision().worker_restarted();
        tracing::error!(subscription = %id, panic = %why, "A delivery worker failed; it starts again in a second.");
        let mut stop = inner.stopping();
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => return,
        }
        if *retired.borrow() || inner.is_stopping() {
            return;
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
    /// How many deliveries may be leased ahead of a free slot (see [`Ahead`]).
    ahead: usize,
    /// How many deliveries of an ordered subscription are leased at once, to be sent one
    /// after the other ([`in_order`]).
    window: usize,
}

impl Settings {
    /// With several hubs on one store, this hub's `share` of the subscription's slots and
    /// granted rate: the hubs together keep to them (see `share.rs`).
    fn of(subscription: Arc<Subscription>, options: &DeliveryOptions, share: Share) -> Settings {
        let max_in_flight = options.max_in_flight.max(1);
        let config = subscription.delivery_config();
        let ordered = config.ordering == Ordering::Ordered;
        // Each hub that sends paces itself at its part of the rate.
        let senders = share.senders(max_in_flight, ordered) as f64;
        let spacing = match &subscription.status {
            Status::Active(consent) => consent.allowed_rate,
            _ => None,
        }
        .filter(|rate| *rate > 0)
        .map(|rate| Duration::from_secs_f64(60.0 * senders / f64::from(rate)));
        // An ordered subscription has one delivery in flight across all hubs (the store's
        // ordered lease); an unordered one this hub's part of `max_in_flight`, maybe none.
        let limit = if ordered {
            1
        } else {
            share.slots(max_in_flight)
        };
        Settings {
            config,
            ordered,
            limit,
            // Long enough for the wait for a connection and the attempt (each at most the
            // timeout) and recording the result.
            // (A delivery leased ahead waits at most one more timeout for its slot.)
            lease_ms: (2 * config.timeout + options.lease_margin).as_millis() as u64,
            // Ordered subscriptions take one at a time, and a paced one has time enough.
            ahead: if ordered || spacing.is_some() {
                0
            } else {
                AHEAD_PER_SLOT * limit
            },
            // A paced one sends one at a time anyway.
            window: if ordered && spacing.is_none() {
                ORDERED_WINDOW
            } else {
                1
            },
            spacing,
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
    recall: Arc<AtomicBool>,
    heartbeat: Arc<Heartbeat>,
) {
    let mut share = inner.share();
    // The share the settings were made with (waiting for a new one marks it seen).
    let mut applied = *share.borrow_and_update();
    let mut settings = Settings::of(
        Arc::clone(&current.borrow_and_update()),
        inner.options(),
        applied,
    );
    let mut attempts = InFlight::default();
    // An ordered window's length: from one, twice the last while whole windows are sent.
    let next_window = Arc::new(AtomicUsize::new(1));
    let mut ahead = Ahead::default();
    let sending = Arc::new(Sending::default());
    let mut next_start = tokio::time::Instant::now();
    let mut stop = inner.stopping();
    // Set by an attempt that got 410 Gone: take nothing more.
    let gone = Arc::new(AtomicBool::new(false));
    let id = settings.subscription.id.clone();
    let id = id.as_str();
    let cut = inner.cut_of(id);
    loop {
        if *stop.borrow() || *retired.borrow() || gone.load(AtomicOrdering::SeqCst) {
            break;
        }
        // Read before anything is taken this turn: a cut after this point stops every
        // delivery taken below from starting (those leased ahead earlier too).
        let generation = cut.generation.load(AtomicOrdering::SeqCst);
        // A new share (hubs came or went) may leave this hub fewer slots: what it leased
        // ahead for more is given back below.
        let reshared = *share.borrow_and_update() != applied;
        if current.has_changed().unwrap_or(false) || reshared {
            applied = *share.borrow();
            settings = Settings::of(
                Arc::clone(&current.borrow_and_update()),
                inner.options(),
                applied,
            );
        }
        let Settings {
            ref subscription,
            config,
            ordered,
            limit,
            lease_ms,
            spacing,
            ahead: lease_ahead,
            window,
        } = settings;
        attempts.reap();
        let idle = inner.options().idle_poll;
        let spacing_ms = spacing.map_or(0, |s| s.as_millis() as u64);
        heartbeat.turned_at.store(now_ms(), AtomicOrdering::Relaxed);
        heartbeat
            .oldest_attempt_at
            .store(attempts.oldest().unwrap_or(0), AtomicOrdering::Relaxed);
        heartbeat.lease_ms.store(lease_ms, AtomicOrdering::Relaxed);
        heartbeat.turn_limit_ms.store(
            lease_ms + spacing_ms + 2 * idle.as_millis() as u64,
            AtomicOrdering::Relaxed,
        );
        // Slots not sending, as long as the attempts still recording stay bounded; an
        // ordered subscription's next window once the last one is sent and recorded.
        let free = if ordered {
            usize::from(attempts.is_empty())
        } else {
            limit
                .saturating_sub(sending.len())
                .min((RECORDING_PER_SLOT * limit).saturating_sub(attempts.len()))
        };
        // The sink's health decides how much may be taken: all that is free, one probe, or
        // nothing until a pause ends.
        let gate = if free == 0 {
            None
        } else {
            Some(inner.connections().gate(&subscription.sink))
        };
        let (take, probe, paused_until) = match gate {
            None => (0, false, None),
            Some(Gate::Open) => (free, false, None),
            Some(Gate::Probe) => (1, true, None),
            Some(Gate::Paused(until)) => (0, false, Some(until)),
        };
        // Leased ahead and not sent: given back when its sink's breaker pauses it, when
        // deliveries of the subscription were withdrawn (some of these may be among them),
        // or when it waited too long for a slot.
        // (An ordered window being sent reads the flag itself: it is left for it.)
        let window_out = ordered && !attempts.is_empty();
        let recalled = (!window_out && recall.swap(false, AtomicOrdering::SeqCst)) || reshared;
        let unused = if paused_until.is_some() || recalled {
            ahead.all()
        } else {
            ahead.older_than(config.timeout)
        };
        give_back(&inner, id, &unused).await;
        let mut leased = ahead.take(take);
        if leased.len() < take {
            // Short: lease what is missing, and (with every slot open) as many again for
            // the slots that free next.
            let more = match (ordered, probe) {
                (_, true) => take - leased.len(),
                (true, false) => window.min(next_window.load(AtomicOrdering::Relaxed)),
                (false, false) => take - leased.len() + lease_ahead,
            };
            match inner
                .queue()
                .lease(id, now_ms(), lease_ms, more, ordered)
                .await
            {
                Ok(mut fresh) if ordered => leased.append(&mut fresh),
                Ok(mut fresh) => {
                    let now = tokio::time::Instant::now();
                    let later = fresh.split_off(fresh.len().min(take - leased.len()));
                    leased.append(&mut fresh);
                    ahead.keep(later, now);
                }
                Err(error) => {
                    tracing::warn!(subscription = id, %error, "Leasing deliveries failed.");
                }
            }
        }
        if probe && leased.is_empty() {
            inner.connections().release_probe(&subscription.sink);
        }
        if leased.is_empty() {
            // With every slot busy, only a finished attempt (or a stop) can change anything.
            // A paused sink is looked at again at least every idle poll, so the loop turns.
            let wait = if let Some(until) = paused_until {
                until
                    .saturating_duration_since(tokio::time::Instant::now())
                    .min(idle)
            } else if free == 0 {
                idle
            } else {
                let due = inner.queue().next_due(id, ordered).await;
                if let Ok(due) = due {
                    let horizon = config.ttl.as_millis() as u64 + lease_ms;
                    heartbeat.idle_turn(now_ms(), due, horizon);
                }
                match due {
                    Ok(Some(due)) => Duration::from_millis(due.saturating_sub(now_ms())).min(idle),
                    _ => idle,
                }
            };
            tokio::select! {
                () = wake.notified() => {}
                // (An ordered window frees its slot after each of its attempts, but only
                // its end lets the next be leased.)
                () = sending.freed(), if !ordered => {}
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => {}
                _ = retired.changed() => {}
                _ = share.changed() => {}
                Some(()) = attempts.join_next(), if !attempts.is_empty() => {}
            }
            continue;
        }
        heartbeat.moved();
        if ordered {
            if let Some(spacing) = spacing {
                tokio::time::sleep_until(next_start).await;
                next_start = tokio::time::Instant::now() + spacing;
            }
            let run = InOrderRun {
                inner: Arc::clone(&inner),
                subscription: Arc::clone(subscription),
                config,
                gone: Arc::clone(&gone),
                cut: (Arc::clone(&cut), generation),
                probe,
                sending: Arc::clone(&sending),
                retired: retired.clone(),
                recall: Arc::clone(&recall),
                margin: inner.options().lease_margin,
                next_window: Arc::clone(&next_window),
            };
            attempts.spawn(in_order(run, leased));
            continue;
        }
        let mut leased = leased.into_iter();
        while let Some(delivery) = leased.next() {
            if let Some(spacing) = spacing {
                tokio::time::sleep_until(next_start).await;
                next_start = tokio::time::Instant::now() + spacing;
            }
            // The connection is waited for here, before the attempt's task exists: with
            // thousands of subscriptions due at once, only as many attempts as there are
            // connections hold a request in memory. The wait counts against the timeout.
            let Some((permit, started)) =
                connect(&inner, subscription, config, &mut stop, &mut retired).await
            else {
                // Given back as the worker stops, with the ones after it.
                let unsent = std::iter::once(delivery).chain(leased).collect();
                ahead.keep(unsent, tokio::time::Instant::now());
                break;
            };
            let connection = Connection {
                permit,
                started,
                probe,
                slot: sending.take(),
                cut: Some((Arc::clone(&cut), generation)),
            };
            let leased = delivery.clone();
            // The attempt (its request, the event, a few KiB) in a box of its own, freed once
            // its result is made: a fan-out leaves thousands of results waiting for the log
            // at once, and each task then holds only the result.
            let sending = {
                let (inner, subscription) = (Arc::clone(&inner), Arc::clone(subscription));
                let gone = Arc::clone(&gone);
                CatchUnwind::new(async move {
                    attempt(&inner, &subscription, config, delivery, &gone, connection).await
                })
            };
            let (inner, subscription) = (Arc::clone(&inner), Arc::clone(subscription));
            attempts.spawn(async move {
                let made = sending.await;
                let Some(recording) = judged(made, &inner, &subscription, config, leased, probe)
                else {
                    return;
                };
                if let Err(why) = CatchUnwind::new(recording.write(&inner)).await {
                    inner.supervision().attempt_panicked();
                    tracing::error!(subscription = %subscription.id, panic = %why, "Recording a delivery attempt failed inside the hub; its lease runs out and the delivery is made again.");
                }
            });
        }
    }
    // Stopping: what was leased and not sent is available again at once (after a restart
    // too), and the attempts in flight finish and record their results.
    give_back(&inner, id, &ahead.all()).await;
    while attempts.join_next().await.is_some() {}
}

/// What an ordered subscription's window is sent with.
struct InOrderRun {
    inner: Arc<Inner>,
    subscription: Arc<Subscription>,
    config: DeliveryConfig,
    gone: Arc<AtomicBool>,
    /// The subscription's cuts, and the generation its window was leased under.
    cut: (Arc<crate::gate::Cut>, u64),
    probe: bool,
    sending: Arc<Sending>,
    retired: watch::Receiver<bool>,
    recall: Arc<AtomicBool>,
    margin: Duration,
    /// How many the next window may take (see the end of [`in_order`]).
    next_window: Arc<AtomicUsize>,
}

/// Sends an ordered subscription's `window` (the oldest deliveries, in a row) one after the
/// other: the next as soon as the sink took the one before, while that one's result is
/// written ([`InOrder`]: in order, in groups). The first that is not done with (a retry, a
/// cut, a 410, a result that did not count) ends the window: the rest is given back
/// unsent, so that nothing is sent before an earlier event was delivered or given up. So
/// is the rest when the worker stops, the subscription's deliveries were withdrawn, or the
/// leases have too little time left for one more attempt and its result.
async fn in_order(run: InOrderRun, window: Vec<Delivery>) {
    let InOrderRun {
        inner,
        subscription,
        config,
        gone,
        cut,
        probe,
        sending,
        mut retired,
        recall,
        margin,
        next_window,
    } = run;
    let id = subscription.id.as_str();
    let mut results = InOrder::new(Arc::clone(&inner));
    let mut stop = inner.stopping();
    // Room for a connection's wait, an attempt and writing its result.
    let room = (2 * config.timeout + margin / 2).as_millis() as u64;
    let size = window.len();
    let mut window = window.into_iter();
    // What is given back unsent, once the window ended early.
    let mut unsent: Option<Vec<(u64, u64)>> = None;
    while let Some(delivery) = window.next() {
        let ended = *stop.borrow()
            || *retired.borrow()
            || gone.load(AtomicOrdering::SeqCst)
            || recall.load(AtomicOrdering::SeqCst)
            || results.failed();
        if ended || delivery.leased_until < now_ms() + room {
            unsent = Some(vec![(delivery.seq, delivery.lease)]);
            break;
        }
        let Some((permit, started)) =
            connect(&inner, &subscription, config, &mut stop, &mut retired).await
        else {
            unsent = Some(vec![(delivery.seq, delivery.lease)]);
            break;
        };
        let connection = Connection {
            permit,
            started,
            probe,
            slot: sending.take(),
            cut: Some((Arc::clone(&cut.0), cut.1)),
        };
        let leased = delivery.clone();
        let made = CatchUnwind::new(attempt(
            &inner,
            &subscription,
            config,
            delivery,
            &gone,
            connection,
        ))
        .await;
        // None: not attempted (a cut came first, or its event is gone): given back already.
        let Some(recording) = judged(made, &inner, &subscription, config, leased, probe) else {
            unsent = Some(Vec::new());
            break;
        };
        let done_with = recording.finishes();
        results
            .push(recording, !done_with || window.len() == 0)
            .await;
        if !done_with {
            unsent = Some(Vec::new());
            break;
        }
    }
    // A window sent whole: the next may be twice as long; one that ended early: the next
    // is one delivery (a failing sink costs a lease of one per attempt, not of a window).
    next_window.store(
        match &unsent {
            None => (2 * size).clamp(1, ORDERED_WINDOW),
            Some(_) => 1,
        },
        AtomicOrdering::Relaxed,
    );
    if let Some(mut unsent) = unsent {
        unsent.extend(window.map(|d| (d.seq, d.lease)));
        give_back(&inner, id, &unsent).await;
    }
    results.finish().await;
}

/// Gives leases that were not used back to the store (see [`Ahead`]).
pub(super) async fn give_back(inner: &Inner, id: &str, leases: &[(u64, u64)]) {
    if leases.is_empty() {
        return;
    }
    if let Err(error) = inner.queue().release(id, leases).await {
        // Their leases run out instead.
        tracing::warn!(subscription = id, %error, "Giving back unused leases failed.");
    }
}

/// Deliveries leased before a slot was free for them. Slots free one at a time, so without
/// them a busy worker leases once per delivery, and on PostgreSQL every lease is a
/// transaction; with them it leases once per up to [`AHEAD_PER_SLOT`] × `max_in_flight`
/// deliveries. Their leases cover
/// the wait: a lease is two timeouts long, the connection's wait and the attempt together
/// take at most one, and one waits at most a timeout for a slot (all slots are back within
/// that time unless the sink's breaker paused them). One that waited longer, or whose sink
/// is paused, or whose worker stops, or of a subscription some of whose deliveries were
/// withdrawn ([`crate::Deliverer::recall`]: it may be one of them), is given back unused
/// ([`DeliveryQueue::release`]): available again at once, no attempt counted; a withdrawn one is
/// gone, and stays gone.
///
/// [`DeliveryQueue::release`]: knooppunt_store::DeliveryQueue::release
#[derive(Debug, Default)]
struct Ahead {
    leased: std::collections::VecDeque<(Delivery, tokio::time::Instant)>,
}

impl Ahead {
    /// Up to `n` of the deliveries waiting, oldest first.
    fn take(&mut self, n: usize) -> Vec<Delivery> {
        let n = n.min(self.leased.len());
        self.leased
            .drain(..n)
            .map(|(delivery, _)| delivery)
            .collect()
    }

    /// Takes out the ones that waited longer than `longest`, as `(seq, lease)`.
    fn older_than(&mut self, longest: Duration) -> Vec<(u64, u64)> {
        let now = tokio::time::Instant::now();
        let waited = self
            .leased
            .iter()
            .take_while(|(_, at)| now.duration_since(*at) > longest)
            .count();
        self.leased
            .drain(..waited)
            .map(|(d, _)| (d.seq, d.lease))
            .collect()
    }

    /// Takes out all, as `(seq, lease)`.
    fn all(&mut self) -> Vec<(u64, u64)> {
        self.leased
            .drain(..)
            .map(|(d, _)| (d.seq, d.lease))
            .collect()
    }

    fn keep(&mut self, deliveries: Vec<Delivery>, at: tokio::time::Instant) {
        self.leased.extend(deliveries.into_iter().map(|d| (d, at)));
    }
}

/// Waits for a connection to the subscription's sink (the wait counts against the
/// attempt's timeout): the permit and when the wait began; `None` when the worker stops or
/// is retired first.
async fn connect(
    inner: &Inner,
    subscription: &Subscription,
    config: DeliveryConfig,
    stop: &mut watch::Receiver<bool>,
    retired: &mut watch::Receiver<bool>,
) -> Option<(
    Result<crate::sink::connections::Permit, String>,
    std::time::Instant,
)> {
    let started = std::time::Instant::now();
    tokio::select! {
        permit = inner.connections().acquire(&subscription.sink, config.timeout, subscription.client_certificate.as_ref()) => Some((permit, started)),
        _ = stop.changed() => None,
        _ = retired.changed() => None,
    }
}

/// The result of an attempt as it ended: its recording, or the dead letter of one that
/// panicked ([`panicked`]); `None` when it was not made.
fn judged(
    made: Result<Option<Recording>, String>,
    inner: &Inner,
    subscription: &Subscription,
    config: DeliveryConfig,
    leased: Delivery,
    probe: bool,
) -> Option<Recording> {
    match made {
        Ok(recording) => recording,
        Err(why) => Some(panicked(inner, subscription, config, leased, probe, why)),
    }
}

/// An attempt that panicked: recorded as its result, a dead letter saying what failed, so
/// that its lease does not hold the queue and the event is not tried into the same panic
/// again and again. The operator can redeliver it once the hub is fixed.
fn panicked(
    inner: &Inner,
    subscription: &Subscription,
    config: DeliveryConfig,
    delivery: Delivery,
    probe: bool,
    why: String,
) -> Recording {
    inner.supervision().attempt_panicked();
    if probe {
        inner.connections().release_probe(&subscription.sink);
    }
    tracing::error!(subscription = %subscription.id, seq = delivery.seq, panic = %why, "A delivery attempt failed inside the hub; the event is a dead letter.");
    let reason = format!(
        "the hub failed while delivering this event ({why}); it was made a dead letter so \
         that the subscription goes on: redeliver it once the hub is fixed"
    );
    // Recorded like any attempt that cannot be sent: a dead letter at once, with its reason.
    let attempt = Attempted {
        at: now_ms(),
        started: std::time::Instant::now(),
        delivery,
        accepted_at: 0,
        bytes: 0,
        trace_id: None,
    };
    let response = Response::Failed(reason.clone());
    let outcome = Outcome::Unsendable(reason);
    Recording::of(inner, subscription, &config, attempt, &response, &outcome)
}

#[cfg(test)]
pub(crate) mod tests {
    //! Faults injected into attempts (this thread's: `#[tokio::test]` runs every task on
    //! the test's own thread), to show that a panicking or hanging attempt never leaves a
    //! subscription stuck unseen.

    use knooppunt_store::DeliveryQueue;
    use knooppunt_store::EventLog;
    use knooppunt_store::Records;
    use std::cell::RefCell;
    use std::collections::{BTreeMap, HashMap};
    use std::sync::Arc;
    use std::time::Duration;

    use knooppunt_store::{ConfigDefaults, Inspect, SubscriptionConfig};
    use knooppunt_store_embedded::EmbeddedStore;

    use crate::{Deliverer, DeliveryOptions, SinkNetworks, Unobserved};

    #[derive(Debug, Clone, Copy)]
    pub(crate) enum Fault {
        Panic,
        Hang,
    }

    thread_local! {
        static FAULTS: RefCell<HashMap<u64, Fault>> = RefCell::new(HashMap::new());
    }

    /// Called at the start of every attempt in test builds.
    pub(crate) async fn inject_fault(seq: u64) {
        match FAULTS.with(|faults| faults.borrow().get(&seq).copied()) {
            Some(Fault::Panic) => panic!("injected fault at event {seq}"),
            Some(Fault::Hang) => std::future::pending::<()>().await,
            None => {}
        }
    }

    /// A deliverer on a fresh embedded store with subscription `s` (ordered, sink on a
    /// closed loopback port, attempts time out after a second) and two events for it.
    async fn deliverer(faults: &[(u64, Fault)]) -> (Deliverer, EmbeddedStore, tempfile::TempDir) {
        deliverer_of("ordered", 2, 16, faults).await
    }

    /// Like [`deliverer`], with this ordering, this many events and slots.
    async fn deliverer_of(
        ordering: &str,
        events: usize,
        max_in_flight: usize,
        faults: &[(u64, Fault)],
    ) -> (Deliverer, EmbeddedStore, tempfile::TempDir) {
        FAULTS.with(|map| map.borrow_mut().extend(faults.iter().copied()));
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let mut subscription = knooppunt_store_conformance::subscription("s");
        subscription.sink = knooppunt_store::Sink::parse("http://127.0.0.1:1/hook").unwrap();
        let config = BTreeMap::from([
            ("ordering".to_owned(), ordering.to_owned()),
            ("timeout".to_owned(), "PT1S".to_owned()),
        ]);
        subscription.config =
            SubscriptionConfig::parse(&config, &ConfigDefaults::default()).unwrap();
        store.insert_subscription(&subscription).await.unwrap();
        let events = (1..=events)
            .map(|n| knooppunt_store_conformance::event(&n.to_string(), &["s"]))
            .collect();
        store
            .append_events(events, crate::now_ms(), 0)
            .await
            .unwrap();
        let options = DeliveryOptions {
            idle_poll: Duration::from_millis(50),
            lease_margin: Duration::from_millis(200),
            sink_networks: SinkNetworks::parse(&["127.0.0.0/8".into()]).unwrap(),
            max_in_flight,
            ..DeliveryOptions::default()
        };
        let (deliverer, _gone) =
            Deliverer::new(Arc::new(store.clone()), options, Arc::new(Unobserved)).unwrap();
        deliverer.sync(&Arc::new(subscription));
        (deliverer, store, dir)
    }

    #[tokio::test]
    async fn a_panicking_attempt_is_a_dead_letter_and_the_queue_goes_on() {
        let (deliverer, store, _dir) = deliverer(&[(1, Fault::Panic)]).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let dead = store.dead_letters("s", None, 10).await.unwrap();
            let next = store.pending_deliveries("s", 1).await.unwrap();
            if dead.len() == 1 && next.first().is_some_and(|d| d.seq == 2 && d.attempts > 0) {
                let reason = &dead[0].reason;
                assert_eq!(dead[0].seq, 1);
                assert!(reason.contains("injected fault at event 1"), "{reason}");
                assert!(reason.contains("redeliver"), "{reason}");
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{dead:?} {next:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let health = deliverer.health();
        assert_eq!(health.attempt_panics, 1);
        assert!(health.stuck.is_empty(), "{health:?}");
        let last = deliverer.last_delivery("s").unwrap();
        assert!(last.seq >= 1);
        deliverer.shutdown(Duration::from_secs(1)).await;
    }

    #[tokio::test]
    async fn an_attempt_that_outlives_its_lease_shows_its_worker_stuck() {
        let (deliverer, _store, _dir) = deliverer(&[(1, Fault::Hang)]).await;
        // The lease: twice the one-second timeout plus 200 ms.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(deliverer.health().stuck.is_empty());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while deliverer.health().stuck.is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "never reported stuck"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(deliverer.health().stuck, ["s"]);
        deliverer.shutdown(Duration::from_millis(100)).await;
    }

    #[tokio::test]
    async fn a_queue_held_past_any_schedule_shows_its_worker_stuck() {
        // Something outside the worker holds the ordered queue's head for longer than any
        // retry could be scheduled (an event's ttl): the worker turns, but its queue does not
        // move, and that is seen once a lease (2.2 s) has passed.
        let (deliverer, store, _dir) = deliverer(&[]).await;
        deliverer.shutdown(Duration::from_millis(100)).await;
        let held = store
            .lease("s", crate::now_ms() + 86_400_000, 1 << 50, 1, true)
            .await
            .unwrap();
        assert_eq!(held.len(), 1);
        let (deliverer, _gone) = Deliverer::new(
            Arc::new(store.clone()),
            DeliveryOptions {
                idle_poll: Duration::from_millis(50),
                lease_margin: Duration::from_millis(200),
                ..DeliveryOptions::default()
            },
            Arc::new(Unobserved),
        )
        .unwrap();
        let subscription = store.subscriptions().await.unwrap().remove(0);
        deliverer.sync(&Arc::new(subscription));
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert!(deliverer.health().stuck.is_empty(), "not before a lease");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while deliverer.health().stuck.is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "a queue that does not move is never reported"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(deliverer.health().stuck, ["s"]);
        // Given back, it moves again, and the worker is no longer stuck.
        store
            .release("s", &[(held[0].seq, held[0].lease)])
            .await
            .unwrap();
        deliverer.wake_all();
        while !deliverer.health().stuck.is_empty() {
            assert!(tokio::time::Instant::now() < deadline, "still stuck");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        deliverer.shutdown(Duration::from_millis(100)).await;
    }

    #[tokio::test]
    async fn a_busy_worker_leases_ahead_and_gives_back_what_it_did_not_send() {
        // Both slots hang in the first two events; the next six (three per slot) are leased
        // ahead of a free slot, the last two are left for later.
        let faults = [(1, Fault::Hang), (2, Fault::Hang)];
        let (deliverer, store, _dir) = deliverer_of("unordered", 10, 2, &faults).await;
        let leased = |deliveries: &[knooppunt_store::Delivery]| {
            deliveries
                .iter()
                .filter(|d| d.lease != 0)
                .map(|d| d.seq)
                .collect::<Vec<_>>()
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let pending = store.pending_deliveries("s", 10).await.unwrap();
            if leased(&pending) == [1, 2, 3, 4, 5, 6, 7, 8] {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "{pending:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Stopping gives the six it did not send back unused: leasable at once, no
        // attempt counted; the hanging attempts keep theirs.
        deliverer.shutdown(Duration::from_millis(200)).await;
        let pending = store.pending_deliveries("s", 10).await.unwrap();
        assert_eq!(leased(&pending), [1, 2], "{pending:?}");
        let again = store
            .lease("s", crate::now_ms(), 1000, 10, false)
            .await
            .unwrap();
        assert_eq!(
            again
                .iter()
                .map(|d| (d.seq, d.attempts))
                .collect::<Vec<_>>(),
            (3..=10).map(|seq| (seq, 0)).collect::<Vec<_>>()
        );
    }
}
