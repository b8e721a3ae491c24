//! Pull delivery on the real binary, on the embedded store and on PostgreSQL (a throwaway
//! cluster): consumers receive events under locks and acknowledge, release or reject them;
//! locks run out, `maxAttempts` ends in a dead letter, ordered subscriptions keep their order,
//! a kill -9 loses nothing acknowledged, and two hubs share one subscription.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Backend, HubProcess, config_with_admin, on_both_backends};
use knooppunt_test_postgres::Cluster;
use serde_json::{Value, json};

const TOKEN: &str = "pull-admin";
const TYPE: &str = "nl.test.pull";

fn event(id: &str) -> Value {
    json!({"specversion": "1.0", "id": id, "source": "urn:nld:oin:1:systeem:pull",
           "type": TYPE, "data": {"n": id}, "volgnummer": 7})
}

/// Publishes events in batches of 100; the sequence number the hub gave each id.
async fn publish(
    client: &reqwest::Client,
    hub: &HubProcess,
    ids: &[String],
) -> BTreeMap<u64, String> {
    let mut accepted = BTreeMap::new();
    for chunk in ids.chunks(100) {
        let batch: Vec<Value> = chunk.iter().map(|id| event(id)).collect();
        let receipt = common::publish_batch(client, hub, TOKEN, batch).await;
        for (one, id) in receipt["events"].as_array().unwrap().iter().zip(chunk) {
            accepted.insert(one["sequence"].as_u64().unwrap(), id.clone());
        }
    }
    accepted
}

/// A pull subscription's consumer on one hub.
#[derive(Clone)]
struct Consumer {
    client: reqwest::Client,
    base: String,
}

/// An event as received: its lock token, delivery count and the event.
#[derive(Debug, Clone)]
struct Held {
    token: String,
    count: u32,
    event: Value,
}

impl Held {
    fn id(&self) -> String {
        self.event["id"].as_str().unwrap().to_owned()
    }
}

impl Consumer {
    fn new(client: &reqwest::Client, hub: &HubProcess, subscription: &str) -> Consumer {
        Consumer {
            client: client.clone(),
            base: hub.url(&format!("/v1/subscriptions/{subscription}")),
        }
    }

    async fn receive(&self, max: usize, wait: &str) -> Vec<Held> {
        let answer = self
            .client
            .post(format!(
                "{}/receive?maxEvents={max}&maxWait={wait}",
                self.base
            ))
            .bearer_auth(TOKEN)
            .timeout(Duration::from_secs(70))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
        assert_eq!(
            answer.headers()["content-type"],
            "application/cloudevents-batch+json; charset=utf-8"
        );
        let list = |name: &str| -> Vec<String> {
            answer
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().split(", ").map(str::to_owned).collect())
                .unwrap_or_default()
        };
        let (tokens, counts) = (
            list("knooppunt-lock-tokens"),
            list("knooppunt-delivery-counts"),
        );
        let events: Vec<Value> = answer.json().await.unwrap();
        assert_eq!((tokens.len(), counts.len()), (events.len(), events.len()));
        tokens
            .into_iter()
            .zip(counts)
            .zip(events)
            .map(|((token, count), event)| Held {
                token,
                count: count.parse().unwrap(),
                event,
            })
            .collect()
    }

    /// Settles tokens; the answer (`succeeded`, `failed`).
    async fn settle(&self, operation: &str, tokens: &[&str], extra: Value) -> Value {
        let mut body = json!({"lockTokens": tokens});
        if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
            body.extend(extra);
        }
        let answer = self
            .client
            .post(format!("{}/{operation}", self.base))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{}", answer.text().await.unwrap());
        answer.json().await.unwrap()
    }

    async fn acknowledge(&self, held: &[Held]) -> Value {
        let tokens: Vec<&str> = held.iter().map(|h| h.token.as_str()).collect();
        self.settle("acknowledge", &tokens, json!({})).await
    }
}

