//! The hot statements (a lease, a group of delivered results, a page of a backlog being
//! shed) keep costing what their rows
//! cost as a queue grows, even when the connection planned them while the queue was tiny
//! (a fresh database, statistics not yet taken after a burst): measured in the buffers each
//! call touches (`pg_stat_statements`), which the plan decides, not the machine's speed.

use knooppunt_store::DeliveryQueue;
use knooppunt_store::EventLog;
use knooppunt_store::Records;
use knooppunt_store::{Attempt, Delivery, DeliveryChange, Verdict};
use knooppunt_store_conformance::{event, subscription};
use knooppunt_store_postgres::{PgOptions, PgStore};
use knooppunt_test_postgres::Cluster;

const HOUR: u64 = 3_600_000;

/// Pending deliveries of the one subscription once it has grown.
const BACKLOG: usize = 40_000;

fn delivered(leased: &Delivery, at: u64) -> DeliveryChange {
    DeliveryChange::Attempted(Attempt {
        subscription: leased.subscription.clone(),
        seq: leased.seq,
        lease: leased.lease,
        at,
        status: Some(204),
        error: None,
        verdict: Verdict::Delivered,
        receipt: true,
    })
}

/// Leases `limit` deliveries of `s` and records each as delivered, one result at a time.
async fn lease_and_deliver(store: &PgStore, limit: usize, now: u64) -> usize {
    let leased = store.lease("s", now, 60_000, limit, false).await.unwrap();
    for delivery in &leased {
        store
            .record_results(vec![delivered(delivery, now)])
            .await
            .unwrap();
    }
    leased.len()
}

/// Buffers touched per call by the statements whose text is `LIKE` `pattern`.
fn buffers_per_call(cluster: &Cluster, pattern: &str) -> (u64, u64) {
    let row = cluster.psql(
        "plans",
        &format!(
            "SELECT sum(shared_blks_hit + shared_blks_read)::bigint, sum(calls)::bigint \
             FROM pg_stat_statements WHERE query LIKE '{pattern}'"
        ),
    );
    let (buffers, calls) = row.split_once('|').expect("buffers|calls");
    let calls: u64 = calls.parse().unwrap_or(0);
    assert!(calls > 0, "no calls of `{pattern}` were counted");
    (buffers.parse::<u64>().unwrap() / calls, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_and_results_stay_cheap_as_a_queue_grows_past_its_plans() {
    let cluster = Cluster::start_with(&["shared_preload_libraries=pg_stat_statements"]);
    let url = cluster.create_database("plans");
    cluster.psql("plans", "CREATE EXTENSION pg_stat_statements");
    // One connection, so that every statement is planned, and its plan kept, on it.
    let store = PgStore::connect(&PgOptions {
        pool_size: 1,
        ..PgOptions::new(url)
    })
    .await
    .unwrap();
    store.insert_subscription(&subscription("s")).await.unwrap();

    // While the queue is tiny: enough leases and results for the connection to settle on
    // plans it keeps (PostgreSQL plans a prepared statement for its values five times, then
    // may keep one generic plan).
    for round in 0..12u64 {
        let events = vec![event(&format!("tiny-{round}"), &["s"])];
        store.append_events(events, 100, HOUR).await.unwrap();
        assert_eq!(lease_and_deliver(&store, 1, 1_000 + round).await, 1);
        store.pending_seqs("s", None, 500).await.unwrap();
    }

    // Then a burst: the queue grows to 40,000 before any statistics are taken.
    for chunk in 0..BACKLOG / 1000 {
        let events = (0..1000)
            .map(|n| event(&format!("burst-{chunk}-{n}"), &["s"]))
            .collect();
        store.append_events(events, 200, HOUR).await.unwrap();
    }
    cluster.psql("plans", "SELECT pg_stat_statements_reset()");
    for round in 0..5u64 {
        assert_eq!(lease_and_deliver(&store, 10, 10_000 + round).await, 10);
    }
    // Shedding walks a huge backlog a page at a time.
    let mut after = None;
    for _ in 0..5 {
        let page = store.pending_seqs("s", after, 500).await.unwrap();
        assert_eq!(page.len(), 500);
        after = page.last().copied();
    }

    // A lease of ten and a result touch tens of buffers through the primary key; a plan
    // that scanned the subscription's queue, or the table, touched hundreds to thousands.
    let (lease, leases) = buffers_per_call(&cluster, "%SET leased_until = $3, lease =%");
    let (results, groups) = buffers_per_call(&cluster, "WITH r AS%");
    assert!(
        lease < 150,
        "a lease of 10 of {BACKLOG} touched {lease} buffers a call ({leases} calls)"
    );
    let (pages, walked) = buffers_per_call(&cluster, "SELECT seq FROM deliveries WHERE%");
    assert!(
        pages < 150,
        "a page of 500 pending of {BACKLOG} touched {pages} buffers a call ({walked} calls)"
    );
    assert!(
        results < 150,
        "a group of delivered results touched {results} buffers a call ({groups} calls)"
    );
}
