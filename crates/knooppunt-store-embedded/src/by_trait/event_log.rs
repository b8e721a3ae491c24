//! [`knooppunt_store::EventLog`] on the embedded store: the log, its index and receipts.

use super::*;

impl knooppunt_store::EventLog for EmbeddedStore {
    fn append_events(
        &self,
        events: Vec<NewEvent>,
        now_ms: u64,
        dedupe_window_ms: u64,
    ) -> StoreFuture<'_, Vec<Appended>> {
        Box::pin(answered(self.inner.log.append(
            events,
            now_ms,
            dedupe_window_ms,
        )))
    }

    fn event(&self, seq: u64) -> StoreFuture<'_, Option<Arc<StoredEvent>>> {
        Box::pin(async move {
            let location = {
                let queues = self.inner.queues.read().expect("queues lock");
                queues.index.get(seq).map(|indexed| indexed.location)
            };
            let Some(location) = location else {
                return Ok(None);
            };
            let inner = &self.inner;
            let event = inner
                .events
                .get_or_read(seq, || inner.readers.read_event(location));
            if event.is_err() {
                inner.events.forget_unfilled(seq);
                // The sweep may have removed its segment between the lookup and the read.
                let swept = inner
                    .queues
                    .read()
                    .expect("queues lock")
                    .index
                    .get(seq)
                    .is_none();
                if swept {
                    return Ok(None);
                }
            }
            Ok(Some(event?))
        })
    }

    fn events_after(&self, after: u64, limit: usize) -> StoreFuture<'_, Vec<Arc<StoredEvent>>> {
        Box::pin(async move {
            let seqs: Vec<u64> = {
                let queues = self.inner.queues.read().expect("queues lock");
                queues
                    .index
                    .after(after)
                    .take(limit)
                    .map(|(seq, _)| *seq)
                    .collect()
            };
            let mut events = Vec::with_capacity(seqs.len());
            for seq in seqs {
                // One the sweep removed meanwhile is left out: the reader learns of it
                // from `swept_through`.
                if let Some(event) = self.event(seq).await? {
                    events.push(event);
                }
            }
            Ok(events)
        })
    }

    fn swept_through(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move { Ok(self.inner.queues.read().expect("queues lock").swept_through) })
    }

    fn seq_before(&self, at_ms: u64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let queues = self.inner.queues.read().expect("queues lock");
            Ok(queues.index.seq_before(at_ms).max(queues.swept_through))
        })
    }

    fn receipts_of_event(&self, seq: u64) -> StoreFuture<'_, Vec<Receipt>> {
        Box::pin(async move { receipts::of_event(&self.inner.trees.receipts, seq) })
    }

    fn receipts_of_subscription<'a>(
        &'a self,
        subscription: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> StoreFuture<'a, (Vec<Receipt>, Option<String>)> {
        Box::pin(async move {
            receipts::of_subscription(&self.inner.trees.received, subscription, after, limit)
        })
    }

    fn sweep_receipts(&self, before_ms: u64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let trees = &self.inner.trees;
            receipts::sweep(&trees.receipts, &trees.received, before_ms)
        })
    }

    fn sweep(
        &self,
        now_ms: u64,
        retention_ms: u64,
        dedupe_window_ms: u64,
    ) -> StoreFuture<'_, Swept> {
        Box::pin(answered(self.inner.log.sweep(
            now_ms,
            retention_ms,
            dedupe_window_ms,
        )))
    }
}
