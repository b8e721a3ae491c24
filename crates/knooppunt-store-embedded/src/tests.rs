use std::sync::atomic::Ordering as AtomicOrdering;

use super::*;
use knooppunt_store::{SinkCredential, Verdict};

/// A store with these subscriptions.
async fn store_with(dir: &Path, subscriptions: &[&str], options: SledOptions) -> SledStore {
    let store = SledStore::open_with(dir, options).unwrap();
    for id in subscriptions {
        store.insert_subscription(&subscription(id)).await.unwrap();
    }
    store
}

fn subscription(id: &str) -> Subscription {
    Subscription {
        id: id.into(),
        owner: "gemeente".into(),
        sink: "http://127.0.0.1:9/sink".into(),
        protocol: "HTTP".into(),
        source: None,
        types_empty: false,
        types: vec!["nl.brp.x".into()],
        filters: vec![serde_json::json!({"prefix": {"type": "nl."}})],
        protocol_settings: Default::default(),
        sink_credential: Some(SinkCredential::Plain {
            identifier: "hub".into(),
            secret: "s3cret".into(),
        }),
        config: Default::default(),
        created_at: 1,
        updated_at: 1,
        state: knooppunt_store::SubscriptionState::Active,
        validated_by: None,
        validation_token: None,
        allowed_rate: None,
        validation_problem: None,
        disabled_reason: None,
    }
}

fn event(id: &str, subscriptions: &[&str]) -> NewEvent {
    NewEvent {
        source: "urn:nld:x".into(),
        id: id.into(),
        json: format!(r#"{{"specversion":"1.0","id":"{id}","source":"urn:nld:x","type":"t"}}"#),
        subscriptions: subscriptions.iter().map(|s| (*s).to_owned()).collect(),
    }
}

const HOUR: u64 = 3_600_000;

#[tokio::test]
async fn subscriptions_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SledStore::open(dir.path()).unwrap();
        store.insert_subscription(&subscription("b")).await.unwrap();
        store.insert_subscription(&subscription("a")).await.unwrap();
        assert!(matches!(
            store.insert_subscription(&subscription("a")).await,
            Err(StoreError::Conflict(id)) if id == "a"
        ));
        let mut changed = subscription("b");
        changed.sink = "http://127.0.0.1:9/other".into();
        assert!(store.update_subscription(&changed).await.unwrap());
        assert!(
            !store
                .update_subscription(&subscription("zzz"))
                .await
                .unwrap()
        );
    }
    let store = SledStore::open(dir.path()).unwrap();
    let all = store.subscriptions().await.unwrap();
    let ids: Vec<_> = all.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(all[1].sink, "http://127.0.0.1:9/other");
    assert_eq!(all[0], subscription("a"), "every field round-trips");
    assert_eq!(
        store.delete_subscription("a").await.unwrap(),
        Some(subscription("a"))
    );
    assert_eq!(store.delete_subscription("a").await.unwrap(), None);
    assert_eq!(store.subscription("a").await.unwrap(), None);
}

#[tokio::test]
async fn events_are_appended_with_their_deliveries_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &["s1", "s2", "s"], SledOptions::default()).await;
    let first = store
        .append_events(
            vec![event("1", &["s1", "s2"]), event("2", &["s1"])],
            1000,
            HOUR,
        )
        .await
        .unwrap();
    let third = store
        .append_events(vec![event("3", &[])], 1001, HOUR)
        .await
        .unwrap();
    let seqs: Vec<u64> = first
        .iter()
        .chain(&third)
        .map(|a| match a {
            Appended::Accepted { seq } => *seq,
            Appended::Duplicate { .. } => panic!("nothing here is a duplicate"),
        })
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "acceptance order: {seqs:?}"
    );

    let s1 = store.pending_deliveries("s1", 10).await.unwrap();
    assert_eq!(s1.iter().map(|d| d.seq).collect::<Vec<_>>(), seqs[..2]);
    assert_eq!(s1[0].attempts, 0);
    assert_eq!(s1[0].next_attempt_at, 1000);
    assert_eq!(store.pending_deliveries("s2", 10).await.unwrap().len(), 1);
    assert_eq!(
        store.pending_deliveries("s", 10).await.unwrap(),
        vec![],
        "prefixes do not leak"
    );
    let stored = store.event(seqs[0]).await.unwrap().unwrap();
    assert_eq!(stored.id, "1");
    assert_eq!(stored.json, event("1", &[]).json);
    let again = store.event(seqs[0]).await.unwrap().unwrap();
    assert!(
        std::sync::Arc::ptr_eq(&stored, &again),
        "one copy is shared by the deliveries of an event"
    );
}

