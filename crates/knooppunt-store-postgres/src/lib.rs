//! The PostgreSQL backend: several hubs share one database, each running the same
//! `Store` operations against it (tokio-postgres with a deadpool pool; no ORM).
//!
//! - **Append** (`append.rs`): the publishes of one hub are grouped into one transaction
//!   (group commit: whatever arrived while the previous group committed). The group takes
//!   its numbers and its transaction id under the append lock (a session advisory lock,
//!   held for just those statements, not until the commit), so numbers follow transaction
//!   ids across all hubs. Groups of different hubs may commit out of number order; an
//!   ordered subscription's oldest delivery is therefore leased only once no transaction
//!   older than its own is still running (`pg_snapshot_xmin`), so no smaller number can
//!   commit after it was delivered. Identities (`source` + `id`) are claimed in the same
//!   transaction; two hubs claiming one wait for each other on its key. The events and
//!   their deliveries go in with one multi-row insert each (`UNNEST` of arrays); the answer
//!   waits for the commit.
//! - **Leases**: unordered subscriptions lease with `FOR UPDATE SKIP LOCKED`, so hubs share a
//!   queue without waiting for each other; an ordered one leases its oldest deliveries in a
//!   row under the subscription's ordered lock (a transaction's advisory lock), so at most
//!   one hub holds them. Each lease takes a token from a
//!   sequence; `record` checks it under the row lock and refuses a stale one. A lease held
//!   by a killed hub runs out and the delivery is leased again by another.
//! - **Subscription changes** bump a version in the same transaction, which other hubs poll
//!   ([`Cluster::subscriptions_version`]) to reload their registries.
//!
//! Every write returns after `COMMIT`, which PostgreSQL makes durable (with its default
//! `synchronous_commit = on`).

mod append;
mod audit_log;
mod catalog;
mod changes;
mod cluster;
mod delivery_queue;
mod event_cache;
mod event_log;
mod notify;
mod principals;
mod recorder;
mod records;
mod schema;
mod subscriptions;
mod table;
mod tls;
mod transactions;

pub(crate) use changes::{apply_all, classify, statement};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use knooppunt_store::{
    Appended, CatalogEntry, DeadLetter, Delivery, DeliveryChange, DiskUsage, Grant, NewEvent,
    QueueStats, Receipt, Replay, Session, Store, StoreError, StoreFuture, StoredEvent,
    StoredPrincipal, Subscription, Swept, Verdict,
};
use knooppunt_store::{AuditEntry, AuditRange, AuditRecord};
use tokio_postgres::Row;

use self::append::Appender;
use self::event_cache::EventCache;
use self::transactions::{Param, in_transaction, locked_transaction};

/// How to reach the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// `postgres://user:password@host:port/database` (libpq URL or key=value form).
    pub url: String,
    /// Connections in this hub's pool (the appender holds one while a group commits).
    pub pool_size: usize,
    /// How long a call waits for a connection before the store reports itself unavailable.
    pub connect_timeout: Duration,
    /// How long a small group of push results of unordered subscriptions waits for more
    /// before it is committed (zero: it does not wait); see `recorder.rs`.
    pub results_wait: Duration,
}

impl PgOptions {
    pub fn new(url: impl Into<String>) -> PgOptions {
        PgOptions {
            url: url.into(),
            pool_size: 16,
            connect_timeout: Duration::from_secs(5),
            results_wait: Duration::from_millis(5),
        }
    }
}

/// The store on a PostgreSQL database; cheap to clone.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    appender: Appender,
    /// The appender's own connections (closed with the rest).
    append_pool: Pool,
    /// Where each unordered subscription's next lease starts looking.
    cursors: Cursors,
    recorder: recorder::Recorder,
    events: EventCache,
    /// For the listener's own connection.
    database: tls::Database,
    /// The listener tasks of [`Cluster::watch`], ended with the store.
    listeners: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// Runs a statement that changes only unordered leases in a transaction of its own whose commit does
