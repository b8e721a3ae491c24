//! Group commit of appends: one task per hub takes every append request that arrived while
//! the previous group committed and writes them in one transaction; the group is numbered
//! under the append lock for a moment, then inserted and committed without it.

use std::collections::{HashMap, HashSet};

use deadpool_postgres::Pool;
use knooppunt_store::{Appended, NewEvent, StoreError};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Statement;

use crate::transactions::{Param, in_transaction};
use crate::{backend, pool_error};

/// The advisory lock every hub's append takes for a moment (`appendlk` in ASCII): its
/// transaction id and its event numbers are handed out together, so that numbers follow
/// transaction ids.
const APPEND_LOCK: i64 = 0x6170_7065_6e64_6c6b;

/// At most this many requests go into one transaction.
const MAX_GROUP: usize = 256;

/// A request's answers, with its events given back (for the hub's cache of events).
type Answered = (Vec<Appended>, Vec<NewEvent>);

struct Request {
    events: Vec<NewEvent>,
    now: u64,
    window: u64,
    reply: oneshot::Sender<Result<Answered, StoreError>>,
}

/// The sending side of the appender task; the task ends when this is dropped.
pub(crate) struct Appender {
    requests: mpsc::UnboundedSender<Request>,
}

impl Appender {
    /// Starts the appender on a thread of its own, with a runtime of its own that drives
    /// `pool`'s connections: a group's three round trips are answered there at once, not
    /// after the tasks ahead of them in the hub's busy runtime (each waited 0.2–0.5 ms there
    /// under load, for a few µs of the database's work).
    pub(crate) fn start(pool: Pool) -> Appender {
        let (requests, receiver) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("knooppunt-append".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("the appender's runtime");
                runtime.block_on(run(pool, receiver));
            })
            .expect("the appender's thread");
        Appender { requests }
    }

    /// Appends `events` (in the next group); their answers, and the events given back.
    pub(crate) async fn append(
        &self,
        events: Vec<NewEvent>,
        now: u64,
        window: u64,
    ) -> Result<Answered, StoreError> {
        if events.is_empty() {
            return Ok((Vec::new(), events));
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
/// a time lets the next one grow while the previous commits. (Also measured: a second group
/// started once the first had sent its inserts and commit; no gain, 15.0k against 15.3k.)
pub(crate) const GROUPS_IN_FLIGHT: usize = 1;

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
                        let Request { events, reply, .. } = request;
                        let _ = reply.send(Ok((answer, events)));
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
    // The store is gone: let the groups in flight finish before this runtime ends.
    let _ = slots.acquire_many(GROUPS_IN_FLIGHT as u32).await;
}

pub(crate) fn clone_error(error: &StoreError) -> StoreError {
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

/// Round trip 2: claims the group's identities (the first event of each, in key order, so
/// two hubs never wait for each other in a cycle); an identity accepted within the window
/// stays the earlier event's. Returns the identities claimed. Simple statements from arrays
/// throughout: each plans in microseconds and keeps its plan (one statement joining it all
/// cost 2.4 ms of planning per group, more than the inserts).
const CLAIM: &str = "\
INSERT INTO identities AS t (source, id, seq, accepted_at)
SELECT * FROM UNNEST($1::text[], $2::text[], $3::int8[], $4::int8[])
ON CONFLICT (source, id) DO UPDATE SET seq = EXCLUDED.seq, accepted_at = EXCLUDED.accepted_at
    WHERE t.accepted_at <= EXCLUDED.accepted_at - $5
RETURNING t.source, t.id";

/// Round trip 3, with the notice and the commit: the events that claimed their identity,
/// and their deliveries.
const EVENTS: &str = "INSERT INTO events (seq, source, id, accepted_at, json, extension_types) \
    SELECT * FROM UNNEST($1::int8[], $2::text[], $3::text[], $4::int8[], $5::text[], $6::text[])";
const DELIVERIES: &str = "INSERT INTO deliveries (subscription, seq, next_attempt_at, bytes) \
    SELECT * FROM UNNEST($1::text[], $2::int8[], $3::int8[], $4::int4[])";

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
    let numbers = number(client, &statements, flat.len()).await?;
    let written = Written {
        flat: &flat,
        numbers: &numbers,
        first_of: &first_of,
    };
    let claimed = written.claim(client, &statements, group).await?;
    let holder = written
        .insert_and_commit(client, &statements, &claimed)
        .await?;
    written.answers(client, &statements, group, holder).await
}

/// The statements of a group's transaction, prepared once per connection.
struct Statements {
    lock: Statement,
    xid: Statement,
    numbers: Statement,
    unlock: Statement,
    claim: Statement,
    events: Statement,
    deliveries: Statement,
    held: Statement,
    notify: Statement,
}

impl Statements {
    async fn prepare(client: &deadpool_postgres::ClientWrapper) -> Result<Statements, StoreError> {
        let (lock, xid, numbers, unlock, claim, events, deliveries, held, notify) =
            tokio::try_join!(
                client.prepare_cached(LOCK),
                client.prepare_cached(XID),
                client.prepare_cached(NUMBERS),
                client.prepare_cached(UNLOCK),
                client.prepare_cached(CLAIM),
                client.prepare_cached(EVENTS),
                client.prepare_cached(DELIVERIES),
                client.prepare_cached(HELD),
                client.prepare_cached(NOTIFY),
            )
            .map_err(backend)?;
        Ok(Statements {
            lock,
            xid,
            numbers,
            unlock,
            claim,
            events,
            deliveries,
            held,
            notify,
        })
    }
}

/// Round trip 1: `BEGIN`, then the transaction id and `count` numbers under the append lock,
/// released at once. The numbers in order.
async fn number(
    client: &deadpool_postgres::ClientWrapper,
    statements: &Statements,
    count: usize,
) -> Result<Vec<i64>, StoreError> {
    let count = count as i64;
    let lock_params: [Param<'_>; 1] = [&APPEND_LOCK];
    let count_params: [Param<'_>; 1] = [&count];
    let (_, _, _, numbers, _) = tokio::try_join!(
        client.batch_execute("BEGIN"),
        client.execute(&statements.lock, &lock_params),
        client.execute(&statements.xid, &[]),
        client.query(&statements.numbers, &count_params),
        client.execute(&statements.unlock, &lock_params),
    )
    .map_err(backend)?;
    let mut numbers: Vec<i64> = numbers.iter().map(|row| row.get(0)).collect();
    numbers.sort_unstable();
    Ok(numbers)
}

/// A group being written: its events in order with their numbers, and the first event of
/// each identity.
struct Written<'a> {
    flat: &'a [(&'a Request, &'a NewEvent)],
    numbers: &'a [i64],
    first_of: &'a HashMap<(&'a str, &'a str), usize>,
}

impl Written<'_> {
    /// Round trip 2: claims the identities (the first event of each, in key order); returns
    /// the first events whose identity the group claimed.
    async fn claim(
        &self,
        client: &deadpool_postgres::ClientWrapper,
        statements: &Statements,
        group: &[Request],
    ) -> Result<HashSet<usize>, StoreError> {
        let flat = self.flat;
        let mut firsts: Vec<usize> = self.first_of.values().copied().collect();
        firsts.sort_unstable_by_key(|&i| (flat[i].1.source.as_str(), flat[i].1.id.as_str()));
        let claim_sources: Vec<&str> = firsts.iter().map(|&i| flat[i].1.source.as_str()).collect();
        let claim_ids: Vec<&str> = firsts.iter().map(|&i| flat[i].1.id.as_str()).collect();
        let claim_seqs: Vec<i64> = firsts.iter().map(|&i| self.numbers[i]).collect();
        let claim_times: Vec<i64> = firsts.iter().map(|&i| flat[i].0.now as i64).collect();
        // One window for the group: the hub's (its requests all have it).
        let window = group
            .iter()
            .map(|r| r.window.min(i64::MAX as u64) as i64)
            .max()
            .unwrap_or(0);
        let claim_params: [Param<'_>; 5] = [
            &claim_sources,
            &claim_ids,
            &claim_seqs,
            &claim_times,
            &window,
        ];
        Ok(client
            .query(&statements.claim, &claim_params)
            .await
            .map_err(backend)?
            .iter()
            .filter_map(|row| {
                self.first_of
                    .get(&(row.get::<_, &str>(0), row.get::<_, &str>(1)))
            })
            .copied()
            .collect())
    }

    /// Round trip 3: the events that claimed their identity and their deliveries, the
    /// notice to other hubs, and `COMMIT`. Per event: `Some(index of its identity's
    /// first)` when that first claimed it.
    async fn insert_and_commit(
        &self,
        client: &deadpool_postgres::ClientWrapper,
        statements: &Statements,
        claimed: &HashSet<usize>,
    ) -> Result<Vec<Option<usize>>, StoreError> {
        let (mut seqs, mut sources, mut ids, mut times, mut jsons) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut types: Vec<Option<&str>> = Vec::new();
        let (mut subscriptions, mut delivery_seqs, mut delivery_times) =
            (Vec::new(), Vec::new(), Vec::new());
        let mut delivery_bytes: Vec<i32> = Vec::new();
        let mut holder: Vec<Option<usize>> = Vec::with_capacity(self.flat.len());
        for (index, (request, event)) in self.flat.iter().enumerate() {
            let key = (event.source.as_str(), event.id.as_str());
            let first = self.first_of[&key];
            let owned = claimed.contains(&first);
            holder.push(owned.then_some(first));
            if !owned || first != index {
                continue;
            }
            seqs.push(self.numbers[index]);
            sources.push(key.0);
            ids.push(key.1);
            times.push(request.now as i64);
            jsons.push(event.json.as_str());
            types.push(event.extension_types.as_deref());
            let size = event.size().min(i32::MAX as u64) as i32;
            for subscription in &event.subscriptions {
                subscriptions.push(subscription.as_str());
                delivery_seqs.push(self.numbers[index]);
                delivery_times.push(request.now as i64);
                delivery_bytes.push(size);
            }
        }
        // Other hubs' workers wake at the commit instead of at their next poll.
        let mut woken: Vec<&str> = subscriptions.clone();
        woken.sort_unstable();
        woken.dedup();
        let payload = crate::notify::deliveries(&woken);
        let channel = crate::notify::CHANNEL;
        let event_params: [Param<'_>; 6] = [&seqs, &sources, &ids, &times, &jsons, &types];
        let delivery_params: [Param<'_>; 4] = [
            &subscriptions,
            &delivery_seqs,
            &delivery_times,
            &delivery_bytes,
        ];
        let notify_params: [Param<'_>; 2] = [&channel, &payload];
        let store_events = async {
            if seqs.is_empty() {
                return Ok(0);
            }
            client.execute(&statements.events, &event_params).await
        };
        let queue = async {
            if delivery_seqs.is_empty() {
                return Ok(0);
            }
            client
                .execute(&statements.deliveries, &delivery_params)
                .await
        };
        let tell = async {
            if woken.is_empty() {
                return Ok(0);
            }
            client.execute(&statements.notify, &notify_params).await
        };
        // A failed statement turns the COMMIT into a rollback; its error is what is returned.
        tokio::try_join!(store_events, queue, tell, client.batch_execute("COMMIT"))
            .map_err(backend)?;
        Ok(holder)
    }

    /// After the commit: each request's answers, with the numbers of the identities held
    /// by earlier events read now.
    async fn answers(
        &self,
        client: &deadpool_postgres::ClientWrapper,
        statements: &Statements,
        group: &[Request],
        holder: Vec<Option<usize>>,
    ) -> Result<Vec<Vec<Appended>>, StoreError> {
        let flat = self.flat;
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
            let rows = in_transaction(client, &statements.held, &held_params, false).await?;
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
                        seq: self.numbers[index] as u64,
                    },
                    Some(first) => Appended::Duplicate {
                        seq: self.numbers[first] as u64,
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
