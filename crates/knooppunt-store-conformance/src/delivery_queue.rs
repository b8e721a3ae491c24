//! [`knooppunt_store::DeliveryQueue`]: leases, results, dead letters, withdrawals.

use super::*;

/// [`knooppunt_store::DeliveryQueue`]: leases, results, dead letters, withdrawals.
pub async fn delivery_queue(backend: &mut impl Backend) {
    leases_follow_the_ordering(backend).await;
    an_ordered_lease_is_the_oldest_in_a_row(backend).await;
    results_are_recorded_and_survive_a_reopen(backend).await;
    push_results_count_as_recorded(backend).await;
    stale_lease_tokens_are_refused(backend).await;
    leases_are_renewed_only_by_their_holder(backend).await;
    unused_leases_are_given_back(backend).await;
    leases_held_are_counted(backend).await;
    consumer_leases_count_across_a_reopen(backend).await;
    backlogs_are_measured_in_bytes(backend).await;
    unordered_leases_skip_deliveries_waiting_for_a_retry(backend).await;
    dead_letters_are_redelivered_deleted_and_retired(backend).await;
    dead_letters_past_retention_are_swept(backend).await;
    chosen_deliveries_are_withdrawn(backend).await;
}

async fn leases_follow_the_ordering(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["o", "u"]).await;
    let n = seqs(
        &store
            .append_events(
                vec![
                    event("1", &["o", "u"]),
                    event("2", &["o", "u"]),
                    event("3", &["u"]),
                ],
                100,
                HOUR,
            )
            .await
            .unwrap(),
    );
    let leased = |d: Vec<knooppunt_store::Delivery>| d.iter().map(|d| d.seq).collect::<Vec<_>>();
    let window = leased(store.lease("o", 100, 1000, 10, true).await.unwrap());
    assert!(
        !window.is_empty() && n[..2].starts_with(&window),
        "the oldest first, then those after it in a row: {window:?} of {n:?}"
    );
    assert!(
        store
            .lease("o", 200, 1000, 10, true)
            .await
            .unwrap()
            .is_empty(),
        "nothing while the oldest is leased"
    );
    assert_eq!(
        leased(store.lease("u", 100, 1000, 2, false).await.unwrap()),
        [n[0], n[1]]
    );
    assert_eq!(
        leased(store.lease("u", 100, 1000, 10, false).await.unwrap()),
        [n[2]]
    );
    assert_eq!(
        leased(store.lease("u", 1100, 1000, 1, false).await.unwrap()),
        [n[0]],
        "a lease that runs out frees the delivery"
    );
    // An unordered queue skips a delivery that waits for its retry.
    let second = store
        .lease("u", 2200, 1000, 10, false)
        .await
        .unwrap()
        .into_iter()
        .find(|d| d.seq == n[1])
        .expect("due again");
    store
        .record(vec![attempt(
            &second,
            2250,
            Verdict::Retry {
                next_attempt_at: 9000,
            },
        )])
        .await
        .unwrap();
    let due = leased(store.lease("u", 3200, 1000, 10, false).await.unwrap());
    assert!(!due.contains(&n[1]), "{due:?}");
    assert_eq!(
        store.next_due("u", false).await.unwrap(),
        Some(4200),
        "the others' leases run out before the retry is due"
    );
}