/// not wait for the WAL to reach the disk (`synchronous_commit = off`): other hubs see it at
/// once, and a database crash can only forget it, which frees the delivery for another
/// lease (the holder's result is then refused as stale: a redelivery, never a loss). A
/// durable commit per lease cost a WAL flush each, most of the database's time while
/// delivering (docs/benchmarks-log.md). One round trip ([`in_transaction`]).
async fn without_flush(
    client: &Object,
    statement: &tokio_postgres::Statement,
    params: &[Param<'_>],
) -> Result<Vec<Row>, StoreError> {
    in_transaction(client, statement, params, false).await
}

impl Drop for Inner {
    fn drop(&mut self) {
        for listener in self.listeners.get_mut().expect("listeners lock").drain(..) {
            listener.abort();
        }
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").finish_non_exhaustive()
    }
}

/// A database error, by kind: a lost or refused connection makes the store unavailable
/// (another hub, or a retry, may succeed); anything else is a backend failure.
pub(crate) fn backend(error: tokio_postgres::Error) -> StoreError {
    let io = std::error::Error::source(&error).is_some_and(|s| s.is::<std::io::Error>());
    let shutting_down = error.as_db_error().is_some_and(|db| {
        // admin_shutdown, crash_shutdown, cannot_connect_now: the server is going away.
        matches!(db.code().code(), "57P01" | "57P02" | "57P03")
    });
    if error.is_closed() || io || shutting_down {
        StoreError::Unavailable(format!("the database: {error}"))
    } else {
        StoreError::Backend(format!("the database: {error}"))
    }
}

/// A pool of at most `size` connections to `database` (over TLS when its URL asks).
fn make_pool(
    database: &tls::Database,
    size: usize,
    options: &PgOptions,
) -> Result<Pool, StoreError> {
    let recycling = || ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    let manager = match &database.tls {
        None => Manager::from_config(database.config.clone(), tokio_postgres::NoTls, recycling()),
        Some(tls) => Manager::from_config(database.config.clone(), tls.clone(), recycling()),
    };
    Pool::builder(manager)
        .max_size(size)
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(options.connect_timeout))
        .create_timeout(Some(options.connect_timeout))
        .build()
        .map_err(|error| StoreError::Backend(format!("the connection pool: {error}")))
}

/// Rows of a name and a count or a time (`text`, `bigint`), as the store's trait answers them.
fn names_and_numbers(rows: &[tokio_postgres::Row]) -> Vec<(String, u64)> {
    rows.iter()
        .map(|row| (row.get(0), row.get::<_, i64>(1) as u64))
        .collect()
}

fn pool_error(error: deadpool_postgres::PoolError) -> StoreError {
    StoreError::Unavailable(format!("no database connection: {error}"))
}

/// Hides the password of a URL for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:********{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

impl PgStore {
    /// Reads the events of `leased` that this hub has not cached (another hub accepted
    /// them) in one statement, so that their deliveries do not read them one by one. The
    /// lease is taken whatever happens here: a failed read only leaves the events to be
    /// read one at a time.
    async fn read_ahead(&self, client: &Object, leased: &[Delivery]) {
        let missing: Vec<i64> = self
            .inner
            .events
            .missing(leased.iter().map(|d| d.seq))
            .into_iter()
            .map(|seq| seq as i64)
            .collect();
        if missing.is_empty() {
            return;
        }
        let read = async {
            let statement = client
                .prepare_cached(&format!(
                    "SELECT {EVENT_COLUMNS} FROM events WHERE seq = ANY($1)"
                ))
                .await?;
            client.query(&statement, &[&missing]).await
        };
        match read.await {
            Ok(rows) => {
                for row in &rows {
                    self.inner.events.insert(stored_event(row));
                }
            }
            Err(error) => {
                tracing::debug!(%error, "Reading leased events ahead failed; each is read when sent.")
            }
        }
    }

