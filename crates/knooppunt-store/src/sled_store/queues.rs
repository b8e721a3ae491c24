//! The embedded store's in-memory state: per subscription its pending deliveries and dead
//! letters, per event where it is in the log, and duplicate detection. All of it is rebuilt
//! from the log at open ([`Queues::replay`]) and changed only by the committer after a sync
//! ([`Queues::add`], [`Queues::apply`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasher, Hasher, RandomState};

use super::committer::EventFiling;
use super::event_log::{Entry, Location};
use crate::queue::{Attempt, DeadLetter, Delivery, DeliveryChange, QueueStats, Verdict};

/// The delivery queues and the event index, in memory.
#[derive(Debug, Default)]
pub(super) struct Queues {
    /// Subscriptions that exist; deliveries are only queued for these.
    pub(super) live: HashSet<String>,
    /// Per subscription, its pending deliveries in acceptance order.
    pub(super) pending: HashMap<String, Queue>,
    /// Per subscription, its dead letters in acceptance order.
    pub(super) dead: HashMap<String, BTreeMap<u64, DeadLetter>>,
    /// Per event: where it is in the log, when it was accepted, and its dedupe hash.
    pub(super) index: BTreeMap<u64, Indexed>,
    /// Duplicate detection: the hash of `source` and `id` → the event's sequence number.
    pub(super) recent: HashMap<u128, u64>,
    pub(super) hasher: DedupeHasher,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Indexed {
    pub(super) location: Location,
    pub(super) accepted_at: u64,
    pub(super) hash: u128,
}

/// Two SipHash keys drawn at random per process: 128 bits make an accidental collision (which
/// would wrongly report an event as a duplicate) vanishingly unlikely, and random keys keep
/// publishers from choosing colliding ids.
#[derive(Debug, Default)]
pub(super) struct DedupeHasher(RandomState, RandomState);

impl DedupeHasher {
    pub(super) fn hash(&self, source: &str, id: &str) -> u128 {
        let half = |state: &RandomState| {
            let mut hasher = state.build_hasher();
            hasher.write(source.as_bytes());
            hasher.write_u8(0);
            hasher.write(id.as_bytes());
            hasher.finish()
        };
        (u128::from(half(&self.0)) << 64) | u128::from(half(&self.1))
    }
}

impl Queues {
    /// Files a newly written (or, at start-up, replayed) event and its deliveries.
    pub(super) fn add(&mut self, record: &EventFiling, location: Location) {
        let hash = record.hash;
        self.index.insert(
            record.seq,
            Indexed {
                location,
                accepted_at: record.accepted_at,
                hash,
            },
        );
        self.recent.insert(hash, record.seq);
        for subscription in &record.subscriptions {
            if self.live.contains(subscription) {
                self.pending
                    .entry(subscription.clone())
                    .or_default()
                    .insert(Delivery::new(
                        subscription.clone(),
                        record.seq,
                        record.accepted_at,
                    ));
            }
        }
    }

    /// Files a record read back from the log at open.
    pub(super) fn replay(&mut self, entry: Entry, location: Location) {
        match entry {
            Entry::Event(record) => {
                let filing = EventFiling {
                    seq: record.seq,
                    accepted_at: record.accepted_at,
                    hash: self.hasher.hash(&record.source, &record.id),
                    len: location.len,
                    subscriptions: record.subscriptions,
                };
                self.add(&filing, location);
            }
            Entry::Change { change, .. } => self.apply(&change),
        }
    }

    /// Applies a recorded change to the delivery state.
    pub(super) fn apply(&mut self, change: &DeliveryChange) {
        match change {
            DeliveryChange::Attempted(attempt) => self.attempted(attempt),
            DeliveryChange::Redeliver {
                subscription,
                seq,
                at,
            } => {
                let dead = self.dead.get_mut(subscription).and_then(|d| d.remove(seq));
                if dead.is_some() && self.live.contains(subscription) {
                    self.pending
                        .entry(subscription.clone())
                        .or_default()
                        .insert(Delivery::new(subscription.clone(), *seq, *at));
                }
            }
            DeliveryChange::DeleteDeadLetter { subscription, seq } => {
                if let Some(dead) = self.dead.get_mut(subscription) {
                    dead.remove(seq);
                }
            }
            DeliveryChange::Retire {
                subscription,
                at,
                reason,
            } => {
                if let Some(queue) = self.pending.remove(subscription) {
                    let dead = self.dead.entry(subscription.clone()).or_default();
                    for (seq, delivery) in queue.deliveries {
                        dead.insert(
                            seq,
                            DeadLetter::from_delivery(delivery, reason.clone(), *at),
                        );
                    }
                }
            }
        }
    }

    fn attempted(&mut self, attempt: &Attempt) {
        let Some(queue) = self.pending.get_mut(&attempt.subscription) else {
            return;
        };
        let Some(mut delivery) = queue.remove(attempt.seq) else {
            return;
        };
        delivery.attempts += 1;
        delivery.first_attempt_at.get_or_insert(attempt.at);
        delivery.last_attempt_at = Some(attempt.at);
        delivery.last_status = attempt.status;
        delivery.last_error.clone_from(&attempt.error);
        delivery.leased_until = 0;
        match &attempt.verdict {
            Verdict::Delivered => {}
            Verdict::Retry { next_attempt_at } => {
                delivery.next_attempt_at = *next_attempt_at;
                queue.insert(delivery);
            }
            Verdict::DeadLetter { reason } => {
                self.dead
                    .entry(attempt.subscription.clone())
                    .or_default()
                    .insert(
                        attempt.seq,
                        DeadLetter::from_delivery(delivery, reason.clone(), attempt.at),
                    );
            }
        }
    }

