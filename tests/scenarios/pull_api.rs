//! Pull subscriptions through the API: how they are created and replaced, who may pull, and
//! a receive that waits wakes up when an event arrives. (The delivery guarantees, on both
//! backends and the real binary, are in `crates/knooppunt/tests/pull.rs`.)

use knooppunt_store::Records;
use std::time::{Duration, Instant};

use knooppunt_tests::sink::Sink;
use knooppunt_tests::wait::until;
use knooppunt_tests::{TestHub, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const TYPE: &str = "nl.brp.persoon-verhuisd";

fn event(id: &str) -> Value {
    json!({"specversion": "1.0", "id": id, "source": "urn:nld:oin:1:systeem:BRP",
           "type": TYPE, "data": {"n": 1}})
}

async fn create_pull(hub: &TestHub, token: &str) -> Value {
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            token,
            Some(json!({"protocol": "HTTP", "types": [TYPE],
                        "config": {"delivery": "pull", "ordering": "unordered"}})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    created.body
}

#[tokio::test]
async fn a_pull_subscription_has_the_hubs_receive_url_and_no_handshake() {
    let hub = TestHub::start().await;
    let created = create_pull(&hub, tokens::GEMEENTE).await;
    let id = created["id"].as_str().unwrap();
    assert_eq!(created["state"], "active");
    assert_eq!(
        created["sink"],
        hub.url(&format!("/v1/subscriptions/{id}/receive"))
    );
    assert_eq!(created["config"]["delivery"], "pull");
    assert_eq!(created["config"]["lockDuration"], "PT60S");

    // What a GET gives can be PUT back unchanged.
    let item = format!("/v1/subscriptions/{id}");
    let read = hub.call(Method::GET, &item, tokens::GEMEENTE, None).await;
    let replaced = hub
        .call(
            Method::PUT,
            &item,
            tokens::GEMEENTE,
            Some(read.body.clone()),
        )
        .await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(replaced.body["sink"], created["sink"]);
    assert_eq!(replaced.body["state"], "active");

    // A sink of its own, or what belongs to pushing, is refused, naming the member.
    let mut foreign = read.body.clone();
    foreign["sink"] = json!("https://elders.example/events");
    let refused = hub
        .call(Method::PUT, &item, tokens::GEMEENTE, Some(foreign))
        .await
        .assert_problem(400);
    assert_eq!(refused.invalid_params(), ["sink"]);
    let refused = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::GEMEENTE,
            Some(json!({"protocol": "HTTP", "types": [TYPE],
                        "sinkcredential": {"credentialtype": "PLAIN", "identifier": "a", "secret": "b"},
                        "config": {"delivery": "pull", "lockDuration": "PT11M"}})),
        )
        .await
        .assert_problem(400);
    let mut params = refused.invalid_params();
    params.sort();
    assert_eq!(params, ["config.lockDuration", "sinkcredential"]);
    let refused = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::GEMEENTE,
            Some(json!({"protocol": "HTTP", "config": {"delivery": "carrier pigeon"}})),
        )
        .await
        .assert_problem(400);
    assert_eq!(refused.invalid_params(), ["config.delivery", "sink"]);

    // Turned into a push subscription, it needs its sink's consent like any other.
    let sink = Sink::start_for_any_hub().await;
    let mut push = read.body.clone();
    push["sink"] = json!(sink.url);
    push["config"]["delivery"] = json!("push");
    let pushed = hub
        .call(Method::PUT, &item, tokens::GEMEENTE, Some(push))
        .await;
    assert_eq!(pushed.status, 200, "{}", pushed.body);
    assert_eq!(sink.handshakes().len(), 1, "the new sink was asked");
    assert_eq!(pushed.body["state"], "active");
    let refused = hub
        .call(
            Method::POST,
            &format!("{item}/receive?maxWait=PT0S"),
            tokens::GEMEENTE,
            None,
        )
        .await
        .assert_problem(409);
    assert!(
        refused.body["detail"]
            .as_str()
            .unwrap()
            .contains("push subscription"),
        "{}",
        refused.body
    );
}

