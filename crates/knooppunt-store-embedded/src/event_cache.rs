//! Recently read events, shared among their deliveries. An event matched by thousands of
//! subscriptions is read from the log and decoded once, and every delivery holds the same
//! `Arc`; concurrent readers of an event that is not cached yet wait for the one read
//! instead of each reading it. Events never change, so nothing is ever invalidated; the
//! cache forgets the oldest entries once it holds more than its byte budget. The committer
//! puts each event a subscription matched here as soon as it is on disk, so that its first
//! delivery need not read it back from the log.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use knooppunt_store::StoreError;
use knooppunt_store::StoredEvent;

/// What the cache may hold, in bytes of event JSON.
const DEFAULT_BUDGET: usize = 32 * 1024 * 1024;

type Slot = Arc<Mutex<Option<Arc<StoredEvent>>>>;

#[derive(Debug)]
pub(crate) struct EventCache {
    budget: usize,
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    slots: HashMap<u64, Slot>,
    /// Filled slots, oldest first, with their sizes.
    order: VecDeque<(u64, usize)>,
    bytes: usize,
}

impl Entries {
    /// Forgets the oldest filled entries while more than `budget` bytes are kept (the
    /// newest stays, whatever its size).
    fn evict(&mut self, budget: usize) {
        while self.bytes > budget && self.order.len() > 1 {
            let (old, size) = self.order.pop_front().expect("not empty");
            self.slots.remove(&old);
            self.bytes -= size;
        }
    }
}

impl Default for EventCache {
    fn default() -> Self {
        EventCache::with_budget(DEFAULT_BUDGET)
    }
}

impl EventCache {
    pub(crate) fn with_budget(budget: usize) -> EventCache {
        EventCache {
            budget,
            inner: Mutex::new(Entries::default()),
        }
    }

    /// The event `seq`, from the cache or from `read` (called at most once at a time per
    /// event; a failed read is not cached).
    pub(crate) fn get_or_read(
        &self,
        seq: u64,
        read: impl FnOnce() -> Result<StoredEvent, StoreError>,
    ) -> Result<Arc<StoredEvent>, StoreError> {
        let slot = {
            let mut entries = self.inner.lock().expect("event cache lock");
            Arc::clone(entries.slots.entry(seq).or_default())
        };
        let mut filled = slot.lock().expect("event slot lock");
        if let Some(event) = filled.as_ref() {
            return Ok(Arc::clone(event));
        }
        let event = Arc::new(read()?);
        *filled = Some(Arc::clone(&event));
        drop(filled);
        let mut entries = self.inner.lock().expect("event cache lock");
        let size = event.json.len() + event.source.len() + event.id.len();
        entries.order.push_back((seq, size));
        entries.bytes += size;
        entries.evict(self.budget);
        Ok(event)
    }

    /// Keeps an event just written (its deliveries are about to read it), unless one with
    /// its number is there already.
    pub(crate) fn put(&self, event: Arc<StoredEvent>) {
        let mut entries = self.inner.lock().expect("event cache lock");
        if entries.slots.contains_key(&event.seq) {
            return;
        }
        let (seq, size) = (
            event.seq,
            event.json.len() + event.source.len() + event.id.len(),
        );
        entries.slots.insert(seq, Arc::new(Mutex::new(Some(event))));
        entries.order.push_back((seq, size));
        entries.bytes += size;
        entries.evict(self.budget);
    }

    /// Forgets a slot whose read failed, so that it does not stay empty forever.
    pub(crate) fn forget_unfilled(&self, seq: u64) {
        let mut entries = self.inner.lock().expect("event cache lock");
        let empty = entries
            .slots
            .get(&seq)
            .is_some_and(|slot| slot.try_lock().is_ok_and(|s| s.is_none()));
        if empty {
            entries.slots.remove(&seq);
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().expect("event cache lock").slots.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn event(seq: u64, size: usize) -> StoredEvent {
        StoredEvent {
            seq,
            source: String::new(),
            id: String::new(),
            accepted_at: 0,
            json: "x".repeat(size),
            extension_types: None,
        }
    }

    #[test]
    fn an_event_is_read_once_by_many_threads_and_shared() {
        let cache = Arc::new(EventCache::default());
        let reads = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let (cache, reads) = (Arc::clone(&cache), Arc::clone(&reads));
                std::thread::spawn(move || {
                    cache
                        .get_or_read(7, || {
                            reads.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            Ok(event(7, 10))
                        })
                        .unwrap()
                })
            })
            .collect();
        let events: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        assert!(events.iter().all(|e| Arc::ptr_eq(e, &events[0])));
    }

    #[test]
    fn the_budget_bounds_what_is_kept_and_failures_are_not_kept() {
        let cache = EventCache::with_budget(100);
        for seq in 0..10 {
            cache.get_or_read(seq, || Ok(event(seq, 40))).unwrap();
        }
        assert_eq!(cache.len(), 2);
        let failed = cache.get_or_read(99, || Err(StoreError::Backend("disk".into())));
        assert!(failed.is_err());
        cache.forget_unfilled(99);
        assert_eq!(cache.len(), 2);
        let again = cache.get_or_read(99, || Ok(event(99, 1))).unwrap();
        assert_eq!(again.seq, 99);
    }
}
