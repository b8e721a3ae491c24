//! A hub delivers what it accepted without reading the events back from the database (they
//! stay in its cache from the append); another hub reads each once.

use knooppunt_store::{Appended, Store};
use knooppunt_store_conformance::{event, subscription};
use knooppunt_store_postgres::{PgOptions, PgStore};
use knooppunt_test_postgres::Cluster;

const HOUR: u64 = 3_600_000;

/// How often the database ran the statement that reads one event.
fn event_reads(cluster: &Cluster) -> u64 {
    cluster
        .psql(
            "reads",
            "SELECT COALESCE(sum(calls), 0)::bigint FROM pg_stat_statements \
             WHERE query LIKE 'SELECT source, id, accepted_at, json, extension_types FROM events%'",
        )
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_that_accepted_an_event_does_not_read_it_back() {
    let cluster = Cluster::start_with(&["shared_preload_libraries=pg_stat_statements"]);
    let url = cluster.create_database("reads");
    cluster.psql("reads", "CREATE EXTENSION pg_stat_statements");
    let options = PgOptions::new(url);
    let accepting = PgStore::connect(&options).await.unwrap();
    let other = PgStore::connect(&options).await.unwrap();
    accepting
        .insert_subscription(&subscription("s"))
        .await
        .unwrap();
    let events = (0..20).map(|n| event(&format!("e{n}"), &["s"])).collect();
    let appended = accepting.append_events(events, 100, HOUR).await.unwrap();
    let seqs: Vec<u64> = appended
        .iter()
        .map(|a| match a {
            Appended::Accepted { seq } => *seq,
            Appended::Duplicate { seq } => panic!("duplicate of {seq}"),
        })
        .collect();
    let leased = accepting
        .lease("s", 1_000, 60_000, 20, false)
        .await
        .unwrap();
    assert_eq!(leased.len(), 20);
    for (n, delivery) in leased.iter().enumerate() {
        let stored = accepting.event(delivery.seq).await.unwrap().unwrap();
        assert_eq!(stored.id, format!("e{n}"));
        assert_eq!(stored.accepted_at, 100);
        assert_eq!(stored.json, event(&format!("e{n}"), &[]).json);
    }
    assert_eq!(
        event_reads(&cluster),
        0,
        "the accepting hub read events back"
    );

    // Another hub has not seen them: it reads each once, and gets the same.
    for (n, &seq) in seqs.iter().enumerate() {
        let stored = other.event(seq).await.unwrap().unwrap();
        assert_eq!(stored.id, format!("e{n}"));
        assert_eq!(stored.json, event(&format!("e{n}"), &[]).json);
        other.event(seq).await.unwrap().unwrap();
    }
    assert_eq!(event_reads(&cluster), 20);
}