    /// When the event with this dedupe hash was accepted, if it is still known.
    pub(super) fn accepted(&self, hash: u128) -> Option<(u64, u64)> {
        let seq = *self.recent.get(&hash)?;
        self.index
            .get(&seq)
            .map(|indexed| (seq, indexed.accepted_at))
    }

    pub(super) fn newest_accepted_in(&self, first: u64, next: u64) -> Option<u64> {
        self.index
            .range(first..next)
            .next_back()
            .map(|(_, indexed)| indexed.accepted_at)
    }

    /// Every live subscription's queue size, oldest pending event and dead letters.
    pub(super) fn stats(&self) -> Vec<QueueStats> {
        let mut stats: Vec<QueueStats> = self
            .live
            .iter()
            .map(|subscription| {
                let queue = self.pending.get(subscription);
                QueueStats {
                    subscription: subscription.clone(),
                    pending: queue.map_or(0, |q| q.deliveries.len() as u64),
                    oldest_accepted_at: queue
                        .and_then(|q| q.deliveries.keys().next())
                        .and_then(|seq| self.index.get(seq))
                        .map(|indexed| indexed.accepted_at),
                    dead_letters: self.dead.get(subscription).map_or(0, |d| d.len() as u64),
                }
            })
            .collect();
        stats.sort_by(|a, b| a.subscription.cmp(&b.subscription));
        stats
    }

    /// Whether an event in `first..next` still has a pending delivery or a dead letter.
    pub(super) fn has_pending_in(&self, first: u64, next: u64) -> bool {
        self.pending
            .values()
            .any(|queue| queue.deliveries.range(first..next).next().is_some())
            || self
                .dead
                .values()
                .any(|dead| dead.range(first..next).next().is_some())
    }

    /// Forgets the events of a deleted segment; returns how many events and dedupe entries.
    pub(super) fn forget(&mut self, first: u64, next: u64) -> (u64, u64) {
        let gone: Vec<(u64, u128)> = self
            .index
            .range(first..next)
            .map(|(seq, indexed)| (*seq, indexed.hash))
            .collect();
        let mut entries = 0;
        for (seq, hash) in &gone {
            self.index.remove(seq);
            if self.recent.get(hash) == Some(seq) {
                self.recent.remove(hash);
                entries += 1;
            }
        }
        (gone.len() as u64, entries)
    }
}

/// One subscription's pending deliveries: in acceptance order, and indexed by when each is
/// available (due and not leased), so that leasing and finding the next due delivery cost
/// O(log n) however long the queue and however many wait for a retry.
#[derive(Debug, Default)]
pub(super) struct Queue {
    deliveries: BTreeMap<u64, Delivery>,
    /// `(available_at(delivery), seq)` for every delivery.
    available: BTreeSet<(u64, u64)>,
}

fn available_at(delivery: &Delivery) -> u64 {
    delivery.next_attempt_at.max(delivery.leased_until)
}

impl Queue {
    pub(super) fn insert(&mut self, delivery: Delivery) {
        self.available
            .insert((available_at(&delivery), delivery.seq));
        if let Some(old) = self.deliveries.insert(delivery.seq, delivery) {
            self.available.remove(&(available_at(&old), old.seq));
        }
    }

    pub(super) fn remove(&mut self, seq: u64) -> Option<Delivery> {
        let delivery = self.deliveries.remove(&seq)?;
        self.available.remove(&(available_at(&delivery), seq));
        Some(delivery)
    }

    /// In acceptance order.
    pub(super) fn values(&self) -> impl Iterator<Item = &Delivery> {
        self.deliveries.values()
    }

    /// Leases up to `limit` available deliveries until `now + lease_ms`: the oldest only
    /// when `ordered` (and only while it is not leased), else the earliest available.
    pub(super) fn lease(
        &mut self,
        now: u64,
        lease_ms: u64,
        limit: usize,
        ordered: bool,
    ) -> Vec<Delivery> {
        let candidates: Vec<u64> = if ordered {
            self.deliveries
                .values()
                .next()
                .filter(|head| available_at(head) <= now)
                .map(|head| head.seq)
                .into_iter()
                .collect()
        } else {
            self.available
                .iter()
                .take_while(|(at, _)| *at <= now)
                .take(limit)
                .map(|(_, seq)| *seq)
                .collect()
        };
        let mut leased = Vec::with_capacity(candidates.len());
        for seq in candidates.into_iter().take(limit) {
            let mut delivery = self.remove(seq).expect("indexed deliveries exist");
            delivery.leased_until = now + lease_ms;
            leased.push(delivery.clone());
            self.insert(delivery);
        }
        leased
    }

    /// When the next delivery becomes available (for an ordered queue: its oldest).
    pub(super) fn next_due(&self, ordered: bool) -> Option<u64> {
        if ordered {
            self.deliveries.values().next().map(available_at)
        } else {
            self.available.first().map(|(at, _)| *at)
        }
    }
}
