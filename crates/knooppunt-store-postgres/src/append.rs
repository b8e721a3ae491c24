//! Group commit of appends: one task per hub takes every append request that arrived while
//! the previous group committed and writes them in one transaction; the group is numbered
//! under the append lock for a moment, then inserted and committed without it.

use std::collections::{HashMap, HashSet};

use deadpool_postgres::Pool;
use knooppunt_store::{Appended, NewEvent, StoreError};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Statement;

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

/// Groups a hub commits at once. Only the numbering is serial, so several could overlap;
/// measured with 4, a hub was slower (11.0k against 13.8k events/s, two hubs 8.3k against
/// 13.0k): the groups get smaller and each costs the database a fixed amount. One group at
/// a time lets the next one grow while the previous commits.
const GROUPS_IN_FLIGHT: usize = 1;

async fn run(pool: Pool, mut receiver: mpsc::UnboundedReceiver<Request>) {
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(GROUPS_IN_FLIGHT));
    while let Some(first) = receiver.recv().await {
        // Wait for a free slot first: what arrives meanwhile joins this group.
        let Ok(slot) = std::sync::Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let mut group = Vec::with_capacity(MAX_GROUP);
        group.push(first);
        while group.len() < MAX_GROUP {
            match receiver.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        let pool = pool.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match commit(&pool, &group).await {
                Ok(answers) => {
                    for (request, answer) in group.into_iter().zip(answers) {
                        let _ = request.reply.send(Ok(answer));
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "Appending events to the database failed; nothing of the group was stored.");
                    for request in group {
                        let _ = request.reply.send(Err(clone_error(&error)));
                    }
                }
            }
        });
    }
}

pub(crate) fn clone_error(error: &StoreError) -> StoreError {
    match error {
        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
        StoreError::Backend(m) => StoreError::Backend(m.clone()),
        StoreError::Corrupt(m) => StoreError::Corrupt(m.clone()),
        other => StoreError::Backend(other.to_string()),
    }
}

/// The transaction id and the numbers, together, under the lock, which is released at once
/// (a session lock: the inserts and the commit run without it, in parallel across hubs).
/// The numbers are one block, reserved with one statement: the sequence moves past it and
/// returns its last number, which is also this session's `currval` for the statements
/// after it (an event's number: the block's first plus the event's place in the group).
const LOCK: &str = "SELECT pg_advisory_lock($1)";
const XID: &str = "SELECT pg_current_xact_id()::text";
const RESERVE: &str = "SELECT setval('event_numbers', nextval('event_numbers') + $1::int8 - 1)";
const UNLOCK: &str = "SELECT pg_advisory_unlock($1)";

/// Claims the group's identities (the first event of each, in key order, so two hubs never
/// wait for each other in a cycle); an identity accepted within the window stays the
/// earlier event's. Returns the numbers of the events that claimed theirs. Simple
/// statements from arrays throughout: each plans in microseconds and keeps its plan (one
/// statement joining it all cost 1.5–2.4 ms a group, more than these together).
const CLAIM: &str = "\
INSERT INTO identities AS t (source, id, seq, accepted_at)
SELECT source, id, currval('event_numbers') - $6::int8 + 1 + place, accepted_at
FROM UNNEST($1::text[], $2::text[], $3::int8[], $4::int8[]) AS u(source, id, place, accepted_at)
ON CONFLICT (source, id) DO UPDATE SET seq = EXCLUDED.seq, accepted_at = EXCLUDED.accepted_at
    WHERE t.accepted_at <= EXCLUDED.accepted_at - $5
RETURNING t.seq";

/// The events that claimed their identity (the claim, earlier in the same transaction, left
/// their number on it), and the deliveries of those events: one statement, sent right
/// behind the claim without waiting for its answer. Each event looks its identity up by
/// key (a sub-select per row: an `EXISTS` was planned as a scan of the whole table).
const EVENTS: &str = "\
WITH stored AS (
    INSERT INTO events (seq, source, id, accepted_at, json, extension_types)
    SELECT u.seq, u.source, u.id, u.accepted_at, u.json, u.extension_types
    FROM (SELECT currval('event_numbers') - $7::int8 + 1 + place AS seq, source, id,
                 accepted_at, json, extension_types
          FROM UNNEST($1::text[], $2::text[], $3::int8[], $4::int8[], $5::text[], $6::text[])
              AS x(source, id, place, accepted_at, json, extension_types)) u
    WHERE (SELECT t.seq FROM identities t WHERE t.source = u.source AND t.id = u.id) = u.seq
    RETURNING seq)