#[tokio::test]
async fn duplicates_within_the_window_are_not_stored_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &["s"], SledOptions::default()).await;
    let first = store
        .append_events(vec![event("1", &["s"])], 0, HOUR)
        .await
        .unwrap();
    let Appended::Accepted { seq } = first[0] else {
        panic!()
    };
    let again = store
        .append_events(
            vec![event("1", &["s"]), event("2", &["s"]), event("2", &["s"])],
            HOUR - 1,
            HOUR,
        )
        .await
        .unwrap();
    assert_eq!(again[0], Appended::Duplicate { seq });
    assert!(matches!(again[1], Appended::Accepted { .. }));
    assert!(
        matches!(again[2], Appended::Duplicate { .. }),
        "duplicates within one batch too"
    );
    assert_eq!(store.pending_deliveries("s", 10).await.unwrap().len(), 2);
    let later = store
        .append_events(vec![event("1", &["s"])], HOUR, HOUR)
        .await
        .unwrap();
    assert!(
        matches!(later[0], Appended::Accepted { .. }),
        "after the window it is new"
    );
}

#[tokio::test]
async fn appended_events_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = store_with(dir.path(), &["s"], SledOptions::default()).await;
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in 0..25 {
                        store
                            .append_events(vec![event(&format!("{w}-{i}"), &["s"])], 5, HOUR)
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
    }
    let store = SledStore::open(dir.path()).unwrap();
    let pending = store.pending_deliveries("s", 1000).await.unwrap();
    assert_eq!(pending.len(), 200);
    assert!(pending.windows(2).all(|w| w[0].seq < w[1].seq));
    let again = store
        .append_events(vec![event("3-7", &["s"])], 6, HOUR)
        .await
        .unwrap();
    assert!(
        matches!(again[0], Appended::Duplicate { .. }),
        "the dedupe index is durable too"
    );
}

