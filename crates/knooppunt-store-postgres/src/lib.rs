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
//!   queue without waiting for each other; an ordered one leases its oldest delivery with one
//!   conditional `UPDATE`, which at most one hub wins. Each lease takes a token from a
//!   sequence; `record` checks it under the row lock and refuses a stale one. A lease held
//!   by a killed hub runs out and the delivery is leased again by another.
//! - **Subscription changes** bump a version in the same transaction, which other hubs poll
//!   ([`Cluster::subscriptions_version`]) to reload their registries.
//!
//! Every write returns after `COMMIT`, which PostgreSQL makes durable (with its default
//! `synchronous_commit = on`).

mod append;
mod catalog;
mod event_cache;
mod notify;
mod principals;
mod recorder;
mod schema;
mod subscriptions;
mod table;
mod tls;
mod transactions;

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
use self::transactions::{Param, in_transaction};

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

    /// Runs `sql` (a write of a subscription or a principal) with `params`; when it wrote the row, bumps the version in the same transaction and
    /// commits. Returns whether it wrote.
    async fn write_and_bump(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<bool, StoreError> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(backend)?;
        let written = transaction.execute(sql, params).await.map_err(backend)?;
        if written == 0 {
            return Ok(false);
        }
        Self::bump(&transaction).await?;
        transaction.commit().await.map_err(backend)?;
        Ok(true)
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

impl knooppunt_store::Records for PgStore {
    fn insert_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let params = subscriptions::params(subscription);
            if !self.insert_row::<Subscription>(&params.refs()).await? {
                return Err(StoreError::Conflict(subscription.id.clone()));
            }
            Ok(())
        })
    }

    fn update_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let params = subscriptions::params(subscription);
            self.replace_row::<Subscription>(&params.refs()).await
        })
    }

    fn delete_subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let transaction = client.transaction().await.map_err(backend)?;
            let sql = format!(
                "DELETE FROM subscriptions WHERE id = $1 RETURNING {}",
                subscriptions::COLUMNS
            );
            let Some(row) = transaction.query_opt(&sql, &[&id]).await.map_err(backend)? else {
                return Ok(None);
            };
            let deleted = subscriptions::from_row(&row)?;
            transaction
                .execute(
                    "INSERT INTO former_subscriptions (id, owner) VALUES ($1, $2)
                     ON CONFLICT (id) DO UPDATE SET owner = excluded.owner",
                    &[&id, &deleted.owner],
                )
                .await
                .map_err(backend)?;
            for table in ["deliveries", "dead_letters"] {
                transaction
                    .execute(
                        &format!("DELETE FROM {table} WHERE subscription = $1"),
                        &[&id],
                    )
                    .await
                    .map_err(backend)?;
            }
            Self::bump(&transaction).await?;
            transaction.commit().await.map_err(backend)?;
            Ok(Some(deleted))
        })
    }

    fn former_owner<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<String>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT owner FROM former_subscriptions WHERE id = $1",
                    &[&id],
                )
                .await
                .map_err(backend)?;
            Ok(row.map(|row| row.get(0)))
        })
    }

    fn subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>> {
        Box::pin(self.row::<Subscription>(id))
    }

    fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>> {
        Box::pin(self.rows::<Subscription>())
    }

    fn insert_principal<'a>(&'a self, principal: &'a StoredPrincipal) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let params = principals::Params::new(principal);
            if !self
                .insert_row::<StoredPrincipal>(&params.refs(principal))
                .await?
            {
                return Err(StoreError::NameTaken(principal.name.clone()));
            }
            Ok(())
        })
    }

    fn update_principal<'a>(&'a self, principal: &'a StoredPrincipal) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let params = principals::Params::new(principal);
            self.replace_row::<StoredPrincipal>(&params.refs(principal))
                .await
        })
    }

    fn delete_principal<'a>(&'a self, name: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { self.delete_row::<StoredPrincipal>(&[&name]).await })
    }

    fn insert_catalog_entry<'a>(&'a self, entry: &'a CatalogEntry) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let params = catalog::Params::new(entry);
            if !self.insert_row::<CatalogEntry>(&params.refs(entry)).await? {
                return Err(StoreError::Conflict(entry.id.clone()));
            }
            Ok(())
        })
    }

    fn update_catalog_entry<'a>(&'a self, entry: &'a CatalogEntry) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let params = catalog::Params::new(entry);
            self.replace_row::<CatalogEntry>(&params.refs(entry)).await
        })
    }

    fn delete_catalog_entry<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { self.delete_row::<CatalogEntry>(&[&id]).await })
    }

    fn catalog_entries(&self) -> StoreFuture<'_, Vec<CatalogEntry>> {
        Box::pin(self.rows::<CatalogEntry>())
    }

    fn put_replay<'a>(
        &'a self,
        replay: &'a Replay,
        expected: Option<u64>,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let client = self.client().await?;
            let body = serde_json::to_string(replay).expect("replays serialise");
            let changed = match expected {
                None => {
                    client
                        .execute(
                            "INSERT INTO replays (id, created_at, updated_at, body) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING",
                            &[
                                &replay.id,
                                &(replay.created_at as i64),
                                &(replay.updated_at as i64),
                                &body,
                            ],
                        )
                        .await
                }
                Some(expected) => {
                    client
                        .execute(
                            "UPDATE replays SET updated_at = $2, body = $3 \
                         WHERE id = $1 AND updated_at = $4",
                            &[
                                &replay.id,
                                &(replay.updated_at as i64),
                                &body,
                                &(expected as i64),
                            ],
                        )
                        .await
                }
            }
            .map_err(backend)?;
            Ok(changed == 1)
        })
    }

    fn replays(&self) -> StoreFuture<'_, Vec<Replay>> {
        Box::pin(self.documents(("replays", "a replay"), "created_at, id"))
    }

    fn delete_replay<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.delete_document("replays", id))
    }

    fn put_session<'a>(&'a self, session: &'a Session) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            let body = serde_json::to_string(session).expect("sessions serialise");
            client
                .execute(
                    "INSERT INTO sessions (id, expires_at, last_seen_at, body) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE \
                     SET expires_at = $2, last_seen_at = $3, body = $4",
                    &[
                        &session.id,
                        &(session.expires_at as i64),
                        &(session.last_seen_at as i64),
                        &body,
                    ],
                )
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Session>> {
        Box::pin(self.document(("sessions", "a session"), id))
    }

    fn delete_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.delete_document("sessions", id))
    }

    fn sweep_sessions(&self, now_ms: u64, idle_before_ms: u64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            client
                .execute(
                    "DELETE FROM sessions WHERE expires_at <= $1 OR last_seen_at < $2",
                    &[&(now_ms as i64), &(idle_before_ms as i64)],
                )
                .await
                .map_err(backend)
        })
    }

    fn put_grant<'a>(&'a self, grant: &'a Grant) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let params = catalog::grant_params(grant);
            self.upsert_row::<Grant>(&params.refs(grant)).await
        })
    }

    fn delete_grant<'a>(&'a self, entry: &'a str, subscription: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move { self.delete_row::<Grant>(&[&entry, &subscription]).await })
    }

    fn grants(&self) -> StoreFuture<'_, Vec<Grant>> {
        Box::pin(self.rows::<Grant>())
    }

    fn principals(&self) -> StoreFuture<'_, Vec<StoredPrincipal>> {
        Box::pin(self.rows::<StoredPrincipal>())
    }
}

