//! Bulkheads: what one hostile or broken tenant can do to the hub and to other tenants.
//! Each scenario starts the real hub on 127.0.0.1 and attacks it as a client would.

use knooppunt_store::Records;
use std::time::Duration;

use knooppunt_filter::Limits;
use knooppunt_tests::sink::Reply;
use knooppunt_tests::sink::Sink;
use knooppunt_tests::wait::until;
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

async fn put_subscription(hub: &TestHub, id: &str, body: &Value) -> Answer {
    let path = format!("/v1/subscriptions/{id}");
    Answer::from(
        hub.request(Method::PUT, &path, tokens::KVK)
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

/// Publishes an event of type `ty`.
async fn publish_as(hub: &TestHub, id: &str, ty: &str) -> Answer {
    let event = json!({"specversion": "1.0", "id": id, "source": SOURCE, "type": ty});
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

async fn publish(hub: &TestHub, id: &str) -> Answer {
    publish_as(hub, id, TYPE).await
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
    let hub = TestHub::builder().options(options).start().await;
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
    let hub = TestHub::builder().options(generous).start().await;
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
    let replaced = put_subscription(&hub, &id, &fixed).await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(replaced.body["state"], "active", "{}", replaced.body);
    assert!(replaced.body.get("disabledReason").is_none());
    assert_eq!(publish(&hub, "e-2").await.status, 202);
    sink.wait_for(1, WAIT).await;
}

async fn subscribe_unordered(hub: &TestHub, sink: &Sink, ty: &str) -> String {
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [ty],
                      "config": {"ordering": "unordered", "timeout": "PT30S"}});
    let created = post_subscription(hub, &body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    created.body["id"].as_str().unwrap().to_owned()
}

async fn publish_type(hub: &TestHub, id: &str, ty: &str) {
    let answer = publish_as(hub, id, ty).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
}

#[tokio::test]
async fn a_slow_sink_gets_only_its_share_of_connections_and_others_are_not_held() {
    let mut options = test_options();
    options.delivery.connections.max_connections = 4;
    options.delivery.connections.max_per_sink = 2;
    options.delivery.max_in_flight = 16;
    let hub = TestHub::builder().options(options).start().await;
    let slow = Sink::start().await;
    slow.answer_always(Reply::status(204).after(Duration::from_millis(400)));
    let fast = Sink::start().await;
    // Two subscriptions on the slow sink, each allowed 16 deliveries in flight.
    subscribe_unordered(&hub, &slow, "nl.test.slow").await;
    let mut second = json!({"sink": format!("{}?second", slow.url), "protocol": "HTTP",
                            "types": ["nl.test.slow"], "config": {"ordering": "unordered"}});
    second["config"]["timeout"] = json!("PT30S");
    assert_eq!(post_subscription(&hub, &second).await.status, 201);
    subscribe_unordered(&hub, &fast, "nl.test.fast").await;

    for i in 0..8 {
        publish_type(&hub, &format!("slow-{i}"), "nl.test.slow").await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = std::time::Instant::now();
    publish_type(&hub, "fast-1", "nl.test.fast").await;
    fast.wait_for(1, Duration::from_secs(5)).await;
    assert!(
        started.elapsed() < Duration::from_millis(350),
        "the fast sink waited {:?} behind the slow one",
        started.elapsed()
    );
    slow.wait_for(16, WAIT).await;
    assert_eq!(
        slow.most_in_flight(),
        2,
        "at most max_per_sink requests at once to one sink, across its subscriptions"
    );
}

/// A hub whose connections are cut quickly, for the slow-client scenarios.
async fn strict_hub(max_connections: usize) -> TestHub {
    let limits = knooppunt_broker::ServerLimits {
        max_connections,
        header_timeout: Duration::from_millis(500),
        body_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_secs(5),
        ..knooppunt_broker::ServerLimits::default()
    };
    TestHub::builder()
        .options(test_options())
        .transport(knooppunt_broker::Transport { limits, tls: None })
        .start()
        .await
}

/// Reads until the hub closes the connection (at most `within`); what it sent.
async fn read_until_closed(stream: &mut tokio::net::TcpStream, within: Duration) -> String {
    use tokio::io::AsyncReadExt;
    let mut received = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "the hub kept the connection open for {within:?}"
    );
    String::from_utf8_lossy(&received).into_owned()
}

async fn connect(hub: &TestHub) -> tokio::net::TcpStream {
    tokio::net::TcpStream::connect(hub.address).await.unwrap()
}

async fn send(stream: &mut tokio::net::TcpStream, bytes: &[u8]) {
    use tokio::io::AsyncWriteExt;
    stream.write_all(bytes).await.unwrap();
}

/// The JSON body of a raw HTTP response.
fn problem_of(response: &str) -> Value {
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|_| panic!("no JSON body in {response:?}"))
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    let hub = strict_hub(16).await;
    let mut stream = connect(&hub).await;
    send(
        &mut stream,
        b"POST /v1/events HTTP/1.1\r\nHost: hub\r\nX-Slow: ",
    )
    .await;
    let started = std::time::Instant::now();
    read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(started.elapsed() >= Duration::from_millis(400));
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed() {
    let hub = strict_hub(16).await;
    let mut stream = connect(&hub).await;
    send(&mut stream, b"GET /healthz HTTP/1.1\r\nHost: hub\r\n\r\n").await;
    let response = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
}

#[tokio::test]
async fn a_body_that_does_not_arrive_gets_408_as_a_problem() {
    let hub = strict_hub(16).await;
    let mut stream = connect(&hub).await;
    let head = format!(
        "POST /v1/events HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/cloudevents+json\r\nContent-Length: 200\r\n\r\n{{\"specversion\"",
        tokens::PUBLISHER
    );
    send(&mut stream, head.as_bytes()).await;
    let response = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(response.starts_with("HTTP/1.1 408"), "{response}");
    assert!(response.contains("application/problem+json"), "{response}");
    let problem = problem_of(&response);
    assert_eq!(problem["status"], 408);
    assert!(
        problem["detail"].as_str().unwrap().contains("500 ms"),
        "{problem}"
    );
}

#[tokio::test]
async fn connections_past_the_limit_wait_and_are_served_when_one_closes() {
    let limits = knooppunt_broker::ServerLimits {
        max_connections: 2,
        idle_timeout: Duration::from_secs(10),
        ..knooppunt_broker::ServerLimits::default()
    };
    let hub = TestHub::builder()
        .options(test_options())
        .transport(knooppunt_broker::Transport { limits, tls: None })
        .start()
        .await;
    // Two connections answering whole requests (receives that wait a second for events)
    // hold both slots: busy connections are never closed to make room (idle and unfinished
    // ones are, see `hardening.rs`).
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::GEMEENTE,
            Some(json!({"protocol": "HTTP", "types": ["nl.brp.busy"],
                        "config": {"delivery": "pull"}})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let head = format!(
        "POST /v1/subscriptions/{}/receive?maxWait=PT1S HTTP/1.1\r\nHost: hub\r\n\
         Authorization: Bearer {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        created.body["id"].as_str().unwrap(),
        tokens::GEMEENTE
    );
    let mut first = connect(&hub).await;
    send(&mut first, head.as_bytes()).await;
    let mut second = connect(&hub).await;
    send(&mut second, head.as_bytes()).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    let mut third = connect(&hub).await;
    send(
        &mut third,
        b"GET /healthz HTTP/1.1\r\nHost: hub\r\nConnection: close\r\n\r\n",
    )
    .await;
    let response = read_until_closed(&mut third, Duration::from_secs(5)).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "the third connection was served at once ({:?}): no limit",
        started.elapsed()
    );
    for mut waited in [first, second] {
        let response = read_until_closed(&mut waited, Duration::from_secs(5)).await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }
}

#[tokio::test]
async fn a_long_poll_is_answered_before_the_server_would_close_the_silent_connection() {
    // The server closes a connection that is silent for 7 s; a receive asked to wait 30 s
    // is answered (empty) after at most 2 s instead, so the subscriber sees an answer and
    // not a closed connection.
    let limits = knooppunt_broker::ServerLimits {
        idle_timeout: Duration::from_secs(7),
        ..knooppunt_broker::ServerLimits::default()
    };
    let hub = TestHub::builder()
        .options(test_options())
        .transport(knooppunt_broker::Transport { limits, tls: None })
        .start()
        .await;
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::GEMEENTE,
            Some(json!({"protocol": "HTTP", "types": ["nl.brp.quiet"],
                        "config": {"delivery": "pull"}})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let mut stream = connect(&hub).await;
    send(
        &mut stream,
        format!(
            "POST /v1/subscriptions/{}/receive?maxWait=PT30S HTTP/1.1\r\nHost: hub\r\n\
             Authorization: Bearer {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            created.body["id"].as_str().unwrap(),
            tokens::GEMEENTE
        )
        .as_bytes(),
    )
    .await;
    let response = read_until_closed(&mut stream, Duration::from_secs(30)).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response:?}");
    assert!(response.ends_with("[]"), "{response}");
}

/// What every answer carries, also one the HTTP layer writes before the router sees the
/// request: a `Date` (RFC 9110 §6.6.1, MUST) and the headers docs/api.md promises on every
/// response, as a routed answer has them.
fn assert_every_answers_headers(response: &str, routed: &reqwest::header::HeaderMap) {
    let head = response.split("\r\n\r\n").next().unwrap();
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (found, value) = line.split_once(": ")?;
            found.eq_ignore_ascii_case(name).then(|| value.to_owned())
        })
    };
    let date = header("date").unwrap_or_else(|| panic!("no Date: {response}"));
    assert!(
        httpdate::parse_http_date(&date).is_ok(),
        "an IMF-fixdate: {date}"
    );
    for name in [
        "api-version",
        "content-security-policy",
        "referrer-policy",
        "cache-control",
        "x-content-type-options",
        "x-frame-options",
        "strict-transport-security",
    ] {
        let expected = routed[name].to_str().unwrap();
        assert_eq!(
            header(name).as_deref(),
            Some(expected),
            "{name}: {response}"
        );
    }
}