#[tokio::test]
async fn only_the_owner_or_an_administrator_pulls() {
    let hub = TestHub::start().await;
    let created = create_pull(&hub, tokens::GEMEENTE).await;
    let receive = format!(
        "/v1/subscriptions/{}/receive?maxWait=PT0S",
        created["id"].as_str().unwrap()
    );
    hub.call(Method::POST, &receive, tokens::KVK, None)
        .await
        .assert_problem(404);
    hub.call(Method::POST, &receive, tokens::PUBLISHER, None)
        .await
        .assert_problem(403);
    let answer = hub.call(Method::POST, &receive, tokens::ADMIN, None).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, json!([]));
    assert_eq!(answer.header("knooppunt-lock-tokens"), None);
    let acknowledge = format!(
        "/v1/subscriptions/{}/acknowledge",
        created["id"].as_str().unwrap()
    );
    hub.call(
        Method::POST,
        &acknowledge,
        tokens::KVK,
        Some(json!({"lockTokens": ["1.1"]})),
    )
    .await
    .assert_problem(404);
}

#[tokio::test]
async fn a_waiting_receive_answers_when_an_event_arrives() {
    let hub = TestHub::start().await;
    let created = create_pull(&hub, tokens::GEMEENTE).await;
    let receive = format!(
        "/v1/subscriptions/{}/receive?maxWait=PT30S",
        created["id"].as_str().unwrap()
    );
    let started = Instant::now();
    let waiting = hub.call(Method::POST, &receive, tokens::GEMEENTE, None);
    let publishing = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        hub.publish_as(tokens::PUBLISHER, &event("waited-for"))
            .await;
    };
    let (answer, ()) = tokio::join!(waiting, publishing);
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, json!([event("waited-for")]));
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "the receive waited out its maxWait instead of answering when the event came"
    );
    assert_eq!(answer.header("knooppunt-delivery-counts"), Some("1"));
}

async fn stream(hub: &TestHub, subscription: &str, query: &str) -> knooppunt_tests::Answer {
    hub.call(
        Method::GET,
        &format!("/v1/subscriptions/{subscription}/events{query}"),
        tokens::GEMEENTE,
        None,
    )
    .await
}

fn ids(answer: &knooppunt_tests::Answer) -> Vec<String> {
    answer
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_stream_pages_through_matching_events_with_a_cursor() {
    let hub = TestHub::start().await;
    // The stream is the subscription's events: only what its filters match.
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::GEMEENTE,
            Some(json!({"protocol": "HTTP", "types": [TYPE],
                        "filters": [{"suffix": {"id": "-keep"}}],
                        "config": {"delivery": "pull", "ordering": "unordered"}})),
        )
        .await;
    let id = created.body["id"].as_str().unwrap().to_owned();
    for n in 0..5 {
        hub.publish_as(tokens::PUBLISHER, &event(&format!("{n}-keep")))
            .await;
        hub.publish_as(tokens::PUBLISHER, &event(&format!("{n}-skip")))
            .await;
    }
    let first = stream(&hub, &id, "?limit=2").await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(
        first.header("content-type"),
        Some("application/cloudevents-batch+json; charset=utf-8")
    );
    assert_eq!(ids(&first), ["0-keep", "1-keep"]);
    assert_eq!(first.body[0], event("0-keep"), "unchanged");
    let cursor = first.header("knooppunt-cursor").unwrap().to_owned();
    let next = first.next_link().unwrap();
    assert_eq!(
        next,
        format!("/v1/subscriptions/{id}/events?after={cursor}&limit=2")
    );
    let second = hub.call(Method::GET, &next, tokens::GEMEENTE, None).await;
    assert_eq!(ids(&second), ["2-keep", "3-keep"]);
    let rest = stream(
        &hub,
        &id,
        &format!("?after={}", second.header("knooppunt-cursor").unwrap()),
    )
    .await;
    assert_eq!(ids(&rest), ["4-keep"]);
    // Caught up: an empty page, the cursor where it was; with maxWait, the next event.
    let end = rest.header("knooppunt-cursor").unwrap().to_owned();
    let caught_up = stream(&hub, &id, &format!("?after={end}")).await;
    assert_eq!(ids(&caught_up), Vec::<String>::new());
    assert_eq!(caught_up.header("knooppunt-cursor"), Some(end.as_str()));
    let query = format!("?after={end}&maxWait=PT20S");
    let waiting = stream(&hub, &id, &query);
    let publishing = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        hub.publish_as(tokens::PUBLISHER, &event("late-keep")).await;
    };
    let started = Instant::now();
    let (late, ()) = tokio::join!(waiting, publishing);
    assert_eq!(ids(&late), ["late-keep"]);
    assert!(started.elapsed() < Duration::from_secs(15));
    // Reading locks nothing: the pull consumer still receives every event.
    let received = hub
        .call(
            Method::POST,
            &format!("/v1/subscriptions/{id}/receive?maxEvents=100&maxWait=PT0S"),
            tokens::GEMEENTE,
            None,
        )
        .await;
    assert_eq!(received.body.as_array().unwrap().len(), 6);

    for bad in [
        "?after=x",
        "?limit=0",
        "?limit=1001",
        "?maxWait=PT61S",
        "?other=1",
    ] {
        stream(&hub, &id, bad).await.assert_problem(400);
    }
    hub.call(
        Method::GET,
        &format!("/v1/subscriptions/{id}/events"),
        tokens::KVK,
        None,
    )
    .await
    .assert_problem(404);
}