/// An ordered lease takes the oldest delivery and may take those after it in a row (a
/// backend leases as many as it can at once; at least the oldest): each available, none
/// after one that is not, and nothing while the oldest is leased or waits for its retry.
async fn an_ordered_lease_is_the_oldest_in_a_row(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["w"]).await;
    let events = (1..=5).map(|i| event(&format!("w{i}"), &["w"])).collect();
    let n = seqs(&store.append_events(events, 100, HOUR).await.unwrap());
    let numbers = |d: &[knooppunt_store::Delivery]| d.iter().map(|d| d.seq).collect::<Vec<_>>();
    let in_a_row_from = |window: &[knooppunt_store::Delivery], first: usize| {
        let got = numbers(window);
        assert!(
            !got.is_empty() && n[first..].starts_with(&got),
            "a window from the {first}th: {got:?} of {n:?}"
        );
    };
    let window = store.lease("w", 200, 10_000, 3, true).await.unwrap();
    in_a_row_from(&window, 0);
    assert!(window.len() <= 3, "at most the limit");
    assert!(
        store
            .lease("w", 300, 10_000, 10, true)
            .await
            .unwrap()
            .is_empty(),
        "nothing while the oldest is leased"
    );
    // The oldest delivered, the rest given back: the next window starts after it.
    store
        .record(vec![attempt(&window[0], 400, Verdict::Delivered)])
        .await
        .unwrap();
    let rest: Vec<(u64, u64)> = window[1..].iter().map(|d| (d.seq, d.lease)).collect();
    store.release("w", &rest).await.unwrap();
    let window = store.lease("w", 500, 10_000, 10, true).await.unwrap();
    in_a_row_from(&window, 1);
    // The oldest waits for its retry: nothing, though the ones after it are due.
    store
        .record(vec![attempt(
            &window[0],
            600,
            Verdict::Retry {
                next_attempt_at: 5000,
            },
        )])
        .await
        .unwrap();
    let rest: Vec<(u64, u64)> = window[1..].iter().map(|d| (d.seq, d.lease)).collect();
    store.release("w", &rest).await.unwrap();
    assert!(
        store
            .lease("w", 700, 10_000, 10, true)
            .await
            .unwrap()
            .is_empty()
    );
    in_a_row_from(&store.lease("w", 5000, 10_000, 10, true).await.unwrap(), 1);

    // A queue that was unordered may hold a retry behind available deliveries: an ordered
    // window stops before it.
    with_subscriptions(store.as_ref(), &["v"]).await;
    let events = (1..=4).map(|i| event(&format!("v{i}"), &["v"])).collect();
    let v = seqs(&store.append_events(events, 100, HOUR).await.unwrap());
    let all = store.lease("v", 200, 10_000, 4, false).await.unwrap();
    assert_eq!(numbers(&all), v);
    store
        .record(vec![attempt(
            &all[2],
            300,
            Verdict::Retry {
                next_attempt_at: 9000,
            },
        )])
        .await
        .unwrap();
    let others: Vec<(u64, u64)> = [0, 1, 3]
        .iter()
        .map(|&i| (all[i].seq, all[i].lease))
        .collect();
    store.release("v", &others).await.unwrap();
    let window = numbers(&store.lease("v", 400, 10_000, 10, true).await.unwrap());
    assert!(
        !window.is_empty() && v[..2].starts_with(&window),
        "stops before the delivery waiting for its retry: {window:?} of {v:?}"
    );
}

async fn results_are_recorded_and_survive_a_reopen(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["o"]).await;
    let n = seqs(
        &store
            .append_events(vec![event("1", &["o"]), event("2", &["o"])], 100, HOUR)
            .await
            .unwrap(),
    );
    let first = store.lease("o", 100, 1000, 1, true).await.unwrap();
    store
        .record(vec![attempt(
            &first[0],
            150,
            Verdict::Retry {
                next_attempt_at: 5000,
            },
        )])
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
    let store = backend.reopen(store).await;
    let pending = store.pending_deliveries("o", 10).await.unwrap();
    assert_eq!(
        (
            pending[0].seq,
            pending[0].attempts,
            pending[0].next_attempt_at,
            pending[0].last_status
        ),
        (n[0], 1, 5000, Some(503)),
        "the retry state is durable"
    );
    let leased = store.lease("o", 5000, 1000, 1, true).await.unwrap();
    assert_eq!(leased[0].seq, n[0], "still the oldest first");
    store
        .record(vec![attempt(&leased[0], 5001, Verdict::Delivered)])
        .await
        .unwrap();
    let pending = store.pending_deliveries("o", 10).await.unwrap();
    assert_eq!(pending.iter().map(|d| d.seq).collect::<Vec<_>>(), [n[1]]);
}

