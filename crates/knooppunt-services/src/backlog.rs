//! Bounds on undelivered data, so that a hub whose sinks stall never fills its disk nor its
//! memory. Every `check_interval` the guard measures each subscription's backlog (the sizes
//! of its pending deliveries' events, [`QueueStats::pending_bytes`]) and the room left on
//! the store's disk, and:
//!
//! - a subscription past its own limit (bytes or age of its oldest event) sheds its oldest
//!   pending deliveries into dead letters, saying why, until it is within it again; its
//!   status says how many it shed (the other subscriptions are not touched);
//! - while the whole hub is past its limit, or the disk has less room than its floor,
//!   publishes are refused (503 with `Retry-After`): nothing more is acknowledged than the
//!   hub can keep, and the room left lets deliveries record their results and drain.
//!
//! Dead letters (shed, or given up on) are kept for `dead_letter_retention`: the retention
//! sweep removes older ones, so that a subscriber that never catches up cannot make the hub
//! keep its events for ever.
//!
//! Between two measurements the guard counts what was accepted since, and what push
//! deliveries finished since (as the workers report to the telemetry), so the hub's limit
//! holds within one batch of publishes however fast they come, and a hub whose sinks keep up
//! is not taken for full. A publish that finds the hub full on that estimate measures again
//! first (when anything was accepted since), so that a subscription that stalled since the
//! last measurement is shed rather than every publisher refused.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use knooppunt_delivery::Deliverer;
use knooppunt_store::{DeliveryChange, QueueStats, Store, StoreError};

use crate::audit::{Action, Audit, Context, HUB};
use crate::telemetry::Telemetry;

/// The bounds; 0 (or `None`) leaves one out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BacklogOptions {
    /// Undelivered bytes of all subscriptions together. Past it, publishes get 503.
    pub max_bytes: u64,
    /// Publishes get 503 while the store's file system has less room than this (the
    /// embedded store; PostgreSQL's disk is the database server's).
    pub min_free_bytes: u64,
    /// Undelivered bytes of one subscription. Past it, its oldest deliveries become dead
    /// letters until it is within it.
    pub subscription_max_bytes: u64,
    /// The age of one subscription's oldest undelivered event. Older ones become dead
    /// letters.
    pub subscription_max_age: Option<Duration>,
    /// How often the backlog is measured.
    pub check_interval: Duration,
    /// How long a dead letter is kept (and with it its event); the retention sweep removes
    /// older ones, so that shed and failed events cannot fill the disk over time.
    pub dead_letter_retention: Duration,
}

