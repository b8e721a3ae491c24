//! Delivery to real sink servers: both content modes with every attribute forwarded, each
//! status-code outcome, Retry-After, backoff bounds, ordering under retries, maxAttempts and
//! ttl to dead letter, redelivery, 410 disabling, the validation handshake (granted, refused,
//! granted later by callback, by agreement), the allowed rate, and resuming after a restart.

use std::time::{Duration, Instant};

use knooppunt_tests::sink::{Consent, Reply, Sink};
use knooppunt_tests::wait::quiet;
use knooppunt_tests::{Answer, ORIGIN, TestHub, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:BRP";
const TYPE: &str = "nl.brp.persoon-verhuisd";
const WAIT: Duration = Duration::from_secs(15);

/// Quick retries for tests: 50 ms first, at most 200 ms.
fn quick(extra: Value) -> Value {
    let mut config = json!({"initialBackoff": "PT0.05S", "maxBackoff": "PT0.2S"});
    config
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    config
}

async fn subscribe(hub: &TestHub, sink: &Sink, config: Value) -> Answer {
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE], "config": config});
    subscribe_with(hub, body).await
}

async fn subscribe_with(hub: &TestHub, body: Value) -> Answer {
    let answer = Answer::from(
        hub.request(Method::POST, "/v1/subscriptions", tokens::KVK)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    answer
}

fn id_of(answer: &Answer) -> String {
    answer.body["id"].as_str().unwrap().to_owned()
}

/// Publishes the exact text; returns the event's sequence number.
async fn publish_text(hub: &TestHub, text: &str) -> u64 {
    let answer = Answer::from(
        hub.request(Method::POST, "/v1/events", tokens::PUBLISHER)
            .header("content-type", "application/cloudevents+json")
            .body(text.to_owned())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    answer.body["sequence"].as_u64().unwrap()
}

async fn publish(hub: &TestHub, id: &str) -> u64 {
    let event = json!({"specversion": "1.0", "id": id, "source": SOURCE, "type": TYPE,
                       "data": {"n": id}});
    publish_text(hub, &event.to_string()).await
}

async fn get(hub: &TestHub, path: &str) -> Answer {
    Answer::from(
        hub.request(Method::GET, path, tokens::KVK)
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// Polls until `check` holds for the JSON at `path` (at most [`WAIT`]).
async fn eventually(hub: &TestHub, path: &str, check: impl Fn(&Value) -> bool) -> Value {
    knooppunt_tests::wait::until(&format!("{path} to get there"), WAIT, || async {
        let answer = get(hub, path).await;
        if check(&answer.body) {
            Ok(answer.body)
        } else {
            Err(answer.body)
        }
    })
    .await
}

async fn dead_letters(hub: &TestHub, subscription: &str, count: usize) -> Vec<Value> {
    let path = format!("/v1/subscriptions/{subscription}/dead-letters");
    let body = eventually(hub, &path, |b| {
        b.as_array().is_some_and(|a| a.len() >= count)
    })
    .await;
    body.as_array().unwrap().clone()
}

fn gaps(deliveries: &[knooppunt_tests::sink::Received]) -> Vec<Duration> {
    deliveries.windows(2).map(|w| w[1].at - w[0].at).collect()
}

#[tokio::test]
async fn structured_mode_forwards_the_publishers_json_byte_for_byte() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
        "sinkcredential": {"credentialtype": "ACCESSTOKEN", "accesstoken": "s3cr3t",
                           "accesstokentype": "Bearer", "accesstokenexpiresutc": "2099-01-01T00:00:00Z"},
        "protocolsettings": {"headers": {"X-Afnemer": "gemeente-0599"}}});
    let subscription = subscribe_with(&hub, body).await;
    assert_eq!(
        subscription.body["state"], "active",
        "{}",
        subscription.body
    );
    // Extensions of every JSON type, odd spacing and key order, non-ASCII: all kept as sent.
    let text = format!(
        r#"{{ "specversion":"1.0","type":"{TYPE}", "source":"{SOURCE}","id":"e-1",
            "subject":"999990342","time":"2026-11-22T10:00:00.5+01:00",
            "comexamplestring":"Zoë","comexampleint":42,"comexamplenegative":-7,
            "comexamplebool":false,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "datacontenttype":"application/json","data":{{"bedrag":1.50,"lijst":[1,2.0,"€"]}} }}"#
    );
    publish_text(&hub, &text).await;
    let delivered = sink.wait_for(1, WAIT).await;
    let delivery = &delivered[0];
    assert_eq!(delivery.method, Method::POST);
    assert_eq!(
        std::str::from_utf8(&delivery.body).unwrap(),
        text,
        "the exact bytes"
    );
    assert_eq!(
        delivery.header("content-type"),
        Some("application/cloudevents+json")
    );
    assert_eq!(delivery.header("webhook-request-origin"), Some(ORIGIN));
    assert_eq!(delivery.header("authorization"), Some("Bearer s3cr3t"));
    assert_eq!(delivery.header("x-afnemer"), Some("gemeente-0599"));
    let last = eventually(
        &hub,
        &format!("/v1/subscriptions/{}", id_of(&subscription)),
        |b| b["lastDelivery"]["outcome"] == "delivered",
    )
    .await;
    assert_eq!(last["lastDelivery"]["statusCode"], 204);
}