/// Push results recorded with `record_results` (which may wait for the store's next sync)
/// count as with `record`: applied at once, refused under a stale lease, and kept over a
/// reopen (closing a store puts what it wrote on disk).
async fn push_results_count_as_recorded(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["p"]).await;
    let n = seqs(
        &store
            .append_events(vec![event("1", &["p"]), event("2", &["p"])], 100, HOUR)
            .await
            .unwrap(),
    );
    let first = lease_one(store.as_ref(), "p", n[0], 100).await;
    let second = lease_one(store.as_ref(), "p", n[1], 100).await;
    let mut stale = second.clone();
    stale.lease += 999;
    let refused = store
        .record_results(vec![attempt(&stale, 140, Verdict::Delivered)])
        .await;
    assert!(
        matches!(refused, Err(StoreError::StaleLease { .. })),
        "{refused:?}"
    );
    store
        .record_results(vec![attempt(&first, 150, Verdict::Delivered)])
        .await
        .unwrap();
    let retry = Verdict::Retry {
        next_attempt_at: 5000,
    };
    store
        .record_results(vec![attempt(&second, 160, retry)])
        .await
        .unwrap();
    let state = |pending: Vec<Delivery>| {
        pending
            .iter()
            .map(|d| (d.seq, d.attempts, d.next_attempt_at))
            .collect::<Vec<_>>()
    };
    let pending = store.pending_deliveries("p", 10).await.unwrap();
    assert_eq!(state(pending), [(n[1], 1, 5000)], "applied at once");
    let store = backend.reopen(store).await;
    let pending = store.pending_deliveries("p", 10).await.unwrap();
    assert_eq!(state(pending), [(n[1], 1, 5000)], "kept over a reopen");
}

async fn dead_letters_are_redelivered_deleted_and_retired(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["s"]).await;
    let n = seqs(
        &store
            .append_events(
                vec![event("1", &["s"]), event("2", &["s"]), event("3", &["s"])],
                100,
                HOUR,
            )
            .await
            .unwrap(),
    );
    let dead = Verdict::DeadLetter {
        reason: "HTTP 400".into(),
    };
    let first = lease_one(store.as_ref(), "s", n[0], 100).await;
    let second = lease_one(store.as_ref(), "s", n[1], 100).await;
    store
        .record(vec![attempt(&first, 150, dead.clone())])
        .await
        .unwrap();
    store
        .record(vec![attempt(&second, 160, dead)])
        .await
        .unwrap();
    let store = backend.reopen(store).await;
    let letters = store.dead_letters("s", None, 10).await.unwrap();
    assert_eq!(
        letters.iter().map(|d| d.seq).collect::<Vec<_>>(),
        [n[0], n[1]]
    );
    assert_eq!(letters[0].reason, "HTTP 400");
    assert_eq!(
        store.dead_letters("s", Some(n[0]), 10).await.unwrap().len(),
        1,
        "after a cursor"
    );
    assert_eq!(
        store
            .dead_letter("s", n[1])
            .await
            .unwrap()
            .unwrap()
            .attempts,
        1
    );

    store
        .record(vec![DeliveryChange::Redeliver {
            subscription: "s".into(),
            seq: n[0],
            at: 200,
        }])
        .await
        .unwrap();
    let pending = store.pending_deliveries("s", 10).await.unwrap();
    assert_eq!(pending[0].seq, n[0]);
    assert_eq!(pending[0].attempts, 0, "fresh attempts");
    store
        .record(vec![DeliveryChange::DeleteDeadLetter {
            subscription: "s".into(),
            seq: n[1],
        }])
        .await
        .unwrap();
    assert!(store.dead_letter("s", n[1]).await.unwrap().is_none());

    store
        .record(vec![DeliveryChange::Retire {
            subscription: "s".into(),
            at: 300,
            reason: "the sink answered 410 Gone".into(),
        }])
        .await
        .unwrap();
    let store = backend.reopen(store).await;
    assert!(store.pending_deliveries("s", 10).await.unwrap().is_empty());
    let letters = store.dead_letters("s", None, 10).await.unwrap();
    assert_eq!(
        letters.iter().map(|d| d.seq).collect::<Vec<_>>(),
        [n[0], n[2]]
    );
    assert!(letters.iter().all(|d| d.reason.contains("410")));
}

