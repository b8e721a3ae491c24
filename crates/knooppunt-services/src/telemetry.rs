//! The hub's metrics, named once here and rendered at `/metrics` in the Prometheus text
//! exposition format (version 0.0.4). Counters and histograms are atomics updated on the hot
//! paths; queue gauges are read from the store at scrape time. No metric carries event data.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use knooppunt_store::{QueueStats, SubscriptionState};

/// Counts of what happened to published events.
#[derive(Debug, Default)]
pub struct IngestCounters {
    /// Accepted and stored (duplicates excluded).
    pub accepted: AtomicU64,
    /// Accepted events that matched no subscription.
    pub unmatched: AtomicU64,
    /// Acknowledged again without routing.
    pub duplicates: AtomicU64,
    /// Deliveries created.
    pub deliveries: AtomicU64,
    /// Rejected events (invalid, too large, not allowed).
    pub rejected: AtomicU64,
}

impl IngestCounters {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Why a publish was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// Not a CloudEvent or against a MUST of the specifications or the profile.
    Invalid,
    TooLarge,
    UnsupportedMediaType,
    /// Outside the principal's source prefixes.
    Forbidden,
    /// The body could not be read.
    Unreadable,
    /// The hub's backlog limit or disk floor was reached ([`crate::backlog`]).
    BacklogFull,
}

impl Rejection {
    const ALL: [Rejection; 6] = [
        Rejection::Invalid,
        Rejection::TooLarge,
        Rejection::UnsupportedMediaType,
        Rejection::Forbidden,
        Rejection::Unreadable,
        Rejection::BacklogFull,
    ];

    fn label(self) -> &'static str {
        match self {
            Rejection::Invalid => "invalid",
            Rejection::TooLarge => "too_large",
            Rejection::UnsupportedMediaType => "unsupported_media_type",
            Rejection::Forbidden => "forbidden",
            Rejection::Unreadable => "unreadable",
            Rejection::BacklogFull => "backlog_full",
        }
    }
}