impl knooppunt_store::EventLog for PgStore {
    fn append_events(
        &self,
        events: Vec<NewEvent>,
        now_ms: u64,
        dedupe_window_ms: u64,
    ) -> StoreFuture<'_, Vec<Appended>> {
        Box::pin(async move {
            let (answers, events) = self
                .inner
                .appender
                .append(events, now_ms, dedupe_window_ms)
                .await?;
            // What will be delivered is kept for the deliveries: this hub reads none of it
            // back unless it was pushed out of the cache meanwhile.
            for (answer, event) in answers.iter().zip(events) {
                if let Appended::Accepted { seq } = *answer
                    && !event.subscriptions.is_empty()
                {
                    self.inner.events.insert(StoredEvent {
                        seq,
                        source: event.source,
                        id: event.id,
                        accepted_at: now_ms,
                        json: event.json,
                        extension_types: event.extension_types,
                    });
                }
            }
            Ok(answers)
        })
    }

    fn event(&self, seq: u64) -> StoreFuture<'_, Option<Arc<StoredEvent>>> {
        Box::pin(async move {
            self.inner
                .events
                .get_or_read(seq, || async {
                    let client = self.client().await?;
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {EVENT_COLUMNS} FROM events WHERE seq = $1"
                        ))
                        .await
                        .map_err(backend)?;
                    let row = client
                        .query_opt(&statement, &[&(seq as i64)])
                        .await
                        .map_err(backend)?;
                    Ok(row.as_ref().map(stored_event))
                })
                .await
        })
    }

    fn events_after(&self, after: u64, limit: usize) -> StoreFuture<'_, Vec<Arc<StoredEvent>>> {
        Box::pin(async move {
            let client = self.client().await?;
            // Numbers follow transaction ids (both taken under the append lock), so the
            // events of transactions older than every running one are a prefix: nothing can
            // still appear before them.
            let statement = client
                .prepare_cached(&format!(
                    "SELECT {EVENT_COLUMNS} FROM events \
                     WHERE seq > $1 \
                       AND (xid IS NULL OR xid < pg_snapshot_xmin(pg_current_snapshot())) \
                     ORDER BY seq LIMIT $2"
                ))
                .await
                .map_err(backend)?;
            let rows = client
                .query(&statement, &[&(after as i64), &(limit as i64)])
                .await
                .map_err(backend)?;
            Ok(rows.iter().map(|row| Arc::new(stored_event(row))).collect())
        })
    }

    fn swept_through(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_one("SELECT through FROM swept", &[])
                .await
                .map_err(backend)?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn seq_before(&self, at_ms: u64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_one(
                    "SELECT GREATEST(COALESCE( \
                       (SELECT min(seq) - 1 FROM events WHERE accepted_at >= $1), \
                       (SELECT max(seq) FROM events), 0), (SELECT through FROM swept))",
                    &[&(at_ms as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn receipts_of_event(&self, seq: u64) -> StoreFuture<'_, Vec<Receipt>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT seq, subscription, delivered_at FROM receipts WHERE seq = $1 \
                     ORDER BY subscription COLLATE \"C\"",
                    &[&(seq as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(rows.iter().map(receipt).collect())
        })
    }

    fn receipts_of_subscription<'a>(
        &'a self,
        subscription: &'a str,
        after: Option<&'a str>,
        limit: usize,
    ) -> StoreFuture<'a, (Vec<Receipt>, Option<String>)> {
        Box::pin(async move {
            let (at, seq) = match after {
                None => (-1, -1),
                Some(cursor) => cursor
                    .split_once('.')
                    .and_then(|(a, s)| Some((a.parse::<i64>().ok()?, s.parse::<i64>().ok()?)))
                    .ok_or_else(|| {
                        StoreError::Corrupt(format!("`{cursor}` is not a receipt cursor"))
                    })?,
            };
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT seq, subscription, delivered_at FROM receipts \
                     WHERE subscription = $1 AND (delivered_at, seq) > ($2, $3) \
                     ORDER BY delivered_at, seq LIMIT $4",
                    &[&subscription, &at, &seq, &(limit as i64)],
                )
                .await
                .map_err(backend)?;
            let receipts: Vec<Receipt> = rows.iter().map(receipt).collect();
            let next = receipts
                .last()
                .filter(|_| receipts.len() == limit)
                .map(|r| format!("{}.{}", r.delivered_at, r.seq));
            Ok((receipts, next))
        })
    }

    fn sweep_receipts(&self, before_ms: u64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            client
                .execute(
                    "DELETE FROM receipts WHERE delivered_at < $1",
                    &[&(before_ms.min(i64::MAX as u64) as i64)],
                )
                .await
                .map_err(backend)
        })
    }

    fn sweep(
        &self,
        now_ms: u64,
        retention_ms: u64,
        dedupe_window_ms: u64,
    ) -> StoreFuture<'_, Swept> {
        Box::pin(async move {
            let client = self.client().await?;
            // Every subscription that has deliveries or dead letters, one index probe each
            // (a loose scan of the primary keys), with the oldest event it still needs.
            let needed = |table: &str| {
                format!(
                    "WITH RECURSIVE subs AS ( \
                       (SELECT subscription FROM {table} ORDER BY subscription LIMIT 1) \
                       UNION ALL \
                       SELECT (SELECT t.subscription FROM {table} t \
                               WHERE t.subscription > subs.subscription \
                               ORDER BY t.subscription LIMIT 1) \
                       FROM subs WHERE subs.subscription IS NOT NULL) \
                     SELECT subs.subscription, \
                       (SELECT min(t.seq) FROM {table} t WHERE t.subscription = subs.subscription), \
                       EXISTS (SELECT 1 FROM subscriptions s WHERE s.id = subs.subscription) \
                     FROM subs WHERE subs.subscription IS NOT NULL"
                )
            };
            let mut oldest_needed: Option<i64> = None;
            for table in ["deliveries", "dead_letters"] {
                let rows = client.query(&needed(table), &[]).await.map_err(backend)?;
                for row in rows {
                    let subscription: String = row.get(0);
                    if !row.get::<_, bool>(2) {
                        // Queued by an append that raced the subscription's deletion.
                        client
                            .execute(
                                &format!("DELETE FROM {table} WHERE subscription = $1"),
                                &[&subscription],
                            )
                            .await
                            .map_err(backend)?;
                        continue;
                    }
                    let seq: i64 = row.get(1);
                    oldest_needed = Some(oldest_needed.map_or(seq, |o| o.min(seq)));
                }
            }
            // Events go once both the retention and the duplicate window have passed and no
            // delivery or dead letter needs them or any later event (as the embedded store
            // keeps whole segments); in slices, so that no statement holds many locks.
            let cutoff = now_ms.saturating_sub(retention_ms.max(dedupe_window_ms)) as i64;
            let below = oldest_needed.unwrap_or(i64::MAX);
            let mut swept = Swept::default();
            loop {
                let row = client
                    .query_one(
                        "WITH gone AS (DELETE FROM events WHERE seq IN ( \
                           SELECT seq FROM events WHERE seq < $2 AND accepted_at < $1 \
                           ORDER BY seq LIMIT 5000) RETURNING seq), \
                         noted AS (UPDATE swept SET through = GREATEST(through, \
                           (SELECT max(seq) FROM gone)) WHERE EXISTS (SELECT 1 FROM gone)) \
                         SELECT count(*) FROM gone",
                        &[&cutoff, &below],
                    )
                    .await
                    .map_err(backend)?;
                let removed = row.get::<_, i64>(0) as u64;
                swept.events += removed;
                if removed < 5000 {
                    break;
                }
            }
            // Duplicate detection forgets identities past the window, in slices too.
            let forget = now_ms.saturating_sub(dedupe_window_ms) as i64;
            loop {
                let forgotten = client
                    .execute(
                        "DELETE FROM identities WHERE ctid = ANY (ARRAY( \
                           SELECT ctid FROM identities WHERE accepted_at < $1 LIMIT 5000))",
                        &[&forget],
                    )
                    .await
                    .map_err(backend)?;
                swept.dedupe_entries += forgotten;
                if forgotten < 5000 {
                    break;
                }
            }
            Ok(swept)
        })
    }
}

