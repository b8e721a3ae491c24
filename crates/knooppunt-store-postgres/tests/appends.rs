//! A group of appends whose identities are all new is written at once (one round trip,
//! plain inserts); a group that meets an identity taken before is written carefully (the
//! claim first) and nothing of the attempt at once stays; the appender stays careful for
//! a moment after.

use knooppunt_store::Appended;
use knooppunt_store::DeliveryQueue;
use knooppunt_store::EventLog;
use knooppunt_store::Records;
use knooppunt_store_conformance::{assert_holds, event, subscription};
use knooppunt_store_postgres::{PgOptions, PgStore};
use knooppunt_test_postgres::Cluster;

const HOUR: u64 = 3_600_000;

fn calls(cluster: &Cluster, pattern: &str) -> u64 {
    cluster.statement_calls("appends", pattern)
}

/// Identities taken by plain inserts (at once).
const TAKE: &str = "INSERT INTO identities (source, id, seq, accepted_at)%";
/// Identities claimed `ON CONFLICT` (carefully).
const CLAIM: &str = "INSERT INTO identities AS t%";

fn count(cluster: &Cluster, table: &str) -> String {
    cluster.psql("appends", &format!("SELECT count(*) FROM {table}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_identities_are_written_at_once_and_a_taken_one_carefully() {
    let cluster = Cluster::start_with(&["shared_preload_libraries=pg_stat_statements"]);
    let url = cluster.create_database("appends");
    cluster.psql("appends", "CREATE EXTENSION pg_stat_statements");
    let store = PgStore::connect(&PgOptions::new(url)).await.unwrap();
    store.insert_subscription(&subscription("s")).await.unwrap();

    // Five new identities, one of them twice in the batch: at once, numbered in order.
    let mut batch: Vec<_> = (0..5).map(|n| event(&format!("e{n}"), &["s"])).collect();
    batch.insert(3, event("e1", &["s"]));
    let appended = store.append_events(batch, 100, HOUR).await.unwrap();
    let seqs: Vec<u64> = appended
        .iter()
        .filter_map(|a| match a {
            Appended::Accepted { seq } => Some(*seq),
            _ => None,
        })
        .collect();
    assert_eq!(seqs.len(), 5, "{appended:?}");
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert_eq!(appended[3], Appended::Duplicate { seq: seqs[1] });
    assert_eq!((calls(&cluster, TAKE), calls(&cluster, CLAIM)), (1, 0));
    // What was written at once is what a careful write stores: the events under their
    // numbers, and their deliveries.
    let leased = store.lease("s", 1_000, 60_000, 10, false).await.unwrap();
    let leased_seqs: Vec<u64> = leased.iter().map(|d| d.seq).collect();
    assert_eq!(leased_seqs, seqs);
    for (n, &seq) in seqs.iter().enumerate() {
        assert_holds(&store, seq, &format!("e{n}"), 100).await;
    }

    // A batch with an identity taken before: the attempt at once fails and leaves nothing;
    // the careful write answers the duplicate with its event's number and stores the new
    // one.
    let appended = store
        .append_events(vec![event("e2", &["s"]), event("e9", &["s"])], 200, HOUR)
        .await
        .unwrap();
    assert_eq!(appended[0], Appended::Duplicate { seq: seqs[2] });
    let Appended::Accepted { seq: e9 } = appended[1] else {
        panic!("{appended:?}");
    };
    assert!(e9 > seqs[4]);
    assert_eq!((calls(&cluster, TAKE), calls(&cluster, CLAIM)), (1, 1));
    assert_eq!(count(&cluster, "events"), "6");
    assert_eq!(count(&cluster, "identities"), "6");
    assert_eq!(count(&cluster, "deliveries"), "6");

    // Careful for a moment after, then at once again.
    store
        .append_events(vec![event("e10", &["s"])], 300, HOUR)
        .await
        .unwrap();
    assert_eq!((calls(&cluster, TAKE), calls(&cluster, CLAIM)), (1, 2));
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    store
        .append_events(vec![event("e11", &["s"])], 400, HOUR)
        .await
        .unwrap();
    assert_eq!((calls(&cluster, TAKE), calls(&cluster, CLAIM)), (2, 2));
    assert_eq!(count(&cluster, "events"), "8");
    assert_eq!(count(&cluster, "deliveries"), "8");
}
