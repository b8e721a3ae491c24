//! The store conformance suite: what every [`Store`] backend must do, written against the
//! trait alone. A backend's tests call [`run`] with a way to open a fresh store and to
//! reopen one (as after a restart); each check panics with what it found.
//!
//! The contracts checked:
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
        protocol: knooppunt_store::Protocol::Http,
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

/// [`knooppunt_store::Records`]: every kind of record is kept, replaced and deleted.
pub async fn records(backend: &mut impl Backend) {
    subscriptions_are_kept(backend).await;
    principals_are_kept(backend).await;
    catalog_entries_are_kept(backend).await;
    grants_are_kept(backend).await;
    replays_are_kept_and_their_events_queued_again(backend).await;
    sessions_are_kept_replaced_and_swept(backend).await;
    deleting_a_subscription_drops_its_queue(backend).await;
    keys_are_listed_in_the_order_of_their_bytes(backend).await;
}

/// [`knooppunt_store::EventLog`]: events appended once, read in order, receipts, the sweep.
pub async fn event_log(backend: &mut impl Backend) {
    events_are_appended_with_their_deliveries(backend).await;
    duplicates_are_reported_not_stored(backend).await;
    events_are_read_in_order_after_a_position(backend).await;
    receipts_say_who_received_what(backend).await;
    the_sweep_removes_only_finished_events(backend).await;
}

/// [`knooppunt_store::DeliveryQueue`]: leases, results, dead letters, withdrawals.
pub async fn delivery_queue(backend: &mut impl Backend) {
    leases_follow_the_ordering(backend).await;
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

/// [`knooppunt_store::AuditLog`]: one durable hash chain.
pub async fn audit_log(backend: &mut impl Backend) {
    the_audit_trail_is_one_durable_chain(backend).await;
}

/// [`knooppunt_store::Cluster`]: hubs alive, and sinks' pauses.
pub async fn cluster(backend: &mut impl Backend) {
    hubs_alive_are_listed_until_silent_or_gone(backend).await;
    sink_pauses_hold_the_longest_until_they_end(backend).await;
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
    changed.label = Some("Overlijdens, ‘anders’ genoemd".into());
    changed.sink = knooppunt_store::Sink::parse("https://other.example.nl/").unwrap();
    changed.sink_credential = Some(knooppunt_store::SinkCredential::ClientCredentials {
        token_url: "https://auth.example.nl/token".into(),
        client_id: "knooppunt".into(),
        client_secret: "s3cret".into(),
        scope: Some("events".into()),
    });
    changed.client_certificate = Some(knooppunt_store::ClientCertificate {
        certificate: "-----BEGIN CERTIFICATE-----".into(),
        private_key: "-----BEGIN PRIVATE KEY-----".into(),
    });
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
        store.subscription("a").await.unwrap().unwrap(),
        changed,
        "every field as written"
    );
    assert_eq!(
        store.delete_subscription("b").await.unwrap().unwrap().id,
        "b"
    );
    assert!(store.delete_subscription("b").await.unwrap().is_none());
    assert!(store.subscription("b").await.unwrap().is_none());
    every_status_is_kept(backend, store).await;
}

