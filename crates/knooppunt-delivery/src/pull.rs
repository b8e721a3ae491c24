//! Pull delivery: the consumer fetches its events instead of the hub sending them.
//!
//! `receive` leases due deliveries for the subscription's lock duration, exactly as a push
//! worker leases them for one attempt; the lease token, with the event's number, is the
//! consumer's lock token. Settling a token records an attempt under that lease:
//! `acknowledge` delivers, `release` retries after a delay, `reject` makes a dead letter
//! with the consumer's reason; `renew` extends the lease. A lock that runs out frees the
//! event for the next `receive` and counts as an attempt (the store's rule for every lease),
//! so `maxAttempts` and `ttl` bound pull subscriptions as they bound push ones: an event past
//! either becomes a dead letter when it would be handed out again.

use std::sync::Arc;
use std::time::Duration;

use knooppunt_store::{
    Attempt, Delivery, DeliveryChange, StoreError, StoredEvent, Subscription, Verdict,
};
use tokio::sync::Notify;

use crate::engine::{Deliverer, now_ms};
use crate::state::LastDelivery;

/// The most events one `receive` hands out.
pub const MAX_RECEIVE: usize = 100;
/// The longest a `receive` waits for events.
pub const MAX_WAIT: Duration = Duration::from_secs(60);
/// The longest delay of a `release`.
pub const MAX_RELEASE_DELAY: Duration = Duration::from_secs(3600);

/// An event handed to a pull consumer under a lock.
#[derive(Debug, Clone)]
pub struct Received {
    pub lock_token: String,
    /// How many times the event was handed out, this time included.
    pub delivery_count: u32,
    /// The replay that queued it again, if one did.
    pub replay: Option<String>,
    pub event: Arc<StoredEvent>,
}

/// What a consumer does with the events it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// It processed them: they are delivered.
    Acknowledge,
    /// It gives them back: they are handed out again after `delay`.
    Release { delay: Duration },
    /// It cannot process them: they become dead letters with this reason.
    Reject { reason: String },
    /// It needs longer: their locks last another lock duration from now.
    Renew,
}

impl Settlement {
    fn label(&self) -> &'static str {
        match self {
            Settlement::Acknowledge => "acknowledged",
            Settlement::Release { .. } => "released",
            Settlement::Reject { .. } => "rejected",
            Settlement::Renew => "renewed",
        }
    }
}

/// Why a lock token could not be settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenProblem {
    /// Not a lock token of this hub.
    Malformed,
    /// The lock ran out (or the event was handed out again since): the event is still
    /// pending and comes again.
    Expired,
    /// The subscription has no such pending event: it was settled already, or the token is
    /// not one it handed out.
    Unknown,
}

impl TokenProblem {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenProblem::Malformed => "malformed",
            TokenProblem::Expired => "expired",
            TokenProblem::Unknown => "unknown",
        }
    }

    /// What it means for the consumer.
    pub fn detail(self) -> &'static str {
        match self {
            TokenProblem::Malformed => "this is not a lock token the hub handed out",
            TokenProblem::Expired => {
                "the lock ran out: the event is handed out again (perhaps already to another \
                 consumer); settle it under its new lock token"
            }
            TokenProblem::Unknown => {
                "the subscription has no pending event under this token: it was settled already"
            }
        }
    }
}

/// A lock token: the event's number and the lease it is held under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LockToken {
    seq: u64,
    lease: u64,
}

impl LockToken {
    fn of(delivery: &Delivery) -> String {
        format!("{}.{}", delivery.seq, delivery.lease)
    }

    fn parse(text: &str) -> Option<LockToken> {
        let (seq, lease) = text.split_once('.')?;
        let digits =
            |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(seq) || !digits(lease) {
            return None;
        }
        Some(LockToken {
            seq: seq.parse().ok()?,
            lease: lease.parse().ok().filter(|&lease| lease != 0)?,
        })
    }
}

