//! Recently read events, shared among their deliveries. An event matched by thousands of
//! subscriptions is read from the log and decoded once, and every delivery holds the same
//! `Arc`; concurrent readers of an event that is not cached yet wait for the one read
//! instead of each reading it. Events never change, so nothing is ever invalidated; the
//! cache forgets the oldest entries once it holds more than its byte budget. The committer
//! puts each event a subscription matched here as soon as it is on disk, so that its first
//! delivery need not read it back from the log; those are kept under a small budget of
//! their own ([`WRITTEN_BUDGET`]): a delivery that keeps up takes its event within
//! milliseconds, and keeping every written event as long as a read one cost ingest 4-7%
//! of its CPU (a working set far beyond the processor's cache, freed on another thread).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use knooppunt_store::StoreError;
use knooppunt_store::StoredEvent;

use super::word_hash::WordMap;

/// What the cache may hold of events read from the log, in bytes of event JSON.
const READ_BUDGET: usize = 32 * 1024 * 1024;

/// What it may hold of events just written (about 400 of 1 KiB).
const WRITTEN_BUDGET: usize = 512 * 1024;

/// An event being read: its first reader fills it, later ones wait on its lock.
type Slot = Arc<Mutex<Option<Arc<StoredEvent>>>>;

#[derive(Debug)]
enum Entry {
    /// Cached: handed out without a second lock.
    Filled(Arc<StoredEvent>),
    Reading(Slot),
}

#[derive(Debug)]
pub(crate) struct EventCache {
    inner: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    slots: WordMap<u64, Entry>,
    read: Kept,
    written: Kept,
}

/// Filled slots of one kind, oldest first, with their sizes, under a budget.
#[derive(Debug, Default)]
struct Kept {
    order: VecDeque<(u64, usize)>,
    bytes: usize,
    budget: usize,
}

fn size_of(event: &StoredEvent) -> usize {
    event.json.len() + event.source.len() + event.id.len()
}

/// Which budget a filled entry counts against.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Read,
    Written,
}

impl Entries {
    fn kept(&mut self, kind: Kind) -> &mut Kept {
        match kind {
            Kind::Read => &mut self.read,
            Kind::Written => &mut self.written,
        }
    }

    /// Keeps `event` as filled, as one of `kind`, and forgets the oldest of that kind while
    /// more than its budget is kept (the newest stays, whatever its size); what it forgot
    /// goes to `evicted`, to be dropped once the lock is released.
    fn fill(&mut self, event: Arc<StoredEvent>, kind: Kind, evicted: &mut Vec<Entry>) {
        let (seq, size) = (event.seq, size_of(&event));
        if let Some(old) = self.slots.insert(seq, Entry::Filled(event)) {
            evicted.push(old);
        }
        let kept = self.kept(kind);
        kept.order.push_back((seq, size));
        kept.bytes += size;
        while let Some(old) = self.kept(kind).forget_oldest() {
            evicted.extend(self.slots.remove(&old));
        }
    }
}

impl Kept {
    fn with_budget(budget: usize) -> Kept {
        Kept {
            budget,
            ..Kept::default()
        }
    }

    /// The oldest entry's number, taken off, while more than the budget is kept and more
    /// than one entry.
    fn forget_oldest(&mut self) -> Option<u64> {
        if self.bytes <= self.budget || self.order.len() <= 1 {
            return None;
        }
        let (seq, size) = self.order.pop_front()?;
        self.bytes -= size;
        Some(seq)
    }
}

impl Default for EventCache {
    fn default() -> Self {
        EventCache::with_budgets(READ_BUDGET, WRITTEN_BUDGET)
    }
}

