//! Two stores on one database, as two hubs have: numbering, ordering, leases and tokens
//! hold across them.

use knooppunt_store::Cluster as _;
use knooppunt_store::DeliveryQueue;
use knooppunt_store::EventLog;
use knooppunt_store::Records;
use std::collections::BTreeSet;
use std::sync::Arc;

use knooppunt_store::{
    Appended, Attempt, DeliveryChange, Inspect, NewEvent, Store, StoreError, Verdict,
};
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

/// Events appended through both stores at once: one numbering, and an ordered
/// subscription consumed meanwhile (through both stores, one lease at a time) gets them in
/// number order, never one below a number it already had: its oldest delivery is leased
/// only once no smaller number can still be committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_leases_follow_the_numbering_across_stores() {
    let cluster = Cluster::start();
    let (a, b) = two_stores(&cluster, "order").await;
    a.insert_subscription(&subscription("s")).await.unwrap();
    const WRITERS: usize = 8;
    const CALLS: usize = 40;
    const PER_CALL: usize = 3;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = if w % 2 == 0 {
                Arc::clone(&a)
            } else {
                Arc::clone(&b)
            };
            tokio::spawn(async move {
                let mut numbers = Vec::new();
                for i in 0..CALLS {
                    let events: Vec<NewEvent> = (0..PER_CALL)
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
    let consumer = {
        let (a, b) = (Arc::clone(&a), Arc::clone(&b));
        tokio::spawn(async move {
            let mut delivered = Vec::new();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while delivered.len() < WRITERS * CALLS * PER_CALL {
                assert!(
                    std::time::Instant::now() < deadline,
                    "consuming took too long"
                );
                let store = if delivered.len() % 2 == 0 { &a } else { &b };
                let leased = store.lease("s", 2000, 60_000, 1, true).await.unwrap();
                let Some(delivery) = leased.into_iter().next() else {
                    tokio::task::yield_now().await;
                    continue;
                };
                store
                    .record(vec![DeliveryChange::Attempted(Attempt {
                        subscription: "s".into(),
                        seq: delivery.seq,
                        lease: delivery.lease,
                        at: 2000,
                        status: Some(204),
                        error: None,
                        verdict: Verdict::Delivered,
                        receipt: true,
                    })])
                    .await
                    .unwrap();
                delivered.push(delivery.seq);
            }
            delivered
        })
    };
    let mut all = Vec::new();
    for writer in writers {
        let numbers = writer.await.unwrap();
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "in call order");
        all.extend(numbers);
    }
    let delivered = consumer.await.unwrap();
    let out_of_order: Vec<&[u64]> = delivered.windows(2).filter(|w| w[0] >= w[1]).collect();
    assert!(
        out_of_order.is_empty(),
        "an ordered subscription got a smaller number after a larger one: {out_of_order:?}"
    );
    let unique: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "one numbering for both stores");
    assert_eq!(
        delivered.iter().copied().collect::<BTreeSet<u64>>(),
        unique,
        "every event delivered once"
    );
    // A duplicate is found whichever store accepted the original.
    let again = b
        .append_events(vec![event("0-0-0", &["s"])], 2000, HOUR)
        .await
        .unwrap();
    assert!(matches!(again[0], Appended::Duplicate { .. }), "{again:?}");
}

/// Two hubs accepting the same event at once: one accepts it, the other answers duplicate
/// with its number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_identity_accepted_once_across_stores() {
    let cluster = Cluster::start();
    let (a, b) = two_stores(&cluster, "identity").await;
    a.insert_subscription(&subscription("s")).await.unwrap();
    for round in 0..20 {
        let id = format!("same-{round}");
        let (x, y) = tokio::join!(
            a.append_events(vec![event(&id, &["s"])], 1000, HOUR),
            b.append_events(vec![event(&id, &["s"])], 1000, HOUR),
        );
        let (x, y) = (x.unwrap()[0], y.unwrap()[0]);
        let accepted: Vec<u64> = [x, y]
            .iter()
            .filter_map(|a| match a {
                Appended::Accepted { seq } => Some(*seq),
                Appended::Duplicate { .. } => None,
            })
            .collect();
        assert_eq!(accepted.len(), 1, "{x:?} {y:?}");
        let numbers: BTreeSet<u64> = [x, y]
            .iter()
            .map(|a| match a {
                Appended::Accepted { seq } | Appended::Duplicate { seq } => *seq,
            })
            .collect();
        assert_eq!(
            numbers.len(),
            1,
            "the duplicate names the original: {x:?} {y:?}"
        );
    }
    assert_eq!(a.pending_deliveries("s", 100).await.unwrap().len(), 20);
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
            receipt: true,
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
    let appended = b
        .append_events(vec![event("1", &["s"])], 100, HOUR)
        .await
        .unwrap();
    assert_eq!(
        next(&mut heard).await,
        StoreChange::Deliveries(Some(vec!["s".into()]))
    );
    // A withdrawal (a shed, a revocation), so that no hub sends what it leased ahead.
    let seqs = knooppunt_store_conformance::seqs(&appended);
    b.record(vec![knooppunt_store_conformance::withdraw("s", &seqs, 200)])
        .await
        .unwrap();
    assert_eq!(
        next(&mut heard).await,
        StoreChange::Withdrawn(Some(vec!["s".into()]))
    );
    a.close();
    // A closed store stores nothing more, appends included (they have connections and a
    // thread of their own).
    let error = a
        .append_events(vec![event("2", &["s"])], 100, HOUR)
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Unavailable(_)), "{error}");
}
