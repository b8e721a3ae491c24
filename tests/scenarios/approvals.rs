//! Approval by the data owner: events of an approval-required catalog entry reach only the
//! subscriptions its owner granted, none is queued before the grant, a revocation stops
//! delivery at once (what was queued becomes dead letters), only the owner (or an admin)
//! decides and never for its own subscription; the grants survive a restart.

use std::time::Duration;

use knooppunt_tests::sink::{Reply, Sink};
use knooppunt_tests::wait::quiet;
use knooppunt_tests::{Answer, TestHub, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:BRP";
const PREFIX: &str = "urn:nld:oin:00000001823288444000:";
const TYPE: &str = "nl.brp.persoon-verhuisd";

/// The BRP's approval-required entry for [`TYPE`]; its id.
async fn guarded_entry(hub: &TestHub) -> String {
    let created = hub
        .call(
            Method::POST,
            "/v1/eventtypes",
            tokens::BRP_PUBLISHER,
            Some(
                json!({"source": PREFIX, "type": TYPE, "approval": "approval-required",
                        "description": "Een ingezetene is verhuisd."}),
            ),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["approval"], "approval-required");
    created.body["id"].as_str().unwrap().to_owned()
}

async fn subscribe(hub: &TestHub, token: &str, sink: &Sink, config: Value) -> String {
    hub.subscribe(token, &sink.url, TYPE, config).await
}

/// Publishes one event as the BRP; the receipt.
async fn publish(hub: &TestHub, id: &str) -> Value {
    let event = json!({"specversion": "1.0", "id": id, "source": SOURCE, "type": TYPE,
                       "datacontenttype": "application/json", "data": {"n": id}});
    hub.publish_as(tokens::BRP_PUBLISHER, &event).await.body
}

async fn decide(
    hub: &TestHub,
    token: &str,
    entry: &str,
    subscription: &str,
    body: Value,
) -> Answer {
    hub.call(
        Method::PUT,
        &format!("/v1/eventtypes/{entry}/approvals/{subscription}"),
        token,
        Some(body),
    )
    .await
}

/// The owner (the BRP) decides on the subscription's approval; the decision must stand.
async fn owner_decides(hub: &TestHub, entry: &str, subscription: &str, body: Value) {
    let decided = decide(hub, tokens::BRP_PUBLISHER, entry, subscription, body).await;
    assert_eq!(decided.status, 200, "{}", decided.body);
}

fn ids(received: &[knooppunt_tests::sink::Received]) -> Vec<String> {
    received
        .iter()
        .map(|r| r.json()["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn only_granted_subscriptions_receive_and_nothing_is_queued_before_the_grant() {
    let hub = TestHub::start().await;
    let entry = guarded_entry(&hub).await;
    let (kvk_sink, gemeente_sink) = (Sink::start().await, Sink::start().await);
    let kvk = subscribe(&hub, tokens::KVK, &kvk_sink, json!({})).await;
    let gemeente = subscribe(&hub, tokens::GEMEENTE, &gemeente_sink, json!({})).await;

    // Each subscription shows its request.
    let shown = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{kvk}"),
            tokens::KVK,
            None,
        )
        .await;
    let approvals = shown.body["approvals"].as_array().unwrap();
    assert_eq!(approvals.len(), 1, "{}", shown.body);
    assert_eq!(approvals[0]["eventtype"], entry.as_str());
    assert_eq!(approvals[0]["state"], "requested");
    assert_eq!(approvals[0]["owner"], "brp");

    // Before any grant: accepted, routed to nobody, queued for nobody.
    for n in 1..=3 {
        let receipt = publish(&hub, &format!("before-{n}")).await;
        assert_eq!(receipt["matchedSubscriptions"], 0, "{receipt}");
    }
    assert!(hub.store_pending(&kvk).await.is_empty());
    assert!(hub.store_pending(&gemeente).await.is_empty());

    // The owner sees both requests; a subscriber only its own.
    let requested = hub
        .call(
            Method::GET,
            "/v1/approvals?state=requested",
            tokens::BRP_PUBLISHER,
            None,
        )
        .await;
    assert_eq!(requested.status, 200, "{}", requested.body);
    let listed: Vec<&str> = requested
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["subscription"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), 2);
    assert!(listed.contains(&kvk.as_str()) && listed.contains(&gemeente.as_str()));
    let own = hub
        .call(Method::GET, "/v1/approvals", tokens::KVK, None)
        .await;
    assert_eq!(own.body.as_array().unwrap().len(), 1, "{}", own.body);
    assert_eq!(own.body[0]["subscription"], kvk.as_str());
    assert_eq!(own.body[0]["subscriber"], "kvk");
    // Pages follow the filter.
    let first = hub
        .call(
            Method::GET,
            "/v1/approvals?state=requested&pageSize=1",
            tokens::BRP_PUBLISHER,
            None,
        )
        .await;
    assert_eq!(first.body.as_array().unwrap().len(), 1);
    let link = first.header("link").unwrap().to_owned();
    assert!(
        link.contains("state=requested&pageSize=1&cursor="),
        "{link}"
    );
    let next = first.next_link().unwrap();
    let second = hub
        .call(Method::GET, &next, tokens::BRP_PUBLISHER, None)
        .await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(second.body.as_array().unwrap().len(), 1);
    assert_ne!(second.body[0], first.body[0]);
    hub.call(
        Method::GET,
        "/v1/approvals?state=maybe",
        tokens::BRP_PUBLISHER,
        None,
    )
    .await
    .assert_problem(400);

    // A subscriber cannot approve itself; another publisher cannot decide on the BRP's
    // entry; a decision needs a known state.
    let own_grant = decide(&hub, tokens::KVK, &entry, &kvk, json!({"state": "granted"}))
        .await
        .assert_problem(403);
    assert!(
        own_grant.body["detail"].as_str().unwrap().contains("brp"),
        "{}",
        own_grant.body
    );
    decide(
        &hub,
        tokens::PUBLISHER,
        &entry,
        &kvk,
        json!({"state": "granted"}),
    )
    .await
    .assert_problem(403);
    let bad = decide(
        &hub,
        tokens::BRP_PUBLISHER,
        &entry,
        &kvk,
        json!({"state": "approved", "why": "x"}),
    )
    .await
    .assert_problem(400);
    let mut params = bad.invalid_params();
    params.sort();
    assert_eq!(params, ["state", "why"]);

    // The owner grants the KVK and refuses the municipality (with a reason, required).
    let granted = decide(
        &hub,
        tokens::BRP_PUBLISHER,
        &entry,
        &kvk,
        json!({"state": "granted", "reason": "wettelijke grondslag"}),
    )
    .await;
    assert_eq!(granted.status, 200, "{}", granted.body);
    assert_eq!(granted.body["state"], "granted");
    assert_eq!(granted.body["decidedBy"], "brp");
    let unreasoned = decide(
        &hub,
        tokens::BRP_PUBLISHER,
        &entry,
        &gemeente,
        json!({"state": "refused"}),
    )
    .await
    .assert_problem(400);
    assert_eq!(unreasoned.invalid_params(), ["reason"]);
    let refused = decide(
        &hub,
        tokens::BRP_PUBLISHER,
        &entry,
        &gemeente,
        json!({"state": "refused", "reason": "geen grondslag"}),
    )
    .await;
    assert_eq!(refused.status, 200, "{}", refused.body);
    // Revoking what was never granted does not follow.
    decide(
        &hub,
        tokens::BRP_PUBLISHER,
        &entry,
        &gemeente,
        json!({"state": "revoked", "reason": "x"}),
    )
    .await
    .assert_problem(409);

    // From now on the granted one receives everything, the refused one nothing; what came
    // before the grant was never queued, so it never arrives.
    for n in 1..=3 {
        let receipt = publish(&hub, &format!("after-{n}")).await;
        assert_eq!(receipt["matchedSubscriptions"], 1, "{receipt}");
    }
    let received = kvk_sink.wait_for(3, Duration::from_secs(10)).await;
    assert_eq!(ids(&received), ["after-1", "after-2", "after-3"]);
    quiet(
        "a fourth delivery, or any to the gemeente",
        Duration::from_millis(500),
    )
    .await;
    assert_eq!(kvk_sink.deliveries().len(), 3);
    assert!(gemeente_sink.deliveries().is_empty());
    let shown = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{gemeente}"),
            tokens::GEMEENTE,
            None,
        )
        .await;
    assert_eq!(shown.body["approvals"][0]["state"], "refused");
    assert_eq!(shown.body["approvals"][0]["reason"], "geen grondslag");

    // The decisions survive a restart.
    let hub = hub.restart().await;
    let receipt = publish(&hub, "after-restart").await;
    assert_eq!(receipt["matchedSubscriptions"], 1, "{receipt}");
    let received = kvk_sink.wait_for(4, Duration::from_secs(10)).await;
    assert_eq!(ids(&received)[3], "after-restart");
    assert!(gemeente_sink.deliveries().is_empty());
}