#[tokio::test]
async fn deleting_a_subscription_drops_its_queue() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    store.insert_subscription(&subscription("s")).await.unwrap();
    store.insert_subscription(&subscription("t")).await.unwrap();
    store
        .append_events(vec![event("1", &["s", "t"])], 0, HOUR)
        .await
        .unwrap();
    store.delete_subscription("s").await.unwrap();
    assert_eq!(store.pending_deliveries("s", 10).await.unwrap(), vec![]);
    assert_eq!(store.pending_deliveries("t", 10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_sweep_removes_only_finished_events_past_retention() {
    let dir = tempfile::tempdir().unwrap();
    // One event per segment, so that retention can remove single events.
    let store = store_with(dir.path(), &["s"], SledOptions { segment_bytes: 1 }).await;
    let unmatched = store
        .append_events(vec![event("1", &[])], 0, HOUR)
        .await
        .unwrap();
    let pending = store
        .append_events(vec![event("2", &["s"])], 0, HOUR)
        .await
        .unwrap();
    let recent = store
        .append_events(vec![event("3", &[])], 2 * HOUR, HOUR)
        .await
        .unwrap();
    let seq = |a: &[Appended]| match a[0] {
        Appended::Accepted { seq } => seq,
        Appended::Duplicate { .. } => panic!(),
    };
    let swept = store.sweep(2 * HOUR + 1, HOUR, HOUR).await.unwrap();
    assert_eq!(
        swept,
        Swept {
            events: 1,
            dedupe_entries: 2
        }
    );
    assert_eq!(store.event(seq(&unmatched)).await.unwrap(), None);
    assert!(
        store.event(seq(&pending)).await.unwrap().is_some(),
        "a pending delivery keeps it"
    );
    assert!(store.event(seq(&recent)).await.unwrap().is_some());
}

/// Group commit: every writer returns only after a flush that began after its write, and
/// concurrent writers share flushes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_covers_every_write_with_fewer_flushes() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    let commit = Arc::new(GroupCommit::default());
    // `applied` counts writes that happened; a flush makes everything applied so far durable.
    let applied = Arc::new(AtomicU64::new(0));
    let durable = Arc::new(AtomicU64::new(0));
    let flushes = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..64)
        .map(|_| {
            let (commit, applied, durable, flushes) = (
                commit.clone(),
                applied.clone(),
                durable.clone(),
                flushes.clone(),
            );
            tokio::spawn(async move {
                for _ in 0..20 {
                    let mine = applied.fetch_add(1, AtomicOrdering::SeqCst) + 1;
                    commit
                        .commit(|| async {
                            let upto = applied.load(AtomicOrdering::SeqCst);
                            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                            durable.fetch_max(upto, AtomicOrdering::SeqCst);
                            flushes.fetch_add(1, AtomicOrdering::SeqCst);
                            Ok(())
                        })
                        .await
                        .unwrap();
                    assert!(
                        durable.load(AtomicOrdering::SeqCst) >= mine,
                        "a write was acknowledged before a flush covered it"
                    );
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let flushes = flushes.load(AtomicOrdering::SeqCst);
    assert!(
        flushes < 1280 / 4,
        "{flushes} flushes for 1280 writes: not grouped"
    );
}

/// Duplicate detection lives in memory and is rebuilt from the event log when the store
/// opens.
#[tokio::test]
async fn duplicate_detection_is_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = store_with(dir.path(), &["s"], SledOptions::default()).await;
        store
            .append_events(vec![event("1", &["s"]), event("2", &["s"])], 0, HOUR)
            .await
            .unwrap();
    }
    let store = SledStore::open(dir.path()).unwrap();
    let again = store
        .append_events(vec![event("2", &["s"]), event("3", &["s"])], 1, HOUR)
        .await
        .unwrap();
    assert!(matches!(again[0], Appended::Duplicate { .. }));
    assert!(matches!(again[1], Appended::Accepted { .. }));
    assert_eq!(store.pending_deliveries("s", 10).await.unwrap().len(), 3);
}

/// A segment stays while duplicate detection still needs it, even past the retention.
#[tokio::test]
async fn segments_outlive_retention_while_the_duplicate_window_needs_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &["s"], SledOptions { segment_bytes: 1 }).await;
    store
        .append_events(vec![event("1", &[])], 0, 10 * HOUR)
        .await
        .unwrap();
    store
        .append_events(vec![event("2", &[])], 0, 10 * HOUR)
        .await
        .unwrap();
    let swept = store.sweep(2 * HOUR, HOUR, 10 * HOUR).await.unwrap();
    assert_eq!(
        swept.events, 0,
        "the duplicate window is longer than the retention"
    );
    let again = store
        .append_events(vec![event("1", &[])], 2 * HOUR, 10 * HOUR)
        .await
        .unwrap();
    assert!(matches!(again[0], Appended::Duplicate { .. }));
    let swept = store.sweep(11 * HOUR, HOUR, 10 * HOUR).await.unwrap();
    assert_eq!(
        swept.events, 1,
        "the closed segment goes once both have passed"
    );
}

fn attempt(subscription: &str, seq: u64, at: u64, verdict: Verdict) -> DeliveryChange {
    DeliveryChange::Attempted(knooppunt_store::Attempt {
        subscription: subscription.into(),
        seq,
        at,
        status: Some(503),
        error: Some("the sink answered 503".into()),
        verdict,
    })
}

/// Leases, attempt results, dead letters and redelivery, and that all of it survives
/// reopening (the retry state lives in the log).
#[tokio::test]
async fn delivery_state_is_leased_recorded_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &["o", "u"], SledOptions::default()).await;
    let events = vec![
        event("1", &["o", "u"]),
        event("2", &["o", "u"]),
        event("3", &["u"]),
    ];
    store.append_events(events, 100, HOUR).await.unwrap();

    // Ordered: only the oldest, and nothing while it is leased.
    let leased = store.lease("o", 100, 1000, 10, true).await.unwrap();
    assert_eq!(leased.iter().map(|d| d.seq).collect::<Vec<_>>(), [1]);
    assert!(
        store
            .lease("o", 200, 1000, 10, true)
            .await
            .unwrap()
            .is_empty()
    );
    // Unordered: everything due that is not leased, up to the limit.
    let leased = store.lease("u", 100, 1000, 2, false).await.unwrap();
    assert_eq!(leased.iter().map(|d| d.seq).collect::<Vec<_>>(), [1, 2]);
    let leased = store.lease("u", 100, 1000, 10, false).await.unwrap();
    assert_eq!(leased.iter().map(|d| d.seq).collect::<Vec<_>>(), [3]);
    // A lease that runs out frees the delivery.
    assert_eq!(
        store.lease("u", 1100, 1000, 1, false).await.unwrap()[0].seq,
        1
    );

    store
        .record(vec![
            attempt(
                "o",
                1,
                150,
                Verdict::Retry {
                    next_attempt_at: 5000,
                },
            ),
            attempt("u", 1, 150, Verdict::Delivered),
            attempt(
                "u",
                2,
                150,
                Verdict::DeadLetter {
                    reason: "HTTP 400".into(),
                },
            ),
        ])
        .await
        .unwrap();
    assert!(
        store
            .lease("o", 4999, 1000, 1, true)
            .await
            .unwrap()
            .is_empty(),
        "not due"
    );
    assert_eq!(store.next_due("o", true).await.unwrap(), Some(5000));

    let check = |store: SledStore| async move {
        let pending = store.pending_deliveries("o", 10).await.unwrap();
        assert_eq!(pending.len(), 2);
        assert_eq!(
            (
                pending[0].attempts,
                pending[0].next_attempt_at,
                pending[0].last_status
            ),
            (1, 5000, Some(503))
        );
        assert_eq!(pending[0].first_attempt_at, Some(150));
        let u: Vec<u64> = store
            .pending_deliveries("u", 10)
            .await
            .unwrap()
            .iter()
            .map(|d| d.seq)
            .collect();
        assert_eq!(
            u,
            [3],
            "delivered and dead-lettered deliveries left the queue"
        );
        let dead = store.dead_letters("u", None, 10).await.unwrap();
        assert_eq!(dead.len(), 1);
        assert_eq!((dead[0].seq, dead[0].attempts), (2, 1));
        assert_eq!(dead[0].reason, "HTTP 400");
        assert_eq!(
            store.dead_letter("u", 2).await.unwrap(),
            Some(dead[0].clone())
        );
        store
    };
    let store = check(store).await;
    drop(store);
    let store = check(SledStore::open(dir.path()).unwrap()).await;

    // Redeliver: back in the queue with fresh attempts; delete: gone.
    store
        .record(vec![DeliveryChange::Redeliver {
            subscription: "u".into(),
            seq: 2,
            at: 9000,
        }])
        .await
        .unwrap();
    assert!(store.dead_letters("u", None, 10).await.unwrap().is_empty());
    let again = store.pending_deliveries("u", 10).await.unwrap();
    assert_eq!(
        again
            .iter()
            .map(|d| (d.seq, d.attempts))
            .collect::<Vec<_>>(),
        [(2, 0), (3, 0)]
    );

    // Retire: every pending delivery becomes a dead letter.
    store
        .record(vec![DeliveryChange::Retire {
            subscription: "o".into(),
            at: 9500,
            reason: "the sink answered 410 Gone".into(),
        }])
        .await
        .unwrap();
    assert!(store.pending_deliveries("o", 10).await.unwrap().is_empty());
    let dead = store.dead_letters("o", Some(1), 10).await.unwrap();
    assert_eq!(
        dead.iter().map(|d| d.seq).collect::<Vec<_>>(),
        [2],
        "paged after seq 1"
    );
    store
        .record(vec![DeliveryChange::DeleteDeadLetter {
            subscription: "o".into(),
            seq: 1,
        }])
        .await
        .unwrap();
    drop(store);
    let store = SledStore::open(dir.path()).unwrap();
    let dead: Vec<u64> = store
        .dead_letters("o", None, 10)
        .await
        .unwrap()
        .iter()
        .map(|d| d.seq)
        .collect();
    assert_eq!(dead, [2]);
    assert_eq!(store.pending_deliveries("u", 10).await.unwrap().len(), 2);
}

