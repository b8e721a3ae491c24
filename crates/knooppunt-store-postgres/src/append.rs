//! Group commit of appends: one task per hub takes every append request that arrived while
//! the previous group committed and writes them in one transaction under the append lock.

use deadpool_postgres::Pool;
use knooppunt_store::{Appended, NewEvent, StoreError};
use tokio::sync::{mpsc, oneshot};

use crate::{backend, pool_error};

/// The advisory lock every hub's append takes for a moment (`appendlk` in ASCII): its
/// transaction id and its event numbers are handed out together, so that numbers follow
/// transaction ids.
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

/// Round trip 1: the transaction id and the numbers, together, under the lock, which is
/// released at once (a session lock: the inserts and the commit run without it, in
/// parallel across hubs).
const LOCK: &str = "SELECT pg_advisory_lock($1)";
const XID: &str = "SELECT pg_current_xact_id()::text";
const NUMBERS: &str = "SELECT nextval('event_numbers') FROM generate_series(1, $1::int8)";
const UNLOCK: &str = "SELECT pg_advisory_unlock($1)";

/// Round trip 2: claims each identity (the first of the group; an identity accepted
/// within the window stays the earlier one's), stores the events that claimed theirs and
/// their deliveries. Returns per input row whether it is the group's first of its identity,
/// whether that one claimed it, and its number. Identities are claimed in key order, so two
/// hubs never wait for each other in a cycle.
const APPEND: &str = "\
WITH input AS (
    SELECT * FROM UNNEST($1::text[], $2::text[], $3::int8[], $4::text[], $5::int8[])
        WITH ORDINALITY AS i(source, id, at, json, seq, ord)
), firsts AS (
    SELECT DISTINCT ON (source, id) * FROM input ORDER BY source, id, ord
), claimed AS (
    INSERT INTO identities AS t (source, id, seq, accepted_at)
    SELECT source, id, seq, at FROM firsts ORDER BY source, id
    ON CONFLICT (source, id) DO UPDATE SET seq = EXCLUDED.seq, accepted_at = EXCLUDED.accepted_at
        WHERE t.accepted_at <= EXCLUDED.accepted_at - $6
    RETURNING t.source, t.id, t.seq
), stored AS (
    INSERT INTO events (seq, source, id, accepted_at, json)
    SELECT f.seq, f.source, f.id, f.at, f.json
    FROM firsts f JOIN claimed c ON c.source = f.source AND c.id = f.id
    RETURNING seq
), queued AS (
    INSERT INTO deliveries (subscription, seq, next_attempt_at)
    SELECT d.subscription, f.seq, f.at
    FROM UNNEST($7::text[], $8::int8[]) AS d(subscription, ord)
    JOIN firsts f ON f.ord = d.ord
    JOIN claimed c ON c.source = f.source AND c.id = f.id
    RETURNING seq
)
SELECT i.ord, f.seq, c.seq IS NOT NULL AS claimed,
    (SELECT count(*) FROM stored) + (SELECT count(*) FROM queued) AS written
FROM input i
JOIN firsts f ON f.source = i.source AND f.id = i.id
LEFT JOIN claimed c ON c.source = i.source AND c.id = i.id
ORDER BY i.ord";

/// After the commit: the number of the event that holds each identity the group did not
/// claim (it was accepted within the window, maybe by another hub a moment ago).
const HELD: &str = "SELECT t.source, t.id, t.seq FROM identities t \
    JOIN UNNEST($1::text[], $2::text[]) AS w(source, id) ON t.source = w.source AND t.id = w.id";

const NOTIFY: &str = "SELECT pg_notify($1, $2)";

/// Writes one group in one transaction: round trip 1 takes the numbers under the lock,
/// round trip 2 inserts and commits (pipelined, prepared). Returns the answers per request.
async fn commit(pool: &Pool, group: &[Request]) -> Result<Vec<Vec<Appended>>, StoreError> {
    let client = pool.get().await.map_err(pool_error)?;
    let result = write(&client, group).await;
    if result.is_err() {
        // Whatever failed: no transaction and no lock stays behind on the connection.
        let _ = client
            .batch_execute("ROLLBACK; SELECT pg_advisory_unlock_all()")
            .await;
    }
    result
}

type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

