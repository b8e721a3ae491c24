//! Delivery receipts in sled, written by a thread of their own: the delivery path puts each
//! recorded batch of results into an inbox and goes on, and the thread takes what has come
//! in the last [`GATHER`] as one sled batch per tree, and flushes sled at most every
//! [`FLUSH`]. Only a receipt that finds the inbox empty wakes the thread, so a busy hub
//! wakes it once per [`GATHER`], not once per result. A crash loses the receipts of the
//! last seconds (never a delivery: its result is durable in the event log first). When the
//! thread falls behind by [`WAITING`] receipts, further ones are counted as lost instead of
//! queueing without bound.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use knooppunt_store::{Receipt, StoreError};

/// One receipt as handed over: event, subscription, delivered at.
pub(crate) type Taken = (u64, String, u64);

/// How long the writer gathers receipts into one batch.
const GATHER: Duration = Duration::from_millis(100);

/// How often at most the writer flushes sled (one fsync).
const FLUSH: Duration = Duration::from_secs(2);

/// How many receipts may wait for the writer.
const WAITING: usize = 200_000;

/// How long closing waits for the writer's last batch and flush. sled 0.34's flush has been
/// seen to wait for ever for a write no thread makes (a store dropped right after a burst
/// of deliveries, in `knooppunt-bench deliver`); past this the store closes without it,
/// and the stuck thread keeps its handle on sled, so that sled's own flush on close is not
/// reached either.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// What waits for the writer, and whether the store is closing.
#[derive(Debug, Default)]
struct Inbox {
    taken: Vec<Taken>,
    closed: bool,
    /// The writer's thread has ended (or panicked).
    ended: bool,
}

#[derive(Debug, Default)]
struct Handover {
    inbox: Mutex<Inbox>,
    /// Told when the inbox stops being empty, or closes.
    filled: Condvar,
    /// Told when the writer's thread ends.
    ended: Condvar,
}

/// Marks the writer's thread ended when it is dropped: at its end, or in a panic.
struct Ending(Arc<Handover>);

impl Drop for Ending {
    fn drop(&mut self) {
        let mut inbox = self
            .0
            .inbox
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        inbox.ended = true;
        drop(inbox);
        self.0.ended.notify_all();
    }
}

#[derive(Debug)]
pub(crate) struct Writer {
    handover: Arc<Handover>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// How long [`Writer::close`] waits for the thread ([`CLOSE_WAIT`]).
    close_wait: Duration,
    /// Receipts not kept because the writer was behind.
    pub(crate) lost: Arc<AtomicU64>,
}

impl Writer {
    pub(crate) fn start(
        db: sled::Db,
        by_event: sled::Tree,
        by_subscription: sled::Tree,
    ) -> std::io::Result<Writer> {
        Writer::spawn(CLOSE_WAIT, move |handover| {
            write(handover, &db, &by_event, &by_subscription)
        })
    }

    /// The writer with `work` as its thread's body.
    fn spawn(
        close_wait: Duration,
        work: impl FnOnce(&Handover) + Send + 'static,
    ) -> std::io::Result<Writer> {
        let handover = Arc::new(Handover::default());
        let lost = Arc::new(AtomicU64::new(0));
        let thread = {
            let handover = Arc::clone(&handover);
            std::thread::Builder::new()
                .name("knooppunt-receipts".into())
                .spawn(move || {
                    let ending = Ending(handover);
                    work(&ending.0);
                })?
        };
        Ok(Writer {
            handover,
            thread: Mutex::new(Some(thread)),
            close_wait,
            lost,
        })
    }

    /// Hands receipts to the writer without waiting.
    pub(crate) fn keep(&self, receipts: Vec<Taken>) {
        let count = receipts.len();
        let mut inbox = self.handover.inbox.lock().expect("receipts lock");
        if inbox.closed {
            return;
        }
        if inbox.taken.len() + count > WAITING {
            drop(inbox);
            if self.lost.fetch_add(count as u64, Ordering::Relaxed) == 0 {
                tracing::warn!("The receipt writer is behind: receipts are being lost.");
            }
            return;
        }
        let was_empty = inbox.taken.is_empty();
        inbox.taken.extend(receipts);
        drop(inbox);
        if was_empty {
            self.handover.filled.notify_one();
        }
    }

