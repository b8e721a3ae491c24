//! One subscription's pending deliveries.
//!
//! Most deliveries are fresh: never leased, never attempted, due from the moment their event
//! was accepted. Those are kept as `(seq, accepted_at)` pairs in acceptance order (16 bytes
//! each, no allocation), so that a subscription that falls behind, or a sink that has not
//! consented yet, costs little memory per queued event. A delivery becomes a full
//! [`Delivery`] record once it is leased, attempted or redelivered; those are indexed by
//! when each becomes available (due and not leased), so that leasing and finding the next
//! due delivery cost O(log n) however many wait for a retry.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::event_index::insert_by_seq;
use knooppunt_store::Delivery;

#[derive(Debug, Default)]
pub(super) struct Pending {
    /// Deliveries never leased or attempted: `(seq, accepted_at)`, in acceptance order.
    fresh: VecDeque<(u64, u64)>,
    /// Deliveries that were leased, attempted or redelivered, by sequence number. Boxed: a
    /// B-tree node has room for eleven values, and most subscriptions have one touched
    /// delivery (the one in flight), so this keeps an idle node small.
    touched: BTreeMap<u64, Box<Delivery>>,
    /// `(available_at(delivery), seq)` for every touched delivery.
    available: BTreeSet<(u64, u64)>,
    /// The pending deliveries' events' sizes, summed (the subscription's backlog in bytes).
    bytes: u64,
}

fn available_at(delivery: &Delivery) -> u64 {
    delivery.next_attempt_at.max(delivery.leased_until)
}

/// Where the oldest pending delivery is.
enum Head {
    Fresh { seq: u64, accepted_at: u64 },
    Touched { seq: u64, available_at: u64 },
}

impl Pending {
    /// Queues the delivery of a newly accepted event of `bytes` (sequence numbers arrive
    /// in order).
    pub(super) fn push(&mut self, seq: u64, accepted_at: u64, bytes: u64) {
        insert_by_seq(&mut self.fresh, seq, accepted_at);
        self.bytes += bytes;
    }

    /// Puts a delivery with its state (a retry, a redelivered dead letter) of an event of
    /// `bytes` into the queue.
    pub(super) fn insert(&mut self, delivery: Delivery, bytes: u64) {
        if !self.put(delivery) {
            self.bytes += bytes;
        }
    }

    /// The sizes of the pending deliveries' events, summed.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// A delivery of an event of `bytes` left the queue (by [`Pending::remove`] or
    /// [`Pending::remove_all`]).
    pub(super) fn forget_bytes(&mut self, bytes: u64) {
        self.bytes = self.bytes.saturating_sub(bytes);
    }

    /// Puts a touched delivery into the queue; whether it was in it already.
    fn put(&mut self, delivery: Delivery) -> bool {
        let was_fresh = self.remove_fresh(delivery.seq).is_some();
        self.available
            .insert((available_at(&delivery), delivery.seq));
        match self.touched.insert(delivery.seq, Box::new(delivery)) {
            Some(old) => {
                self.available.remove(&(available_at(&old), old.seq));
                true
            }
            None => was_fresh,
        }
    }

    /// Takes the delivery of event `seq` out of the queue.
    pub(super) fn remove(&mut self, subscription: &str, seq: u64) -> Option<Delivery> {
        if let Some(delivery) = self.touched.remove(&seq) {
            self.available.remove(&(available_at(&delivery), seq));
            return Some(*delivery);
        }
        let accepted_at = self.remove_fresh(seq)?;
        Some(Delivery::new(subscription.to_owned(), seq, accepted_at))
    }

    /// Up to `limit` pending events' sequence numbers after `after`, in acceptance order.
    pub(super) fn seqs_after(&self, after: Option<u64>, limit: usize) -> Vec<u64> {
        let first = after.map_or(0, |a| a.saturating_add(1));
        let start = self.fresh.partition_point(|(s, _)| *s < first);
        let mut fresh = self.fresh.range(start..).map(|(s, _)| *s).peekable();
        let mut touched = self.touched.range(first..).map(|(s, _)| *s).peekable();
        let mut seqs = Vec::new();
        while seqs.len() < limit {
            let next = match (fresh.peek(), touched.peek()) {
                (Some(f), Some(t)) if f < t => fresh.next(),
                (Some(_), None) => fresh.next(),
                (_, Some(_)) => touched.next(),
                (None, None) => None,
            };
            let Some(seq) = next else { break };
            seqs.push(seq);
        }
        seqs
    }

