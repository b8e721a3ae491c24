//! Group commit for the event log.
//!
//! Publishers (async tasks, on whatever thread runs them) hash their events' identities,
//! then take the intake lock for a moment: they check for duplicates and claim the
//! identities (duplicate detection lives here, not in the delivery queues, so publishing
//! never waits for the queues' lock), number their events and encode the records into the
//! group that is filling, then wait for their answer. One committer thread takes the whole group,
//! writes it with one `write`, calls `fdatasync` once, files the events and their deliveries
//! in memory and answers everyone in the group; meanwhile the next group fills. Publishers
//! wake the committer only when it sleeps (the log is idle), so under load a publish costs
//! no thread hand-off besides its answer. Retention sweeps run on the committer too, so that
//! every change to the log's files happens on one thread.
//!
//! A group of push delivery results only (`DeliveryQueue::record_results`) is answered once
//! written, without its own `fdatasync`: it reaches the disk with the next sync — the next
//! group with an event or another change, or [`RESULTS_SYNC_INTERVAL`] after the first
//! unsynced group (busy or idle), whichever comes first. A result lost in a crash of the
//! machine (a killed process loses nothing: the page cache keeps what was written) only
//! means its delivery is made again, and the log loses a suffix, never a record in the
//! middle. An event is never answered before it is on disk.
//!
//! If a write or sync fails the store stops accepting events (every later append fails)
//! until it is opened again: whether the group reached the disk is unknown, and the log,
//! read again at open, is the truth.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};

use super::dedupe::{Dedupe, DedupeHasher, Identity};
use super::event_cache::EventCache;
use super::event_log::{EventLog, Location, LogRecord, encode_change};
use super::queues::{EventFiling, Queues, event_bytes};
use knooppunt_store::StoreError;
use knooppunt_store::{Appended, DeliveryChange, NewEvent, StoredEvent, Swept};

pub(super) type Reply<T> = tokio::sync::oneshot::Sender<Result<T, StoreError>>;
pub(super) type Answer<T> = tokio::sync::oneshot::Receiver<Result<T, StoreError>>;

const FAILED: &str = "the event log could not be written to disk (is it full?); the hub \
                      accepts no events until a test write succeeds again, which it tries every \
                      second";

/// How often a store whose log failed tries whether the disk takes writes again.
const PROBE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
const CLOSED: &str = "the store is closed";

/// The longest written delivery results wait for a sync while the log is busy with other
/// results only.
pub(super) const RESULTS_SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// While written results wait for a sync the committer naps this long at a time, and push
/// results that arrive meanwhile do not wake it: they are written at its next look, in one
/// group (a wake-up per result cost more than writing it). Events and other changes wake it.
const RESULTS_NAP: std::time::Duration = std::time::Duration::from_millis(1);

/// What the publishers and the committer share.
#[derive(Debug)]
pub(super) struct Shared {
    intake: Mutex<Intake>,
    /// Signalled when the committer sleeps and work arrives.
    wake: Condvar,
    queues: Arc<RwLock<Queues>>,
    /// Events read recently or just written, shared by their deliveries.
    pub(super) events: Arc<EventCache>,
    /// `fdatasync`s of the log so far.
    syncs: std::sync::atomic::AtomicU64,
    hasher: DedupeHasher,
}

#[derive(Debug, Default)]
struct Intake {
    /// The number the next accepted event gets.
    next_seq: u64,
    /// The group that is filling.
    group: Group,
    /// Every accepted event's identity, from the moment it is numbered: a duplicate is
    /// answered with the group it arrived in, so never before the original is on disk.
    dedupe: Dedupe,
    sweeps: Vec<(SweepRequest, Reply<Swept>)>,
    /// The committer waits for [`Shared::wake`].
    idle: bool,
    /// The committer looks again within [`RESULTS_NAP`] by itself.
    napping: bool,
    closed: bool,
    failed: bool,
}

impl Intake {
    /// Why no appends or changes are taken now, if none are.
    fn refusal(&self) -> Option<&'static str> {
        if self.failed {
            Some(FAILED)
        } else if self.closed {
            Some(CLOSED)
        } else {
            None
        }
    }
}