INSERT INTO deliveries (subscription, seq, next_attempt_at, bytes)
SELECT d.subscription, s.seq, d.due, d.bytes
FROM UNNEST($8::text[], $9::int8[], $10::int8[], $11::int4[]) AS d(subscription, place, due, bytes)
JOIN stored s ON s.seq = currval('event_numbers') - $7::int8 + 1 + d.place";

/// After the commit: the number of the event that holds each identity the group did not
/// claim (it was accepted within the window, maybe by another hub a moment ago).
const HELD: &str = "SELECT t.source, t.id, t.seq FROM identities t \
    JOIN UNNEST($1::text[], $2::text[]) AS w(source, id) ON t.source = w.source AND t.id = w.id";

const NOTIFY: &str = "SELECT pg_notify($1, $2)";

/// Writes one group in one transaction, in one round trip (`BEGIN`, the numbers under the
/// lock, the claim, the inserts, the notice, `COMMIT`: pipelined, prepared). Returns the
/// answers per request.
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
    let statements = Statements::prepare(client).await?;
    // Every event of the group in order; the first event of each identity.
    let flat: Vec<(&Request, &NewEvent)> = group
        .iter()
        .flat_map(|r| r.events.iter().map(move |e| (r, e)))
        .collect();
    let mut first_of: HashMap<(&str, &str), usize> = HashMap::with_capacity(flat.len());
    for (index, (_, event)) in flat.iter().enumerate() {
        first_of
            .entry((event.source.as_str(), event.id.as_str()))
            .or_insert(index);
    }
    let written = Written {
        flat: &flat,
        first_of: &first_of,
    };
    let (first, claimed) = written
        .insert_and_commit(client, &statements, group)
        .await?;
    written
        .answers(client, &statements, group, first, &claimed)
        .await
}

/// The statements of a group's transaction, prepared once per connection.
struct Statements {
    lock: Statement,
    xid: Statement,
    reserve: Statement,
    unlock: Statement,
    claim: Statement,
    events: Statement,
    held: Statement,
    notify: Statement,
}

impl Statements {
    async fn prepare(client: &deadpool_postgres::ClientWrapper) -> Result<Statements, StoreError> {
        let (lock, xid, reserve, unlock, claim, events, held, notify) = tokio::try_join!(
            client.prepare_cached(LOCK),
            client.prepare_cached(XID),
            client.prepare_cached(RESERVE),
            client.prepare_cached(UNLOCK),
            client.prepare_cached(CLAIM),
            client.prepare_cached(EVENTS),
            client.prepare_cached(HELD),
            client.prepare_cached(NOTIFY),
        )
        .map_err(backend)?;
        Ok(Statements {
            lock,
            xid,
            reserve,
            unlock,
            claim,
            events,
            held,
            notify,
        })
    }
}

/// A group being written: its events in order, and the first event of each identity.
struct Written<'a> {
    flat: &'a [(&'a Request, &'a NewEvent)],
    first_of: &'a HashMap<(&'a str, &'a str), usize>,
}