    /// Takes the deliveries of the events `seqs` (sorted) out of the queue, in one pass.
    pub(super) fn remove_all(&mut self, subscription: &str, seqs: &[u64]) -> Vec<Delivery> {
        let mut taken = Vec::new();
        for seq in seqs {
            if let Some(delivery) = self.touched.remove(seq) {
                self.available.remove(&(available_at(&delivery), *seq));
                taken.push(*delivery);
            }
        }
        self.fresh.retain(|&(seq, accepted_at)| {
            let chosen = seqs.binary_search(&seq).is_ok();
            if chosen {
                taken.push(Delivery::new(subscription.to_owned(), seq, accepted_at));
            }
            !chosen
        });
        taken
    }

    fn remove_fresh(&mut self, seq: u64) -> Option<u64> {
        let at = self.fresh.binary_search_by_key(&seq, |(s, _)| *s).ok()?;
        self.fresh.remove(at).map(|(_, accepted_at)| accepted_at)
    }

    pub(super) fn len(&self) -> usize {
        self.fresh.len() + self.touched.len()
    }

    /// The oldest pending event's sequence number.
    pub(super) fn first_seq(&self) -> Option<u64> {
        self.head().map(|head| match head {
            Head::Fresh { seq, .. } | Head::Touched { seq, .. } => seq,
        })
    }

    fn head(&self) -> Option<Head> {
        let fresh = self
            .fresh
            .front()
            .map(|&(seq, accepted_at)| Head::Fresh { seq, accepted_at });
        let touched = self.touched.values().next().map(|d| Head::Touched {
            seq: d.seq,
            available_at: available_at(d),
        });
        match (fresh, touched) {
            (Some(Head::Fresh { seq, accepted_at }), Some(Head::Touched { seq: other, .. }))
                if seq < other =>
            {
                Some(Head::Fresh { seq, accepted_at })
            }
            (fresh, None) => fresh,
            (_, touched) => touched,
        }
    }

    /// Whether an event with a sequence number in `first..next` has a pending delivery here.
    pub(super) fn has_any_in(&self, first: u64, next: u64) -> bool {
        let at = self.fresh.partition_point(|(s, _)| *s < first);
        self.fresh.get(at).is_some_and(|(s, _)| *s < next)
            || self.touched.range(first..next).next().is_some()
    }

