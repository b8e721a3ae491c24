//! A hub delivers what it accepted without reading the events back from the database (they
//! stay in its cache from the append); another hub reads the events of a lease together.

use knooppunt_store::DeliveryQueue;
use knooppunt_store::EventLog;
use knooppunt_store::Records;
use knooppunt_store_conformance::{assert_holds, event, subscription};
use knooppunt_store_postgres::{PgOptions, PgStore};
use knooppunt_test_postgres::Cluster;

const HOUR: u64 = 3_600_000;

fn calls(cluster: &Cluster, pattern: &str) -> u64 {
    cluster.statement_calls("reads", pattern)
}

/// Reads of one event.
const ONE: &str = "SELECT % FROM events WHERE seq = $1";
/// Reads of the events of a lease.
const AHEAD: &str = "SELECT % FROM events WHERE seq = ANY($1)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_that_accepted_an_event_does_not_read_it_back() {
    let cluster = Cluster::start_with(&["shared_preload_libraries=pg_stat_statements"]);
    let url = cluster.create_database("reads");
    cluster.psql("reads", "CREATE EXTENSION pg_stat_statements");
    let options = PgOptions::new(url);
    let accepting = PgStore::connect(&options).await.unwrap();
    let other = PgStore::connect(&options).await.unwrap();
    let third = PgStore::connect(&options).await.unwrap();
    accepting
        .insert_subscription(&subscription("s"))
        .await
        .unwrap();
    let events = (0..20).map(|n| event(&format!("e{n}"), &["s"])).collect();
    let appended = accepting.append_events(events, 100, HOUR).await.unwrap();
    let seqs = knooppunt_store_conformance::seqs(&appended);
    let leased = accepting
        .lease("s", 1_000, 60_000, 20, false)
        .await
        .unwrap();
    assert_eq!(leased.len(), 20);
    for (n, delivery) in leased.iter().enumerate() {
        assert_holds(&accepting, delivery.seq, &format!("e{n}"), 100).await;
    }
    assert_eq!(
        (calls(&cluster, ONE), calls(&cluster, AHEAD)),
        (0, 0),
        "the accepting hub read events back"
    );

    // Another hub leases them once the first hub's leases ran out: it reads them in one
    // statement with the lease, not one by one, and gets the same.
    let leased = other.lease("s", 70_000, 60_000, 20, false).await.unwrap();
    assert_eq!(leased.len(), 20);
    for (n, delivery) in leased.iter().enumerate() {
        assert_holds(&other, delivery.seq, &format!("e{n}"), 100).await;
    }
    assert_eq!((calls(&cluster, ONE), calls(&cluster, AHEAD)), (0, 1));

    // A hub that leased nothing reads each event it is asked for, once.
    for (n, &seq) in seqs.iter().enumerate() {
        let stored = third.event(seq).await.unwrap().unwrap();
        assert_eq!(stored.id, format!("e{n}"));
        third.event(seq).await.unwrap().unwrap();
    }
    assert_eq!((calls(&cluster, ONE), calls(&cluster, AHEAD)), (20, 1));
}
