//! [`knooppunt_store::Records`]: every kind of record is kept, replaced and deleted.

use super::*;

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
    every_kind_goes_through_one_core(backend).await;
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
    // A subscription to an MQTT broker, with every setting.
    let mut broker = subscription("c");
    broker.sink = knooppunt_store::Sink::parse("mqtts://broker.example.nl:8884").unwrap();
    broker.protocol_settings =
        knooppunt_store::ProtocolSettings::Mqtt(knooppunt_store::MqttSettings {
            version: knooppunt_store::MqttVersion::V3,
            topic: "brp/verhuizingen".into(),
            qos: 2,
            retain: true,
            expiry: Some(86_400),
            user_properties: [("afdeling".to_owned(), "burgerzaken".to_owned())].into(),
        });
    broker.sink_credential = Some(knooppunt_store::SinkCredential::Plain {
        identifier: "knooppunt".into(),
        secret: "s3cret".into(),
    });
    store.insert_subscription(&broker).await.unwrap();
    // And one to a NATS server's JetStream.
    let mut nats = subscription("d");
    nats.sink = knooppunt_store::Sink::parse("tls://nats.example.nl:4222").unwrap();
    nats.protocol_settings =
        knooppunt_store::ProtocolSettings::Nats(knooppunt_store::NatsSettings {
            subject: "brp.verhuizingen".into(),
            jetstream: true,
        });
    store.insert_subscription(&nats).await.unwrap();
    // And one to an AMQP 1.0 broker, with every setting.
    let mut amqp = subscription("e");
    amqp.sink = knooppunt_store::Sink::parse("amqps://amqp.example.nl/queue/a").unwrap();
    amqp.protocol_settings =
        knooppunt_store::ProtocolSettings::Amqp(knooppunt_store::AmqpSettings {
            address: Some("/exchange/amq.topic/brp".into()),
            link_name: Some("knooppunt-brp".into()),
            settled: true,
            link_properties: [("afdeling".to_owned(), "burgerzaken".to_owned())].into(),
        });
    store.insert_subscription(&amqp).await.unwrap();
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
    assert_eq!(
        ids,
        ["a", "b", "c", "d", "e"],
        "listed in id order, durable"
    );
    assert_eq!(
        store.subscription("a").await.unwrap().unwrap(),
        changed,
        "every field as written"
    );
    assert_eq!(
        store.subscription("c").await.unwrap().unwrap(),
        broker,
        "a broker's settings as written"
    );
    assert_eq!(store.subscription("d").await.unwrap().unwrap(), nats);
    assert_eq!(store.subscription("e").await.unwrap().unwrap(), amqp);
    assert_eq!(
        store.delete_subscription("e").await.unwrap().unwrap().id,
        "e"
    );
    assert_eq!(
        store.delete_subscription("d").await.unwrap().unwrap().id,
        "d"
    );
    assert_eq!(
        store.delete_subscription("c").await.unwrap().unwrap().id,
        "c"
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

/// The generic core ([`knooppunt_store::Records::insert`], `replace`, `put`, `get`, `all`,
/// `remove`) keeps every kind apart under its own key, the same way: what goes in comes
/// back, a taken key is the kind's own error, a removed record is returned once.
async fn every_kind_goes_through_one_core(backend: &mut impl Backend) {
    use knooppunt_store::{AnyRecord, Grant, GrantState, Key, Kind, Replay, ReplayState, Session};
    let store = backend.open().await;
    let grant = Grant {
        entry: "k".into(),
        subscription: "k".into(),
        state: GrantState::Requested,
        requested_at: 1,
        decision: None,
    };
    let replay = Replay {
        id: "k".into(),
        subscription: "k".into(),
        requested_by: "gemeente".into(),
        from_ms: 1,
        until_ms: 2,
        state: ReplayState::Running,
        position: 0,
        queued: 0,
        last_event_at: None,
        created_at: 1,
        updated_at: 1,
        finished_at: None,
        error: None,
    };
    let session = Session {
        id: "k".into(),
        principal: "gemeente".into(),
        credential: "token:ab12".into(),
        csrf: "csrf".into(),
        created_at: 1,
        expires_at: 2,
        last_seen_at: 1,
    };
    // Every kind under the same key "k" (a grant: entry and subscription "k").
    let records: Vec<AnyRecord> = vec![
        subscription("k").into(),
        principal("k").into(),
        catalog_entry("k").into(),
        grant.into(),
        replay.into(),
        session.into(),
    ];
    let key = |kind: Kind| match kind {
        Kind::Grant => Key::Grant {
            entry: "k",
            subscription: "k",
        },
        _ => Key::One("k"),
    };
    for record in &records {
        let kind = record.kind();
        assert_eq!(store.get(kind, key(kind)).await.unwrap(), None, "{kind:?}");
        assert!(
            !store.replace(record.as_record()).await.unwrap(),
            "{kind:?}: nothing to replace yet"
        );
        store.insert(record.as_record()).await.unwrap();
        let taken = store.insert(record.as_record()).await.unwrap_err();
        match kind {
            Kind::Principal => assert!(matches!(taken, StoreError::NameTaken(_)), "{taken:?}"),
            _ => assert!(
                matches!(taken, StoreError::Conflict(_)),
                "{kind:?}: {taken:?}"
            ),
        }
    }
    let store = backend.reopen(store).await;
    for record in &records {
        let kind = record.kind();
        assert_eq!(
            store.get(kind, key(kind)).await.unwrap().as_ref(),
            Some(record),
            "{kind:?}: read back under its key, apart from the other kinds, durable"
        );
        assert_eq!(
            store.all(kind).await.unwrap(),
            std::slice::from_ref(record),
            "{kind:?}"
        );
        assert!(store.replace(record.as_record()).await.unwrap(), "{kind:?}");
        store.put(record.as_record()).await.unwrap();
        assert_eq!(
            store.all(kind).await.unwrap().len(),
            1,
            "{kind:?}: put in place"
        );
    }
    for record in &records {
        let kind = record.kind();
        assert_eq!(
            store.remove(kind, key(kind)).await.unwrap().as_ref(),
            Some(record),
            "{kind:?}: the removed record is returned"
        );
        assert_eq!(
            store.remove(kind, key(kind)).await.unwrap(),
            None,
            "{kind:?}"
        );
        assert_eq!(store.get(kind, key(kind)).await.unwrap(), None, "{kind:?}");
    }
    let store = backend.reopen(store).await;
    for &kind in Kind::ALL {
        assert!(
            store.all(kind).await.unwrap().is_empty(),
            "{kind:?}: removed for good"
        );
    }
    assert_eq!(
        store.former_owner("k").await.unwrap().as_deref(),
        Some("gemeente"),
        "a subscription removed through the core leaves its owner known"
    );
}