/// A Prometheus histogram with fixed bucket bounds.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Per bound, how many observations were at most it (not cumulative; summed at render).
    counts: Vec<AtomicU64>,
    count: AtomicU64,
    /// The sum, as `f64` bits.
    sum: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0f64.to_bits()),
        }
    }

    pub fn observe(&self, value: f64) {
        if let Some(bucket) = self.bounds.iter().position(|bound| value <= *bound) {
            self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, count) in self.bounds.iter().zip(&self.counts) {
            cumulative += count.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let sum = f64::from_bits(self.sum.load(Ordering::Relaxed));
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

const SECONDS: &[f64] = &[
    0.000_005, 0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.005, 0.01, 0.05,
    0.1, 0.5, 1.0, 5.0, 10.0, 30.0,
];
const MATCHES: &[f64] = &[0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1000.0];

/// Everything the hub counts besides [`IngestCounters`].
#[derive(Debug)]
pub struct Telemetry {
    rejected: [AtomicU64; Rejection::ALL.len()],
    /// Time to find the subscriptions of one event.
    pub routing_seconds: Histogram,
    /// Subscriptions matched per accepted event.
    pub matches: Histogram,
    /// Subscription → (outcome, status code or 0) → attempts.
    attempts: Mutex<BTreeMap<String, AttemptCounts>>,
    attempt_seconds: Histogram,
    /// Evaluations of a subscription's filters that ran out of budget.
    pub filter_over_budget: AtomicU64,
    /// Publishes whose routing moved to a blocking thread.
    pub routing_offloaded: AtomicU64,
    /// Dead letters removed by the retention sweep.
    pub dead_letters_expired: AtomicU64,
    /// Events handed to pull consumers.
    pulled: AtomicU64,
    /// Pull settlements by outcome.
    settled: Mutex<BTreeMap<&'static str, u64>>,
    /// Events delivered: pushed and answered 2xx, or acknowledged by a pull consumer.
    delivered: AtomicU64,
    /// Bytes of push deliveries finished (delivered or dead letters), for the backlog's
    /// estimate between measurements and `knooppunt_deliveries_finished_bytes_total`.
    pub finished_bytes: AtomicU64,
    /// Samples of (time, events accepted, events delivered), oldest first, over the last
    /// minute or so: the rates the console shows.
    samples: Mutex<std::collections::VecDeque<(u64, u64, u64)>>,
}

/// One subscription's attempts: (outcome, status code or 0) → how many.
type AttemptCounts = BTreeMap<(&'static str, u16), u64>;

/// How far back the rates look.
const RATE_WINDOW_MS: u64 = 60_000;

/// One per-subscription gauge's value from a queue's statistics at a time (ms).
type QueueValue = fn(&QueueStats, u64) -> String;

impl Telemetry {
    /// Takes a sample of the counters (every few seconds, by the hub's sampler).
    pub fn sample(&self, counters: &IngestCounters, now_ms: u64) {
        let mut samples = self.samples.lock().expect("samples lock");
        samples.push_back((
            now_ms,
            IngestCounters::get(&counters.accepted),
            self.delivered.load(Ordering::Relaxed),
        ));
        // One sample at or before the window's start stays, so the window is full.
        while samples.len() > 2 && samples[1].0 + RATE_WINDOW_MS <= now_ms {
            samples.pop_front();
        }
    }

    /// Events accepted and delivered per second over the last minute (since the oldest
    /// sample in it; zero before two samples were taken).
    pub fn rates(&self) -> (f64, f64) {
        let samples = self.samples.lock().expect("samples lock");
        match (samples.front(), samples.back()) {
            (Some(first), Some(last)) if last.0 > first.0 => {
                let seconds = (last.0 - first.0) as f64 / 1000.0;
                (
                    (last.1 - first.1) as f64 / seconds,
                    (last.2 - first.2) as f64 / seconds,
                )
            }
            _ => (0.0, 0.0),
        }
    }
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry {
            rejected: Default::default(),
            routing_seconds: Histogram::new(SECONDS),
            matches: Histogram::new(MATCHES),
            attempts: Mutex::new(BTreeMap::new()),
            attempt_seconds: Histogram::new(SECONDS),
            filter_over_budget: AtomicU64::new(0),
            dead_letters_expired: AtomicU64::new(0),
            routing_offloaded: AtomicU64::new(0),
            pulled: AtomicU64::new(0),
            settled: Mutex::new(BTreeMap::new()),
            delivered: AtomicU64::new(0),
            finished_bytes: AtomicU64::new(0),
            samples: Mutex::new(std::collections::VecDeque::new()),
        }
    }
}

impl Telemetry {
    pub fn rejected(&self, why: Rejection, events: usize) {
        let index = Rejection::ALL.iter().position(|r| *r == why).unwrap_or(0);
        self.rejected[index].fetch_add(events as u64, Ordering::Relaxed);
    }

    /// The exposition: the counters, and gauges from the queue statistics and subscription
    /// states given.
    pub fn render(
        &self,
        counters: &IngestCounters,
        queues: &[QueueStats],
        states: &BTreeMap<&'static str, u64>,
        owner_of: &dyn Fn(&str) -> Option<String>,
        now_ms: u64,
    ) -> String {
        let mut out = String::new();
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "# HELP knooppunt_events_total Published events by outcome (accepted, duplicate, rejected) and reason.\n\
             # TYPE knooppunt_events_total counter"
        );
        let accepted = get(&counters.accepted);
        let unmatched = get(&counters.unmatched);
        let _ = writeln!(
            out,
            "knooppunt_events_total{{outcome=\"accepted\",reason=\"matched\"}} {}",
            accepted - unmatched.min(accepted)
        );
        let _ = writeln!(
            out,
            "knooppunt_events_total{{outcome=\"accepted\",reason=\"unmatched\"}} {unmatched}"
        );
        let _ = writeln!(
            out,
            "knooppunt_events_total{{outcome=\"duplicate\",reason=\"duplicate\"}} {}",
            get(&counters.duplicates)
        );
        for (why, count) in Rejection::ALL.iter().zip(&self.rejected) {
            let _ = writeln!(
                out,
                "knooppunt_events_total{{outcome=\"rejected\",reason=\"{}\"}} {}",
                why.label(),
                get(count)
            );
        }
        let _ = writeln!(
            out,
            "# HELP knooppunt_deliveries_queued_total Deliveries created by routing accepted events.\n\
             # TYPE knooppunt_deliveries_queued_total counter\nknooppunt_deliveries_queued_total {}",
            get(&counters.deliveries)
        );
        let _ = writeln!(
            out,
            "# HELP knooppunt_deliveries_finished_bytes_total Bytes of the events of push deliveries finished (delivered or dead letters).\n\
             # TYPE knooppunt_deliveries_finished_bytes_total counter\nknooppunt_deliveries_finished_bytes_total {}",
            get(&self.finished_bytes)
        );
        self.routing_seconds.render(
            &mut out,
            "knooppunt_routing_seconds",
            "Time to find the subscriptions of one event: its filters evaluated on the request and on a routing thread (not the wait for one).",
        );
        self.matches.render(
            &mut out,
            "knooppunt_event_matches",
            "Subscriptions matched per accepted event.",
        );
        let _ = writeln!(
            out,
            "# HELP knooppunt_filter_over_budget_total Evaluations of a subscription's filters that ran out of their budget (the event was not routed to it; the subscription's filterBudget says when).\n\
             # TYPE knooppunt_filter_over_budget_total counter\nknooppunt_filter_over_budget_total {}",
            get(&self.filter_over_budget)
        );
        let _ = writeln!(
            out,
            "# HELP knooppunt_dead_letters_expired_total Dead letters removed because they were older than [backlog] dead_letter_retention.\n\
             # TYPE knooppunt_dead_letters_expired_total counter\nknooppunt_dead_letters_expired_total {}",
            get(&self.dead_letters_expired)
        );
        let _ = writeln!(
            out,
            "# HELP knooppunt_routing_offloaded_total Publishes whose filter evaluation cost enough to move to a blocking thread.\n\
             # TYPE knooppunt_routing_offloaded_total counter\nknooppunt_routing_offloaded_total {}",
            get(&self.routing_offloaded)
        );
        let _ = writeln!(
            out,
            "# HELP knooppunt_delivery_attempts_total Delivery attempts per subscription (with its owner) by outcome (delivered, retry, deadLetter) and the sink's status code (0: no answer).\n\
             # TYPE knooppunt_delivery_attempts_total counter"
        );
        {
            let mut attempts = self.attempts.lock().expect("attempts lock");
            // A deleted subscription's counts go with it (its series end).
            attempts.retain(|subscription, counts| {
                let Some(owner) = owner_of(subscription) else {
                    return false;
                };
                for ((outcome, status), count) in counts.iter() {
                    let _ = writeln!(
                        out,
                        "knooppunt_delivery_attempts_total{{subscription=\"{}\",owner=\"{}\",outcome=\"{outcome}\",status_code=\"{status}\"}} {count}",
                        label_value(subscription),
                        label_value(&owner)
                    );
                }
                true
            });
        }
        let _ = writeln!(
            out,
            "# HELP knooppunt_pull_received_total Events handed to pull consumers (each hand-over counts).\n\
             # TYPE knooppunt_pull_received_total counter\nknooppunt_pull_received_total {}",
            get(&self.pulled)
        );
        let _ = writeln!(
            out,
            "# HELP knooppunt_pull_settled_total Pulled events settled by their consumers (acknowledged, released, rejected, renewed) or given up by the hub (deadLetter).\n\
             # TYPE knooppunt_pull_settled_total counter"
        );
        for (outcome, count) in self.settled.lock().expect("settled lock").iter() {
            let _ = writeln!(
                out,
                "knooppunt_pull_settled_total{{outcome=\"{outcome}\"}} {count}"
            );
        }
        self.attempt_seconds.render(
            &mut out,
            "knooppunt_delivery_attempt_seconds",
            "Duration of one delivery attempt (the request to the sink).",
        );
        let gauge = |out: &mut String, name: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        };
        // One gauge per subscription for each of these, from its queue statistics.
        let per_queue: [(&str, &str, QueueValue); 5] = [
            (
                "knooppunt_queue_depth",
                "Pending deliveries per subscription.",
                |q, _| q.pending.to_string(),
            ),
            (
                "knooppunt_queue_backlog_bytes",
                "Undelivered bytes per subscription: its pending deliveries' events' sizes, summed.",
                |q, _| q.pending_bytes.to_string(),
            ),
            (
                "knooppunt_queue_oldest_pending_seconds",
                "Age of the oldest pending delivery's event per subscription (0 when none).",
                |q, now| {
                    let age = q
                        .oldest_accepted_at
                        .map_or(0.0, |at| now.saturating_sub(at) as f64 / 1000.0);
                    age.to_string()
                },
            ),
            (
                "knooppunt_queue_leased_deliveries",
                "Pending deliveries leased now per subscription: attempts in flight (push), or \
                 events locked by consumers (pull).",
                |q, _| q.leased.to_string(),
            ),
            (
                "knooppunt_dead_letters",
                "Dead letters kept per subscription.",
                |q, _| q.dead_letters.to_string(),
            ),
        ];
        // Each subscription's labels once: its id and its owner (which principal to call).
        let labels: Vec<String> = queues
            .iter()
            .map(|queue| {
                let owner = owner_of(&queue.subscription).unwrap_or_default();
                format!(
                    "subscription=\"{}\",owner=\"{}\"",
                    label_value(&queue.subscription),
                    label_value(&owner)
                )
            })
            .collect();
        for (name, help, value) in per_queue {
            gauge(&mut out, name, help);
            for (queue, labels) in queues.iter().zip(&labels) {
                let _ = writeln!(out, "{name}{{{labels}}} {}", value(queue, now_ms));
            }
        }
        gauge(
            &mut out,
            "knooppunt_subscriptions",
            "Subscriptions by state.",
        );
        for state in [
            SubscriptionState::Active,
            SubscriptionState::Pending,
            SubscriptionState::Disabled,
        ] {
            let _ = writeln!(
                out,
                "knooppunt_subscriptions{{state=\"{}\"}} {}",
                state.as_str(),
                states.get(state.as_str()).copied().unwrap_or(0)
            );
        }
        out
    }
}

