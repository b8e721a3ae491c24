//! Operating the hub: health and readiness.

use knooppunt_tests::wait::until;
use knooppunt_tests::{Answer, TestHub};

#[tokio::test]
async fn health_and_readiness_need_no_token_and_say_what_is_wrong() {
    let hub = TestHub::start().await;
    let get = |path: &str| hub.client.get(hub.url(path)).send();
    let health = Answer::from(get("/healthz").await.unwrap()).await;
    assert_eq!(health.status, 200);
    assert_eq!(health.body["status"], "up");
    let ready = Answer::from(get("/readyz").await.unwrap()).await;
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert_eq!(ready.body["checks"]["store"], "ok");
    assert_eq!(ready.body["checks"]["delivery"], "running");

    // Stopping the workers (as a shutdown does) makes the hub unready, still healthy.
    hub.hub.stop().await;
    let unready = Answer::from(get("/readyz").await.unwrap())
        .await
        .assert_problem(503);
    assert_eq!(unready.body["checks"]["delivery"], "stopped");
    assert!(
        unready.body["detail"]
            .as_str()
            .unwrap()
            .contains("delivery workers: stopped")
    );
    assert_eq!(
        Answer::from(get("/healthz").await.unwrap()).await.status,
        200
    );
}

/// The value of one sample line (`name{labels}`) of a Prometheus exposition.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in\n{text}"))
        .parse()
        .unwrap()
}