/// Records encoded back to back, with what filing them needs and whom to answer.
#[derive(Debug, Default)]
struct Group {
    bytes: Vec<u8>,
    filings: Vec<Filing>,
    replies: Vec<(Reply<Vec<Appended>>, Vec<Appended>)>,
    recorded: Vec<Reply<()>>,
    /// The group must be on disk before it is answered: it holds an event or a change
    /// that is not a push delivery's result.
    durable: bool,
}

impl Group {
    fn is_empty(&self) -> bool {
        self.replies.is_empty() && self.recorded.is_empty()
    }
}

/// A written record as the in-memory queues file it.
#[derive(Debug)]
pub(super) enum Filing {
    /// An event, with the event itself when a subscription matched it: it goes into the
    /// event cache once on disk, so that its deliveries need not read it back from the log.
    Event(EventFiling, Option<Arc<StoredEvent>>),
    Change {
        seq: u64,
        /// The encoded record's length, header included.
        len: u32,
        change: DeliveryChange,
    },
}

impl Filing {
    fn seq(&self) -> u64 {
        match self {
            Filing::Event(event, _) => event.seq,
            Filing::Change { seq, .. } => *seq,
        }
    }

    fn len(&self) -> u32 {
        match self {
            Filing::Event(event, _) => event.len,
            Filing::Change { len, .. } => *len,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct SweepRequest {
    now: u64,
    retention: u64,
    window: u64,
}

impl Shared {
    pub(super) fn new(
        queues: Arc<RwLock<Queues>>,
        next_seq: u64,
        hasher: DedupeHasher,
        dedupe: Dedupe,
        events: Arc<EventCache>,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            intake: Mutex::new(Intake {
                next_seq,
                dedupe,
                ..Intake::default()
            }),
            wake: Condvar::new(),
            queues,
            events,
            syncs: std::sync::atomic::AtomicU64::new(0),
            hasher,
        })
    }

    /// How many times the log was synced.
    #[cfg(test)]
    pub(super) fn syncs(&self) -> u64 {
        self.syncs.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn intake(&self) -> MutexGuard<'_, Intake> {
        self.intake.lock().expect("intake lock")
    }

    /// Adds events to the filling group; the answer comes once they are on disk.
    pub(super) fn append(
        &self,
        events: Vec<NewEvent>,
        now: u64,
        window: u64,
    ) -> Answer<Vec<Appended>> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let hashes: Vec<Identity> = events
            .iter()
            .map(|event| self.hasher.hash(&event.source, &event.id))
            .collect();
        let mut intake = self.intake();
        if let Some(message) = intake.refusal() {
            let _ = reply.send(Err(StoreError::Unavailable(message.into())));
            return answer;
        }
        let intake = &mut *intake;
        let mut answers = Vec::with_capacity(events.len());
        for (event, hash) in events.into_iter().zip(hashes) {
            // An event the log held at open has its acceptance time in the index (the
            // committer never takes the intake lock while it holds the queues').
            let accepted_at = |seq| (self.queues.read().expect("queues lock")).accepted_at(seq);
            if let Some(seq) = intake.dedupe.earlier(hash, now, window, accepted_at) {
                // Answered with the group, so never before the original is on disk.
                answers.push(Appended::Duplicate { seq });
                continue;
            }
            let seq = intake.next_seq;
            intake.next_seq += 1;
            intake.dedupe.insert(hash, seq, now);
            let bytes = event_bytes(&event.json, event.extension_types.as_deref());
            let record = LogRecord {
                seq,
                accepted_at: now,
                source: event.source,
                id: event.id,
                json: event.json,
                extension_types: event.extension_types,
                subscriptions: event.subscriptions,
            };
            let len = record.encode_into(&mut intake.group.bytes);
            // Its deliveries will read it soon: it is kept as it is, not read back.
            let cached = (!record.subscriptions.is_empty()).then(|| {
                Arc::new(StoredEvent {
                    seq,
                    source: record.source,
                    id: record.id,
                    accepted_at: now,
                    json: record.json,
                    extension_types: record.extension_types,
                })
            });
            intake.group.filings.push(Filing::Event(
                EventFiling {
                    seq,
                    accepted_at: now,
                    hash,
                    len: len as u32,
                    bytes,
                    subscriptions: record.subscriptions,
                },
                cached,
            ));
            answers.push(Appended::Accepted { seq });
            intake.group.durable = true;
        }
        intake.group.replies.push((reply, answers));
        self.wake_committer(intake);
        answer
    }