impl knooppunt_store::DeliveryQueue for PgStore {
    fn lease<'a>(
        &'a self,
        subscription: &'a str,
        now_ms: u64,
        lease_ms: u64,
        limit: usize,
        ordered: bool,
    ) -> StoreFuture<'a, Vec<Delivery>> {
        Box::pin(async move {
            if limit == 0 {
                return Ok(Vec::new());
            }
            let client = self.client().await?;
            let (now, until) = (now_ms as i64, (now_ms + lease_ms) as i64);
            let rows = if ordered {
                // Only the oldest, only while it is due and not leased, and only once every
                // transaction older than the one that queued it has ended (numbers follow
                // transaction ids, so no smaller number can appear after it). Two hubs may
                // both find the same oldest; the row lock makes the second re-check the
                // conditions on the first's result, so at most one wins.
                let statement = client
                    .prepare_cached(&format!(
                        "UPDATE deliveries SET leased_until = $3, \
                           lease = nextval('lease_tokens'), \
                           attempts = attempts + (leased_until > 0)::int \
                         WHERE subscription = $1 \
                           AND seq = (SELECT min(seq) FROM deliveries WHERE subscription = $1) \
                           AND GREATEST(next_attempt_at, leased_until) <= $2 \
                           AND xid < pg_snapshot_xmin(pg_current_snapshot()) \
                         RETURNING {DELIVERY_COLUMNS}"
                    ))
                    .await
                    .map_err(backend)?;
                // Its results do not wait for company.
                self.inner.cursors.forget(subscription);
                // Durable: an ordered subscription's lease is what keeps a second copy of
                // its oldest event from being sent beside the first after a database crash.
                in_transaction(&client, &statement, &[&subscription, &now, &until], true).await?
            } else {
                // The available ones in number order, through the primary key, first those
                // after this hub's last lease of the subscription, then from the start of
                // its queue only if those were not enough (see `Cursor`; the second part
                // is not run when the first found `limit`; the row locks are taken in
                // sub-selects, as `UNION` allows none of its own). Rows another hub is
                // leasing are skipped, not waited for. (One UPDATE without the row locks was
                // slower: it waits for rows whose results are being committed.) The rows
                // picked are updated where they are (their `ctid`, which their lock keeps),
                // not looked up again: a join back by key walked the queue's head once per
                // row picked.
                let statement = client
                    .prepare_cached(&format!(
                        "UPDATE deliveries SET leased_until = $3, \
                           lease = nextval('lease_tokens'), \
                           attempts = attempts + (leased_until > 0)::int \
                         WHERE ctid = ANY(ARRAY( \
                           SELECT ctid FROM (SELECT ctid FROM deliveries \
                             WHERE subscription = $1 AND seq > $5 \
                               AND GREATEST(next_attempt_at, leased_until) <= $2 \
                             ORDER BY seq \
                             LIMIT $4 FOR UPDATE SKIP LOCKED) after_cursor \
                           UNION ALL \
                           SELECT ctid FROM (SELECT ctid FROM deliveries \
                             WHERE subscription = $1 AND seq <= $5 \
                               AND GREATEST(next_attempt_at, leased_until) <= $2 \
                             ORDER BY seq \
                             LIMIT $4 FOR UPDATE SKIP LOCKED) from_start \
                           LIMIT $4)) \
                         RETURNING {DELIVERY_COLUMNS}"
                    ))
                    .await
                    .map_err(backend)?;
                let after = self.inner.cursors.start(subscription);
                let rows = without_flush(
                    &client,
                    &statement,
                    &[&subscription, &now, &until, &(limit as i64), &after],
                )
                .await?;
                let last = rows.iter().map(|row| row.get::<_, i64>("seq")).max();
                self.inner.cursors.moved(subscription, after, last);
                rows
            };
            let mut leased: Vec<Delivery> = rows.iter().map(delivery).collect();
            leased.sort_by_key(|d| d.seq);
            self.read_ahead(&client, &leased).await;
            Ok(leased)
        })
    }

    fn renew<'a>(
        &'a self,
        subscription: &'a str,
        seq: u64,
        lease: u64,
        until_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let client = self.client().await?;
            let renewed = client
                .execute(
                    "UPDATE deliveries SET leased_until = $4 \
                     WHERE subscription = $1 AND seq = $2 AND lease = $3 AND lease <> 0",
                    &[
                        &subscription,
                        &(seq as i64),
                        &(lease as i64),
                        &(until_ms as i64),
                    ],
                )
                .await
                .map_err(backend)?;
            Ok(renewed == 1)
        })
    }

    fn release<'a>(
        &'a self,
        subscription: &'a str,
        leases: &'a [(u64, u64)],
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            if leases.is_empty() {
                return Ok(0);
            }
            let client = self.client().await?;
            let (seqs, tokens): (Vec<i64>, Vec<i64>) = leases
                .iter()
                .map(|&(seq, lease)| (seq as i64, lease as i64))
                .unzip();
            let statement = client
                .prepare_cached(
                    "UPDATE deliveries d SET leased_until = 0, lease = 0 \
                     FROM UNNEST($2::bigint[], $3::bigint[]) AS given(seq, lease) \
                     WHERE d.subscription = $1 AND d.seq = given.seq \
                       AND d.lease = given.lease AND d.lease <> 0 \
                     RETURNING d.seq",
                )
                .await
                .map_err(backend)?;
            // Like a lease, a release need not wait for the WAL: one a crash forgets runs
            // out instead (and then counts as an attempt).
            let given =
                without_flush(&client, &statement, &[&subscription, &seqs, &tokens]).await?;
            Ok(given.len() as u64)
        })
    }

    fn next_due<'a>(
        &'a self,
        subscription: &'a str,
        ordered: bool,
    ) -> StoreFuture<'a, Option<u64>> {
        Box::pin(async move {
            let client = self.client().await?;
            // The second column: whether every older transaction has ended (see `lease`).
            let sql = if ordered {
                "SELECT GREATEST(next_attempt_at, leased_until), \
                   xid < pg_snapshot_xmin(pg_current_snapshot()) FROM deliveries \
                 WHERE subscription = $1 ORDER BY seq LIMIT 1"
            } else {
                "SELECT min(GREATEST(next_attempt_at, leased_until)), true FROM deliveries \
                 WHERE subscription = $1 HAVING count(*) > 0"
            };
            let statement = client.prepare_cached(sql).await.map_err(backend)?;
            let rows = in_transaction(&client, &statement, &[&subscription], true).await?;
            let row = rows.into_iter().next();
            Ok(row.map(|row| {
                let due = row.get::<_, i64>(0) as u64;
                if row.get::<_, bool>(1) {
                    due
                } else {
                    // An older append is still committing: look again in a moment.
                    due.max(knooppunt_store::now_ms() + 10)
                }
            }))
        })
    }

    fn record(&self, changes: Vec<DeliveryChange>) -> StoreFuture<'_, ()> {
        self.record_with(changes, true)
    }

    fn record_results(&self, changes: Vec<DeliveryChange>) -> StoreFuture<'_, ()> {
        self.record_with(changes, false)
    }

    fn sweep_dead_letters(
        &self,
        before_ms: u64,
        limit: usize,
    ) -> StoreFuture<'_, Vec<(String, u64)>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    "WITH gone AS (DELETE FROM dead_letters WHERE (subscription, seq) IN \
                     (SELECT subscription, seq FROM dead_letters WHERE dead_at < $1 \
                      ORDER BY dead_at LIMIT $2) RETURNING subscription) \
                     SELECT subscription, count(*) FROM gone GROUP BY subscription \
                     ORDER BY subscription",
                    &[
                        &(before_ms.min(i64::MAX as u64) as i64),
                        &(limit.min(i64::MAX as usize) as i64),
                    ],
                )
                .await
                .map_err(backend)?;
            Ok(names_and_numbers(&rows))
        })
    }

    fn pending_seqs<'a>(
        &'a self,
        subscription: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<u64>> {
        Box::pin(async move {
            let client = self.client().await?;
            let after = after.map_or(-1, |a| a as i64);
            // By key whatever the statistics say: shedding walks a huge backlog this way.
            let statement = client
                .prepare_cached(
                    "SELECT seq FROM deliveries WHERE subscription = $1 AND seq > $2 \
                     ORDER BY seq LIMIT $3",
                )
                .await
                .map_err(backend)?;
            let params: [Param<'_>; 3] = [&subscription, &after, &(limit as i64)];
            let rows = in_transaction(&client, &statement, &params, true).await?;
            Ok(rows.iter().map(|r| r.get::<_, i64>(0) as u64).collect())
        })
    }

    fn dead_letters<'a>(
        &'a self,
        subscription: &'a str,
        after: Option<u64>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<DeadLetter>> {
        Box::pin(async move {
            let client = self.client().await?;
            let sql = format!(
                "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters \
                 WHERE subscription = $1 AND seq > $2 ORDER BY seq LIMIT $3"
            );
            let after = after.map_or(-1, |a| a as i64);
            let statement = client.prepare_cached(&sql).await.map_err(backend)?;
            let params: [Param<'_>; 3] = [&subscription, &after, &(limit as i64)];
            let rows = in_transaction(&client, &statement, &params, true).await?;
            Ok(rows.iter().map(dead_letter).collect())
        })
    }

    fn dead_letter<'a>(
        &'a self,
        subscription: &'a str,
        seq: u64,
    ) -> StoreFuture<'a, Option<DeadLetter>> {
        Box::pin(async move {
            let client = self.client().await?;
            let sql = format!(
                "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters WHERE subscription = $1 AND seq = $2"
            );
            let row = client
                .query_opt(&sql, &[&subscription, &(seq as i64)])
                .await
                .map_err(backend)?;
            Ok(row.as_ref().map(dead_letter))
        })
    }

    fn queue_stats(&self) -> StoreFuture<'_, Vec<QueueStats>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT s.id, COALESCE(p.pending, 0), e.accepted_at, COALESCE(d.dead, 0), \
                       COALESCE(p.leased, 0), COALESCE(p.bytes, 0)::bigint \
                     FROM subscriptions s \
                     LEFT JOIN (SELECT subscription, count(*) AS pending, min(seq) AS first, \
                                       sum(bytes) AS bytes, \
                                       count(*) FILTER (WHERE lease <> 0 \
                                         AND leased_until > $1) AS leased \
                                FROM deliveries GROUP BY subscription) p ON p.subscription = s.id \
                     LEFT JOIN events e ON e.seq = p.first \
                     LEFT JOIN (SELECT subscription, count(*) AS dead FROM dead_letters \
                                GROUP BY subscription) d ON d.subscription = s.id \
                     ORDER BY s.id",
                    &[&(knooppunt_store::now_ms() as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(rows
                .iter()
                .map(|row| QueueStats {
                    subscription: row.get(0),
                    pending: row.get::<_, i64>(1) as u64,
                    oldest_accepted_at: row.get::<_, Option<i64>>(2).map(|v| v as u64),
                    dead_letters: row.get::<_, i64>(3) as u64,
                    leased: row.get::<_, i64>(4) as u64,
                    pending_bytes: row.get::<_, i64>(5) as u64,
                })
                .collect())
        })
    }

    fn queue_stats_of<'a>(&'a self, subscription: &'a str) -> StoreFuture<'a, Option<QueueStats>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt(
                    "SELECT \
                       (SELECT count(*) FROM deliveries WHERE subscription = s.id), \
                       (SELECT e.accepted_at FROM events e WHERE e.seq = \
                          (SELECT min(seq) FROM deliveries WHERE subscription = s.id)), \
                       (SELECT count(*) FROM dead_letters WHERE subscription = s.id), \
                       (SELECT count(*) FROM deliveries WHERE subscription = s.id \
                          AND lease <> 0 AND leased_until > $2), \
                       (SELECT COALESCE(sum(bytes), 0)::bigint FROM deliveries \
                          WHERE subscription = s.id) \
                     FROM subscriptions s WHERE s.id = $1",
                    &[&subscription, &(knooppunt_store::now_ms() as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(row.map(|row| QueueStats {
                subscription: subscription.to_owned(),
                pending: row.get::<_, i64>(0) as u64,
                oldest_accepted_at: row.get::<_, Option<i64>>(1).map(|v| v as u64),
                dead_letters: row.get::<_, i64>(2) as u64,
                leased: row.get::<_, i64>(3) as u64,
                pending_bytes: row.get::<_, i64>(4) as u64,
            }))
        })
    }
}

