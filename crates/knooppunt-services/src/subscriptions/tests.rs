use knooppunt_store::DeliveryQueue;
use knooppunt_store::Records;
use std::collections::BTreeSet;

use knooppunt_delivery::Gone;
use knooppunt_event::ReceivedEvent;
use knooppunt_store::{Inspect, StoreError, Subscription, SubscriptionState};

use super::QuotaExceeded;

/// What a change may be refused with, in these tests.
#[derive(Debug)]
enum Refusal {
    Store(StoreError),
    Quota(QuotaExceeded),
}

impl From<StoreError> for Refusal {
    fn from(error: StoreError) -> Self {
        Refusal::Store(error)
    }
}

impl From<QuotaExceeded> for Refusal {
    fn from(error: QuotaExceeded) -> Self {
        Refusal::Quota(error)
    }
}
use knooppunt_store_embedded::EmbeddedStore;

use crate::app::{AppState, HubOptions};
use crate::identity::Authentication;
use crate::identity::{Principal, Role};
use crate::ingest::Refused;

/// A hub on a fresh embedded store, without any listener.
async fn hub() -> (std::sync::Arc<AppState>, EmbeddedStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let hub = AppState::open(
        std::sync::Arc::new(store.clone()),
        HubOptions::new(Authentication::Disabled),
    )
    .await
    .unwrap();
    (hub, store, dir)
}

fn subscription(id: &str, sink: &str) -> (Subscription, knooppunt_filter::Criteria) {
    let mut subscription = knooppunt_store_conformance::subscription(id);
    subscription.sink = knooppunt_store::Sink::parse(sink).unwrap();
    subscription.types = None;
    subscription.filters = vec![];
    let criteria = crate::registry::criteria(&subscription, &Default::default()).unwrap();
    (subscription, criteria)
}

fn event(id: &str, source: &str) -> ReceivedEvent {
    knooppunt_event::format::json::decode_event(
        format!(
            r#"{{"specversion":"1.0","id":"{id}","source":"{source}","type":"nl.vng.zaak-aangemaakt","time":"2026-11-23T10:00:00Z","datacontenttype":"application/json","data":{{}}}}"#
        )
        .as_bytes(),
    )
    .unwrap()
}

fn routed(hub: &AppState) -> Vec<String> {
    let event = event("x", "urn:nld:oin:1:systeem:a");
    let mut routed = hub.subscriptions().route(
        std::iter::once(&event.event),
        hub.eval_limits(),
        u64::MAX,
        |_| {},
    );
    routed.pop().map(|r| r.matched).unwrap_or_default()
}

#[tokio::test]
async fn every_change_reaches_store_and_registry_together_or_not_at_all() {
    let (hub, store, _dir) = hub().await;
    let subscriptions = &hub.subscriptions();
    let (new, criteria) = subscription("s", "https://a.example.nl/");
    subscriptions
        .create::<Refusal>(new, criteria)
        .await
        .unwrap();
    assert!(store.subscription("s").await.unwrap().is_some());
    assert_eq!(routed(&hub), ["s"]);

    // A change its caller refuses changes nothing.
    let refused: Result<_, Refusal> = subscriptions
        .replace("s", |_| {
            Err(Refusal::from(StoreError::Conflict("no".into())))
        })
        .await;
    assert!(refused.is_err());
    let replaced = subscriptions
        .replace("s", |existing| {
            let mut changed = existing.clone();
            changed.sink = knooppunt_store::Sink::parse("https://b.example.nl/").unwrap();
            Ok::<_, Refusal>(subscription_criteria(changed))
        })
        .await
        .unwrap()
        .unwrap()
        .subscription;
    assert_eq!(replaced.sink, "https://b.example.nl/");
    assert_eq!(
        store.subscription("s").await.unwrap().unwrap().sink,
        "https://b.example.nl/"
    );
    assert_eq!(
        subscriptions.get("s").unwrap().sink,
        "https://b.example.nl/"
    );

    assert!(
        subscriptions
            .delete("s", |_| false)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store.subscription("s").await.unwrap().is_some(),
        "not allowed"
    );
    assert!(subscriptions.delete("s", |_| true).await.unwrap().is_some());
    assert!(store.subscription("s").await.unwrap().is_none());
    assert!(subscriptions.get("s").is_none() && routed(&hub).is_empty());

    // A store that takes no writes: the registry does not change either.
    store.close();
    let (other, criteria) = subscription("t", "https://a.example.nl/");
    let error = subscriptions
        .create::<Refusal>(other, criteria)
        .await
        .unwrap_err();
    assert!(
        matches!(error, Refusal::Store(StoreError::Unavailable(_))),
        "{error:?}"
    );
    assert!(subscriptions.get("t").is_none() && routed(&hub).is_empty());
    hub.stop().await;
}

