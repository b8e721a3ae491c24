//! [`knooppunt_store::EventLog`]: events appended once, read in order, receipts, the sweep.

use super::*;

/// [`knooppunt_store::EventLog`]: events appended once, read in order, receipts, the sweep.
pub async fn event_log(backend: &mut impl Backend) {
    events_are_appended_with_their_deliveries(backend).await;
    duplicates_are_reported_not_stored(backend).await;
    events_are_read_in_order_after_a_position(backend).await;
    receipts_say_who_received_what(backend).await;
    the_sweep_removes_only_finished_events(backend).await;
}

async fn events_are_appended_with_their_deliveries(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["s1", "s2"]).await;
    let appended = store
        .append_events(
            vec![
                event("1", &["s1", "s2"]),
                event("2", &["s1"]),
                event("3", &[]),
                NewEvent {
                    extension_types: Some(TYPES.into()),
                    ..event("4", &["s2"])
                },
            ],
            1000,
            HOUR,
        )
        .await
        .unwrap();
    let numbers = seqs(&appended);
    assert!(
        numbers.windows(2).all(|w| w[0] < w[1]),
        "acceptance order: {numbers:?}"
    );
    let store = backend.reopen(store).await;
    let pending = |id: &'static str| {
        let store = Arc::clone(&store);
        async move {
            store
                .pending_deliveries(id, 10)
                .await
                .unwrap()
                .iter()
                .map(|d| d.seq)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(pending("s1").await, numbers[..2]);
    assert_eq!(pending("s2").await, [numbers[0], numbers[3]]);
    let stored = store.event(numbers[0]).await.unwrap().unwrap();
    assert_eq!((stored.id.as_str(), stored.accepted_at), ("1", 1000));
    assert_eq!(
        stored.json,
        event("1", &[]).json,
        "the JSON exactly as given"
    );
    assert_eq!(stored.extension_types, None);
    let typed = store.event(numbers[3]).await.unwrap().unwrap();
    assert_eq!(
        typed.extension_types.as_deref(),
        Some(TYPES),
        "extension types kept beside the JSON"
    );
    assert!(
        store.event(numbers[2]).await.unwrap().is_some(),
        "unrouted events are kept"
    );
}

async fn duplicates_are_reported_not_stored(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["s"]).await;
    let first = seqs(
        &store
            .append_events(vec![event("1", &["s"])], 0, HOUR)
            .await
            .unwrap(),
    );
    let again = store
        .append_events(
            vec![event("1", &["s"]), event("2", &["s"]), event("2", &["s"])],
            10,
            HOUR,
        )
        .await
        .unwrap();
    assert_eq!(again[0], Appended::Duplicate { seq: first[0] });
    let Appended::Accepted { seq: second } = again[1] else {
        panic!("a new event: {again:?}");
    };
    assert_eq!(
        again[2],
        Appended::Duplicate { seq: second },
        "within one call"
    );
    let store = backend.reopen(store).await;
    let later = store
        .append_events(vec![event("1", &["s"])], 20, HOUR)
        .await
        .unwrap();
    assert_eq!(
        later[0],
        Appended::Duplicate { seq: first[0] },
        "after a reopen"
    );
    let pending = store.pending_deliveries("s", 10).await.unwrap();
    assert_eq!(pending.len(), 2, "each event delivered once");
    let outside = store
        .append_events(vec![event("1", &["s"])], HOUR + 1, HOUR)
        .await
        .unwrap();
    assert!(
        matches!(outside[0], Appended::Accepted { .. }),
        "past the window: new"
    );
}