    /// [`DeliveryQueue::record`], or [`DeliveryQueue::record_results`] when not `durable`.
    fn record_with(&self, changes: Vec<DeliveryChange>, durable: bool) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut withdrawn: Vec<String> = changes
                .iter()
                .filter_map(|change| match change {
                    DeliveryChange::Withdraw { subscription, .. }
                    | DeliveryChange::Retire { subscription, .. } => Some(subscription.clone()),
                    _ => None,
                })
                .collect();
            // One change (a worker's result, the common case) joins the results committed
            // together; several are one transaction of their own, all or nothing.
            if changes.len() == 1 {
                let change = changes.into_iter().next().expect("one change");
                // A result of a subscription this hub leases unordered may wait for
                // company; an ordered one's next delivery waits for it.
                let waits = match &change {
                    DeliveryChange::Attempted(attempt) => {
                        self.inner.cursors.unordered(&attempt.subscription)
                    }
                    _ => false,
                };
                self.inner.recorder.record(change, durable, waits).await?;
            } else {
                let client = self.client().await?;
                let result = apply_all(&client, &changes, durable).await;
                let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
                let ended = client.batch_execute(end).await.map_err(backend);
                result.and(ended)?;
            }
            if !withdrawn.is_empty() {
                withdrawn.sort_unstable();
                withdrawn.dedup();
                self.tell_withdrawn(&withdrawn).await;
            }
            Ok(())
        })
    }

    /// Tells every hub that deliveries of these subscriptions were withdrawn, so that none
    /// sends what it leased ahead of them. After the commit, best effort: a hub that misses
    /// it sends those at most once, as before. This hub hears it too, although whoever
    /// withdrew here told its workers already (that holds without the listening
    /// connection); the second recall costs one give-back, on a rare event.
    async fn tell_withdrawn(&self, subscriptions: &[String]) {
        let ids: Vec<&str> = subscriptions.iter().map(String::as_str).collect();
        let payload = notify::withdrawn(&ids);
        let told = async {
            let client = self.client().await?;
            client
                .execute("SELECT pg_notify($1, $2)", &[&notify::CHANNEL, &payload])
                .await
                .map_err(backend)
        };
        if let Err(error) = told.await {
            tracing::debug!(%error, "Telling the hubs of withdrawn deliveries failed.");
        }
    }

    /// Connects, and creates or migrates the schema.
    pub async fn connect(options: &PgOptions) -> Result<PgStore, StoreError> {
        let database = tls::Database::parse(&options.url, &redact(&options.url))?;
        if database.plain_off_this_machine() {
            tracing::warn!(
                "The connection to the database is not encrypted: add sslmode=verify-full (and \
                 sslrootcert=<the CA's PEM file> for a private CA) to store.url."
            );
        }
        // The appender has connections of its own (one per group in flight), out of the
        // hub's `pool_size`: they are driven by its own thread (see `append.rs`).
        let appending = append::GROUPS_IN_FLIGHT;
        let pool = make_pool(
            &database,
            options.pool_size.saturating_sub(appending).max(1),
            options,
        )?;
        let append_pool = make_pool(&database, appending, options)?;
        let mut client = pool.get().await.map_err(|error| {
            StoreError::Unavailable(format!(
                "cannot connect to {}: {}",
                redact(&options.url),
                tls::causes(&error)
            ))
        })?;
        schema::migrate(&mut client).await?;
        drop(client);
        Ok(PgStore {
            inner: Arc::new(Inner {
                appender: Appender::start(append_pool.clone())?,
                append_pool,
                recorder: recorder::Recorder::start(pool.clone(), options.results_wait),
                pool,
                events: EventCache::default(),
                cursors: Cursors::default(),
                database,
                listeners: std::sync::Mutex::new(Vec::new()),
            }),
        })
    }

    /// Closes the pool (every call after this fails as unavailable) and stops listening.
    pub fn close(&self) {
        self.inner.pool.close();
        self.inner.append_pool.close();
        for listener in self
            .inner
            .listeners
            .lock()
            .expect("listeners lock")
            .drain(..)
        {
            listener.abort();
        }
    }

    /// The schema version of the database (after [`PgStore::connect`] migrated it).
    pub async fn schema_version(&self) -> Result<i32, StoreError> {
        let client = self.client().await?;
        let row = client
            .query_one("SELECT max(version) FROM knooppunt_schema", &[])
            .await
            .map_err(backend)?;
        Ok(row.get(0))
    }

    async fn client(&self) -> Result<Object, StoreError> {
        self.inner.pool.get().await.map_err(pool_error)
    }

    /// Bumps the subscriptions' version in `transaction`, and tells the other hubs at the
    /// commit.
    async fn bump(transaction: &deadpool_postgres::Transaction<'_>) -> Result<(), StoreError> {
        transaction
            .execute("UPDATE versions SET subscriptions = subscriptions + 1", &[])
            .await
            .map_err(backend)?;
        transaction
            .execute(
                "SELECT pg_notify($1, $2)",
                &[&notify::CHANNEL, &notify::SUBSCRIPTIONS],
            )
            .await
            .map_err(backend)?;
        Ok(())
    }
}