#[tokio::test]
async fn quotas_bound_each_owners_subscriptions_and_filter_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path()).unwrap();
    let mut options = HubOptions::new(Authentication::Disabled);
    options.quotas = super::Quotas {
        max_subscriptions: 2,
        max_filter_bytes: 100,
    };
    let hub = AppState::open(std::sync::Arc::new(store), options)
        .await
        .unwrap();
    let subscriptions = &hub.subscriptions();
    for id in ["a", "b"] {
        let (new, criteria) = subscription(id, "https://a.example.nl/");
        subscriptions
            .create::<Refusal>(new, criteria)
            .await
            .unwrap();
    }
    let (third, criteria) = subscription("c", "https://a.example.nl/");
    let Err(Refusal::Quota(QuotaExceeded(why))) = subscriptions
        .create::<Refusal>(third.clone(), criteria)
        .await
    else {
        panic!("a third subscription is past the quota");
    };
    assert!(why.contains("max_subscriptions_per_principal"), "{why}");
    assert!(subscriptions.get("c").is_none());
    // Another owner has quotas of its own.
    let mut other = third;
    other.owner = "other".into();
    let criteria = crate::registry::criteria(&other, &Default::default()).unwrap();
    subscriptions
        .create::<Refusal>(other, criteria)
        .await
        .unwrap();
    // A replacement may not grow the filters past the bytes quota.
    let refused = subscriptions
        .replace("a", |existing| {
            let mut changed = existing.clone();
            changed.filters = vec![serde_json::json!({"exact": {"subject": "x".repeat(100)}})];
            Ok::<_, Refusal>(subscription_criteria(changed))
        })
        .await;
    let Err(Refusal::Quota(QuotaExceeded(why))) = refused else {
        panic!("filters past the bytes quota");
    };
    assert!(why.contains("max_filter_bytes_per_principal"), "{why}");
    assert!(subscriptions.get("a").unwrap().filters.is_empty());
    hub.stop().await;
}

fn subscription_criteria(s: Subscription) -> (Subscription, knooppunt_filter::Criteria) {
    let criteria = crate::registry::criteria(&s, &Default::default()).unwrap();
    (s, criteria)
}

#[tokio::test]
async fn a_410_disables_only_the_sink_that_answered_it() {
    let (hub, store, _dir) = hub().await;
    let subscriptions = &hub.subscriptions();
    let (new, criteria) = subscription("s", "https://old.example.nl/");
    subscriptions
        .create::<Refusal>(new, criteria)
        .await
        .unwrap();
    subscriptions
        .replace("s", |existing| {
            let mut changed = existing.clone();
            changed.sink = knooppunt_store::Sink::parse("https://new.example.nl/").unwrap();
            Ok::<_, Refusal>(subscription_criteria(changed))
        })
        .await
        .unwrap();
    // The new sink consents (a new sink always has to).
    subscriptions.consent_by_agreement("s").await.unwrap();
    let old = Gone {
        subscription: "s".into(),
        sink: "https://old.example.nl/".into(),
    };
    assert!(!subscriptions.gone(&old).await, "the old sink's 410");
    assert_eq!(
        subscriptions.get("s").unwrap().state(),
        SubscriptionState::Active
    );
    assert_eq!(routed(&hub), ["s"]);

    let new = Gone {
        subscription: "s".into(),
        sink: "https://new.example.nl/".into(),
    };
    assert!(subscriptions.gone(&new).await);
    let stored = store.subscription("s").await.unwrap().unwrap();
    assert_eq!(stored.state(), SubscriptionState::Disabled);
    assert_eq!(
        stored.status,
        knooppunt_store::Status::Disabled(knooppunt_store::Disabled::Gone),
        "disabled, saying why"
    );
    assert_eq!(
        subscriptions.get("s").unwrap().state(),
        SubscriptionState::Disabled
    );
    assert!(
        routed(&hub).is_empty(),
        "a disabled subscription is not routed to"
    );
    hub.stop().await;
}

#[tokio::test]
async fn the_publish_pipeline_refuses_all_or_accepts_all() {
    let (hub, store, _dir) = hub().await;
    let state = &hub;
    let (new, criteria) = subscription("s", "https://a.example.nl/");
    state
        .subscriptions()
        .create::<Refusal>(new, criteria)
        .await
        .unwrap();
    let publisher = Principal {
        name: "gemeente".into(),
        roles: BTreeSet::from([Role::Publisher]),
        subscribe_type_prefixes: vec![],
        publish_source_prefixes: vec!["urn:nld:oin:1:".into()],
        oin: None,
    };

    let outside = vec![
        event("1", "urn:nld:oin:1:systeem:a"),
        event("2", "urn:nld:oin:2:systeem:b"),
    ];
    let refused = state
        .publishing()
        .accept(&publisher, outside, true, None)
        .await;
    assert!(
        matches!(&refused, Err(Refused::Forbidden(why)) if why.contains("urn:nld:oin:2:systeem:b")),
        "{refused:?}"
    );
    assert_eq!(
        crate::telemetry::IngestCounters::get(&state.publishing().counters.rejected),
        2,
        "both events of the refused batch"
    );
    assert_eq!(store.queue_stats().await.unwrap()[0].pending, 0);

    let receipts = state
        .publishing()
        .accept(
            &publisher,
            vec![event("1", "urn:nld:oin:1:systeem:a")],
            false,
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        (receipts[0].duplicate, receipts[0].matched_subscriptions),
        (false, 1)
    );
    let again = state
        .publishing()
        .accept(
            &publisher,
            vec![event("1", "urn:nld:oin:1:systeem:a")],
            false,
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        (again[0].duplicate, again[0].sequence),
        (true, receipts[0].sequence)
    );
    assert_eq!(store.pending_deliveries("s", 10).await.unwrap().len(), 1);
    hub.stop().await;
}