async fn subscribe_pull(client: &reqwest::Client, hub: &HubProcess, config: Value) -> String {
    let mut config = config;
    config["delivery"] = json!("pull");
    let created = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .json(&json!({"protocol": "HTTP", "types": [TYPE], "config": config}))
        .send()
        .await
        .unwrap();
    let status = created.status();
    let body: Value = created.json().await.unwrap();
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["state"], "active", "no handshake for pull: {body}");
    let id = body["id"].as_str().unwrap().to_owned();
    assert_eq!(
        body["sink"],
        hub.url(&format!("/v1/subscriptions/{id}/receive")),
        "the sink is the hub's receive URL"
    );
    id
}

async fn dead_letters(
    client: &reqwest::Client,
    hub: &HubProcess,
    subscription: &str,
) -> Vec<Value> {
    let answer = client
        .get(hub.url(&format!(
            "/v1/subscriptions/{subscription}/dead-letters?pageSize=100"
        )))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    answer.json().await.unwrap()
}

fn ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

on_both_backends!(
    ten_thousand_events_on_the_embedded_store,
    ten_thousand_events_on_postgres,
    ten_thousand_events_are_received_and_acknowledged,
    "bulk"
);
on_both_backends!(
    locks_on_the_embedded_store,
    locks_on_postgres,
    locks_expire_and_events_are_released_rejected_or_given_up,
    "locks"
);
on_both_backends!(
    ordered_pull_on_the_embedded_store,
    ordered_pull_on_postgres,
    ordered_pull_keeps_the_order_under_releases,
    "ordered"
);
on_both_backends!(
    kill_9_on_the_embedded_store,
    kill_9_on_postgres,
    a_killed_hub_gives_back_what_was_not_acknowledged,
    "killed"
);
on_both_backends!(
    stream_paging_on_the_embedded_store,
    stream_paging_on_postgres,
    cursor_paging_under_concurrent_publishing_misses_nothing,
    "stream"
);
on_both_backends!(
    replay_on_the_embedded_store,
    replay_on_postgres,
    a_replay_delivers_its_window_and_cancel_stops_it,
    "replay"
);

/// 10,000 events through 4 consumers: every one acknowledged, none lost, the events exactly
/// as published.
async fn ten_thousand_events_are_received_and_acknowledged(backend: Backend) {
    const EVENTS: usize = 10_000;
    const LIMIT: Duration = Duration::from_secs(120);
    let dir = tempfile::tempdir().unwrap();
    let hub = backend.hub(dir.path(), "a", TOKEN);
    let client = reqwest::Client::new();
    let subscription = subscribe_pull(&client, &hub, json!({"ordering": "unordered"})).await;
    let published = publish(&client, &hub, &ids("bulk", EVENTS)).await;
    assert_eq!(published.len(), EVENTS);
    let started = Instant::now();
    let received = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let consumer = Consumer::new(&client, &hub, &subscription);
            let received = Arc::clone(&received);
            tokio::spawn(async move {
                loop {
                    let held = consumer.receive(100, "PT1S").await;
                    if held.is_empty() {
                        if received.lock().unwrap().len() >= EVENTS || started.elapsed() > LIMIT {
                            return;
                        }
                        continue;
                    }
                    for one in &held {
                        assert_eq!(one.event, event(&one.id()), "unchanged");
                        *received.lock().unwrap().entry(one.id()).or_default() += 1;
                    }
                    let settled = consumer.acknowledge(&held).await;
                    assert_eq!(
                        settled["succeeded"].as_array().unwrap().len(),
                        held.len(),
                        "{settled}"
                    );
                }
            })
        })
        .collect();
    for consumer in consumers {
        consumer.await.unwrap();
    }
    let received = received.lock().unwrap().clone();
    let elapsed = started.elapsed();
    assert_eq!(received.len(), EVENTS, "every event arrived");
    let duplicates: u32 = received.values().map(|n| n - 1).sum();
    assert_eq!(duplicates, 0, "no lock ran out, so no event came twice");
    eprintln!(
        "{}: {EVENTS} events received and acknowledged by 4 consumers in {elapsed:?}",
        backend.name()
    );
    let metrics = client
        .get(hub.url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            "knooppunt_queue_depth{{subscription=\"{subscription}\",owner=\"admin\"}} 0"
        )),
        "{metrics}"
    );
    assert!(metrics.contains(&format!("knooppunt_pull_received_total {EVENTS}")));
    assert!(metrics.contains(&format!(
        "knooppunt_pull_settled_total{{outcome=\"acknowledged\"}} {EVENTS}"
    )));
}