#[tokio::test]
async fn binary_mode_sends_attributes_as_percent_encoded_headers() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
        "config": {"mode": "binary"},
        "sinkcredential": {"credentialtype": "PLAIN", "identifier": "hub", "secret": "geheim"}});
    subscribe_with(&hub, body).await;
    let event = json!({"specversion": "1.0", "id": "b-1", "source": SOURCE, "type": TYPE,
        "subject": "Zoë €", "comexampleint": 42, "comexamplebool": true,
        "datacontenttype": "application/json", "data": {"bsn": "999990342"}});
    publish_text(&hub, &event.to_string()).await;
    let delivery = &sink.wait_for(1, WAIT).await[0];
    assert_eq!(delivery.header("ce-specversion"), Some("1.0"));
    assert_eq!(delivery.header("ce-id"), Some("b-1"));
    assert_eq!(delivery.header("ce-source"), Some(SOURCE));
    assert_eq!(delivery.header("ce-type"), Some(TYPE));
    assert_eq!(delivery.header("ce-subject"), Some("Zo%C3%AB%20%E2%82%AC"));
    assert_eq!(delivery.header("ce-comexampleint"), Some("42"));
    assert_eq!(delivery.header("ce-comexamplebool"), Some("true"));
    assert_eq!(delivery.header("content-type"), Some("application/json"));
    assert_eq!(delivery.header("ce-datacontenttype"), None);
    assert_eq!(delivery.json(), json!({"bsn": "999990342"}));
    assert_eq!(
        delivery.header("authorization"),
        Some("Basic aHViOmdlaGVpbQ==")
    );
    assert_eq!(delivery.header("webhook-request-origin"), Some(ORIGIN));
}

#[tokio::test]
async fn every_2xx_is_delivered_and_400_413_415_are_dead_letters_at_once() {
    let hub = TestHub::start().await;
    for status in [200, 201, 202, 204] {
        let sink = Sink::start().await;
        sink.answer_always(Reply::status(status));
        let id = id_of(&subscribe(&hub, &sink, quick(json!({}))).await);
        publish(&hub, &format!("ok-{status}")).await;
        sink.wait_for(1, WAIT).await;
        eventually(&hub, &format!("/v1/subscriptions/{id}"), |b| {
            b["lastDelivery"]["outcome"] == "delivered"
        })
        .await;
    }
    for status in [400, 413, 415] {
        let sink = Sink::start().await;
        sink.answer_always(Reply::status(status));
        let id = id_of(&subscribe(&hub, &sink, quick(json!({}))).await);
        let seq = publish(&hub, &format!("bad-{status}")).await;
        let dead = dead_letters(&hub, &id, 1).await;
        assert_eq!(dead[0]["sequence"], seq);
        assert_eq!(dead[0]["attempts"], 1, "no retry for {status}");
        assert_eq!(dead[0]["lastStatusCode"], status);
        quiet("a retry of a refused delivery", Duration::from_millis(300)).await;
        assert_eq!(sink.deliveries().len(), 1, "{status} is not retried");
    }
}

#[tokio::test]
async fn other_failures_are_retried_until_delivered() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    sink.answer([
        Reply::status(500),
        Reply::status(404),
        Reply::status(502),
        Reply::status(408),
        Reply::status(204).after(Duration::ZERO),
    ]);
    let id = id_of(&subscribe(&hub, &sink, quick(json!({}))).await);
    publish(&hub, "retried").await;
    let deliveries = sink.wait_for(5, WAIT).await;
    assert!(deliveries.iter().all(|d| d.json()["id"] == "retried"));
    let body = eventually(&hub, &format!("/v1/subscriptions/{id}"), |b| {
        b["lastDelivery"]["outcome"] == "delivered"
    })
    .await;
    assert_eq!(body["lastDelivery"]["statusCode"], 204);
    assert!(hub.store_pending(&id).await.is_empty());
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let hub = TestHub::start().await;
    let elsewhere = Sink::start().await;
    let sink = Sink::start().await;
    sink.answer([
        Reply::status(302).with_header("location", &elsewhere.url),
        Reply::status(307).with_header("location", &elsewhere.url),
    ]);
    let id = id_of(&subscribe(&hub, &sink, quick(json!({}))).await);
    publish(&hub, "moved").await;
    sink.wait_for(3, WAIT).await;
    eventually(&hub, &format!("/v1/subscriptions/{id}"), |b| {
        b["lastDelivery"]["outcome"] == "delivered"
    })
    .await;
    assert!(
        elsewhere.deliveries().is_empty(),
        "the redirect was followed"
    );
}

