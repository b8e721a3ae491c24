//! Two stores on one database, as two hubs have: numbering, ordering, leases and tokens
//! hold across them.

use std::collections::BTreeSet;
use std::sync::Arc;

use knooppunt_store::{Appended, Attempt, DeliveryChange, NewEvent, Store, StoreError, Verdict};
use knooppunt_store_conformance::{event, subscription};
use knooppunt_store_postgres::{PgOptions, PgStore};
use knooppunt_test_postgres::Cluster;

const HOUR: u64 = 3_600_000;

async fn two_stores(cluster: &Cluster, name: &str) -> (Arc<PgStore>, Arc<PgStore>) {
    let url = cluster.create_database(name);
    let a = PgStore::connect(&PgOptions::new(url.clone()))
        .await
        .unwrap();
    let b = PgStore::connect(&PgOptions::new(url)).await.unwrap();
    (Arc::new(a), Arc::new(b))
}

fn accepted(appended: &[Appended]) -> Vec<u64> {
    appended
        .iter()
        .map(|a| match a {
            Appended::Accepted { seq } => *seq,
            Appended::Duplicate { seq } => panic!("duplicate of {seq}"),
        })
        .collect()
}

/// Events appended through both stores at once: one numbering, and a reader never sees a
/// number appear below one it has already seen (numbers are committed in order), which is
/// what lets an ordered subscription deliver in acceptance order across hubs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_are_committed_in_order_across_stores() {
    let cluster = Cluster::start();
    let (a, b) = two_stores(&cluster, "order").await;
    a.insert_subscription(&subscription("s")).await.unwrap();
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let store = if w % 2 == 0 {
                Arc::clone(&a)
            } else {
                Arc::clone(&b)
            };
            tokio::spawn(async move {
                let mut numbers = Vec::new();
                for i in 0..40 {
                    let events: Vec<NewEvent> = (0..3)
                        .map(|k| event(&format!("{w}-{i}-{k}"), &["s"]))
                        .collect();
                    numbers.extend(accepted(
                        &store.append_events(events, 1000, HOUR).await.unwrap(),
                    ));
                }
                numbers
            })
        })
        .collect();
    let reader = {
        let b = Arc::clone(&b);
        tokio::spawn(async move {
            let mut seen = BTreeSet::new();
            let mut violations = Vec::new();
            for _ in 0..200 {
                let now: BTreeSet<u64> = b
                    .pending_deliveries("s", 10_000)
                    .await
                    .unwrap()
                    .iter()
                    .map(|d| d.seq)
                    .collect();
                if let Some(&highest) = seen.iter().next_back() {
                    violations.extend(now.difference(&seen).filter(|n| **n < highest).copied());
                }
                seen = now;
                if seen.len() == 8 * 40 * 3 {
                    break;
                }
            }
            violations
        })
    };
    let mut all = Vec::new();
    for writer in writers {
        let numbers = writer.await.unwrap();
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "in call order");
        all.extend(numbers);
    }
    let violations = reader.await.unwrap();
    assert!(
        violations.is_empty(),
        "numbers appeared below ones already visible: {violations:?}"
    );
    let unique: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "one numbering for both stores");
    let pending = a.pending_deliveries("s", 10_000).await.unwrap();
    assert_eq!(pending.len(), all.len());
    // A duplicate is found whichever store accepted the original.
    let again = b
        .append_events(vec![event("0-0-0", &["s"])], 2000, HOUR)
        .await
        .unwrap();
    assert!(matches!(again[0], Appended::Duplicate { .. }), "{again:?}");
}

/// An ordered subscription has at most one delivery leased across both stores, and a
/// result from a lease that ran out and went to the other store is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_lease_across_stores_and_stale_results_refused() {
    let cluster = Cluster::start();
    let (a, b) = two_stores(&cluster, "leases").await;
    a.insert_subscription(&subscription("o")).await.unwrap();
    let events = (0..5).map(|i| event(&i.to_string(), &["o"])).collect();
    let n = accepted(&a.append_events(events, 100, HOUR).await.unwrap());

    let racers: Vec<_> = (0..16)
        .map(|i| {
            let store = if i % 2 == 0 {
                Arc::clone(&a)
            } else {
                Arc::clone(&b)
            };
            tokio::spawn(async move { store.lease("o", 200, 1000, 1, true).await.unwrap() })
        })
        .collect();
    let mut leased = Vec::new();
    for racer in racers {
        leased.extend(racer.await.unwrap());
    }
    assert_eq!(
        leased.len(),
        1,
        "one lease for an ordered subscription: {leased:?}"
    );
    assert_eq!(leased[0].seq, n[0], "its oldest delivery");

    // The holder (say hub A) hangs past its lease; hub B takes the delivery over.
    let taken = b.lease("o", 1200, 1000, 1, true).await.unwrap();
    assert_eq!(taken[0].seq, n[0]);
    let result = |lease: u64, verdict: Verdict| {
        vec![DeliveryChange::Attempted(Attempt {
            subscription: "o".into(),
            seq: n[0],
            lease,
            at: 1300,
            status: Some(204),
            error: None,
            verdict,
        })]
    };
    let stale = a.record(result(leased[0].lease, Verdict::Delivered)).await;
    assert!(
        matches!(stale, Err(StoreError::StaleLease { .. })),
        "{stale:?}"
    );
    b.record(result(taken[0].lease, Verdict::Delivered))
        .await
        .unwrap();
    let next = a.lease("o", 1400, 1000, 1, true).await.unwrap();
    assert_eq!(next[0].seq, n[1], "delivered once, then the next in order");
}

/// A subscription changed through one store changes the version the other one reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_changes_are_visible_to_the_other_store() {
    let cluster = Cluster::start();
    let (a, b) = two_stores(&cluster, "versions").await;
    let before = b.subscriptions_version().await.unwrap();
    a.insert_subscription(&subscription("s")).await.unwrap();
    let after = b.subscriptions_version().await.unwrap();
    assert_ne!(before, after);
    assert_eq!(b.subscriptions().await.unwrap().len(), 1);
    a.delete_subscription("s").await.unwrap();
    assert_ne!(b.subscriptions_version().await.unwrap(), after);
    assert!(b.subscriptions().await.unwrap().is_empty());
    // A store whose database is gone says it is unavailable, not that it failed.
    drop(cluster);
    let error = b.check().await.unwrap_err();
    assert!(matches!(error, StoreError::Unavailable(_)), "{error}");
}

/// A store told to watch hears the other store's changes at their commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_are_told_to_the_other_store_at_once() {
    use knooppunt_store::StoreChange;
    let cluster = Cluster::start();
    let (a, b) = two_stores(&cluster, "notices").await;
    let (told, mut heard) = tokio::sync::mpsc::unbounded_channel();
    a.watch(Arc::new(move |change| {
        let _ = told.send(change);
    }));
    // The listener connects in the background; give it a moment.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let next = async |heard: &mut tokio::sync::mpsc::UnboundedReceiver<StoreChange>| {
        tokio::time::timeout(std::time::Duration::from_secs(1), heard.recv())
            .await
            .expect("told within a second")
            .unwrap()
    };
    b.insert_subscription(&subscription("s")).await.unwrap();
    assert_eq!(next(&mut heard).await, StoreChange::Subscriptions);
    b.append_events(vec![event("1", &["s"])], 100, HOUR)
        .await
        .unwrap();
    assert_eq!(
        next(&mut heard).await,
        StoreChange::Deliveries(Some(vec!["s".into()]))
    );
    a.close();
}