#[tokio::test]
async fn a_cursor_past_retention_answers_410_with_the_oldest_cursor() {
    let ingest = knooppunt_broker::ingest::IngestOptions {
        retention: Duration::from_millis(1),
        dedupe_window: Duration::from_millis(1),
        sweep_interval: Duration::from_millis(20),
        ..Default::default()
    };
    // One event per log segment, so that retention removes single events.
    let store = knooppunt_store_embedded::SledOptions {
        segment_bytes: 1,
        ..Default::default()
    };
    let hub = TestHub::builder().ingest(ingest).store(store).start().await;
    let created = create_pull(&hub, tokens::GEMEENTE).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let start = stream(&hub, &id, "").await;
    let cursor = start.header("knooppunt-cursor").unwrap().to_owned();
    // Delivered (acknowledged) events past retention are swept.
    for n in 0..3 {
        hub.publish_as(tokens::PUBLISHER, &event(&format!("gone-{n}")))
            .await;
    }
    let received = hub
        .call(
            Method::POST,
            &format!("/v1/subscriptions/{id}/receive?maxEvents=10&maxWait=PT5S"),
            tokens::GEMEENTE,
            None,
        )
        .await;
    let tokens_held: Vec<String> = received
        .header("knooppunt-lock-tokens")
        .unwrap()
        .split(", ")
        .map(str::to_owned)
        .collect();
    let acked = hub
        .call(
            Method::POST,
            &format!("/v1/subscriptions/{id}/acknowledge"),
            tokens::GEMEENTE,
            Some(json!({"lockTokens": tokens_held})),
        )
        .await;
    assert_eq!(acked.body["succeeded"].as_array().unwrap().len(), 3);
    let kept = hub.publish_as(tokens::PUBLISHER, &event("kept")).await.body["sequence"]
        .as_u64()
        .unwrap();
    // The sweep removes the three one segment at a time: wait until it removed them all
    // (the oldest cursor is then the one just before "kept").
    let gone = until("the three swept", Duration::from_secs(10), || async {
        let answer = stream(&hub, &id, &format!("?after={cursor}")).await;
        if answer.status == 410
            && answer.body["oldestCursor"]
                .as_str()
                .and_then(|c| c.parse::<u64>().ok())
                .is_some_and(|oldest| oldest + 1 >= kept)
        {
            Ok(answer.assert_problem(410))
        } else {
            Err(answer.body)
        }
    })
    .await;
    let oldest = gone.body["oldestCursor"].as_str().unwrap().to_owned();
    assert!(oldest.parse::<u64>().unwrap() > cursor.parse::<u64>().unwrap());
    let resumed = stream(&hub, &id, &format!("?after={oldest}")).await;
    assert_eq!(resumed.status, 200);
    assert!(
        ids(&resumed).contains(&"kept".to_owned()),
        "{}",
        resumed.body
    );
    assert!(!ids(&resumed).iter().any(|i| i.starts_with("gone-")));
}