/// A lock that runs out hands the event to the next receive (the old token is refused);
/// reject makes a dead letter with the reason; release waits its delay; past maxAttempts the
/// event becomes a dead letter.
async fn locks_expire_and_events_are_released_rejected_or_given_up(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let hub = backend.hub(dir.path(), "a", TOKEN);
    let client = reqwest::Client::new();
    let subscription = subscribe_pull(
        &client,
        &hub,
        json!({"ordering": "unordered", "lockDuration": "PT1S", "maxAttempts": "3"}),
    )
    .await;
    let consumer = Consumer::new(&client, &hub, &subscription);
    publish(&client, &hub, &ids("e", 4)).await;

    let first = consumer.receive(4, "PT5S").await;
    assert_eq!(
        first.iter().map(Held::id).collect::<Vec<_>>(),
        ["e-0", "e-1", "e-2", "e-3"]
    );
    assert!(first.iter().all(|h| h.count == 1));
    let by_id: HashMap<String, Held> = first.into_iter().map(|h| (h.id(), h)).collect();
    let token = |id: &str| by_id[id].token.clone();

    // Reject e-1: a dead letter with the consumer's reason.
    let rejected = consumer
        .settle(
            "reject",
            &[&token("e-1")],
            json!({"reason": "schema v2 unknown"}),
        )
        .await;
    assert_eq!(rejected["succeeded"], json!([token("e-1")]), "{rejected}");
    // Release e-2 for 3 s.
    let released = consumer
        .settle("release", &[&token("e-2")], json!({"delay": "PT3S"}))
        .await;
    assert_eq!(released["succeeded"], json!([token("e-2")]));
    let released_at = Instant::now();
    // Renew e-3 so that it outlives e-0's lock.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let renewed = consumer.settle("renew", &[&token("e-3")], json!({})).await;
    assert_eq!(renewed["succeeded"], json!([token("e-3")]), "{renewed}");

    // e-0's lock runs out: the next receive gets it again, counted, under a new token; the
    // old token no longer settles it. e-3 is still locked, e-2 waits for its delay.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = consumer.receive(10, "PT0S").await;
    assert_eq!(again.iter().map(Held::id).collect::<Vec<_>>(), ["e-0"]);
    assert_eq!(again[0].count, 2);
    assert_ne!(again[0].token, token("e-0"));
    let stale = consumer
        .settle("acknowledge", &[&token("e-0")], json!({}))
        .await;
    assert_eq!(stale["failed"][0]["error"], "expired", "{stale}");
    assert_eq!(stale["failed"][0]["lockToken"], token("e-0"));
    let acked = consumer.acknowledge(&again).await;
    assert_eq!(acked["succeeded"].as_array().unwrap().len(), 1, "{acked}");
    let twice = consumer.acknowledge(&again).await;
    assert_eq!(
        twice["failed"][0]["error"], "unknown",
        "settled already: {twice}"
    );
    let garbage = consumer
        .settle("acknowledge", &["nonsense"], json!({}))
        .await;
    assert_eq!(garbage["failed"][0]["error"], "malformed");

    // e-2 comes back after its delay, not before, and is acknowledged. e-3 is never
    // settled: handed out again as each lock runs out, until maxAttempts (3) hand-overs,
    // then it becomes a dead letter instead of a fourth.
    let mut e3_counts = Vec::new();
    let mut e2_done = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(e2_done && dead_letters(&client, &hub, &subscription).await.len() == 2) {
        assert!(
            Instant::now() < deadline,
            "e-2 {e2_done}, e-3 handed {e3_counts:?}"
        );
        for one in consumer.receive(10, "PT1S").await {
            match one.id().as_str() {
                "e-2" => {
                    assert!(
                        released_at.elapsed() >= Duration::from_millis(2900),
                        "a release with delay PT3S came back after {:?}",
                        released_at.elapsed()
                    );
                    assert_eq!(one.count, 2);
                    consumer.acknowledge(std::slice::from_ref(&one)).await;
                    e2_done = true;
                }
                "e-3" => e3_counts.push(one.count),
                other => panic!("{other} came back"),
            }
        }
    }
    assert_eq!(e3_counts, [2, 3], "handed out maxAttempts times, no more");
    let dead = dead_letters(&client, &hub, &subscription).await;
    let reasons: Vec<&str> = dead.iter().map(|d| d["reason"].as_str().unwrap()).collect();
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert!(
        reasons[0].contains("rejected by the consumer: schema v2 unknown"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].contains("maxAttempts (3) exhausted"),
        "{reasons:?}"
    );
    eprintln!(
        "{}: lock expiry, reject, release and maxAttempts hold",
        backend.name()
    );
}