    /// Adds delivery-state changes to the filling group; the answer comes once they are
    /// applied and written, and on disk if `durable` (if not, they are with the next sync,
    /// within [`RESULTS_SYNC_INTERVAL`]).
    pub(super) fn record(&self, changes: Vec<DeliveryChange>, durable: bool) -> Answer<()> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let mut intake = self.intake();
        if let Some(message) = intake.refusal() {
            let _ = reply.send(Err(StoreError::Unavailable(message.into())));
            return answer;
        }
        let intake = &mut *intake;
        for change in changes {
            let seq = intake.next_seq;
            intake.next_seq += 1;
            let len = encode_change(seq, &change, &mut intake.group.bytes) as u32;
            intake
                .group
                .filings
                .push(Filing::Change { seq, len, change });
        }
        intake.group.recorded.push(reply);
        intake.group.durable |= durable;
        if durable || !intake.napping {
            self.wake_committer(intake);
        }
        answer
    }

    /// Why the log takes no appends, if it takes none.
    pub(super) fn refusal(&self) -> Option<&'static str> {
        self.intake().refusal()
    }

    /// Asks the committer for a retention sweep.
    pub(super) fn sweep(&self, now: u64, retention: u64, window: u64) -> Answer<Swept> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let mut intake = self.intake();
        if intake.closed {
            let _ = reply.send(Err(StoreError::Unavailable(CLOSED.into())));
            return answer;
        }
        let request = SweepRequest {
            now,
            retention,
            window,
        };
        intake.sweeps.push((request, reply));
        self.wake_committer(&mut intake);
        answer
    }

    /// Lets the committer finish what it has and end.
    pub(super) fn close(&self) {
        let mut intake = self.intake();
        intake.closed = true;
        self.wake_committer(&mut intake);
    }

    fn wake_committer(&self, intake: &mut Intake) {
        if intake.idle {
            intake.idle = false;
            self.wake.notify_one();
        }
    }
}

/// The committer thread: takes the filling group, writes, syncs, files and answers it.
pub(super) fn run(mut log: EventLog, shared: &Shared) {
    let mut spare = Group::default();
    // Since when written results wait for a sync.
    let mut unsynced: Option<std::time::Instant> = None;
    loop {
        let (mut group, sweeps) = {
            let mut intake = shared.intake();
            while intake.group.is_empty() && intake.sweeps.is_empty() {
                if intake.closed {
                    drop(intake);
                    settle(&mut log, shared, &mut unsynced);
                    return;
                }
                intake.idle = true;
                if let Some(since) = unsynced {
                    // Written results wait for the next group's sync, up to the interval.
                    let left = RESULTS_SYNC_INTERVAL.saturating_sub(since.elapsed());
                    if left.is_zero() {
                        drop(intake);
                        settle(&mut log, shared, &mut unsynced);
                        intake = shared.intake();
                    } else {
                        intake.napping = true;
                        intake = shared
                            .wake
                            .wait_timeout(intake, left.min(RESULTS_NAP))
                            .expect("intake lock")
                            .0;
                        intake.napping = false;
                    }
                    continue;
                }
                if !intake.failed {
                    intake = shared.wake.wait(intake).expect("intake lock");
                    continue;
                }
                // Refusing: every second, a test write decides whether to take writes again.
                intake = shared
                    .wake
                    .wait_timeout(intake, PROBE_INTERVAL)
                    .expect("intake lock")
                    .0;
                if intake.failed && !intake.closed {
                    drop(intake);
                    let probe = log.probe();
                    intake = shared.intake();
                    match probe {
                        Ok(()) => {
                            intake.failed = false;
                            tracing::info!(
                                "The event log takes writes again; events are accepted."
                            );
                        }
                        Err(error) => {
                            tracing::debug!(%error, "The event log still cannot be written to.");
                        }
                    }
                }
            }
            intake.idle = false;
            let group = std::mem::replace(&mut intake.group, std::mem::take(&mut spare));
            (group, std::mem::take(&mut intake.sweeps))
        };
        if !sweeps.is_empty() {
            // A sweep expects everything written to be on disk.
            settle(&mut log, shared, &mut unsynced);
        }
        for (request, reply) in sweeps {
            let _ = reply.send(sweep(&mut log, shared, request));
        }
        commit(&mut log, shared, &mut group, &mut unsynced);
        group.bytes.clear();
        group.filings.clear();
        group.durable = false;
        spare = group;
    }
}

