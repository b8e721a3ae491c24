//! Kill -9 in the middle of publishing: every event the hub acknowledged is still there with
//! its pending delivery, and the hub starts again on the same data.

use knooppunt_store::EventLog;
mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{HubProcess, config_with_admin};
use knooppunt_store::Inspect;
use knooppunt_store_embedded::EmbeddedStore;
use serde_json::json;

const TOKEN: &str = "crash-test-admin";
/// Bounds: the load stops by itself.
const MAX_EVENTS: usize = 5_000;
const MAX_TIME: Duration = Duration::from_secs(20);
const KILL_AFTER_ACKS: usize = 300;

fn event(id: &str) -> String {
    json!({"specversion": "1.0", "id": id, "source": "urn:nld:oin:1:systeem:test",
           "type": "nl.test.crash", "data": {"filler": "x".repeat(900)}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_events_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_admin(dir.path(), TOKEN);
    let data = dir.path().join("data");
    let mut hub = HubProcess::start(&config, &data);
    let client = reqwest::Client::new();

    let created = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .json(
            &json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "types": ["nl.test.crash"]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let subscription: serde_json::Value = created.json().await.unwrap();
    let subscription = subscription["id"].as_str().unwrap().to_owned();

    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let started = Instant::now();
    let publishers: Vec<_> = (0..8)
        .map(|worker| {
            let client = client.clone();
            let url = hub.url("/v1/events");
            let acknowledged = Arc::clone(&acknowledged);
            tokio::spawn(async move {
                for i in 0..MAX_EVENTS / 8 {
                    if started.elapsed() > MAX_TIME {
                        return;
                    }
                    let id = format!("{worker}-{i}");
                    let answer = client
                        .post(&url)
                        .bearer_auth(TOKEN)
                        .header("content-type", "application/cloudevents+json")
                        .body(event(&id))
                        .send()
                        .await;
                    match answer {
                        Ok(response) if response.status() == 202 => {
                            acknowledged.lock().unwrap().push(id)
                        }
                        Ok(response) => panic!("unexpected answer {}", response.status()),
                        Err(_) => return, // the hub is gone
                    }
                }
            })
        })
        .collect();

    while acknowledged.lock().unwrap().len() < KILL_AFTER_ACKS && started.elapsed() < MAX_TIME {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    hub.child.kill().unwrap(); // SIGKILL, mid-load
    hub.child.wait().unwrap();
    for publisher in publishers {
        publisher.await.unwrap();
    }
    let acknowledged: Vec<String> = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() >= KILL_AFTER_ACKS,
        "only {} acknowledged",
        acknowledged.len()
    );

    {
        let store = EmbeddedStore::open(&data).unwrap();
        let mut stored = BTreeSet::new();
        for delivery in store
            .pending_deliveries(&subscription, usize::MAX)
            .await
            .unwrap()
        {
            stored.insert(store.event(delivery.seq).await.unwrap().unwrap().id.clone());
        }
        let lost: Vec<_> = acknowledged
            .iter()
            .filter(|id| !stored.contains(*id))
            .collect();
        assert!(
            lost.is_empty(),
            "{} of {} acknowledged events were lost: {lost:?}",
            lost.len(),
            acknowledged.len()
        );
    }

    let hub = HubProcess::start(&config, &data);
    let again = client
        .post(hub.url("/v1/events"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/cloudevents+json")
        .body(event(&acknowledged[0]))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 202);
    let receipt: serde_json::Value = again.json().await.unwrap();
    assert_eq!(
        receipt["duplicate"], true,
        "the restarted hub knows what it acknowledged"
    );
    let list: serde_json::Value = client
        .get(hub.url("/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list[0]["id"], json!(subscription));
    assert!(hub.terminate().success());
}

/// Kill -9 while an ordered subscription (the default) is being delivered to a real sink,
/// its events published in one batch before: after the restart every event arrives, in
/// acceptance order before the kill and after it, with no gap between the two, and the
/// only events sent twice are the last ones sent before the kill (their results were not
/// yet recorded): at most one window of deliveries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_delivery_keeps_its_order_across_kill_9() {
    ordered_delivery_across_kill_9(&[]).await;
}

/// The same on PostgreSQL: the hub started again on the same database (its leases of the
/// killed hub's window run out first, after the lease margin).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_delivery_keeps_its_order_across_kill_9_on_postgres() {
    let cluster = knooppunt_test_postgres::Cluster::start();
    let url = cluster.create_database("ordered_crash");
    ordered_delivery_across_kill_9(&[
        ("KNOOPPUNT_STORE_BACKEND", "postgres"),
        ("KNOOPPUNT_STORE_URL", url.as_str()),
        ("KNOOPPUNT_DELIVERY_LEASE_MARGIN", "PT2S"),
    ])
    .await;
}

async fn ordered_delivery_across_kill_9(env: &[(&str, &str)]) {
    use knooppunt_tests::sink::Sink;
    const EVENTS: usize = 3_000;
    const KILL_AFTER_DELIVERIES: usize = 500;
    /// The most deliveries of an ordered subscription sent before their results are
    /// recorded (the hub's window).
    const WINDOW: usize = 256;
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_admin(dir.path(), TOKEN);
    let data = dir.path().join("data");
    let mut hub = HubProcess::start_with_env(&config, &data, env);
    let client = reqwest::Client::new();
    let sink = Sink::start_for_any_hub().await;
    let created = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(TOKEN)
        // A short timeout: on PostgreSQL the killed hub's lease runs out after it (and the
        // lease margin) before the hub started again may lease the window again.
        .json(
            &json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.test.crash"],
                      "config": {"timeout": "PT2S"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let ids: Vec<String> = (0..EVENTS).map(|i| format!("ordered-{i:05}")).collect();
    for chunk in ids.chunks(500) {
        let batch: Vec<serde_json::Value> = chunk
            .iter()
            .map(|id| serde_json::from_str(&event(id)).unwrap())
            .collect();
        let answer = client
            .post(hub.url("/v1/events"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/cloudevents-batch+json")
            .body(serde_json::to_string(&batch).unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 202, "{}", answer.text().await.unwrap());
    }
    let started = Instant::now();
    while sink.deliveries().len() < KILL_AFTER_DELIVERIES {
        assert!(
            started.elapsed() < MAX_TIME,
            "{} delivered",
            sink.deliveries().len()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    hub.child.kill().unwrap(); // SIGKILL, mid-delivery
    hub.child.wait().unwrap();
    let position = |received: &knooppunt_tests::sink::Received| {
        let id = received.json()["id"].as_str().unwrap().to_owned();
        ids.binary_search(&id).unwrap()
    };
    let before: Vec<usize> = sink.deliveries().iter().map(position).collect();

    let _hub = HubProcess::start_with_env(&config, &data, env);
    let started = Instant::now();
    loop {
        let seen: BTreeSet<usize> = sink.deliveries().iter().map(position).collect();
        if seen.len() == EVENTS {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} of {EVENTS} delivered after the restart",
            seen.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after: Vec<usize> = sink.deliveries()[before.len()..]
        .iter()
        .map(position)
        .collect();
    let in_order = |run: &[usize]| run.windows(2).all(|pair| pair[0] < pair[1]);
    assert!(in_order(&before), "in acceptance order before the kill");
    assert_eq!(
        before,
        (0..before.len()).collect::<Vec<_>>(),
        "none left out"
    );
    assert!(in_order(&after), "in acceptance order after the restart");
    assert_eq!(before[0], 0);
    let last_before = *before.last().unwrap();
    assert!(
        after[0] <= last_before + 1,
        "no gap: {} after {last_before}",
        after[0]
    );
    assert_eq!(*after.last().unwrap(), EVENTS - 1);
    let again = last_before + 1 - after[0];
    assert!(
        again <= WINDOW,
        "{again} sent twice: only those whose results were not recorded"
    );
    eprintln!(
        "{} delivered before the kill, {} after it, {again} of them twice",
        before.len(),
        after.len()
    );
}