/// A directory in use is refused with a message that says so (after a short wait for a store
/// that is just closing); once it is closed, it opens.
#[tokio::test]
async fn a_directory_in_use_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let first = SledStore::open(dir.path()).unwrap();
    let error = SledStore::open(dir.path()).unwrap_err().to_string();
    assert!(error.contains("in use by another process"), "{error}");
    drop(first);
    SledStore::open(dir.path()).unwrap();
}

/// Unordered leasing takes the earliest available deliveries, skipping those waiting for a
/// retry, and `next_due` is the earliest retry once nothing else is available.
#[tokio::test]
async fn unordered_leases_skip_deliveries_waiting_for_a_retry() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &["u"], SledOptions::default()).await;
    let events = (1..=6).map(|n| event(&n.to_string(), &["u"])).collect();
    store.append_events(events, 100, HOUR).await.unwrap();
    let all = store.lease("u", 100, 1000, 10, false).await.unwrap();
    assert_eq!(all.len(), 6);
    // Events 1, 2 and 3 failed and wait until 900, 700 and 800; 4 was delivered; 5 and 6
    // are still leased until 1100.
    store
        .record(vec![
            attempt(
                "u",
                1,
                150,
                Verdict::Retry {
                    next_attempt_at: 900,
                },
            ),
            attempt(
                "u",
                2,
                150,
                Verdict::Retry {
                    next_attempt_at: 700,
                },
            ),
            attempt(
                "u",
                3,
                150,
                Verdict::Retry {
                    next_attempt_at: 800,
                },
            ),
            attempt("u", 4, 150, Verdict::Delivered),
        ])
        .await
        .unwrap();
    assert!(
        store
            .lease("u", 600, 1000, 10, false)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.next_due("u", false).await.unwrap(), Some(700));
    let seqs = |d: Vec<Delivery>| d.iter().map(|d| d.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(store.lease("u", 850, 1000, 10, false).await.unwrap()),
        [2, 3]
    );
    assert_eq!(store.next_due("u", false).await.unwrap(), Some(900));
    assert_eq!(
        seqs(store.lease("u", 1100, 1000, 2, false).await.unwrap()),
        [1, 5]
    );
    assert_eq!(
        seqs(store.lease("u", 1100, 1000, 10, false).await.unwrap()),
        [6]
    );
}

