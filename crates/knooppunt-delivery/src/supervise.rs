//! No panic may leave work stuck. A panic inside one delivery attempt is caught and
//! recorded as that attempt's result (a dead letter saying what failed), so its lease is
//! never left to hold an ordered queue, and the event is never retried into the same panic
//! forever. A panic in a worker's own loop restarts the worker. Both are counted, and a
//! worker that stops turning (or an attempt that outlives its lease) is reported as stuck.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

/// A future that turns a panic while it is polled into `Err` with the panic's message.
pub struct CatchUnwind<F>(Pin<Box<F>>);

impl<F> std::fmt::Debug for CatchUnwind<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CatchUnwind")
    }
}

impl<F: Future> CatchUnwind<F> {
    pub fn new(future: F) -> Self {
        CatchUnwind(Box::pin(future))
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

/// What a panic said.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// How the workers fare, for readiness and the metrics.
#[derive(Debug, Default)]
pub(crate) struct Supervision {
    /// Attempts that panicked (each recorded as a dead letter).
    pub(crate) attempt_panics: AtomicU64,
    /// Worker loops that panicked and were started again.
    pub(crate) worker_restarts: AtomicU64,
}

/// The workers' health: what `/readyz` and `/metrics` show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerHealth {
    /// Delivery attempts that panicked since the hub started (each became a dead letter).
    pub attempt_panics: u64,
    /// Worker loops that panicked and were started again.
    pub worker_restarts: u64,
    /// Subscriptions whose worker is stuck now: its loop has not turned, or an attempt has
    /// run, for longer than a lease (the deliveries it holds are leased again when their
    /// leases run out).
    pub stuck: Vec<String>,
    /// The hubs sharing each subscription's slots and granted rate, this one included, as
    /// this hub last heard (1 on the embedded store).
    pub hubs: usize,
}

impl Supervision {
    pub(crate) fn attempt_panicked(&self) {
        self.attempt_panics.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn worker_restarted(&self) {
        self.worker_restarts.fetch_add(1, Ordering::Relaxed);
    }
}

/// What a worker shows of itself, for [`crate::Deliverer::health`]: when its loop last
/// turned, when its oldest attempt in flight began, and how long either may take.
#[derive(Debug, Default)]
pub(crate) struct Heartbeat {
    /// Milliseconds since the Unix epoch.
    pub(crate) turned_at: AtomicU64,
    /// Milliseconds since the Unix epoch; 0 when no attempt is in flight.
    pub(crate) oldest_attempt_at: AtomicU64,
    /// The longest a turn may take (a lease, spacing and idle polls).
    pub(crate) turn_limit_ms: AtomicU64,
    /// The longest an attempt may take: its lease.
    pub(crate) lease_ms: AtomicU64,
    /// Milliseconds since the Unix epoch since when the queue has not moved although it
    /// could (see [`Heartbeat::stalled`]); 0 while it moves.
    pub(crate) stalled_since: AtomicU64,
}

impl Heartbeat {
    /// Whether the worker is stuck at `now`.
    pub(crate) fn stuck(&self, now: u64) -> bool {
        let turned = self.turned_at.load(Ordering::Relaxed);
        let oldest = self.oldest_attempt_at.load(Ordering::Relaxed);
        let turn_limit = self.turn_limit_ms.load(Ordering::Relaxed);
        let lease = self.lease_ms.load(Ordering::Relaxed);
        let stalled = self.stalled_since.load(Ordering::Relaxed);
        (turned != 0 && now.saturating_sub(turned) > turn_limit)
            || (oldest != 0 && now.saturating_sub(oldest) > lease)
            || (stalled != 0 && now.saturating_sub(stalled) > lease)
    }

    /// Takes note of what an idle turn with a free slot and an open sink found: the queue's
    /// next delivery due at `due`. A queue does not move when a delivery is due and none
    /// could be leased, or when the next one is due later than any retry can be scheduled
    /// (an event's `ttl` and a lease from now): held by something that will never end it.
    pub(crate) fn idle_turn(&self, now: u64, due: Option<u64>, horizon_ms: u64) {
        let stalled = due.is_some_and(|due| due <= now || due - now > horizon_ms);
        if !stalled {
            self.moved();
        } else if self.stalled_since.load(Ordering::Relaxed) == 0 {
            self.stalled_since.store(now, Ordering::Relaxed);
        }
    }

    /// The queue moved (a delivery was leased, or it has nothing to do).
    pub(crate) fn moved(&self) {
        self.stalled_since.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_an_error_with_its_message() {
        let caught = CatchUnwind::new(async {
            tokio::task::yield_now().await;
            if true {
                panic!("recursion limit exceeded");
            }
            1
        })
        .await;
        assert_eq!(caught, Err("recursion limit exceeded".to_owned()));
        let formatted = CatchUnwind::new(async { panic!("at {}", 3) }).await;
        assert_eq!(formatted, Err::<(), _>("at 3".to_owned()));
        assert_eq!(CatchUnwind::new(async { 2 }).await, Ok(2));
    }
}