/// An ordered subscription hands out its oldest event alone, and the next only once it is
/// acknowledged: releases never reorder.
async fn ordered_pull_keeps_the_order_under_releases(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let hub = backend.hub(dir.path(), "a", TOKEN);
    let client = reqwest::Client::new();
    let subscription = subscribe_pull(&client, &hub, json!({"ordering": "ordered"})).await;
    let published = publish(&client, &hub, &ids("o", 30)).await;
    let expected: Vec<String> = published.values().cloned().collect();
    let consumers = [
        Consumer::new(&client, &hub, &subscription),
        Consumer::new(&client, &hub, &subscription),
    ];
    let mut acknowledged = Vec::new();
    let mut turn = 0usize;
    let deadline = Instant::now() + Duration::from_secs(60);
    while acknowledged.len() < expected.len() {
        assert!(
            Instant::now() < deadline,
            "only {} acknowledged",
            acknowledged.len()
        );
        turn += 1;
        let consumer = &consumers[turn % 2];
        let held = consumer.receive(10, "PT2S").await;
        assert!(
            held.len() <= 1,
            "an ordered subscription hands out one at a time"
        );
        let Some(one) = held.first() else { continue };
        // While it is held, the other consumer gets nothing.
        assert!(
            consumers[(turn + 1) % 2]
                .receive(10, "PT0S")
                .await
                .is_empty()
        );
        if turn.is_multiple_of(3) {
            let released = consumer.settle("release", &[&one.token], json!({})).await;
            assert_eq!(released["succeeded"].as_array().unwrap().len(), 1);
            continue;
        }
        consumer.acknowledge(&held).await;
        acknowledged.push(one.id());
    }
    assert_eq!(acknowledged, expected, "acknowledged in acceptance order");
    eprintln!("{}: ordered pull kept the order", backend.name());
}

/// kill -9 with locks outstanding: after the restart the unacknowledged events come back, the
/// acknowledged ones never.
async fn a_killed_hub_gives_back_what_was_not_acknowledged(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let mut hub = backend.hub(dir.path(), "a", TOKEN);
    let client = reqwest::Client::new();
    let subscription = subscribe_pull(
        &client,
        &hub,
        json!({"ordering": "unordered", "lockDuration": "PT2S"}),
    )
    .await;
    let consumer = Consumer::new(&client, &hub, &subscription);
    let all: HashSet<String> = publish(&client, &hub, &ids("k", 50))
        .await
        .into_values()
        .collect();
    let held = consumer.receive(30, "PT5S").await;
    assert_eq!(held.len(), 30);
    let acked: HashSet<String> = held[..10].iter().map(Held::id).collect();
    let settled = consumer.acknowledge(&held[..10]).await;
    assert_eq!(settled["succeeded"].as_array().unwrap().len(), 10);
    // The outstanding locks, by event: their tokens and counts.
    let outstanding: std::collections::HashMap<String, (String, u32)> = held[10..]
        .iter()
        .map(|h| (h.id(), (h.token.clone(), h.count)))
        .collect();
    hub.child.kill().unwrap(); // SIGKILL, 20 locks outstanding
    hub.child.wait().unwrap();
    drop(hub);

    let hub = backend.hub(dir.path(), "a", TOKEN);
    let consumer = Consumer::new(&client, &hub, &subscription);
    let mut after = HashSet::new();
    let mut stale_checked = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while after.len() < all.len() - acked.len() && Instant::now() < deadline {
        let held = consumer.receive(100, "PT1S").await;
        for one in &held {
            assert!(
                !acked.contains(&one.id()),
                "{} was acknowledged before the kill",
                one.id()
            );
            after.insert(one.id());
            // A lock from before the kill ran out: it counts, and its token is not handed
            // out again, so its stale holder cannot release the new holder's lock.
            if let Some((old_token, old_count)) = outstanding.get(&one.id()) {
                assert_eq!(one.count, old_count + 1, "{}: the count survived", one.id());
                assert_ne!(&one.token, old_token, "{}: a new token", one.id());
                let released = consumer.settle("release", &[old_token], json!({})).await;
                assert_eq!(
                    released["failed"].as_array().unwrap().len(),
                    1,
                    "{released}"
                );
                stale_checked += 1;
            }
        }
        if !held.is_empty() {
            let settled = consumer.acknowledge(&held).await;
            assert_eq!(
                settled["succeeded"].as_array().unwrap().len(),
                held.len(),
                "{settled}"
            );
        }
    }
    assert_eq!(stale_checked, outstanding.len());
    let expected: HashSet<String> = all.difference(&acked).cloned().collect();
    assert_eq!(after, expected, "every unacknowledged event came back");
    assert!(
        consumer.receive(100, "PT3S").await.is_empty(),
        "and nothing else"
    );
    eprintln!(
        "{}: kill -9 with 20 locks outstanding lost nothing",
        backend.name()
    );
}

