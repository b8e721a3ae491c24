//! Bulkheads: what one hostile or broken tenant can do to the hub and to other tenants.
//! Each scenario starts the real hub on 127.0.0.1 and attacks it as a client would.

use std::time::Duration;

use knooppunt_filter::Limits;
use knooppunt_tests::sink::Sink;
use knooppunt_tests::{Answer, TestHub, test_options, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:BRP";
const TYPE: &str = "nl.brp.persoon-verhuisd";
const WAIT: Duration = Duration::from_secs(15);

async fn post_subscription(hub: &TestHub, body: &Value) -> Answer {
    Answer::from(
        hub.request(Method::POST, "/v1/subscriptions", tokens::KVK)
            .json(body)
            .send()
            .await
            .unwrap(),
    )
    .await
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

async fn publish(hub: &TestHub, id: &str) -> Answer {
    let event = json!({"specversion": "1.0", "id": id, "source": SOURCE, "type": TYPE});
    Answer::from(
        hub.request(Method::POST, "/v1/events", tokens::PUBLISHER)
            .header("content-type", "application/cloudevents+json")
            .body(event.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await
}

fn sql_subscription(sink: &Sink, sql: &str) -> Value {
    json!({"sink": sink.url, "protocol": "HTTP", "filters": [{"sql": sql}]})
}

/// The problem's message for `filters[0].sql`.
fn sql_problem(answer: Answer) -> String {
    let answer = answer.assert_problem(400);
    assert_eq!(
        answer.invalid_params(),
        ["filters[0].sql"],
        "{}",
        answer.body
    );
    answer.body["invalidParams"][0]["reason"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn poison_pill_filters_are_refused_and_the_hub_keeps_serving() {
    let mut options = test_options();
    // Long texts allowed, so that depth and size are what refuses them.
    options.filter_limits = Limits::try_new(32, 1_000, 65_536).unwrap();
    let hub = TestHub::start_with_options(options).await;
    let sink = Sink::start().await;

    let deep = format!("{}TRUE{}", "(".repeat(5_000), ")".repeat(5_000));
    let why = sql_problem(post_subscription(&hub, &sql_subscription(&sink, &deep)).await);
    assert!(why.contains("max_depth") && why.contains("32"), "{why}");

    let long = vec!["TRUE"; 7_000].join(" AND ");
    let why = sql_problem(post_subscription(&hub, &sql_subscription(&sink, &long)).await);
    assert!(why.contains("max_nodes") && why.contains("1000"), "{why}");

    let mut nested = json!({"exact": {"type": TYPE}});
    for _ in 0..100 {
        nested = json!({"not": nested});
    }
    let body = json!({"sink": sink.url, "protocol": "HTTP", "filters": [nested]});
    let answer = post_subscription(&hub, &body).await.assert_problem(400);
    assert!(
        answer.body.to_string().contains("max_depth"),
        "{}",
        answer.body
    );

    // Nothing was stored, and the hub still routes and answers.
    assert_eq!(get(&hub, "/v1/subscriptions").await.body, json!([]));
    assert_eq!(publish(&hub, "after-the-attack").await.status, 202);
    let health = hub.client.get(hub.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn the_length_of_an_expression_is_limited_by_default() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let long = vec!["TRUE"; 7_000].join(" AND ");
    let why = sql_problem(post_subscription(&hub, &sql_subscription(&sink, &long)).await);
    assert!(
        why.contains("max_sql_length") && why.contains("4096"),
        "{why}"
    );
}

#[tokio::test]
async fn a_stored_filter_beyond_the_limits_disables_its_subscription_at_start_up() {
    let mut generous = test_options();
    generous.filter_limits = Limits::CEILING;
    let hub = TestHub::start_with_options(generous).await;
    let sink = Sink::start().await;
    let other_sink = Sink::start().await;
    let deep = format!("{}type = '{TYPE}'", "NOT NOT ".repeat(50));
    let created = post_subscription(&hub, &sql_subscription(&sink, &deep)).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_owned();
    let plain = json!({"sink": other_sink.url, "protocol": "HTTP", "types": [TYPE]});
    assert_eq!(post_subscription(&hub, &plain).await.status, 201);

    // The operator lowers the limits: the hub starts, and disables only that subscription.
    let hub = hub.restart_with(test_options()).await;
    let stored = get(&hub, &format!("/v1/subscriptions/{id}")).await;
    assert_eq!(stored.status, 200);
    assert_eq!(stored.body["state"], "disabled", "{}", stored.body);
    let reason = stored.body["disabledReason"].as_str().unwrap();
    assert!(reason.contains("max_depth"), "{reason}");

    // It is not routed to; the other subscription is.
    assert_eq!(publish(&hub, "e-1").await.status, 202);
    other_sink.wait_for(1, WAIT).await;
    assert!(sink.deliveries().is_empty());

    // It stays disabled across restarts, and comes back when replaced within the limits.
    let hub = hub.restart().await;
    let stored = get(&hub, &format!("/v1/subscriptions/{id}")).await;
    assert_eq!(stored.body["state"], "disabled", "{}", stored.body);
    let fixed = sql_subscription(&sink, &format!("type = '{TYPE}'"));
    let replaced = Answer::from(
        hub.request(Method::PUT, &format!("/v1/subscriptions/{id}"), tokens::KVK)
            .json(&fixed)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(replaced.body["state"], "active", "{}", replaced.body);
    assert!(replaced.body.get("disabledReason").is_none());
    assert_eq!(publish(&hub, "e-2").await.status, 202);
    sink.wait_for(1, WAIT).await;
}