fn delivery(row: &Row) -> Delivery {
    Delivery {
        subscription: row.get("subscription"),
        seq: row.get::<_, i64>("seq") as u64,
        attempts: row.get::<_, i32>("attempts") as u32,
        next_attempt_at: row.get::<_, i64>("next_attempt_at") as u64,
        first_attempt_at: row
            .get::<_, Option<i64>>("first_attempt_at")
            .map(|v| v as u64),
        last_attempt_at: row
            .get::<_, Option<i64>>("last_attempt_at")
            .map(|v| v as u64),
        last_status: row.get::<_, Option<i32>>("last_status").map(|v| v as u16),
        last_error: row.get("last_error"),
        leased_until: row.get::<_, i64>("leased_until") as u64,
        lease: row.get::<_, i64>("lease") as u64,
        replay: row.get("replay"),
    }
}

fn dead_letter(row: &Row) -> DeadLetter {
    DeadLetter {
        subscription: row.get("subscription"),
        seq: row.get::<_, i64>("seq") as u64,
        attempts: row.get::<_, i32>("attempts") as u32,
        first_attempt_at: row
            .get::<_, Option<i64>>("first_attempt_at")
            .map(|v| v as u64),
        last_attempt_at: row
            .get::<_, Option<i64>>("last_attempt_at")
            .map(|v| v as u64),
        last_status: row.get::<_, Option<i32>>("last_status").map(|v| v as u16),
        last_error: row.get("last_error"),
        reason: row.get("reason"),
        dead_at: row.get::<_, i64>("dead_at") as u64,
    }
}

/// An event's columns, as [`stored_event`] reads them.
const EVENT_COLUMNS: &str = "seq, source, id, accepted_at, json, extension_types";

/// The event in a row of [`EVENT_COLUMNS`].
fn stored_event(row: &tokio_postgres::Row) -> StoredEvent {
    StoredEvent {
        seq: row.get::<_, i64>(0) as u64,
        source: row.get(1),
        id: row.get(2),
        accepted_at: row.get::<_, i64>(3) as u64,
        json: row.get(4),
        extension_types: row.get(5),
    }
}

/// Where an unordered subscription's next lease on this hub starts looking: after the
/// last delivery its previous lease took. Under a backlog the head of a queue is deliveries
/// this hub and others are sending and the index entries of those just delivered (they
/// stay until no transaction that began before their removal runs); a lease that walked
/// them every time cost the database twice as much under a backlog (0.31–0.42 against
/// 0.16–0.23 ms, docs/benchmarks-log.md, issue 26, seventh step). A lease that finds too few after the
/// cursor also looks from the start; and every [`Cursor::FULL_EVERY`] a lease starts from
/// the start anyway, so that a retry that came due, a lease given back or run out, or an
/// event another hub numbered lower but committed later waits that long at most.
#[derive(Clone, Copy)]
struct Cursor {
    after: i64,
    since: std::time::Instant,
}