#[tokio::test]
async fn timeouts_and_refused_connections_are_retried() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    sink.answer([Reply::status(204).after(Duration::from_secs(3))]);
    let id = id_of(&subscribe(&hub, &sink, quick(json!({"timeout": "PT0.3S"}))).await);
    publish(&hub, "slow").await;
    let deliveries = sink.wait_for(2, WAIT).await;
    assert!(deliveries[1].at - deliveries[0].at < Duration::from_secs(3));
    eventually(&hub, &format!("/v1/subscriptions/{id}"), |b| {
        b["lastDelivery"]["outcome"] == "delivered"
    })
    .await;

    // Nothing listens on port 9: the connection is refused, and retried.
    let answer = subscribe_with(
        &hub,
        json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "types": [TYPE],
               "config": quick(json!({"maxAttempts": "3"}))}),
    )
    .await;
    let refused = id_of(&answer);
    assert_eq!(answer.body["state"], "pending", "no handshake answer");
    let agreed = Answer::from(
        hub.request(
            Method::POST,
            &format!("/v1/subscriptions/{refused}/validation"),
            tokens::ADMIN,
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(agreed.status, 200, "{}", agreed.body);
    publish(&hub, "nobody-home").await;
    let dead = dead_letters(&hub, &refused, 1).await;
    assert_eq!(dead[0]["attempts"], 3);
    assert!(
        dead[0]["lastError"].as_str().unwrap().len() > 5,
        "{}",
        dead[0]
    );
    assert!(dead[0]["reason"].as_str().unwrap().contains("maxAttempts"));
}

#[tokio::test]
async fn retry_after_is_honoured_in_seconds_and_as_a_date_and_capped_by_the_hub() {
    let mut options = knooppunt_tests::test_options();
    options.delivery.max_retry_after = Duration::from_secs(3);
    let hub = TestHub::builder().options(options).start().await;
    let sink = Sink::start().await;
    let date = httpdate_in(Duration::from_secs(4));
    sink.answer([
        Reply::status(429).with_header("retry-after", "1"),
        Reply::status(503).with_header("retry-after", &date),
        Reply::status(503).with_header("retry-after", "3600"),
    ]);
    // maxBackoff does not shorten a sink's Retry-After (http-webhook.md).
    let config = json!({"initialBackoff": "PT0.05S", "maxBackoff": "PT0.1S"});
    subscribe(&hub, &sink, config).await;
    publish(&hub, "later").await;
    let deliveries = sink.wait_for(4, WAIT).await;
    let gaps = gaps(&deliveries);
    assert!(
        gaps[0] >= Duration::from_millis(950),
        "Retry-After: 1 → {:?}",
        gaps[0]
    );
    assert!(
        gaps[1] >= Duration::from_millis(900),
        "an HTTP date → {:?}",
        gaps[1]
    );
    assert!(
        gaps[2] >= Duration::from_millis(2900) && gaps[2] < Duration::from_secs(10),
        "3600 s capped by the hub's max_retry_after (3 s) → {:?}",
        gaps[2]
    );
}

fn httpdate_in(delay: Duration) -> String {
    // RFC 9110 IMF-fixdate, whole seconds: at least `delay - 1 s` from now.
    httpdate::fmt_http_date(std::time::SystemTime::now() + delay)
}

#[tokio::test]
async fn backoff_stays_within_its_bounds_until_max_attempts() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    sink.answer_always(Reply::status(500));
    let config = json!({"initialBackoff": "PT0.2S", "maxBackoff": "PT0.4S", "maxAttempts": "5"});
    let id = id_of(&subscribe(&hub, &sink, config).await);
    let seq = publish(&hub, "failing").await;
    let dead = dead_letters(&hub, &id, 1).await;
    let deliveries = sink.deliveries();
    assert_eq!(deliveries.len(), 5, "exactly maxAttempts attempts");
    for gap in gaps(&deliveries) {
        assert!(
            gap >= Duration::from_millis(195),
            "below initialBackoff: {gap:?}"
        );
        assert!(
            gap < Duration::from_millis(2000),
            "far above maxBackoff: {gap:?}"
        );
    }
    assert_eq!(dead[0]["attempts"], 5);
    assert_eq!(dead[0]["lastStatusCode"], 500);
    assert!(dead[0]["reason"].as_str().unwrap().contains("maxAttempts"));
    let one = get(&hub, &format!("/v1/subscriptions/{id}/dead-letters/{seq}")).await;
    assert_eq!(one.status, 200);
    assert_eq!(one.body["event"]["id"], "failing", "the event comes along");
    assert!(
        one.body["firstAttemptTime"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
}

#[tokio::test]
async fn ttl_ends_retries_with_a_dead_letter() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    sink.answer_always(Reply::status(503));
    let config = json!({"initialBackoff": "PT0.2S", "maxBackoff": "PT0.2S",
                        "maxAttempts": "1000", "ttl": "PT0.7S"});
    let id = id_of(&subscribe(&hub, &sink, config).await);
    publish(&hub, "expiring").await;
    let dead = dead_letters(&hub, &id, 1).await;
    assert!(
        dead[0]["reason"].as_str().unwrap().contains("ttl"),
        "{}",
        dead[0]
    );
    let attempts = dead[0]["attempts"].as_u64().unwrap();
    assert!((2..=5).contains(&attempts), "{attempts} attempts in 0.7 s");
}

#[tokio::test]
async fn ordered_subscriptions_hold_back_later_events_while_one_fails() {
    let hub = TestHub::start().await;
    let ordered = Sink::start().await;
    ordered.answer([Reply::status(500), Reply::status(503), Reply::status(500)]);
    subscribe(&hub, &ordered, quick(json!({"ordering": "ordered"}))).await;
    let other = Sink::start().await;
    subscribe(&hub, &other, quick(json!({}))).await;
    for id in ["first", "second", "third"] {
        publish(&hub, id).await;
    }
    let ids = |deliveries: &[knooppunt_tests::sink::Received]| -> Vec<String> {
        deliveries
            .iter()
            .map(|d| d.json()["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let deliveries = ordered.wait_for(6, WAIT).await;
    assert_eq!(
        ids(&deliveries),
        ["first", "first", "first", "first", "second", "third"],
        "nothing overtakes a failing event"
    );
    let mut at_once = ids(&other.wait_for(3, WAIT).await);
    at_once.sort();
    assert_eq!(
        at_once,
        ["first", "second", "third"],
        "other subscriptions are not held"
    );
}

#[tokio::test]
async fn a_slow_sink_does_not_slow_another() {
    let hub = TestHub::start().await;
    let slow = Sink::start().await;
    slow.answer_always(Reply::status(204).after(Duration::from_secs(5)));
    subscribe(
        &hub,
        &slow,
        json!({"ordering": "unordered", "timeout": "PT10S"}),
    )
    .await;
    let fast = Sink::start().await;
    subscribe(&hub, &fast, json!({"ordering": "unordered"})).await;
    let started = Instant::now();
    for n in 0..20 {
        publish(&hub, &format!("n-{n}")).await;
    }
    fast.wait_for(20, WAIT).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the fast sink waited for the slow one: {:?}",
        started.elapsed()
    );
    assert!(
        slow.deliveries().len() <= 16,
        "in flight at once is bounded"
    );
}

#[tokio::test]
async fn a_dead_letter_can_be_redelivered_or_deleted() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    sink.answer([Reply::status(400), Reply::status(415)]);
    let id = id_of(&subscribe(&hub, &sink, quick(json!({}))).await);
    let first = publish(&hub, "one").await;
    let second = publish(&hub, "two").await;
    let dead = dead_letters(&hub, &id, 2).await;
    assert_eq!(dead.len(), 2);

    // Paginated.
    let page = get(
        &hub,
        &format!("/v1/subscriptions/{id}/dead-letters?pageSize=1"),
    )
    .await;
    assert_eq!(page.body.as_array().unwrap().len(), 1);
    let next = page.header("link").unwrap().to_owned();
    assert!(next.contains(&format!("cursor={first}")), "{next}");

    let redeliver = |seq: u64| {
        hub.request(
            Method::POST,
            &format!("/v1/subscriptions/{id}/dead-letters/{seq}/redeliver"),
            tokens::KVK,
        )
        .send()
    };
    let answer = Answer::from(redeliver(first).await.unwrap()).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    let deliveries = sink.wait_for(3, WAIT).await;
    assert_eq!(deliveries[2].json()["id"], "one", "delivered again");
    let left = dead_letters(&hub, &id, 1).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["sequence"], second);
    Answer::from(redeliver(first).await.unwrap())
        .await
        .assert_problem(404);

    let path = format!("/v1/subscriptions/{id}/dead-letters/{second}");
    let deleted = hub
        .request(Method::DELETE, &path, tokens::KVK)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    get(&hub, &path).await.assert_problem(404);
    // Others' dead letters are not visible.
    let foreign = Answer::from(
        hub.request(
            Method::GET,
            &format!("/v1/subscriptions/{id}/dead-letters"),
            tokens::GEMEENTE,
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    foreign.assert_problem(404);
}

#[tokio::test]
async fn gone_disables_the_subscription_and_keeps_its_queue_as_dead_letters() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    sink.answer_always(Reply::status(410).after(Duration::from_millis(300)));
    let config = json!({"ordering": "ordered"});
    let id = id_of(&subscribe(&hub, &sink, config).await);
    for n in 0..3 {
        publish(&hub, &format!("g-{n}")).await;
    }
    let body = eventually(&hub, &format!("/v1/subscriptions/{id}"), |b| {
        b["state"] == "disabled"
    })
    .await;
    assert_eq!(body["lastDelivery"]["statusCode"], 410);
    assert!(
        body["disabledReason"]
            .as_str()
            .unwrap()
            .contains("410 Gone"),
        "the subscription says why it is disabled: {body}"
    );
    let dead = dead_letters(&hub, &id, 3).await;
    assert_eq!(dead.len(), 3, "the failed one and the two still queued");
    publish(&hub, "after").await;
    quiet(
        "a delivery to the disabled subscription",
        Duration::from_millis(500),
    )
    .await;
    assert_eq!(sink.deliveries().len(), 1, "nothing more is delivered");
    assert!(hub.store_pending(&id).await.is_empty(), "nor queued");
    let seq = dead[1]["sequence"].as_u64().unwrap();
    let redeliver = hub
        .request(
            Method::POST,
            &format!("/v1/subscriptions/{id}/dead-letters/{seq}/redeliver"),
            tokens::KVK,
        )
        .send()
        .await
        .unwrap();
    let refused = Answer::from(redeliver).await.assert_problem(409);
    assert!(
        refused.body["detail"]
            .as_str()
            .unwrap()
            .contains("new sink")
    );
}

#[tokio::test]
async fn the_handshake_grants_refuses_and_the_sink_can_consent_later() {
    let hub = TestHub::start().await;

    // Granted: active at once, with the rate the hub asked for and the callback offered.
    let granting = Sink::start().await;
    let answer = subscribe(&hub, &granting, json!({})).await;
    assert_eq!(answer.body["state"], "active");
    assert_eq!(answer.body["validatedBy"], "handshake");
    let handshake = &granting.handshakes()[0];
    assert_eq!(handshake.header("webhook-request-origin"), Some(ORIGIN));
    assert!(
        handshake
            .header("webhook-request-rate")
            .unwrap()
            .parse::<u32>()
            .is_ok()
    );
    assert!(handshake.header("webhook-request-callback").is_some());

    // `*` grants too.
    let any = Sink::start_for_any_hub().await;
    assert_eq!(
        subscribe(&hub, &any, json!({})).await.body["state"],
        "active"
    );

    // Another origin, or none: pending, and nothing is delivered.
    let refusing = Sink::start().await;
    refusing.consent(Consent::Grant {
        origin: "someone-else".into(),
        rate: None,
    });
    let answer = subscribe(&hub, &refusing, json!({})).await;
    assert_eq!(answer.body["state"], "pending");
    assert!(
        answer.body["validationProblem"]
            .as_str()
            .unwrap()
            .contains("someone-else")
    );
    let id = id_of(&answer);
    publish(&hub, "held").await;
    quiet(
        "a delivery to a pending subscription",
        Duration::from_millis(400),
    )
    .await;
    assert!(
        refusing.deliveries().is_empty(),
        "a pending subscription receives nothing"
    );

    // The sink calls the callback it was offered: active, and the held event arrives.
    let callback = refusing.handshakes()[0]
        .header("webhook-request-callback")
        .unwrap()
        .to_owned();
    let wrong = reqwest::get(format!("{callback}x")).await.unwrap();
    assert_eq!(wrong.status(), 404, "a wrong token is refused");
    let granted = reqwest::Client::new().post(&callback).send().await.unwrap();
    assert_eq!(granted.status(), 200);
    let delivered = refusing.wait_for(1, WAIT).await;
    assert_eq!(delivered[0].json()["id"], "held");
    let body = get(&hub, &format!("/v1/subscriptions/{id}")).await.body;
    assert_eq!(
        (body["state"].as_str(), body["validatedBy"].as_str()),
        (Some("active"), Some("callback"))
    );

    // By agreement: an administrator only.
    let silent = Sink::start().await;
    silent.consent(Consent::Refuse);
    let id = id_of(&subscribe(&hub, &silent, json!({})).await);
    let path = format!("/v1/subscriptions/{id}/validation");
    let by_owner = hub
        .request(Method::POST, &path, tokens::KVK)
        .send()
        .await
        .unwrap();
    Answer::from(by_owner).await.assert_problem(403);
    let by_admin = Answer::from(
        hub.request(Method::POST, &path, tokens::ADMIN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(by_admin.body["state"], "active");
    assert_eq!(by_admin.body["validatedBy"], "agreement");

    // A new sink is asked again.
    let replaced = Answer::from(
        hub.request(Method::PUT, &format!("/v1/subscriptions/{id}"), tokens::KVK)
            .json(&json!({"sink": refusing.url, "protocol": "HTTP", "types": [TYPE]}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(refusing.handshakes().len(), 2);
}

#[tokio::test]
async fn the_allowed_rate_spaces_deliveries() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    sink.consent(Consent::Grant {
        origin: ORIGIN.into(),
        rate: Some("120".into()),
    });
    subscribe(&hub, &sink, json!({"ordering": "unordered"})).await;
    for n in 0..4 {
        publish(&hub, &format!("r-{n}")).await;
    }
    let deliveries = sink.wait_for(4, WAIT).await;
    for gap in gaps(&deliveries) {
        assert!(
            gap >= Duration::from_millis(450),
            "120/min is one per 0.5 s: {gap:?}"
        );
    }
}

#[tokio::test]
async fn delivery_resumes_after_a_restart_with_its_retry_state() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    sink.answer_always(Reply::status(503));
    let config = json!({"initialBackoff": "PT0.3S", "maxBackoff": "PT0.3S"});
    let id = id_of(&subscribe(&hub, &sink, config).await);
    publish(&hub, "survivor").await;
    sink.wait_for(2, WAIT).await;
    let hub = hub.restart().await;
    let before = hub.store_pending_attempts(&id).await;
    assert!(before >= 2, "the attempts were recorded: {before}");
    sink.answer_always(Reply::status(204));
    let body = eventually(&hub, &format!("/v1/subscriptions/{id}"), |b| {
        b["lastDelivery"]["outcome"] == "delivered"
    })
    .await;
    assert_eq!(body["state"], "active");
    assert_eq!(sink.deliveries().last().unwrap().json()["id"], "survivor");
    assert!(hub.store_pending(&id).await.is_empty());
}

#[tokio::test]
async fn changing_a_subscription_neither_abandons_nor_stalls_an_attempt_in_flight() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    sink.answer([Reply::status(204).after(Duration::from_millis(800))]);
    let body = |version: &str| {
        json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
               "protocolsettings": {"headers": {"X-Version": version}}})
    };
    let id = id_of(&subscribe_with(&hub, body("1")).await);
    publish(&hub, "during").await;
    publish(&hub, "after").await;
    sink.wait_for(1, WAIT).await;
    let replaced = hub
        .request(Method::PUT, &format!("/v1/subscriptions/{id}"), tokens::KVK)
        .json(&body("2"))
        .send()
        .await
        .unwrap();
    assert_eq!(replaced.status(), 200);
    let started = Instant::now();
    let deliveries = sink.wait_for(2, Duration::from_secs(10)).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the queue stalled"
    );
    let seen: Vec<(String, String)> = deliveries
        .iter()
        .map(|d| {
            (
                d.json()["id"].as_str().unwrap().to_owned(),
                d.header("x-version").unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [("during".into(), "1".into()), ("after".into(), "2".into())],
        "the attempt in flight finished once; the next one uses the new settings"
    );
}

/// http-webhook.md and the NL GOV Webhook guideline: deliveries use HTTPS. The hub verifies
/// the sink's certificate (here one of a private CA the hub is configured to trust) for the
/// handshake and every delivery.
#[tokio::test]
async fn https_sinks_get_the_handshake_and_deliveries_over_tls() {
    let mut options = knooppunt_tests::test_options();
    options.delivery.extra_root_certificates = knooppunt_tests::sink::test_ca_pem();
    let hub = TestHub::builder().options(options).start().await;
    let sink = Sink::start_tls().await;
    assert!(sink.url.starts_with("https://"));
    let created = subscribe(&hub, &sink, quick(json!({}))).await;
    assert_eq!(created.body["state"], "active", "{}", created.body);
    assert_eq!(sink.handshakes().len(), 1);

    publish(&hub, "tls-1").await;
    let deliveries = sink.wait_for(1, WAIT).await;
    assert_eq!(deliveries[0].json()["id"], "tls-1");
    assert_eq!(deliveries[0].header("webhook-request-origin"), Some(ORIGIN));
}

/// A sink whose certificate the hub cannot verify gets nothing: the handshake fails on the
/// certificate, the subscription stays pending and says why.
#[tokio::test]
async fn a_sink_with_an_untrusted_certificate_gets_nothing() {
    let hub = TestHub::start().await;
    let sink = Sink::start_tls().await;
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE]});
    let created = subscribe_with(&hub, body).await;
    assert_eq!(created.body["state"], "pending", "{}", created.body);
    let problem = created.body["validationProblem"]
        .as_str()
        .unwrap_or_default();
    assert!(problem.contains("certificate"), "{problem}");
    let seq = publish(&hub, "untrusted-1").await;
    assert_eq!(
        hub.store_pending(&id_of(&created)).await,
        [seq],
        "queued until the sink can be validated"
    );
    assert!(sink.deliveries().is_empty() && sink.handshakes().is_empty());
}