/// Each sink's breaker on this hub: 1 while open (deliveries to it wait for a probe).
pub fn render_breakers(out: &mut String, breakers: &[(String, bool)]) {
    let _ = writeln!(
        out,
        "# HELP knooppunt_delivery_breaker_open Whether the breaker of a sink (scheme, host and port) is open on this hub: 1 while its deliveries wait for a probe to succeed.\n\
         # TYPE knooppunt_delivery_breaker_open gauge"
    );
    for (sink, open) in breakers {
        let _ = writeln!(
            out,
            "knooppunt_delivery_breaker_open{{sink=\"{}\"}} {}",
            label_value(sink),
            u8::from(*open)
        );
    }
}

/// The delivery workers' health: panics caught, restarts, workers stuck now.
pub fn render_worker_health(out: &mut String, health: &knooppunt_delivery::WorkerHealth) {
    let _ = writeln!(
        out,
        "# HELP knooppunt_delivery_attempt_panics_total Delivery attempts that failed inside the hub (each became a dead letter).\n\
         # TYPE knooppunt_delivery_attempt_panics_total counter\nknooppunt_delivery_attempt_panics_total {}\n\
         # HELP knooppunt_delivery_worker_restarts_total Delivery workers that failed and were started again.\n\
         # TYPE knooppunt_delivery_worker_restarts_total counter\nknooppunt_delivery_worker_restarts_total {}\n\
         # HELP knooppunt_delivery_workers_stuck Delivery workers stuck now (not turned, an attempt running, or a queue with deliveries due not moving, for longer than a lease).\n\
         # TYPE knooppunt_delivery_workers_stuck gauge\nknooppunt_delivery_workers_stuck {}\n\
         # HELP knooppunt_delivery_hubs Hubs sharing each subscription's slots and granted rate, this one included.\n\
         # TYPE knooppunt_delivery_hubs gauge\nknooppunt_delivery_hubs {}",
        health.attempt_panics,
        health.worker_restarts,
        health.stuck.len(),
        health.hubs
    );
}

