//! SIGTERM while events are published and delivered: the hub lets the delivery attempts in
//! flight finish and records them, exits 0, and after a restart nothing acknowledged is lost
//! and nothing that was delivered is delivered again.

use knooppunt_store::EventLog;
mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::IntoResponse;
use common::{HubProcess, config_with_admin};
use knooppunt_store::Inspect;
use knooppunt_store_embedded::EmbeddedStore;
use serde_json::json;

const TOKEN: &str = "shutdown-test-admin";
const EVENTS: usize = 40;

/// A sink that consents, takes 1 s per delivery, and records the ids it answered 204 for.
async fn slow_sink(answered: Arc<Mutex<Vec<String>>>) -> String {
    let handler = move |method: Method, body: Bytes| {
        let answered = Arc::clone(&answered);
        async move {
            if method == Method::OPTIONS {
                let mut response = StatusCode::OK.into_response();
                response
                    .headers_mut()
                    .insert("webhook-allowed-origin", HeaderValue::from_static("*"));
                return response;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            let event: serde_json::Value = serde_json::from_slice(&body).unwrap();
            answered
                .lock()
                .unwrap()
                .push(event["id"].as_str().unwrap().to_owned());
            StatusCode::NO_CONTENT.into_response()
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, axum::Router::new().fallback(handler)).await });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_attempts_in_flight_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_admin(dir.path(), TOKEN);
    let data = dir.path().join("data");
    let hub = HubProcess::start(&config, &data);
    let client = reqwest::Client::new();
    let answered = Arc::new(Mutex::new(Vec::new()));
    let sink = slow_sink(Arc::clone(&answered)).await;

    let created: serde_json::Value = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .json(
            &json!({"sink": sink, "protocol": "HTTP", "types": ["nl.test.shutdown"],
                      "config": {"ordering": "unordered"}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(created["state"], "active", "{created}");
    let subscription = created["id"].as_str().unwrap().to_owned();

    let mut acknowledged = Vec::new();
    for n in 0..EVENTS {
        let id = format!("e-{n}");
        let event = json!({"specversion": "1.0", "id": id, "source": "urn:nld:oin:1:systeem:test",
                           "type": "nl.test.shutdown", "data": {"n": n}});
        let answer = client
            .post(hub.url("/v1/events"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/cloudevents+json")
            .body(event.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 202);
        acknowledged.push(id);
    }
    // Let the first attempts get under way (each takes the sink 1 s), then SIGTERM.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopping = Instant::now();
    let status = tokio::task::spawn_blocking(move || hub.terminate())
        .await
        .unwrap();
    assert!(status.success(), "exit status {status:?}");
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "shutdown took {:?}",
        stopping.elapsed()
    );
    let delivered: BTreeSet<String> = answered.lock().unwrap().iter().cloned().collect();
    assert!(
        !delivered.is_empty(),
        "the attempts in flight at SIGTERM were finished, not dropped"
    );

    let store = EmbeddedStore::open(&data).unwrap();
    let mut pending = BTreeSet::new();
    for delivery in store
        .pending_deliveries(&subscription, usize::MAX)
        .await
        .unwrap()
    {
        pending.insert(store.event(delivery.seq).await.unwrap().unwrap().id.clone());
    }
    let twice: Vec<_> = delivered.intersection(&pending).collect();
    assert!(
        twice.is_empty(),
        "delivered but still pending (would be delivered again): {twice:?}"
    );
    let lost: Vec<_> = acknowledged
        .iter()
        .filter(|id| !delivered.contains(*id) && !pending.contains(*id))
        .collect();
    assert!(lost.is_empty(), "acknowledged but gone: {lost:?}");
}

/// SIGTERM does not wait for consumers waiting in a long poll (a pull `receive`, a stream
/// read with `maxWait`): they are answered at once and the hub stops well within the
/// time it allows itself (the helper fails the test past 30 s; the polls ask for 50 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_waiting_long_polls() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_admin(dir.path(), TOKEN);
    let mut hub = HubProcess::start(&config, &dir.path().join("data"));
    let client = reqwest::Client::new();
    let created: serde_json::Value = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .json(&json!({"protocol": "HTTP", "config": {"delivery": "pull"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let polls: Vec<_> = [
        format!("/v1/subscriptions/{id}/receive?maxWait=PT50S"),
        format!("/v1/subscriptions/{id}/events?maxWait=PT50S"),
    ]
    .into_iter()
    .map(|path| {
        let request = client
            .request(
                if path.contains("receive") {
                    reqwest::Method::POST
                } else {
                    reqwest::Method::GET
                },
                hub.url(&path),
            )
            .bearer_auth(TOKEN)
            .send();
        tokio::spawn(async move { request.await.map(|r| r.status().as_u16()) })
    })
    .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopping = Instant::now();
    let status = tokio::task::spawn_blocking(move || hub.stop())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        stopping.elapsed() < Duration::from_secs(20),
        "stopping took {:?}",
        stopping.elapsed()
    );
    for poll in polls {
        if let Ok(answered) = poll.await.unwrap() {
            assert_eq!(answered, 200, "answered with what there was");
        }
    }
}
