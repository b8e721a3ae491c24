//! A subscription's retained events, read again: the resumable stream (a consumer keeps its
//! own position, an opaque cursor) and replays (a window of them queued once more).
//!
//! Which events are a subscription's is decided now, not when they were accepted: the
//! retained events in acceptance order ([`Store::events_after`]) that its filters match and
//! its grants admit as they are now. A position older than what the retention sweep kept
//! ([`Store::swept_through`]) is refused with the oldest one still complete, so a consumer
//! knows it missed events.

use std::sync::Arc;
use std::time::Duration;

use knooppunt_delivery::Deliverer;
use knooppunt_event::format::json::decode_event;
use knooppunt_filter::{Criteria, EvalLimits, Meter};
use knooppunt_store::{Store, StoreError, StoredEvent, Subscription};

use crate::approvals::Approvals;
use crate::lifecycle::Subscriptions;

/// The most events one read looks at (matching or not) before it answers with what it
/// found and the position it reached.
const SCAN: usize = 5_000;
/// Events read from the store at a time.
const CHUNK: usize = 500;

/// A page of the stream: the matching events and the position after them.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) events: Vec<Arc<StoredEvent>>,
    /// Where to continue: the last event looked at (not necessarily one returned).
    pub(crate) next: u64,
}

/// Why a read was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HistoryRefused {
    #[error("there is no such subscription")]
    NoSubscription,
    /// Events after the position were removed by retention; `oldest` is the oldest position
    /// from which nothing is missing.
    #[error("events after this position are no longer retained")]
    Expired { oldest: u64 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Reads subscriptions' retained events.
pub(crate) struct History {
    store: Arc<dyn Store>,
    subscriptions: Arc<Subscriptions>,
    approvals: Arc<Approvals>,
    deliverer: Deliverer,
    eval_limits: EvalLimits,
    idle_poll: Duration,
}

impl History {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        subscriptions: Arc<Subscriptions>,
        approvals: Arc<Approvals>,
        deliverer: Deliverer,
        eval_limits: EvalLimits,
    ) -> History {
        let idle_poll = deliverer.options().idle_poll;
        History {
            store,
            subscriptions,
            approvals,
            deliverer,
            eval_limits,
            idle_poll,
        }
    }

    /// Up to `limit` of subscription `id`'s events after position `after` (from the oldest
    /// retained when `None`), waiting up to `wait` when there are none yet.
    pub(crate) async fn read(
        &self,
        id: &str,
        after: Option<u64>,
        limit: usize,
        wait: Duration,
    ) -> Result<Page, HistoryRefused> {
        let (subscription, criteria) = self
            .subscriptions
            .with_criteria(id)
            .ok_or(HistoryRefused::NoSubscription)?;
        let swept = self.store.swept_through().await?;
        let after = match after {
            Some(after) if after < swept => return Err(HistoryRefused::Expired { oldest: swept }),
            Some(after) => after,
            None => swept,
        };
        let deadline = tokio::time::Instant::now() + wait;
        let wake = self.deliverer.watch(id);
        loop {
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let page = self.scan(&subscription, &criteria, after, limit).await?;
            if !page.events.is_empty() || page.next != after {
                return Ok(page);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(page);
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline.min(now + self.idle_poll)) => {}
            }
        }
    }

    /// Looks at up to [`SCAN`] events after `after`, keeping those of the subscription.
    async fn scan(
        &self,
        subscription: &Subscription,
        criteria: &Criteria,
        after: u64,
        limit: usize,
    ) -> Result<Page, StoreError> {
        let mut page = Page {
            events: Vec::new(),
            next: after,
        };
        let mut looked = 0;
        while looked < SCAN && page.events.len() < limit {
            let chunk = self.store.events_after(page.next, CHUNK).await?;
            let Some(last) = chunk.last() else { break };
            let last = last.seq;
            for event in chunk {
                looked += 1;
                page.next = event.seq;
                if self.is_for(subscription, criteria, &event) {
                    page.events.push(event);
                    if page.events.len() == limit {
                        return Ok(page);
                    }
                }
            }
            debug_assert_eq!(page.next, last);
            tokio::task::yield_now().await;
        }
        Ok(page)
    }

    /// Whether `event` is one the subscription receives now: its filters match and its
    /// grants admit it.
    pub(crate) fn is_for(
        &self,
        subscription: &Subscription,
        criteria: &Criteria,
        event: &StoredEvent,
    ) -> bool {
        let Ok(received) = decode_event(event.json.as_bytes()) else {
            return false;
        };
        let decoded = match &event.extension_types {
            Some(types) => received.event.with_extension_types_text(types),
            None => received.event,
        };
        criteria.matches_metered(&decoded, &mut Meter::new(self.eval_limits))
            && self
                .approvals
                .admits(&subscription.id, decoded.source(), decoded.ty())
    }
}
