//! How the queue's statements meet the database: in transactions whose plans stay on the
//! key ([`KEY_PLANS`]), and pipelined, so that a transaction is one round trip.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use knooppunt_store::StoreError;
use tokio_postgres::Row;

use crate::backend;

/// One parameter of a statement.
pub(crate) type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);

/// A parameter a statement owns.
pub(crate) type OwnedParam = Box<dyn tokio_postgres::types::ToSql + Sync + Send>;

/// The planner settings of the transactions that find a few rows of a queue by key (leases,
/// results, pages of a queue, the append's look-up of duplicates). Their statements are
/// prepared once per connection, and a generic plan made while `deliveries` was small (a
/// fresh database, or statistics not yet taken after a burst), or from statistics that
/// average one subscription's huge backlog with many small ones, scanned a whole
/// subscription's queue or the whole table for every lease and every group of results: a
/// lease cost 75 ms with 50,000 pending and grew with the backlog (docs/benchmarks-log.md, issue 26,
/// fifth step). Without scans, hash joins and merges to choose from, every plan walks the
/// primary key from where the rows are.
const KEY_PLANS: &str = "SET LOCAL enable_seqscan = off; \
    SET LOCAL enable_bitmapscan = off; SET LOCAL enable_hashjoin = off; \
    SET LOCAL enable_mergejoin = off";

/// The `BEGIN` of a transaction with [`KEY_PLANS`]; `durable`: whether its commit waits
/// for the WAL flush.
pub(crate) fn begin(durable: bool) -> String {
    if durable {
        format!("BEGIN; {KEY_PLANS}")
    } else {
        format!("BEGIN; SET LOCAL synchronous_commit = off; {KEY_PLANS}")
    }
}

/// Runs a statement in a transaction of its own with [`KEY_PLANS`]; `durable`: whether
/// its commit waits for the WAL flush. BEGIN, the statement and COMMIT go out in one round
/// trip; all three always run, so the connection never stays in a transaction (a failed
/// statement makes the COMMIT a rollback).
pub(crate) async fn in_transaction(
    client: &tokio_postgres::Client,
    statement: &tokio_postgres::Statement,
    params: &[Param<'_>],
    durable: bool,
) -> Result<Vec<Row>, StoreError> {
    let begin = begin(durable);
    let (begun, rows, committed) = tokio::join!(
        client.batch_execute(&begin),
        client.query(statement, params),
        client.batch_execute("COMMIT"),
    );
    begun.map_err(backend)?;
    let rows = rows.map_err(backend)?;
    committed.map_err(backend)?;
    Ok(rows)
}

/// Runs `statement` in a durable transaction of its own after `lock` (a statement that
/// takes a transaction's lock), all sent at once.
pub(crate) async fn locked_transaction(
    client: &tokio_postgres::Client,
    (lock, lock_params): (&tokio_postgres::Statement, &[Param<'_>]),
    statement: &tokio_postgres::Statement,
    params: &[Param<'_>],
) -> Result<Vec<Row>, StoreError> {
    let begin = begin(true);
    let (begun, locked, rows, committed) = tokio::join!(
        client.batch_execute(&begin),
        client.query(lock, lock_params),
        client.query(statement, params),
        client.batch_execute("COMMIT"),
    );
    begun.map_err(backend)?;
    locked.map_err(backend)?;
    let rows = rows.map_err(backend)?;
    committed.map_err(backend)?;
    Ok(rows)
}

/// One change's statement and parameters (`statement` in the crate root), if it has one.
pub(crate) type Found = Option<(&'static str, Vec<OwnedParam>)>;

/// Prepares each statement (from the connection's cache after the first time), so that
/// [`executions`] can be sent back to back.
pub(crate) async fn prepare_all(
    client: &deadpool_postgres::ClientWrapper,
    statements: &[Found],
) -> Result<Vec<Option<tokio_postgres::Statement>>, StoreError> {
    let mut prepared = Vec::with_capacity(statements.len());
    for found in statements {
        prepared.push(match found {
            Some((sql, _)) => Some(client.prepare_cached(sql).await.map_err(backend)?),
            None => None,
        });
    }
    Ok(prepared)
}

/// The executions of prepared statements, rows changed each (0 for a change without
/// one); polled together ([`join_all`]) they go out in order in one round trip.
pub(crate) fn executions<'a>(
    client: &'a deadpool_postgres::ClientWrapper,
    statements: &'a [Found],
    prepared: &'a [Option<tokio_postgres::Statement>],
) -> Vec<impl Future<Output = Result<u64, tokio_postgres::Error>> + 'a> {
    statements
        .iter()
        .zip(prepared)
        .map(move |(found, prepared)| async move {
            match (found, prepared) {
                (Some((_, params)), Some(prepared)) => {
                    let refs: Vec<Param<'_>> = params.iter().map(|p| p.as_ref() as _).collect();
                    client.execute(prepared, &refs).await
                }
                _ => Ok(0),
            }
        })
        .collect()
}

/// Polls every future until all are ready, each first in order, so that requests on one
/// connection go out back to back (tokio-postgres pipelines them).
pub(crate) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs
        .into_iter()
        .map(|o| o.expect("every future is ready"))
        .collect()
}