/// The distributed tracing extension: the event's `traceparent` and `tracestate` reach the
/// sink unchanged, and each delivery request carries the W3C Trace Context of its own hop:
/// the event's trace, a span of the hub's, the event's trace state.
#[tokio::test]
async fn deliveries_continue_the_events_trace() {
    const TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const TRACESTATE: &str = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";
    let hub = TestHub::start().await;
    let structured = Sink::start().await;
    let binary = Sink::start().await;
    subscribe(&hub, &structured, quick(json!({}))).await;
    subscribe(&hub, &binary, quick(json!({"mode": "binary"}))).await;

    let traced = json!({"specversion": "1.0", "id": "traced", "source": SOURCE, "type": TYPE,
                        "traceparent": TRACEPARENT, "tracestate": TRACESTATE, "data": {"n": 1}});
    publish_text(&hub, &traced.to_string()).await;
    publish(&hub, "untraced").await;

    let structured = structured.wait_for(2, WAIT).await;
    let binary = binary.wait_for(2, WAIT).await;
    assert_eq!(
        structured[0].json()["traceparent"],
        TRACEPARENT,
        "the event is unchanged"
    );
    assert_eq!(structured[0].json()["tracestate"], TRACESTATE);
    assert_eq!(binary[0].header("ce-traceparent"), Some(TRACEPARENT));
    assert_eq!(binary[0].header("ce-tracestate"), Some(TRACESTATE));
    let mut hub_spans = Vec::new();
    for delivery in [&structured[0], &binary[0]] {
        let hop = delivery
            .header("traceparent")
            .expect("the hop's traceparent");
        let parts: Vec<&str> = hop.split('-').collect();
        assert_eq!(parts.len(), 4, "{hop}");
        assert_eq!(parts[0], "00");
        assert_eq!(
            parts[1], "0af7651916cd43dd8448eb211c80319c",
            "the event's trace"
        );
        assert_eq!(parts[3], "01", "the event's flags");
        assert!(
            parts[2].len() == 16 && parts[2] != "b7ad6b7169203331",
            "a span of the hub's"
        );
        assert_eq!(delivery.header("tracestate"), Some(TRACESTATE));
        hub_spans.push(parts[2].to_owned());
    }
    assert_ne!(
        hub_spans[0], hub_spans[1],
        "each attempt is a span of its own"
    );
    for untraced in [&structured[1], &binary[1]] {
        assert_eq!(untraced.header("traceparent"), None);
        assert_eq!(untraced.header("tracestate"), None);
    }
}

