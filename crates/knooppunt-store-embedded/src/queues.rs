//! The embedded store's in-memory state: per subscription its pending deliveries and dead
//! letters, and per event where it is in the log. All of it is rebuilt from the log at open
//! ([`Queues::replay`]) and changed only by the committer after a sync ([`Queues::add`],
//! [`Queues::apply`]). Duplicate detection is not here: it is the committer's
//! (`dedupe.rs`), so that publishing never waits for these queues.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::dedupe::{Dedupe, DedupeHasher, Identity};
use super::event_index::{EventIndex, Indexed};
use super::event_log::{Entry, Location};
use super::pending::Pending;
use knooppunt_store::{Attempt, DeadLetter, Delivery, DeliveryChange, QueueStats, Verdict};

/// The delivery queues and the event index, in memory.
#[derive(Debug, Default)]
pub(super) struct Queues {
    /// Subscriptions that exist; deliveries are only queued for these.
    pub(super) live: HashSet<String>,
    /// Per subscription, its pending deliveries in acceptance order.
    pub(super) pending: HashMap<String, Pending>,
    /// Per subscription, its dead letters in acceptance order.
    pub(super) dead: HashMap<String, BTreeMap<u64, DeadLetter>>,
    /// Per event: where it is in the log, when it was accepted, and its dedupe hash.
    pub(super) index: EventIndex,
    /// Duplicate detection has forgotten the events up to this one (their window passed).
    pub(super) dedupe_expired_through: u64,
    /// The last lease token handed out. Push leases live in memory only; leases held
    /// outside the hub (a pull consumer's) are logged ([`DeliveryChange::Leased`]), and
    /// numbering goes on after the largest of them, so no token is handed out twice.
    pub(super) lease_tokens: u64,
    /// Records numbered up to this one were deleted with their segments.
    pub(super) swept_through: u64,
}

impl Queues {
    /// Files a newly written (or, at start-up, replayed) event and its deliveries.
    pub(super) fn add(&mut self, record: &EventFiling, location: Location) {
        self.index.insert(
            record.seq,
            Indexed {
                location,
                accepted_at: record.accepted_at,
                hash: record.hash,
                bytes: record.bytes,
            },
        );
        let bytes = u64::from(record.bytes);
        for subscription in &record.subscriptions {
            if let Some(queue) = self.pending.get_mut(subscription) {
                queue.push(record.seq, record.accepted_at, bytes);
            } else if self.live.contains(subscription) {
                let mut queue = Pending::default();
                queue.push(record.seq, record.accepted_at, bytes);
                self.pending.insert(subscription.clone(), queue);
            }
        }
    }

    /// When event `seq` was accepted, if the index has it.
    pub(super) fn accepted_at(&self, seq: u64) -> Option<u64> {
        self.index.get(seq).map(|indexed| indexed.accepted_at)
    }