    /// Every pending delivery, in acceptance order.
    pub(super) fn deliveries<'a>(
        &'a self,
        subscription: &'a str,
    ) -> impl Iterator<Item = Delivery> + 'a {
        let mut fresh = self.fresh.iter().peekable();
        let mut touched = self.touched.values().peekable();
        std::iter::from_fn(move || {
            let from_fresh = match (fresh.peek(), touched.peek()) {
                (Some((seq, _)), Some(delivery)) => *seq < delivery.seq,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => return None,
            };
            if from_fresh {
                let &(seq, accepted_at) = fresh.next()?;
                Some(Delivery::new(subscription.to_owned(), seq, accepted_at))
            } else {
                touched.next().map(|delivery| Delivery::clone(delivery))
            }
        })
    }

    /// Leases up to `limit` available deliveries until `now + lease_ms`: when `ordered`, the
    /// oldest and those after it in a row, as long as each is available (so nothing while
    /// the oldest is leased or waits for its retry, and never one after a delivery that is
    /// not available); else the earliest available. Each gets the next token of `tokens`.
    pub(super) fn lease(
        &mut self,
        subscription: &str,
        now: u64,
        lease_ms: u64,
        limit: usize,
        ordered: bool,
        tokens: &mut u64,
    ) -> Vec<Delivery> {
        let mut in_a_row = if ordered {
            self.oldest_available(now, limit).into_iter()
        } else {
            Vec::new().into_iter()
        };
        let mut leased = Vec::new();
        while leased.len() < limit {
            let seq = if ordered {
                match in_a_row.next() {
                    Some(seq) => seq,
                    None => break,
                }
            } else {
                let touched = self.available.first().filter(|(at, _)| *at <= now);
                let fresh = self
                    .fresh
                    .front()
                    .filter(|(_, at)| *at <= now)
                    .map(|&(seq, at)| (at, seq));
                match (touched, fresh) {
                    (Some(&t), Some(f)) => t.min(f).1,
                    (Some(&(_, seq)), None) | (None, Some((_, seq))) => seq,
                    (None, None) => break,
                }
            };
            let mut delivery = self
                .remove(subscription, seq)
                .expect("the head is in the queue");
            if delivery.leased_until != 0 {
                // An earlier lease ran out: its holder may have made an attempt (a pull
                // consumer had the event), so it counts as one.
                delivery.attempts += 1;
            }
            delivery.leased_until = now + lease_ms;
            *tokens += 1;
            delivery.lease = *tokens;
            leased.push(delivery.clone());
            self.put(delivery);
        }
        leased
    }

    /// The sequence numbers of up to `limit` deliveries from the oldest on, in acceptance
    /// order, as long as each is available at `now`.
    fn oldest_available(&self, now: u64, limit: usize) -> Vec<u64> {
        let mut fresh = self.fresh.iter().peekable();
        let mut touched = self.touched.values().peekable();
        let mut seqs = Vec::new();
        while seqs.len() < limit {
            let from_fresh = match (fresh.peek(), touched.peek()) {
                (Some((seq, _)), Some(delivery)) => *seq < delivery.seq,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let (seq, available) = if from_fresh {
                let Some(&(seq, accepted_at)) = fresh.next() else {
                    break;
                };
                (seq, accepted_at <= now)
            } else {
                let Some(delivery) = touched.next() else {
                    break;
                };
                (delivery.seq, available_at(delivery) <= now)
            };
            if !available {
                break;
            }
            seqs.push(seq);
        }
        seqs
    }

    /// Lease `token` until `until` of the delivery of `seq`, read back from the log (a
    /// lease held outside the hub): as [`Pending::lease`] made it, a lease before it that
    /// ran out counting as an attempt. A delivery that holds this lease or a later one (the
    /// live hub, which made it) is left as it is.
    pub(super) fn relet(&mut self, subscription: &str, seq: u64, token: u64, until: u64) {
        let current = match self.touched.get(&seq) {
            Some(delivery) => delivery.lease,
            None if self.fresh.binary_search_by_key(&seq, |(s, _)| *s).is_ok() => 0,
            None => return,
        };
        if current >= token {
            return;
        }
        let mut delivery = self
            .remove(subscription, seq)
            .expect("the delivery is in the queue");
        if delivery.leased_until != 0 {
            delivery.attempts += 1;
        }
        delivery.leased_until = until;
        delivery.lease = token;
        self.put(delivery);
    }

    /// Whether a result made under lease `token` for the delivery of `seq` may be
    /// recorded: the delivery is held under that lease, or it is not pending any more (the
    /// result will be ignored).
    pub(super) fn holds(&self, seq: u64, token: u64) -> bool {
        match self.touched.get(&seq) {
            Some(_) => self.still_leased(seq, token),
            // A fresh delivery was never leased; otherwise it is finished or retired.
            None => self.fresh.binary_search_by_key(&seq, |(s, _)| *s).is_err(),
        }
    }

    /// Whether lease `token` holds the delivery of `seq` now (not yet spent on a result).
    fn still_leased(&self, seq: u64, token: u64) -> bool {
        self.touched
            .get(&seq)
            .is_some_and(|d| token != 0 && d.lease == token && d.leased_until != u64::MAX)
    }

    /// Extends lease `token` on the delivery of `seq` to `until`, if it holds it.
    pub(super) fn renew(&mut self, subscription: &str, seq: u64, token: u64, until: u64) -> bool {
        if !self.still_leased(seq, token) {
            return false;
        }
        let mut delivery = self.remove(subscription, seq).expect("it is touched");
        delivery.leased_until = until;
        self.put(delivery);
        true
    }

    /// Ends lease `token` on the delivery of `seq` unused, if it holds it: the delivery is
    /// available again as if it had not been leased (its next lease counts no attempt).
    pub(super) fn release(&mut self, subscription: &str, seq: u64, token: u64) -> bool {
        if !self.still_leased(seq, token) {
            return false;
        }
        let mut delivery = self.remove(subscription, seq).expect("it is touched");
        delivery.leased_until = 0;
        delivery.lease = 0;
        self.put(delivery);
        true
    }

    /// Takes the delivery of `seq`, whose result is on its way to the log, out of reach:
    /// no lease until the result is applied, and its token is spent until
    /// [`Pending::restore`] gives it back. When its lease would have ended, if it is
    /// touched.
    pub(super) fn take_result(&mut self, subscription: &str, seq: u64) -> Option<u64> {
        if !self.touched.contains_key(&seq) {
            return None;
        }
        let mut delivery = self.remove(subscription, seq).expect("it is touched");
        let until = delivery.leased_until;
        delivery.leased_until = u64::MAX;
        self.put(delivery);
        Some(until)
    }

    /// Gives a taken delivery back to lease `token` until `until` (its result could not be
    /// written): its holder may record the result again while the lease lasts; after it
    /// the delivery is leased again, the lapsed lease counting as an attempt.
    pub(super) fn restore(&mut self, subscription: &str, seq: u64, token: u64, until: u64) {
        let taken = self
            .touched
            .get(&seq)
            .is_some_and(|d| d.lease == token && d.leased_until == u64::MAX);
        if !taken {
            return;
        }
        let mut delivery = self.remove(subscription, seq).expect("it is touched");
        delivery.leased_until = until;
        self.put(delivery);
    }

    /// How many deliveries are leased at `now` (in flight, or locked by pull consumers).
    pub(super) fn leased(&self, now: u64) -> u64 {
        self.touched
            .values()
            .filter(|d| d.lease != 0 && d.leased_until > now)
            .count() as u64
    }

    /// When the next delivery becomes available (for an ordered queue: its oldest).
    pub(super) fn next_due(&self, ordered: bool) -> Option<u64> {
        if ordered {
            return self.head().map(|head| match head {
                Head::Fresh { accepted_at, .. } => accepted_at,
                Head::Touched { available_at, .. } => available_at,
            });
        }
        let touched = self.available.first().map(|(at, _)| *at);
        let fresh = self.fresh.front().map(|(_, at)| *at);
        match (touched, fresh) {
            (Some(t), Some(f)) => Some(t.min(f)),
            (t, f) => t.or(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqs(deliveries: &[Delivery]) -> Vec<u64> {
        deliveries.iter().map(|d| d.seq).collect()
    }

    #[test]
    fn fresh_and_touched_deliveries_stay_in_acceptance_order() {
        let mut queue = Pending::default();
        for seq in [1, 2, 4, 5] {
            queue.push(seq, 100, 10);
        }
        queue.push(3, 100, 10);
        let mut retried = Delivery::new("s".into(), 2, 100);
        retried.attempts = 1;
        retried.next_attempt_at = 500;
        queue.insert(retried, 10);
        let all: Vec<Delivery> = queue.deliveries("s").collect();
        assert_eq!(seqs(&all), [1, 2, 3, 4, 5]);
        assert_eq!(all[1].attempts, 1);
        assert_eq!(queue.len(), 5);
        assert!(queue.has_any_in(2, 3) && queue.has_any_in(3, 4) && !queue.has_any_in(6, 9));

        assert_eq!(queue.remove("s", 1).map(|d| d.seq), Some(1));
        assert_eq!(queue.first_seq(), Some(2));
        assert_eq!(
            queue.next_due(true),
            Some(500),
            "the ordered head waits for its retry"
        );
        assert_eq!(queue.next_due(false), Some(100));
        let mut tokens = 0;
        assert!(queue.lease("s", 200, 1000, 5, true, &mut tokens).is_empty());
        let leased = queue.lease("s", 200, 1000, 5, false, &mut tokens);
        assert_eq!(seqs(&leased), [3, 4, 5]);
        assert_eq!(
            leased.iter().map(|d| d.lease).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(queue.next_due(false), Some(500));
        assert_eq!(
            seqs(&queue.lease("s", 600, 1000, 5, false, &mut tokens)),
            [2]
        );
        assert!(!queue.holds(3, 2), "another lease's token");
        assert!(!queue.holds(2, 0), "no token");
        queue.push(6, 100, 10);
        assert!(!queue.holds(6, 1), "never leased");
        assert!(queue.holds(3, 1));
        let until = queue.take_result("s", 3).unwrap();
        assert!(!queue.holds(3, 1), "a token is spent once");
        assert!(queue.holds(9, 1), "not pending: its result is ignored");
        assert!(
            queue
                .lease("s", 5000, 1000, 5, false, &mut tokens)
                .iter()
                .all(|d| d.seq != 3),
            "a taken result is not leased again before it is applied"
        );
        queue.restore("s", 3, 2, until);
        assert!(!queue.holds(3, 1), "restored to its own lease only");
        queue.restore("s", 3, 1, until);
        assert!(
            queue.holds(3, 1),
            "a result that was not written may be recorded again"
        );
        let again = queue.lease("s", until + 1, 1000, 5, false, &mut tokens);
        assert_eq!(
            again.iter().find(|d| d.seq == 3).map(|d| d.attempts),
            Some(1),
            "after its lease it is leased again, the lapsed lease counting as an attempt"
        );
        assert_eq!(queue.len(), 5);
        assert_eq!(queue.remove("s", 9), None);
    }
}
