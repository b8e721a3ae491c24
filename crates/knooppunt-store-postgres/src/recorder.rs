//! Group commit of delivery results: one task per hub takes every single-change `record`
//! that arrived while the previous group committed and applies them in one transaction,
//! pipelined (`BEGIN`, one statement each, `COMMIT` in one round trip), so that many
//! workers' results share one commit.
//!
//! Each change is one conditional statement (an attempt changes its delivery only under its
//! own lease), so a stale one changes nothing and the others of the group still count; only
//! a failure of the transaction fails them all. The delivered results of a group, most of
//! them, are one statement together ([`DELIVERED`]).
//!
//! A group of push results only (`DeliveryQueue::record_results`) commits without waiting for the
//! WAL flush (`synchronous_commit = off` for its transaction): a database crash can forget
//! the latest of them, and those deliveries are then made again. A group with any other
//! change (a pull acknowledgement, a change an API call asked for) commits durably.
//!
//! A small group of push results of unordered subscriptions waits a moment for company
//! ([`Request::waits`], `PgOptions::results_wait`): each transaction costs the database a
//! fixed amount besides its rows, and with two hubs each hub's groups were half as large
//! (docs/benchmarks-log.md, issue 26, eighth step). Nothing waits on such a result but the deletion
//! of its delivery row (the sink has the event, the worker's slot is free); an ordered
//! subscription's next delivery waits for its result, so those never wait, nor does a
//! change anyone waits for.

use std::time::Duration;

use deadpool_postgres::Pool;
use knooppunt_store::{DeliveryChange, StoreError};
use tokio::sync::{mpsc, oneshot};

use crate::append::clone_error;
use crate::transactions::{begin, executions, join_all, prepare_all};
use crate::{backend, classify, pool_error, statement};

/// At most this many results in one transaction.
const MAX_GROUP: usize = 256;

/// A group of results that may wait ([`Request::waits`]) and is smaller than this waits for
/// more, up to the store's `results_wait`. (At the default of 16 sending slots a worker may
/// have 64 results recording, so one busy subscription fills a group on its own.)
const COMPANY: usize = 64;

struct Request {
    change: DeliveryChange,
    /// Committed with the WAL flushed before the answer.
    durable: bool,
    /// May wait for company: a push result of a subscription this hub leases unordered.
    waits: bool,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

/// The sending side of the recorder task; the task ends when this is dropped.
pub(crate) struct Recorder {
    requests: mpsc::UnboundedSender<Request>,
}

impl Recorder {
    /// `wait`: how long a small group of results that may wait waits for company (zero: it
    /// does not).
    pub(crate) fn start(pool: Pool, wait: Duration) -> Recorder {
        let (requests, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(pool, receiver, wait));
        Recorder { requests }
    }

    /// `waits`: whether it may wait for company ([`Request::waits`]).
    pub(crate) async fn record(
        &self,
        change: DeliveryChange,
        durable: bool,
        waits: bool,
    ) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || StoreError::Unavailable("the store's recorder stopped".into());
        self.requests
            .send(Request {
                change,
                durable,
                waits: waits && !durable,
                reply,
            })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn run(pool: Pool, mut receiver: mpsc::UnboundedReceiver<Request>, wait: Duration) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while let Some(first) = receiver.recv().await {
        group.push(first);
        take_waiting(&mut receiver, &mut group);
        if !wait.is_zero() && group.len() < COMPANY && group.iter().all(|r| r.waits) {
            // Until the group has company, the wait is over, or a request arrives that
            // must not wait; then whatever else arrived meanwhile.
            let until = tokio::time::Instant::now() + wait;
            while group.len() < COMPANY {
                match tokio::time::timeout_at(until, receiver.recv()).await {
                    Ok(Some(next)) => {
                        let urgent = !next.waits;
                        group.push(next);
                        if urgent {
                            break;
                        }
                    }
                    Ok(None) | Err(_) => break,
                }
            }
            take_waiting(&mut receiver, &mut group);
        }
        let outcomes = commit(&pool, &group).await;
        for (request, outcome) in group.drain(..).zip(outcomes) {
            let _ = request.reply.send(outcome);
        }
    }
}

/// Adds what is waiting to the group, up to [`MAX_GROUP`].
fn take_waiting(receiver: &mut mpsc::UnboundedReceiver<Request>, group: &mut Vec<Request>) {
    while group.len() < MAX_GROUP {
        match receiver.try_recv() {
            Ok(next) => group.push(next),
            Err(_) => break,
        }
    }
}

/// Every delivered result of a group in one statement (the common case: a statement each
/// cost the database more than the lease): each delivery is deleted under its lease, or,
/// when it is no longer pending at all (withdrawn while the attempt was under way, say), its
/// dead letter (the sink took the event), and a receipt kept where asked; returns the places
/// (from 1) of the results that counted. Only the results whose lease held nothing (`missed`,
/// made first: none, as a rule) are looked for among the dead letters.
const DELIVERED: &str = "\
WITH r AS (
    SELECT * FROM UNNEST($1::text[], $2::int8[], $3::int8[], $4::int8[], $5::bool[])
        WITH ORDINALITY AS r(subscription, seq, lease, at, receipt, n)),