    /// Files what waits and ends the thread; waits at most `close_wait` for it.
    pub(crate) fn close(&self) {
        let Some(thread) = self.thread.lock().expect("receipts lock").take() else {
            return;
        };
        let mut inbox = self.handover.inbox.lock().expect("receipts lock");
        inbox.closed = true;
        self.handover.filled.notify_one();
        let (inbox, waited) = self
            .handover
            .ended
            .wait_timeout_while(inbox, self.close_wait, |inbox| !inbox.ended)
            .expect("receipts lock");
        drop(inbox);
        if waited.timed_out() {
            tracing::error!(
                waited_s = self.close_wait.as_secs_f64(),
                "The delivery receipts' last write to disk did not end in time; the store \
                 closes without it. Receipts filed in the last seconds may be missing after a \
                 restart (the deliveries themselves are in the event log)."
            );
            return;
        }
        let _ = thread.join();
    }
}

fn write(handover: &Handover, db: &sled::Db, by_event: &sled::Tree, by_subscription: &sled::Tree) {
    let mut flushed = Instant::now();
    let mut unflushed = false;
    loop {
        // Waits for receipts, but not past the next flush when some wait for one.
        {
            let mut inbox = handover.inbox.lock().expect("receipts lock");
            while inbox.taken.is_empty() && !inbox.closed {
                let wait = if unflushed {
                    FLUSH.saturating_sub(flushed.elapsed())
                } else {
                    Duration::from_secs(3600)
                };
                let (next, timeout) = handover
                    .filled
                    .wait_timeout(inbox, wait)
                    .expect("receipts lock");
                inbox = next;
                if timeout.timed_out() && unflushed && inbox.taken.is_empty() {
                    drop(inbox);
                    flush(db);
                    (flushed, unflushed) = (Instant::now(), false);
                    inbox = handover.inbox.lock().expect("receipts lock");
                }
            }
            if inbox.closed && inbox.taken.is_empty() {
                break;
            }
            if !inbox.closed {
                // Let a batch gather; what comes meanwhile does not wake this thread.
                drop(inbox);
                std::thread::sleep(GATHER);
            }
        }
        let gathered = std::mem::take(&mut handover.inbox.lock().expect("receipts lock").taken);
        if gathered.is_empty() {
            continue;
        }
        if let Err(error) = file(db, by_event, by_subscription, &gathered) {
            tracing::warn!(%error, receipts = gathered.len(), "Keeping delivery receipts failed.");
        }
        unflushed = true;
        if flushed.elapsed() >= FLUSH {
            flush(db);
            (flushed, unflushed) = (Instant::now(), false);
        }
    }
    if unflushed {
        flush(db);
    }
}

fn flush(db: &sled::Db) {
    if let Err(error) = db.flush() {
        tracing::warn!(%error, "Flushing delivery receipts failed.");
    }
}

/// Events per block of the by-event tree: the receipts of one event are in its block's
/// chunks.
const BLOCK_BITS: u32 = 10;

/// Files one gathered batch as chunks: per subscription one chunk in delivery order
/// (`received`: subscription, 0, batch number → pairs), and per block of events and
/// subscription one chunk (`receipts`: block, subscription, 0, batch number → pairs). A
/// pair is an event's sequence number and when it was delivered, 16 bytes. So a batch costs
/// a few sled inserts, not two per delivery.
fn file(
    db: &sled::Db,
    by_event: &sled::Tree,
    by_subscription: &sled::Tree,
    gathered: &[Taken],
) -> sled::Result<()> {
    use std::collections::BTreeMap;
    let batch = db.generate_id()?.to_be_bytes();
    let mut per_subscription: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    let mut per_block: BTreeMap<(u64, &str), Vec<u8>> = BTreeMap::new();
    for (seq, subscription, at) in gathered {
        let pair = [seq.to_be_bytes(), at.to_be_bytes()].concat();
        per_subscription
            .entry(subscription)
            .or_default()
            .extend_from_slice(&pair);
        per_block
            .entry((seq >> BLOCK_BITS, subscription))
            .or_default()
            .extend_from_slice(&pair);
    }
    let (mut events, mut subscriptions) = (sled::Batch::default(), sled::Batch::default());
    for (subscription, pairs) in per_subscription {
        subscriptions.insert([subscription.as_bytes(), &[0], &batch].concat(), pairs);
    }
    for ((block, subscription), pairs) in per_block {
        let key = [
            &block.to_be_bytes()[..],
            subscription.as_bytes(),
            &[0],
            &batch,
        ]
        .concat();
        events.insert(key, pairs);
    }
    by_event.apply_batch(events)?;
    by_subscription.apply_batch(subscriptions)
}

/// The pairs of a chunk.
fn pairs(value: &[u8]) -> impl Iterator<Item = (u64, u64)> + '_ {
    value.chunks_exact(16).map(|pair| {
        let (seq, at) = pair.split_at(8);
        (be(seq), be(at))
    })
}

fn be(bytes: &[u8]) -> u64 {
    u64::from_be_bytes(bytes.try_into().unwrap_or([0; 8]))
}