impl EventCache {
    /// A cache that keeps `read` bytes of events read from the log and `written` bytes of
    /// events just written.
    pub(crate) fn with_budgets(read: usize, written: usize) -> EventCache {
        EventCache {
            inner: Mutex::new(Entries {
                slots: WordMap::default(),
                read: Kept::with_budget(read),
                written: Kept::with_budget(written),
            }),
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
            match entries
                .slots
                .entry(seq)
                .or_insert_with(|| Entry::Reading(Slot::default()))
            {
                Entry::Filled(event) => return Ok(Arc::clone(event)),
                Entry::Reading(slot) => Arc::clone(slot),
            }
        };
        let mut filled = slot.lock().expect("event slot lock");
        if let Some(event) = filled.as_ref() {
            return Ok(Arc::clone(event));
        }
        let event = Arc::new(read()?);
        *filled = Some(Arc::clone(&event));
        drop(filled);
        let mut evicted = Vec::new();
        let mut entries = self.inner.lock().expect("event cache lock");
        // Still the slot this read filled (a failed read's slot may have been forgotten
        // and read again meanwhile): from now on it is handed out without its lock.
        let ours =
            matches!(entries.slots.get(&seq), Some(Entry::Reading(s)) if Arc::ptr_eq(s, &slot));
        if ours {
            entries.fill(Arc::clone(&event), Kind::Read, &mut evicted);
        }
        drop(entries);
        drop(evicted);
        Ok(event)
    }

    /// Keeps events just written (their deliveries are about to read them), each unless
    /// one with its number is there already.
    pub(crate) fn put(&self, events: impl IntoIterator<Item = Arc<StoredEvent>>) {
        let mut evicted = Vec::new();
        let mut entries = self.inner.lock().expect("event cache lock");
        for event in events {
            if !entries.slots.contains_key(&event.seq) {
                entries.fill(event, Kind::Written, &mut evicted);
            }
        }
        drop(entries);
        drop(evicted);
    }

    /// Forgets a slot whose read failed, so that it does not stay empty forever.
    pub(crate) fn forget_unfilled(&self, seq: u64) {
        let mut entries = self.inner.lock().expect("event cache lock");
        let empty = match entries.slots.get(&seq) {
            Some(Entry::Reading(slot)) => slot.try_lock().is_ok_and(|s| s.is_none()),
            _ => false,
        };
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
    fn events_put_are_served_without_a_read_and_the_oldest_go_first() {
        let cache = EventCache::with_budgets(100, 100);
        let written: Vec<_> = (1..=3).map(|seq| Arc::new(event(seq, 40))).collect();
        cache.put(written.iter().cloned());
        assert_eq!(cache.len(), 2, "the oldest of three 40-byte events went");
        let third = cache
            .get_or_read(3, || panic!("read a cached event"))
            .unwrap();
        assert!(Arc::ptr_eq(&third, &written[2]));
        // Put again (a retried group): the cached one stays.
        cache.put([Arc::new(event(3, 40))]);
        let again = cache
            .get_or_read(3, || panic!("read a cached event"))
            .unwrap();
        assert!(Arc::ptr_eq(&again, &written[2]));
        let first = cache.get_or_read(1, || Ok(event(1, 40))).unwrap();
        assert_eq!(first.seq, 1);
        let cached = cache.get_or_read(1, || panic!("read twice")).unwrap();
        assert!(
            Arc::ptr_eq(&first, &cached),
            "a read event is handed out as filled"
        );
    }

    #[test]
    fn written_events_have_a_budget_of_their_own() {
        let cache = EventCache::with_budgets(1000, 100);
        let read = cache.get_or_read(1, || Ok(event(1, 40))).unwrap();
        cache.put((2..=20).map(|seq| Arc::new(event(seq, 40))));
        assert_eq!(cache.len(), 3, "the read one and the newest two written");
        let again = cache
            .get_or_read(1, || panic!("a read event pushed out"))
            .unwrap();
        assert!(Arc::ptr_eq(&read, &again));
        let gone = cache.get_or_read(2, || Ok(event(2, 1))).unwrap();
        assert_eq!(gone.json.len(), 1, "an older written event is read again");
    }

    #[test]
    fn the_budget_bounds_what_is_kept_and_failures_are_not_kept() {
        let cache = EventCache::with_budgets(100, 100);
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