/// Each state a subscription can be in reads back as written, with its details.
async fn every_status_is_kept(backend: &mut impl Backend, store: Arc<dyn Inspect>) {
    use knooppunt_store::{Consent, Disabled, Validation};
    let statuses = [
        Status::Pending { problem: None },
        Status::Pending {
            problem: Some("the sink answered 403".into()),
        },
        Status::Active(Consent {
            by: Some(Validation::Handshake),
            allowed_rate: Some(120),
        }),
        Status::Active(Consent {
            by: Some(Validation::Agreement),
            allowed_rate: None,
        }),
        Status::Disabled(Disabled::Gone),
        Status::Disabled(Disabled::Unusable("filters beyond this hub".into())),
    ];
    let mut written = Vec::new();
    for (i, status) in statuses.into_iter().enumerate() {
        let mut s = subscription(&format!("status-{i}"));
        s.status = status;
        s.validation_token = Some(format!("token-{i}"));
        store.insert_subscription(&s).await.unwrap();
        written.push(s);
    }
    let store = backend.reopen(store).await;
    for s in written {
        assert_eq!(
            store.subscription(&s.id).await.unwrap().unwrap(),
            s,
            "status {:?} as written",
            s.status
        );
        store.delete_subscription(&s.id).await.unwrap();
    }
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

async fn catalog_entries_are_kept(backend: &mut impl Backend) {
    let store = backend.open().await;
    store
        .insert_catalog_entry(&catalog_entry("b"))
        .await
        .unwrap();
    let mut a = catalog_entry("a");
    a.type_match = knooppunt_store::TypeMatch::Prefix;
    a.event_type = "nl.brp.".into();
    a.documentation = None;
    a.dataschema = None;
    a.schema = None;
    a.schema_check = knooppunt_store::SchemaCheck::Off;
    a.approval = knooppunt_store::ApprovalPolicy::Open;
    store.insert_catalog_entry(&a).await.unwrap();
    assert!(
        matches!(
            store.insert_catalog_entry(&catalog_entry("a")).await,
            Err(StoreError::Conflict(id)) if id == "a"
        ),
        "a taken id is a conflict"
    );
    let mut changed = catalog_entry("b");
    changed.deprecated = true;
    changed.description = "Verouderd.".into();
    assert!(store.update_catalog_entry(&changed).await.unwrap());
    assert!(
        !store
            .update_catalog_entry(&catalog_entry("zz"))
            .await
            .unwrap()
    );
    let store = backend.reopen(store).await;
    assert_eq!(
        store.catalog_entries().await.unwrap(),
        vec![a, changed],
        "in id order, every field as written, durable"
    );
    assert!(store.delete_catalog_entry("a").await.unwrap());
    assert!(!store.delete_catalog_entry("a").await.unwrap());
    assert_eq!(store.catalog_entries().await.unwrap().len(), 1);
}

fn audit_record(at: u64, name: &str) -> knooppunt_store::AuditRecord {
    knooppunt_store::AuditRecord {
        start_time: at,
        name: name.into(),
        status_code: "OK".into(),
        actor: Some("brp".into()),
        actor_oin: Some("00000001823288444000".into()),
        object: Some(format!("eventtype/{at}")),
        request_id: Some(format!("req-{at}")),
        trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
        processing_activity_id: Some("catalog".into()),
        data_subject_id: None,
        details: serde_json::json!({"z": 1, "a": {"nested": [1, 2, "x"]}, "text": "é\u{0}"}),
        concerns: vec!["kvk".into()],
    }
}

/// Audit entries are chained in one sequence, durable, read in pages, verify, and the
/// retention sweep removes only the oldest run (never the newest entry), so that what is
/// left is still one chain.
async fn the_audit_trail_is_one_durable_chain(backend: &mut impl Backend) {
    use knooppunt_store::{AuditRange, GENESIS, verify_audit};
    let store = backend.open().await;
    let all = AuditRange {
        after: None,
        limit: 100,
    };
    assert!(store.audit_entries(all).await.unwrap().is_empty());
    assert_eq!(store.audit_last().await.unwrap(), None, "no head yet");
    let first = store
        .append_audit(vec![
            audit_record(100, "eventtype.create"),
            audit_record(200, "eventtype.replace"),
        ])
        .await
        .unwrap();
    assert_eq!(first.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(first[0].prev_hash, GENESIS);
    assert_eq!(first[1].prev_hash, first[0].hash);
    let store = backend.reopen(store).await;
    let more = store
        .append_audit(vec![
            audit_record(300, "approval.grant"),
            audit_record(400, "approval.revoke"),
            audit_record(500, "request.refused"),
        ])
        .await
        .unwrap();
    assert_eq!(more[0].seq, 3);
    assert_eq!(
        more[0].prev_hash, first[1].hash,
        "chained on after a reopen"
    );
    let store = backend.reopen(store).await;
    let entries = store.audit_entries(all).await.unwrap();
    assert_eq!(entries.len(), 5);
    assert_eq!(entries[..2], first[..], "every field as written");
    assert_eq!(
        store.audit_last().await.unwrap().as_ref(),
        entries.last(),
        "the head is the newest entry"
    );
    assert_eq!(verify_audit(None, &entries).unwrap().unwrap().0, 5);
    let page = store
        .audit_entries(AuditRange {
            after: Some(2),
            limit: 2,
        })
        .await
        .unwrap();
    assert_eq!(page.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4]);

    assert_eq!(
        store.remove_audit_through(2).await.unwrap(),
        2,
        "entries 1 and 2"
    );
    let kept = store.audit_entries(all).await.unwrap();
    assert_eq!(kept.first().map(|e| e.seq), Some(3));
    assert_eq!(kept[0].prev_hash, entries[1].hash, "the chain goes on");
    assert!(verify_audit(None, &kept).is_ok());
    let store = backend.reopen(store).await;
    assert_eq!(
        store.audit_entries(all).await.unwrap(),
        kept,
        "removed for good, the rest kept"
    );
    assert_eq!(store.remove_audit_through(2).await.unwrap(), 0);
    assert_eq!(store.remove_audit_through(u64::MAX).await.unwrap(), 2);
    let kept = store.audit_entries(all).await.unwrap();
    assert_eq!(kept.len(), 1, "the newest entry stays");
    let next = store
        .append_audit(vec![audit_record(600, "eventtype.delete")])
        .await
        .unwrap();
    assert_eq!(next[0].seq, 6);
    assert_eq!(next[0].prev_hash, kept[0].hash);
    assert_eq!(store.audit_last().await.unwrap().as_ref(), next.first());
}

async fn grants_are_kept(backend: &mut impl Backend) {
    use knooppunt_store::{Decision, Grant, GrantState};
    let store = backend.open().await;
    let requested = |entry: &str, subscription: &str| Grant {
        entry: entry.into(),
        subscription: subscription.into(),
        state: GrantState::Requested,
        requested_at: 1000,
        decision: None,
    };
    store.put_grant(&requested("e2", "s1")).await.unwrap();
    store.put_grant(&requested("e1", "s2")).await.unwrap();
    store.put_grant(&requested("e1", "s1")).await.unwrap();
    let mut granted = requested("e1", "s2");
    granted.state = GrantState::Granted;
    granted.decision = Some(Decision {
        by: "brp".into(),
        at: 2000,
        reason: Some("Wettelijke taak (art. 3.2 Wet BRP)".into()),
    });
    store.put_grant(&granted).await.unwrap();
    let mut revoked = requested("e2", "s1");
    revoked.state = GrantState::Revoked;
    revoked.decision = Some(Decision {
        by: "admin".into(),
        at: 3000,
        reason: None,
    });
    store.put_grant(&revoked).await.unwrap();
    let store = backend.reopen(store).await;
    assert_eq!(
        store.grants().await.unwrap(),
        vec![requested("e1", "s1"), granted, revoked],
        "by entry then subscription, the last put of each, durable"
    );
    assert!(store.delete_grant("e1", "s1").await.unwrap());
    assert!(!store.delete_grant("e1", "s1").await.unwrap());
    assert_eq!(store.grants().await.unwrap().len(), 2);
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

async fn principals_are_kept(backend: &mut impl Backend) {
    let store = backend.open().await;
    store.insert_principal(&principal("b")).await.unwrap();
    let mut bare = principal("a");
    (bare.token_sha256, bare.oin) = (None, None);
    bare.subscribe_type_prefixes.clear();
    store.insert_principal(&bare).await.unwrap();
    assert!(
        matches!(
            store.insert_principal(&principal("a")).await,
            Err(StoreError::NameTaken(name)) if name == "a"
        ),
        "a taken name is refused"
    );
    let mut disabled = principal("b");
    disabled.disabled = true;
    disabled.roles = vec!["admin".into()];
    // A token rotated with an overlap keeps the replaced one's hash and its end.
    disabled.previous_token = Some(knooppunt_store::PreviousToken {
        sha256: "ab".repeat(32),
        until: 1_900_000_000_000,
    });
    assert!(store.update_principal(&disabled).await.unwrap());
    assert!(!store.update_principal(&principal("zz")).await.unwrap());
    let store = backend.reopen(store).await;
    assert_eq!(
        store.principals().await.unwrap(),
        [bare, disabled],
        "listed in name order, every field as written, durable"
    );
    assert!(store.delete_principal("a").await.unwrap());
    assert!(!store.delete_principal("a").await.unwrap());
    let store = backend.reopen(store).await;
    let names: Vec<String> = store
        .principals()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["b"]);
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

/// Hubs said alive are listed in id order until they leave or stay silent too long.
async fn hubs_alive_are_listed_until_silent_or_gone(backend: &mut impl Backend) {
    let store = backend.open().await;
    let minute = 60_000;
    assert_eq!(store.hubs_alive("hub-b", minute).await.unwrap(), ["hub-b"]);
    assert_eq!(
        store.hubs_alive("hub-a", minute).await.unwrap(),
        ["hub-a", "hub-b"],
        "in id order"
    );
    assert_eq!(
        store.hubs_alive("hub-c", minute).await.unwrap(),
        ["hub-a", "hub-b", "hub-c"]
    );
    store.hub_leaves("hub-b").await.unwrap();
    store.hub_leaves("hub-x").await.unwrap();
    assert_eq!(
        store.hubs_alive("hub-a", minute).await.unwrap(),
        ["hub-a", "hub-c"],
        "one that left is not listed"
    );
    // Silent for longer than the limit: forgotten; the one asking is always alive.
    // (Blocking the test's thread is fine: nothing runs meanwhile.)
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(store.hubs_alive("hub-c", 200).await.unwrap(), ["hub-c"]);
    assert_eq!(
        store.hubs_alive("hub-a", minute).await.unwrap(),
        ["hub-a", "hub-c"],
        "said alive again, listed again"
    );
}

/// A sink's pause is kept until it ends; a shorter one never shortens it.
async fn sink_pauses_hold_the_longest_until_they_end(backend: &mut impl Backend) {
    let store = backend.open().await;
    let (a, b) = ("https://a.example.nl:443", "https://b.example.nl:443");
    let now = knooppunt_store::now_ms();
    assert_eq!(store.sinks_paused(now).await.unwrap(), []);
    store.pause_sink(b, now + 60_000).await.unwrap();
    store.pause_sink(a, now + 30_000).await.unwrap();
    store.pause_sink(b, now + 10_000).await.unwrap();
    store.pause_sink(a, now + 40_000).await.unwrap();
    assert_eq!(
        store.sinks_paused(now).await.unwrap(),
        [(a.to_owned(), now + 40_000), (b.to_owned(), now + 60_000)],
        "the longest pause of each, in the order of their names"
    );
    assert_eq!(
        store.sinks_paused(now + 40_000).await.unwrap(),
        [(b.to_owned(), now + 60_000)],
        "an ended pause is not listed"
    );
    assert_eq!(store.sinks_paused(now + 60_000).await.unwrap(), []);
}

async fn sessions_are_kept_replaced_and_swept(backend: &mut impl Backend) {
    use knooppunt_store::Session;
    let store = backend.open().await;
    let session = |id: &str, expires_at: u64, last_seen_at: u64| Session {
        id: id.into(),
        principal: "gemeente".into(),
        credential: "token:ab12".into(),
        csrf: format!("csrf-{id}"),
        created_at: 1_000,
        expires_at,
        last_seen_at,
    };
    assert_eq!(store.session("s-1").await.unwrap(), None);
    store
        .put_session(&session("s-1", 10_000, 1_000))
        .await
        .unwrap();
    store
        .put_session(&session("s-2", 3_000, 1_000))
        .await
        .unwrap();
    store
        .put_session(&session("s-3", 10_000, 1_000))
        .await
        .unwrap();
    // Replaced by id: last seen later.
    store
        .put_session(&session("s-3", 10_000, 4_000))
        .await
        .unwrap();
    let store = backend.reopen(store).await;
    assert_eq!(
        store.session("s-1").await.unwrap(),
        Some(session("s-1", 10_000, 1_000)),
        "a session survives a reopen"
    );
    assert_eq!(
        store.session("s-3").await.unwrap(),
        Some(session("s-3", 10_000, 4_000))
    );
    // At 5,000 with an idle limit that ends sessions unseen since 2,000: s-2 expired, s-1 is
    // idle, s-3 stays.
    assert_eq!(store.sweep_sessions(5_000, 2_000).await.unwrap(), 2);
    assert_eq!(store.session("s-1").await.unwrap(), None);
    assert_eq!(store.session("s-2").await.unwrap(), None);
    assert!(store.session("s-3").await.unwrap().is_some());
    assert!(store.delete_session("s-3").await.unwrap());
    assert!(!store.delete_session("s-3").await.unwrap());
    assert_eq!(store.session("s-3").await.unwrap(), None);
}

async fn replays_are_kept_and_their_events_queued_again(backend: &mut impl Backend) {
    use knooppunt_store::{Replay, ReplayState};
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["q"]).await;
    let replay = Replay {
        id: "rp-1".into(),
        subscription: "q".into(),
        requested_by: "gemeente".into(),
        from_ms: 100,
        until_ms: 900,
        state: ReplayState::Running,
        position: 0,
        queued: 0,
        last_event_at: None,
        created_at: 1,
        updated_at: 1,
        finished_at: None,
        error: None,
    };
    assert!(store.put_replay(&replay, None).await.unwrap());
    assert!(
        !store.put_replay(&replay, None).await.unwrap(),
        "its id is taken"
    );
    let step = Replay {
        position: 7,
        queued: 2,
        updated_at: 2,
        ..replay.clone()
    };
    assert!(store.put_replay(&step, Some(1)).await.unwrap());
    let stale = Replay {
        state: ReplayState::Cancelled,
        updated_at: 3,
        ..replay.clone()
    };
    assert!(
        !store.put_replay(&stale, Some(1)).await.unwrap(),
        "changed meanwhile"
    );
    assert_eq!(store.replays().await.unwrap(), std::slice::from_ref(&step));

    let n = seqs(
        &store
            .append_events(vec![event("q1", &["q"]), event("q2", &["q"])], 100, HOUR)
            .await
            .unwrap(),
    );
    let first = lease_one(store.as_ref(), "q", n[0], 200).await;
    store
        .record(vec![attempt(&first, 200, Verdict::Delivered)])
        .await
        .unwrap();
    store
        .record(vec![DeliveryChange::Requeue {
            subscription: "q".into(),
            seqs: vec![n[0], n[1], n[1] + 1_000_000],
            at: 300,
            replay: "rp-1".into(),
        }])
        .await
        .unwrap();
    let pending = store.pending_deliveries("q", 10).await.unwrap();
    let seen: Vec<(u64, Option<&str>)> = pending
        .iter()
        .map(|d| (d.seq, d.replay.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [(n[0], Some("rp-1")), (n[1], None)],
        "delivered again; one still pending is not queued twice; an unknown event is not queued"
    );
    let store = backend.reopen(store).await;
    let leased = store.lease("q", 400, 1000, 10, false).await.unwrap();
    let replayed = leased.iter().find(|d| d.seq == n[0]).expect("leased");
    assert_eq!(
        replayed.replay.as_deref(),
        Some("rp-1"),
        "kept across a reopen"
    );
    assert_eq!(store.replays().await.unwrap(), [step]);
    assert!(store.delete_replay("rp-1").await.unwrap());
    assert!(!store.delete_replay("rp-1").await.unwrap());
    assert_eq!(store.replays().await.unwrap(), []);
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

async fn deleting_a_subscription_drops_its_queue(backend: &mut impl Backend) {
    let store = backend.open().await;
    with_subscriptions(store.as_ref(), &["s", "t"]).await;
    store
        .append_events(vec![event("1", &["s", "t"])], 0, HOUR)
        .await
        .unwrap();
    store.delete_subscription("s").await.unwrap();
    assert!(store.pending_deliveries("s", 10).await.unwrap().is_empty());
    assert!(
        store
            .lease("s", 0, 1000, 10, false)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.pending_deliveries("t", 10).await.unwrap().len(), 1);
    let store = backend.reopen(store).await;
    assert!(store.pending_deliveries("s", 10).await.unwrap().is_empty());
    // Its owner stays known, for the receipts that name it; a live or unknown one has none.
    assert_eq!(
        store.former_owner("s").await.unwrap().as_deref(),
        Some(subscription("s").owner.as_str()),
        "kept across a reopen"
    );
    assert_eq!(store.former_owner("t").await.unwrap(), None);
    assert_eq!(store.former_owner("never").await.unwrap(), None);
}

/// Names in the order of their bytes, whatever the database's own collation (an operator's
/// PostgreSQL cluster is usually linguistic, e.g. `nl-NL`, where "a-z" < "az" < "b" < "B" <
/// "Zaak"): one order on every backend, and keys whose order cannot change under an index
/// when the operating system's collation data does.
async fn keys_are_listed_in_the_order_of_their_bytes(backend: &mut impl Backend) {
    let store = backend.open().await;
    let names = [
        "b", "Zaak", "a-z", "az", "B", "zaak-10", "zaak-9", "\u{e9}", "e", "Z",
    ];
    let mut in_byte_order: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    in_byte_order.sort_unstable();
    with_subscriptions(store.as_ref(), &names).await;
    for name in names {
        store.insert_principal(&principal(name)).await.unwrap();
        store
            .insert_catalog_entry(&catalog_entry(name))
            .await
            .unwrap();
    }
    let appended = store
        .append_events(vec![event("k1", &names), event("k2", &names)], 100, HOUR)
        .await
        .unwrap();
    let n = seqs(&appended);
    let shed: Vec<DeliveryChange> = names.iter().map(|s| withdraw(s, &n[..1], 1000)).collect();
    store.record(shed).await.unwrap();
    let store = backend.reopen(store).await;
    let stats = store.queue_stats().await.unwrap();
    assert!(
        stats.iter().all(|q| q.pending == 1 && q.dead_letters == 1),
        "{stats:?}"
    );
    let listings: [(&str, Vec<String>); 5] = [
        (
            "subscriptions",
            store
                .subscriptions()
                .await
                .unwrap()
                .into_iter()
                .map(|s| s.id)
                .collect(),
        ),
        (
            "principals",
            store
                .principals()
                .await
                .unwrap()
                .into_iter()
                .map(|p| p.name)
                .collect(),
        ),
        (
            "catalog entries",
            store
                .catalog_entries()
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.id)
                .collect(),
        ),
        (
            "queue statistics",
            stats.into_iter().map(|q| q.subscription).collect(),
        ),
        (
            "what the dead-letter sweep removed",
            store
                .sweep_dead_letters(2000, 100)
                .await
                .unwrap()
                .into_iter()
                .map(|(s, _)| s)
                .collect(),
        ),
    ];
    for (what, listed) in listings {
        assert_eq!(listed, in_byte_order, "{what}");
    }
}