/// Duplicate detection forgets identities once the window has passed, however many (the
/// sweep works through them in chunks), and the same ids are then accepted as new events.
#[tokio::test]
async fn the_sweep_forgets_every_expired_identity() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with(dir.path(), &["s"], SledOptions::default()).await;
    let many = 2 * super::committer::FORGET_CHUNK + 3;
    let events = (0..many).map(|n| event(&n.to_string(), &[])).collect();
    store.append_events(events, 0, HOUR).await.unwrap();
    let later = store
        .append_events(vec![event("later", &[])], HOUR / 2, HOUR)
        .await
        .unwrap();
    assert!(matches!(later[0], Appended::Accepted { .. }));

    let swept = store.sweep(HOUR, 2 * HOUR, HOUR).await.unwrap();
    assert_eq!(swept.dedupe_entries, many as u64);
    let again = store
        .append_events(
            vec![
                event("0", &[]),
                event(&(many - 1).to_string(), &[]),
                event("later", &[]),
            ],
            HOUR,
            HOUR,
        )
        .await
        .unwrap();
    assert!(matches!(again[0], Appended::Accepted { .. }));
    assert!(matches!(again[1], Appended::Accepted { .. }));
    assert!(
        matches!(again[2], Appended::Duplicate { .. }),
        "an identity within the window is still known"
    );
    assert_eq!(
        store
            .sweep(HOUR, 2 * HOUR, HOUR)
            .await
            .unwrap()
            .dedupe_entries,
        0
    );
}
