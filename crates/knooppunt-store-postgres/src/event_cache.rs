//! Recently read events, shared by their deliveries: an event routed to 10,000
//! subscriptions is read from the database once, and concurrent readers of one event wait
//! for that one read. Bounded by the size of the events' JSON; the oldest entries go first.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};

use knooppunt_store::{StoreError, StoredEvent};
use tokio::sync::OnceCell;

/// The JSON the cache keeps at most.
const BUDGET_BYTES: usize = 32 * 1024 * 1024;

type Cell = Arc<OnceCell<Option<Arc<StoredEvent>>>>;

#[derive(Default)]
pub(crate) struct EventCache {
    inner: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    /// Each event's cell, and whether its size is counted in `order` yet.
    cells: HashMap<u64, (Cell, bool)>,
    /// In insertion order, with the size each counted.
    order: VecDeque<(u64, usize)>,
    bytes: usize,
}

impl EventCache {
    pub(crate) async fn get_or_read<F, Fut>(
        &self,
        seq: u64,
        read: F,
    ) -> Result<Option<Arc<StoredEvent>>, StoreError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<StoredEvent>, StoreError>>,
    {
        let cell = {
            let mut entries = self.inner.lock().expect("event cache lock");
            Arc::clone(&entries.cells.entry(seq).or_default().0)
        };
        let result = cell
            .get_or_try_init(|| async { read().await.map(|event| event.map(Arc::new)) })
            .await
            .cloned();
        let mut entries = self.inner.lock().expect("event cache lock");
        match &result {
            // A missing event or a failed read is not kept: it may be there next time.
            Ok(None) | Err(_) => {
                if entries
                    .cells
                    .get(&seq)
                    .is_some_and(|(c, _)| Arc::ptr_eq(c, &cell))
                {
                    entries.cells.remove(&seq);
                }
            }
            Ok(Some(event)) => {
                let uncounted = match entries.cells.get_mut(&seq) {
                    Some((_, counted)) if !*counted => {
                        *counted = true;
                        true
                    }
                    _ => false,
                };
                if uncounted {
                    entries.count(seq, event.json.len());
                }
            }
        }
        result
    }

    /// Those of `seqs` that are neither cached nor being read now.
    pub(crate) fn missing(&self, seqs: impl Iterator<Item = u64>) -> Vec<u64> {
        let entries = self.inner.lock().expect("event cache lock");
        seqs.filter(|seq| !entries.cells.contains_key(seq))
            .collect()
    }

    /// Keeps an event this hub just appended (write-through: the hub that accepted an
    /// event usually delivers it too, and then reads nothing back from the database) or
    /// read ahead for deliveries it leased.
    pub(crate) fn insert(&self, event: StoredEvent) {
        let seq = event.seq;
        let size = event.json.len();
        let mut entries = self.inner.lock().expect("event cache lock");
        if entries.cells.contains_key(&seq) {
            return;
        }
        let cell = Arc::new(OnceCell::from(Some(Arc::new(event))));
        entries.cells.insert(seq, (cell, true));
        entries.count(seq, size);
    }
}

impl Entries {
    /// Counts event `seq`'s JSON of `json_bytes` against the budget, the oldest going first
    /// past it.
    fn count(&mut self, seq: u64, json_bytes: usize) {
        let size = json_bytes + 64;
        self.order.push_back((seq, size));
        self.bytes += size;
        while self.bytes > BUDGET_BYTES {
            let Some((old, size)) = self.order.pop_front() else {
                break;
            };
            self.bytes -= size;
            self.cells.remove(&old);
        }
    }
}
