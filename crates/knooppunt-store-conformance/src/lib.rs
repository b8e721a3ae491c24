//! The store conformance suite: what every [`Store`] backend must do, written against the
//! trait alone. A backend's tests call [`run`] with a way to open a fresh store and to
//! reopen one (as after a restart); each check panics with what it found.
//!
//! The contracts checked:
//! - every kind of record through the one generic core: kept apart under its own key,
//!   read back, replaced, put, removed (returned once), durable;
//! - subscriptions: insert (a taken id is a conflict), read, list in id order, update,
//!   delete, and all of it durable across a reopen;
//! - principals: likewise (a taken name is refused), every field kept as written;
//! - append: events numbered in acceptance order, each with one pending delivery per
//!   subscription, in order; duplicates (`source` + `id`) within the window are reported,
//!   not stored, also within one call; durable across a reopen;
//! - leasing: an ordered subscription leases only its oldest delivery and nothing while it
//!   is leased; an unordered one everything due up to the limit, skipping deliveries that
//!   wait for a retry; a lease that runs out frees the delivery and counts as an attempt;
//!   the queue statistics count the leases held;
//! - lease tokens: every lease has a new token; a result recorded with a token that is not
//!   the delivery's lease (it ran out and the delivery was leased again, it was spent by an
//!   earlier result, or the delivery was never leased) is refused, and nothing of that call
//!   is recorded; a result for a delivery that is gone is ignored;
//! - records: a retry is not leased before it is due (`next_due` says when); delivered
//!   finishes; a dead letter is listed with its reason, survives a reopen, can be redelivered
//!   (fresh attempts) or deleted; retiring a subscription turns its queue into dead letters;
//!   deleting a subscription drops its queue; the dead-letter sweep removes those that
//!   died before a time, oldest first, up to a limit;
//! - the sweep removes finished events past retention only;
//! - replays: jobs kept, changed only on the version read; a requeue queues retained events
//!   again (not one already pending) with the replay named on the delivery;
//! - one subscription's queue statistics are its entry of all;
//! - console sessions are kept across a reopen, replaced by id, removed, and swept once
//!   expired or idle;
//! - events are read in acceptance order after a position, the sweep says how far it
//!   removed, and a time finds its place in the order;
//! - whatever is listed by a name (subscriptions, principals, catalog entries, queue
//!   statistics, what the dead-letter sweep removed) comes in the order of the names'
//!   bytes, as Rust orders strings, never in a database's linguistic order.
//!
//! Not checked here: crash consistency, which a backend tests with its own means (the
//! embedded store: `crates/knooppunt/tests/crash.rs`).

mod audit_log;
mod cluster;
mod delivery_queue;
mod event_log;
mod records;

pub use audit_log::audit_log;
pub use cluster::cluster;
pub use delivery_queue::delivery_queue;
pub use event_log::event_log;
pub use records::records;

use std::future::Future;
use std::sync::Arc;

use knooppunt_store::{
    Appended, Attempt, Delivery, DeliveryChange, Inspect, NewEvent, Status, Store, StoreError,
    StoredPrincipal, Subscription, Verdict,
};

/// An hour in milliseconds: the duplicate window of the checks.
const HOUR: u64 = 3_600_000;

/// How the suite gets stores from a backend.
pub trait Backend {
    /// A fresh, empty store.
    fn open(&mut self) -> impl Future<Output = Arc<dyn Inspect>>;
    /// The same store as `store` after a restart (the old handle is dropped first).
    fn reopen(&mut self, store: Arc<dyn Inspect>) -> impl Future<Output = Arc<dyn Inspect>>;
}

/// A subscription with this id.
pub fn subscription(id: &str) -> Subscription {
    Subscription {
        id: id.into(),
        owner: "gemeente".into(),
        label: Some("Verhuizingen voor de burgerzaken".into()),
        sink: knooppunt_store::Sink::parse("https://gemeente.example.nl/events").unwrap(),
        source: None,
        types: Some(vec!["nl.brp.x".into()]),
        filters: vec![serde_json::json!({"prefix": {"type": "nl."}})],
        protocol_settings: Default::default(),
        sink_credential: None,
        config: Default::default(),
        created_at: 1,
        updated_at: 1,
        status: Status::default(),
        validation_token: None,
        signing: Some(knooppunt_store::SigningSecrets {
            current: "whsec_c2VjcmV0LW9mLWEtc3Vic2NyaXB0aW9u".into(),
            previous: Some(("whsec_b2xkLXNlY3JldA==".into(), 1_000)),
        }),
        client_certificate: None,
    }
}

/// Extension types as the event crate writes them.
const TYPES: &str = r#"{"comexamplebytes":"binary","comexampleuri":"uri"}"#;