/// The dead-letter sweep removes the dead letters that died before a time, oldest first
/// and no more than asked, says how many each subscription lost, and keeps the rest and
/// every pending delivery; what it removed stays removed across a reopen.
async fn dead_letters_past_retention_are_swept(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["old", "young"]).await;
    let events = (0..6)
        .map(|n| event(&format!("d{n}"), &["old", "young"]))
        .collect();
    let n = seqs(&store.append_events(events, 100, HOUR).await.unwrap());
    // "old": three dead at 1000, 2000 and 3000; "young": two at 1500 and 9000. n[5] stays
    // pending for both.
    store
        .record(vec![
            withdraw("old", &n[2..3], 3000),
            withdraw("old", &n[0..1], 1000),
            withdraw("old", &n[1..2], 2000),
            withdraw("young", &n[0..1], 9000),
            withdraw("young", &n[3..4], 1500),
        ])
        .await
        .unwrap();
    assert_eq!(
        store.sweep_dead_letters(500, 10).await.unwrap(),
        [],
        "nothing died before 500"
    );
    assert_eq!(
        store.sweep_dead_letters(2500, 2).await.unwrap(),
        [("old".to_owned(), 1), ("young".to_owned(), 1)],
        "the two oldest of three that died before 2500"
    );
    let store = backend.reopen(store).await;
    let left = |letters: Vec<knooppunt_store::DeadLetter>| -> Vec<u64> {
        letters.iter().map(|d| d.seq).collect()
    };
    assert_eq!(
        left(store.dead_letters("old", None, 10).await.unwrap()),
        [n[1], n[2]]
    );
    assert_eq!(
        left(store.dead_letters("young", None, 10).await.unwrap()),
        [n[0]]
    );
    assert_eq!(
        store.sweep_dead_letters(5000, 10).await.unwrap(),
        [("old".to_owned(), 2)]
    );
    assert!(
        store
            .dead_letters("old", None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        left(store.dead_letters("young", None, 10).await.unwrap()),
        [n[0]],
        "one that died after the time stays"
    );
    for subscription in ["old", "young"] {
        assert!(
            store
                .pending_seqs(subscription, None, 10)
                .await
                .unwrap()
                .contains(&n[5]),
            "pending deliveries are not dead letters"
        );
    }
}

/// Withdrawing (an approval revoked) turns the chosen pending deliveries of one
/// subscription, leased ones too, into dead letters, page after page, and leaves the rest
/// (and other subscriptions) alone. An attempt that was under way still ends: if its sink
/// took the event, that dead letter becomes a delivery with a receipt (the event was
/// delivered: it is never both), through either way of recording a result; any other
/// result leaves it a dead letter.
async fn chosen_deliveries_are_withdrawn(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["w", "other"]).await;
    let events = (0..2500)
        .map(|n| event(&format!("w{n}"), &["w", "other"]))
        .collect();
    let n = seqs(&store.append_events(events, 100, HOUR).await.unwrap());
    let in_flight: Vec<Delivery> = store.lease("w", 200, 1000, 3, false).await.unwrap();
    assert_eq!(
        in_flight.iter().map(|d| d.seq).collect::<Vec<_>>(),
        n[..3],
        "three attempts under way"
    );
    let all = store.pending_seqs("w", None, 5000).await.unwrap();
    assert_eq!(all, n, "every pending delivery, in order");
    assert_eq!(
        store.pending_seqs("w", Some(n[9]), 3).await.unwrap(),
        n[10..13],
        "a page after a cursor"
    );
    // Every even event is chosen: 1250 of them, over three pages of the store's walk.
    let even: std::collections::HashSet<u64> = n.iter().step_by(2).copied().collect();
    let chosen = store
        .withdraw("w", &|e| even.contains(&e.seq), 300, "approval revoked")
        .await
        .unwrap();
    assert_eq!(chosen, 1250);
    // The sink took event 0 (recorded durably) and event 2 (recorded as push results
    // are); event 1 was not withdrawn and is delivered as ever.
    store
        .record(vec![attempt(&in_flight[0], 310, Verdict::Delivered)])
        .await
        .unwrap();
    store
        .record_results(vec![attempt(&in_flight[2], 320, Verdict::Delivered)])
        .await
        .unwrap();
    store
        .record_results(vec![attempt(&in_flight[1], 330, Verdict::Delivered)])
        .await
        .unwrap();
    // Another withdrawn attempt that failed stays a dead letter.
    let more = store.lease("w", 340, 1000, 2, false).await.unwrap();
    assert_eq!(
        more.iter().map(|d| d.seq).collect::<Vec<_>>(),
        [n[3], n[5]],
        "the withdrawn are not leased"
    );
    let failing = store.lease("other", 340, 1000, 5, false).await.unwrap();
    assert_eq!(failing[4].seq, n[4]);
    store
        .withdraw("other", &|e| e.seq == n[4], 350, "approval revoked")
        .await
        .unwrap();
    let retry = Verdict::Retry {
        next_attempt_at: 400,
    };
    store
        .record_results(vec![attempt(&failing[4], 360, retry)])
        .await
        .unwrap();
    let store = backend.reopen(store).await;
    let left = store.pending_seqs("w", None, 5000).await.unwrap();
    assert_eq!(
        left,
        n.iter().skip(3).step_by(2).copied().collect::<Vec<_>>()
    );
    let letters = store.dead_letters("w", None, 5000).await.unwrap();
    assert_eq!(letters.len(), 1248, "two of them were delivered");
    assert!(
        letters
            .iter()
            .all(|d| d.reason == "approval revoked" && d.dead_at == 300)
    );
    assert_eq!(letters[0].seq, n[4], "the leased ones too");
    for (seq, at) in [(n[0], 310), (n[1], 330), (n[2], 320)] {
        let receipts = store.receipts_of_event(seq).await.unwrap();
        assert_eq!(
            receipts
                .iter()
                .filter(|r| r.subscription == "w")
                .map(|r| r.delivered_at)
                .collect::<Vec<_>>(),
            [at],
            "a receipt of every delivery the sink took ({seq})"
        );
    }
    assert!(store.dead_letter("w", n[0]).await.unwrap().is_none());
    let failed = store.dead_letter("other", n[4]).await.unwrap();
    assert_eq!(
        failed.map(|d| d.reason),
        Some("approval revoked".to_owned()),
        "a failed attempt leaves its dead letter"
    );
    assert!(
        store
            .receipts_of_event(n[4])
            .await
            .unwrap()
            .iter()
            .all(|r| r.subscription != "other")
    );
    assert_eq!(
        store.pending_seqs("other", None, 5000).await.unwrap().len(),
        2499,
        "other subscriptions keep theirs"
    );
}