#[tokio::test]
async fn replays_are_bounded_per_hub_and_kept_per_subscription() {
    let mut options = knooppunt_tests::test_options();
    options.replays = knooppunt_broker::ReplayOptions {
        max_running: 1,
        rate: 1,
        takeover: Duration::from_secs(30),
    };
    let hub = TestHub::builder().options(options).start().await;
    let created = create_pull(&hub, tokens::GEMEENTE).await;
    let id = created["id"].as_str().unwrap().to_owned();
    for n in 0..3 {
        hub.publish_as(tokens::PUBLISHER, &event(&format!("r-{n}")))
            .await;
    }
    let replays = format!("/v1/subscriptions/{id}/replays");
    // A time before 1970 is a valid bound: the window starts at the beginning.
    let window = json!({"from": "1969-07-20T20:17:40Z"});
    // One event a second: the first replay runs for a while; a second one is refused.
    let first = hub
        .call(
            Method::POST,
            &replays,
            tokens::GEMEENTE,
            Some(window.clone()),
        )
        .await;
    assert_eq!(first.status, 202, "{}", first.body);
    let refused = hub
        .call(Method::POST, &replays, tokens::GEMEENTE, Some(window))
        .await
        .assert_problem(429);
    assert_eq!(refused.header("retry-after"), Some("10"));
    assert!(
        refused.body["detail"]
            .as_str()
            .unwrap()
            .contains("delivery.max_replays"),
        "{}",
        refused.body
    );
    let location = first.header("location").unwrap().to_owned();
    let cancelled = hub
        .call(
            Method::POST,
            &format!("{location}/cancel"),
            tokens::GEMEENTE,
            None,
        )
        .await;
    assert_eq!(cancelled.body["state"], "cancelled");
    assert!(cancelled.body["eventsQueued"].as_u64().unwrap() < 3);
    // Another principal neither sees nor cancels it.
    hub.call(Method::GET, &location, tokens::KVK, None)
        .await
        .assert_problem(404);

    // A window that is not one: every problem at once, and `null` is no time.
    let wrong = json!({"from": null, "until": 5, "colour": "red"});
    let bad = hub
        .call(Method::POST, &replays, tokens::GEMEENTE, Some(wrong))
        .await
        .assert_problem(400);
    assert_eq!(
        bad.invalid_params(),
        ["colour", "from", "until"],
        "{}",
        bad.body
    );

    // At most 100 are kept per subscription: the oldest finished ones go.
    let empty = json!({"from": "2099-01-01T00:00:00Z", "until": "2099-01-01T00:00:01Z"});
    let bad = hub
        .call(Method::POST, &replays, tokens::GEMEENTE, Some(empty))
        .await
        .assert_problem(400);
    assert_eq!(
        bad.invalid_params(),
        ["from"],
        "a window in the future is empty"
    );
    for n in 0..105 {
        // A window with no events ends at once.
        let old = json!({"from": "2000-01-01T00:00:00Z", "until": "2000-01-02T00:00:00Z"});
        let mut answer;
        loop {
            answer = hub
                .call(Method::POST, &replays, tokens::GEMEENTE, Some(old.clone()))
                .await;
            if answer.status != 429 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(answer.status, 202, "replay {n}: {}", answer.body);
    }
    let listed = hub
        .call(Method::GET, &replays, tokens::GEMEENTE, None)
        .await;
    assert_eq!(listed.body.as_array().unwrap().len(), 100);
    assert!(
        hub.store.replays().await.unwrap().len() <= 101,
        "at most 100 kept, and the one running"
    );
}