/// Two hubs on one database share one pull subscription: no event is handed to two
/// consumers at once, and a lock taken on one hub is settled on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hubs_share_one_pull_subscription() {
    const EVENTS: usize = 2_000;
    let backend = Backend::postgres("shared");
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        backend.hub(dir.path(), "a", TOKEN),
        backend.hub(dir.path(), "b", TOKEN),
    );
    let client = reqwest::Client::new();
    let subscription = subscribe_pull(
        &client,
        &a,
        json!({"ordering": "unordered", "lockDuration": "PT60S"}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await; // hub B loads it

    // Received on A, acknowledged on B.
    publish(&client, &a, &ids("cross", 1)).await;
    let on_a = Consumer::new(&client, &a, &subscription)
        .receive(1, "PT5S")
        .await;
    assert_eq!(on_a.len(), 1);
    let on_b = Consumer::new(&client, &b, &subscription)
        .acknowledge(&on_a)
        .await;
    assert_eq!(on_b["succeeded"].as_array().unwrap().len(), 1, "{on_b}");

    let published = publish(&client, &b, &ids("shared", EVENTS)).await;
    assert_eq!(published.len(), EVENTS);
    let handed = Arc::new(Mutex::new(HashMap::<String, u32>::new()));
    let started = Instant::now();
    let consumers: Vec<_> = [&a, &a, &b, &b]
        .into_iter()
        .map(|hub| {
            let consumer = Consumer::new(&client, hub, &subscription);
            let handed = Arc::clone(&handed);
            tokio::spawn(async move {
                loop {
                    let held = consumer.receive(50, "PT1S").await;
                    if held.is_empty() {
                        if handed.lock().unwrap().len() >= EVENTS
                            || started.elapsed() > Duration::from_secs(90)
                        {
                            return;
                        }
                        continue;
                    }
                    for one in &held {
                        *handed.lock().unwrap().entry(one.id()).or_default() += 1;
                    }
                    consumer.acknowledge(&held).await;
                }
            })
        })
        .collect();
    for consumer in consumers {
        consumer.await.unwrap();
    }
    let handed = handed.lock().unwrap();
    assert_eq!(handed.len(), EVENTS, "every event was handed out");
    let twice: Vec<_> = handed.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "handed to two consumers: {twice:?}");
    eprintln!(
        "two hubs, four consumers: {EVENTS} events each handed out once in {:?}",
        started.elapsed()
    );
}

/// Reads the stream of `subscription` after `after`: the ids, and the cursor to go on from.
async fn read_stream(
    client: &reqwest::Client,
    hub: &HubProcess,
    subscription: &str,
    after: Option<&str>,
) -> (Vec<String>, String) {
    let mut url = hub.url(&format!(
        "/v1/subscriptions/{subscription}/events?limit=50&maxWait=PT1S"
    ));
    if let Some(after) = after {
        url.push_str(&format!("&after={after}"));
    }
    let answer = client.get(url).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    let cursor = answer.headers()["knooppunt-cursor"]
        .to_str()
        .unwrap()
        .to_owned();
    let events: Vec<Value> = answer.json().await.unwrap();
    let ids = events
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    (ids, cursor)
}