/// Leases held outside the hub (a pull consumer's locks, kept with
/// [`DeliveryChange::Leased`]) count across a reopen, as after a crash: their tokens are
/// never handed out again (a result or release under the old one is refused), and a lease
/// that ran out counts as an attempt when its delivery is leased again.
async fn consumer_leases_count_across_a_reopen(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["held"]).await;
    let n = seqs(
        &store
            .append_events(
                vec![event("1", &["held"]), event("2", &["held"])],
                100,
                HOUR,
            )
            .await
            .unwrap(),
    );
    let mut first = Vec::new();
    for seq in [n[0], n[1]] {
        first.push(lease_one(store.as_ref(), "held", seq, 100).await);
    }
    store
        .record(vec![DeliveryChange::Leased {
            subscription: "held".into(),
            leases: first
                .iter()
                .map(|d| (d.seq, d.lease, d.leased_until))
                .collect(),
        }])
        .await
        .unwrap();
    let store = backend.reopen(store).await;
    let again = lease_one(store.as_ref(), "held", n[0], 1200).await;
    assert_eq!(
        again.attempts, 1,
        "the lease that ran out counts after a reopen"
    );
    assert!(
        first.iter().all(|old| again.lease != old.lease),
        "a token is never handed out again: {} after {:?}",
        again.lease,
        first.iter().map(|d| d.lease).collect::<Vec<_>>()
    );
    let stale = store
        .record(vec![attempt(&first[0], 1250, Verdict::Delivered)])
        .await;
    assert!(
        matches!(&stale, Err(StoreError::StaleLease { seq, .. }) if *seq == n[0]),
        "the old holder's result is refused: {stale:?}"
    );
    assert_eq!(
        store
            .release("held", &[(first[0].seq, first[0].lease)])
            .await
            .unwrap(),
        0,
        "nor does its release free the new holder's lease"
    );
}

