//! [`knooppunt_store::DeliveryQueue`] on the embedded store: the queues in memory,
//! every change through the log first.

use super::*;

impl knooppunt_store::DeliveryQueue for EmbeddedStore {
    fn lease<'a>(
        &'a self,
        subscription: &'a str,
        now_ms: u64,
        lease_ms: u64,
        limit: usize,
        ordered: bool,
    ) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(async move {
            let mut queues = self.queues();
            let queues = &mut *queues;
            let Some(queue) = queues.pending.get_mut(subscription) else {
                return Ok(Vec::new());
            };
            let tokens = &mut queues.lease_tokens;
            Ok(queue.lease(subscription, now_ms, lease_ms, limit, ordered, tokens))
        })
    }

    fn renew<'a>(
        &'a self,
        subscription: &'a str,
        seq: u64,
        lease: u64,
        until_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut queues = self.queues();
            Ok(queues
                .pending
                .get_mut(subscription)
                .is_some_and(|queue| queue.renew(subscription, seq, lease, until_ms)))
        })
    }

    fn release<'a>(
        &'a self,
        subscription: &'a str,
        leases: &'a [(u64, u64)],
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let mut queues = self.queues();
            let Some(queue) = queues.pending.get_mut(subscription) else {
                return Ok(0);
            };
            Ok(leases
                .iter()
                .filter(|&&(seq, lease)| queue.release(subscription, seq, lease))
                .count() as u64)
        })
    }

    fn next_due<'a>(
        &'a self,
        subscription: &'a str,
        ordered: bool,
    ) -> StoreFuture<'a, Option<u64>> {
        Box::pin(async move {
            let queues = self.inner.queues.read().expect("queues lock");
            let Some(queue) = queues.pending.get(subscription) else {
                return Ok(None);
            };
            Ok(queue.next_due(ordered))
        })
    }

    fn record(&self, changes: Vec<DeliveryChange>) -> StoreFuture<'_, ()> {
        self.record_with(changes, true)
    }

    fn record_results(&self, changes: Vec<DeliveryChange>) -> StoreFuture<'_, ()> {
        self.record_with(changes, false)
    }

    fn pending_seqs<'a>(
        &'a self,
        subscription: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<u64>> {
        Box::pin(async move {
            let queues = self.inner.queues.read().expect("queues lock");
            Ok(queues
                .pending
                .get(subscription)
                .map(|queue| queue.seqs_after(after, limit))
                .unwrap_or_default())
        })
    }

    fn dead_letters<'a>(
        &'a self,
        subscription: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<DeadLetter>> {
        Box::pin(async move {
            let queues = self.inner.queues.read().expect("queues lock");
            let start = after.map_or(0, |seq| seq.saturating_add(1));
            Ok(queues
                .dead
                .get(subscription)
                .map(|dead| {
                    dead.range(start..)
                        .take(limit)
                        .map(|(_, d)| d.clone())
                        .collect()
                })
                .unwrap_or_default())
        })
    }

    fn dead_letter<'a>(
        &'a self,
        subscription: &'a str,
        seq: u64,
    ) -> StoreFuture<'a, Option<DeadLetter>> {
        Box::pin(async move {
            let queues = self.inner.queues.read().expect("queues lock");
            Ok(queues
                .dead
                .get(subscription)
                .and_then(|dead| dead.get(&seq))
                .cloned())
        })
    }

    fn sweep_dead_letters(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<(String, u64)>> {
        Box::pin(async move {
            /// Dead letters looked at per hold of the queues' lock.
            const CHUNK: usize = 4096;
            let queues = &self.inner.queues;
            let subscriptions = queues.read().expect("queues lock").with_dead_letters();
            // The `limit` oldest found so far: (death, subscription's place, event), the
            // youngest on top.
            let mut oldest: std::collections::BinaryHeap<(u64, usize, u64)> =
                std::collections::BinaryHeap::with_capacity(limit.min(CHUNK) + 1);
            for (place, subscription) in subscriptions.iter().enumerate() {
                let mut from = Some(0);
                while let Some(start) = from {
                    let (expired, next) = queues.read().expect("queues lock").expired_dead_letters(
                        subscription,
                        start,
                        before_ms,
                        CHUNK,
                    );
                    for (dead_at, seq) in expired {
                        oldest.push((dead_at, place, seq));
                        if oldest.len() > limit {
                            oldest.pop();
                        }
                    }
                    from = next;
                }
            }
            if oldest.is_empty() {
                return Ok(Vec::new());
            }
            let mut lost: BTreeMap<String, u64> = BTreeMap::new();
            let changes = oldest
                .into_sorted_vec()
                .into_iter()
                .map(|(_, place, seq)| {
                    let subscription = subscriptions[place].clone();
                    *lost.entry(subscription.clone()).or_default() += 1;
                    DeliveryChange::DeleteDeadLetter { subscription, seq }
                })
                .collect();
            self.record(changes).await?;
            Ok(lost.into_iter().collect())
        })
    }

    fn queue_stats(&self) -> StoreFuture<'_, Vec<QueueStats>> {
        Box::pin(async move {
            let queues = self.inner.queues.read().expect("queues lock");
            Ok(queues.stats())
        })
    }

    fn queue_stats_of<'a>(&'a self, subscription: &'a str) -> StoreFuture<'a, Option<QueueStats>> {
        Box::pin(async move {
            let queues = self.inner.queues.read().expect("queues lock");
            Ok(queues.stats_of(subscription))
        })
    }
}