    /// Files a record read back from the log at open; events also go into `dedupe`.
    pub(super) fn replay(
        &mut self,
        entry: Entry,
        location: Location,
        hasher: &DedupeHasher,
        dedupe: &mut Dedupe,
    ) {
        match entry {
            Entry::Event(record) => {
                let hash = hasher.hash(&record.source, &record.id);
                let bytes = event_bytes(&record.json, record.extension_types.as_deref());
                dedupe.replay(hash, record.seq);
                let filing = EventFiling {
                    seq: record.seq,
                    accepted_at: record.accepted_at,
                    hash,
                    len: location.len,
                    bytes,
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
            DeliveryChange::Leased {
                subscription,
                leases,
            } => {
                for &(seq, lease, until) in leases {
                    // Tokens are never handed out twice, across restarts too.
                    self.lease_tokens = self.lease_tokens.max(lease);
                    if let Some(queue) = self.pending.get_mut(subscription) {
                        queue.relet(subscription, seq, lease, until);
                    }
                }
            }
            DeliveryChange::Attempted(attempt) => self.attempted(attempt),
            DeliveryChange::Redeliver {
                subscription,
                seq,
                at,
            } => {
                let dead = self.dead.get_mut(subscription).and_then(|d| d.remove(seq));
                if dead.is_some() && self.live.contains(subscription) {
                    let bytes = self.bytes_of(*seq);
                    self.pending
                        .entry(subscription.clone())
                        .or_default()
                        .insert(Delivery::new(subscription.clone(), *seq, *at), bytes);
                }
            }
            DeliveryChange::DeleteDeadLetter { subscription, seq } => {
                if let Some(dead) = self.dead.get_mut(subscription) {
                    dead.remove(seq);
                }
            }
            DeliveryChange::Requeue {
                subscription,
                seqs,
                at,
                replay,
            } => {
                if !self.live.contains(subscription) {
                    return;
                }
                let queue = self.pending.entry(subscription.clone()).or_default();
                for &seq in seqs {
                    if self.index.get(seq).is_none() || queue.has_any_in(seq, seq + 1) {
                        continue;
                    }
                    let mut delivery = Delivery::new(subscription.clone(), seq, *at);
                    delivery.replay = Some(replay.clone());
                    let bytes = self.index.get(seq).map_or(0, |i| u64::from(i.bytes));
                    queue.insert(delivery, bytes);
                }
            }
            DeliveryChange::Withdraw {
                subscription,
                seqs,
                at,
                reason,
            } => {
                let mut seqs = seqs.clone();
                seqs.sort_unstable();
                if let Some(queue) = self.pending.get_mut(subscription) {
                    let dead = self.dead.entry(subscription.clone()).or_default();
                    for delivery in queue.remove_all(subscription, &seqs) {
                        let bytes = self.index.get(delivery.seq).map_or(0, |i| i.bytes);
                        queue.forget_bytes(u64::from(bytes));
                        dead.insert(
                            delivery.seq,
                            DeadLetter::from_delivery(delivery, reason.clone(), *at),
                        );
                    }
                }
            }
            DeliveryChange::Retire {
                subscription,
                at,
                reason,
            } => {
                if let Some(queue) = self.pending.remove(subscription) {
                    let dead = self.dead.entry(subscription.clone()).or_default();
                    for delivery in queue.deliveries(subscription) {
                        dead.insert(
                            delivery.seq,
                            DeadLetter::from_delivery(delivery, reason.clone(), *at),
                        );
                    }
                }
            }
        }
    }

    fn attempted(&mut self, attempt: &Attempt) {
        let taken = self
            .pending
            .get_mut(&attempt.subscription)
            .and_then(|queue| {
                let delivery = queue.remove(&attempt.subscription, attempt.seq)?;
                Some((queue, delivery))
            });
        let Some((queue, mut delivery)) = taken else {
            // No longer pending: withdrawn (or retired, or a dead letter by a later lease)
            // while the attempt was under way. If the sink took the event, it was delivered
            // after all: its dead letter goes (the receipt is kept as for any delivery).
            if attempt.verdict == Verdict::Delivered
                && let Some(dead) = self.dead.get_mut(&attempt.subscription)
            {
                dead.remove(&attempt.seq);
            }
            return;
        };
        let bytes = self
            .index
            .get(attempt.seq)
            .map_or(0, |i| u64::from(i.bytes));
        queue.forget_bytes(bytes);
        delivery.attempts += 1;
        delivery.first_attempt_at.get_or_insert(attempt.at);
        delivery.last_attempt_at = Some(attempt.at);
        delivery.last_status = attempt.status;
        delivery.last_error.clone_from(&attempt.error);
        delivery.leased_until = 0;
        delivery.lease = 0;
        match &attempt.verdict {
            Verdict::Delivered => {}
            Verdict::Retry { next_attempt_at } => {
                delivery.next_attempt_at = *next_attempt_at;
                queue.insert(delivery, bytes);
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

    /// Event `seq`'s own size, 0 when it is not retained.
    fn bytes_of(&self, seq: u64) -> u64 {
        self.index
            .get(seq)
            .map_or(0, |indexed| u64::from(indexed.bytes))
    }

    pub(super) fn newest_accepted_in(&self, first: u64, next: u64) -> Option<u64> {
        self.index
            .range(first, next)
            .next_back()
            .map(|(_, indexed)| indexed.accepted_at)
    }

    /// Every live subscription's queue size, oldest pending event and dead letters.
    pub(super) fn stats(&self) -> Vec<QueueStats> {
        let now = knooppunt_store::now_ms();
        let mut stats: Vec<QueueStats> = self
            .live
            .iter()
            .map(|subscription| self.stats_at(subscription, now))
            .collect();
        stats.sort_by(|a, b| a.subscription.cmp(&b.subscription));
        stats
    }

    /// One subscription's statistics, if it exists.
    pub(super) fn stats_of(&self, subscription: &str) -> Option<QueueStats> {
        self.live
            .contains(subscription)
            .then(|| self.stats_at(subscription, knooppunt_store::now_ms()))
    }

    fn stats_at(&self, subscription: &str, now: u64) -> QueueStats {
        let queue = self.pending.get(subscription);
        QueueStats {
            subscription: subscription.to_owned(),
            pending: queue.map_or(0, |q| q.len() as u64),
            pending_bytes: queue.map_or(0, Pending::bytes),
            oldest_accepted_at: queue
                .and_then(Pending::first_seq)
                .and_then(|seq| self.index.get(seq))
                .map(|indexed| indexed.accepted_at),
            dead_letters: self.dead.get(subscription).map_or(0, |d| d.len() as u64),
            leased: queue.map_or(0, |q| q.leased(now)),
        }
    }

    /// The subscriptions that have dead letters.
    pub(super) fn with_dead_letters(&self) -> Vec<String> {
        self.dead
            .iter()
            .filter(|(_, dead)| !dead.is_empty())
            .map(|(subscription, _)| subscription.clone())
            .collect()
    }

    /// Looks at up to `chunk` of `subscription`'s dead letters from event `from` on: the
    /// (death, event) of those that died before `before`, and where to go on (`None`: at
    /// the end). In chunks, so that the sweep never holds the lock for long.
    pub(super) fn expired_dead_letters(
        &self,
        subscription: &str,
        from: u64,
        before: u64,
        chunk: usize,
    ) -> (Vec<(u64, u64)>, Option<u64>) {
        let Some(dead) = self.dead.get(subscription) else {
            return (Vec::new(), None);
        };
        let mut expired = Vec::new();
        let mut next = None;
        for (seen, (&seq, letter)) in dead.range(from..).enumerate() {
            if seen == chunk {
                next = Some(seq);
                break;
            }
            if letter.dead_at < before {
                expired.push((letter.dead_at, seq));
            }
        }
        (expired, next)
    }

    /// Whether an event in `first..next` still has a pending delivery or a dead letter.
    pub(super) fn has_pending_in(&self, first: u64, next: u64) -> bool {
        self.pending
            .values()
            .any(|queue| queue.has_any_in(first, next))
            || self
                .dead
                .values()
                .any(|dead| dead.range(first..next).next().is_some())
    }

    /// Forgets the events of a deleted segment; returns each one's sequence number and
    /// dedupe hash.
    pub(super) fn forget(&mut self, first: u64, next: u64) -> Vec<(u64, Identity)> {
        self.swept_through = self.swept_through.max(next.saturating_sub(1));
        self.index
            .remove_range(first, next)
            .into_iter()
            .map(|(seq, indexed)| (seq, indexed.hash))
            .collect()
    }

    /// The events past the duplicate window at `now` that duplicate detection still knows,
    /// oldest first, up to `limit` of them; they count as forgotten from here on.
    pub(super) fn expire_dedupe(
        &mut self,
        now: u64,
        window: u64,
        limit: usize,
    ) -> Vec<(u64, Identity)> {
        let expired: Vec<(u64, Identity)> = self
            .index
            .after(self.dedupe_expired_through)
            .take_while(|(_, indexed)| now.saturating_sub(indexed.accepted_at) >= window)
            .take(limit)
            .map(|(seq, indexed)| (*seq, indexed.hash))
            .collect();
        if let Some((seq, _)) = expired.last() {
            self.dedupe_expired_through = *seq;
        }
        expired
    }
}

/// An event's own size, as its pending deliveries count it ([`QueueStats::pending_bytes`]).
///
/// [`QueueStats::pending_bytes`]: knooppunt_store::QueueStats::pending_bytes
pub(super) fn event_bytes(json: &str, extension_types: Option<&str>) -> u32 {
    u32::try_from(knooppunt_store::event_size(json, extension_types)).unwrap_or(u32::MAX)
}

/// An accepted event as the in-memory queues file it.
#[derive(Debug)]
pub(super) struct EventFiling {
    pub(super) seq: u64,
    pub(super) accepted_at: u64,
    pub(super) hash: Identity,
    /// The encoded record's length, header included.
    pub(super) len: u32,
    /// The event's own size: its JSON, with the types of extensions kept beside it.
    pub(super) bytes: u32,
    pub(super) subscriptions: Vec<String>,
}
