//! Group commit of appends: one task per hub takes every append request that arrived while
//! the previous group committed and writes them in one transaction; the group is numbered
//! under the append lock for a moment, then inserted and committed without it.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

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
    /// `pool`'s connections: a group's round trips are answered there at once, not after
    /// the tasks ahead of them in the hub's busy runtime (each waited 0.2–0.5 ms there
    /// under load, for a few µs of the database's work).
    pub(crate) fn start(pool: Pool) -> Result<Appender, StoreError> {
        let (requests, receiver) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("knooppunt-append".into())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime.block_on(run(pool, receiver)),
                    // The receiver goes: every append answers that the appender stopped.
                    Err(error) => {
                        tracing::error!(%error, "The appender's runtime did not start.")
                    }
                }
            })
            .map_err(|error| StoreError::Backend(format!("the appender's thread: {error}")))?;
        Ok(Appender { requests })
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
/// started once the first had sent its inserts and commit, no gain, 15.0k against 15.3k;
/// and 2 in flight with the one-round-trip append, slower: 18.0–18.6k against 19.2–20.8k,
/// two hubs 14.4–14.9k against 17.9–18.2k.)
pub(crate) const GROUPS_IN_FLIGHT: usize = 1;

async fn run(pool: Pool, mut receiver: mpsc::UnboundedReceiver<Request>) {
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(GROUPS_IN_FLIGHT));
    let careful = std::sync::Arc::new(Careful::default());
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
        let careful = std::sync::Arc::clone(&careful);
        tokio::spawn(async move {
            let _slot = slot;
            match commit(&pool, &group, &careful).await {
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

/// At once: the numbers as one block, reserved under the lock; the sequence moves past it
/// and returns its last number, which is also this session's `currval` for the statements
/// after it (an event's number: the block's first plus the event's place in the group).
const RESERVE: &str = "SELECT setval('event_numbers', nextval('event_numbers') + $1::int8 - 1)";

/// At once: the identities taken by plain inserts (in key order), which fail the
/// transaction if any was taken before — within the window or not: the careful path then
/// decides. Cheaper than the claim's `ON CONFLICT` (no speculative insertion, nothing
/// returned). `$5` is the group's size less one.
const TAKE: &str = "\
INSERT INTO identities (source, id, seq, accepted_at)
SELECT source, id, currval('event_numbers') - $5::int8 + place, accepted_at
FROM UNNEST($1::text[], $2::text[], $3::int8[], $4::int8[]) AS u(source, id, place, accepted_at)";
const EVENTS_AT_ONCE: &str = "\
INSERT INTO events (seq, source, id, accepted_at, json, extension_types)
SELECT currval('event_numbers') - $7::int8 + place, source, id, accepted_at, json, extension_types
FROM UNNEST($1::int8[], $2::text[], $3::text[], $4::int8[], $5::text[], $6::text[])
    AS u(place, source, id, accepted_at, json, extension_types)";
const DELIVERIES_AT_ONCE: &str = "\
INSERT INTO deliveries (subscription, seq, next_attempt_at, bytes)
SELECT subscription, currval('event_numbers') - $5::int8 + place, due, bytes
FROM UNNEST($1::text[], $2::int8[], $3::int8[], $4::int4[]) AS d(subscription, place, due, bytes)";

/// PostgreSQL's `unique_violation`.
const UNIQUE_VIOLATION: &str = "23505";

/// How long the appender takes the careful path after a group met an identity that was
/// already taken: a publisher that retries, or sends duplicates on purpose, costs the
/// others at most one wasted attempt at once a second.
const CAREFUL_FOR: Duration = Duration::from_secs(1);

/// Until when the appender takes the careful path.
#[derive(Default)]
struct Careful(std::sync::Mutex<Option<Instant>>);

impl Careful {
    fn now(&self) -> bool {
        let until = self.0.lock().expect("careful lock");
        until.is_some_and(|until| Instant::now() < until)
    }

    fn begin(&self) {
        *self.0.lock().expect("careful lock") = Some(Instant::now() + CAREFUL_FOR);
    }
}

/// Writes one group in one transaction. At once (one round trip) when no identity of the
/// group was taken before; else, or while careful, in three: the numbers under the lock,
/// the claim of the identities, then the inserts of the events that claimed theirs and
/// the commit (pipelined, prepared). Returns the answers per request.
async fn commit(
    pool: &Pool,
    group: &[Request],
    careful: &Careful,
) -> Result<Vec<Vec<Appended>>, StoreError> {
    let client = pool.get().await.map_err(pool_error)?;
    let result = write(&client, group, careful).await;
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
    careful: &Careful,
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
    if !careful.now() {
        let at_once = AtOnce {
            flat: &flat,
            first_of: &first_of,
        };
        match at_once.write(client, &statements, group).await? {
            Some(answers) => return Ok(answers),
            None => careful.begin(),
        }
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

/// A group's events in order, each with the request it came in.
type Flat<'a> = [(&'a Request, &'a NewEvent)];

/// The columns of a group's identities: the first event of each, in key order (so that
/// two hubs never wait for each other in a cycle), with `key(its index)`.
struct Identities<'a> {
    sources: Vec<&'a str>,
    ids: Vec<&'a str>,
    keys: Vec<i64>,
    times: Vec<i64>,
}

impl<'a> Identities<'a> {
    fn of(
        flat: &Flat<'a>,
        first_of: &HashMap<(&str, &str), usize>,
        key: impl Fn(usize) -> i64,
    ) -> Identities<'a> {
        let mut firsts: Vec<usize> = first_of.values().copied().collect();
        firsts.sort_unstable_by_key(|&i| (flat[i].1.source.as_str(), flat[i].1.id.as_str()));
        Identities {
            sources: firsts.iter().map(|&i| flat[i].1.source.as_str()).collect(),
            ids: firsts.iter().map(|&i| flat[i].1.id.as_str()).collect(),
            keys: firsts.iter().map(|&i| key(i)).collect(),
            times: firsts.iter().map(|&i| flat[i].0.now as i64).collect(),
        }
    }
}

/// The columns of the events a group stores (in group order) and of their deliveries,
/// each with `key(its index)`; and the notice of those deliveries.
#[derive(Default)]
struct Rows<'a> {
    keys: Vec<i64>,
    sources: Vec<&'a str>,
    ids: Vec<&'a str>,
    times: Vec<i64>,
    jsons: Vec<&'a str>,
    types: Vec<Option<&'a str>>,
    subscriptions: Vec<&'a str>,
    delivery_keys: Vec<i64>,
    delivery_times: Vec<i64>,
    delivery_bytes: Vec<i32>,
}

impl<'a> Rows<'a> {
    fn of(flat: &Flat<'a>, stored: impl Fn(usize) -> bool, key: impl Fn(usize) -> i64) -> Rows<'a> {
        let mut rows = Rows::default();
        for (index, (request, event)) in flat.iter().enumerate() {
            if !stored(index) {
                continue;
            }
            rows.keys.push(key(index));
            rows.sources.push(event.source.as_str());
            rows.ids.push(event.id.as_str());
            rows.times.push(request.now as i64);
            rows.jsons.push(event.json.as_str());
            rows.types.push(event.extension_types.as_deref());
            let size = event.size().min(i32::MAX as u64) as i32;
            for subscription in &event.subscriptions {
                rows.subscriptions.push(subscription.as_str());
                rows.delivery_keys.push(key(index));
                rows.delivery_times.push(request.now as i64);
                rows.delivery_bytes.push(size);
            }
        }
        rows
    }

    /// Inserts the events and their deliveries, and tells the other hubs (their workers
    /// wake at the commit instead of at their next poll): pipelined, sent in this order
    /// when first polled. `back`, for the statements that number rows from the block
    /// reserved at once: the group's size less one.
    async fn insert(
        &self,
        client: &deadpool_postgres::ClientWrapper,
        (events, deliveries, notify): (&Statement, &Statement, &Statement),
        back: Option<&i64>,
    ) -> Result<(), tokio_postgres::Error> {
        let mut woken: Vec<&str> = self.subscriptions.clone();
        woken.sort_unstable();
        woken.dedup();
        let payload = crate::notify::deliveries(&woken);
        let channel = crate::notify::CHANNEL;
        let mut event_params: Vec<Param<'_>> = vec![
            &self.keys,
            &self.sources,
            &self.ids,
            &self.times,
            &self.jsons,
            &self.types,
        ];
        let mut delivery_params: Vec<Param<'_>> = vec![
            &self.subscriptions,
            &self.delivery_keys,
            &self.delivery_times,
            &self.delivery_bytes,
        ];
        if let Some(back) = back {
            event_params.push(back);
            delivery_params.push(back);
        }
        let notify_params: [Param<'_>; 2] = [&channel, &payload];
        let none_queued = self.subscriptions.is_empty();
        tokio::try_join!(
            execute_unless(client, self.keys.is_empty(), events, &event_params),
            execute_unless(client, none_queued, deliveries, &delivery_params),
            execute_unless(client, none_queued, notify, &notify_params),
        )?;
        Ok(())
    }
}

/// Executes `statement` unless there is nothing for it to do (`empty`).
async fn execute_unless(
    client: &deadpool_postgres::ClientWrapper,
    empty: bool,
    statement: &Statement,
    params: &[Param<'_>],
) -> Result<u64, tokio_postgres::Error> {
    if empty {
        return Ok(0);
    }
    client.execute(statement, params).await
}

/// A group written at once, in one round trip, when none of its identities was taken
/// before (the common case).
struct AtOnce<'a> {
    flat: &'a Flat<'a>,
    first_of: &'a HashMap<(&'a str, &'a str), usize>,
}

impl AtOnce<'_> {
    /// `BEGIN`, a block of numbers under the lock, the identities taken, the events and
    /// their deliveries, the notice, `COMMIT`: pipelined, prepared, one round trip. The
    /// answers per request; `None` when an identity had been taken before (then nothing was
    /// stored: the commit rolled back, and the numbers are left unused).
    async fn write(
        &self,
        client: &deadpool_postgres::ClientWrapper,
        statements: &Statements,
        group: &[Request],
    ) -> Result<Option<Vec<Vec<Appended>>>, StoreError> {
        let flat = self.flat;
        let count = flat.len() as i64;
        let back = count - 1;
        let first = |event: &NewEvent| self.first_of[&(event.source.as_str(), event.id.as_str())];
        let place = |index: usize| index as i64;
        let taken = Identities::of(flat, self.first_of, place);
        let rows = Rows::of(flat, |index| first(flat[index].1) == index, place);
        let lock_params: [Param<'_>; 1] = [&APPEND_LOCK];
        let count_params: [Param<'_>; 1] = [&count];
        let take_params: [Param<'_>; 5] =
            [&taken.sources, &taken.ids, &taken.keys, &taken.times, &back];
        let inserts = (
            &statements.events_at_once,
            &statements.deliveries_at_once,
            &statements.notify,
        );
        // Polled in this order, so sent in this order.
        let (begun, locked, xid, reserved, unlocked, took, inserted, committed) = tokio::join!(
            client.batch_execute("BEGIN"),
            client.execute(&statements.lock, &lock_params),
            client.execute(&statements.xid, &[]),
            client.query_one(&statements.reserve, &count_params),
            client.execute(&statements.unlock, &lock_params),
            client.execute(&statements.take, &take_params),
            rows.insert(client, inserts, Some(&back)),
            client.batch_execute("COMMIT"),
        );
        begun.map_err(backend)?;
        locked.map_err(backend)?;
        xid.map_err(backend)?;
        let last: i64 = reserved.map_err(backend)?.get(0);
        unlocked.map_err(backend)?;
        if let Err(error) = &took {
            let taken = error.as_db_error().is_some_and(|db| {
                db.code().code() == UNIQUE_VIOLATION && db.table() == Some("identities")
            });
            if taken {
                // The statements after it failed too, and the COMMIT rolled back.
                tracing::debug!(
                    "An identity of a group of appends was taken before; writing it carefully."
                );
                return Ok(None);
            }
        }
        took.map_err(backend)?;
        inserted.map_err(backend)?;
        committed.map_err(backend)?;
        let numbers: Vec<i64> = (0..count).map(|place| last - back + place).collect();
        let holder = flat.iter().map(|(_, event)| Some(first(event))).collect();
        let written = Written {
            flat,
            numbers: &numbers,
            first_of: self.first_of,
        };
        written
            .answers(client, statements, group, holder)
            .await
            .map(Some)
    }
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
    reserve: Statement,
    take: Statement,
    events_at_once: Statement,
    deliveries_at_once: Statement,
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
        let (reserve, take, events_at_once, deliveries_at_once) = tokio::try_join!(
            client.prepare_cached(RESERVE),
            client.prepare_cached(TAKE),
            client.prepare_cached(EVENTS_AT_ONCE),
            client.prepare_cached(DELIVERIES_AT_ONCE),
        )
        .map_err(backend)?;
        Ok(Statements {
            reserve,
            take,
            events_at_once,
            deliveries_at_once,
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
    flat: &'a Flat<'a>,
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
        let claimed = Identities::of(self.flat, self.first_of, |index| self.numbers[index]);
        // One window for the group: the hub's (its requests all have it).
        let window = group
            .iter()
            .map(|r| r.window.min(i64::MAX as u64) as i64)
            .max()
            .unwrap_or(0);
        let claim_params: [Param<'_>; 5] = [
            &claimed.sources,
            &claimed.ids,
            &claimed.keys,
            &claimed.times,
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
        // Per event: its identity's first, when that first claimed it.
        let holder: Vec<Option<usize>> = self
            .flat
            .iter()
            .map(|(_, event)| {
                let first = self.first_of[&(event.source.as_str(), event.id.as_str())];
                claimed.contains(&first).then_some(first)
            })
            .collect();
        let rows = Rows::of(
            self.flat,
            |index| holder[index] == Some(index),
            |index| self.numbers[index],
        );
        let inserts = (
            &statements.events,
            &statements.deliveries,
            &statements.notify,
        );
        // A failed statement turns the COMMIT into a rollback; its error is what is returned.
        tokio::try_join!(
            rows.insert(client, inserts, None),
            client.batch_execute("COMMIT")
        )
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
