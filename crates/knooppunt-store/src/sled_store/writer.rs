//! Two threads own the event log's writes:
//!
//! - the writer takes every append waiting, checks for duplicates, numbers the events and
//!   writes the group's records (no sync), then hands the group to the syncer and takes the
//!   next; retention sweeps run here too, so that every change to the log's files happens on
//!   one thread;
//! - the syncer takes every group written, calls `fdatasync` once for all of them, and only
//!   then files the events and their deliveries in memory and answers the publishers.
//!
//! So the disk syncs one group while the writer prepares the next. If a sync fails the store
//! stops accepting events (every later append fails) until it is opened again: whether the
//! group reached the disk is unknown, and the log, read again at open, is the truth.

use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, mpsc};

use super::event_log::{EventLog, LogRecord};
use super::{Indexed, Queues};
use crate::StoreError;
use crate::queue::{Appended, Delivery, NewEvent, Swept};

pub(super) type Reply<T> = tokio::sync::oneshot::Sender<Result<T, StoreError>>;

pub(super) enum Command {
    Append {
        events: Vec<NewEvent>,
        now: u64,
        window: u64,
        reply: Reply<Vec<Appended>>,
    },
    Sweep {
        now: u64,
        retention: u64,
        window: u64,
        reply: Reply<Swept>,
    },
}

/// The most appends one group takes.
const MAX_GROUP: usize = 1024;

/// A group written to the log, waiting for its sync.
struct Written {
    records: Vec<LogRecord>,
    locations: Vec<super::event_log::Location>,
    file: Option<Arc<File>>,
    replies: Vec<(Reply<Vec<Appended>>, Vec<Appended>)>,
}

/// What the writer and the syncer share.
#[derive(Default)]
struct Progress {
    /// Every event up to this sequence number is synced and filed in memory.
    synced_upto: AtomicU64,
    /// A sync failed: accept nothing more.
    failed: AtomicBool,
}

const FAILED: &str = "the event log could not be synced to disk; the hub accepts no events \
                      until it is restarted";

pub(super) fn run(
    mut log: EventLog,
    queues: Arc<RwLock<Queues>>,
    commands: mpsc::Receiver<Command>,
) {
    let progress = Arc::new(Progress::default());
    progress.synced_upto.store(log.last_seq(), Ordering::SeqCst);
    let (to_syncer, written) = mpsc::channel::<Written>();
    let syncer = {
        let (queues, progress) = (Arc::clone(&queues), Arc::clone(&progress));
        std::thread::Builder::new()
            .name("knooppunt-store-syncer".into())
            .spawn(move || sync(queues, written, &progress))
            .expect("the syncer thread starts")
    };
    // Events written but not yet synced, for duplicate detection: hash → (seq, accepted_at).
    let mut in_flight: HashMap<u128, (u64, u64)> = HashMap::new();
    while let Some(first) = receive(&commands) {
        let mut appends = Vec::new();
        let mut next = Some(first);
        while let Some(command) = next.take() {
            match command {
                Command::Append {
                    events,
                    now,
                    window,
                    reply,
                } => appends.push((events, now, window, reply)),
                Command::Sweep {
                    now,
                    retention,
                    window,
                    reply,
                } => {
                    let synced = progress.synced_upto.load(Ordering::SeqCst);
                    let _ = reply.send(sweep(&mut log, &queues, synced, now, retention, window));
                }
            }
            if appends.len() < MAX_GROUP {
                next = commands.try_recv().ok();
            }
        }
        if appends.is_empty() {
            continue;
        }
        if progress.failed.load(Ordering::SeqCst) {
            for (_, _, _, reply) in appends {
                let _ = reply.send(Err(StoreError::Backend(FAILED.into())));
            }
            continue;
        }
        let synced = progress.synced_upto.load(Ordering::SeqCst);
        in_flight.retain(|_, (seq, _)| *seq > synced);
        if let Some(group) = write_group(&mut log, &queues, &mut in_flight, appends) {
            let _ = to_syncer.send(group);
        }
    }
    drop(to_syncer);
    let _ = syncer.join();
}

type Append = (Vec<NewEvent>, u64, u64, Reply<Vec<Appended>>);

/// How long the writer keeps looking for work before it sleeps. Under load the next append
/// arrives within this time, so publishers do not have to wake a sleeping thread each time
/// (a futex call and a context switch per request).
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// The next command: polled for [`SPIN`], then waited for.
fn receive<T>(commands: &mpsc::Receiver<T>) -> Option<T> {
    let started = std::time::Instant::now();
    while started.elapsed() < SPIN {
        match commands.try_recv() {
            Ok(command) => return Some(command),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) => std::thread::yield_now(),
        }
    }
    commands.recv().ok()
}

/// Checks duplicates, numbers and writes a group; `None` when writing failed (the appends
/// are answered with the error).
fn write_group(
    log: &mut EventLog,
    queues: &RwLock<Queues>,
    in_flight: &mut HashMap<u128, (u64, u64)>,
    group: Vec<Append>,
) -> Option<Written> {
    let mut records: Vec<LogRecord> = Vec::new();
    let mut in_group: HashMap<u128, (u64, u64)> = HashMap::new();
    let mut replies = Vec::with_capacity(group.len());
    {
        let known = queues.read().expect("queues lock");
        for (events, now, window, reply) in group {
            let mut answers = Vec::with_capacity(events.len());
            for event in events {
                let hash = known.hasher.hash(&event.source, &event.id);
                let earlier = in_group
                    .get(&hash)
                    .or_else(|| in_flight.get(&hash))
                    .copied()
                    .or_else(|| known.accepted(hash));
                if let Some((seq, accepted_at)) = earlier
                    && now.saturating_sub(accepted_at) < window
                {
                    answers.push(Appended::Duplicate { seq });
                    continue;
                }
                let seq = log.next_seq();
                in_group.insert(hash, (seq, now));
                records.push(LogRecord {
                    seq,
                    accepted_at: now,
                    source: event.source,
                    id: event.id,
                    json: event.json,
                    subscriptions: event.subscriptions,
                });
                answers.push(Appended::Accepted { seq });
            }
            replies.push((reply, answers));
        }
    }
    match log.write(&records) {
        Ok((locations, file)) => {
            in_flight.extend(in_group);
            Some(Written {
                records,
                locations,
                file,
                replies,
            })
        }
        Err(error) => {
            let message = error.to_string();
            for (reply, _) in replies {
                let _ = reply.send(Err(StoreError::Backend(message.clone())));
            }
            None
        }
    }
}

