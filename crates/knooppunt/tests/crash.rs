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
