//! Migration 17 on a database from before it: keys in the cluster's linguistic collation
//! (ICU `nl-NL` on the test cluster), with data under them, become bytewise ("C") keys,
//! and the data keeps working.

use knooppunt_store::Appended;
use knooppunt_store::DeliveryQueue;
use knooppunt_store::EventLog;
use knooppunt_store::Records;
use knooppunt_store_conformance::{event, subscription};
use knooppunt_store_postgres::{PgOptions, PgStore};
use knooppunt_test_postgres::Cluster;

const HOUR: u64 = 3_600_000;

/// Subscription ids that the linguistic collation and the bytes order differently.
const IDS: [&str; 4] = ["b", "Zaak", "a-z", "B"];

/// The key columns (primary keys and indexes) of the hub's tables that are text in any
/// collation but "C", as sorted `table.column`s.
fn linguistic_keys(cluster: &Cluster) -> String {
    cluster.psql(
        "upgrade",
        "SELECT COALESCE(string_agg(DISTINCT (c.relname || '.' || a.attname) COLLATE \"C\", ' ' \
                                    ORDER BY (c.relname || '.' || a.attname) COLLATE \"C\"), '') \
         FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid \
         JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public' \
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey) \
         WHERE a.atttypid = 'text'::regtype AND a.attcollation <> 'pg_catalog.\"C\"'::regcollation",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_before_gets_bytewise_keys_and_keeps_its_data() {
    let cluster = Cluster::start();
    let url = cluster.create_database("upgrade");
    let options = PgOptions::new(url);

    let store = PgStore::connect(&options).await.unwrap();
    assert_eq!(
        linguistic_keys(&cluster),
        "",
        "a new database has bytewise keys"
    );
    for id in IDS {
        store.insert_subscription(&subscription(id)).await.unwrap();
    }
    let appended = store
        .append_events(vec![event("e1", &IDS), event("e2", &IDS)], 100, HOUR)
        .await
        .unwrap();
    drop(store);

    // Back to how migration 16 left a database: every key in the default collation, and
    // no tables of later migrations.
    cluster.psql(
        "upgrade",
        "DROP TABLE hubs, sink_pauses, former_subscriptions; \
         ALTER TABLE principals DROP COLUMN previous_token_sha256, \
           DROP COLUMN previous_token_until; \
         DELETE FROM knooppunt_schema WHERE version > 17",
    );
    cluster.psql(
        "upgrade",
        "DO $$ DECLARE k record; BEGIN \
           FOR k IN SELECT table_name, column_name FROM information_schema.columns \
                    WHERE table_schema = 'public' AND collation_name = 'C' LOOP \
             EXECUTE format('ALTER TABLE %I ALTER COLUMN %I TYPE text COLLATE \"default\"', \
                            k.table_name, k.column_name); \
           END LOOP; \
           DELETE FROM knooppunt_schema WHERE version = 17; END $$",
    );
    assert_eq!(
        linguistic_keys(&cluster),
        "catalog.id dead_letters.subscription deliveries.subscription grants.entry \
         grants.subscription identities.id identities.source principals.name \
         receipts.subscription replays.id sessions.id subscriptions.id",
        "the schema of before"
    );
    assert_eq!(
        cluster.psql(
            "upgrade",
            "SELECT string_agg(id, ' ' ORDER BY id) FROM subscriptions"
        ),
        "a-z b B Zaak",
        "the linguistic order of before"
    );

    // A hub of this version migrates it at start.
    let store = PgStore::connect(&options).await.unwrap();
    assert_eq!(linguistic_keys(&cluster), "");
    let ids: Vec<String> = store
        .subscriptions()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(
        ids,
        ["B", "Zaak", "a-z", "b"],
        "listed in the order of the bytes"
    );
    // The queues and the identities came through the rebuilt indexes.
    for id in IDS {
        let leased = store.lease(id, 1_000, 60_000, 10, false).await.unwrap();
        assert_eq!(leased.len(), 2, "{id}'s two deliveries");
    }
    let again = store
        .append_events(vec![event("e1", &IDS)], 200, HOUR)
        .await
        .unwrap();
    let Appended::Accepted { seq: first } = appended[0] else {
        panic!("{appended:?}");
    };
    assert_eq!(
        again,
        [Appended::Duplicate { seq: first }],
        "an identity from before is still known"
    );
}
