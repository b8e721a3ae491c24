//! The writer thread: it owns the event log. It takes every append waiting, writes the
//! group's records with one `fdatasync`, records duplicate detection in sled and the new
//! deliveries in memory, and answers them all. Retention sweeps run here too, so that every
//! change to the log happens on one thread.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, mpsc};

use super::event_log::{EventLog, LogRecord};
use super::{Queues, Trees, backend, decode_dedupe, dedupe_key, encode_dedupe};
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

pub(super) fn run(
    mut log: EventLog,
    trees: Trees,
    queues: Arc<RwLock<Queues>>,
    commands: mpsc::Receiver<Command>,
) {
    while let Ok(first) = commands.recv() {
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
                    let _ = reply.send(sweep(&mut log, &trees, &queues, now, retention, window));
                }
            }
            if appends.len() < MAX_GROUP {
                next = commands.try_recv().ok();
            }
        }
        if !appends.is_empty() {
            append_group(&mut log, &trees, &queues, appends);
        }
    }
}

type Append = (Vec<NewEvent>, u64, u64, Reply<Vec<Appended>>);

fn append_group(log: &mut EventLog, trees: &Trees, queues: &RwLock<Queues>, group: Vec<Append>) {
    let mut outcomes: Vec<Vec<Appended>> = Vec::with_capacity(group.len());
    let mut records: Vec<LogRecord> = Vec::new();
    let mut in_group: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut failed = None;
    for (events, now, window, _) in &group {
        let mut answers = Vec::with_capacity(events.len());
        for event in events {
            let key = dedupe_key(&event.source, &event.id);
            let earlier = match in_group.get(&key) {
                Some(seq) => Some((*seq, *now)),
                None => match trees.dedupe.get(&key) {
                    Ok(found) => found.and_then(|bytes| decode_dedupe(&bytes)),
                    Err(error) => {
                        failed.get_or_insert(backend(error));
                        None
                    }
                },
            };
            if let Some((seq, accepted_at)) = earlier
                && now.saturating_sub(accepted_at) < *window
            {
                answers.push(Appended::Duplicate { seq });
                continue;
            }
            let seq = log.next_seq();
            in_group.insert(key, seq);
            records.push(LogRecord {
                seq,
                accepted_at: *now,
                source: event.source.clone(),
                id: event.id.clone(),
                json: event.json.clone(),
                subscriptions: event.subscriptions.clone(),
            });
            answers.push(Appended::Accepted { seq });
        }
        outcomes.push(answers);
    }
    let written = match failed {
        Some(error) => Err(error),
        None => log.append(&records),
    };
    let locations = match written {
        Ok(locations) => locations,
        Err(error) => {
            let message = error.to_string();
            for (_, _, _, reply) in group {
                let _ = reply.send(Err(StoreError::Backend(message.clone())));
            }
            return;
        }
    };
    // Durable from here on. Duplicate detection goes to sled without a flush: after a crash
    // it is rebuilt from the log past the `dedupe_upto` mark.
    let mut batch = sled::Batch::default();
    for record in &records {
        batch.insert(
            dedupe_key(&record.source, &record.id),
            &encode_dedupe(record.seq, record.accepted_at)[..],
        );
    }
    let noted = trees
        .dedupe
        .apply_batch(batch)
        .and_then(|()| match records.last() {
            Some(last) => trees
                .meta
                .insert(super::DEDUPE_UPTO, &last.seq.to_be_bytes())
                .map(drop),
            None => Ok(()),
        });
    if let Err(error) = noted {
        tracing::warn!(
            %error,
            "Recording duplicate detection failed; it is rebuilt from the event log at the next start."
        );
    }
    {
        let mut queues = queues.write().expect("queues lock");
        for (record, location) in records.iter().zip(locations) {
            queues.add(record, location);
        }
    }
    for ((_, _, _, reply), answers) in group.into_iter().zip(outcomes) {
        let _ = reply.send(Ok(answers));
    }
}

fn sweep(
    log: &mut EventLog,
    trees: &Trees,
    queues: &RwLock<Queues>,
    now: u64,
    retention: u64,
    window: u64,
) -> Result<Swept, StoreError> {
    let mut swept = Swept::default();
    for (first, next) in log.closed_segments() {
        let removable = {
            let queues = queues.read().expect("queues lock");
            let newest = queues.newest_accepted_in(first, next);
            newest.is_none_or(|at| now.saturating_sub(at) >= retention)
                && !queues.has_pending_in(first, next)
        };
        if !removable {
            continue;
        }
        log.delete(first)?;
        swept.events += queues.write().expect("queues lock").forget(first, next);
    }
    for entry in trees.dedupe.iter() {
        let (key, bytes) = entry.map_err(backend)?;
        if let Some((_, accepted_at)) = decode_dedupe(&bytes)
            && now.saturating_sub(accepted_at) >= window
        {
            trees.dedupe.remove(key).map_err(backend)?;
            swept.dedupe_entries += 1;
        }
    }
    Ok(swept)
}

impl Queues {
    /// Files a newly written (or, at start-up, replayed) event and its deliveries.
    pub(super) fn add(&mut self, record: &LogRecord, location: super::event_log::Location) {
        self.index
            .insert(record.seq, (location, record.accepted_at));
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

    fn newest_accepted_in(&self, first: u64, next: u64) -> Option<u64> {
        self.index
            .range(first..next)
            .next_back()
            .map(|(_, (_, at))| *at)
    }

    fn has_pending_in(&self, first: u64, next: u64) -> bool {
        self.pending
            .values()
            .any(|queue| queue.range(first..next).next().is_some())
    }

    /// Forgets the events of a deleted segment; returns how many.
    fn forget(&mut self, first: u64, next: u64) -> u64 {
        let seqs: Vec<u64> = self.index.range(first..next).map(|(seq, _)| *seq).collect();
        for seq in &seqs {
            self.index.remove(seq);
        }
        seqs.len() as u64
    }
}