impl Cursor {
    const FULL_EVERY: Duration = Duration::from_millis(100);
    /// Past this many subscriptions the cursors start over (deleted ones leave theirs).
    const MAX: usize = 100_000;
}

/// The hub's [`Cursor`]s, by subscription: those it leases unordered.
#[derive(Default)]
struct Cursors(std::sync::Mutex<HashMap<String, Cursor>>);

impl Cursors {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cursor>> {
        self.0.lock().expect("cursors lock")
    }

    /// The number after which the next lease of `subscription` starts (0: the start).
    fn start(&self, subscription: &str) -> i64 {
        match self.lock().get(subscription) {
            Some(cursor) if cursor.since.elapsed() < Cursor::FULL_EVERY => cursor.after,
            _ => 0,
        }
    }

    /// Whether this hub leases `subscription` unordered (its results may wait for company,
    /// see `recorder.rs`).
    fn unordered(&self, subscription: &str) -> bool {
        self.lock().contains_key(subscription)
    }

    /// `subscription` is leased ordered (it was unordered before a change of its
    /// configuration, maybe).
    fn forget(&self, subscription: &str) {
        self.lock().remove(subscription);
    }

    /// After a lease that started `after` and took deliveries up to `last`.
    fn moved(&self, subscription: &str, after: i64, last: Option<i64>) {
        let mut cursors = self.lock();
        if cursors.len() >= Cursor::MAX && !cursors.contains_key(subscription) {
            cursors.clear();
        }
        let since = match cursors.get(subscription) {
            Some(cursor) if after != 0 => cursor.since,
            _ => std::time::Instant::now(),
        };
        let after = last.map_or(after, |last| last.max(after));
        cursors.insert(subscription.to_owned(), Cursor { after, since });
    }
}

const DELIVERY_COLUMNS: &str = "subscription, seq, attempts, next_attempt_at, first_attempt_at, \
    last_attempt_at, last_status, last_error, leased_until, lease, replay";

const DEAD_LETTER_COLUMNS: &str = "subscription, seq, attempts, first_attempt_at, \
    last_attempt_at, last_status, last_error, reason, dead_at";

impl Store for PgStore {
    fn backup(
        &self,
        _out: &mut dyn std::io::Write,
        _beside: &[(String, Vec<u8>)],
    ) -> Result<knooppunt_store::BackupSummary, StoreError> {
        Err(StoreError::Unsupported(
            "the hub keeps its state in PostgreSQL: back up the database with pg_dump and \
             restore it with pg_restore (docs/postgresql.md, \"Back up and restore\")"
                .into(),
        ))
    }

    fn disk_usage(&self) -> StoreFuture<'_, DiskUsage> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_one(
                    "SELECT pg_database_size(current_database()), \
                       pg_total_relation_size('events')",
                    &[],
                )
                .await
                .map_err(backend)?;
            Ok(DiskUsage {
                total_bytes: row.get::<_, i64>(0) as u64,
                event_bytes: row.get::<_, i64>(1) as u64,
                free_bytes: None,
            })
        })
    }

    fn check(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            client.execute("SELECT 1", &[]).await.map_err(backend)?;
            Ok(())
        })
    }
}

/// Runs a prepared (and cached, per connection) statement; returns the rows it changed.
async fn run(
    client: &deadpool_postgres::ClientWrapper,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<u64, StoreError> {
    let statement = client.prepare_cached(sql).await.map_err(backend)?;
    client.execute(&statement, params).await.map_err(backend)
}

impl knooppunt_store::Inspect for PgStore {
    fn pending_deliveries<'a>(
        &'a self,
        subscription: &'a str,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(async move {
            let client = self.client().await?;
            let sql = format!(
                "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE subscription = $1 \
                 ORDER BY seq LIMIT $2"
            );
            let rows = client
                .query(&sql, &[&subscription, &(limit as i64)])
                .await
                .map_err(backend)?;
            Ok(rows.iter().map(delivery).collect())
        })
    }
}