impl Written<'_> {
    /// The one round trip: numbers, identities, events, deliveries, the notice to other
    /// hubs, `COMMIT`. Returns the group's first number and the numbers of the events that
    /// claimed their identity.
    async fn insert_and_commit(
        &self,
        client: &deadpool_postgres::ClientWrapper,
        statements: &Statements,
        group: &[Request],
    ) -> Result<(i64, HashSet<i64>), StoreError> {
        let flat = self.flat;
        // The first event of each identity, in key order (the claim's lock order).
        let mut firsts: Vec<usize> = self.first_of.values().copied().collect();
        firsts.sort_unstable_by_key(|&i| (flat[i].1.source.as_str(), flat[i].1.id.as_str()));
        let (mut sources, mut ids, mut places, mut times, mut jsons) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut types: Vec<Option<&str>> = Vec::new();
        let (mut subscriptions, mut delivery_places, mut delivery_times) =
            (Vec::new(), Vec::new(), Vec::new());
        let mut delivery_bytes: Vec<i32> = Vec::new();
        for &index in &firsts {
            let (request, event) = flat[index];
            sources.push(event.source.as_str());
            ids.push(event.id.as_str());
            places.push(index as i64);
            times.push(request.now as i64);
            jsons.push(event.json.as_str());
            types.push(event.extension_types.as_deref());
            let size = event.size().min(i32::MAX as u64) as i32;
            for subscription in &event.subscriptions {
                subscriptions.push(subscription.as_str());
                delivery_places.push(index as i64);
                delivery_times.push(request.now as i64);
                delivery_bytes.push(size);
            }
        }
        // One window for the group: the hub's (its requests all have it).
        let window = group
            .iter()
            .map(|r| r.window.min(i64::MAX as u64) as i64)
            .max()
            .unwrap_or(0);
        let count = flat.len() as i64;
        // Other hubs' workers wake at the commit instead of at their next poll (a duplicate
        // wakes them for nothing).
        let mut woken: Vec<&str> = subscriptions.clone();
        woken.sort_unstable();
        woken.dedup();
        let payload = crate::notify::deliveries(&woken);
        let channel = crate::notify::CHANNEL;
        let lock_params: [Param<'_>; 1] = [&APPEND_LOCK];
        let count_params: [Param<'_>; 1] = [&count];
        let claim_params: [Param<'_>; 6] = [&sources, &ids, &places, &times, &window, &count];
        let event_params: [Param<'_>; 11] = [
            &sources,
            &ids,
            &places,
            &times,
            &jsons,
            &types,
            &count,
            &subscriptions,
            &delivery_places,
            &delivery_times,
            &delivery_bytes,
        ];
        let notify_params: [Param<'_>; 2] = [&channel, &payload];
        let tell = async {
            if woken.is_empty() {
                return Ok(0);
            }
            client.execute(&statements.notify, &notify_params).await
        };
        // Polled in this order, so sent in this order. A failed statement turns the COMMIT
        // into a rollback; its error is what is returned.
        let (_, _, _, last, _, claimed, _, _, _) = tokio::try_join!(
            client.batch_execute("BEGIN"),
            client.execute(&statements.lock, &lock_params),
            client.execute(&statements.xid, &[]),
            client.query_one(&statements.reserve, &count_params),
            client.execute(&statements.unlock, &lock_params),
            client.query(&statements.claim, &claim_params),
            client.execute(&statements.events, &event_params),
            tell,
            client.batch_execute("COMMIT"),
        )
        .map_err(backend)?;
        let first = last.get::<_, i64>(0) - count + 1;
        Ok((first, claimed.iter().map(|row| row.get(0)).collect()))
    }

    /// After the commit: each request's answers, with the numbers of the identities held
    /// by earlier events read now.
    async fn answers(
        &self,
        client: &deadpool_postgres::ClientWrapper,
        statements: &Statements,
        group: &[Request],
        first: i64,
        claimed: &HashSet<i64>,
    ) -> Result<Vec<Vec<Appended>>, StoreError> {
        let flat = self.flat;
        let number = |index: usize| first + index as i64;
        // Per event: the index of its identity's first, when that first claimed it.
        let holder: Vec<Option<usize>> = flat
            .iter()
            .map(|(_, event)| {
                let first = self.first_of[&(event.source.as_str(), event.id.as_str())];
                claimed.contains(&number(first)).then_some(first)
            })
            .collect();
        let (mut held_sources, mut held_ids) = (Vec::new(), Vec::new());
        for (index, owner) in holder.iter().enumerate() {
            if owner.is_none() {
                held_sources.push(flat[index].1.source.as_str());
                held_ids.push(flat[index].1.id.as_str());
            }
        }
        let mut holders: HashMap<(String, String), i64> = HashMap::new();
        if !held_sources.is_empty() {
            let held_params: [Param<'_>; 2] = [&held_sources, &held_ids];
            let rows = client
                .query(&statements.held, &held_params)
                .await
                .map_err(backend)?;
            for row in rows {
                holders.insert((row.get(0), row.get(1)), row.get(2));
            }
        }
        let mut outcomes = holder.into_iter().enumerate();
        let mut answers = Vec::with_capacity(group.len());
        for request in group {
            let mut answer = Vec::with_capacity(request.events.len());
            for _ in 0..request.events.len() {
                let (index, owner) = outcomes.next().expect("one outcome per event");
                answer.push(match owner {
                    Some(first) if first == index => Appended::Accepted {
                        seq: number(index) as u64,
                    },
                    Some(first) => Appended::Duplicate {
                        seq: number(first) as u64,
                    },
                    None => {
                        let event = flat[index].1;
                        let key = (event.source.clone(), event.id.clone());
                        Appended::Duplicate {
                            seq: holders.get(&key).copied().unwrap_or(0) as u64,
                        }
                    }
                });
            }
            answers.push(answer);
        }
        Ok(answers)
    }
}