done AS (
    DELETE FROM deliveries d USING r
    WHERE d.subscription = r.subscription AND d.seq = r.seq AND d.lease = r.lease
    RETURNING r.n, r.seq, r.subscription, r.at, r.receipt),
missed AS MATERIALIZED (
    SELECT * FROM r WHERE NOT EXISTS (SELECT 1 FROM done WHERE done.n = r.n)),
taken AS (
    DELETE FROM dead_letters l USING missed m
    WHERE l.subscription = m.subscription AND l.seq = m.seq
      AND NOT EXISTS (SELECT 1 FROM deliveries d
        WHERE d.subscription = m.subscription AND d.seq = m.seq)
    RETURNING m.n, m.seq, m.subscription, m.at, m.receipt),
counted AS (SELECT * FROM done UNION ALL SELECT * FROM taken),
kept AS (
    INSERT INTO receipts (seq, subscription, delivered_at)
    SELECT seq, subscription, at FROM counted WHERE receipt
    ON CONFLICT (seq, subscription) DO NOTHING)
SELECT n FROM counted";

/// A delivered attempt under a lease: what [`DELIVERED`] takes.
fn delivered(change: &DeliveryChange) -> Option<&knooppunt_store::Attempt> {
    match change {
        DeliveryChange::Attempted(attempt)
            if attempt.lease != 0 && attempt.verdict == knooppunt_store::Verdict::Delivered =>
        {
            Some(attempt)
        }
        _ => None,
    }
}

/// Applies the group in one transaction; one outcome per request.
async fn commit(pool: &Pool, group: &[Request]) -> Vec<Result<(), StoreError>> {
    let failed = |error: &StoreError| group.iter().map(|_| Err(clone_error(error))).collect();
    let client = match pool.get().await.map_err(pool_error) {
        Ok(client) => client,
        Err(error) => return failed(&error),
    };
    let (mut subscriptions, mut seqs, mut leases, mut ats, mut receipts) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for attempt in group.iter().filter_map(|r| delivered(&r.change)) {
        subscriptions.push(attempt.subscription.as_str());
        seqs.push(attempt.seq as i64);
        leases.push(attempt.lease as i64);
        ats.push(attempt.at as i64);
        receipts.push(attempt.receipt);
    }
    let all_delivered = match client.prepare_cached(DELIVERED).await.map_err(backend) {
        Ok(prepared) => prepared,
        Err(error) => return failed(&error),
    };
    // Prepared first (from the connection's cache after the first time), so that the
    // executions below are sent in order between BEGIN and COMMIT.
    let statements: Vec<_> = group
        .iter()
        .map(|r| {
            if delivered(&r.change).is_some() {
                None
            } else {
                statement(&r.change)
            }
        })
        .collect();
    let prepared = match prepare_all(&client, &statements).await {
        Ok(prepared) => prepared,
        Err(error) => return failed(&error),
    };
    let executions = executions(&client, &statements, &prepared);
    let delivered_params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
        [&subscriptions, &seqs, &leases, &ats, &receipts];
    let deliver_all = async {
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        client.query(&all_delivered, &delivered_params).await
    };
    // Polled in this order, so sent in this order: BEGIN, the delivered results, the other
    // executions, COMMIT. (Changes of one group were recorded concurrently, so their order
    // among each other is no one's: a worker waits for one result before it sends another.)
    let begin = begin(group.iter().any(|r| r.durable));
    let (begun, done, changed, committed) = tokio::join!(
        client.batch_execute(&begin),
        deliver_all,
        join_all(executions),
        client.batch_execute("COMMIT"),
    );
    let mut error = begun.err();
    // Per delivered result, in group order: whether its lease held.
    let mut held = vec![false; seqs.len()];
    match done {
        Ok(rows) => {
            for row in rows {
                if let Some(place) = usize::try_from(row.get::<_, i64>(0) - 1)
                    .ok()
                    .and_then(|i| held.get_mut(i))
                {
                    *place = true;
                }
            }
        }
        Err(failure) => {
            error.get_or_insert(failure);
        }
    }
    let mut held = held.into_iter();
    let mut counts = Vec::with_capacity(group.len());
    for result in changed {
        match result {
            Ok(count) => counts.push(count),
            Err(failure) => {
                error.get_or_insert(failure);
                counts.push(0);
            }
        }
    }
    if let Some(error) = error.or(committed.err()) {
        // A failed statement turned the COMMIT into a rollback: nothing of the group counts.
        let _ = client.batch_execute("ROLLBACK").await;
        return failed(&backend(error));
    }
    let mut outcomes = Vec::with_capacity(group.len());
    for (request, count) in group.iter().zip(counts) {
        let count = match delivered(&request.change) {
            Some(_) => u64::from(held.next().unwrap_or(false)),
            None => count,
        };
        outcomes.push(classify(&client, &request.change, count).await);
    }
    outcomes
}