/// A raw request's answer, read until the hub closes the connection.
async fn raw(hub: &TestHub, request: &[u8]) -> String {
    let mut stream = connect(hub).await;
    // The hub may answer before it has read it all, so the rest may not be taken.
    let _ = tokio::io::AsyncWriteExt::write_all(&mut stream, request).await;
    read_until_closed(&mut stream, Duration::from_secs(5)).await
}

#[tokio::test]
async fn requests_hyper_cannot_parse_get_problem_answers() {
    let hub = TestHub::start().await;
    let routed = reqwest::get(hub.url("/healthz")).await.unwrap();
    let routed = routed.headers().clone();
    let mut stream = connect(&hub).await;
    send(&mut stream, b"NOT HTTP AT ALL\r\n\r\n").await;
    let response = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(response.starts_with("HTTP/1.1 400"), "{response}");
    assert!(
        response.contains("content-type: application/problem+json"),
        "{response}"
    );
    assert_eq!(problem_of(&response)["status"], 400);
    assert_every_answers_headers(&response, &routed);

    let bogus = raw(
        &hub,
        b"POST /v1/events HTTP/1.1\r\nHost: hub\r\nTransfer-Encoding: bogus\r\n\r\n",
    )
    .await;
    assert!(bogus.starts_with("HTTP/1.1 400"), "{bogus}");
    assert_every_answers_headers(&bogus, &routed);
    let long = format!(
        "GET /v1/subscriptions?x={} HTTP/1.1\r\nHost: hub\r\n\r\n",
        "a".repeat(100 * 1024)
    );
    let long = raw(&hub, long.as_bytes()).await;
    assert!(long.starts_with("HTTP/1.1 414"), "{long}");
    assert_every_answers_headers(&long, &routed);
    let many: String = (0..200).map(|n| format!("X-Field-{n}: v\r\n")).collect();
    let many = raw(
        &hub,
        format!("GET /healthz HTTP/1.1\r\nHost: hub\r\n{many}\r\n").as_bytes(),
    )
    .await;
    assert!(many.starts_with("HTTP/1.1 431"), "{many}");
    assert_every_answers_headers(&many, &routed);

    let mut stream = connect(&hub).await;
    let huge = format!(
        "GET /healthz HTTP/1.1\r\nHost: hub\r\nX-Big: {}\r\n\r\n",
        "a".repeat(600 * 1024)
    );
    // The hub answers before it has read it all, so the rest may not be taken.
    let _ = tokio::io::AsyncWriteExt::write_all(&mut stream, huge.as_bytes()).await;
    let response = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    assert!(response.starts_with("HTTP/1.1 431"), "{response}");
    assert_every_answers_headers(&response, &routed);
    let problem = problem_of(&response);
    assert_eq!(problem["status"], 431);
    assert!(
        problem["detail"].as_str().unwrap().contains("headers"),
        "{problem}"
    );
}