impl knooppunt_store::AuditLog for PgStore {
    fn append_audit(&self, records: Vec<AuditRecord>) -> StoreFuture<'_, Vec<AuditEntry>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            let transaction = client.transaction().await.map_err(backend)?;
            // The head row is the chain's lock: hubs append one after another.
            let head = transaction
                .query_one("SELECT seq, hash FROM audit_head FOR UPDATE", &[])
                .await
                .map_err(backend)?;
            let (mut seq, mut prev) = (head.get::<_, i64>(0) as u64, head.get::<_, String>(1));
            let mut entries = Vec::with_capacity(records.len());
            let insert = transaction
                .prepare("INSERT INTO audit (seq, start_time, entry) VALUES ($1, $2, $3)")
                .await
                .map_err(backend)?;
            for record in records {
                seq += 1;
                let entry = AuditEntry::seal(seq, record, &prev);
                prev.clone_from(&entry.hash);
                let text = serde_json::to_string(&entry).expect("entries always serialise");
                transaction
                    .execute(
                        &insert,
                        &[&(seq as i64), &(entry.record.start_time as i64), &text],
                    )
                    .await
                    .map_err(backend)?;
                entries.push(entry);
            }
            transaction
                .execute(
                    "UPDATE audit_head SET seq = $1, hash = $2",
                    &[&(seq as i64), &prev],
                )
                .await
                .map_err(backend)?;
            transaction.commit().await.map_err(backend)?;
            Ok(entries)
        })
    }

    fn audit_entries(&self, range: AuditRange) -> StoreFuture<'_, Vec<AuditEntry>> {
        Box::pin(async move {
            let client = self.client().await?;
            let after = range.after.map_or(0, |a| a as i64);
            let rows = client
                .query(
                    "SELECT entry FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2",
                    &[&after, &(range.limit as i64)],
                )
                .await
                .map_err(backend)?;
            rows.iter()
                .map(|row| {
                    serde_json::from_str(row.get::<_, &str>(0)).map_err(|error| {
                        StoreError::Corrupt(format!("an audit entry is unreadable: {error}"))
                    })
                })
                .collect()
        })
    }

    fn audit_last(&self) -> StoreFuture<'_, Option<AuditEntry>> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_opt("SELECT entry FROM audit ORDER BY seq DESC LIMIT 1", &[])
                .await
                .map_err(backend)?;
            row.map(|row| {
                serde_json::from_str(row.get::<_, &str>(0)).map_err(|error| {
                    StoreError::Corrupt(format!("an audit entry is unreadable: {error}"))
                })
            })
            .transpose()
        })
    }

    fn remove_audit_through(&self, through: u64) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            // Never the newest entry: the trail stays one chain.
            let removed = client
                .execute(
                    "DELETE FROM audit WHERE seq <= $1 AND seq < (SELECT max(seq) FROM audit)",
                    &[&(through.min(i64::MAX as u64) as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(removed)
        })
    }
}