impl knooppunt_delivery::Observer for Telemetry {
    fn attempt(
        &self,
        subscription: &str,
        verdict: &knooppunt_store::Verdict,
        status: Option<u16>,
        elapsed: Duration,
    ) {
        let outcome = verdict.name();
        if matches!(verdict, knooppunt_store::Verdict::Delivered) {
            self.delivered.fetch_add(1, Ordering::Relaxed);
        }
        let mut attempts = self.attempts.lock().expect("attempts lock");
        // Found by `&str`: a subscription's id is copied once, at its first attempt.
        let of_subscription = match attempts.get_mut(subscription) {
            Some(counts) => counts,
            None => attempts.entry(subscription.to_owned()).or_default(),
        };
        *of_subscription
            .entry((outcome, status.unwrap_or(0)))
            .or_default() += 1;
        drop(attempts);
        self.attempt_seconds.observe(elapsed.as_secs_f64());
    }

    fn finished(&self, bytes: u64) {
        self.finished_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn received(&self, count: usize) {
        self.pulled.fetch_add(count as u64, Ordering::Relaxed);
    }

    fn settled(&self, outcome: &'static str, count: usize) {
        if outcome == "acknowledged" {
            self.delivered.fetch_add(count as u64, Ordering::Relaxed);
        }
        *self
            .settled
            .lock()
            .expect("settled lock")
            .entry(outcome)
            .or_default() += count as u64;
    }
}

/// The release and the commit a hub was built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    /// The release (`version` in Cargo.toml).
    pub version: String,
    /// The commit (abbreviated), or `unknown`.
    pub commit: String,
}