impl Default for BacklogOptions {
    fn default() -> Self {
        const GIB: u64 = 1024 * 1024 * 1024;
        BacklogOptions {
            max_bytes: 8 * GIB,
            min_free_bytes: GIB / 4,
            subscription_max_bytes: GIB,
            subscription_max_age: None,
            check_interval: Duration::from_secs(5),
            dead_letter_retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

pub use crate::refused::Full;

/// What a subscription shed, for its status.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Shed {
    /// Deliveries moved to dead letters since this hub started.
    pub events: u64,
    /// When it last shed (milliseconds since the Unix epoch).
    pub last_at: u64,
    pub last_reason: String,
}

/// The guard: the last measurement, what was accepted since, and what each subscription
/// shed.
pub struct Backlog {
    pub options: BacklogOptions,
    store: Arc<dyn Store>,
    audit: Arc<Audit>,
    telemetry: Arc<Telemetry>,
    /// Told which subscriptions shed, so that their workers send nothing shed.
    deliverer: Deliverer,
    /// Tells a subscription's owner that it shed.
    notices: crate::notices::Notices,
    /// Undelivered bytes at the last measurement.
    measured: AtomicU64,
    /// The telemetry's finished bytes right after the last measurement.
    finished_at_measurement: AtomicU64,
    /// Bytes accepted since (each event counted once per subscription it was routed to).
    added: AtomicU64,
    /// Room on the store's disk at the last measurement (`u64::MAX`: unknown), and bytes
    /// written since (each event once).
    free: AtomicU64,
    written: AtomicU64,
    shed: Mutex<HashMap<String, Shed>>,
    /// Held while measuring and shedding (the guard's tick, or a publish that found the
    /// hub full), so that two never shed the same excess.
    measuring: tokio::sync::Mutex<()>,
}

/// Deliveries read per step when choosing what to shed.
const PAGE: usize = 500;

impl Backlog {
    pub fn new(
        options: BacklogOptions,
        store: Arc<dyn Store>,
        audit: Arc<Audit>,
        telemetry: Arc<Telemetry>,
        deliverer: Deliverer,
        notices: crate::notices::Notices,
    ) -> Self {
        Backlog {
            options,
            store,
            audit,
            telemetry,
            deliverer,
            notices,
            measured: AtomicU64::new(0),
            finished_at_measurement: AtomicU64::new(0),
            added: AtomicU64::new(0),
            free: AtomicU64::new(u64::MAX),
            written: AtomicU64::new(0),
            shed: Mutex::new(HashMap::new()),
            measuring: tokio::sync::Mutex::new(()),
        }
    }

    /// Whether publishes may be accepted now.
    pub fn admit(&self) -> Result<(), Full> {
        let retry_after = self.options.check_interval.as_secs().max(1);
        let free = self
            .free
            .load(Ordering::Relaxed)
            .saturating_sub(self.written.load(Ordering::Relaxed));
        if self.options.min_free_bytes > 0 && free < self.options.min_free_bytes {
            return Err(Full {
                detail: format!(
                    "the hub's disk has {} left, less than the {} it keeps free for \
                     deliveries to drain ([backlog] min_free_bytes); nothing of this request \
                     was kept: try again later",
                    bytes(free),
                    bytes(self.options.min_free_bytes)
                ),
                retry_after,
            });
        }
        let undelivered = self.undelivered();
        if self.options.max_bytes > 0 && undelivered >= self.options.max_bytes {
            return Err(Full {
                detail: format!(
                    "the hub holds {} of undelivered events, its limit ([backlog] max_bytes \
                     is {}): its subscribers must catch up first; nothing of this request was \
                     kept: try again later",
                    bytes(undelivered),
                    bytes(self.options.max_bytes)
                ),
                retry_after,
            });
        }
        Ok(())
    }

    /// Whether a publish may be accepted now. When the estimate says the hub is full and
    /// something was accepted since the last measurement, it measures again first (and
    /// sheds what subscriptions past their own limits hold): a subscription that stalled
    /// since the last measurement is shed before any publisher is refused on its account.
    /// A hub that is full indeed accepts nothing, so its refusals do not measure again:
    /// at most one measurement per accepting moment, one at a time.
    pub async fn admit_publish(&self) -> Result<(), Full> {
        if self.admit().is_ok() {
            return Ok(());
        }
        let _measuring = self.measuring.lock().await;
        // Measured by another publish while this one waited?
        let Err(full) = self.admit() else {
            return Ok(());
        };
        let accepted_since =
            self.added.load(Ordering::Relaxed) > 0 || self.written.load(Ordering::Relaxed) > 0;
        if !accepted_since {
            return Err(full);
        }
        if let Err(error) = self.measure(knooppunt_store::now_ms()).await {
            tracing::warn!(%error, "Measuring the backlog failed; it is measured again shortly.");
        }
        self.admit()
    }

    /// Events of `event_bytes` were accepted, with `delivery_bytes` of deliveries.
    pub fn accepted(&self, event_bytes: u64, delivery_bytes: u64) {
        self.added.fetch_add(delivery_bytes, Ordering::Relaxed);
        self.written.fetch_add(event_bytes, Ordering::Relaxed);
    }

    /// Undelivered bytes as far as the guard knows: the last measurement, with what was
    /// accepted since and less what push deliveries finished since.
    pub fn undelivered(&self) -> u64 {
        let finished = self
            .telemetry
            .finished_bytes
            .load(Ordering::Relaxed)
            .saturating_sub(self.finished_at_measurement.load(Ordering::Relaxed));
        self.measured
            .load(Ordering::Relaxed)
            .saturating_add(self.added.load(Ordering::Relaxed))
            .saturating_sub(finished)
    }

    /// What subscription `id` shed, if anything.
    pub fn shed_of(&self, id: &str) -> Option<Shed> {
        self.shed.lock().expect("shed lock").get(id).cloned()
    }

    /// Measures the backlog and the disk, and sheds what is past a subscription's limit.
    pub async fn check(&self, now: u64) -> Result<(), StoreError> {
        let _measuring = self.measuring.lock().await;
        self.measure(now).await
    }

    /// [`Backlog::check`], with `measuring` held.
    async fn measure(&self, now: u64) -> Result<(), StoreError> {
        // Taken before measuring and subtracted only once the measurement is in place:
        // what is accepted meanwhile is counted twice at worst, and the estimate never
        // dips while the store is asked (publishes admitted on the last measurement alone
        // would pass the limit).
        let added = self.added.load(Ordering::Relaxed);
        let written = self.written.load(Ordering::Relaxed);
        let queues = self.store.queue_stats().await?;
        let usage = self.store.disk_usage().await?;
        let total: u64 = queues.iter().map(|q| q.pending_bytes).sum();
        // Taken after the measurement: a delivery that finished while it was taken is
        // counted as undelivered until the next one (never the other way round). Each
        // step below leaves an estimate at or above the truth for a reader in between.
        let finished = self.telemetry.finished_bytes.load(Ordering::Relaxed);
        self.finished_at_measurement
            .store(finished, Ordering::Relaxed);
        self.measured.store(total, Ordering::Relaxed);
        self.added.fetch_sub(added, Ordering::Relaxed);
        self.free
            .store(usage.free_bytes.unwrap_or(u64::MAX), Ordering::Relaxed);
        self.written.fetch_sub(written, Ordering::Relaxed);
        for queue in &queues {
            if let Some(reason) = self.past_limit(queue, now) {
                let (events, shed_bytes) = self.shed_oldest(queue, now, &reason).await?;
                if events > 0 {
                    self.deliverer.recall(&queue.subscription);
                    let measured = self.measured.load(Ordering::Relaxed);
                    self.measured
                        .store(measured.saturating_sub(shed_bytes), Ordering::Relaxed);
                    self.note_shed(&queue.subscription, events, now, reason)
                        .await;
                }
            }
        }
        Ok(())
    }

    /// Why the subscription is past its limit, if it is.
    fn past_limit(&self, queue: &QueueStats, now: u64) -> Option<String> {
        let limit = self.options.subscription_max_bytes;
        if limit > 0 && queue.pending_bytes > limit {
            return Some(format!(
                "shed: the subscription's undelivered events passed {} ([backlog] \
                 subscription_max_bytes); the oldest became dead letters",
                bytes(limit)
            ));
        }
        let max_age = self.options.subscription_max_age?;
        let oldest = queue.oldest_accepted_at?;
        (now.saturating_sub(oldest) > max_age.as_millis() as u64).then(|| {
            format!(
                "shed: undelivered for longer than {} s ([backlog] subscription_max_age)",
                max_age.as_secs()
            )
        })
    }

    /// Moves the oldest pending deliveries of a subscription past its limit to dead
    /// letters until it is within it: how many, and their bytes (estimated). For the byte
    /// limit events are not read: as many of the oldest go as the excess takes at the
    /// queue's average event size (what that leaves over the limit, the next measurement
    /// sheds); for the age limit, the oldest are read until one is young enough.
    async fn shed_oldest(
        &self,
        queue: &QueueStats,
        now: u64,
        reason: &str,
    ) -> Result<(u64, u64), StoreError> {
        let limit = self.options.subscription_max_bytes;
        let average = queue.pending_bytes.div_ceil(queue.pending.max(1)).max(1);
        let by_bytes = if limit > 0 && queue.pending_bytes > limit {
            (queue.pending_bytes - limit).div_ceil(average)
        } else {
            0
        };
        let too_old_before = self
            .options
            .subscription_max_age
            .map(|age| now.saturating_sub(age.as_millis() as u64));
        let (mut shed, mut after) = (0u64, None);
        loop {
            let page = self
                .store
                .pending_seqs(&queue.subscription, after, PAGE)
                .await?;
            let mut seqs = Vec::new();
            let mut done = page.len() < PAGE;
            for &seq in &page {
                let chosen = shed + (seqs.len() as u64) < by_bytes
                    || match too_old_before {
                        Some(cutoff) => self
                            .store
                            .event(seq)
                            .await?
                            .is_none_or(|event| event.accepted_at < cutoff),
                        None => false,
                    };
                if !chosen {
                    done = true;
                    break;
                }
                seqs.push(seq);
            }
            if let Some(&last) = seqs.last() {
                after = Some(last);
                shed += seqs.len() as u64;
                self.store
                    .record(vec![DeliveryChange::Withdraw {
                        subscription: queue.subscription.clone(),
                        seqs,
                        at: now,
                        reason: reason.to_owned(),
                    }])
                    .await?;
            }
            if done {
                return Ok((shed, shed * average));
            }
        }
    }

    /// Removes the dead letters older than `dead_letter_retention` at `now`, in chunks;
    /// each subscription that lost some gets an audit entry. Returns how many went.
    pub async fn sweep_dead_letters(&self, now: u64) -> Result<u64, StoreError> {
        const CHUNK: usize = 10_000;
        let retention = self.options.dead_letter_retention;
        let before = now.saturating_sub(retention.as_millis() as u64);
        let mut lost: BTreeMap<String, u64> = BTreeMap::new();
        let mut result = Ok(());
        loop {
            match self.store.sweep_dead_letters(before, CHUNK).await {
                Ok(removed) => {
                    let count: u64 = removed.iter().map(|(_, n)| n).sum();
                    for (subscription, n) in removed {
                        *lost.entry(subscription).or_default() += n;
                    }
                    if count < CHUNK as u64 {
                        break;
                    }
                }
                Err(error) => {
                    // What went before this chunk is gone: audit it all the same.
                    result = Err(error);
                    break;
                }
            }
        }
        let total: u64 = lost.values().sum();
        self.telemetry
            .dead_letters_expired
            .fetch_add(total, Ordering::Relaxed);
        let why = format!(
            "dead letters are kept for {} s ([backlog] dead_letter_retention)",
            retention.as_secs()
        );
        let hub = Context {
            actor: Some(HUB.into()),
            ..Context::default()
        };
        for (subscription, count) in lost {
            tracing::info!(
                subscription,
                dead_letters = count,
                "Dead letters past their retention were removed."
            );
            let action = Action::new(
                crate::audit::ActionName::SubscriptionExpire,
                format!("subscription/{subscription}"),
                serde_json::json!({"deadLetters": count, "why": why}),
            );
            self.audit.record(&hub, action).await;
        }
        result.map(|()| total)
    }

    async fn note_shed(&self, subscription: &str, events: u64, now: u64, reason: String) {
        tracing::warn!(
            subscription,
            events,
            %reason,
            "A subscription past its backlog limit shed its oldest deliveries into dead letters."
        );
        {
            let mut shed = self.shed.lock().expect("shed lock");
            let entry = shed.entry(subscription.to_owned()).or_default();
            entry.events += events;
            entry.last_at = now;
            entry.last_reason.clone_from(&reason);
        }
        self.notices
            .backlog_limit_reached(subscription, events, &reason, now);
        let hub = Context {
            actor: Some(HUB.into()),
            ..Context::default()
        };
        let action = Action::new(
            crate::audit::ActionName::SubscriptionShed,
            format!("subscription/{subscription}"),
            serde_json::json!({"events": events, "why": reason}),
        );
        self.audit.record(&hub, action).await;
    }
}

/// A byte count for people: `1.5 GiB`, `300 KiB`, `12 bytes`.
fn bytes(count: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if count < 1024 {
        return format!("{count} bytes");
    }
    let mut value = count as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

impl std::fmt::Debug for Backlog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backlog").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::bytes;

    #[test]
    fn byte_counts_read_as_people_write_them() {
        assert_eq!(bytes(12), "12 bytes");
        assert_eq!(bytes(300 * 1024), "300.0 KiB");
        assert_eq!(bytes(3 * 1024 * 1024 / 2 * 1024), "1.5 GiB");
    }
}
