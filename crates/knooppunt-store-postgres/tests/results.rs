//! A small group of push results of an unordered subscription waits for company before it
//! is committed (each transaction costs the database a fixed amount besides its rows); the
//! results someone waits for do not: an ordered subscription's (its next delivery waits for
//! it) and every durable change. The store's wait is set to 30 s here, so that "still
//! waiting" and "did not wait" cannot be mistaken for a slow machine.

use knooppunt_store::DeliveryQueue;
use knooppunt_store::EventLog;
use knooppunt_store::Records;
use std::sync::Arc;
use std::time::Duration;

use knooppunt_store::{Delivery, Inspect, Verdict};
use knooppunt_store_conformance::{attempt, event, seqs, subscription};
use knooppunt_store_postgres::{PgOptions, PgStore};
use knooppunt_test_postgres::Cluster;

const HOUR: u64 = 3_600_000;
/// Longer than any answer in these tests may take, shorter than the store's wait.
const ANSWERED_WITHIN: Duration = Duration::from_secs(10);

async fn store(cluster: &Cluster, database: &str) -> Arc<PgStore> {
    let store = PgStore::connect(&PgOptions {
        results_wait: Duration::from_secs(30),
        ..PgOptions::new(cluster.create_database(database))
    })
    .await
    .unwrap();
    Arc::new(store)
}

/// Appends `count` events for `id` and leases them all (`ordered` or not).
async fn leased(store: &PgStore, id: &str, count: usize, ordered: bool) -> Vec<Delivery> {
    store.insert_subscription(&subscription(id)).await.unwrap();
    let events = (0..count)
        .map(|n| event(&format!("{id}-{n}"), &[id]))
        .collect();
    let appended = seqs(&store.append_events(events, 100, HOUR).await.unwrap());
    let leased = store.lease(id, 200, HOUR, count, ordered).await.unwrap();
    let limit = if ordered { 1 } else { count };
    assert_eq!(leased.len(), limit, "{leased:?}");
    assert_eq!(leased[0].seq, appended[0]);
    leased
}

/// Records `delivery` delivered as a push result, in a task of its own.
fn delivered(store: &Arc<PgStore>, delivery: &Delivery) -> tokio::task::JoinHandle<()> {
    let (store, change) = (
        Arc::clone(store),
        attempt(delivery, 300, Verdict::Delivered),
    );
    tokio::spawn(async move { store.record_results(vec![change]).await.unwrap() })
}

/// Records `delivery` delivered, alone, and checks that it is still waiting half a second
/// later (committed at once it would have been answered in milliseconds).
async fn waiting_alone(store: &Arc<PgStore>, delivery: &Delivery) -> tokio::task::JoinHandle<()> {
    let waiting = delivered(store, delivery);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !waiting.is_finished(),
        "a lone result of an unordered subscription was committed at once"
    );
    waiting
}

async fn answered(handle: tokio::task::JoinHandle<()>, what: &str) {
    tokio::time::timeout(ANSWERED_WITHIN, handle)
        .await
        .unwrap_or_else(|_| panic!("{what} waited for company"))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_group_of_unordered_results_waits_for_company() {
    let cluster = Cluster::start();
    let store = store(&cluster, "company").await;
    let deliveries = leased(&store, "u", 70, false).await;

    // One result alone waits.
    let first = waiting_alone(&store, &deliveries[0]).await;
    assert_eq!(store.pending_deliveries("u", 100).await.unwrap().len(), 70);

    // With 63 more, the group has company: all 64 are committed together, long before the
    // wait is over.
    let rest: Vec<_> = deliveries[1..64]
        .iter()
        .map(|delivery| delivered(&store, delivery))
        .collect();
    answered(first, "the first result").await;
    for handle in rest {
        answered(handle, "a result of a full group").await;
    }
    let pending = store.pending_deliveries("u", 100).await.unwrap();
    let left: Vec<u64> = pending.iter().map(|d| d.seq).collect();
    let expected: Vec<u64> = deliveries[64..].iter().map(|d| d.seq).collect();
    assert_eq!(left, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_someone_waits_for_do_not_wait() {
    let cluster = Cluster::start();
    let store = store(&cluster, "urgent").await;

    // An ordered subscription's result (once leased unordered: that is forgotten).
    store.insert_subscription(&subscription("o")).await.unwrap();
    let events = vec![event("o-0", &["o"]), event("o-1", &["o"])];
    store.append_events(events, 100, HOUR).await.unwrap();
    let unordered = store.lease("o", 200, HOUR, 1, false).await.unwrap();
    let given_back = [(unordered[0].seq, unordered[0].lease)];
    assert_eq!(store.release("o", &given_back).await.unwrap(), 1);
    let oldest = store.lease("o", 200, HOUR, 1, true).await.unwrap();
    assert_eq!(oldest.len(), 1);
    answered(
        delivered(&store, &oldest[0]),
        "an ordered subscription's result",
    )
    .await;

    // A durable change ends the wait of the results waiting with it.
    let deliveries = leased(&store, "u", 3, false).await;
    let waiting = waiting_alone(&store, &deliveries[0]).await;
    let durable = attempt(&deliveries[1], 300, Verdict::Delivered);
    tokio::time::timeout(ANSWERED_WITHIN, store.record(vec![durable]))
        .await
        .expect("a durable change waited for company")
        .unwrap();
    answered(waiting, "a result waiting beside a durable change").await;
    let left = store.pending_deliveries("u", 10).await.unwrap();
    assert_eq!(
        left.iter().map(|d| d.seq).collect::<Vec<_>>(),
        [deliveries[2].seq]
    );
}