impl Default for Build {
    /// This crate's release, of an unknown commit (the binary names its own).
    fn default() -> Self {
        Build {
            version: env!("CARGO_PKG_VERSION").into(),
            commit: "unknown".into(),
        }
    }
}

/// What the hub is: `knooppunt_build_info{version, commit} 1`.
pub fn render_build(out: &mut String, build: &Build) {
    let _ = writeln!(
        out,
        "# HELP knooppunt_build_info The hub's release and the commit it was built from.\n\
         # TYPE knooppunt_build_info gauge\nknooppunt_build_info{{version=\"{}\",commit=\"{}\"}} 1",
        label_value(&build.version),
        label_value(&build.commit)
    );
}

/// A label's value as the exposition format writes it: backslashes, quotes and line feeds
/// escaped.
fn label_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The store's disk use and the events' retention.
pub fn render_store(out: &mut String, usage: &knooppunt_store::DiskUsage, retention: Duration) {
    let _ = writeln!(
        out,
        "# HELP knooppunt_store_bytes Disk the store takes (PostgreSQL: the database).\n\
         # TYPE knooppunt_store_bytes gauge\nknooppunt_store_bytes {}\n\
         # HELP knooppunt_store_event_bytes Of which the retained events (streams and replays read them).\n\
         # TYPE knooppunt_store_event_bytes gauge\nknooppunt_store_event_bytes {}\n\
         # HELP knooppunt_event_retention_seconds How long events are kept after their deliveries finished (ingest.retention).\n\
         # TYPE knooppunt_event_retention_seconds gauge\nknooppunt_event_retention_seconds {}",
        usage.total_bytes,
        usage.event_bytes,
        retention.as_secs()
    );
}