/// Syncs the results written since the last sync, if there are any. If the sync fails the
/// store refuses writes as after a failed group, and the log is cut back to its last sync:
/// the results written since were answered and applied, so their deliveries are made again
/// only after a restart (the log is the truth then).
fn settle(log: &mut EventLog, shared: &Shared, unsynced: &mut Option<std::time::Instant>) {
    if unsynced.take().is_none() {
        return;
    }
    if let Err(error) = sync(log, shared) {
        tracing::error!(%error, "Syncing the event log failed; no events are accepted until a test write succeeds (tried every second).");
        undo(log, shared, &Group::default());
    }
}

/// `fdatasync` of the log, counted.
fn sync(log: &mut EventLog, shared: &Shared) -> Result<(), StoreError> {
    shared
        .syncs
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    log.sync()
}

fn commit(
    log: &mut EventLog,
    shared: &Shared,
    group: &mut Group,
    unsynced: &mut Option<std::time::Instant>,
) {
    if let Some(first) = group.filings.first().map(Filing::seq) {
        let durable =
            group.durable || unsynced.is_some_and(|since| since.elapsed() >= RESULTS_SYNC_INTERVAL);
        let written = log
            .write_encoded(first, group.filings.len() as u64, &group.bytes)
            .and_then(|place| {
                if durable {
                    sync(log, shared)?;
                }
                Ok(place)
            });
        let (segment, mut offset) = match written {
            Ok(place) => {
                if durable {
                    *unsynced = None;
                } else if unsynced.is_none() {
                    *unsynced = Some(std::time::Instant::now());
                }
                place
            }
            Err(error) => {
                *unsynced = None;
                tracing::error!(%error, "Writing the event log failed; no events are accepted until a test write succeeds (tried every second).");
                undo(log, shared, group);
                for (reply, _) in group.replies.drain(..) {
                    let _ = reply.send(Err(StoreError::Unavailable(FAILED.into())));
                }
                for reply in group.recorded.drain(..) {
                    let _ = reply.send(Err(StoreError::Unavailable(FAILED.into())));
                }
                return;
            }
        };
        // On disk now: cached before their deliveries can be leased (filed below).
        shared
            .events
            .put(group.filings.iter_mut().filter_map(|filing| match filing {
                Filing::Event(_, cached) => cached.take(),
                Filing::Change { .. } => None,
            }));
        let mut queues = shared.queues.write().expect("queues lock");
        for filing in &group.filings {
            let location = Location {
                segment,
                offset,
                len: filing.len(),
            };
            offset += filing.len();
            match filing {
                Filing::Event(event, _) => queues.add(event, location),
                Filing::Change { change, .. } => queues.apply(change),
            }
        }
    }
    for (reply, answers) in group.replies.drain(..) {
        let _ = reply.send(Ok(answers));
    }
    for reply in group.recorded.drain(..) {
        let _ = reply.send(Ok(()));
    }
}

/// Undoes a group that could not be written, so that the store is as if it never came
/// (nothing of it was acknowledged): the log is cut back to before it (a sync that failed
/// may have left its records in the file), its events' identities are given up (a retry is
/// accepted, not answered as a duplicate of an event that is not on disk); its results'
/// deliveries go back to their leases when their recorders hear of the failure
/// (`EmbeddedStore::record_with`). The store refuses writes until a probe succeeds.
fn undo(log: &mut EventLog, shared: &Shared, group: &Group) {
    let mut intake = shared.intake();
    intake.failed = true;
    if let Err(error) = log.cut_back() {
        tracing::error!(%error, "Cutting the event log back after a failed write failed; the store stays closed until the hub restarts.");
        intake.closed = true;
    }
    for filing in &group.filings {
        if let Filing::Event(event, _) = filing {
            intake.dedupe.forget(event.hash, event.seq);
        }
    }
}