impl knooppunt_store::Cluster for PgStore {
    fn hubs_alive<'a>(&'a self, hub: &'a str, alive_ms: u64) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let client = self.client().await?;
            // One round trip: said alive, the silent forgotten, the rest listed (the
            // statements of one query string see each other's changes).
            let rows = client
                .query(
                    "WITH said AS (
                         INSERT INTO hubs (id, seen) VALUES ($1, clock_timestamp())
                         ON CONFLICT (id) DO UPDATE SET seen = excluded.seen
                         RETURNING id),
                     forgotten AS (
                         DELETE FROM hubs
                          WHERE seen < clock_timestamp() - $2::bigint * interval '1 millisecond'
                            AND id <> $1
                         RETURNING id)
                     SELECT id FROM hubs WHERE id NOT IN (SELECT id FROM forgotten)
                     UNION SELECT id FROM said
                     ORDER BY id",
                    &[&hub, &(alive_ms as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }

    fn hub_applied<'a>(&'a self, hub: &'a str, version: u64) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            client
                .execute(
                    "INSERT INTO hubs (id, seen, applied) VALUES ($1, clock_timestamp(), $2)
                     ON CONFLICT (id) DO UPDATE
                        SET applied = GREATEST(hubs.applied, excluded.applied)",
                    &[&hub, &(version as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn hubs_behind<'a>(
        &'a self,
        hub: &'a str,
        version: u64,
        alive_ms: u64,
    ) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    "SELECT id FROM hubs
                      WHERE id <> $1 AND applied < $2
                        AND seen >= clock_timestamp() - $3::bigint * interval '1 millisecond'
                      ORDER BY id",
                    &[&hub, &(version as i64), &(alive_ms as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }

    fn hub_leaves<'a>(&'a self, hub: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            client
                .execute("DELETE FROM hubs WHERE id = $1", &[&hub])
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn pause_sink<'a>(&'a self, sink: &'a str, until_ms: u64) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let client = self.client().await?;
            // Kept and told to every hub in one statement (the notice goes at its commit),
            // with the pause that holds: a shorter one never replaces a longer one.
            client
                .execute(
                    "WITH kept AS (
                         INSERT INTO sink_pauses (sink, until) VALUES ($1, $2)
                         ON CONFLICT (sink)
                         DO UPDATE SET until = GREATEST(sink_pauses.until, excluded.until)
                         RETURNING until)
                     SELECT pg_notify($3, 'p' || kept.until || E'\n' || $1) FROM kept",
                    &[&sink, &(until_ms as i64), &notify::CHANNEL],
                )
                .await
                .map_err(backend)?;
            Ok(())
        })
    }

