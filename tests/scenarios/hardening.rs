//! What a hostile probe of the hub found, each answered by the real hub on 127.0.0.1 with a
//! real hostile client: filters that cost too much to evaluate, too many subscriptions, a
//! poison event, held connection slots, a full disk, IPv6 address forms that hide a
//! reserved IPv4 address, and secrets in error messages.

use std::time::Duration;

use knooppunt_tests::sink::Sink;
use knooppunt_tests::{Answer, TestHub, test_options, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:BRP";
const WAIT: Duration = Duration::from_secs(15);

/// Publishes an event with this type and subject (structured mode).
async fn publish(hub: &TestHub, id: &str, ty: &str, subject: &str) -> Answer {
    let event = json!({"specversion": "1.0", "id": id, "source": SOURCE, "type": ty,
                       "subject": subject});
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

/// Creates a subscription as `kvk` and returns its id.
async fn subscribe(hub: &TestHub, body: Value) -> String {
    let answer = hub
        .call(Method::POST, "/v1/subscriptions", tokens::KVK, Some(body))
        .await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    answer.body["id"].as_str().unwrap().to_owned()
}

/// The value of an unlabelled metric.
async fn metric(hub: &TestHub, name: &str) -> f64 {
    let text = hub
        .request(Method::GET, "/metrics", tokens::METRICS)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no metric {name}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_costly_like_is_linear_and_runs_off_the_async_workers() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    // The probe's filter: `%` + 4,000 `a` + `b`, eight times, against a 300 KB subject.
    // Quadratic backtracking took 7.7 s a publish and stalled every client.
    let like = format!("subject LIKE '%{}b'", "a".repeat(4_000));
    for _ in 0..8 {
        subscribe(
            &hub,
            json!({"sink": sink.url, "protocol": "HTTP", "filters": [{"sql": like}]}),
        )
        .await;
    }
    let subject = format!("{}b", "a".repeat(300_000));
    let (answer, health) = tokio::join!(publish(&hub, "costly", "nl.test", &subject), async {
        hub.client.get(hub.url("/healthz")).send().await.unwrap()
    });
    assert_eq!(health.status(), 200);
    assert_eq!(answer.status, 202, "{}", answer.body);
    assert_eq!(answer.body["matchedSubscriptions"], 8, "{}", answer.body);
    assert_eq!(
        metric(&hub, "knooppunt_routing_offloaded_total").await,
        1.0,
        "eight LIKEs over 300 KB cost more than a slice: evaluated on a blocking thread"
    );
    let cheap = publish(&hub, "cheap", "nl.test", "a-b").await;
    assert_eq!(cheap.body["matchedSubscriptions"], 0, "{}", cheap.body);
    assert_eq!(metric(&hub, "knooppunt_routing_offloaded_total").await, 1.0);
    assert_eq!(
        metric(&hub, "knooppunt_filter_over_budget_total").await,
        0.0
    );
}

#[tokio::test]
async fn a_filter_past_its_budget_does_not_match_and_says_so() {
    let mut options = test_options();
    options.eval_limits.max_units = 200_000;
    let hub = TestHub::start_with_options(options).await;
    let costly_sink = Sink::start().await;
    let cheap_sink = Sink::start().await;
    let concat = vec!["subject"; 450].join(", ");
    let costly = subscribe(
        &hub,
        json!({"sink": costly_sink.url, "protocol": "HTTP",
               "filters": [{"sql": format!("LENGTH(CONCAT({concat})) > 0")}]}),
    )
    .await;
    let cheap = subscribe(
        &hub,
        json!({"sink": cheap_sink.url, "protocol": "HTTP", "types": ["nl.test"]}),
    )
    .await;

    // A small event is within the budget: both match.
    let small = publish(&hub, "small", "nl.test", "x").await;
    assert_eq!(small.body["matchedSubscriptions"], 2, "{}", small.body);
    let path = format!("/v1/subscriptions/{costly}");
    let read = hub.call(Method::GET, &path, tokens::KVK, None).await;
    assert!(read.body.get("filterBudget").is_none(), "{}", read.body);

    // A 1 MB subject: the probe's 450 CONCATs took 13 s and 4 GB; now the filter runs out
    // of budget, does not match, and the subscription and the metrics say so.
    let large = publish(&hub, "large", "nl.test", &"s".repeat(1_000_000)).await;
    assert_eq!(large.status, 202, "{}", large.body);
    assert_eq!(large.body["matchedSubscriptions"], 1, "{}", large.body);
    let read = hub.call(Method::GET, &path, tokens::KVK, None).await;
    assert_eq!(read.body["filterBudget"]["exceeded"], 1, "{}", read.body);
    assert!(read.body["filterBudget"]["lastExceededTime"].is_string());
    assert_eq!(
        metric(&hub, "knooppunt_filter_over_budget_total").await,
        1.0
    );
    let path = format!("/v1/subscriptions/{cheap}");
    let read = hub.call(Method::GET, &path, tokens::KVK, None).await;
    assert!(read.body.get("filterBudget").is_none(), "{}", read.body);
    // The cheap subscription got both events; the costly one only the small one.
    cheap_sink.wait_for(2, WAIT).await;
    costly_sink.wait_for(1, WAIT).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(costly_sink.deliveries().len(), 1);
}

#[tokio::test]
async fn a_principal_has_a_quota_of_subscriptions_and_of_filter_bytes() {
    let mut options = test_options();
    options.quotas = knooppunt_broker::Quotas {
        max_subscriptions: 3,
        max_filter_bytes: 2_000,
    };
    let hub = TestHub::start_with_options(options).await;
    let sink = Sink::start().await;
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.test"]});
    for _ in 0..3 {
        subscribe(&hub, body.clone()).await;
    }
    let refused = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(body.clone()),
        )
        .await
        .assert_problem(403);
    let detail = refused.body["detail"].as_str().unwrap();
    assert!(
        detail.contains("kvk") && detail.contains("max_subscriptions_per_principal"),
        "{detail}"
    );
    // Another principal's quota is its own.
    let other = hub
        .call(Method::POST, "/v1/subscriptions", tokens::ADMIN, Some(body))
        .await;
    assert_eq!(other.status, 201, "{}", other.body);

    // Filters past the bytes quota are refused for a replacement too.
    let list = hub
        .call(Method::GET, "/v1/subscriptions", tokens::KVK, None)
        .await;
    let id = list.body[0]["id"].as_str().unwrap().to_owned();
    let big = json!({"sink": sink.url, "protocol": "HTTP",
                     "filters": [{"exact": {"subject": "x".repeat(2_000)}}]});
    let refused = hub
        .call(
            Method::PUT,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            Some(big),
        )
        .await
        .assert_problem(403);
    let detail = refused.body["detail"].as_str().unwrap();
    assert!(
        detail.contains("max_filter_bytes_per_principal"),
        "{detail}"
    );
}