async fn stale_lease_tokens_are_refused(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["s"]).await;
    let n = seqs(
        &store
            .append_events(vec![event("1", &["s"]), event("2", &["s"])], 100, HOUR)
            .await
            .unwrap(),
    );
    let never_leased = Delivery::new("s".into(), n[1], 100);
    assert!(
        matches!(
            store.record(vec![attempt(&never_leased, 150, Verdict::Delivered)]).await,
            Err(StoreError::StaleLease { seq, .. }) if seq == n[1]
        ),
        "a delivery that is not leased takes no result"
    );
    let first = lease_one(store.as_ref(), "s", n[0], 100).await;
    let other = lease_one(store.as_ref(), "s", n[1], 100).await;
    // The first holder hangs; its lease runs out and another takes the delivery.
    let second = lease_one(store.as_ref(), "s", n[0], 1100).await;
    assert_ne!(first.lease, second.lease, "every lease has its own token");
    let refused = store
        .record(vec![
            attempt(&other, 1150, Verdict::Delivered),
            attempt(&first, 1150, Verdict::Delivered),
        ])
        .await;
    assert!(
        matches!(&refused, Err(StoreError::StaleLease { subscription, seq }) if subscription == "s" && *seq == n[0]),
        "the old holder's result is refused: {refused:?}"
    );
    assert_eq!(
        store.pending_deliveries("s", 10).await.unwrap().len(),
        2,
        "nothing of a refused call is recorded"
    );
    let retry = Verdict::Retry {
        next_attempt_at: 2000,
    };
    store
        .record(vec![attempt(&second, 1200, retry.clone())])
        .await
        .unwrap();
    assert!(
        matches!(
            store.record(vec![attempt(&second, 1201, retry)]).await,
            Err(StoreError::StaleLease { .. })
        ),
        "a token counts once"
    );
    let pending = store.pending_deliveries("s", 10).await.unwrap();
    assert_eq!(
        (pending[0].seq, pending[0].attempts),
        (n[0], 2),
        "the lease that ran out and the recorded attempt"
    );
    store
        .record(vec![attempt(&other, 1300, Verdict::Delivered)])
        .await
        .unwrap();
    // A delivery that became a dead letter meanwhile (its subscription's sink said it is
    // gone) and whose attempt the sink took after all is a delivery: no dead letter is left
    // of it (and its receipt is kept, `chosen_deliveries_are_withdrawn`).
    let last = lease_one(store.as_ref(), "s", n[0], 2000).await;
    store
        .record(vec![DeliveryChange::Retire {
            subscription: "s".into(),
            at: 2100,
            reason: "the sink answered 410 Gone".into(),
        }])
        .await
        .unwrap();
    store
        .record(vec![attempt(&last, 2200, Verdict::Delivered)])
        .await
        .unwrap();
    assert_eq!(store.dead_letters("s", None, 10).await.unwrap().len(), 0);
}

/// A lease can be extended by its holder while it holds it; not with another token, not
/// once another lease took the delivery, not once its result is recorded.
async fn leases_are_renewed_only_by_their_holder(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["p"]).await;
    let n = seqs(
        &store
            .append_events(vec![event("p1", &["p"]), event("p2", &["p"])], 100, HOUR)
            .await
            .unwrap(),
    );
    let held = lease_one(store.as_ref(), "p", n[0], 100).await;
    assert!(store.renew("p", n[0], held.lease, 5000).await.unwrap());
    assert!(
        !store
            .renew("p", n[0], held.lease + 999, 9000)
            .await
            .unwrap(),
        "another token"
    );
    assert!(
        !store.renew("p", n[1], held.lease, 9000).await.unwrap(),
        "another delivery"
    );
    assert!(
        !store.renew("q", n[0], held.lease, 9000).await.unwrap(),
        "another subscription"
    );
    // Past the original lease (1100) but within the renewed one, nobody else takes it.
    let taken = store.lease("p", 3000, 1000, 10, false).await.unwrap();
    assert_eq!(taken.iter().map(|d| d.seq).collect::<Vec<_>>(), [n[1]]);
    store
        .record(vec![attempt(&taken[0], 3100, Verdict::Delivered)])
        .await
        .unwrap();
    // Once the renewed lease ran out, another lease takes it, and the old token is spent.
    let again = store.lease("p", 6000, 1000, 10, false).await.unwrap();
    assert_eq!(again.iter().map(|d| d.seq).collect::<Vec<_>>(), [n[0]]);
    assert_eq!(
        (held.attempts, again[0].attempts),
        (0, 1),
        "a lease that ran out counts as an attempt"
    );
    assert!(
        !store.renew("p", n[0], held.lease, 9000).await.unwrap(),
        "taken over"
    );
    assert!(store.renew("p", n[0], again[0].lease, 9000).await.unwrap());
    store
        .record(vec![attempt(&again[0], 6100, Verdict::Delivered)])
        .await
        .unwrap();
    assert!(
        !store.renew("p", n[0], again[0].lease, 9999).await.unwrap(),
        "its result is recorded"
    );
}