async fn created_id(hub: &TestHub, body: &Value) -> String {
    let created = post_subscription(hub, body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    created.body["id"].as_str().unwrap().to_owned()
}

async fn dead_letters_of(hub: &TestHub, id: &str) -> Vec<Value> {
    let answer = get(hub, &format!("/v1/subscriptions/{id}/dead-letters")).await;
    answer.body.as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_dead_sink_is_probed_instead_of_hammered_and_others_are_not_slowed() {
    let mut options = test_options();
    options.delivery.connections.breaker_failures = 3;
    let hub = TestHub::builder().options(options).start().await;
    let dead = Sink::start().await;
    dead.answer_always(Reply::status(503));
    let healthy = Sink::start().await;
    let quick = json!({"ordering": "unordered", "initialBackoff": "PT0.05S",
                       "maxBackoff": "PT0.1S", "maxAttempts": "1000"});
    let body = json!({"sink": dead.url, "protocol": "HTTP", "types": ["nl.test.dead"],
                      "config": quick});
    assert_eq!(post_subscription(&hub, &body).await.status, 201);
    subscribe_unordered(&hub, &healthy, "nl.test.fast").await;

    for i in 0..30 {
        publish_type(&hub, &format!("dead-{i}"), "nl.test.dead").await;
    }
    let started = std::time::Instant::now();
    for i in 0..20 {
        publish_type(&hub, &format!("fast-{i}"), "nl.test.fast").await;
    }
    healthy.wait_for(20, WAIT).await;
    tokio::time::sleep(Duration::from_secs(3).saturating_sub(started.elapsed())).await;
    // Without a breaker: 30 events retried every 50-100 ms for 3 s, over a thousand
    // attempts. With it: the first failures in flight, then a probe after 1 s, 2 s, ...
    let attempts = dead.deliveries().len();
    assert!(
        attempts <= 30 + 3,
        "{attempts} attempts at a dead sink in 3 s"
    );
    // The metrics show which breaker is open.
    let metrics = hub
        .request(Method::GET, "/metrics", tokens::METRICS)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let breaker = |sink: &Sink| {
        let key = sink.url.split('/').take(3).collect::<Vec<_>>().join("/");
        let series = format!(r#"knooppunt_delivery_breaker_open{{sink="{key}"}} "#);
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(&series).map(str::to_owned))
            .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
    };
    assert_eq!(breaker(&dead), "1");
    assert_eq!(breaker(&healthy), "0");

    // The sink recovers: the next probe succeeds and everything is delivered.
    dead.answer_always(Reply::status(204));
    until(
        "all 30 delivered after the sink came back",
        WAIT,
        || async {
            let ok = dead.deliveries().len();
            if ok >= attempts + 30 {
                Ok(())
            } else {
                Err(format!("{ok} answered, {attempts} of them refused"))
            }
        },
    )
    .await;
}

#[tokio::test]
async fn retry_after_pauses_every_delivery_to_the_sink() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    sink.answer([Reply::status(429).with_header("retry-after", "2")]);
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
                      "config": {"ordering": "unordered", "initialBackoff": "PT0.05S",
                                 "maxBackoff": "PT0.1S"}});
    // Another subscription at the same sink pauses as well.
    let mut other = body.clone();
    other["sink"] = json!(format!("{}?other", sink.url));
    let ids = [
        created_id(&hub, &body).await,
        created_id(&hub, &other).await,
    ];
    assert_eq!(publish(&hub, "e-0").await.status, 202);
    sink.wait_for(1, WAIT).await;
    // Once the hub has the 429 (not merely sent it), nothing may go for 2 s.
    tokio::time::timeout(WAIT, async {
        loop {
            for id in &ids {
                let status = get(&hub, &format!("/v1/subscriptions/{id}")).await.body
                    ["lastDelivery"]["statusCode"]
                    .clone();
                if status == 429 {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the 429 recorded");
    let told = std::time::Instant::now();
    for i in 1..=4 {
        assert_eq!(publish(&hub, &format!("e-{i}")).await.status, 202);
    }
    // e-0 again, and e-1..e-4 to both subscriptions (e-0 to the other may have gone before).
    let deliveries = sink.wait_for(10, WAIT).await;
    let after: Vec<_> = deliveries
        .iter()
        .filter(|d| d.at > told)
        .map(|d| d.at.duration_since(told))
        .collect();
    assert!(after.len() >= 9, "{after:?}");
    assert!(
        after.iter().all(|gap| *gap >= Duration::from_millis(1900)),
        "requests reached the sink before its Retry-After: {after:?}"
    );
}

#[tokio::test]
async fn a_retry_after_past_the_ttl_dead_letters_with_that_reason() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    sink.answer([Reply::status(503).with_header("retry-after", "3600")]);
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
                      "config": {"ttl": "PT60S"}});
    let created = post_subscription(&hub, &body).await;
    let id = created.body["id"].as_str().unwrap().to_owned();
    assert_eq!(publish(&hub, "too-late").await.status, 202);
    sink.wait_for(1, WAIT).await;
    let dead = until("a dead letter", WAIT, || async {
        let dead = dead_letters_of(&hub, &id).await;
        if dead.is_empty() {
            Err("none yet")
        } else {
            Ok(dead)
        }
    })
    .await;
    let reason = dead[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("Retry-After") && reason.contains("3600"),
        "{reason}"
    );
}

/// A hub that allows no reserved networks: the default of a real hub.
async fn hub_without_allowed_networks() -> TestHub {
    let mut options = test_options();
    options.delivery.sink_networks = knooppunt_broker::SinkNetworks::default();
    TestHub::builder().options(options).start().await
}

#[tokio::test]
async fn sinks_in_reserved_networks_are_refused_without_saying_more() {
    let hub = hub_without_allowed_networks().await;
    let listening = Sink::start().await;
    for sink in [
        listening.url.clone(),
        listening.url.replace("127.0.0.1", "localhost"),
        "http://127.0.0.1:22/".to_owned(),
        "http://[::1]:9/".to_owned(),
        "https://169.254.169.254/latest/meta-data/".to_owned(),
        "https://10.1.2.3/events".to_owned(),
        "https://192.168.1.10/events".to_owned(),
        "https://[fd00::1]/events".to_owned(),
        "https://[::ffff:127.0.0.1]/events".to_owned(),
    ] {
        let answer = post_subscription(&hub, &json!({"sink": sink, "protocol": "HTTP"}))
            .await
            .assert_problem(400);
        assert_eq!(answer.invalid_params(), ["sink"], "{sink}: {}", answer.body);
        let reason = answer.body["invalidParams"][0]["reason"].as_str().unwrap();
        assert!(reason.contains("allow_sink_networks"), "{reason}");
        for detail in ["127.0.0.1", "169.254", "10.1.2.3", "::1", "refused", ":22"] {
            assert!(!reason.contains(detail), "{sink}: {reason}");
        }
    }
    assert!(listening.handshakes().is_empty(), "nothing was sent");
    assert_eq!(get(&hub, "/v1/subscriptions").await.body, json!([]));
}

#[tokio::test]
async fn every_connection_is_checked_again() {
    // Registered while the operator allowed loopback, under a name; then the operator no
    // longer allows it. Like a name that resolves elsewhere later (DNS rebinding): the
    // resolver of every connection drops the refused address.
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let by_name = sink.url.replace("127.0.0.1", "localhost");
    let literal_sink = Sink::start().await;
    let mut ids = Vec::new();
    for url in [&by_name, &literal_sink.url] {
        let body = json!({"sink": url, "protocol": "HTTP", "types": [TYPE],
                          "config": {"initialBackoff": "PT0.05S", "maxBackoff": "PT0.1S"}});
        ids.push(created_id(&hub, &body).await);
    }
    let mut options = test_options();
    options.delivery.sink_networks = knooppunt_broker::SinkNetworks::default();
    let hub = hub.restart_with(options).await;
    assert_eq!(publish(&hub, "rebound").await.status, 202);
    for id in &ids {
        let error = until("an attempt", WAIT, || async {
            let body = get(&hub, &format!("/v1/subscriptions/{id}")).await.body;
            match body["lastDelivery"]["error"].as_str() {
                Some(error) => Ok(error.to_owned()),
                None => Err(body),
            }
        })
        .await;
        assert!(error.contains("allow_sink_networks"), "{error}");
    }
    assert!(sink.deliveries().is_empty() && literal_sink.deliveries().is_empty());
}

#[tokio::test]
async fn a_failed_handshake_says_what_failed_but_not_where() {
    let hub = TestHub::start().await;
    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let body = json!({"sink": format!("http://127.0.0.1:{port}/hook"), "protocol": "HTTP"});
    let created = post_subscription(&hub, &body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["state"], "pending");
    let problem = created.body["validationProblem"].as_str().unwrap();
    assert!(problem.contains("could not connect"), "{problem}");
    for detail in [
        port.to_string().as_str(),
        "os error",
        "Connection refused",
        "tcp",
    ] {
        assert!(!problem.contains(detail), "{problem}");
    }
}

#[tokio::test]
async fn metrics_need_the_metrics_role_on_the_api_address() {
    let hub = TestHub::start().await;
    let anonymous = Answer::from(hub.client.get(hub.url("/metrics")).send().await.unwrap())
        .await
        .assert_problem(401);
    assert!(anonymous.body["detail"].is_string());
    let subscriber = Answer::from(
        hub.request(Method::GET, "/metrics", tokens::KVK)
            .send()
            .await
            .unwrap(),
    )
    .await
    .assert_problem(403);
    assert!(
        subscriber.body["detail"]
            .as_str()
            .unwrap()
            .contains("metrics"),
        "{}",
        subscriber.body
    );
    for token in [tokens::METRICS, tokens::ADMIN] {
        let scraped = hub
            .request(Method::GET, "/metrics", token)
            .send()
            .await
            .unwrap();
        assert_eq!(scraped.status(), 200);
    }
}

#[tokio::test]
async fn secrets_in_the_sink_and_headers_are_write_only_and_survive_a_round_trip() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let secret_sink = format!("{}?token=s3cret-query&tenant=kvk", sink.url);
    let body = json!({"sink": secret_sink, "protocol": "HTTP", "types": [TYPE],
                      "protocolsettings": {"headers": {"X-Api-Key": "s3cret-header"}}});
    let created = post_subscription(&hub, &body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_owned();
    let read = get(&hub, &format!("/v1/subscriptions/{id}")).await;
    let text = read.body.to_string();
    assert!(!text.contains("s3cret"), "{text}");
    assert_eq!(
        read.body["sink"],
        format!("{}?token=********&tenant=********", sink.url)
    );
    assert_eq!(
        read.body["protocolsettings"]["headers"]["X-Api-Key"],
        "********"
    );

    // What was read goes back unchanged: the secrets stay as they were.
    let mut back = read.body.clone();
    back["types"] = json!([TYPE, "nl.test.other"]);
    let replaced = put_subscription(&hub, &id, &back).await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(replaced.body["state"], "active", "the sink did not change");
    assert_eq!(publish(&hub, "with-secrets").await.status, 202);
    let delivered = &sink.wait_for(1, WAIT).await[0];
    assert_eq!(delivered.header("x-api-key"), Some("s3cret-header"));
    assert!(
        delivered.uri.ends_with("?token=s3cret-query&tenant=kvk"),
        "{}",
        delivered.uri
    );
    let handshake = &sink.handshakes()[0];
    assert!(handshake.headers.contains_key("webhook-request-origin"));

    // A placeholder for a header that has no stored value is refused.
    let mut unknown = read.body.clone();
    unknown["protocolsettings"]["headers"]["X-Other"] = json!("********");
    let refused = put_subscription(&hub, &id, &unknown)
        .await
        .assert_problem(400);
    assert_eq!(
        refused.invalid_params(),
        ["protocolsettings.headers.X-Other"]
    );
}

#[tokio::test]
async fn a_stored_config_this_hub_cannot_read_disables_its_subscription_at_start_up() {
    let hub = TestHub::start().await;
    let mut stored = knooppunt_store_conformance::subscription("bad-config");
    stored.owner = "kvk".into();
    stored.config =
        knooppunt_store::SubscriptionConfig::stored([("maxAttempts".into(), "lots".into())].into());
    hub.store.insert_subscription(&stored).await.unwrap();
    let hub = hub.restart().await;
    let read = get(&hub, "/v1/subscriptions/bad-config").await;
    assert_eq!(read.status, 200, "{}", read.body);
    assert_eq!(read.body["state"], "disabled", "{}", read.body);
    let reason = read.body["disabledReason"].as_str().unwrap();
    assert!(reason.contains("config.maxAttempts"), "{reason}");
}

/// The redaction marker stands for the stored sink's secrets only when the sink comes back
/// exactly as read: a new sink carrying `********` is checked as any new sink (an address
/// the hub does not deliver to is refused) and is never stored.
#[tokio::test]
async fn a_new_sink_with_the_redaction_marker_is_still_checked() {
    let mut options = knooppunt_tests::test_options();
    options.delivery.sink_networks =
        knooppunt_broker::SinkNetworks::parse(&["127.0.0.1/32".into()]).unwrap();
    let hub = TestHub::builder().options(options).start().await;
    let sink = Sink::start().await;
    let body = json!({"sink": format!("{}?k=geheim", sink.url), "protocol": "HTTP",
                      "types": [TYPE]});
    let created = post_subscription(&hub, &body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_owned();
    let read = get(&hub, &format!("/v1/subscriptions/{id}")).await;
    let port = sink
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    for target in [
        format!("http://127.0.0.2:{port}/x?k=********"),
        format!("http://[::ffff:127.0.0.2]:{port}/x?k=********"),
        "http://169.254.169.254/latest?k=********".to_owned(),
        "http://[64:ff9b:1:a00:0:100:808:808]/?k=********".to_owned(),
    ] {
        let mut changed = read.body.clone();
        changed["sink"] = json!(target);
        let refused = put_subscription(&hub, &id, &changed)
            .await
            .assert_problem(400);
        assert_eq!(
            refused.invalid_params(),
            ["sink"],
            "{target}: {}",
            refused.body
        );
    }
    // A sink on an allowed address with the marker is not the stored one either.
    let mut other = read.body.clone();
    other["sink"] = json!(format!(
        "{}/elders?k=********",
        sink.url.trim_end_matches('/')
    ));
    let refused = put_subscription(&hub, &id, &other)
        .await
        .assert_problem(400);
    assert!(
        refused.body.to_string().contains("exactly as read"),
        "{}",
        refused.body
    );
    let kept = get(&hub, &format!("/v1/subscriptions/{id}")).await;
    assert_eq!(kept.body["sink"], read.body["sink"]);
    // Sent back as read, it keeps the stored sink.
    let same = put_subscription(&hub, &id, &read.body).await;
    assert_eq!(same.status, 200, "{}", same.body);
}