impl Deliverer {
    /// Hands up to `max` of the subscription's due events to a consumer, each locked for the
    /// subscription's `lockDuration`, in acceptance order (an ordered subscription: its
    /// oldest, and only once the one before was settled). When none is due it waits up to
    /// `wait` for one. Events past `maxAttempts` or `ttl` become dead letters instead.
    ///
    /// `generation` is [`Deliverer::cuts_of`] the subscription, read before the caller
    /// checked that it may receive: when a cut came since ([`Deliverer::cut`]), nothing is
    /// handed out (what was leased is given back) and the answer is empty.
    pub async fn receive(
        &self,
        subscription: &Subscription,
        max: usize,
        wait: Duration,
        generation: u64,
    ) -> Result<Vec<Received>, StoreError> {
        let config = subscription.delivery_config();
        let ordered = config.ordering == knooppunt_store::Ordering::Ordered;
        let lock_ms = config.lock_duration.as_millis() as u64;
        // An ordered subscription hands out its oldest event alone: a consumer that
        // released it while settling a later one would break the order.
        let max = if ordered {
            1
        } else {
            max.clamp(1, MAX_RECEIVE)
        };
        let deadline = tokio::time::Instant::now() + wait.min(MAX_WAIT);
        let wake = self.watch(&subscription.id);
        let mut closing = self.closing();
        let store = &self.inner.queue();
        let cut = self.inner.cut_of(&subscription.id);
        loop {
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let now = now_ms();
            let leased = store
                .lease(&subscription.id, now, lock_ms, max, ordered)
                .await?;
            // Held by the consumer from now on: kept, so that a crash of the hub neither
            // hands out their tokens again nor forgets that they count.
            if !leased.is_empty() {
                store
                    .record(vec![DeliveryChange::Leased {
                        subscription: subscription.id.clone(),
                        leases: leased
                            .iter()
                            .map(|d| (d.seq, d.lease, d.leased_until))
                            .collect(),
                    }])
                    .await?;
            }
            let mut handed = Vec::with_capacity(leased.len());
            let mut handed_leases = Vec::with_capacity(leased.len());
            let mut given_up = Vec::new();
            for delivery in leased {
                let event = store.event(delivery.seq).await?;
                let reason = match &event {
                    None => Some("the event is no longer kept".to_owned()),
                    Some(_) if delivery.attempts >= config.max_attempts => Some(format!(
                        "maxAttempts ({}) exhausted: the event was handed out that often \
                         and never acknowledged (locks ran out or it was released)",
                        config.max_attempts
                    )),
                    Some(event)
                        if now
                            > event
                                .accepted_at
                                .saturating_add(config.ttl.as_millis() as u64) =>
                    {
                        Some(
                            "ttl exhausted: the event was not acknowledged within its time to live"
                                .to_owned(),
                        )
                    }
                    Some(_) => None,
                };
                match (reason, event) {
                    (None, Some(event)) => {
                        handed_leases.push((delivery.seq, delivery.lease));
                        handed.push(Received {
                            lock_token: LockToken::of(&delivery),
                            delivery_count: delivery.attempts + 1,
                            replay: delivery.replay.clone(),
                            event,
                        });
                    }
                    (reason, _) => given_up.push(DeliveryChange::Attempted(Attempt {
                        subscription: subscription.id.clone(),
                        seq: delivery.seq,
                        lease: delivery.lease,
                        at: now,
                        status: None,
                        error: delivery.last_error.clone(),
                        verdict: Verdict::DeadLetter {
                            reason: reason.unwrap_or_default(),
                        },
                        receipt: false,
                    })),
                }
            }
            let gave_up = !given_up.is_empty();
            if gave_up {
                self.inner.observer().settled("deadLetter", given_up.len());
                for change in &given_up {
                    if let DeliveryChange::Attempted(Attempt {
                        verdict: Verdict::DeadLetter { reason },
                        ..
                    }) = change
                    {
                        self.inner
                            .observer()
                            .dead_lettered(&subscription.id, reason);
                    }
                }
            }
            for change in given_up {
                record_once(self, change).await?;
            }
            if !handed.is_empty() {
                let (_handing, uncut) = cut.enter(generation);
                if !uncut {
                    // Cut meanwhile: given back (gone if it was withdrawn), handed to nobody.
                    store.release(&subscription.id, &handed_leases).await?;
                    return Ok(Vec::new());
                }
                self.inner.observer().received(handed.len());
                return Ok(handed);
            }
            if gave_up {
                continue;
            }
            let poll = deadline.min(tokio::time::Instant::now() + self.inner.options().idle_poll);
            if tokio::time::Instant::now() >= deadline || *closing.borrow_and_update() {
                return Ok(handed);
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(poll) => {}
                _ = closing.changed() => return Ok(handed),
            }
        }
    }