/// The syncer: one `fdatasync` for every group written so far, then the groups are filed in
/// memory and answered, in order.
fn sync(queues: Arc<RwLock<Queues>>, written: mpsc::Receiver<Written>, progress: &Progress) {
    while let Ok(first) = written.recv() {
        let mut batch = vec![first];
        while let Ok(more) = written.try_recv() {
            batch.push(more);
        }
        let mut result = Ok(());
        let mut synced: Vec<*const File> = Vec::new();
        for group in &batch {
            if let Some(file) = &group.file
                && !synced.contains(&Arc::as_ptr(file))
            {
                synced.push(Arc::as_ptr(file));
                if let Err(error) = file.sync_data() {
                    result = Err(error);
                }
            }
        }
        if let Err(error) = result {
            progress.failed.store(true, Ordering::SeqCst);
            tracing::error!(%error, "Syncing the event log failed; no more events are accepted until the hub restarts.");
            for group in batch {
                for (reply, _) in group.replies {
                    let _ = reply.send(Err(StoreError::Backend(FAILED.into())));
                }
            }
            continue;
        }
        {
            let mut queues = queues.write().expect("queues lock");
            for group in &batch {
                for (record, location) in group.records.iter().zip(&group.locations) {
                    queues.add(record, *location);
                }
            }
        }
        if let Some(last) = batch.iter().rev().find_map(|g| g.records.last()) {
            progress.synced_upto.fetch_max(last.seq, Ordering::SeqCst);
        }
        for group in batch {
            for (reply, answers) in group.replies {
                let _ = reply.send(Ok(answers));
            }
        }
    }
}

fn sweep(
    log: &mut EventLog,
    queues: &RwLock<Queues>,
    synced_upto: u64,
    now: u64,
    retention: u64,
    window: u64,
) -> Result<Swept, StoreError> {
    // Keep what duplicate detection needs as long as the retention.
    let keep = retention.max(window);
    let mut swept = Swept::default();
    for (first, next) in log.closed_segments() {
        if next > synced_upto.saturating_add(1) {
            break; // a segment with writes still waiting for their sync
        }
        let removable = {
            let queues = queues.read().expect("queues lock");
            let newest = queues.newest_accepted_in(first, next);
            newest.is_none_or(|at| now.saturating_sub(at) >= keep)
                && !queues.has_pending_in(first, next)
        };
        if !removable {
            continue;
        }
        log.delete(first)?;
        let (events, entries) = queues.write().expect("queues lock").forget(first, next);
        swept.events += events;
        swept.dedupe_entries += entries;
    }
    let mut queues = queues.write().expect("queues lock");
    let Queues { index, recent, .. } = &mut *queues;
    let before = recent.len();
    recent.retain(|_, seq| {
        index
            .get(seq)
            .is_some_and(|indexed| now.saturating_sub(indexed.accepted_at) < window)
    });
    swept.dedupe_entries += (before - recent.len()) as u64;
    Ok(swept)
}

impl Queues {
    /// Files a newly written (or, at start-up, replayed) event and its deliveries.
    pub(super) fn add(&mut self, record: &LogRecord, location: super::event_log::Location) {
        let hash = self.hasher.hash(&record.source, &record.id);
        self.index.insert(
            record.seq,
            Indexed {
                location,
                accepted_at: record.accepted_at,
                hash,
            },
        );
        self.recent.insert(hash, record.seq);
        for subscription in &record.subscriptions {
            if self.live.contains(subscription) {
                self.pending
                    .entry(subscription.clone())
                    .or_default()
                    .insert(
                        record.seq,
                        Delivery::new(subscription.clone(), record.seq, record.accepted_at),
                    );
            }
        }
    }

    /// When the event with this dedupe hash was accepted, if it is still known.
    fn accepted(&self, hash: u128) -> Option<(u64, u64)> {
        let seq = *self.recent.get(&hash)?;
        self.index
            .get(&seq)
            .map(|indexed| (seq, indexed.accepted_at))
    }

    fn newest_accepted_in(&self, first: u64, next: u64) -> Option<u64> {
        self.index
            .range(first..next)
            .next_back()
            .map(|(_, indexed)| indexed.accepted_at)
    }

    fn has_pending_in(&self, first: u64, next: u64) -> bool {
        self.pending
            .values()
            .any(|queue| queue.range(first..next).next().is_some())
    }

    /// Forgets the events of a deleted segment; returns how many events and dedupe entries.
    fn forget(&mut self, first: u64, next: u64) -> (u64, u64) {
        let gone: Vec<(u64, u128)> = self
            .index
            .range(first..next)
            .map(|(seq, indexed)| (*seq, indexed.hash))
            .collect();
        let mut entries = 0;
        for (seq, hash) in &gone {
            self.index.remove(seq);
            if self.recent.get(hash) == Some(seq) {
                self.recent.remove(hash);
                entries += 1;
            }
        }
        (gone.len() as u64, entries)
    }
}
