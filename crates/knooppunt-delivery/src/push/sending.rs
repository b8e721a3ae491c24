//! A worker's sending slots and its attempts in flight.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

use tokio::sync::Notify;
use tokio::task::JoinSet;

use knooppunt_store::now_ms;

/// How many of a worker's attempts are sending. An attempt holds a slot from its lease
/// until the sink's answer (or the failure) is known, and gives it back before its result
/// is recorded: recording waits for the store's sync, which need not hold back the sink's
/// next request. A result lost in a crash before the sync means a redelivery, never a loss
/// (the delivery stays leased, and pending, until its result is on disk).
#[derive(Debug, Default)]
pub(crate) struct Sending {
    count: AtomicUsize,
    /// Told when a slot is given back.
    freed: Notify,
}

impl Sending {
    pub(super) fn take(self: &Arc<Self>) -> Slot {
        self.count.fetch_add(1, AtomicOrdering::SeqCst);
        Slot(Some(Arc::clone(self)))
    }

    pub(super) fn len(&self) -> usize {
        self.count.load(AtomicOrdering::SeqCst)
    }

    /// Until a slot is given back.
    pub(super) async fn freed(&self) {
        self.freed.notified().await;
    }
}

/// One sending slot, given back by [`Slot::release`] or when dropped (a panic too).
#[derive(Debug, Default)]
pub(super) struct Slot(Option<Arc<Sending>>);

impl Slot {
    pub(super) fn release(&mut self) {
        if let Some(sending) = self.0.take() {
            sending.count.fetch_sub(1, AtomicOrdering::SeqCst);
            sending.freed.notify_one();
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.release();
    }
}

/// How many attempts of a subscription may be recording (their results waiting for the
/// store's sync) per sending slot: the bound on a worker's tasks when the store is slow.
pub(super) const RECORDING_PER_SLOT: usize = 4;

/// The most deliveries of an ordered subscription one lease takes (the oldest and those
/// after it in a row; see `in_order`; from one, doubling while whole windows are sent):
/// sent one after the other, the next as soon as the sink took the one before, their
/// results written in groups meanwhile. One at a time,
/// the queue moved at the speed of the store (a lease, then a result made applicable,
/// before the next could be leased), not of the sink.
pub(super) const ORDERED_WINDOW: usize = 256;

/// How many deliveries a busy unordered worker leases ahead per sending slot (see
/// [`Ahead`]). With one per slot, two PostgreSQL hubs on two shared cores fell behind at
/// 14,000 deliveries/s (12.8–13.1k delivered, p50 0.35–0.42 s); with three they kept up
/// (p50 29–37 ms): a lease is a transaction with a fixed cost, and each hub's leases were
/// the smaller (docs/benchmarks-log.md, issue 26, eighth step).
pub(super) const AHEAD_PER_SLOT: usize = 3;

/// The attempts in flight, with when each began.
#[derive(Default)]
pub(super) struct InFlight {
    tasks: JoinSet<()>,
    started: HashMap<tokio::task::Id, u64>,
}

impl InFlight {
    pub(super) fn spawn(
        &mut self,
        attempt: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let handle = self.tasks.spawn(attempt);
        self.started.insert(handle.id(), now_ms());
    }

    pub(super) fn forget(
        &mut self,
        joined: Option<Result<(tokio::task::Id, ()), tokio::task::JoinError>>,
    ) {
        match joined {
            Some(Ok((id, ()))) => {
                self.started.remove(&id);
            }
            Some(Err(error)) => {
                self.started.remove(&error.id());
            }
            None => {}
        }
    }

    /// Takes note of the attempts that finished.
    pub(super) fn reap(&mut self) {
        while let Some(joined) = self.tasks.try_join_next_with_id() {
            self.forget(Some(joined));
        }
    }

    pub(super) async fn join_next(&mut self) -> Option<()> {
        let joined = self.tasks.join_next_with_id().await;
        let some = joined.is_some();
        self.forget(joined);
        some.then_some(())
    }

    pub(super) fn len(&self) -> usize {
        self.tasks.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    pub(super) fn oldest(&self) -> Option<u64> {
        self.started.values().min().copied()
    }
}