/// How many duplicate-detection entries a sweep forgets under one hold of the intake lock,
/// so that publishers never wait long for it.
pub(super) const FORGET_CHUNK: usize = 4096;

/// Forgets expired duplicate-detection entries, then deletes closed segments past retention
/// whose deliveries are all finished. Everything written is synced by now: the committer
/// settles any unsynced results before it sweeps.
fn sweep(log: &mut EventLog, shared: &Shared, request: SweepRequest) -> Result<Swept, StoreError> {
    let SweepRequest {
        now,
        retention,
        window,
    } = request;
    let queues = &shared.queues;
    let mut swept = Swept::default();
    let forget = |events: &[(u64, Identity)]| -> u64 {
        let mut intake = shared.intake();
        let forgotten = events
            .iter()
            .filter(|(seq, hash)| intake.dedupe.forget(*hash, *seq))
            .count();
        forgotten as u64
    };
    loop {
        let expired = queues
            .write()
            .expect("queues lock")
            .expire_dedupe(now, window, FORGET_CHUNK);
        swept.dedupe_entries += forget(&expired);
        if expired.len() < FORGET_CHUNK {
            break;
        }
    }
    // Keep what duplicate detection needs as long as the retention.
    let keep = retention.max(window);
    for (first, next) in log.closed_segments() {
        let removable = {
            let queues = queues.read().expect("queues lock");
            let newest = queues.newest_accepted_in(first, next);
            newest.is_none_or(|at| now.saturating_sub(at) >= keep)
                && !queues.has_pending_in(first, next)
        };
        if !removable {
            // Only the oldest segments go: a delivery-state record is always in the same or
            // a later segment than its event, so replaying what is left stays consistent.
            break;
        }
        // Out of the index first, so that a reader finds no location to read; one that
        // found it just before sees the index empty after its read fails (`event`).
        let gone = queues.write().expect("queues lock").forget(first, next);
        log.delete(first)?;
        swept.events += gone.len() as u64;
        // The walk above has forgotten nearly all of these already; it stops at the first
        // event inside the window, and acceptance times are only nearly in sequence order,
        // so an identity can remain. Segments go rarely, so this costs little.
        for chunk in gone.chunks(FORGET_CHUNK) {
            swept.dedupe_entries += forget(chunk);
        }
    }
    Ok(swept)
}

#[cfg(test)]
mod tests {
    use knooppunt_store::{Attempt, Verdict};

    use super::*;

    fn attempt(seq: u64) -> DeliveryChange {
        DeliveryChange::Attempted(Attempt {
            subscription: "s".into(),
            seq,
            lease: 1,
            at: 1,
            status: Some(204),
            error: None,
            verdict: Verdict::Delivered,
            receipt: false,
        })
    }

