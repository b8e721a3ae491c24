//! Group commit of appends: one task per hub takes every append request that arrived while
//! the previous group committed and writes them in one transaction under the append lock.

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

const LOCK: &str = "SELECT pg_advisory_xact_lock($1)";

/// The whole append of a group in one statement: duplicates (the newest stored event of
/// each identity within the row's window, or an earlier row of the group), numbers in input
/// order (one `nextval` for the first, the sequence set past the last: the append lock
/// keeps every other appender out meanwhile), the events and their deliveries. Returns, per
/// input row, its number and whether it is a duplicate.
const APPEND: &str = "\
WITH input AS (
    SELECT * FROM UNNEST($1::text[], $2::text[], $3::int8[], $4::int8[], $5::text[])
        WITH ORDINALITY AS i(source, id, at, cutoff, json, ord)
), known AS (
    SELECT DISTINCT ON (e.source, e.id) e.source, e.id, e.accepted_at, e.seq
    FROM events e JOIN (SELECT DISTINCT source, id FROM input) w
        ON e.source = w.source AND e.id = w.id
    ORDER BY e.source, e.id, e.accepted_at DESC
), classified AS (
    SELECT i.ord, i.source, i.id, i.at, i.json,
        CASE WHEN k.accepted_at > i.cutoff THEN k.seq END AS known_seq,
        row_number() OVER (PARTITION BY i.source, i.id ORDER BY i.ord) AS nth
    FROM input i LEFT JOIN known k ON k.source = i.source AND k.id = i.id
), fresh AS (
    SELECT c.*, row_number() OVER (ORDER BY c.ord) AS rn
    FROM classified c WHERE c.nth = 1 AND c.known_seq IS NULL
), reserved AS (
    SELECT nextval('event_numbers') AS first, (SELECT count(*) FROM fresh) AS n
    WHERE EXISTS (SELECT 1 FROM fresh)
), moved AS (
    SELECT setval('event_numbers', first + n - 1) AS last FROM reserved WHERE n > 1
), numbered AS (
    SELECT f.ord, f.source, f.id, f.at, f.json, r.first + f.rn - 1 AS seq
    FROM fresh f CROSS JOIN reserved r
), stored AS (
    INSERT INTO events (seq, source, id, accepted_at, json)
    SELECT seq, source, id, at, json FROM numbered
    RETURNING seq
), queued AS (
    INSERT INTO deliveries (subscription, seq, next_attempt_at)
    SELECT d.subscription, n.seq, n.at
    FROM UNNEST($6::text[], $7::int8[]) AS d(subscription, ord)
    JOIN numbered n ON n.ord = d.ord
    RETURNING seq
), firsts AS (
    SELECT c.source, c.id, COALESCE(c.known_seq, n.seq) AS seq, c.known_seq IS NOT NULL AS old
    FROM classified c LEFT JOIN numbered n ON n.ord = c.ord
    WHERE c.nth = 1
)
SELECT c.ord, f.seq, (c.nth > 1 OR f.old) AS duplicate,
    (SELECT count(*) FROM stored) + (SELECT count(*) FROM queued)
        + (SELECT count(*) FROM moved) AS written
FROM classified c JOIN firsts f ON f.source = c.source AND f.id = c.id
ORDER BY c.ord";

const NOTIFY: &str = "SELECT pg_notify($1, $2)";

/// Writes one group, in one transaction and one round trip: `BEGIN`, the append lock, the
/// append statement, the notice to other hubs and `COMMIT`, pipelined, so the lock is held
/// for the database's own work and the commit only. Returns the answers per request.
async fn commit(pool: &Pool, group: &[Request]) -> Result<Vec<Vec<Appended>>, StoreError> {
    let client = pool.get().await.map_err(pool_error)?;
    let result = write(&client, group).await;
    if result.is_err() {
        let _ = client.batch_execute("ROLLBACK").await;
    }
    result
}

async fn write(
    client: &deadpool_postgres::ClientWrapper,
    group: &[Request],
) -> Result<Vec<Vec<Appended>>, StoreError> {
    let (lock, append, notify) = tokio::try_join!(
        client.prepare_cached(LOCK),
        client.prepare_cached(APPEND),
        client.prepare_cached(NOTIFY),
    )
    .map_err(backend)?;

    let total: usize = group.iter().map(|r| r.events.len()).sum();
    let (mut sources, mut ids, mut times, mut cutoffs, mut jsons) = (
        Vec::with_capacity(total),
        Vec::with_capacity(total),
        Vec::with_capacity(total),
        Vec::with_capacity(total),
        Vec::with_capacity(total),
    );
    let (mut subscriptions, mut positions) = (Vec::new(), Vec::new());
    for request in group {
        // Accepted less than the window ago: after now - window (may be before 1970).
        let cutoff = request.now as i64 - request.window.min(i64::MAX as u64) as i64;
        for event in &request.events {
            sources.push(event.source.as_str());
            ids.push(event.id.as_str());
            times.push(request.now as i64);
            cutoffs.push(cutoff);
            jsons.push(event.json.as_str());
            let position = sources.len() as i64; // WITH ORDINALITY counts from 1
            for subscription in &event.subscriptions {
                subscriptions.push(subscription.as_str());
                positions.push(position);
            }
        }
    }
    // Other hubs' workers wake at the commit instead of at their next poll.
    let mut woken: Vec<&str> = subscriptions.clone();
    woken.sort_unstable();
    woken.dedup();
    let payload = crate::notify::deliveries(&woken);
    let channel = crate::notify::CHANNEL;

    let lock_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&APPEND_LOCK];
    let append_params: [&(dyn tokio_postgres::types::ToSql + Sync); 7] = [
        &sources,
        &ids,
        &times,
        &cutoffs,
        &jsons,
        &subscriptions,
        &positions,
    ];
    let notify_params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&channel, &payload];
    let tell = async {
        if woken.is_empty() {
            return Ok(0);
        }
        client.execute(&notify, &notify_params).await
    };
    // A failed statement turns the COMMIT into a rollback; its error is what is returned.
    let (_, _, rows, _, _) = tokio::try_join!(
        client.batch_execute("BEGIN"),
        client.execute(&lock, &lock_params),
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
    let mut rows = rows.iter();
    let mut answers = Vec::with_capacity(group.len());
    for request in group {
        let answer = (&mut rows)
            .take(request.events.len())
            .map(|row| {
                let seq = row.get::<_, i64>(1) as u64;
                if row.get::<_, bool>(2) {
                    Appended::Duplicate { seq }
                } else {
                    Appended::Accepted { seq }
                }
            })
            .collect();
        answers.push(answer);
    }
    Ok(answers)
}
