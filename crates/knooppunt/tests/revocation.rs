//! Revoking an approval while events flow to an ordered subscription, on both backends:
//! every event its sink took (answered 2xx) leaves a receipt, none is both delivered and a
//! dead letter, and after each revocation's `decided` time at most the one attempt already
//! under way arrives.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Backend, HubProcess, on_both_backends};
use knooppunt_tests::sink::{Reply, Sink};
use serde_json::{Value, json};

const TOKEN: &str = "revocation-admin-token";
const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:BRP";
const TYPE: &str = "nl.test.verhuisd";

/// Every item of a list, following its `Link: rel="next"` pages.
async fn all_pages(
    client: &reqwest::Client,
    hub: &HubProcess,
    token: &str,
    path: &str,
) -> Vec<Value> {
    let mut items = Vec::new();
    let mut next = Some(format!("{path}?pageSize=500"));
    while let Some(path) = next.take() {
        let answer = client
            .get(hub.url(&path))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "GET {path}");
        next = answer
            .headers()
            .get("link")
            .and_then(|l| l.to_str().ok())
            .and_then(|l| Some(l.strip_prefix('<')?.split('>').next()?.to_owned()));
        let page: Vec<Value> = answer.json().await.unwrap();
        items.extend(page);
    }
    items
}

async fn revoking_under_load_keeps_every_receipt(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let hub = Arc::new(backend.hub(dir.path(), "a", TOKEN));
    let client = reqwest::Client::new();
    let entry = client
        .post(hub.url("/v1/eventtypes"))
        .bearer_auth(TOKEN)
        .json(
            &json!({"source": "urn:nld:oin:00000001823288444000:", "type": TYPE,
                      "approval": "approval-required", "description": "Verhuisd."}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(entry.status(), 201);
    let entry = entry.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let subscriber: Value = client
        .post(hub.url("/v1/principals"))
        .bearer_auth(TOKEN)
        .json(&json!({"name": "abonnee", "roles": ["subscriber"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let subscriber = subscriber["token"].as_str().unwrap().to_owned();
    let sink = Sink::start_for_any_hub().await;
    sink.answer_always(Reply::status(204).after(Duration::from_millis(1)));
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
                      "config": {"ordering": "ordered"}});
    let subscription = common::create_subscription(&client, &hub, &subscriber, &body).await;
    let approval = format!("/v1/eventtypes/{entry}/approvals/{subscription}");
    let decide = |body: Value| {
        let request = client
            .put(hub.url(&approval))
            .bearer_auth(TOKEN)
            .json(&body);
        async move {
            let answer = request.send().await.unwrap();
            assert_eq!(answer.status(), 200);
            let body: Value = answer.json().await.unwrap();
            knooppunt_event::timestamp::epoch_millis(body["decided"].as_str().unwrap()).unwrap()
        }
    };
    decide(json!({"state": "granted"})).await;

    // About 1,000 events a second in batches of 50, more than the ordered subscription
    // takes, so that a backlog of more than a page of the withdrawal builds.
    let sequences = Arc::new(Mutex::new(BTreeMap::<String, u64>::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publisher = {
        let (client, hub, stop) = (client.clone(), Arc::clone(&hub), Arc::clone(&stop));
        let sequences = Arc::clone(&sequences);
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && n < 20_000 {
                let batch: Vec<Value> = (0..50)
                    .map(|i| {
                        json!({"specversion": "1.0", "id": format!("l-{}", n + i),
                               "source": SOURCE, "type": TYPE})
                    })
                    .collect();
                n += 50;
                let receipts = common::publish_batch(&client, &hub, TOKEN, batch).await;
                sequences.lock().unwrap().extend(
                    receipts["events"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|receipt| {
                            (
                                receipt["id"].as_str().unwrap().to_owned(),
                                receipt["sequence"].as_u64().unwrap(),
                            )
                        }),
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let mut windows = Vec::new();
    for cycle in 0..2 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let revoked = decide(json!({"state": "revoked", "reason": format!("cycle {cycle}")})).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let granted = decide(json!({"state": "granted"})).await;
        windows.push((revoked, granted));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    publisher.await.unwrap();
    // Until the sink has been quiet for a second (the last backlog delivered).
    let mut seen = sink.deliveries().len();
    for _ in 0..120 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = sink.deliveries().len();
        if now == seen {
            break;
        }
        seen = now;
    }

    let sequences = sequences.lock().unwrap().clone();
    let taken: BTreeSet<u64> = sink
        .deliveries()
        .iter()
        .map(|r| sequences[r.json()["id"].as_str().unwrap()])
        .collect();
    let receipts: BTreeSet<u64> = all_pages(
        &client,
        &hub,
        &subscriber,
        &format!("/v1/subscriptions/{subscription}/receipts"),
    )
    .await
    .iter()
    .map(|r| r["sequence"].as_u64().unwrap())
    .collect();
    let dead: Vec<Value> = all_pages(
        &client,
        &hub,
        &subscriber,
        &format!("/v1/subscriptions/{subscription}/dead-letters"),
    )
    .await;
    let dead_letters: BTreeSet<u64> = dead
        .iter()
        .map(|d| d["sequence"].as_u64().unwrap())
        .collect();
    eprintln!(
        "{}: {} published, {} taken by the sink, {} receipts, {} dead letters",
        backend.name(),
        sequences.len(),
        taken.len(),
        receipts.len(),
        dead_letters.len()
    );
    assert!(
        dead.iter()
            .all(|d| d["reason"].as_str().unwrap().contains("revoked")),
        "{dead:?}"
    );
    assert!(
        dead_letters.len() > 100,
        "a backlog was withdrawn each time: {} dead letters",
        dead_letters.len()
    );
    let without: Vec<&u64> = taken.difference(&receipts).collect();
    assert!(
        without.is_empty(),
        "{} events the sink took have no receipt: {without:?}",
        without.len()
    );
    let both: Vec<&u64> = receipts.intersection(&dead_letters).collect();
    assert!(
        both.is_empty(),
        "{} events are both delivered and dead letters: {both:?}",
        both.len()
    );
    for (revoked, granted) in windows {
        let late = sink.arrived_between(revoked, granted);
        assert!(
            late <= 1,
            "{late} deliveries arrived after the revocation decided at {revoked} (before the \
             grant at {granted}); an ordered subscription has at most one under way"
        );
    }
    drop(client);
    let hub = Arc::into_inner(hub).expect("the publisher is done");
    assert!(hub.terminate().success());
}

on_both_backends!(
    revoking_under_load_keeps_receipts_on_the_embedded_store,
    revoking_under_load_keeps_receipts_on_postgres,
    revoking_under_load_keeps_every_receipt,
    "revocation"
);