/// The receipts of event `seq`: the first of each subscription, by subscription.
pub(crate) fn of_event(tree: &sled::Tree, seq: u64) -> Result<Vec<Receipt>, StoreError> {
    let mut first: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    for item in tree.scan_prefix((seq >> BLOCK_BITS).to_be_bytes()) {
        let (key, value) = item.map_err(super::backend)?;
        let subscription = key
            .get(8..key.len().saturating_sub(9))
            .ok_or_else(|| StoreError::Corrupt("a receipt chunk's key is short".into()))?;
        for (_, at) in pairs(&value).filter(|(s, _)| *s == seq) {
            let name = String::from_utf8_lossy(subscription).into_owned();
            let earliest = first.entry(name).or_insert(at);
            *earliest = (*earliest).min(at);
        }
    }
    Ok(first
        .into_iter()
        .map(|(subscription, delivered_at)| Receipt {
            seq,
            subscription,
            delivered_at,
        })
        .collect())
}

/// Up to `limit` receipts of `subscription` in delivery order after `after` (`<batch hex>.<index>`).
pub(crate) fn of_subscription(
    tree: &sled::Tree,
    subscription: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<(Vec<Receipt>, Option<String>), StoreError> {
    let (start_batch, skip) = match after {
        None => (0, 0),
        Some(cursor) => {
            let (batch, index) = cursor
                .split_once('.')
                .and_then(|(b, i)| {
                    Some((u64::from_str_radix(b, 16).ok()?, i.parse::<usize>().ok()?))
                })
                .ok_or_else(|| {
                    StoreError::Corrupt(format!("`{cursor}` is not a receipt cursor"))
                })?;
            (batch, index + 1)
        }
    };
    let prefix = [subscription.as_bytes(), &[0]].concat();
    let start = [&prefix[..], &start_batch.to_be_bytes()].concat();
    let end = [subscription.as_bytes(), &[1]].concat();
    let mut found = Vec::new();
    for item in tree.range(start..end) {
        let (key, value) = item.map_err(super::backend)?;
        let batch = be(key.get(prefix.len()..).unwrap_or_default());
        let from = if batch == start_batch { skip } else { 0 };
        for (index, (seq, at)) in pairs(&value).enumerate().skip(from) {
            if found.len() == limit {
                let cursor = format!("{batch:x}.{}", index - 1);
                return Ok((found, Some(cursor)));
            }
            found.push(Receipt {
                seq,
                subscription: subscription.to_owned(),
                delivered_at: at,
            });
        }
        if found.len() == limit {
            let last = pairs(&value).count() - 1;
            return Ok((found, Some(format!("{batch:x}.{last}"))));
        }
    }
    Ok((found, None))
}

/// Removes the chunks all of whose receipts were delivered before `before_ms`; returns how
/// many receipts went (counted in the by-subscription tree).
pub(crate) fn sweep(
    by_event: &sled::Tree,
    by_subscription: &sled::Tree,
    before_ms: u64,
) -> Result<u64, StoreError> {
    let mut removed = 0;
    for (tree, count) in [(by_event, false), (by_subscription, true)] {
        for item in tree.iter() {
            let (key, value) = item.map_err(super::backend)?;
            if pairs(&value).all(|(_, at)| at < before_ms) {
                if count {
                    removed += (value.len() / 16) as u64;
                }
                tree.remove(key).map_err(super::backend)?;
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose last flush does not end (sled's has hung) does not hold the store's
    /// closing for ever: `close` gives up after its wait.
    #[test]
    fn closing_does_not_wait_for_ever_for_a_stuck_writer() {
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        let writer = Writer::spawn(Duration::from_millis(200), move |_| {
            let _ = stuck.recv_timeout(Duration::from_secs(60));
        })
        .unwrap();
        let started = Instant::now();
        writer.close();
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "close waited {:?} for a writer that does not end",
            started.elapsed()
        );
        drop(release);
    }

    /// A writer that ends is waited for: its last batch and flush are done before `close`
    /// returns.
    #[test]
    fn closing_waits_for_the_writers_last_work() {
        let (done, finished) = std::sync::mpsc::channel();
        let writer = Writer::spawn(Duration::from_secs(30), move |handover| {
            let mut inbox = handover.inbox.lock().unwrap();
            while !inbox.closed {
                inbox = handover.filled.wait(inbox).unwrap();
            }
            drop(inbox);
            std::thread::sleep(Duration::from_millis(100));
            done.send(()).unwrap();
        })
        .unwrap();
        writer.close();
        assert!(
            finished.try_recv().is_ok(),
            "close returned before the writer's last work ended"
        );
    }
}