    fn sinks_paused(&self, now_ms: u64) -> StoreFuture<'_, Vec<(String, u64)>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    "WITH ended AS (DELETE FROM sink_pauses WHERE until <= $1)
                     SELECT sink, until FROM sink_pauses WHERE until > $1 ORDER BY sink",
                    &[&(now_ms as i64)],
                )
                .await
                .map_err(backend)?;
            Ok(names_and_numbers(&rows))
        })
    }

    fn subscriptions_version(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let client = self.client().await?;
            let row = client
                .query_one("SELECT subscriptions FROM versions", &[])
                .await
                .map_err(backend)?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    fn watch(&self, listener: knooppunt_store::ChangeListener) {
        let task = tokio::spawn(notify::listen(self.inner.database.clone(), listener));
        self.inner
            .listeners
            .lock()
            .expect("listeners lock")
            .push(task);
    }
}

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

type OwnedParam = transactions::OwnedParam;

/// The one statement that applies a delivery change, with its parameters; `None` for an
/// attempt without a lease (a delivery that was never leased takes no result). An attempt
/// changes its delivery only while it holds the attempt's lease (the condition and the
/// change in one statement).
pub(crate) fn statement(change: &DeliveryChange) -> Option<(&'static str, Vec<OwnedParam>)> {
    Some(match change {
        DeliveryChange::Attempted(attempt) => {
            if attempt.lease == 0 {
                return None;
            }
            let keys: Vec<OwnedParam> = vec![
                Box::new(attempt.subscription.clone()),
                Box::new(attempt.seq as i64),
                Box::new(attempt.lease as i64),
            ];
            let mut details = keys;
            let at = attempt.at as i64;
            match &attempt.verdict {
                // Delivered: the delivery held under the lease goes; or, when it is no
                // longer pending at all (withdrawn, retired, or a dead letter by a later
                // lease while this attempt was under way), its dead letter goes, for the
                // sink took the event. A receipt is kept of either.
                Verdict::Delivered if !attempt.receipt => (
                    "WITH done AS (DELETE FROM deliveries \
                       WHERE subscription = $1 AND seq = $2 AND lease = $3 RETURNING seq), \
                     taken AS (DELETE FROM dead_letters \
                       WHERE subscription = $1 AND seq = $2 \
                       AND NOT EXISTS (SELECT 1 FROM done) \
                       AND NOT EXISTS (SELECT 1 FROM deliveries \
                         WHERE subscription = $1 AND seq = $2) \
                       RETURNING seq) \
                     SELECT seq FROM done UNION ALL SELECT seq FROM taken",
                    details,
                ),
                Verdict::Delivered => {
                    details.push(Box::new(at));
                    (
                        "WITH done AS (DELETE FROM deliveries \
                           WHERE subscription = $1 AND seq = $2 AND lease = $3 \
                           RETURNING subscription, seq), \
                         taken AS (DELETE FROM dead_letters \
                           WHERE subscription = $1 AND seq = $2 \
                           AND NOT EXISTS (SELECT 1 FROM done) \
                           AND NOT EXISTS (SELECT 1 FROM deliveries \
                             WHERE subscription = $1 AND seq = $2) \
                           RETURNING subscription, seq) \
                         INSERT INTO receipts (seq, subscription, delivered_at) \
                         SELECT seq, subscription, $4::int8 FROM done \
                         UNION ALL SELECT seq, subscription, $4::int8 FROM taken \
                         ON CONFLICT (seq, subscription) DO NOTHING",
                        details,
                    )
                }
                Verdict::Retry { next_attempt_at } => {
                    details.push(Box::new(at));
                    details.push(Box::new(attempt.status.map(i32::from)));
                    details.push(Box::new(attempt.error.clone()));
                    details.push(Box::new(*next_attempt_at as i64));
                    (
                        "UPDATE deliveries SET attempts = attempts + 1, \
                           first_attempt_at = COALESCE(first_attempt_at, $4), \
                           last_attempt_at = $4, last_status = $5, last_error = $6, \
                           leased_until = 0, lease = 0, next_attempt_at = $7 \
                         WHERE subscription = $1 AND seq = $2 AND lease = $3",
                        details,
                    )
                }
                Verdict::DeadLetter { reason } => {
                    details.push(Box::new(at));
                    details.push(Box::new(attempt.status.map(i32::from)));
                    details.push(Box::new(attempt.error.clone()));
                    details.push(Box::new(reason.clone()));
                    (
                        "WITH gone AS (DELETE FROM deliveries \
                           WHERE subscription = $1 AND seq = $2 AND lease = $3 RETURNING *) \
                         INSERT INTO dead_letters (subscription, seq, attempts, \
                           first_attempt_at, last_attempt_at, last_status, last_error, \
                           reason, dead_at) \
                         SELECT subscription, seq, attempts + 1, \
                           COALESCE(first_attempt_at, $4), $4, $5, $6, $7, $4 FROM gone \
                         ON CONFLICT (subscription, seq) DO NOTHING",
                        details,
                    )
                }
            }
        }
        DeliveryChange::Redeliver {
            subscription,
            seq,
            at,
        } => (
            "WITH back AS (DELETE FROM dead_letters \
               WHERE subscription = $1 AND seq = $2 RETURNING seq) \
             INSERT INTO deliveries (subscription, seq, next_attempt_at, bytes) \
             SELECT $1, back.seq, $3, \
               octet_length(e.json) + COALESCE(octet_length(e.extension_types), 0) \
             FROM back JOIN events e ON e.seq = back.seq \
             WHERE EXISTS (SELECT 1 FROM subscriptions WHERE id = $1) \
             ON CONFLICT (subscription, seq) DO NOTHING",
            vec![
                Box::new(subscription.clone()),
                Box::new(*seq as i64),
                Box::new(*at as i64),
            ],
        ),
        DeliveryChange::Requeue {
            subscription,
            seqs,
            at,
            replay,
        } => (
            "INSERT INTO deliveries (subscription, seq, next_attempt_at, replay, bytes) \
             SELECT $1, e.seq, $2, $3, \
               octet_length(e.json) + COALESCE(octet_length(e.extension_types), 0) \
             FROM events e \
             WHERE e.seq = ANY($4) AND EXISTS (SELECT 1 FROM subscriptions WHERE id = $1) \
             ON CONFLICT (subscription, seq) DO NOTHING",
            vec![
                Box::new(subscription.clone()),
                Box::new(*at as i64),
                Box::new(replay.clone()),
                Box::new(seqs.iter().map(|s| *s as i64).collect::<Vec<i64>>()),
            ],
        ),
        // Leases are rows already: they survive a crash as they are.
        DeliveryChange::Leased { .. } => return None,
        DeliveryChange::DeleteDeadLetter { subscription, seq } => (
            "DELETE FROM dead_letters WHERE subscription = $1 AND seq = $2",
            vec![Box::new(subscription.clone()), Box::new(*seq as i64)],
        ),
        DeliveryChange::Withdraw {
            subscription,
            seqs,
            at,
            reason,
        } => (
            "WITH gone AS (DELETE FROM deliveries \
               WHERE subscription = $1 AND seq = ANY($4) RETURNING *) \
             INSERT INTO dead_letters (subscription, seq, attempts, first_attempt_at, \
               last_attempt_at, last_status, last_error, reason, dead_at) \
             SELECT subscription, seq, attempts, first_attempt_at, last_attempt_at, \
               last_status, last_error, $3, $2 FROM gone \
             ON CONFLICT (subscription, seq) DO NOTHING",
            vec![
                Box::new(subscription.clone()),
                Box::new(*at as i64),
                Box::new(reason.clone()),
                Box::new(seqs.iter().map(|s| *s as i64).collect::<Vec<i64>>()),
            ],
        ),
        DeliveryChange::Retire {
            subscription,
            at,
            reason,
        } => (
            "WITH gone AS (DELETE FROM deliveries WHERE subscription = $1 RETURNING *) \
             INSERT INTO dead_letters (subscription, seq, attempts, first_attempt_at, \
               last_attempt_at, last_status, last_error, reason, dead_at) \
             SELECT subscription, seq, attempts, first_attempt_at, last_attempt_at, \
               last_status, last_error, $3, $2 FROM gone \
             ON CONFLICT (subscription, seq) DO NOTHING",
            vec![
                Box::new(subscription.clone()),
                Box::new(*at as i64),
                Box::new(reason.clone()),
            ],
        ),
    })
}

