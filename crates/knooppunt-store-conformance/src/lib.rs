//! The store conformance suite: what every [`Store`] backend must do, written against the
//! trait alone. A backend's tests call [`run`] with a way to open a fresh store and to
//! reopen one (as after a restart); each check panics with what it found.
//!
//! The contracts checked:
//! - subscriptions: insert (a taken id is a conflict), read, list in id order, update,
//!   delete, and all of it durable across a reopen;
//! - append: events numbered in acceptance order, each with one pending delivery per
//!   subscription, in order; duplicates (`source` + `id`) within the window are reported,
//!   not stored, also within one call; durable across a reopen;
//! - leasing: an ordered subscription leases only its oldest delivery and nothing while it
//!   is leased; an unordered one everything due up to the limit, skipping deliveries that
//!   wait for a retry; a lease that runs out frees the delivery;
//! - records: a retry is not leased before it is due (`next_due` says when); delivered
//!   finishes; a dead letter is listed with its reason, survives a reopen, can be redelivered
//!   (fresh attempts) or deleted; retiring a subscription turns its queue into dead letters;
//! - the sweep removes finished events past retention only.
//!
//! Not yet part of the trait, so not checked: lease tokens (a result recorded with a stale
//! token refused), and crash consistency, which a backend tests with its own means.

use std::future::Future;
use std::sync::Arc;

use knooppunt_store::{
    Appended, Attempt, DeliveryChange, NewEvent, Store, StoreError, Subscription,
    SubscriptionState, Verdict,
};

/// An hour in milliseconds: the duplicate window of the checks.
const HOUR: u64 = 3_600_000;

/// How the suite gets stores from a backend.
pub trait Backend {
    /// A fresh, empty store.
    fn open(&mut self) -> impl Future<Output = Arc<dyn Store>>;
    /// The same store as `store` after a restart (the old handle is dropped first).
    fn reopen(&mut self, store: Arc<dyn Store>) -> impl Future<Output = Arc<dyn Store>>;
}

/// A subscription with this id.
pub fn subscription(id: &str) -> Subscription {
    Subscription {
        id: id.into(),
        owner: "gemeente".into(),
        sink: "https://gemeente.example.nl/events".into(),
        protocol: "HTTP".into(),
        source: None,
        types: vec!["nl.brp.x".into()],
        types_empty: false,
        filters: vec![serde_json::json!({"prefix": {"type": "nl."}})],
        protocol_settings: Default::default(),
        sink_credential: None,
        config: Default::default(),
        created_at: 1,
        updated_at: 1,
        state: SubscriptionState::Active,
        validated_by: None,
        validation_token: None,
        allowed_rate: None,
        validation_problem: None,
        disabled_reason: None,
    }
}

/// An event routed to `subscriptions`.
pub fn event(id: &str, subscriptions: &[&str]) -> NewEvent {
    NewEvent {
        source: "urn:nld:conformance".into(),
        id: id.into(),
        json: format!(
            r#"{{"specversion":"1.0","id":"{id}","source":"urn:nld:conformance","type":"t"}}"#
        ),
        subscriptions: subscriptions.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn attempt(subscription: &str, seq: u64, at: u64, verdict: Verdict) -> DeliveryChange {
    DeliveryChange::Attempted(Attempt {
        subscription: subscription.into(),
        seq,
        at,
        status: Some(503),
        error: Some("the sink answered 503".into()),
        verdict,
    })
}

async fn with_subscriptions(store: &dyn Store, ids: &[&str]) {
    for id in ids {
        store.insert_subscription(&subscription(id)).await.unwrap();
    }
}

fn seqs(appended: &[Appended]) -> Vec<u64> {
    appended
        .iter()
        .map(|a| match a {
            Appended::Accepted { seq } => *seq,
            Appended::Duplicate { seq } => panic!("unexpected duplicate of {seq}"),
        })
        .collect()
}

/// Runs every check, each on a fresh store.
pub async fn run(backend: &mut impl Backend) {
    subscriptions_are_kept(backend).await;
    events_are_appended_with_their_deliveries(backend).await;
    duplicates_are_reported_not_stored(backend).await;
    leases_follow_the_ordering(backend).await;
    results_are_recorded_and_survive_a_reopen(backend).await;
    dead_letters_are_redelivered_deleted_and_retired(backend).await;
    the_sweep_removes_only_finished_events(backend).await;
}

async fn subscriptions_are_kept(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["b", "a"]).await;
    assert!(
        matches!(
            store.insert_subscription(&subscription("a")).await,
            Err(StoreError::Conflict(id)) if id == "a"
        ),
        "a taken id is a conflict"
    );
    let mut changed = subscription("a");
    changed.sink = "https://other.example.nl/".into();
    assert!(store.update_subscription(&changed).await.unwrap());
    assert!(
        !store
            .update_subscription(&subscription("zz"))
            .await
            .unwrap()
    );
    let store = backend.reopen(store).await;
    let ids: Vec<String> = store
        .subscriptions()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, ["a", "b"], "listed in id order, durable");
    assert_eq!(
        store.subscription("a").await.unwrap().unwrap().sink,
        "https://other.example.nl/"
    );
    assert_eq!(
        store.delete_subscription("b").await.unwrap().unwrap().id,
        "b"
    );
    assert!(store.delete_subscription("b").await.unwrap().is_none());
    assert!(store.subscription("b").await.unwrap().is_none());
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
    assert_eq!(pending("s2").await, numbers[..1]);
    let stored = store.event(numbers[0]).await.unwrap().unwrap();
    assert_eq!((stored.id.as_str(), stored.accepted_at), ("1", 1000));
    assert_eq!(
        stored.json,
        event("1", &[]).json,
        "the JSON exactly as given"
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
    assert_eq!(
        leased(store.lease("o", 100, 1000, 10, true).await.unwrap()),
        [n[0]]
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
    store
        .record(vec![attempt(
            "u",
            n[1],
            150,
            Verdict::Retry {
                next_attempt_at: 9000,
            },
        )])
        .await
        .unwrap();
    let due = leased(store.lease("u", 2200, 1000, 10, false).await.unwrap());
    assert!(!due.contains(&n[1]), "{due:?}");
    assert_eq!(
        store.next_due("u", false).await.unwrap(),
        Some(3200).min(Some(9000))
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
    store.lease("o", 100, 1000, 1, true).await.unwrap();
    store
        .record(vec![attempt(
            "o",
            n[0],
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
        .record(vec![attempt("o", n[0], 5001, Verdict::Delivered)])
        .await
        .unwrap();
    let pending = store.pending_deliveries("o", 10).await.unwrap();
    assert_eq!(pending.iter().map(|d| d.seq).collect::<Vec<_>>(), [n[1]]);
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
    store
        .record(vec![attempt("s", n[0], 150, dead.clone())])
        .await
        .unwrap();
    store
        .record(vec![attempt("s", n[1], 160, dead)])
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
    store
        .record(vec![attempt("s", n[0], 10, Verdict::Delivered)])
        .await
        .unwrap();
    store.sweep(10 * HOUR, HOUR, HOUR).await.unwrap();
    assert!(
        store.event(n[1]).await.unwrap().is_some(),
        "a pending delivery keeps its event"
    );
    assert_eq!(
        store.pending_deliveries("s", 10).await.unwrap()[0].seq,
        n[1]
    );
}