    /// Settles the events held under `tokens` as `how` says; per token, in order, whether
    /// it was settled (`Ok`) or why not.
    pub async fn settle(
        &self,
        subscription: &Subscription,
        tokens: &[String],
        how: &Settlement,
    ) -> Result<Vec<Result<(), TokenProblem>>, StoreError> {
        let config = subscription.delivery_config();
        let id = subscription.id.as_str();
        let store = &self.inner.queue();
        let now = now_ms();
        let until = now + config.lock_duration.as_millis() as u64;
        let mut results = Vec::with_capacity(tokens.len());
        let mut held = Vec::new();
        for (at, text) in tokens.iter().enumerate() {
            let Some(token) = LockToken::parse(text) else {
                results.push(Err(TokenProblem::Malformed));
                continue;
            };
            // Renewing is also how a token is checked: the event stays locked while its
            // result is recorded.
            if store.renew(id, token.seq, token.lease, until).await? {
                results.push(Ok(()));
                held.push((at, token));
            } else {
                results.push(Err(self.why_not_held(id, token.seq).await?));
            }
        }
        if *how != Settlement::Renew && !held.is_empty() {
            let change = |token: &LockToken| {
                let verdict = match how {
                    Settlement::Acknowledge | Settlement::Renew => Verdict::Delivered,
                    Settlement::Release { delay } => Verdict::Retry {
                        next_attempt_at: now + delay.min(&MAX_RELEASE_DELAY).as_millis() as u64,
                    },
                    Settlement::Reject { reason } => Verdict::DeadLetter {
                        reason: format!("rejected by the consumer: {reason}"),
                    },
                };
                DeliveryChange::Attempted(Attempt {
                    subscription: id.to_owned(),
                    seq: token.seq,
                    lease: token.lease,
                    at: now,
                    status: None,
                    error: match how {
                        Settlement::Release { .. } => Some("released by the consumer".into()),
                        Settlement::Reject { reason } => Some(reason.clone()),
                        _ => None,
                    },
                    verdict,
                    receipt: self.inner.options().receipts,
                })
            };
            let changes: Vec<DeliveryChange> =
                held.iter().map(|(_, token)| change(token)).collect();
            match store.record(changes).await {
                Ok(()) => {}
                // Another call settled one of them meanwhile: record them one by one.
                Err(StoreError::StaleLease { .. }) => {
                    for (at, token) in &held {
                        match store.record(vec![change(token)]).await {
                            Ok(()) => {}
                            Err(StoreError::StaleLease { .. }) => {
                                results[*at] = Err(self.why_not_held(id, token.seq).await?);
                            }
                            Err(error) => return Err(error),
                        }
                    }
                }
                Err(error) => return Err(error),
            }
        }
        let settled = results.iter().filter(|r| r.is_ok()).count();
        if settled > 0 {
            self.inner.observer().settled(how.label(), settled);
        }
        if settled > 0 && *how != Settlement::Renew {
            if let (Settlement::Acknowledge, Some((_, last))) = (how, held.last()) {
                self.inner.remember_last(
                    id,
                    LastDelivery {
                        at: now,
                        seq: last.seq,
                        status: None,
                        error: None,
                        outcome: "delivered",
                        duration_ms: None,
                        answer: None,
                    },
                );
            }
            // The next event of an ordered subscription, or a released one, is free now.
            self.watch(id).notify_waiters();
        }
        Ok(results)
    }

    /// Why the subscription's event `seq` is not held under the token a consumer sent.
    async fn why_not_held(&self, subscription: &str, seq: u64) -> Result<TokenProblem, StoreError> {
        let pending = self
            .inner
            .queue()
            .pending_seqs(subscription, seq.checked_sub(1), 1)
            .await?;
        Ok(if pending.first() == Some(&seq) {
            TokenProblem::Expired
        } else {
            TokenProblem::Unknown
        })
    }

    /// What a reader waiting for this subscription's events (a pull `receive`, a stream)
    /// wakes up to: notified whenever events are queued for it (or settled, for pull).
    pub fn watch(&self, subscription: &str) -> Arc<Notify> {
        self.inner.watcher(subscription)
    }
}

/// Records a change whose lease may have been taken meanwhile (then the other holder's
/// result counts).
async fn record_once(deliverer: &Deliverer, change: DeliveryChange) -> Result<(), StoreError> {
    match deliverer.inner.queue().record(vec![change]).await {
        Ok(()) | Err(StoreError::StaleLease { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_tokens_round_trip_and_strangers_are_refused() {
        let mut delivery = Delivery::new("s".into(), 42, 0);
        delivery.lease = 7;
        let text = LockToken::of(&delivery);
        assert_eq!(
            LockToken::parse(&text),
            Some(LockToken { seq: 42, lease: 7 })
        );
        for bad in [
            "",
            "42",
            "42.",
            ".7",
            "42.0",
            "a.7",
            "42.7.1",
            "-1.7",
            "42.+7",
            "99999999999999999999999.1",
        ] {
            assert_eq!(LockToken::parse(bad), None, "{bad}");
        }
    }
}