/// An unordered worker leases three times as many deliveries ahead as it may send at once;
/// a revocation must not let those go out once its slots free.
#[tokio::test]
async fn a_revocation_sends_nothing_that_was_leased_ahead() {
    let mut options = knooppunt_tests::test_options();
    options.delivery.max_in_flight = 4;
    let hub = TestHub::builder().options(options).start().await;
    let entry = guarded_entry(&hub).await;
    let sink = Sink::start().await;
    sink.answer_always(Reply::status(204).after(Duration::from_millis(1500)));
    let subscription = subscribe(&hub, tokens::KVK, &sink, json!({"ordering": "unordered"})).await;
    owner_decides(&hub, &entry, &subscription, json!({"state": "granted"})).await;
    // In one batch, so that the worker's first lease finds all 16: four to send now and
    // twelve ahead for the slots that free next.
    let batch: Vec<Value> = (0..16)
        .map(|n| {
            json!({"specversion": "1.0", "id": format!("e{n}"), "source": SOURCE,
                   "type": TYPE, "datacontenttype": "application/json", "data": {"n": n}})
        })
        .collect();
    let published = hub
        .request(Method::POST, "/v1/events", tokens::BRP_PUBLISHER)
        .header("content-type", "application/cloudevents-batch+json")
        .body(Value::from(batch).to_string())
        .send()
        .await
        .unwrap();
    assert!(published.status().is_success(), "{}", published.status());
    sink.wait_for(4, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    owner_decides(
        &hub,
        &entry,
        &subscription,
        json!({"state": "revoked", "reason": "grondslag vervallen"}),
    )
    .await;
    let at_revocation = sink.deliveries().len();
    assert_eq!(at_revocation, 4, "the four sending when it was revoked");
    // The four at the sink answer; their slots free; nothing more may be sent.
    quiet(
        "a delivery after the revocation",
        Duration::from_millis(3000),
    )
    .await;
    let delivered = ids(&sink.deliveries());
    assert_eq!(
        delivered.len(),
        at_revocation,
        "sent after the revocation: {delivered:?}"
    );
}

#[tokio::test]
async fn a_revocation_stops_delivery_at_once_and_turns_the_queue_into_dead_letters() {
    let hub = TestHub::start().await;
    let entry = guarded_entry(&hub).await;
    let sink = Sink::start().await;
    // One at a time, slowly: most of the events are still queued when the owner revokes.
    sink.answer_always(Reply::status(204).after(Duration::from_millis(150)));
    let subscription = subscribe(&hub, tokens::KVK, &sink, json!({"ordering": "ordered"})).await;
    owner_decides(&hub, &entry, &subscription, json!({"state": "granted"})).await;
    for n in 0..20 {
        publish(&hub, &format!("e{n}")).await;
    }
    sink.wait_for(2, Duration::from_secs(10)).await;

    owner_decides(
        &hub,
        &entry,
        &subscription,
        json!({"state": "revoked", "reason": "grondslag vervallen"}),
    )
    .await;
    // At most the one attempt in flight may still arrive.
    let delivered_at_revocation = sink.deliveries().len();
    assert!(hub.store_pending(&subscription).await.len() <= 1);
    let receipt = publish(&hub, "after-revocation").await;
    assert_eq!(receipt["matchedSubscriptions"], 0, "{receipt}");
    quiet(
        "the delivery of the event published after the revocation",
        Duration::from_millis(800),
    )
    .await;
    let delivered = sink.deliveries().len();
    assert!(
        delivered <= delivered_at_revocation + 1,
        "{delivered} delivered, {delivered_at_revocation} at the revocation"
    );
    assert!(delivered < 20, "the revocation came while most were queued");

    // Whatever was queued is a dead letter saying why; with what arrived, all 20. The
    // attempt in flight at the revocation (at most one: ordered) may be both: it reached the
    // sink, but its result came after the withdrawal and was not recorded.
    let letters = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{subscription}/dead-letters"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(letters.status, 200, "{}", letters.body);
    let letters = letters.body.as_array().unwrap().clone();
    let mut seen: Vec<String> = ids(&sink.deliveries());
    let dead: Vec<String> = letters
        .iter()
        .map(|l| format!("e{}", l["sequence"].as_u64().unwrap() - 1))
        .collect();
    let overlap = dead.iter().filter(|d| seen.contains(d)).count();
    assert!(overlap <= 1, "{overlap} both delivered and dead");
    seen.extend(dead);
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 20, "{seen:?}");
    for letter in &letters {
        let reason = letter["reason"].as_str().unwrap();
        assert!(
            reason.contains("approval revoked") && reason.contains("grondslag vervallen"),
            "{reason}"
        );
    }
    // The subscriber cannot undo the revocation by redelivering.
    let first = letters[0]["id"].as_str().unwrap();
    let redeliver = hub
        .call(
            Method::POST,
            &format!("/v1/subscriptions/{subscription}/dead-letters/{first}/redeliver"),
            tokens::KVK,
            None,
        )
        .await
        .assert_problem(403);
    assert!(
        redeliver.body["detail"]
            .as_str()
            .unwrap()
            .contains("revoked"),
        "{}",
        redeliver.body
    );
    // Granted again, events flow again, and the dead letter can be redelivered.
    let again = decide(
        &hub,
        tokens::BRP_PUBLISHER,
        &entry,
        &subscription,
        json!({"state": "granted", "reason": "nieuwe grondslag"}),
    )
    .await;
    assert_eq!(again.status, 200, "{}", again.body);
    let redelivered = hub
        .call(
            Method::POST,
            &format!("/v1/subscriptions/{subscription}/dead-letters/{first}/redeliver"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(redelivered.status, 202, "{}", redelivered.body);
    sink.answer_always(Reply::status(204));
    let receipt = publish(&hub, "granted-again").await;
    assert_eq!(receipt["matchedSubscriptions"], 1, "{receipt}");
    let received = sink.wait_for(delivered + 2, Duration::from_secs(10)).await;
    assert!(ids(&received).contains(&"granted-again".to_owned()));
}

#[tokio::test]
async fn a_new_entry_asks_existing_subscriptions_and_the_owners_own_is_granted() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let kvk = subscribe(&hub, tokens::KVK, &sink, json!({})).await;
    // Admins subscribe too; this one will own the entry.
    let admin_sink = Sink::start().await;
    let admins = subscribe(&hub, tokens::ADMIN, &admin_sink, json!({})).await;
    // A subscription for other types is not asked.
    let other = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.kvk.inschrijving"]})),
        )
        .await;
    assert_eq!(other.status, 201, "{}", other.body);

    let created = hub
        .call(
            Method::POST,
            "/v1/eventtypes",
            tokens::ADMIN,
            Some(
                json!({"source": PREFIX, "type": TYPE, "approval": "approval-required",
                        "description": "Verhuizingen."}),
            ),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let entry = created.body["id"].as_str().unwrap();

    let all = hub
        .call(Method::GET, "/v1/approvals", tokens::ADMIN, None)
        .await;
    let states: Vec<(&str, &str)> = all
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["subscription"].as_str().unwrap(),
                g["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(states.len(), 2, "{}", all.body);
    assert!(states.contains(&(kvk.as_str(), "requested")));
    assert!(states.contains(&(admins.as_str(), "granted")));
    // Even an admin does not decide on its own subscription.
    decide(
        &hub,
        tokens::ADMIN,
        entry,
        &admins,
        json!({"state": "revoked", "reason": "x"}),
    )
    .await
    .assert_problem(403);
    // An admin decides on others' entries' requests (here its own entry).
    let receipt = publish(&hub, "one").await;
    assert_eq!(
        receipt["matchedSubscriptions"], 1,
        "only the owner's own: {receipt}"
    );
    admin_sink.wait_for(1, Duration::from_secs(10)).await;

    // Deleting the entry forgets its grants: the type is open again.
    let deleted = hub
        .call(
            Method::DELETE,
            &format!("/v1/eventtypes/{entry}"),
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(deleted.status, 204);
    let none = hub
        .call(Method::GET, "/v1/approvals", tokens::ADMIN, None)
        .await;
    assert_eq!(none.body, json!([]));
    let receipt = publish(&hub, "two").await;
    assert_eq!(receipt["matchedSubscriptions"], 2, "{receipt}");
}

/// The stream and replays read a subscription's events with its grants as they are now:
/// before the grant nothing of the gated entry, after it everything retained (the events
/// accepted before the grant included), and after a revocation nothing again.
#[tokio::test]
async fn the_stream_and_replays_follow_the_grants_as_they_are_now() {
    let hub = TestHub::start().await;
    let entry = guarded_entry(&hub).await;
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::GEMEENTE,
            Some(json!({"protocol": "HTTP", "types": [TYPE],
                        "config": {"delivery": "pull", "ordering": "unordered"}})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let subscription = created.body["id"].as_str().unwrap().to_owned();
    publish(&hub, "before-grant").await;
    let stream = format!("/v1/subscriptions/{subscription}/events");
    assert!(
        read_stream(&hub, &stream).await.is_empty(),
        "not granted: not readable"
    );
    owner_decides(&hub, &entry, &subscription, json!({"state": "granted"})).await;
    assert_eq!(
        read_stream(&hub, &stream).await,
        ["before-grant"],
        "granted: the retained event too"
    );
    // A replay of it now queues it (it was never queued: nothing is before the grant).
    let replay = hub
        .call(
            Method::POST,
            &format!("/v1/subscriptions/{subscription}/replays"),
            tokens::GEMEENTE,
            Some(json!({"from": "2020-01-01T00:00:00Z"})),
        )
        .await;
    assert_eq!(replay.status, 202, "{}", replay.body);
    let received = loop {
        let answer = hub
            .call(
                Method::POST,
                &format!("/v1/subscriptions/{subscription}/receive?maxWait=PT5S"),
                tokens::GEMEENTE,
                None,
            )
            .await;
        let ids: Vec<String> = answer
            .body
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect();
        if !ids.is_empty() {
            break (ids, answer.header("knooppunt-replays").map(str::to_owned));
        }
    };
    assert_eq!(received.0, ["before-grant"]);
    assert_eq!(
        received.1.as_deref(),
        replay.body["id"].as_str(),
        "queued by the replay"
    );
    let revoked = decide(
        &hub,
        tokens::BRP_PUBLISHER,
        &entry,
        &subscription,
        json!({"state": "revoked", "reason": "einde verwerkingsgrondslag"}),
    )
    .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    assert!(
        read_stream(&hub, &stream).await.is_empty(),
        "revoked: not readable again"
    );
}

/// The ids of a subscription's stream (`path`), from its oldest retained event.
async fn read_stream(hub: &TestHub, path: &str) -> Vec<String> {
    let answer = hub.call(Method::GET, path, tokens::GEMEENTE, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A revocation is linearizable: the time the API gives as `decided` is a point after which
/// no attempt of the entry's events starts, so between a revocation and the next grant at
/// most the attempts already in flight (`max_in_flight`) arrive at the sink, while the
/// publisher keeps publishing all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_starts_after_the_decided_time_of_a_revocation() {
    const MAX_IN_FLIGHT: usize = 4;
    let mut options = knooppunt_tests::test_options();
    options.delivery.max_in_flight = MAX_IN_FLIGHT;
    let hub = std::sync::Arc::new(TestHub::builder().options(options).start().await);
    let entry = guarded_entry(&hub).await;
    let sink = Sink::start().await;
    sink.answer_always(Reply::status(204).after(Duration::from_millis(2)));
    let subscription = subscribe(&hub, tokens::KVK, &sink, json!({"ordering": "unordered"})).await;
    owner_decides(&hub, &entry, &subscription, json!({"state": "granted"})).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publisher = {
        let (hub, stop) = (std::sync::Arc::clone(&hub), std::sync::Arc::clone(&stop));
        tokio::spawn(async move {
            // Batches of 50: a backlog builds, so the worker always has one to start.
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && n < 100_000 {
                let batch: Vec<Value> = (0..50)
                    .map(|i| {
                        json!({"specversion": "1.0", "id": format!("flow-{}", n + i),
                               "source": SOURCE, "type": TYPE})
                    })
                    .collect();
                n += 50;
                let answer = hub
                    .request(Method::POST, "/v1/events", tokens::BRP_PUBLISHER)
                    .header("content-type", "application/cloudevents-batch+json")
                    .body(Value::Array(batch).to_string())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status(), 202);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            n
        })
    };
    let millis = |answer: &Answer| {
        let text = answer.body["decided"].as_str().unwrap().to_owned();
        knooppunt_event::timestamp::epoch_millis(&text).unwrap()
    };
    let mut windows = Vec::new();
    for cycle in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let revoked = decide(
            &hub,
            tokens::BRP_PUBLISHER,
            &entry,
            &subscription,
            json!({"state": "revoked", "reason": format!("cycle {cycle}")}),
        )
        .await;
        assert_eq!(revoked.status, 200, "{}", revoked.body);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let granted = decide(
            &hub,
            tokens::BRP_PUBLISHER,
            &entry,
            &subscription,
            json!({"state": "granted"}),
        )
        .await;
        assert_eq!(granted.status, 200, "{}", granted.body);
        windows.push((millis(&revoked), millis(&granted)));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let published = publisher.await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let arrivals = sink.deliveries().len();
    assert!(arrivals > 50, "{arrivals} of {published} delivered");
    for (revoked, granted) in windows {
        let late = sink.arrived_between(revoked, granted);
        eprintln!("{late} arrived after the revocation decided at {revoked}");
        assert!(
            late <= MAX_IN_FLIGHT,
            "{late} deliveries arrived after the revocation decided at {revoked} (before the \
             grant at {granted}); at most max_in_flight ({MAX_IN_FLIGHT}) may"
        );
    }
}