/// A reader paging through a subscription's stream while two publishers publish misses
/// nothing and sees nothing twice, in acceptance order; only the matching events.
async fn cursor_paging_under_concurrent_publishing_misses_nothing(backend: Backend) {
    const PER_PUBLISHER: usize = 600;
    let dir = tempfile::tempdir().unwrap();
    let hub = backend.hub(dir.path(), "a", TOKEN);
    let client = reqwest::Client::new();
    let created = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .json(&json!({"protocol": "HTTP", "types": [TYPE],
                      "filters": [{"prefix": {"id": "s-"}}],
                      "config": {"delivery": "pull"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let subscription = created.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let hub = Arc::new(hub);
    let publishers: Vec<_> = (0..2)
        .map(|p| {
            let (client, hub) = (client.clone(), Arc::clone(&hub));
            tokio::spawn(async move {
                let mut accepted = BTreeMap::new();
                for chunk in 0..PER_PUBLISHER / 10 {
                    // Half of them match the subscription's filter.
                    let ids: Vec<String> = (0..10)
                        .map(|i| {
                            let kind = if i % 2 == 0 { "s" } else { "x" };
                            format!("{kind}-{p}-{chunk}-{i}")
                        })
                        .collect();
                    accepted.extend(publish(&client, &hub, &ids).await);
                }
                accepted
            })
        })
        .collect();
    let mut read = Vec::new();
    let mut cursor: Option<String> = None;
    let mut done = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (ids, next) = read_stream(&client, &hub, &subscription, cursor.as_deref()).await;
        let caught_up = ids.is_empty() && cursor.as_deref() == Some(next.as_str());
        read.extend(ids);
        cursor = Some(next);
        if done && caught_up {
            break;
        }
        done = publishers.iter().all(|p| p.is_finished());
        assert!(Instant::now() < deadline, "read {} so far", read.len());
    }
    let mut published = BTreeMap::new();
    for publisher in publishers {
        published.extend(publisher.await.unwrap());
    }
    let expected: Vec<String> = published
        .values()
        .filter(|id| id.starts_with("s-"))
        .cloned()
        .collect();
    assert_eq!(read.len(), expected.len(), "nothing missed, nothing twice");
    assert_eq!(read, expected, "in acceptance order");
    eprintln!(
        "{}: a stream reader paged through {} matching events of {} published concurrently",
        backend.name(),
        read.len(),
        published.len()
    );
}

fn rfc3339(at: std::time::SystemTime) -> String {
    let ms = at
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // The hub's own formatting is not at hand here: seconds with milliseconds, UTC.
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        ms % 1000
    )
}

/// Days since 1970-01-01 as a civil date (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

async fn replay_state(client: &reqwest::Client, hub: &HubProcess, location: &str) -> Value {
    common::get_json(client, hub, TOKEN, location).await
}

/// A replay of a window delivers exactly the retained events of that window that match,
/// each naming the replay; a cancelled replay queues nothing more.
async fn a_replay_delivers_its_window_and_cancel_stops_it(backend: Backend) {
    use knooppunt_tests::sink::Sink;
    let dir = tempfile::tempdir().unwrap();
    let hub = backend.hub(dir.path(), "a", TOKEN);
    let client = reqwest::Client::new();
    let sink = Sink::start_for_any_hub().await;
    let created = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .json(
            &json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
                      "filters": [{"prefix": {"id": "m-"}}],
                      "config": {"ordering": "unordered"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let subscription = created.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let pause = || tokio::time::sleep(Duration::from_millis(100));
    publish(&client, &hub, &ids("m-early", 5)).await;
    pause().await;
    let from = rfc3339(std::time::SystemTime::now());
    pause().await;
    publish(&client, &hub, &ids("m-in", 5)).await;
    publish(&client, &hub, &ids("x-in", 5)).await;
    pause().await;
    let until = rfc3339(std::time::SystemTime::now());
    pause().await;
    publish(&client, &hub, &ids("m-late", 5)).await;
    sink.wait_for(15, Duration::from_secs(20)).await;

    let answer = client
        .post(hub.url(&format!("/v1/subscriptions/{subscription}/replays")))
        .bearer_auth(TOKEN)
        .json(&json!({"from": from, "until": until}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 202);
    let location = answer.headers()["location"].to_str().unwrap().to_owned();
    let replay: Value = answer.json().await.unwrap();
    let replay_id = replay["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(20);
    let finished = loop {
        let state = replay_state(&client, &hub, &location).await;
        if state["state"] != "running" {
            break state;
        }
        assert!(Instant::now() < deadline, "{state}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(finished["state"], "completed", "{finished}");
    assert_eq!(finished["eventsQueued"], 5);
    let delivered = sink.wait_for(20, Duration::from_secs(20)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let delivered_all = sink.deliveries();
    assert_eq!(
        delivered_all.len(),
        20,
        "the window's 5 once more, nothing else"
    );
    let mut replayed: Vec<String> = delivered[15..]
        .iter()
        .map(|d| {
            assert_eq!(d.header("knooppunt-replay"), Some(replay_id.as_str()));
            d.json()["id"].as_str().unwrap().to_owned()
        })
        .collect();
    replayed.sort();
    assert_eq!(replayed, ids("m-in", 5));
    assert!(
        delivered[..15]
            .iter()
            .all(|d| d.header("knooppunt-replay").is_none())
    );

    // A large window, cancelled at once: it stops, and queues nothing after.
    let puller = subscribe_pull(&client, &hub, json!({"ordering": "unordered"})).await;
    let start = rfc3339(std::time::SystemTime::now());
    publish(&client, &hub, &ids("big", 20_000)).await;
    let answer = client
        .post(hub.url(&format!("/v1/subscriptions/{puller}/replays")))
        .bearer_auth(TOKEN)
        .json(&json!({"from": start}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 202);
    let location = answer.headers()["location"].to_str().unwrap().to_owned();
    let cancelled = client
        .post(hub.url(&format!("{location}/cancel")))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 200);
    let cancelled: Value = cancelled.json().await.unwrap();
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    let queued = cancelled["eventsQueued"].as_u64().unwrap();
    assert!(queued < 20_000, "{cancelled}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let later = replay_state(&client, &hub, &location).await;
    assert_eq!(later["state"], "cancelled");
    assert_eq!(
        later["eventsQueued"], queued,
        "nothing queued after the cancel"
    );
    eprintln!(
        "{}: replay of a window delivered its 5 events; a cancelled replay stopped after {queued} of 20000",
        backend.name()
    );
}

/// On PostgreSQL too, a stream cursor whose events retention removed answers 410 with the
/// oldest cursor still complete, and reading on from it works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_cursor_answers_410_on_postgres() {
    let cluster = Cluster::start();
    let url = cluster.create_database("expired");
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_admin(dir.path(), TOKEN);
    let hub = HubProcess::start_with_env(
        &config,
        &dir.path().join("a"),
        &[
            ("KNOOPPUNT_STORE_BACKEND", "postgres"),
            ("KNOOPPUNT_STORE_URL", &url),
            ("KNOOPPUNT_INGEST_RETENTION", "PT0.5S"),
            ("KNOOPPUNT_INGEST_DEDUPE_WINDOW", "PT0.5S"),
            ("KNOOPPUNT_INGEST_SWEEP_INTERVAL", "PT0.2S"),
        ],
    );
    let client = reqwest::Client::new();
    let subscription = subscribe_pull(&client, &hub, json!({"ordering": "unordered"})).await;
    let consumer = Consumer::new(&client, &hub, &subscription);
    let (_, start) = read_stream(&client, &hub, &subscription, None).await;
    publish(&client, &hub, &ids("old", 3)).await;
    let held = consumer.receive(10, "PT5S").await;
    assert_eq!(held.len(), 3);
    consumer.acknowledge(&held).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let oldest = loop {
        let answer = client
            .get(hub.url(&format!(
                "/v1/subscriptions/{subscription}/events?after={start}"
            )))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        if answer.status() == 410 {
            let problem: Value = answer.json().await.unwrap();
            break problem["oldestCursor"].as_str().unwrap().to_owned();
        }
        assert_eq!(answer.status(), 200);
        assert!(
            Instant::now() < deadline,
            "the acknowledged events were never swept"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    publish(&client, &hub, &ids("new", 1)).await;
    let (read, _) = read_stream(&client, &hub, &subscription, Some(&oldest)).await;
    assert_eq!(read, ["new-0"], "read on from the oldest cursor");
}

/// A replay whose hub is killed (kill -9) in the middle is taken over by the other hub on
/// the same database and finishes where it was: every event of the window queued, none
/// skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_is_taken_over_when_its_hub_dies() {
    const EVENTS: usize = 3_000;
    let cluster = Cluster::start();
    let url = cluster.create_database("takeover");
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_admin(dir.path(), TOKEN);
    let env = [
        ("KNOOPPUNT_STORE_BACKEND", "postgres"),
        ("KNOOPPUNT_STORE_URL", url.as_str()),
        ("KNOOPPUNT_DELIVERY_REPLAY_RATE", "500"),
        ("KNOOPPUNT_DELIVERY_REPLAY_TAKEOVER", "PT2S"),
    ];
    let mut a = HubProcess::start_with_env(&config, &dir.path().join("a"), &env);
    let b = HubProcess::start_with_env(&config, &dir.path().join("b"), &env);
    let client = reqwest::Client::new();
    let subscription = subscribe_pull(&client, &a, json!({"ordering": "unordered"})).await;
    let start = rfc3339(std::time::SystemTime::now());
    let all: HashSet<String> = publish(&client, &a, &ids("window", EVENTS))
        .await
        .into_values()
        .collect();
    // Received and acknowledged once, so that the replay has them all to queue again.
    let consumer = Consumer::new(&client, &b, &subscription);
    let mut first = 0;
    while first < EVENTS {
        let held = consumer.receive(100, "PT5S").await;
        assert!(!held.is_empty(), "only {first} of {EVENTS} received");
        first += held.len();
        consumer.acknowledge(&held).await;
    }
    let answer = client
        .post(a.url(&format!("/v1/subscriptions/{subscription}/replays")))
        .bearer_auth(TOKEN)
        .json(&json!({"from": start}))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 202);
    let location = answer.headers()["location"].to_str().unwrap().to_owned();
    let replay_id = answer.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(Duration::from_millis(1500)).await; // paced: about 750 queued
    a.child.kill().unwrap(); // SIGKILL mid-replay
    a.child.wait().unwrap();
    let at_kill = replay_state(&client, &b, &location).await;
    assert_eq!(at_kill["state"], "running", "{at_kill}");
    let deadline = Instant::now() + Duration::from_secs(40);
    let finished = loop {
        let state = replay_state(&client, &b, &location).await;
        if state["state"] != "running" {
            break state;
        }
        assert!(Instant::now() < deadline, "not taken over: {state}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(finished["state"], "completed", "{finished}");
    assert_eq!(
        finished["eventsQueued"], EVENTS as u64,
        "{at_kill} then {finished}"
    );
    let mut again = HashSet::new();
    while again.len() < EVENTS {
        let answer = client
            .post(b.url(&format!(
                "/v1/subscriptions/{subscription}/receive?maxEvents=100&maxWait=PT5S"
            )))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        let replays = answer
            .headers()
            .get("knooppunt-replays")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let tokens = answer.headers()["knooppunt-lock-tokens"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            replays.split(", ").all(|r| r == replay_id),
            "each names the replay: {replays}"
        );
        let events: Vec<Value> = answer.json().await.unwrap();
        assert!(
            !events.is_empty(),
            "only {} of {EVENTS} came again",
            again.len()
        );
        again.extend(events.iter().map(|e| e["id"].as_str().unwrap().to_owned()));
        let tokens: Vec<&str> = tokens.split(", ").collect();
        consumer.settle("acknowledge", &tokens, json!({})).await;
    }
    assert_eq!(again, all, "every event of the window, none skipped");
    eprintln!(
        "replay taken over: {} queued by the killed hub, the rest by the other",
        at_kill["eventsQueued"]
    );
}