async fn write(
    client: &deadpool_postgres::ClientWrapper,
    group: &[Request],
) -> Result<Vec<Vec<Appended>>, StoreError> {
    let (lock, xid, numbers, unlock, append, held, notify) = tokio::try_join!(
        client.prepare_cached(LOCK),
        client.prepare_cached(XID),
        client.prepare_cached(NUMBERS),
        client.prepare_cached(UNLOCK),
        client.prepare_cached(APPEND),
        client.prepare_cached(HELD),
        client.prepare_cached(NOTIFY),
    )
    .map_err(backend)?;

    let total: usize = group.iter().map(|r| r.events.len()).sum();
    let count = total as i64;
    let lock_params: [Param<'_>; 1] = [&APPEND_LOCK];
    let count_params: [Param<'_>; 1] = [&count];
    let (_, _, _, numbers, _) = tokio::try_join!(
        client.batch_execute("BEGIN"),
        client.execute(&lock, &lock_params),
        client.execute(&xid, &[]),
        client.query(&numbers, &count_params),
        client.execute(&unlock, &lock_params),
    )
    .map_err(backend)?;
    let mut numbers: Vec<i64> = numbers.iter().map(|row| row.get(0)).collect();
    numbers.sort_unstable();

    let (mut sources, mut ids, mut times, mut jsons) = (
        Vec::with_capacity(total),
        Vec::with_capacity(total),
        Vec::with_capacity(total),
        Vec::with_capacity(total),
    );
    let (mut subscriptions, mut positions) = (Vec::new(), Vec::new());
    for request in group {
        for event in &request.events {
            sources.push(event.source.as_str());
            ids.push(event.id.as_str());
            times.push(request.now as i64);
            jsons.push(event.json.as_str());
            let position = sources.len() as i64; // WITH ORDINALITY counts from 1
            for subscription in &event.subscriptions {
                subscriptions.push(subscription.as_str());
                positions.push(position);
            }
        }
    }
    // One window for the group: the hub's (its requests all have it).
    let window = group
        .iter()
        .map(|r| r.window.min(i64::MAX as u64) as i64)
        .max()
        .unwrap_or(0);
    // Other hubs' workers wake at the commit instead of at their next poll.
    let mut woken: Vec<&str> = subscriptions.clone();
    woken.sort_unstable();
    woken.dedup();
    let payload = crate::notify::deliveries(&woken);
    let channel = crate::notify::CHANNEL;
    let append_params: [Param<'_>; 8] = [
        &sources,
        &ids,
        &times,
        &jsons,
        &numbers,
        &window,
        &subscriptions,
        &positions,
    ];
    let notify_params: [Param<'_>; 2] = [&channel, &payload];
    let tell = async {
        if woken.is_empty() {
            return Ok(0);
        }
        client.execute(&notify, &notify_params).await
    };
    // A failed statement turns the COMMIT into a rollback; its error is what is returned.
    let (rows, _, _) = tokio::try_join!(
        client.query(&append, &append_params),
        tell,
        client.batch_execute("COMMIT"),
    )
    .map_err(backend)?;
    if rows.len() != total {
        return Err(StoreError::Backend(format!(
            "the append answered {} rows for {total} events",
            rows.len()
        )));
    }
    // (first of its identity in the group and claimed it, number)
    let outcomes: Vec<(bool, i64)> = rows
        .iter()
        .map(|row| {
            let seq: i64 = row.get(1);
            let claimed: bool = row.get(2);
            let first = claimed && numbers.get(row.get::<_, i64>(0) as usize - 1) == Some(&seq);
            (first, if claimed { seq } else { -1 })
        })
        .collect();
    // The identities held by earlier events: their numbers, read after the commit.
    let mut unclaimed_sources = Vec::new();
    let mut unclaimed_ids = Vec::new();
    for (index, (_, seq)) in outcomes.iter().enumerate() {
        if *seq < 0 {
            unclaimed_sources.push(sources[index]);
            unclaimed_ids.push(ids[index]);
        }
    }
    let mut holders = std::collections::HashMap::new();
    if !unclaimed_sources.is_empty() {
        let held_params: [Param<'_>; 2] = [&unclaimed_sources, &unclaimed_ids];
        for row in client.query(&held, &held_params).await.map_err(backend)? {
            holders.insert(
                (row.get::<_, String>(0), row.get::<_, String>(1)),
                row.get::<_, i64>(2),
            );
        }
    }
    let mut outcomes = outcomes.into_iter().enumerate();
    let mut answers = Vec::with_capacity(group.len());
    for request in group {
        let mut answer = Vec::with_capacity(request.events.len());
        for _ in 0..request.events.len() {
            let (index, (first, seq)) = outcomes.next().expect("one outcome per event");
            answer.push(if first {
                Appended::Accepted { seq: seq as u64 }
            } else if seq >= 0 {
                Appended::Duplicate { seq: seq as u64 }
            } else {
                let key = (sources[index].to_owned(), ids[index].to_owned());
                let seq = holders.get(&key).copied().unwrap_or(0);
                Appended::Duplicate { seq: seq as u64 }
            });
        }
        answers.push(answer);
    }
    Ok(answers)
}