async fn scrape(hub: &TestHub) -> String {
    let response = hub
        .request(
            reqwest::Method::GET,
            "/metrics",
            knooppunt_tests::tokens::METRICS,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    response.text().await.unwrap()
}

#[tokio::test]
async fn metrics_move_when_events_flow() {
    use knooppunt_tests::sink::{Reply, Sink};
    use knooppunt_tests::tokens;
    use reqwest::Method;
    use serde_json::json;

    let hub = TestHub::start().await;
    let good = Sink::start().await;
    let bad = Sink::start().await;
    bad.answer_always(Reply::status(400));
    let mut ids = Vec::new();
    for sink in [&good, &bad] {
        let created = Answer::from(
            hub.request(Method::POST, "/v1/subscriptions", tokens::KVK)
                .json(&json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.test.metrics"]}))
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(created.body["state"], "active");
        ids.push(created.body["id"].as_str().unwrap().to_owned());
    }
    let before = scrape(&hub).await;
    assert_eq!(
        sample(&before, r#"knooppunt_subscriptions{state="active"}"#),
        2.0
    );
    assert_eq!(sample(&before, "knooppunt_routing_seconds_count"), 0.0);

    let publish = |body: String| {
        hub.request(Method::POST, "/v1/events", tokens::PUBLISHER)
            .header("content-type", "application/cloudevents+json")
            .body(body)
            .send()
    };
    let event = json!({"specversion": "1.0", "id": "m-1", "type": "nl.test.metrics",
                       "source": "urn:nld:oin:00000001823288444000:systeem:test"});
    assert_eq!(publish(event.to_string()).await.unwrap().status(), 202);
    assert_eq!(publish(event.to_string()).await.unwrap().status(), 202);
    assert_eq!(publish("{}".into()).await.unwrap().status(), 400);
    good.wait_for(1, std::time::Duration::from_secs(10)).await;
    bad.wait_for(1, std::time::Duration::from_secs(10)).await;

    // Each subscription's series name its owner, the principal to call about it.
    let dead = format!(
        "knooppunt_dead_letters{{subscription=\"{}\",owner=\"kvk\"}}",
        ids[1]
    );
    let depth = format!(
        "knooppunt_queue_depth{{subscription=\"{}\",owner=\"kvk\"}}",
        ids[0]
    );
    let within = std::time::Duration::from_secs(10);
    let after = until(
        "the dead letter and the empty queue counted",
        within,
        || async {
            let text = scrape(&hub).await;
            if sample(&text, &dead) == 1.0 && sample(&text, &depth) == 0.0 {
                Ok(text)
            } else {
                Err(format!(
                    "{dead} {}, {depth} {}",
                    sample(&text, &dead),
                    sample(&text, &depth)
                ))
            }
        },
    )
    .await;
    let series = |s: &str| sample(&after, s);
    assert_eq!(
        series(r#"knooppunt_events_total{outcome="accepted",reason="matched"}"#),
        1.0
    );
    assert_eq!(
        series(r#"knooppunt_events_total{outcome="duplicate",reason="duplicate"}"#),
        1.0
    );
    assert_eq!(
        series(r#"knooppunt_events_total{outcome="rejected",reason="invalid"}"#),
        1.0
    );
    assert_eq!(series("knooppunt_deliveries_queued_total"), 2.0);
    assert_eq!(
        series("knooppunt_routing_seconds_count"),
        2.0,
        "the duplicate is routed too"
    );
    assert_eq!(series(r#"knooppunt_event_matches_bucket{le="1"}"#), 0.0);
    assert_eq!(series(r#"knooppunt_event_matches_bucket{le="2"}"#), 1.0);
    assert_eq!(
        series("knooppunt_event_matches_count"),
        1.0,
        "accepted events only"
    );
    // Each subscription's attempts apart, with its owner.
    assert_eq!(
        series(&format!(
            r#"knooppunt_delivery_attempts_total{{subscription="{}",owner="kvk",outcome="delivered",status_code="204"}}"#,
            ids[0]
        )),
        1.0
    );
    assert_eq!(
        series(&format!(
            r#"knooppunt_delivery_attempts_total{{subscription="{}",owner="kvk",outcome="deadLetter",status_code="400"}}"#,
            ids[1]
        )),
        1.0
    );
    // Each sink's breaker: closed.
    for sink in [&good, &bad] {
        let key = sink.url.split('/').take(3).collect::<Vec<_>>().join("/");
        assert_eq!(
            series(&format!(
                r#"knooppunt_delivery_breaker_open{{sink="{key}"}}"#
            )),
            0.0
        );
    }
    assert_eq!(series("knooppunt_delivery_attempt_seconds_count"), 2.0);
    for id in &ids {
        assert_eq!(
            series(&format!(
                "knooppunt_queue_depth{{subscription=\"{id}\",owner=\"kvk\"}}"
            )),
            0.0
        );
    }
    assert_eq!(
        series(&format!(
            "knooppunt_dead_letters{{subscription=\"{}\",owner=\"kvk\"}}",
            ids[1]
        )),
        1.0
    );
    assert!(series("knooppunt_store_event_bytes") > 0.0);
    assert!(series("knooppunt_store_bytes") >= series("knooppunt_store_event_bytes"));
    assert_eq!(
        series("knooppunt_event_retention_seconds"),
        7.0 * 24.0 * 3600.0,
        "P7D by default"
    );
    for id in &ids {
        assert_eq!(
            series(&format!(
                "knooppunt_queue_leased_deliveries{{subscription=\"{id}\",owner=\"kvk\"}}"
            )),
            0.0
        );
    }
}

/// Errors by kind: a store that takes no writes (closed, or stopped after a failed write)
/// answers 503 with `Retry-After`, saying nothing was kept, not 500.
#[tokio::test]
async fn a_store_that_takes_no_writes_answers_503() {
    use knooppunt_tests::tokens;
    use reqwest::Method;
    use serde_json::json;

    let hub = TestHub::start().await;
    hub.store.close();
    let event = json!({"specversion": "1.0", "id": "closed-1", "type": "nl.test.closed",
                       "source": "urn:nld:oin:00000001823288444000:systeem:test"});
    let answer = Answer::from(
        hub.request(Method::POST, "/v1/events", tokens::PUBLISHER)
            .header("content-type", "application/cloudevents+json")
            .body(event.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await
    .assert_problem(503);
    assert_eq!(answer.header("retry-after"), Some("5"));
    assert!(
        answer.body["detail"]
            .as_str()
            .unwrap()
            .contains("nothing of this request was kept"),
        "{}",
        answer.body
    );
}

/// A hub stopped at once, before its background tasks first ran (a SIGTERM right after
/// start-up under load), still stops: they must see a stop that came before they looked.
#[tokio::test(flavor = "current_thread")]
async fn a_hub_stopped_before_its_tasks_ran_still_stops() {
    let data = tempfile::tempdir().unwrap();
    let store = knooppunt_store_embedded::EmbeddedStore::open(data.path()).unwrap();
    let hub =
        knooppunt_broker::Hub::open(std::sync::Arc::new(store), knooppunt_tests::test_options())
            .await
            .unwrap();
    let stopped = tokio::time::timeout(std::time::Duration::from_secs(10), hub.stop()).await;
    assert!(stopped.is_ok(), "the hub did not stop");
}
