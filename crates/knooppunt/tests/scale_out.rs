//! Several hub processes on one PostgreSQL database (a throwaway cluster): they share
//! subscriptions, events and the work of delivering them, and when one is killed the other
//! finishes its work.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{HubProcess, config_with_admin, get_json};
use knooppunt_test_postgres::Cluster;
use knooppunt_tests::console;
use knooppunt_tests::sink::{Consent, Reply, Sink};
use serde_json::{Value, json};

const TOKEN: &str = "scale-out-admin";

/// A hub on the database at `url`, with leases that run out 2 s after an attempt's timeout
/// (so that a killed hub's deliveries are taken over quickly).
fn hub(dir: &std::path::Path, name: &str, url: &str) -> HubProcess {
    let config = config_with_admin(dir, TOKEN);
    HubProcess::start_with_env(
        &config,
        &dir.join(name),
        &[
            ("KNOOPPUNT_STORE_BACKEND", "postgres"),
            ("KNOOPPUNT_STORE_URL", url),
            ("KNOOPPUNT_STORE_POOL_SIZE", "8"),
            ("KNOOPPUNT_DELIVERY_LEASE_MARGIN", "PT2S"),
        ],
    )
}

fn event(id: &str) -> Value {
    json!({"specversion": "1.0", "id": id, "source": "urn:nld:oin:1:systeem:test",
           "type": "nl.test.scale", "data": {"n": id}})
}