/// An event routed to `subscriptions`.
pub fn event(id: &str, subscriptions: &[&str]) -> NewEvent {
    NewEvent {
        source: "urn:nld:conformance".into(),
        id: id.into(),
        json: format!(
            r#"{{"specversion":"1.0","id":"{id}","source":"urn:nld:conformance","type":"t"}}"#
        ),
        extension_types: None,
        subscriptions: subscriptions.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// `seqs` of `subscription` shed into dead letters at `at`.
pub fn withdraw(subscription: &str, seqs: &[u64], at: u64) -> DeliveryChange {
    DeliveryChange::Withdraw {
        subscription: subscription.into(),
        seqs: seqs.to_vec(),
        at,
        reason: "shed".into(),
    }
}

/// The result of an attempt made under `leased`'s lease.
pub fn attempt(leased: &Delivery, at: u64, verdict: Verdict) -> DeliveryChange {
    DeliveryChange::Attempted(Attempt {
        subscription: leased.subscription.clone(),
        seq: leased.seq,
        lease: leased.lease,
        at,
        status: Some(503),
        error: Some("the sink answered 503".into()),
        verdict,
        receipt: true,
    })
}

async fn with_subscriptions(store: &dyn Store, ids: &[&str]) {
    for id in ids {
        store.insert_subscription(&subscription(id)).await.unwrap();
    }
}

/// Checks that `store` holds [`event`] `id` under number `seq`, accepted at `accepted_at`.
pub async fn assert_holds(store: &dyn Store, seq: u64, id: &str, accepted_at: u64) {
    let stored = store
        .event(seq)
        .await
        .unwrap()
        .expect("the event is stored");
    assert_eq!(
        (stored.id.as_str(), stored.accepted_at),
        (id, accepted_at),
        "event {seq}"
    );
    assert_eq!(stored.json, event(id, &[]).json, "event {seq}");
}

/// The numbers of appended events, all accepted (a duplicate fails the check).
pub fn seqs(appended: &[Appended]) -> Vec<u64> {
    appended
        .iter()
        .map(|a| match a {
            Appended::Accepted { seq } => *seq,
            Appended::Duplicate { seq } => panic!("unexpected duplicate of {seq}"),
        })
        .collect()
}

/// Runs every check, each on a fresh store, part by part of [`Store`].
pub async fn run(backend: &mut impl Backend) {
    records(backend).await;
    event_log(backend).await;
    delivery_queue(backend).await;
    audit_log(backend).await;
    cluster(backend).await;
}

/// Leases the one delivery of event `seq` (the subscription's earliest due) at `now`.
async fn lease_one(store: &dyn Store, subscription: &str, seq: u64, now: u64) -> Delivery {
    let leased = store
        .lease(subscription, now, 1000, 1, false)
        .await
        .unwrap();
    assert_eq!(
        leased.iter().map(|d| d.seq).collect::<Vec<_>>(),
        [seq],
        "the earliest due"
    );
    leased.into_iter().next().unwrap()
}

/// A catalog entry with this id and every field set.
pub fn catalog_entry(id: &str) -> knooppunt_store::CatalogEntry {
    knooppunt_store::CatalogEntry {
        id: id.into(),
        owner: "brp".into(),
        source_prefix: "urn:nld:oin:00000001823288444000:".into(),
        event_type: "nl.brp.persoon-verhuisd".into(),
        type_match: knooppunt_store::TypeMatch::Exact,
        description: "Een ingezetene is verhuisd.".into(),
        documentation: Some("https://brp.example.nl/events".into()),
        dataschema: Some("https://brp.example.nl/schema.json".into()),
        schema: Some(r#"{"type": "object", "required": ["bsn"]}"#.into()),
        schema_check: knooppunt_store::SchemaCheck::Enforce,
        deprecated: false,
        approval: knooppunt_store::ApprovalPolicy::ApprovalRequired,
        kenmerken: vec!["bronorganisatie".into(), "zaaktype".into()],
        created_at: 1000,
        updated_at: 2000,
    }
}

/// A principal named `name` with every field set.
fn principal(name: &str) -> StoredPrincipal {
    StoredPrincipal {
        name: name.into(),
        roles: vec!["publisher".into(), "subscriber".into()],
        token_sha256: Some("ab".repeat(32)),
        previous_token: None,
        subscribe_type_prefixes: vec!["nl.brp.".into()],
        publish_source_prefixes: vec!["urn:nld:oin:00000001234567890000:".into()],
        oin: Some("00000001234567890000".into()),
        disabled: false,
        origin: "api".into(),
        zgw: Some(knooppunt_store::StoredZgwClient {
            client_id: format!("{name}-zgw"),
            sealed_secret: "aes256gcm.k1.c2VhbGVk".into(),
            scopes: vec!["notificaties.consumeren".into()],
        }),
        created_at: 1000,
        updated_at: 2000,
    }
}