/// A delivered attempt leaves a receipt, found by event and by subscription, kept across a
/// reopen; a retry or a dead letter leaves none; the receipt sweep removes old ones.
async fn receipts_say_who_received_what(backend: &mut impl Backend) {
    use knooppunt_store::Receipt;
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["r-s", "r-t"]).await;
    let events = (1..=3)
        .map(|n| event(&format!("r{n}"), &["r-s", "r-t"]))
        .collect();
    let n = seqs(&store.append_events(events, 100, HOUR).await.unwrap());
    let s1 = lease_one(store.as_ref(), "r-s", n[0], 200).await;
    store
        .record(vec![attempt(&s1, 500, Verdict::Delivered)])
        .await
        .unwrap();
    let t1 = lease_one(store.as_ref(), "r-t", n[0], 200).await;
    store
        .record(vec![attempt(&t1, 600, Verdict::Delivered)])
        .await
        .unwrap();
    let s2 = lease_one(store.as_ref(), "r-s", n[1], 200).await;
    store
        .record(vec![attempt(&s2, 700, Verdict::Delivered)])
        .await
        .unwrap();
    let s3 = lease_one(store.as_ref(), "r-s", n[2], 200).await;
    let retry = Verdict::Retry {
        next_attempt_at: 900,
    };
    store.record(vec![attempt(&s3, 800, retry)]).await.unwrap();
    let receipt = |seq, subscription: &str, at| Receipt {
        seq,
        subscription: subscription.into(),
        delivered_at: at,
    };
    let store = backend.reopen(store).await;
    assert_eq!(
        store.receipts_of_event(n[0]).await.unwrap(),
        [receipt(n[0], "r-s", 500), receipt(n[0], "r-t", 600)],
        "who received the first event, kept across a reopen"
    );
    assert!(
        store.receipts_of_event(n[2]).await.unwrap().is_empty(),
        "a retry is no receipt"
    );
    let (all, _) = store
        .receipts_of_subscription("r-s", None, 10)
        .await
        .unwrap();
    assert_eq!(
        all,
        [receipt(n[0], "r-s", 500), receipt(n[1], "r-s", 700)],
        "what a subscription received, in delivery order"
    );
    let (first, cursor) = store
        .receipts_of_subscription("r-s", None, 1)
        .await
        .unwrap();
    assert_eq!(first, [receipt(n[0], "r-s", 500)]);
    let cursor = cursor.expect("a cursor when the page is full");
    let (second, _) = store
        .receipts_of_subscription("r-s", Some(&cursor), 10)
        .await
        .unwrap();
    assert_eq!(second, [receipt(n[1], "r-s", 700)], "the next page");
    assert!(
        store
            .receipts_of_subscription("r-", None, 10)
            .await
            .unwrap()
            .0
            .is_empty(),
        "a subscription id is not a prefix of another's"
    );
    assert_eq!(
        store.sweep_receipts(400).await.unwrap(),
        0,
        "none is that old"
    );
    assert_eq!(store.receipts_of_event(n[0]).await.unwrap().len(), 2);
    assert!(store.sweep_receipts(u64::MAX).await.unwrap() >= 2);
    assert!(store.receipts_of_event(n[0]).await.unwrap().is_empty());
    assert!(
        store
            .receipts_of_subscription("r-s", None, 10)
            .await
            .unwrap()
            .0
            .is_empty()
    );
}

async fn the_sweep_removes_only_finished_events(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["s"]).await;
    let n = seqs(
        &store
            .append_events(
                vec![event("done", &["s"]), event("waiting", &["s"])],
                0,
                HOUR,
            )
            .await
            .unwrap(),
    );
    let done = lease_one(store.as_ref(), "s", n[0], 5).await;
    store
        .record(vec![attempt(&done, 10, Verdict::Delivered)])
        .await
        .unwrap();
    store.sweep(10 * HOUR, HOUR, HOUR).await.unwrap();
    // Read from what the store keeps, not from a cache of what it just appended.
    let store = backend.reopen(store).await;
    assert!(
        store.event(n[1]).await.unwrap().is_some(),
        "a pending delivery keeps its event"
    );
    assert_eq!(
        store.pending_deliveries("s", 10).await.unwrap()[0].seq,
        n[1]
    );
}

async fn events_are_read_in_order_after_a_position(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["r"]).await;
    let mut n = Vec::new();
    for (i, at) in [1_000u64, 2_000, 3_000, 400_000, 500_000]
        .into_iter()
        .enumerate()
    {
        let appended = store
            .append_events(vec![event(&format!("r{i}"), &["r"])], at, HOUR)
            .await
            .unwrap();
        n.extend(seqs(&appended));
    }
    let read = |events: Vec<Arc<knooppunt_store::StoredEvent>>| {
        events.iter().map(|e| e.seq).collect::<Vec<_>>()
    };
    assert_eq!(read(store.events_after(0, 3).await.unwrap()), n[..3]);
    assert_eq!(read(store.events_after(n[1], 10).await.unwrap()), n[2..]);
    assert_eq!(
        store.events_after(n[4], 10).await.unwrap(),
        Vec::<Arc<knooppunt_store::StoredEvent>>::new()
    );
    let first = store.events_after(0, 1).await.unwrap();
    assert_eq!(first[0].id, "r0");
    assert_eq!(first[0].accepted_at, 1_000);
    // A time finds a place at or before its first event (a minute of slack at most).
    let place = store.seq_before(400_000).await.unwrap();
    assert!(place < n[3] && place >= n[2].min(n[0]), "{place} in {n:?}");
    assert!(store.seq_before(0).await.unwrap() < n[0]);
    assert_eq!(store.swept_through().await.unwrap(), 0, "nothing swept yet");
    let usage = store.disk_usage().await.unwrap();
    assert!(
        usage.event_bytes > 0 && usage.total_bytes >= usage.event_bytes,
        "{usage:?}"
    );
    // Delivered and past retention: the sweep may remove them, and says how far it did.
    for seq in &n {
        let leased = lease_one(store.as_ref(), "r", *seq, 600_000).await;
        store
            .record(vec![attempt(&leased, 600_000, Verdict::Delivered)])
            .await
            .unwrap();
    }
    store.sweep(10 * HOUR, 1, 1).await.unwrap();
    let through = store.swept_through().await.unwrap();
    let left = read(store.events_after(0, 10).await.unwrap());
    for seq in &n {
        assert!(
            left.contains(seq) != (*seq <= through),
            "event {seq}: kept {left:?}, swept through {through}"
        );
    }
    let reopened = backend.reopen(store).await;
    assert_eq!(reopened.swept_through().await.unwrap(), through);
}