async fn publish(client: &reqwest::Client, hub: &HubProcess, event: &Value) -> Option<Value> {
    let answer = client
        .post(hub.url("/v1/events"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/cloudevents+json")
        .body(event.to_string())
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()?;
    if answer.status() != 202 {
        return None;
    }
    answer.json().await.ok()
}

async fn subscribe(client: &reqwest::Client, hub: &HubProcess, sink: &Sink, config: Value) {
    let created = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .json(
            &json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.test.scale"],
                      "config": config}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
}

/// The ids of the events a sink received, in order, each once (first arrival).
fn first_arrivals(sink: &Sink) -> Vec<String> {
    let mut seen = HashSet::new();
    sink.deliveries()
        .iter()
        .map(|d| d.json()["id"].as_str().unwrap().to_owned())
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

async fn attempts_made(client: &reqwest::Client, hub: &HubProcess) -> f64 {
    let metrics = client
        .get(hub.url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    metrics
        .lines()
        .filter(|l| l.starts_with("knooppunt_delivery_attempts_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hubs_share_subscriptions_events_and_deliveries() {
    let cluster = Cluster::start();
    let url = cluster.create_database("hubs");
    let dir = tempfile::tempdir().unwrap();
    let a = hub(dir.path(), "a", &url);
    let b = hub(dir.path(), "b", &url);
    let client = reqwest::Client::new();
    let sink = Sink::start_for_any_hub().await;

    // A subscription created on hub A routes events published on hub B within a second.
    subscribe(&client, &a, &sink, json!({"ordering": "unordered"})).await;
    let created = Instant::now();
    let mut probe = 0;
    loop {
        probe += 1;
        let receipt = publish(&client, &b, &event(&format!("probe-{probe}")))
            .await
            .expect("hub B accepts");
        if receipt["matchedSubscriptions"] == 1 {
            break;
        }
        assert!(
            created.elapsed() < Duration::from_secs(1),
            "hub B did not route to hub A's new subscription within a second"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let routed_after = created.elapsed();

    // Events published to either hub are all delivered, and both hubs deliver.
    let mut ids = Vec::new();
    for i in 0..300 {
        let id = format!("e-{i}");
        let to = if i % 2 == 0 { &a } else { &b };
        publish(&client, to, &event(&id)).await.expect("accepted");
        ids.push(id);
    }
    let arrived = Instant::now();
    loop {
        let got: HashSet<String> = first_arrivals(&sink).into_iter().collect();
        if ids.iter().all(|id| got.contains(id)) {
            break;
        }
        assert!(
            arrived.elapsed() < Duration::from_secs(30),
            "only {} of {} events arrived",
            ids.iter().filter(|id| got.contains(*id)).count(),
            ids.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (by_a, by_b) = (
        attempts_made(&client, &a).await,
        attempts_made(&client, &b).await,
    );
    assert!(
        by_a > 0.0 && by_b > 0.0,
        "both hubs deliver: {by_a} and {by_b} attempts"
    );
    eprintln!("routed after {routed_after:?}; attempts by A {by_a}, by B {by_b}");

    // A principal created on hub A works on hub B within a second; disabled on A, it is
    // refused on B within a second.
    let created = client
        .post(a.url("/v1/principals"))
        .bearer_auth(TOKEN)
        .json(&json!({"name": "rvo", "roles": ["publisher"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let token = created.json::<Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let status_on_b = |id: String| {
        let (client, token, url) = (client.clone(), token.clone(), b.url("/v1/events"));
        async move {
            client
                .post(url)
                .bearer_auth(token)
                .header("content-type", "application/cloudevents+json")
                .body(event(&id).to_string())
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let until = |wanted: u16, what: &'static str| {
        let status_on_b = &status_on_b;
        async move {
            let started = Instant::now();
            let mut n = 0;
            loop {
                n += 1;
                if status_on_b(format!("{what}-{n}")).await == wanted {
                    return started.elapsed();
                }
                assert!(
                    started.elapsed() < Duration::from_secs(1),
                    "hub B did not see the principal {what} on hub A within a second"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let seen_after = until(202, "created").await;
    let disabled = client
        .patch(a.url("/v1/principals/rvo"))
        .bearer_auth(TOKEN)
        .json(&json!({"disabled": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(disabled.status(), 200);
    let refused_after = until(403, "disabled").await;
    eprintln!("principal seen on B after {seen_after:?}, disabled after {refused_after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_hub_loses_nothing_and_the_other_keeps_the_order() {
    const MAX_EVENTS: usize = 1_200;
    const MAX_TIME: Duration = Duration::from_secs(15);
    const KILL_AFTER_ACKS: usize = 200;

    let cluster = Cluster::start();
    let url = cluster.create_database("failover");
    let dir = tempfile::tempdir().unwrap();
    let mut a = hub(dir.path(), "a", &url);
    let b = hub(dir.path(), "b", &url);
    let client = reqwest::Client::new();
    let sink = Sink::start_for_any_hub().await;
    // Ordered (the default): one delivery in flight across both hubs, in acceptance order.
    subscribe(&client, &a, &sink, json!({"timeout": "PT2S"})).await;
    tokio::time::sleep(Duration::from_millis(600)).await; // hub B loads it

    // Publishers on both hubs; hub A is killed under load.
    let acknowledged = Arc::new(Mutex::new(BTreeMap::<u64, String>::new()));
    let started = Instant::now();
    let (a_url, b_url) = (a.url("/v1/events"), b.url("/v1/events"));
    let publishers: Vec<_> = (0..6)
        .map(|worker| {
            let client = client.clone();
            let url = if worker % 2 == 0 {
                a_url.clone()
            } else {
                b_url.clone()
            };
            let acknowledged = Arc::clone(&acknowledged);
            tokio::spawn(async move {
                for i in 0..MAX_EVENTS / 6 {
                    if started.elapsed() > MAX_TIME {
                        return;
                    }
                    let id = format!("{worker}-{i}");
                    let sent = client
                        .post(&url)
                        .bearer_auth(TOKEN)
                        .header("content-type", "application/cloudevents+json")
                        .body(event(&id).to_string())
                        .timeout(Duration::from_secs(5))
                        .send()
                        .await;
                    let Ok(answer) = sent else {
                        continue; // hub A is gone: not acknowledged
                    };
                    if answer.status() != 202 {
                        continue;
                    }
                    let Ok(receipt) = answer.json::<Value>().await else {
                        continue;
                    };
                    let sequence = receipt["sequence"].as_u64().unwrap();
                    acknowledged.lock().unwrap().insert(sequence, id);
                }
            })
        })
        .collect();
    while acknowledged.lock().unwrap().len() < KILL_AFTER_ACKS {
        assert!(
            started.elapsed() < MAX_TIME,
            "the hubs acknowledged too little"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    for publisher in publishers {
        publisher.await.unwrap();
    }

    // Hub B delivers everything acknowledged (hub A's leased delivery after its lease runs
    // out), in acceptance order.
    let expected: Vec<String> = acknowledged.lock().unwrap().values().cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = first_arrivals(&sink);
        let ours: Vec<&String> = got.iter().filter(|id| !id.starts_with("probe")).collect();
        if ours.len() >= expected.len() {
            let expected_refs: Vec<&String> = expected.iter().collect();
            // Events accepted but never acknowledged (hub A died before answering) may be
            // delivered too: they are in the database. Compare the acknowledged ones.
            let acknowledged: HashSet<&String> = expected.iter().collect();
            let delivered_acknowledged: Vec<&String> = ours
                .iter()
                .copied()
                .filter(|id| acknowledged.contains(id))
                .collect();
            if delivered_acknowledged.len() == expected.len() {
                assert_eq!(
                    delivered_acknowledged, expected_refs,
                    "delivered in acceptance order"
                );
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} acknowledged events delivered after hub A was killed; hub B's log:\n{}",
            got.len(),
            expected.len(),
            b.log().join("\n")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        sink.most_in_flight(),
        1,
        "an ordered subscription has one delivery in flight across both hubs"
    );
    eprintln!(
        "{} acknowledged events delivered in order after the kill",
        expected.len()
    );
}

/// `knooppunt check --store` says whether the hub can use its database (and creates the
/// schema in an empty one); a wrong URL is reported, not a crash.
#[test]
fn check_store_reports_the_database() {
    let cluster = Cluster::start();
    let url = cluster.create_database("checked");
    let check = |url: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_knooppunt"))
            .args(["check", "--store"])
            .env("KNOOPPUNT_STORE_BACKEND", "postgres")
            .env("KNOOPPUNT_STORE_URL", url)
            .output()
            .unwrap()
    };
    let good = check(&url);
    let said = String::from_utf8_lossy(&good.stdout);
    assert!(good.status.success(), "{said}");
    assert!(
        said.contains("postgres (schema 23): reachable, 0 subscriptions"),
        "{said}"
    );
    assert!(
        said.contains("  disk: "),
        "the disk use is reported: {said}"
    );
    assert!(said.contains("(kept P7D after delivery"), "{said}");
    assert!(said.contains("P7D as a dead letter"), "{said}");
    assert_eq!(cluster.psql("checked", "SELECT count(*) FROM events"), "0");

    let wrong = format!(
        "postgres://knooppunt:secret@127.0.0.1:{}/nothere",
        cluster.port()
    );
    let bad = check(&wrong);
    let said = String::from_utf8_lossy(&bad.stdout);
    assert_eq!(bad.status.code(), Some(1), "{said}");
    assert!(said.contains("NOT USABLE"), "{said}");
    assert!(
        !said.contains("secret"),
        "the password is not printed: {said}"
    );

    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_knooppunt"))
        .args(["check", "--store"])
        .env("KNOOPPUNT_STORE_BACKEND", "postgres")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("store.url"), "{said}");
}

#[tokio::test]
async fn a_console_session_is_known_to_every_hub_and_ends_on_all() {
    let cluster = Cluster::start();
    let url = cluster.create_database("sessions");
    let dir = tempfile::tempdir().unwrap();
    let a = hub(dir.path(), "a", &url);
    let b = hub(dir.path(), "b", &url);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // Signed in on hub A.
    let fields = [("method", "token"), ("token", TOKEN)];
    let (_, signed_in) = console::sign_in(&client, &a.url(""), &fields).await;
    assert_eq!(signed_in.status(), 303);
    let session = console::cookie_pair(&console::set_cookie(&signed_in, "knooppunt_session"));
    // Hub B knows the session, and its forms take the same token.
    let page = client
        .get(b.url("/console"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csrf = console::hidden_field(&page.text().await.unwrap(), "_csrf");
    let out = client
        .post(b.url("/console/logout"))
        .header("cookie", &session)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("_csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 303);
    // Signed out on B: ended on A too.
    let page = client
        .get(a.url("/console"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(
        page.status(),
        303,
        "a session ended on one hub is ended on all"
    );
}

/// A hub that sheds a subscription's deliveries (past its `subscription_max_age`) tells
/// the other hub, whose worker gives back what it leased ahead instead of sending it once
/// its slots free. Only hub A measures its backlog often; hub B never sheds by itself. The
/// attempts already at the sink, which it takes, are deliveries with a receipt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shed_on_one_hub_is_not_sent_from_the_other_hubs_lease_ahead() {
    let cluster = Cluster::start();
    let url = cluster.create_database("recall");
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_admin(dir.path(), TOKEN);
    let start = |name: &str, check: &str| {
        HubProcess::start_with_env(
            &config,
            &dir.path().join(name),
            &[
                ("KNOOPPUNT_STORE_BACKEND", "postgres"),
                ("KNOOPPUNT_STORE_URL", &url),
                ("KNOOPPUNT_STORE_POOL_SIZE", "8"),
                ("KNOOPPUNT_DELIVERY_MAX_IN_FLIGHT", "8"),
                ("KNOOPPUNT_BACKLOG_SUBSCRIPTION_MAX_AGE", "PT2S"),
                ("KNOOPPUNT_BACKLOG_CHECK_INTERVAL", check),
            ],
        )
    };
    let a = start("a", "PT0.2S");
    let _b = start("b", "PT5M");
    let client = reqwest::Client::new();
    let sink = Sink::start_for_any_hub().await;
    // Slow: every attempt is still at the sink when the events turn two seconds old.
    sink.answer_always(Reply::status(204).after(Duration::from_secs(5)));
    subscribe(&client, &a, &sink, json!({"ordering": "unordered"})).await;
    // Both hubs know the subscription before anything is published.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    wait_for_hubs(&client, &a, 2).await;
    let batch: Vec<Value> = (0..32).map(|n| event(&format!("r{n}"))).collect();
    common::publish_batch(&client, &a, TOKEN, batch).await;
    // The hubs share eight slots: each sends four and leases twelve ahead (three per
    // slot), eight at the sink.
    sink.wait_for(8, Duration::from_secs(5)).await;
    // Past two seconds hub A sheds all 32, the ones leased ahead on either hub too;
    // the attempts at the sink answer at five seconds, and their slots free.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let arrived = first_arrivals(&sink);
    assert_eq!(
        arrived.len(),
        8,
        "only the attempts at the sink when the deliveries were shed: {arrived:?}"
    );
    // Those eight the sink took (204): deliveries with a receipt, not dead letters; the
    // other 24 are dead letters.
    let listed = get_json(&client, &a, TOKEN, "/v1/subscriptions").await;
    let id = listed[0]["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/subscriptions/{id}/dead-letters");
    let letters = get_json(&client, &a, TOKEN, &path).await;
    assert_eq!(letters.as_array().unwrap().len(), 24, "{letters}");
    let receipts = get_json(
        &client,
        &a,
        TOKEN,
        &format!("/v1/subscriptions/{id}/receipts"),
    )
    .await;
    let received: HashSet<u64> = receipts
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(received.len(), 8, "{receipts}");
    assert!(
        letters
            .as_array()
            .unwrap()
            .iter()
            .all(|l| !received.contains(&l["sequence"].as_u64().unwrap())),
        "none both delivered and a dead letter: {letters}"
    );
}

/// The hubs sharing the deliveries, as `hub` last heard (its metric).
async fn hubs_known(client: &reqwest::Client, hub: &HubProcess) -> Option<f64> {
    let metrics = client
        .get(hub.url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("knooppunt_delivery_hubs "))
        .and_then(|value| value.parse().ok())
}

/// Waits until `hub` knows of `count` hubs sharing the deliveries; how long that took.
async fn wait_for_hubs(client: &reqwest::Client, hub: &HubProcess, count: usize) -> Duration {
    let started = Instant::now();
    loop {
        let known = hubs_known(client, hub).await;
        if known == Some(count as f64) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the hub knows of {known:?} hubs, not {count}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Publishes `count` events of `kind` to `hub` in one batch.
async fn publish_batch(client: &reqwest::Client, hub: &HubProcess, kind: &str, count: usize) {
    let batch: Vec<Value> = (0..count)
        .map(|n| {
            json!({"specversion": "1.0", "id": format!("{kind}-{n}"),
                   "source": "urn:nld:oin:1:systeem:test", "type": kind})
        })
        .collect();
    common::publish_batch(client, hub, TOKEN, batch).await;
}

/// A sink that answers after `delay`, granting `rate` requests a minute, subscribed (on
/// `hub`, unordered) to the events of type `kind`.
async fn unordered_sink(
    client: &reqwest::Client,
    hub: &HubProcess,
    kind: &str,
    rate: Option<u32>,
    delay: Duration,
) -> Sink {
    let sink = Sink::start().await;
    sink.consent(Consent::Grant {
        origin: "*".into(),
        rate: rate.map(|r| r.to_string()),
    });
    sink.answer_always(Reply::status(204).after(delay));
    let created = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .json(
            &json!({"sink": sink.url, "protocol": "HTTP", "types": [kind],
                      "config": {"ordering": "unordered"}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    sink
}

/// Two hubs keep together to a subscription's `max_in_flight` and to the rate its sink
/// granted (`WebHook-Allowed-Rate`), not each hub on its own; a hub that stops leaves its
/// share to the other at once, one that is killed once it has been silent for five seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hubs_keep_together_to_a_subscriptions_slots_and_granted_rate() {
    let cluster = Cluster::start();
    let url = cluster.create_database("shares");
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_admin(dir.path(), TOKEN);
    let start = |name: &str| {
        HubProcess::start_with_env(
            &config,
            &dir.path().join(name),
            &[
                ("KNOOPPUNT_STORE_BACKEND", "postgres"),
                ("KNOOPPUNT_STORE_URL", &url),
                ("KNOOPPUNT_STORE_POOL_SIZE", "8"),
                ("KNOOPPUNT_DELIVERY_MAX_IN_FLIGHT", "3"),
            ],
        )
    };
    let a = start("a");
    let mut b = start("b");
    let client = reqwest::Client::new();
    wait_for_hubs(&client, &a, 2).await;
    wait_for_hubs(&client, &b, 2).await;

    // Slow answers: three slots between two hubs (two and one), three at the sink at most.
    let slow = unordered_sink(
        &client,
        &a,
        "nl.test.slow",
        None,
        Duration::from_millis(700),
    )
    .await;
    // 60 a minute granted: the two hubs pace at 30 a minute each.
    let paced = unordered_sink(&client, &a, "nl.test.paced", Some(60), Duration::ZERO).await;
    // Answered while only hub A runs, later.
    let alone = unordered_sink(
        &client,
        &a,
        "nl.test.alone",
        None,
        Duration::from_millis(700),
    )
    .await;
    // Both hubs know the subscriptions before anything is published.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = (
        attempts_made(&client, &a).await,
        attempts_made(&client, &b).await,
    );
    publish_batch(&client, &a, "nl.test.slow", 15).await;
    publish_batch(&client, &b, "nl.test.paced", 8).await;
    slow.wait_for(15, Duration::from_secs(60)).await;
    let paced_arrivals = paced.wait_for(8, Duration::from_secs(60)).await;
    assert_eq!(
        slow.most_in_flight(),
        3,
        "the hubs together keep to max_in_flight (3)"
    );
    let after = (
        attempts_made(&client, &a).await,
        attempts_made(&client, &b).await,
    );
    assert!(
        after.0 > before.0 && after.1 > before.1,
        "both hubs delivered: {before:?} -> {after:?}"
    );
    // Each hub's first is sent at once, then one every two seconds: eight take at least
    // six seconds, against three if each hub kept to the granted rate alone.
    let span = paced_arrivals[7].at.duration_since(paced_arrivals[0].at);
    assert!(
        span >= Duration::from_millis(5_500),
        "8 deliveries at 60 a minute across both hubs took only {span:?}"
    );

    // Hub B stops: it says so, and hub A takes all three slots at once, not after B's
    // silence.
    b.stop();
    let took = wait_for_hubs(&client, &a, 1).await;
    assert!(
        took < Duration::from_secs(4),
        "a stopped hub left after {took:?}"
    );
    publish_batch(&client, &a, "nl.test.alone", 9).await;
    alone.wait_for(9, Duration::from_secs(60)).await;
    assert_eq!(alone.most_in_flight(), 3, "hub A alone has all three slots");

    // A hub that is killed is forgotten once it has been silent for five seconds.
    let mut c = start("c");
    wait_for_hubs(&client, &a, 2).await;
    c.child.kill().unwrap();
    c.child.wait().unwrap();
    let took = wait_for_hubs(&client, &a, 1).await;
    assert!(
        took >= Duration::from_secs(3),
        "forgotten after {took:?}: sooner than its silence"
    );
}

/// A sink's `Retry-After` to one hub holds for every hub (http-webhook.md: the sender MUST
/// refrain from sending until then): the other hub sends nothing before it ends either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sinks_retry_after_to_one_hub_pauses_every_hub() {
    let cluster = Cluster::start();
    let url = cluster.create_database("pauses");
    let dir = tempfile::tempdir().unwrap();
    let a = hub(dir.path(), "a", &url);
    let b = hub(dir.path(), "b", &url);
    let client = reqwest::Client::new();
    wait_for_hubs(&client, &a, 2).await;
    wait_for_hubs(&client, &b, 2).await;
    let sink = unordered_sink(&client, &a, "nl.test.paused", None, Duration::ZERO).await;
    sink.answer([Reply::status(429).with_header("retry-after", "4")]);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    publish_batch(&client, &a, "nl.test.paused", 1).await;
    let asked = sink.wait_for(1, Duration::from_secs(10)).await[0].at;
    // Queued on both hubs while the pause lasts: each hub's workers are told of them.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (n, hub) in [&a, &b, &a, &b].into_iter().enumerate() {
        let batch: Vec<Value> = (0..5)
            .map(|i| {
                json!({"specversion": "1.0", "id": format!("later-{n}-{i}"),
                       "source": "urn:nld:oin:1:systeem:test", "type": "nl.test.paused"})
            })
            .collect();
        common::publish_batch(&client, hub, TOKEN, batch).await;
    }
    let arrived = sink.wait_for(22, Duration::from_secs(30)).await;
    let before: Vec<(String, Duration)> = arrived[1..]
        .iter()
        .filter(|d| d.at < asked + Duration::from_secs(4))
        .map(|d| (d.json()["id"].as_str().unwrap().to_owned(), d.at - asked))
        .collect();
    assert!(
        before.is_empty(),
        "sent while the sink's Retry-After (4 s) lasted: {before:?}"
    );
}

/// A revocation on one hub holds on every hub at its decided time: the hub that decides
/// waits until the other has applied it (and cut the subscription) before it answers, so
/// between a revocation and the next grant at most the attempts already in flight across
/// both hubs (`max_in_flight`, 2) arrive, while both hubs deliver all along.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revocation_holds_on_every_hub_at_its_decided_time() {
    const MAX_IN_FLIGHT: usize = 2;
    let two = TwoHubs::start("revocations", MAX_IN_FLIGHT).await;
    let (a, b, client) = (&two.a, &two.b, &two.client);
    let entry = client
        .post(a.url("/v1/eventtypes"))
        .bearer_auth(TOKEN)
        .json(&json!({"source": "urn:nld:oin:1:", "type": "nl.test.scale",
                      "approval": "approval-required", "description": "Geschaald."}))
        .send()
        .await
        .unwrap();
    assert_eq!(entry.status(), 201);
    let entry = entry.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (sink, subscription) = two.subscriber_with_sink("abonnee").await;
    let approval = format!("/v1/eventtypes/{entry}/approvals/{subscription}");
    let decide = |hub: &HubProcess, body: Value| {
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
    decide(a, json!({"state": "granted"})).await;
    // Batches to both hubs all along: a backlog that both deliver from.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publisher = {
        let (client, stop) = (client.clone(), Arc::clone(&stop));
        let hubs = [a.url(""), b.url("")];
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && n < 100_000 {
                let batch: Vec<Value> = (0..40).map(|i| event(&format!("r-{}", n + i))).collect();
                let answer = client
                    .post(format!("{}/v1/events", hubs[(n / 40) % 2]))
                    .bearer_auth(TOKEN)
                    .header("content-type", "application/cloudevents-batch+json")
                    .body(Value::Array(batch).to_string())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status(), 202);
                n += 40;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let mut windows = Vec::new();
    for cycle in 0..4_u32 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let deciding = if cycle.is_multiple_of(2) { a } else { b };
        let revoked = decide(
            deciding,
            json!({"state": "revoked", "reason": format!("cycle {cycle}")}),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let granted = decide(deciding, json!({"state": "granted"})).await;
        windows.push((revoked, granted));
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    publisher.await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let arrivals = sink.deliveries().len();
    assert!(arrivals > 50, "{} delivered", arrivals);
    for (revoked, granted) in windows {
        let late = sink.arrived_between(revoked, granted);
        eprintln!("{late} arrived after the revocation decided at {revoked}");
        assert!(
            late <= MAX_IN_FLIGHT,
            "{late} deliveries arrived after the revocation decided at {revoked} (before the \
             grant at {granted}); at most max_in_flight ({MAX_IN_FLIGHT}) across the hubs may"
        );
    }
}

/// Disabling a principal on one hub suspends its subscriptions on every hub before the
/// answer: after it, at most the attempts already in flight arrive, and the other hub shows
/// them suspended; enabling it again resumes delivery from both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_principal_receives_nothing_from_any_hub() {
    const MAX_IN_FLIGHT: usize = 2;
    let two = TwoHubs::start("offboarding", MAX_IN_FLIGHT).await;
    let (a, b, client) = (&two.a, &two.b, &two.client);
    let (sink, subscription) = two.subscriber_with_sink("vertrekt").await;
    // A backlog on both hubs, unique events.
    let publish_round = |round: usize| {
        let hub = if round.is_multiple_of(2) { a } else { b };
        let batch: Vec<Value> = (0..40).map(|i| event(&format!("o-{round}-{i}"))).collect();
        common::publish_batch(client, hub, TOKEN, batch)
    };
    for round in 0..10 {
        publish_round(round).await;
    }
    sink.wait_for(20, Duration::from_secs(10)).await;
    let set_disabled = |hub: &HubProcess, disabled: bool| {
        let request = client
            .patch(hub.url("/v1/principals/vertrekt"))
            .bearer_auth(TOKEN)
            .json(&json!({ "disabled": disabled }));
        async move { assert_eq!(request.send().await.unwrap().status(), 200) }
    };
    set_disabled(a, true).await;
    let answered = sink.deliveries().len();
    for round in 10..14 {
        publish_round(round).await;
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let late = sink.deliveries().len() - answered;
    assert!(
        late <= MAX_IN_FLIGHT,
        "{late} deliveries arrived after the principal was disabled; at most max_in_flight \
         ({MAX_IN_FLIGHT}) across the hubs may"
    );
    let on_b = get_json(
        client,
        b,
        TOKEN,
        &format!("/v1/subscriptions/{subscription}"),
    )
    .await;
    assert_eq!(on_b["state"], "suspended", "{on_b}");

    set_disabled(b, false).await;
    // What was queued before the suspension is delivered now (what was published during it
    // was routed to nobody).
    let resumed = sink.deliveries().len();
    assert!(resumed < 400, "{resumed}: a backlog was left");
    sink.wait_for(400, Duration::from_secs(30)).await;
}

/// Two hubs on a database of their own, each knowing of the other, with this
/// `max_in_flight` (kept together across them).
struct TwoHubs {
    a: HubProcess,
    b: HubProcess,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
    _cluster: Cluster,
}

impl TwoHubs {
    async fn start(database: &str, max_in_flight: usize) -> TwoHubs {
        let cluster = Cluster::start();
        let url = cluster.create_database(database);
        let dir = tempfile::tempdir().unwrap();
        let config = config_with_admin(dir.path(), TOKEN);
        let slots = max_in_flight.to_string();
        let start = |name: &str| {
            HubProcess::start_with_env(
                &config,
                &dir.path().join(name),
                &[
                    ("KNOOPPUNT_STORE_BACKEND", "postgres"),
                    ("KNOOPPUNT_STORE_URL", &url),
                    ("KNOOPPUNT_STORE_POOL_SIZE", "8"),
                    ("KNOOPPUNT_DELIVERY_MAX_IN_FLIGHT", &slots),
                ],
            )
        };
        let (a, b) = (start("a"), start("b"));
        let client = reqwest::Client::new();
        wait_for_hubs(&client, &a, 2).await;
        wait_for_hubs(&client, &b, 2).await;
        TwoHubs {
            a,
            b,
            client,
            _dir: dir,
            _cluster: cluster,
        }
    }

    /// A subscriber principal `name` (made on hub a) with an unordered subscription to
    /// `nl.test.scale` at a sink that consents and answers 204 after 2 ms: the sink and the
    /// subscription's id.
    async fn subscriber_with_sink(&self, name: &str) -> (Sink, String) {
        let token = self
            .client
            .post(self.a.url("/v1/principals"))
            .bearer_auth(TOKEN)
            .json(&json!({"name": name, "roles": ["subscriber"]}))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()["token"]
            .as_str()
            .unwrap()
            .to_owned();
        let sink = Sink::start_for_any_hub().await;
        sink.answer_always(Reply::status(204).after(Duration::from_millis(2)));
        let created = self
            .client
            .post(self.a.url("/v1/subscriptions"))
            .bearer_auth(&token)
            .json(
                &json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.test.scale"],
                          "config": {"ordering": "unordered"}}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
        let id = created.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        (sink, id)
    }
}