async fn unused_leases_are_given_back(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["g", "o"]).await;
    let n = seqs(
        &store
            .append_events(
                vec![
                    event("g1", &["g", "o"]),
                    event("g2", &["g"]),
                    event("g3", &["g"]),
                ],
                100,
                HOUR,
            )
            .await
            .unwrap(),
    );
    let held = store.lease("g", 200, 10_000, 3, false).await.unwrap();
    assert_eq!(held.iter().map(|d| d.seq).collect::<Vec<_>>(), n);
    let other = lease_one(store.as_ref(), "o", n[0], 200).await;
    let given = store
        .release(
            "g",
            &[
                (n[0], held[0].lease),
                (n[1], held[1].lease + 999),
                (n[2], held[2].lease),
                (n[0], other.lease),
            ],
        )
        .await
        .unwrap();
    assert_eq!(given, 2, "only the leases that hold their deliveries");
    assert_eq!(store.release("g", &[]).await.unwrap(), 0);
    // Available at once, and no attempt is counted for a lease given back unused.
    let again = store.lease("g", 300, 10_000, 3, false).await.unwrap();
    assert_eq!(
        again
            .iter()
            .map(|d| (d.seq, d.attempts))
            .collect::<Vec<_>>(),
        [(n[0], 0), (n[2], 0)],
        "the delivery with another token stays leased"
    );
    assert!(
        !store.renew("g", n[0], held[0].lease, 99_000).await.unwrap(),
        "a token given back is spent"
    );
    // The other subscription's lease of the same event is untouched.
    assert!(store.renew("o", n[0], other.lease, 99_000).await.unwrap());
    // A lease whose result is recorded is not given back.
    store
        .record(vec![attempt(&again[0], 400, Verdict::Delivered)])
        .await
        .unwrap();
    assert_eq!(
        store.release("g", &[(n[0], again[0].lease)]).await.unwrap(),
        0
    );
    // An ordered subscription's oldest is leasable again once given back.
    assert_eq!(store.release("o", &[(n[0], other.lease)]).await.unwrap(), 1);
    let ordered = store.lease("o", 500, 10_000, 1, true).await.unwrap();
    assert_eq!(
        ordered
            .iter()
            .map(|d| (d.seq, d.attempts))
            .collect::<Vec<_>>(),
        [(n[0], 0)]
    );
}

async fn leases_held_are_counted(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["h"]).await;
    let now = knooppunt_store::now_ms();
    let events = (1..=3).map(|n| event(&format!("h{n}"), &["h"])).collect();
    store.append_events(events, now, HOUR).await.unwrap();
    let leased = store.lease("h", now, 60_000, 2, false).await.unwrap();
    assert_eq!(leased.len(), 2);
    let stats = store.queue_stats().await.unwrap();
    let h = stats
        .iter()
        .find(|s| s.subscription == "h")
        .expect("listed");
    assert_eq!((h.pending, h.leased), (3, 2), "{h:?}");
    assert_eq!(
        store.queue_stats_of("h").await.unwrap().as_ref(),
        Some(h),
        "one subscription's statistics are its entry of all"
    );
    assert_eq!(store.queue_stats_of("nobody").await.unwrap(), None);
    store
        .record(vec![attempt(&leased[0], now, Verdict::Delivered)])
        .await
        .unwrap();
    let stats = store.queue_stats().await.unwrap();
    let h = stats
        .iter()
        .find(|s| s.subscription == "h")
        .expect("listed");
    assert_eq!((h.pending, h.leased), (2, 1), "{h:?}");
    assert_eq!(store.queue_stats_of("h").await.unwrap().as_ref(), Some(h));
}

