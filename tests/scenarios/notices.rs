//! Owners told of trouble: when a subscription is disabled (its sink answered 410), left
//! pending (its sink refused the handshake), gives events up as dead letters, opens its
//! sink's breaker or passes its backlog limit, the hub publishes a CloudEvent of its own
//! about it, which the subscription's owner receives by subscribing like to any event, and
//! nobody else (not even an administrator, not through a stream); no publisher may use the
//! hub's source space.

use std::time::{Duration, Instant};

use knooppunt_broker::BacklogOptions;
use knooppunt_tests::sink::{Consent, Reply, Sink};
use knooppunt_tests::{Answer, TestHub, test_options, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const TYPE: &str = "nl.brp.notices-test";

/// A pull subscription to the hub's notices.
async fn inbox(hub: &TestHub, token: &str) -> String {
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            token,
            Some(json!({"protocol": "HTTP",
                        "filters": [{"prefix": {"type": "nl.knooppunt.subscription."}}],
                        "config": {"delivery": "pull", "ordering": "unordered"}})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    created.body["id"].as_str().unwrap().to_owned()
}

/// Notices received (and acknowledged) from `inbox` until one of `kind` is among them, or
/// nothing more came within `within`.
async fn notices(hub: &TestHub, token: &str, inbox: &str, within: Duration) -> Vec<Value> {
    let mut all = Vec::new();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let answer = Answer::from(
            hub.request(
                Method::POST,
                &format!("/v1/subscriptions/{inbox}/receive?maxEvents=100&maxWait=PT1S"),
                token,
            )
            .send()
            .await
            .unwrap(),
        )
        .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        if let Some(tokens) = answer.headers.get("knooppunt-lock-tokens") {
            let tokens: Vec<&str> = tokens.to_str().unwrap().split(", ").collect();
            let settled = hub
                .call(
                    Method::POST,
                    &format!("/v1/subscriptions/{inbox}/acknowledge"),
                    token,
                    Some(json!({"lockTokens": tokens})),
                )
                .await;
            assert_eq!(settled.status, 200);
        }
        all.extend(answer.body.as_array().unwrap().iter().cloned());
    }
    all
}

/// Publishes a CloudEvent in the structured JSON format as `token`.
async fn publish(hub: &TestHub, token: &str, event: Value) -> Answer {
    Answer::from(
        hub.request(Method::POST, "/v1/events", token)
            .header("content-type", "application/cloudevents+json")
            .body(event.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn push_subscription(hub: &TestHub, sink: &Sink) -> String {
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(
                json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
                        "config": {"maxAttempts": "1"}}),
            ),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    created.body["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriptions_owner_is_told_of_its_trouble_and_nobody_else() {
    let hub = TestHub::start().await;
    let own = inbox(&hub, tokens::KVK).await;
    let admins = inbox(&hub, tokens::ADMIN).await;
    // A subscription of the owner to every type: notices are not sent to it unasked.
    let everything = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(json!({"protocol": "HTTP", "config": {"delivery": "pull", "ordering": "unordered"}})),
        )
        .await;
    assert_eq!(everything.status, 201, "{}", everything.body);
    let everything = everything.body["id"].as_str().unwrap().to_owned();

    let gone = Sink::start().await;
    gone.answer_always(Reply::status(410));
    let disabled = push_subscription(&hub, &gone).await;
    let refusing = Sink::start().await;
    refusing.answer_always(Reply::status(400));
    let dead_lettering = push_subscription(&hub, &refusing).await;
    let unwilling = Sink::start().await;
    unwilling.consent(Consent::Refuse);
    let pending = push_subscription(&hub, &unwilling).await;

    let published = publish(
        &hub,
        tokens::PUBLISHER,
        json!({"specversion": "1.0", "id": "n-1", "type": TYPE,
               "source": "urn:nld:oin:00000001823288444000:systeem:test",
               "data": {"n": 1}}),
    )
    .await;
    assert_eq!(published.status, 202, "{}", published.body);

    let mut told: Vec<Value> = Vec::new();
    let of = |told: &[Value], kind: &str, subject: &str| {
        told.iter()
            .find(|n| {
                n["type"] == format!("nl.knooppunt.subscription.{kind}") && n["subject"] == subject
            })
            .cloned()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        told.extend(notices(&hub, tokens::KVK, &own, Duration::from_secs(1)).await);
        let all_there = of(&told, "disabled", &disabled).is_some()
            && of(&told, "dead-lettered", &dead_lettering).is_some()
            && of(&told, "pending", &pending).is_some();
        if all_there || Instant::now() > deadline {
            break;
        }
    }
    let notice = of(&told, "disabled", &disabled).expect("told it was disabled");
    assert_eq!(notice["data"]["subscription"], disabled.as_str());
    assert_eq!(notice["data"]["state"], "disabled");
    assert!(notice["data"]["reason"].as_str().unwrap().contains("410"));
    assert_eq!(notice["source"], "urn:nld:knooppunt:knooppunt.test");
    assert_eq!(notice["recipient"], "kvk");
    let notice = of(&told, "dead-lettered", &dead_lettering).expect("told of its dead letter");
    assert_eq!(notice["data"]["deadLetters"], 1);
    assert!(
        notice["data"]["reason"].as_str().unwrap().contains("400"),
        "{notice}"
    );
    let notice = of(&told, "pending", &pending).expect("told it is pending");
    assert!(
        notice["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("did not consent")
    );
    // Each about one of its own subscriptions (the one its sink disabled also gave its
    // event up as a dead letter).
    for notice in &told {
        let subject = notice["subject"].as_str().unwrap();
        assert!([&disabled, &dead_lettering, &pending].contains(&&subject.to_owned()));
    }
    let retained = told.len();

    let unasked = notices(&hub, tokens::KVK, &everything, Duration::from_secs(1)).await;
    assert!(
        unasked
            .iter()
            .all(|e| e["source"] != "urn:nld:knooppunt:knooppunt.test"),
        "{unasked:?}"
    );
    assert!(
        unasked.iter().any(|e| e["id"] == "n-1"),
        "it gets the events: {unasked:?}"
    );

    // Nobody else: not an administrator's subscription to the same types...
    assert_eq!(
        notices(&hub, tokens::ADMIN, &admins, Duration::from_secs(1)).await,
        Vec::<Value>::new()
    );
    // ... nor its stream of retained events, where the owner's stream shows them.
    let stream = |token: &'static str, id: String| {
        let hub = &hub;
        async move {
            let answer = hub
                .call(
                    Method::GET,
                    &format!("/v1/subscriptions/{id}/events"),
                    token,
                    None,
                )
                .await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            answer.body.as_array().unwrap().len()
        }
    };
    assert_eq!(stream(tokens::ADMIN, admins.clone()).await, 0);
    assert_eq!(stream(tokens::KVK, own.clone()).await, retained);

    // No publisher uses the hub's source space, an administrator neither.
    for token in [tokens::PUBLISHER, tokens::ADMIN] {
        let spoofed = publish(
            &hub,
            token,
            json!({"specversion": "1.0", "id": "n-2",
                   "type": "nl.knooppunt.subscription.disabled",
                   "source": "urn:nld:knooppunt:knooppunt.test",
                   "recipient": "kvk", "data": {}}),
        )
        .await;
        assert_eq!(spoofed.status, 403, "{}", spoofed.body);
        assert!(
            spoofed.body["detail"]
                .as_str()
                .unwrap()
                .contains("the hub's own")
        );
    }
}

/// A sink that fails every delivery: the attempt that opens its breaker, and the backlog
/// limit its subscription then passes (its oldest shed into dead letters), are each told to
/// the owner once, with the numbers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_is_told_when_its_sinks_breaker_opens_and_its_backlog_limit_is_reached() {
    let mut options = test_options();
    options.delivery.connections.breaker_failures = 3;
    options.delivery.connections.breaker_max_pause = Duration::from_secs(1);
    options.backlog = BacklogOptions {
        subscription_max_bytes: 20_000,
        check_interval: Duration::from_millis(100),
        ..BacklogOptions::default()
    };
    let hub = TestHub::builder().options(options).start().await;
    let own = inbox(&hub, tokens::KVK).await;
    let failing = Sink::start().await;
    failing.answer_always(Reply::status(503));
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(json!({"sink": failing.url, "protocol": "HTTP", "types": [TYPE]})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let troubled = created.body["id"].as_str().unwrap().to_owned();

    for n in 0..20 {
        let published = publish(
            &hub,
            tokens::PUBLISHER,
            json!({"specversion": "1.0", "id": format!("b-{n}"), "type": TYPE,
                   "source": "urn:nld:oin:00000001823288444000:systeem:test",
                   "data": "x".repeat(4000)}),
        )
        .await;
        assert_eq!(published.status, 202, "{}", published.body);
    }

    let kind = |notice: &Value, kind: &str| {
        notice["type"] == format!("nl.knooppunt.subscription.{kind}")
            && notice["subject"] == troubled.as_str()
    };
    let mut told: Vec<Value> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(told.iter().any(|n| kind(n, "breaker-opened"))
        && told.iter().any(|n| kind(n, "backlog-limit-reached")))
    {
        assert!(Instant::now() < deadline, "not told: {told:?}");
        told.extend(notices(&hub, tokens::KVK, &own, Duration::from_millis(500)).await);
    }
    let opened: Vec<&Value> = told.iter().filter(|n| kind(n, "breaker-opened")).collect();
    assert_eq!(opened.len(), 1, "once a minute at most: {opened:?}");
    assert_eq!(opened[0]["data"]["failures"], 3);
    assert_eq!(opened[0]["data"]["state"], "paused");
    assert_eq!(opened[0]["recipient"], "kvk");
    let limit = told
        .iter()
        .find(|n| kind(n, "backlog-limit-reached"))
        .unwrap();
    assert!(
        limit["data"]["deadLetters"].as_u64().unwrap() >= 1,
        "{limit}"
    );
    assert!(
        limit["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("subscription_max_bytes"),
        "{limit}"
    );
}
