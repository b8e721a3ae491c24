//! A bounded backlog under overload (`backlog.rs` in the broker): a subscription past its
//! own limit sheds its oldest deliveries into dead letters and no other subscription
//! notices; past the hub's limit, or below its floor of free disk, publishers get 503 with
//! Retry-After; and nothing acknowledged is lost either way.

use knooppunt_store::EventLog;
use std::collections::BTreeSet;
use std::time::Duration;

use knooppunt_broker::BacklogOptions;
use knooppunt_tests::sink::{Reply, Sink};
use knooppunt_tests::wait::until;
use knooppunt_tests::{Answer, SmallDisk, TestHub, test_options, tokens};
use reqwest::Method;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);
const TYPE: &str = "nl.backlog.test";

/// Options with these bounds, measured every 100 ms, and a breaker that pauses a failing
/// sink for at most a second (so a sink that recovers is soon served again).
fn options(backlog: BacklogOptions) -> knooppunt_broker::HubOptions {
    let mut options = test_options();
    options.backlog = BacklogOptions {
        check_interval: Duration::from_millis(100),
        ..backlog
    };
    options.delivery.connections.breaker_max_pause = Duration::from_secs(1);
    options
}

/// An event whose data is `size` characters.
async fn publish(hub: &TestHub, id: &str, size: usize) -> Answer {
    let event = json!({"specversion": "1.0", "id": id, "source": "urn:nld:backlog",
                       "type": TYPE, "data": "x".repeat(size)});
    hub.publish_raw("application/cloudevents+json", event.to_string())
        .await
}

/// Publishes `count` events `{prefix}0`, `{prefix}1`, … of `size` characters, each
/// accepted; their sequence numbers.
async fn publish_all(hub: &TestHub, prefix: &str, count: usize, size: usize) -> Vec<u64> {
    let mut sequences = Vec::new();
    for n in 0..count {
        let answer = publish(hub, &format!("{prefix}{n}"), size).await;
        assert_eq!(answer.status, 202, "never refused: {}", answer.body);
        sequences.push(answer.body["sequence"].as_u64().unwrap());
    }
    sequences
}

/// A sink that answers every delivery 503, asking for a second's pause.
async fn stalled_sink() -> Sink {
    let sink = Sink::start().await;
    sink.answer_always(Reply::status(503).with_header("Retry-After", "1"));
    sink
}

/// A stalled sink and a healthy one, each subscribed; the sinks and the stalled one's
/// subscription.
async fn stalled_and_healthy(hub: &TestHub) -> (Sink, Sink, String) {
    let stalled = stalled_sink().await;
    let healthy = Sink::start().await;
    let stuck = hub
        .subscribe(tokens::KVK, &stalled.url, TYPE, json!({}))
        .await;
    hub.subscribe(tokens::KVK, &healthy.url, TYPE, json!({}))
        .await;
    (stalled, healthy, stuck)
}