/// Each pending delivery counts its event's size (JSON and extension types) in its
/// subscription's backlog, until it is delivered, dead, withdrawn or retired; a retry or a
/// redelivered dead letter counts again, and the count survives a reopen.
async fn backlogs_are_measured_in_bytes(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["b1", "b2"]).await;
    let now = knooppunt_store::now_ms();
    let mut typed = event("typed", &["b1", "b2"]);
    typed.extension_types = Some(TYPES.into());
    let events = vec![event("plain-1", &["b1"]), typed, event("plain-2", &["b1"])];
    let sizes: Vec<u64> = events
        .iter()
        .map(|e| (e.json.len() + e.extension_types.as_ref().map_or(0, String::len)) as u64)
        .collect();
    let n = seqs(&store.append_events(events, now, HOUR).await.unwrap());
    let bytes_of = |store: Arc<dyn Inspect>, id: &'static str| async move {
        let all = store.queue_stats().await.unwrap();
        let one = store.queue_stats_of(id).await.unwrap().unwrap();
        let listed = all.iter().find(|s| s.subscription == id).unwrap();
        assert_eq!(
            listed.pending_bytes, one.pending_bytes,
            "{id}: both ways alike"
        );
        one.pending_bytes
    };
    assert_eq!(
        bytes_of(store.clone(), "b1").await,
        sizes.iter().sum::<u64>()
    );
    assert_eq!(
        bytes_of(store.clone(), "b2").await,
        sizes[1],
        "with its extension types"
    );

    // Delivered: gone from the backlog. Retried: still in it.
    let first = lease_one(store.as_ref(), "b1", n[0], now).await;
    store
        .record(vec![attempt(&first, now, Verdict::Delivered)])
        .await
        .unwrap();
    let second = lease_one(store.as_ref(), "b1", n[1], now).await;
    let retry = Verdict::Retry {
        next_attempt_at: now + 60_000,
    };
    store
        .record(vec![attempt(&second, now, retry)])
        .await
        .unwrap();
    assert_eq!(bytes_of(store.clone(), "b1").await, sizes[1] + sizes[2]);
    let store = backend.reopen(store).await;
    assert_eq!(
        bytes_of(store.clone(), "b1").await,
        sizes[1] + sizes[2],
        "rebuilt as it was"
    );

    // Withdrawn into a dead letter: out; redelivered: back in; retired: all out.
    store
        .record(vec![DeliveryChange::Withdraw {
            subscription: "b1".into(),
            seqs: vec![n[2]],
            at: now,
            reason: "shed".into(),
        }])
        .await
        .unwrap();
    assert_eq!(bytes_of(store.clone(), "b1").await, sizes[1]);
    store
        .record(vec![DeliveryChange::Redeliver {
            subscription: "b1".into(),
            seq: n[2],
            at: now,
        }])
        .await
        .unwrap();
    assert_eq!(bytes_of(store.clone(), "b1").await, sizes[1] + sizes[2]);
    store
        .record(vec![DeliveryChange::Retire {
            subscription: "b1".into(),
            at: now,
            reason: "gone".into(),
        }])
        .await
        .unwrap();
    assert_eq!(bytes_of(store.clone(), "b1").await, 0);
    assert_eq!(bytes_of(store.clone(), "b2").await, sizes[1], "untouched");
}

async fn unordered_leases_skip_deliveries_waiting_for_a_retry(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["u"]).await;
    let events = (1..=6).map(|n| event(&n.to_string(), &["u"])).collect();
    let n = seqs(&store.append_events(events, 100, HOUR).await.unwrap());
    let all = store.lease("u", 100, 1000, 10, false).await.unwrap();
    assert_eq!(all.len(), 6);
    // Events 1, 2 and 3 failed and wait until 900, 700 and 800; 4 was delivered; 5 and 6
    // are still leased until 1100.
    let retry = |at| Verdict::Retry {
        next_attempt_at: at,
    };
    store
        .record(vec![
            attempt(&all[0], 150, retry(900)),
            attempt(&all[1], 150, retry(700)),
            attempt(&all[2], 150, retry(800)),
            attempt(&all[3], 150, Verdict::Delivered),
        ])
        .await
        .unwrap();
    let leased = |d: Vec<Delivery>| d.iter().map(|d| d.seq).collect::<Vec<_>>();
    assert!(
        store
            .lease("u", 600, 1000, 10, false)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.next_due("u", false).await.unwrap(), Some(700));
    assert_eq!(
        leased(store.lease("u", 850, 1000, 10, false).await.unwrap()),
        [n[1], n[2]]
    );
    assert_eq!(store.next_due("u", false).await.unwrap(), Some(900));
    assert_eq!(
        leased(store.lease("u", 1100, 1000, 2, false).await.unwrap()),
        [n[0], n[4]]
    );
    assert_eq!(
        leased(store.lease("u", 1100, 1000, 10, false).await.unwrap()),
        [n[5]]
    );
}
