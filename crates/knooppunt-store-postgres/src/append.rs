//! Group commit of appends: one task per hub takes every append request that arrived while
//! the previous group committed and writes them in one transaction under the append lock.

use std::collections::HashMap;

use deadpool_postgres::Pool;
use knooppunt_store::{Appended, NewEvent, StoreError};
use tokio::sync::{mpsc, oneshot};

use crate::{backend, pool_error};

/// The advisory lock every hub's append transaction takes (`appendlk` in ASCII): event
/// numbers are handed out and committed in one order.
const APPEND_LOCK: i64 = 0x6170_7065_6e64_6c6b;

/// At most this many requests go into one transaction.
const MAX_GROUP: usize = 256;

struct Request {
    events: Vec<NewEvent>,
    now: u64,
    window: u64,
    reply: oneshot::Sender<Result<Vec<Appended>, StoreError>>,
}

/// The sending side of the appender task; the task ends when this is dropped.
pub(crate) struct Appender {
    requests: mpsc::UnboundedSender<Request>,
}

impl Appender {
    pub(crate) fn start(pool: Pool) -> Appender {
        let (requests, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, receiver));
        Appender { requests }
    }

    pub(crate) async fn append(
        &self,
        events: Vec<NewEvent>,
        now: u64,
        window: u64,
    ) -> Result<Vec<Appended>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, answer) = oneshot::channel();
        let request = Request {
            events,
            now,
            window,
            reply,
        };
        if self.requests.send(request).is_err() {
            return Err(StoreError::Unavailable(
                "the store's appender stopped".into(),
            ));
        }
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the store's appender stopped".into()))?
    }
}

async fn run(pool: Pool, mut receiver: mpsc::UnboundedReceiver<Request>) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while let Some(first) = receiver.recv().await {
        group.push(first);
        while group.len() < MAX_GROUP {
            match receiver.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        match commit(&pool, &group).await {
            Ok(answers) => {
                for (request, answer) in group.drain(..).zip(answers) {
                    let _ = request.reply.send(Ok(answer));
                }
            }
            Err(error) => {
                tracing::warn!(%error, "Appending events to the database failed; nothing of the group was stored.");
                for request in group.drain(..) {
                    let _ = request.reply.send(Err(clone_error(&error)));
                }
            }
        }
    }
}

fn clone_error(error: &StoreError) -> StoreError {
    match error {
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
        StoreError::Backend(m) => StoreError::Backend(m.clone()),
        StoreError::Corrupt(m) => StoreError::Corrupt(m.clone()),
        other => StoreError::Backend(other.to_string()),
    }
}

/// Writes one group: the answers per request, in order.
async fn commit(pool: &Pool, group: &[Request]) -> Result<Vec<Vec<Appended>>, StoreError> {
    let mut client = pool.get().await.map_err(pool_error)?;
    let transaction = client.transaction().await.map_err(backend)?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&APPEND_LOCK])
        .await
        .map_err(backend)?;

    // Duplicate detection: the newest accepted event of each identity within the widest
    // window of the group; each request then applies its own window.
    let mut sources = Vec::new();
    let mut ids = Vec::new();
    for request in group {
        for event in &request.events {
            sources.push(event.source.as_str());
            ids.push(event.id.as_str());
        }
    }
    // Accepted less than the window ago: after now - window (which may be before 1970).
    let cutoff = |r: &Request| r.now as i64 - r.window.min(i64::MAX as u64) as i64;
    let oldest = group.iter().map(cutoff).min().unwrap_or(0);
    let rows = transaction
        .query(
            "SELECT e.source, e.id, max(e.accepted_at), max(e.seq) FROM events e \
             JOIN UNNEST($1::text[], $2::text[]) AS wanted(source, id) \
               ON e.source = wanted.source AND e.id = wanted.id \
             WHERE e.accepted_at > $3 GROUP BY e.source, e.id",
            &[&sources, &ids, &oldest],
        )
        .await
        .map_err(backend)?;
    let mut known: HashMap<(String, String), (i64, u64)> = rows
        .iter()
        .map(|row| {
            (
                (row.get(0), row.get(1)),
                (row.get::<_, i64>(2), row.get::<_, i64>(3) as u64),
            )
        })
        .collect();

    let fresh: usize = group.iter().map(|r| r.events.len()).sum();
    let numbers = transaction
        .query(
            "SELECT nextval('event_numbers') FROM generate_series(1, $1::int8)",
            &[&(fresh as i64)],
        )
        .await
        .map_err(backend)?;
    let mut numbers: Vec<i64> = numbers.iter().map(|row| row.get(0)).collect();
    numbers.sort_unstable();
    let mut numbers = numbers.into_iter();

    let (mut seqs, mut srcs, mut eids, mut times, mut jsons) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut d_subs, mut d_seqs, mut d_times) = (Vec::new(), Vec::new(), Vec::new());
    let mut answers = Vec::with_capacity(group.len());
    for request in group {
        let cutoff = cutoff(request);
        let mut answer = Vec::with_capacity(request.events.len());
        for event in &request.events {
            let key = (event.source.clone(), event.id.clone());
            if let Some(&(accepted_at, seq)) = known.get(&key)
                && accepted_at > cutoff
            {
                answer.push(Appended::Duplicate { seq });
                continue;
            }
            let seq = numbers.next().expect("one number per event");
            known.insert(key, (request.now as i64, seq as u64));
            seqs.push(seq);
            srcs.push(event.source.as_str());
            eids.push(event.id.as_str());
            times.push(request.now as i64);
            jsons.push(event.json.as_str());
            for subscription in &event.subscriptions {
                d_subs.push(subscription.as_str());
                d_seqs.push(seq);
                d_times.push(request.now as i64);
            }
            answer.push(Appended::Accepted { seq: seq as u64 });
        }
        answers.push(answer);
    }
    if !seqs.is_empty() {
        transaction
            .execute(
                "INSERT INTO events (seq, source, id, accepted_at, json) \
                 SELECT * FROM UNNEST($1::int8[], $2::text[], $3::text[], $4::int8[], $5::text[])",
                &[&seqs, &srcs, &eids, &times, &jsons],
            )
            .await
            .map_err(backend)?;
    }
    if !d_seqs.is_empty() {
        // Only for subscriptions that exist (one deleted meanwhile gets nothing).
        transaction
            .execute(
                "INSERT INTO deliveries (subscription, seq, next_attempt_at) \
                 SELECT q.subscription, q.seq, q.at \
                 FROM UNNEST($1::text[], $2::int8[], $3::int8[]) AS q(subscription, seq, at) \
                 WHERE EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = q.subscription)",
                &[&d_subs, &d_seqs, &d_times],
            )
            .await
            .map_err(backend)?;
    }
    if !d_subs.is_empty() {
        // Other hubs' workers wake at the commit instead of at their next poll.
        let mut subscriptions: Vec<&str> = d_subs.clone();
        subscriptions.sort_unstable();
        subscriptions.dedup();
        transaction
            .execute(
                "SELECT pg_notify($1, $2)",
                &[
                    &crate::notify::CHANNEL,
                    &crate::notify::deliveries(&subscriptions),
                ],
            )
            .await
            .map_err(backend)?;
    }
    transaction.commit().await.map_err(backend)?;
    Ok(answers)
}