fn receipt(row: &Row) -> Receipt {
    Receipt {
        seq: row.get::<_, i64>(0) as u64,
        subscription: row.get(1),
        delivered_at: row.get::<_, i64>(2) as u64,
    }
}

/// What an applied change that changed nothing means: for an attempt, its delivery is
/// either gone (the result is ignored; a delivered one took its dead letter, if there was
/// one) or held under another lease (refused as stale).
pub(crate) async fn classify(
    client: &deadpool_postgres::ClientWrapper,
    change: &DeliveryChange,
    changed: u64,
) -> Result<(), StoreError> {
    let DeliveryChange::Attempted(attempt) = change else {
        return Ok(());
    };
    if changed > 0 {
        return Ok(());
    }
    let held_by_another = run(
        client,
        "SELECT 1 FROM deliveries WHERE subscription = $1 AND seq = $2",
        &[&attempt.subscription, &(attempt.seq as i64)],
    )
    .await?
        > 0;
    if held_by_another {
        return Err(StoreError::StaleLease {
            subscription: attempt.subscription.clone(),
            seq: attempt.seq,
        });
    }
    Ok(()) // finished, retired or deleted meanwhile: nothing to record
}

/// Applies `changes` in order in a transaction it begins on `client` (with the key plans;
/// `durable`: whether its commit waits for the WAL flush), leaving it open for the caller
/// to commit or roll back: `BEGIN` and every statement go out in one round trip; only a
/// change that found nothing to change asks why (a stale lease fails the whole call).
async fn apply_all(
    client: &deadpool_postgres::ClientWrapper,
    changes: &[DeliveryChange],
    durable: bool,
) -> Result<(), StoreError> {
    let found: Vec<_> = changes.iter().map(statement).collect();
    let prepared = transactions::prepare_all(client, &found).await?;
    let executions = transactions::executions(client, &found, &prepared);
    let begin = transactions::begin(durable);
    let (begun, counts) = tokio::join!(
        client.batch_execute(&begin),
        transactions::join_all(executions)
    );
    begun.map_err(backend)?;
    let counts = counts
        .into_iter()
        .collect::<Result<Vec<u64>, _>>()
        .map_err(backend)?;
    for (change, count) in changes.iter().zip(counts) {
        classify(client, change, count).await?;
    }
    Ok(())
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