async fn status(hub: &TestHub, id: &str) -> serde_json::Value {
    let path = format!("/v1/subscriptions/{id}/status");
    let answer = hub.call(Method::GET, &path, tokens::KVK, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.body
}

/// A subscription's dead letters (their events' sequence numbers), each saying `why`.
async fn dead_letters(hub: &TestHub, id: &str, why: &str) -> Vec<u64> {
    let path = format!("/v1/subscriptions/{id}/dead-letters?pageSize=100");
    let answer = hub.call(Method::GET, &path, tokens::KVK, None).await;
    let listed = answer.body.as_array().unwrap();
    listed
        .iter()
        .map(|dead| {
            let reason = dead["reason"].as_str().unwrap();
            assert!(reason.contains(why), "{reason}");
            dead["sequence"].as_u64().unwrap()
        })
        .collect()
}

/// The distinct event ids a sink took.
fn delivered_ids(sink: &Sink) -> BTreeSet<String> {
    sink.deliveries()
        .iter()
        .filter(|d| d.status / 100 == 2)
        .map(|d| d.json()["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn wait_until_delivered(sink: &Sink, ids: &BTreeSet<String>) {
    until("every acknowledged event delivered", WAIT, || async {
        let delivered = delivered_ids(sink);
        if ids.is_subset(&delivered) {
            Ok(())
        } else {
            Err(format!(
                "{} of {} delivered",
                ids.intersection(&delivered).count(),
                ids.len()
            ))
        }
    })
    .await;
}

#[tokio::test]
async fn a_subscription_past_its_limit_sheds_its_oldest_into_dead_letters_and_no_other_notices() {
    const LIMIT: u64 = 40_000;
    let hub = TestHub::builder()
        .options(options(BacklogOptions {
            subscription_max_bytes: LIMIT,
            ..BacklogOptions::default()
        }))
        .start()
        .await;
    let (_stalled, healthy, stuck) = stalled_and_healthy(&hub).await;

    // 30 events of about 4 KB: three times what the stalled subscription may hold.
    let sequences = publish_all(&hub, "e", 30, 4000).await;
    let all: BTreeSet<String> = (0..30).map(|n| format!("e{n}")).collect();
    wait_until_delivered(&healthy, &all).await;

    // The stalled one sheds until it is within its limit, oldest first. The status says
    // what was shed just after the store withdrew it (`Backlog::note_shed`): both are
    // waited for.
    let status = until("the backlog shed to its limit", WAIT, || async {
        let status = status(&hub, &stuck).await;
        if status["backlogBytes"].as_u64().unwrap() <= LIMIT && status["shed"].is_object() {
            Ok(status)
        } else {
            Err(status)
        }
    })
    .await;
    assert_eq!(status["backlogLimit"]["maxBytes"], LIMIT, "{status}");
    assert_eq!(status["backlogLimit"]["policy"], "shed-oldest", "{status}");
    let shed = status["shed"]["events"].as_u64().unwrap();
    assert!((20..=25).contains(&shed), "about 20 of 30 shed: {status}");
    assert!(
        status["shed"]["reason"]
            .as_str()
            .unwrap()
            .contains("subscription_max_bytes"),
        "{status}"
    );

    // The shed ones are its dead letters, saying why; it keeps the newest.
    let dead = dead_letters(&hub, &stuck, "oldest").await;
    assert_eq!(dead, sequences[..shed as usize], "oldest first");
    assert_eq!(hub.store_pending(&stuck).await, sequences[shed as usize..]);

    // Said in the audit trail (written just after the shed is visible) and the metrics.
    until("the shed on the audit trail", WAIT, || async {
        let entries = hub
            .call(Method::GET, "/v1/audit", tokens::ADMIN, None)
            .await;
        let said = entries
            .body
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "subscription.shed");
        if said { Ok(()) } else { Err(entries.body) }
    })
    .await;
    let metrics = hub.metrics().await;
    assert!(
        metrics.contains(&format!(
            "knooppunt_queue_backlog_bytes{{subscription=\"{stuck}\",owner=\"kvk\"}}"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains("knooppunt_events_total{outcome=\"rejected\",reason=\"backlog_full\"} 0"),
        "nobody was refused"
    );
}

/// A subscription that stalls between two measurements is shed as soon as its growth
/// would fill the hub, not refused to every publisher until the next measurement: here
/// the next one is a minute away, and 240 KB are published past a 100 KB hub limit while
/// the stalled subscription may hold 40 KB.
#[tokio::test]
async fn a_subscription_stalling_between_measurements_is_shed_before_anyone_is_refused() {
    let mut options = options(BacklogOptions {
        max_bytes: 100_000,
        subscription_max_bytes: 40_000,
        ..BacklogOptions::default()
    });
    options.backlog.check_interval = Duration::from_secs(60);
    let hub = TestHub::builder().options(options).start().await;
    let (_stalled, healthy, stuck) = stalled_and_healthy(&hub).await;
    let mut all = BTreeSet::new();
    for n in 0..60 {
        let id = format!("s{n}");
        let answer = publish(&hub, &id, 4000).await;
        assert_eq!(answer.status, 202, "event {n} refused: {}", answer.body);
        all.insert(id);
        // The healthy subscriber keeps up: what is undelivered is the stalled one's.
        wait_until_delivered(&healthy, &all).await;
    }
    let status = status(&hub, &stuck).await;
    assert!(
        status["shed"]["events"].as_u64().unwrap() >= 40,
        "the stalled subscription shed its oldest: {status}"
    );
}

#[tokio::test]
async fn past_the_hubs_limit_publishers_get_503_until_the_subscribers_catch_up() {
    const LIMIT: u64 = 60_000;
    let hub = TestHub::builder()
        .options(options(BacklogOptions {
            max_bytes: LIMIT,
            subscription_max_bytes: 0,
            ..BacklogOptions::default()
        }))
        .start()
        .await;
    let sink = stalled_sink().await;
    hub.subscribe(tokens::KVK, &sink.url, TYPE, json!({})).await;

    let (mut acknowledged, mut bytes) = (BTreeSet::new(), 0);
    let refused = loop {
        let id = format!("e{}", acknowledged.len());
        let answer = publish(&hub, &id, 4000).await;
        if answer.status != 202 {
            break answer;
        }
        acknowledged.insert(id);
        assert!(acknowledged.len() < 40, "never refused");
    };
    // What was acknowledged holds within one event of the limit.
    let size = {
        let event = json!({"specversion": "1.0", "id": "e0", "source": "urn:nld:backlog",
                           "type": TYPE, "data": "x".repeat(4000)});
        event.to_string().len() as u64
    };
    bytes += size * acknowledged.len() as u64;
    assert!(bytes <= LIMIT + size + 64, "{bytes} acknowledged");
    assert!(bytes >= LIMIT - size - 64, "{bytes} acknowledged");
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(
        refused.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(refused.body["type"], "urn:knooppunt:problem:backlog-full");
    assert!(
        refused.body["detail"]
            .as_str()
            .unwrap()
            .contains("[backlog] max_bytes"),
        "says which limit: {}",
        refused.body
    );
    let retry_after: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!(retry_after >= 1);
    let status = hub
        .call(Method::GET, "/v1/status", tokens::ADMIN, None)
        .await;
    assert_eq!(status.body["accepting"], false, "{}", status.body);
    assert_eq!(status.body["backlogMaxBytes"], LIMIT, "{}", status.body);

    // A batch is refused as a whole, too.
    let batch = json!([{"specversion": "1.0", "id": "b1", "source": "urn:nld:backlog",
                        "type": TYPE}]);
    let answer = hub
        .publish_raw("application/cloudevents-batch+json", batch.to_string())
        .await;
    assert_eq!(answer.status, 503, "{}", answer.body);

    // The sink recovers: every acknowledged event arrives, and publishing resumes.
    sink.answer_always(Reply::status(204));
    wait_until_delivered(&sink, &acknowledged).await;
    until("a publish accepted again", WAIT, || async {
        let answer = publish(&hub, "after", 10).await;
        if answer.status == 202 {
            return Ok(());
        }
        assert_eq!(answer.status, 503, "{}", answer.body);
        Err(answer.body)
    })
    .await;
    let status = hub
        .call(Method::GET, "/v1/status", tokens::ADMIN, None)
        .await;
    assert_eq!(status.body["accepting"], true, "{}", status.body);
}

#[tokio::test]
async fn on_a_small_disk_publishes_stop_before_it_is_full_and_every_acknowledged_event_drains() {
    const FLOOR: u64 = 16 * 1024 * 1024;
    let disk = SmallDisk::mount("40m");
    let data = tempfile::tempdir_in(disk.path()).unwrap();
    let hub = TestHub::builder()
        .in_dir(data)
        .options(options(BacklogOptions {
            max_bytes: 0,
            subscription_max_bytes: 0,
            min_free_bytes: FLOOR,
            ..BacklogOptions::default()
        }))
        .start()
        .await;
    let sink = stalled_sink().await;
    hub.subscribe(tokens::KVK, &sink.url, TYPE, json!({})).await;

    // 64 KB events until the hub says its disk is at its floor (40 MB could hold 600).
    let mut acknowledged = BTreeSet::new();
    let refused = loop {
        let id = format!("e{}", acknowledged.len());
        let answer = publish(&hub, &id, 64_000).await;
        if answer.status != 202 {
            break answer;
        }
        acknowledged.insert(id);
        assert!(acknowledged.len() < 600, "never refused");
    };
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.body["type"], "urn:knooppunt:problem:backlog-full");
    assert!(
        refused.body["detail"]
            .as_str()
            .unwrap()
            .contains("min_free_bytes"),
        "{}",
        refused.body
    );
    assert!(refused.header("retry-after").is_some());
    assert!(
        acknowledged.len() > 50,
        "{} acknowledged",
        acknowledged.len()
    );

    // The store still takes writes (the floor left room): the hub is ready, and the
    // failing attempts are recorded meanwhile.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ready = hub.client.get(hub.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200, "the store takes writes");
    let free = fs_free(disk.path());
    assert!(free > FLOOR / 2, "the disk kept room: {free} bytes free");

    // The sink recovers: every acknowledged event arrives.
    sink.answer_always(Reply::status(204));
    wait_until_delivered(&sink, &acknowledged).await;
}

/// Room left on the file system at `path`, as the hub's status reports it.
fn fs_free(path: &std::path::Path) -> u64 {
    let output = std::process::Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn events_older_than_the_age_limit_become_dead_letters_and_newer_ones_wait() {
    let hub = TestHub::builder()
        .options(options(BacklogOptions {
            subscription_max_bytes: 0,
            subscription_max_age: Some(Duration::from_secs(2)),
            ..BacklogOptions::default()
        }))
        .start()
        .await;
    let stalled = stalled_sink().await;
    let stuck = hub
        .subscribe(tokens::KVK, &stalled.url, TYPE, json!({}))
        .await;
    let old = publish_all(&hub, "old", 5, 100).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let fresh = publish(&hub, "fresh", 100).await.body["sequence"]
        .as_u64()
        .unwrap();

    // Past two seconds the old ones are shed; the fresh one is not yet.
    until("the old ones shed, the fresh one pending", WAIT, || async {
        let pending = hub.store_pending(&stuck).await;
        if pending == [fresh] {
            return Ok(());
        }
        let dead = hub
            .call(
                Method::GET,
                &format!("/v1/subscriptions/{stuck}/dead-letters"),
                tokens::KVK,
                None,
            )
            .await;
        Err(format!(
            "still pending: {pending:?} of {old:?} and {fresh}; dead letters: {}",
            dead.body
        ))
    })
    .await;
    let dead = dead_letters(&hub, &stuck, "subscription_max_age").await;
    assert_eq!(dead, old);
    // The status says what was shed just after the store withdrew it.
    let status = until("the shed in the status", WAIT, || async {
        let status = status(&hub, &stuck).await;
        if status["shed"].is_object() {
            Ok(status)
        } else {
            Err(status)
        }
    })
    .await;
    assert_eq!(status["backlogLimit"]["maxAgeSeconds"], 2, "{status}");
    assert_eq!(status["shed"]["events"], 5, "{status}");
}

#[tokio::test]
async fn dead_letters_past_their_retention_are_removed_with_their_events() {
    const RETENTION: Duration = Duration::from_secs(2);
    let mut options = options(BacklogOptions {
        dead_letter_retention: RETENTION,
        ..BacklogOptions::default()
    });
    // Finished events may go at once, swept every 50 ms; one event per log segment, so
    // that the sweep can remove single events.
    options.ingest.retention = Duration::from_millis(1);
    options.ingest.dedupe_window = Duration::from_millis(1);
    options.ingest.sweep_interval = Duration::from_millis(50);
    let store = knooppunt_store_embedded::SledOptions {
        segment_bytes: 1,
        ..Default::default()
    };
    let hub = TestHub::builder()
        .options(options)
        .store(store)
        .start()
        .await;
    // A sink that refuses every event as malformed: each becomes a dead letter at once.
    let refusing = Sink::start().await;
    refusing.answer_always(Reply::status(400));
    let id = hub
        .subscribe(tokens::KVK, &refusing.url, TYPE, json!({}))
        .await;

    let published = tokio::time::Instant::now();
    let sequences = publish_all(&hub, "x", 2, 100).await;
    let mut seen: BTreeSet<u64> = BTreeSet::new();
    let deadline = published + WAIT;
    loop {
        let listed: BTreeSet<u64> = dead_letters(&hub, &id, "400").await.into_iter().collect();
        for seq in &listed {
            if seen.insert(*seq) {
                assert!(
                    hub.store.event(*seq).await.unwrap().is_some(),
                    "a dead letter keeps its event"
                );
            }
        }
        let gone: Vec<u64> = seen.difference(&listed).copied().collect();
        if !gone.is_empty() {
            // A dead letter died after its event was published: none may go before the
            // retention has passed since then.
            assert!(
                published.elapsed() >= RETENTION,
                "dead letters {gone:?} removed {:?} after publishing, before their retention",
                published.elapsed()
            );
        }
        if seen.len() == sequences.len() && listed.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "dead letters seen {seen:?}, still listed {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Their events go with the next sweeps.
    for seq in &sequences {
        until("the event gone after its dead letter", WAIT, || async {
            match hub.store.event(*seq).await.unwrap() {
                None => Ok(()),
                Some(_) => Err(format!("event {seq} is still kept")),
            }
        })
        .await;
    }
    assert_eq!(status(&hub, &id).await["deadLetters"], 0);

    // Said in the audit trail and the metrics.
    let entries = hub
        .call(Method::GET, "/v1/audit", tokens::ADMIN, None)
        .await;
    let expired: u64 = entries
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "subscription.expire")
        .map(|e| {
            assert_eq!(e["object"], format!("subscription/{id}"), "{e}");
            assert!(
                e["details"]["why"]
                    .as_str()
                    .unwrap()
                    .contains("dead_letter_retention"),
                "{e}"
            );
            e["details"]["deadLetters"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(expired, 2, "{}", entries.body);
    let metrics = hub.metrics().await;
    assert!(
        metrics.contains("knooppunt_dead_letters_expired_total 2"),
        "{metrics}"
    );
}