    fn event(id: &str) -> NewEvent {
        NewEvent {
            source: "urn:nld:x".into(),
            id: id.into(),
            json: format!(r#"{{"specversion":"1.0","id":"{id}","source":"urn:nld:x","type":"t"}}"#),
            extension_types: None,
            subscriptions: vec!["s".into()],
        }
    }

    /// The group that is filling, taken as the committer takes it.
    fn take(shared: &Shared) -> Group {
        std::mem::take(&mut shared.intake().group)
    }

    /// Push delivery results are answered once written and reach the disk with the next
    /// sync; an event, and a change recorded durably, are on disk before their answer.
    #[tokio::test]
    async fn push_results_wait_for_the_next_sync_events_and_other_changes_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = EventLog::open(dir.path(), 1 << 20, |_, _| {}).unwrap();
        let queues = Arc::new(RwLock::new(Queues::default()));
        let shared = Shared::new(
            queues,
            1,
            DedupeHasher::default(),
            Dedupe::default(),
            Arc::default(),
        );
        let mut unsynced = None;

        let answer = shared.record(vec![attempt(1), attempt(2)], false);
        let mut group = take(&shared);
        assert!(!group.durable);
        commit(&mut log, &shared, &mut group, &mut unsynced);
        answer.await.unwrap().unwrap();
        assert_eq!(shared.syncs(), 0, "answered without a sync");
        assert!(unsynced.is_some(), "waiting for the next sync");

        let answer = shared.append(vec![event("1")], 1_000, 60_000);
        let _more_results = shared.record(vec![attempt(3)], false);
        let mut group = take(&shared);
        assert!(group.durable, "a group with an event");
        commit(&mut log, &shared, &mut group, &mut unsynced);
        assert!(matches!(
            answer.await.unwrap().unwrap()[..],
            [Appended::Accepted { .. }]
        ));
        assert_eq!(
            shared.syncs(),
            1,
            "the event, and the results before it, synced"
        );
        assert!(unsynced.is_none());

        let answer = shared.record(vec![attempt(9)], true);
        let mut group = take(&shared);
        assert!(
            group.durable,
            "a change recorded durably (a pull acknowledgement)"
        );
        commit(&mut log, &shared, &mut group, &mut unsynced);
        answer.await.unwrap().unwrap();
        assert_eq!(shared.syncs(), 2);

        // Results wait at most RESULTS_SYNC_INTERVAL while results keep coming.
        let _answer = shared.record(vec![attempt(4)], false);
        commit(&mut log, &shared, &mut take(&shared), &mut unsynced);
        assert_eq!(shared.syncs(), 2);
        std::thread::sleep(RESULTS_SYNC_INTERVAL);
        let _answer = shared.record(vec![attempt(5)], false);
        commit(&mut log, &shared, &mut take(&shared), &mut unsynced);
        assert_eq!(shared.syncs(), 3, "synced once the interval passed");

        // Settling syncs only what waits.
        settle(&mut log, &shared, &mut unsynced);
        assert_eq!(shared.syncs(), 3, "nothing waited");
        let _answer = shared.record(vec![attempt(6)], false);
        commit(&mut log, &shared, &mut take(&shared), &mut unsynced);
        settle(&mut log, &shared, &mut unsynced);
        assert_eq!(shared.syncs(), 4);
        assert!(unsynced.is_none());
    }

    /// A napping committer is not woken for push results (it looks again within
    /// RESULTS_NAP), but is for events and for changes recorded durably.
    #[test]
    fn push_results_do_not_wake_a_napping_committer() {
        let queues = Arc::new(RwLock::new(Queues::default()));
        let shared = Shared::new(
            queues,
            1,
            DedupeHasher::default(),
            Dedupe::default(),
            Arc::default(),
        );
        let nap = |shared: &Shared| {
            let mut intake = shared.intake();
            intake.idle = true;
            intake.napping = true;
        };
        nap(&shared);
        drop(shared.record(vec![attempt(1)], false));
        assert!(shared.intake().idle, "left to its nap");
        drop(shared.record(vec![attempt(2)], true));
        assert!(!shared.intake().idle, "woken for a durable change");
        nap(&shared);
        drop(shared.append(vec![event("1")], 1_000, 60_000));
        assert!(!shared.intake().idle, "woken for an event");
        let mut intake = shared.intake();
        intake.idle = true;
        intake.napping = false;
        drop(intake);
        drop(shared.record(vec![attempt(3)], false));
        assert!(
            !shared.intake().idle,
            "a sleeping committer is woken for anything"
        );
    }

    /// An idle committer syncs written results within the interval, and then stays idle (no
    /// sync without work).
    #[tokio::test]
    async fn an_idle_committer_leaves_nothing_unsynced() {
        let dir = tempfile::tempdir().unwrap();
        let log = EventLog::open(dir.path(), 1 << 20, |_, _| {}).unwrap();
        let queues = Arc::new(RwLock::new(Queues::default()));
        let shared = Shared::new(
            queues,
            1,
            DedupeHasher::default(),
            Dedupe::default(),
            Arc::default(),
        );
        let committer = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || run(log, &shared))
        };
        shared
            .record(vec![attempt(1)], false)
            .await
            .unwrap()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while shared.syncs() < 1 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(shared.syncs(), 1, "synced within the interval");
        tokio::time::sleep(RESULTS_SYNC_INTERVAL * 2).await;
        assert_eq!(shared.syncs(), 1, "an idle log is not synced again");
        shared.close();
        committer.join().unwrap();
    }
}
