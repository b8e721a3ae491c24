//! The bounded backlog through the real binary and its configuration (`[backlog]`), on
//! both backends: a stalled subscriber sheds its oldest events and never makes publishers
//! wait; past the hub's limit publishers get 503 until the subscribers catch up; dead
//! letters go after their retention.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{Backend, HubProcess, config_with_admin, on_both_backends};
use knooppunt_tests::sink::{Reply, Sink};
use serde_json::{Value, json};

const TOKEN: &str = "backlog-admin";
const TYPE: &str = "nl.test.backlog";
const WAIT: Duration = Duration::from_secs(30);

/// A hub with these `[backlog]` settings (and a quick breaker), measured every 100 ms.
fn hub(backend: &Backend, dir: &std::path::Path, backlog: &str) -> HubProcess {
    let config = config_with_admin(dir, TOKEN);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text = text.replace("[delivery]\n", "[delivery]\nbreaker_max_pause = \"PT1S\"\n");
    text.push_str(&format!(
        "\n[backlog]\ncheck_interval = \"PT0.1S\"\n{backlog}\n"
    ));
    std::fs::write(&config, text).unwrap();
    backend.hub_with(&config, dir, "hub")
}

async fn publish(client: &reqwest::Client, hub: &HubProcess, id: &str) -> (u16, Value) {
    let event = json!({"specversion": "1.0", "id": id, "source": "urn:nld:backlog",
                       "type": TYPE, "data": "x".repeat(4000)});
    let answer = client
        .post(hub.url("/v1/events"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/cloudevents+json")
        .body(event.to_string())
        .send()
        .await
        .unwrap();
    (answer.status().as_u16(), answer.json().await.unwrap())
}

async fn subscribe(client: &reqwest::Client, hub: &HubProcess, sink: &Sink) -> String {
    common::subscribe(client, hub, TOKEN, (&sink.url, TYPE), "unordered").await
}

async fn get(client: &reqwest::Client, hub: &HubProcess, path: &str) -> Value {
    common::get_json(client, hub, TOKEN, path).await
}

async fn stalled_sink() -> Sink {
    let sink = Sink::start_for_any_hub().await;
    sink.answer_always(Reply::status(503).with_header("Retry-After", "1"));
    sink
}

/// Waits until the sink took (2xx) every one of `ids`.
async fn wait_for(sink: &Sink, ids: &BTreeSet<String>) {
    let deadline = Instant::now() + WAIT;
    loop {
        let took: BTreeSet<String> = sink
            .deliveries()
            .iter()
            .filter(|d| d.status / 100 == 2)
            .map(|d| d.json()["id"].as_str().unwrap().to_owned())
            .collect();
        if ids.is_subset(&took) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} delivered",
            ids.intersection(&took).count(),
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A stalled subscriber past its 40 KB sheds its oldest into dead letters; its neighbour
/// gets everything, and no publisher is ever refused, though the hub's own limit (200 KB)
/// is far below what was published (600 KB).
async fn a_stalled_subscriber_sheds_and_never_stops_publishers(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(
        &backend,
        dir.path(),
        "max_bytes = 200000\nsubscription_max_bytes = 40000",
    );
    let client = reqwest::Client::new();
    let (stalled, healthy) = (stalled_sink().await, Sink::start_for_any_hub().await);
    let stuck = subscribe(&client, &hub, &stalled).await;
    subscribe(&client, &hub, &healthy).await;

    let mut ids = BTreeSet::new();
    for n in 0..150 {
        let id = format!("e{n:03}");
        let (status, body) = publish(&client, &hub, &id).await;
        assert_eq!(
            status,
            202,
            "{} ({}): {body}\n{}",
            backend.name(),
            id,
            hub.log().join("\n")
        );
        ids.insert(id);
    }
    wait_for(&healthy, &ids).await;

    let deadline = Instant::now() + WAIT;
    let status = loop {
        let status = get(&client, &hub, &format!("/v1/subscriptions/{stuck}/status")).await;
        if status["backlogBytes"].as_u64().unwrap() <= 40_000 && status["shed"].is_object() {
            break status;
        }
        assert!(Instant::now() < deadline, "never shed: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status["backlogLimit"]["policy"], "shed-oldest");
    let dead = get(
        &client,
        &hub,
        &format!("/v1/subscriptions/{stuck}/dead-letters?pageSize=200"),
    )
    .await;
    let dead = dead.as_array().unwrap();
    assert!(dead.len() >= 140, "{} shed", dead.len());
    let sequences: Vec<u64> = dead
        .iter()
        .map(|d| d["sequence"].as_u64().unwrap())
        .collect();
    let mut sorted = sequences.clone();
    sorted.sort_unstable();
    assert_eq!(sequences, sorted, "oldest first");
    assert!(dead.iter().all(|d| {
        d["reason"]
            .as_str()
            .unwrap()
            .contains("subscription_max_bytes")
    }));
}

/// Past the hub's limit, publishers get 503 with Retry-After; every acknowledged event is
/// delivered once the sink recovers, and publishing resumes.
async fn past_the_hub_limit_publishers_wait_and_nothing_is_lost(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(
        &backend,
        dir.path(),
        "max_bytes = 60000\nsubscription_max_bytes = 0",
    );
    let client = reqwest::Client::new();
    let sink = stalled_sink().await;
    subscribe(&client, &hub, &sink).await;

    let mut acknowledged = BTreeSet::new();
    let refused = loop {
        let id = format!("e{}", acknowledged.len());
        let (status, body) = publish(&client, &hub, &id).await;
        if status != 202 {
            break (status, body);
        }
        acknowledged.insert(id);
        assert!(acknowledged.len() < 40, "{}: never refused", backend.name());
    };
    assert_eq!(refused.0, 503, "{}", refused.1);
    assert_eq!(refused.1["type"], "urn:knooppunt:problem:backlog-full");
    assert!(
        (14..=16).contains(&acknowledged.len()),
        "{}",
        acknowledged.len()
    );

    sink.answer_always(Reply::status(204));
    wait_for(&sink, &acknowledged).await;
    let deadline = Instant::now() + WAIT;
    while publish(&client, &hub, "after").await.0 != 202 {
        assert!(Instant::now() < deadline, "never accepted again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Dead letters are kept for `dead_letter_retention` (2 s here) and then removed by the
/// sweep, each subscription's loss an audit entry.
async fn dead_letters_go_after_their_retention(backend: Backend) {
    const RETENTION: Duration = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let hub = hub(
        &backend,
        dir.path(),
        "dead_letter_retention = \"PT2S\"\n\n[ingest]\nsweep_interval = \"PT0.1S\"",
    );
    let client = reqwest::Client::new();
    // Every event refused as malformed: a dead letter at once.
    let refusing = Sink::start_for_any_hub().await;
    refusing.answer_always(Reply::status(400));
    let id = subscribe(&client, &hub, &refusing).await;
    let published = Instant::now();
    for n in 0..3 {
        assert_eq!(publish(&client, &hub, &format!("d{n}")).await.0, 202);
    }
    let path = format!("/v1/subscriptions/{id}/dead-letters?pageSize=10");
    let deadline = Instant::now() + WAIT;
    let mut most = 0;
    loop {
        let listed = get(&client, &hub, &path).await.as_array().unwrap().len();
        if listed < most {
            assert!(
                published.elapsed() >= RETENTION,
                "{}: a dead letter went {:?} after its event was published",
                backend.name(),
                published.elapsed()
            );
        }
        most = most.max(listed);
        if most == 3 && listed == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}: {listed} dead letters listed, at most {most}",
            backend.name()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The sweep's audit entries are chained on by the audit writer after the removal:
    // wait for them, then there must be exactly three dead letters in them.
    loop {
        let audit = get(&client, &hub, "/v1/audit?name=subscription.expire").await;
        let expired: u64 = audit
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["details"]["deadLetters"].as_u64().unwrap())
            .sum();
        if expired >= 3 || Instant::now() >= deadline {
            assert_eq!(expired, 3, "{}: {audit}", backend.name());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

on_both_backends!(
    dead_letter_retention_on_the_embedded_store,
    dead_letter_retention_on_postgres,
    dead_letters_go_after_their_retention,
    "deadletters"
);
on_both_backends!(
    shedding_on_the_embedded_store,
    shedding_on_postgres,
    a_stalled_subscriber_sheds_and_never_stops_publishers,
    "shedding"
);
on_both_backends!(
    hub_limit_on_the_embedded_store,
    hub_limit_on_postgres,
    past_the_hub_limit_publishers_wait_and_nothing_is_lost,
    "hublimit"
);