/// The broker is the one writer of subscriptions: a 410 from a sink that a concurrent PUT
/// has just replaced must not disable the subscription with its new sink (before, the worker
/// wrote the subscription itself, from the store, after the PUT).
#[tokio::test]
async fn a_410_from_a_replaced_sink_does_not_disable_the_new_one() {
    let hub = TestHub::start().await;
    let old = Sink::start().await;
    old.answer([Reply::status(410).after(Duration::from_millis(600))]);
    let new = Sink::start().await;
    let id = id_of(&subscribe(&hub, &old, quick(json!({}))).await);
    publish(&hub, "in-flight").await;
    old.wait_for(1, WAIT).await;
    // The old sink's 410 is on its way; the subscriber moves to a new sink.
    let replacement = json!({"sink": new.url, "protocol": "HTTP", "types": [TYPE],
                             "config": quick(json!({}))});
    let replaced = Answer::from(
        hub.request(Method::PUT, &format!("/v1/subscriptions/{id}"), tokens::KVK)
            .json(&replacement)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(replaced.body["state"], "active", "{}", replaced.body);
    // Until the 410 has been answered and handled.
    eventually(&hub, &format!("/v1/subscriptions/{id}"), |b| {
        b["lastDelivery"]["statusCode"] == 410
    })
    .await;
    quiet(
        "the old sink's 410 disabling the replaced subscription",
        Duration::from_millis(300),
    )
    .await;
    let now = get(&hub, &format!("/v1/subscriptions/{id}")).await;
    assert_eq!(now.body["state"], "active", "{}", now.body);
    assert_eq!(now.body["sink"], new.url.as_str());
    publish(&hub, "after-the-move").await;
    let delivered = new.wait_for(1, WAIT).await;
    assert_eq!(delivered[0].json()["id"], "after-the-move");
}

/// Why a delivery failed, for the subscription's owner: the newest refused attempt keeps a
/// few of the sink's headers and the start of its body (the secrets the hub sent blanked
/// out), and a request that got no answer says at which step it failed (DNS, connect, TLS).
#[tokio::test]
async fn a_failed_attempt_says_what_the_sink_answered_and_where_a_request_failed() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let secret = "key-that-stays-with-the-hub-4711";
    let created = subscribe_with(
        &hub,
        json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
               "protocolsettings": {"headers": {"X-Api-Key": secret}}}),
    )
    .await;
    let id = id_of(&created);
    let body = format!(
        "{{\"detail\": \"key {secret} is not known\"}}\u{7}{}",
        "x".repeat(2000)
    );
    sink.answer([
        Reply::status(422)
            .with_header("content-type", "application/problem+json")
            .with_header("x-internal", "not kept")
            .with_body(&body),
        Reply::status(503).with_body("down for maintenance"),
    ]);
    for _ in 0..2 {
        let sent = hub
            .call(
                Method::POST,
                &format!("/v1/subscriptions/{id}/test"),
                tokens::KVK,
                None,
            )
            .await;
        assert_eq!(sent.status, 200, "{}", sent.body);
    }
    let attempts = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{id}/attempts"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(attempts.status, 200);
    let newest = &attempts.body[0];
    assert_eq!(newest["statusCode"], 503, "{newest}");
    assert_eq!(newest["answer"]["body"], "down for maintenance", "{newest}");
    assert_eq!(newest["answer"]["bodyTruncated"], false);
    // Only the newest refusal keeps its answer: one per subscription at most.
    let older = &attempts.body[1];
    assert_eq!(older["statusCode"], 422, "{older}");
    assert!(older.get("answer").is_none(), "{older}");

    // The same refusal alone: headers kept by name, body cut at 1 KiB, the secret blanked.
    sink.answer([Reply::status(422)
        .with_header("content-type", "application/problem+json")
        .with_header("x-internal", "not kept")
        .with_body(&body)]);
    hub.call(
        Method::POST,
        &format!("/v1/subscriptions/{id}/test"),
        tokens::KVK,
        None,
    )
    .await;
    let attempts = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{id}/attempts"),
            tokens::KVK,
            None,
        )
        .await;
    let answer = &attempts.body[0]["answer"];
    assert_eq!(
        answer["headers"],
        json!({"content-type": "application/problem+json"})
    );
    assert_eq!(answer["bodyTruncated"], true);
    let kept = answer["body"].as_str().unwrap();
    assert!(
        kept.starts_with("{\"detail\": \"key ******** is not known\"}\\u{7}"),
        "{kept}"
    );
    assert!(!kept.contains(secret));
    assert!(kept.len() < 1100, "{}", kept.len());

    // Where a request failed: the handshake of a new subscription says so.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    for (sink_url, step) in [
        ("https://no-such-sink.invalid/events".to_owned(), "DNS:"),
        (format!("http://127.0.0.1:{closed}/events"), "connect:"),
        (sink.url.replace("http://", "https://"), "TLS:"),
    ] {
        let created = subscribe_with(
            &hub,
            json!({"sink": sink_url, "protocol": "HTTP", "types": [TYPE]}),
        )
        .await;
        assert_eq!(created.body["state"], "pending", "{}", created.body);
        let problem = created.body["validationProblem"].as_str().unwrap();
        assert!(problem.contains(step), "{sink_url}: {problem}");
    }
}
