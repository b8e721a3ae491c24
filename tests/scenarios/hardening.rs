//! What a hostile probe of the hub found, each answered by the real hub on 127.0.0.1 with a
//! real hostile client: filters that cost too much to evaluate, too many subscriptions, a
//! poison event, held connection slots, a full disk, IPv6 address forms that hide a
//! reserved IPv4 address, and secrets in error messages.

use knooppunt_store::EventLog;
use std::sync::Arc;
use std::time::Duration;

use knooppunt_tests::sink::Sink;
use knooppunt_tests::wait::{quiet, until};
use knooppunt_tests::{Answer, SmallDisk, TestHub, test_options, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:BRP";
const WAIT: Duration = Duration::from_secs(15);

/// Publishes an event with this type and subject (structured mode).
async fn publish(hub: &TestHub, id: &str, ty: &str, subject: &str) -> Answer {
    let event = json!({"specversion": "1.0", "id": id, "source": SOURCE, "type": ty,
                       "subject": subject});
    hub.publish_raw("application/cloudevents+json", event.to_string())
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

/// The costly filter of the budget tests (`subject LIKE '%y%z%'`) and the event they
/// publish (`large`, a 500 KB subject), as the hub reads them.
fn costly_filter_and_large_event() -> (knooppunt_filter::Criteria, knooppunt_event::Event) {
    let criteria = knooppunt_filter::Criteria {
        filters: knooppunt_filter::Filter::list_from_json(
            &[json!({"sql": "subject LIKE '%y%z%'"})],
            "filters",
            &knooppunt_filter::Limits::DEFAULT,
        )
        .unwrap(),
        ..knooppunt_filter::Criteria::default()
    };
    let event = knooppunt_event::EventBuilder::new("large", SOURCE, "nl.brp.large")
        .subject("x".repeat(500_000))
        .build()
        .unwrap();
    (criteria, event)
}

/// The value of an unlabelled metric.
async fn metric(hub: &TestHub, name: &str) -> f64 {
    let text = hub.metrics().await;
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

/// One principal's many costly filters cannot make another principal's events slow: all
/// subscriptions of a principal together spend at most
/// `filters.max_evaluation_cost_per_principal` on one event (its others are over budget for
/// it and say so), while the other principal's subscription is evaluated and gets the
/// event. `knooppunt_routing_seconds` counts the evaluation on the routing thread too.
#[tokio::test]
async fn one_principals_costly_filters_share_one_budget_per_event() {
    let hub = TestHub::start().await;
    let costly_sink = Sink::start().await;
    let own_sink = Sink::start().await;
    // Tenant A (kvk): 60 subscriptions whose LIKE scans the whole subject.
    let mut costly = Vec::new();
    for _ in 0..60 {
        costly.push(
            subscribe(
                &hub,
                json!({"sink": costly_sink.url, "protocol": "HTTP",
                       "filters": [{"sql": "subject LIKE '%y%z%'"}]}),
            )
            .await,
        );
    }
    // Tenant B (gemeente): one subscription without filters.
    let own = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::GEMEENTE,
            Some(json!({"sink": own_sink.url, "protocol": "HTTP", "types": ["nl.brp.large"]})),
        )
        .await;
    assert_eq!(own.status, 201, "{}", own.body);
    // A 500 KB subject: each LIKE scans it (at least 500,000 units), so the 60 of them would
    // cost 30 million and more; kvk's 16 million are spent after at most 32 of them.
    let started = std::time::Instant::now();
    let answer = publish(&hub, "large", "nl.brp.large", &"x".repeat(500_000)).await;
    let took = started.elapsed();
    assert_eq!(answer.status, 202, "{}", answer.body);
    assert_eq!(answer.body["matchedSubscriptions"], 1, "{}", answer.body);
    own_sink.wait_for(1, WAIT).await;
    let mut over = 0;
    for id in &costly {
        let read = hub
            .call(
                Method::GET,
                &format!("/v1/subscriptions/{id}"),
                tokens::KVK,
                None,
            )
            .await;
        if read.body.get("filterBudget").is_some() {
            over += 1;
        }
    }
    assert!(
        over >= 28,
        "{over} of kvk's 60 subscriptions were past its budget"
    );
    assert_eq!(
        metric(&hub, "knooppunt_filter_over_budget_total").await,
        f64::from(over)
    );
    // The routing thread's part is in the routing time: at least a third of what the same
    // evaluations take here, in this process (the part on the request is a small slice).
    assert_eq!(metric(&hub, "knooppunt_routing_offloaded_total").await, 1.0);
    let routing = metric(&hub, "knooppunt_routing_seconds_sum").await;
    let (criteria, event) = costly_filter_and_large_event();
    let started = std::time::Instant::now();
    for _ in 0..(60 - over) {
        assert!(!criteria.matches(&event));
    }
    let here = started.elapsed().as_secs_f64();
    assert!(
        routing >= here / 3.0,
        "routing {routing} s, the same {} evaluations here {here} s (the publish took {took:?})",
        60 - over
    );
}

/// What all candidates of one event may cost is bounded hub-wide
/// (`filters.max_evaluation_cost_per_event`), whatever the number of principals with
/// costly filters, and shared fairly: the principal with one cheap subscription gets its
/// event, each costly principal has about an equal share evaluated, and the subscriptions
/// past it say that the event's budget (not their own, nor their principal's) ran out.
#[tokio::test]
async fn many_principals_costly_filters_share_one_budget_per_event() {
    let mut options = test_options();
    options.eval_limits.max_units_per_event = 20_000_000;
    let hub = TestHub::builder().options(options).start().await;
    let (costly_sink, own_sink) = (Sink::start().await, Sink::start().await);
    // Four principals, 20 subscriptions each whose LIKE scans the whole subject: within
    // each principal's own 16 million, 40 million together.
    let mut costly: Vec<(String, Vec<String>)> = Vec::new();
    for n in 0..4 {
        let name = format!("kostbaar-{n}");
        let made = hub
            .call(
                Method::POST,
                "/v1/principals",
                tokens::ADMIN,
                Some(json!({"name": name, "roles": ["subscriber"]})),
            )
            .await;
        assert_eq!(made.status, 201, "{}", made.body);
        let token = made.body["token"].as_str().unwrap().to_owned();
        let mut ids = Vec::new();
        for _ in 0..20 {
            let answer = hub
                .call(
                    Method::POST,
                    "/v1/subscriptions",
                    &token,
                    Some(json!({"sink": costly_sink.url, "protocol": "HTTP",
                                "types": ["nl.brp.large"],
                                "filters": [{"sql": "subject LIKE '%y%z%'"}]})),
                )
                .await;
            assert_eq!(answer.status, 201, "{}", answer.body);
            ids.push(answer.body["id"].as_str().unwrap().to_owned());
        }
        costly.push((token, ids));
    }
    let own = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::GEMEENTE,
            Some(json!({"sink": own_sink.url, "protocol": "HTTP", "types": ["nl.brp.large"]})),
        )
        .await;
    assert_eq!(own.status, 201, "{}", own.body);
    // A 500 KB subject: what one LIKE over it costs, measured here as the hub meters it.
    let (criteria, event) = costly_filter_and_large_event();
    let mut meter = knooppunt_filter::Meter::new(knooppunt_filter::EvalLimits::DEFAULT);
    assert!(!criteria.matches_metered(&event, &mut meter));
    let cost = meter.spent();
    // Each of the four costly principals has a quarter of the 20 million (the one cheap
    // subscription costs next to nothing): about that many of its filters are evaluated.
    let share = (20_000_000 / 4) as f64 / cost as f64;
    assert!(share < 20.0, "the event's budget binds: {share}");
    let answer = publish(&hub, "large", "nl.brp.large", &"x".repeat(500_000)).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    assert_eq!(answer.body["matchedSubscriptions"], 1, "{}", answer.body);
    own_sink.wait_for(1, WAIT).await;
    let mut over_in_all = 0;
    for (token, ids) in &costly {
        let mut over = 0;
        for id in ids {
            let read = hub
                .call(Method::GET, &format!("/v1/subscriptions/{id}"), token, None)
                .await;
            if let Some(budget) = read.body.get("filterBudget") {
                assert_eq!(budget["lastExceededBudget"], "event", "{budget}");
                over += 1;
            }
        }
        let evaluated = f64::from(20 - over);
        assert!(
            evaluated >= 1.0 && (evaluated - share).abs() <= 1.5,
            "an equal share of each principal's is evaluated: {evaluated} of 20, a share \
             being {share:.1} at {cost} units each"
        );
        over_in_all += over;
    }
    assert_eq!(
        metric(&hub, "knooppunt_filter_over_budget_total").await,
        f64::from(over_in_all)
    );
}

#[tokio::test]
async fn a_filter_past_its_budget_does_not_match_and_says_so() {
    let mut options = test_options();
    options.eval_limits.max_units = 200_000;
    let hub = TestHub::builder().options(options).start().await;
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
    quiet(
        "a second event for the costly subscription",
        Duration::from_millis(300),
    )
    .await;
    assert_eq!(costly_sink.deliveries().len(), 1);
}

#[tokio::test]
async fn a_principal_has_a_quota_of_subscriptions_and_of_filter_bytes() {
    let mut options = test_options();
    options.quotas = knooppunt_broker::Quotas {
        max_subscriptions: 3,
        max_filter_bytes: 2_000,
    };
    let hub = TestHub::builder().options(options).start().await;
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

/// `[` × depth + `]` × depth.
fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// The rules of the first event's violations in a 400 problem.
fn rules(answer: &Answer) -> Vec<String> {
    answer.body["errors"][0]["violations"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|v| v["rule"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn data_nested_past_the_limit_is_refused_in_every_content_mode() {
    let hub = TestHub::start().await;
    // Structured: the probe's poison, 200 levels.
    let poison = format!(
        r#"{{"specversion":"1.0","id":"p","source":"{SOURCE}","type":"nl.nest","data":{}}}"#,
        nested(200)
    );
    let answer = hub
        .publish_raw("application/cloudevents+json", poison)
        .await
        .assert_problem(400);
    assert_eq!(rules(&answer), ["hub.data-depth"], "{}", answer.body);
    assert!(
        answer.body.to_string().contains("at most 64"),
        "{}",
        answer.body
    );

    // Binary mode with a JSON body.
    let answer = Answer::from(
        hub.request(Method::POST, "/v1/events", tokens::PUBLISHER)
            .header("content-type", "application/json")
            .header("ce-specversion", "1.0")
            .header("ce-id", "b")
            .header("ce-source", SOURCE)
            .header("ce-type", "nl.nest")
            .body(nested(65))
            .send()
            .await
            .unwrap(),
    )
    .await
    .assert_problem(400);
    assert_eq!(rules(&answer), ["hub.data-depth"], "{}", answer.body);

    // CBOR data as native arrays, 65 deep.
    let mut data = ciborium::Value::Array(vec![]);
    for _ in 0..64 {
        data = ciborium::Value::Array(vec![data]);
    }
    let event = ciborium::Value::Map(vec![
        ("specversion".into(), "1.0".into()),
        ("id".into(), "c".into()),
        ("source".into(), SOURCE.into()),
        ("type".into(), "nl.nest".into()),
        ("data".into(), data),
    ]);
    let mut body = Vec::new();
    ciborium::ser::into_writer(&event, &mut body).unwrap();
    let answer = hub
        .publish_raw("application/cloudevents+cbor", body)
        .await
        .assert_problem(400);
    assert!(answer.body.to_string().contains("64"), "{}", answer.body);

    // 64 levels are within the limit.
    let within = format!(
        r#"{{"specversion":"1.0","id":"ok","source":"{SOURCE}","type":"nl.nest","data":{}}}"#,
        nested(64)
    );
    let answer = hub
        .publish_raw("application/cloudevents+json", within)
        .await;
    assert_eq!(answer.status, 202, "{}", answer.body);
}

#[tokio::test]
async fn a_poison_event_already_stored_becomes_a_dead_letter_and_the_queue_goes_on() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let id = subscribe(
        &hub,
        json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.nest"],
               "config": {"mode": "cbor", "ordering": "ordered"}}),
    )
    .await;
    // An event a hub before the nesting limit accepted: in the store, past the limit.
    let poison = format!(
        r#"{{"specversion":"1.0","id":"poison","source":"{SOURCE}","type":"nl.nest","data":{}}}"#,
        nested(200)
    );
    let event = knooppunt_store::NewEvent {
        source: SOURCE.into(),
        id: "poison".into(),
        json: poison,
        extension_types: None,
        subscriptions: vec![id.clone()],
    };
    hub.store
        .append_events(vec![event], knooppunt_store::now_ms(), 0)
        .await
        .unwrap();
    // The next event behind it in the ordered queue is delivered, as CBOR.
    let answer = publish(&hub, "after", "nl.nest", "s").await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    let delivered = sink.wait_for(1, WAIT).await;
    assert_eq!(
        delivered[0].header("content-type"),
        Some("application/cloudevents+cbor")
    );
    let dead = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{id}/dead-letters"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(dead.body.as_array().unwrap().len(), 1, "{}", dead.body);
    let reason = dead.body[0]["reason"].as_str().unwrap();
    assert!(reason.contains("64"), "{reason}");
    let ready = hub.client.get(hub.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    assert_eq!(metric(&hub, "knooppunt_delivery_workers_stuck").await, 0.0);
    assert_eq!(
        metric(&hub, "knooppunt_delivery_attempt_panics_total").await,
        0.0
    );
}

/// IPv6 forms that carry or reach a reserved IPv4 address, and a zone id: none may be a
/// sink or a token endpoint (the test hub allows only 127.0.0.0/8 and ::1 of the reserved
/// ranges).
const HIDDEN_ADDRESSES: [&str; 11] = [
    "[::127.0.0.1]",
    "[::a9fe:a9fe]",
    "[::ffff:0:7f00:1]",
    "[::ffff:0:a9fe:a9fe]",
    "[2002:7f00:1::1]",
    "[2002:a9fe:a9fe::1]",
    "[2001:0:4136:e378:8000:63bf:3fff:fdd2]",
    "[100::1]",
    "[fec0::1]",
    "[fe80::1%25lo]",
    "[64:ff9b:1::a9fe:a9fe]",
];

#[tokio::test]
async fn ipv6_forms_that_hide_a_reserved_address_are_refused_as_sinks_and_token_endpoints() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    for host in HIDDEN_ADDRESSES {
        let body = json!({"sink": format!("https://{host}/hook"), "protocol": "HTTP",
                          "types": ["nl.test"]});
        let answer = hub
            .call(Method::POST, "/v1/subscriptions", tokens::KVK, Some(body))
            .await
            .assert_problem(400);
        assert_eq!(answer.invalid_params(), ["sink"], "{host}: {}", answer.body);

        let credential = json!({"credentialtype": "CLIENTCREDENTIALS",
                                "tokenurl": format!("https://{host}/token"),
                                "clientid": "hub", "clientsecret": "s3cret"});
        let body = json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.test"],
                          "sinkcredential": credential});
        let answer = hub
            .call(Method::POST, "/v1/subscriptions", tokens::KVK, Some(body))
            .await
            .assert_problem(400);
        assert_eq!(
            answer.invalid_params(),
            ["sinkcredential.tokenurl"],
            "{host}: {}",
            answer.body
        );
    }
    let zone = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(json!({"sink": "https://[fe80::1%25lo]/hook", "protocol": "HTTP"})),
        )
        .await
        .assert_problem(400);
    assert!(zone.body.to_string().contains("zone"), "{}", zone.body);
}

#[tokio::test]
async fn a_token_endpoints_password_and_query_values_are_never_shown() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let refusing = Sink::start().await;
    refusing.answer_always(knooppunt_tests::sink::Reply::status(401));
    let with_secrets = |base: &str| {
        let url = reqwest::Url::parse(base).unwrap();
        format!(
            "http://hub:pw-s3cret@{}/token?key=q-s3cret&plain",
            url.host_str().unwrap().to_owned() + ":" + &url.port().unwrap().to_string()
        )
    };
    for token_url in [
        with_secrets(&refusing.url),
        with_secrets("http://127.0.0.1:1/"),
    ] {
        let credential = json!({"credentialtype": "CLIENTCREDENTIALS", "tokenurl": token_url,
                                "clientid": "hub", "clientsecret": "client-s3cret"});
        let id = subscribe(
            &hub,
            json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.token"],
                   "sinkcredential": credential, "config": {"maxAttempts": "1"}}),
        )
        .await;
        let published = publish(&hub, &format!("t-{id}"), "nl.token", "s").await;
        assert_eq!(published.status, 202);
        let path = format!("/v1/subscriptions/{id}/dead-letters");
        let dead = until("a dead letter", WAIT, || async {
            let dead = hub.call(Method::GET, &path, tokens::KVK, None).await;
            if dead.body.as_array().is_some_and(|list| !list.is_empty()) {
                Ok(dead.body)
            } else {
                Err(dead.body)
            }
        })
        .await;
        let read = hub
            .call(
                Method::GET,
                &format!("/v1/subscriptions/{id}"),
                tokens::KVK,
                None,
            )
            .await;
        let shown = format!("{dead} {}", read.body["lastDelivery"]);
        assert!(shown.contains("token endpoint"), "{shown}");
        assert!(!shown.contains("s3cret"), "a secret is shown: {shown}");
        assert!(shown.contains("********"), "{shown}");
    }
}

#[tokio::test]
async fn an_issuer_whose_keys_cannot_be_fetched_is_named_in_the_503() {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    const ISSUER: &str = "https://login.example.nl/oauth2";
    // Nothing listens on port 1: the keys cannot be fetched.
    let issuer =
        knooppunt_broker::IssuerSettings::new(ISSUER, "http://127.0.0.1:1/jwks", "knooppunt");
    let options = knooppunt_broker::HubOptions {
        authentication: test_options().authentication.with_issuers(vec![issuer]),
        ..test_options()
    };
    let hub = TestHub::builder().options(options).start().await;
    let part = |value: Value| URL_SAFE_NO_PAD.encode(value.to_string());
    let token = format!(
        "{}.{}.{}",
        part(json!({"alg": "ES256", "kid": "key-1", "typ": "JWT"})),
        part(json!({"iss": ISSUER, "aud": "knooppunt", "sub": "p", "exp": 4_102_444_800u64})),
        URL_SAFE_NO_PAD.encode([7u8; 64])
    );
    let answer = hub
        .call(Method::GET, "/v1/subscriptions", &token, None)
        .await
        .assert_problem(503);
    let detail = answer.body["detail"].as_str().unwrap();
    assert!(
        detail.contains(ISSUER) && detail.contains("keys") && !detail.contains("store"),
        "{detail}"
    );
    assert!(answer.header("retry-after").is_some());
}

#[tokio::test]
async fn a_body_nested_too_deep_is_said_to_be_so_not_invalid_json() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    // A subscription whose one filter is `depth` nested `not`s: refused, with its problem.
    let refused = |depth: usize| {
        let mut nested = json!({"exact": {"type": "nl.test"}});
        for _ in 0..depth {
            nested = json!({"not": nested});
        }
        let body = json!({"sink": sink.url, "protocol": "HTTP", "filters": [nested]});
        let hub = &hub;
        async move {
            hub.call(Method::POST, "/v1/subscriptions", tokens::KVK, Some(body))
                .await
                .assert_problem(400)
        }
    };
    let answer = refused(150).await;
    let detail = answer.body["detail"].as_str().unwrap();
    assert!(detail.contains("nested too deep"), "{detail}");
    assert!(detail.contains("at most 127"), "{detail}");
    assert!(!detail.contains("not valid JSON"), "{detail}");

    // Within the body's limit, the filter limits speak.
    let answer = refused(120).await;
    assert!(
        answer.body.to_string().contains("max_depth"),
        "{}",
        answer.body
    );
}

/// A hub with 64 connection slots, at most 16 per client address, and a header timeout
/// far longer than any wait below: without the per-peer limit and the closing of idle
/// connections, held sockets would keep every other client out for 30 s.
async fn guarded_hub() -> TestHub {
    let limits = knooppunt_broker::ServerLimits {
        max_connections: 64,
        max_connections_per_peer: 16,
        header_timeout: Duration::from_secs(30),
        ..knooppunt_broker::ServerLimits::default()
    };
    TestHub::builder()
        .options(test_options())
        .transport(knooppunt_broker::Transport { limits, tls: None })
        .start()
        .await
}

/// Connects to the hub from a loopback address of our choosing (all of 127.0.0.0/8 is this
/// machine).
async fn connect_from(hub: &TestHub, from: [u8; 4]) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from((from, 0))).unwrap();
    socket.connect(hub.address).await.unwrap()
}

/// Holds one idle socket from each address, reconnecting whenever the hub closes it, until
/// `stop` (each at most 200 times).
fn hold_sockets(
    hub: &TestHub,
    from: Vec<[u8; 4]>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinSet<usize> {
    hold_sockets_sending(hub.address, from, b"", stop)
}

/// Like [`hold_sockets`], each socket sending `first` (half a request, say) once connected.
fn hold_sockets_sending(
    hub_address: std::net::SocketAddr,
    from: Vec<[u8; 4]>,
    first: &'static [u8],
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinSet<usize> {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut holders = tokio::task::JoinSet::new();
    for address in from {
        let stop = std::sync::Arc::clone(&stop);
        holders.spawn(async move {
            let mut connects = 0;
            while connects < 200 && !stop.load(Ordering::SeqCst) {
                let socket = tokio::net::TcpSocket::new_v4().unwrap();
                socket
                    .bind(std::net::SocketAddr::from((address, 0)))
                    .unwrap();
                connects += 1;
                let Ok(mut stream) = socket.connect(hub_address).await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                if !first.is_empty() && stream.write_all(first).await.is_err() {
                    continue;
                }
                let mut buffer = [0u8; 512];
                while !stop.load(Ordering::SeqCst) {
                    let read = stream.read(&mut buffer);
                    if let Ok(Ok(0) | Err(_)) =
                        tokio::time::timeout(Duration::from_millis(100), read).await
                    {
                        break;
                    }
                }
            }
            connects
        });
    }
    holders
}

/// `GET /healthz` from `from`, within five seconds.
async fn health_from(hub: &TestHub, from: [u8; 4]) -> u16 {
    let client = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from(from))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let answer = client.get(hub.url("/healthz")).send().await;
    answer.map(|r| r.status().as_u16()).unwrap_or(0)
}

#[tokio::test]
async fn one_address_holding_sockets_gets_only_its_share() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let hub = guarded_hub().await;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    // The probe: 100 idle sockets from one address that reconnect when closed.
    let mut holders = hold_sockets(
        &hub,
        vec![[127, 0, 0, 2]; 100],
        std::sync::Arc::clone(&stop),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Past its 16, that address is told so.
    let mut extra = connect_from(&hub, [127, 0, 0, 2]).await;
    let mut answer = String::new();
    let _ = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::io::AsyncReadExt::read_to_string(&mut extra, &mut answer),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer:?}");
    assert!(answer.contains("max_connections_per_peer"), "{answer}");
    assert!(
        answer.contains("\r\ndate: ") && answer.contains("\r\nx-content-type-options: nosniff"),
        "the Date and the security headers on every answer: {answer}"
    );
    // Another client is served at once.
    assert_eq!(health_from(&hub, [127, 0, 0, 3]).await, 200);
    stop.store(true, Ordering::SeqCst);
    while holders.join_next().await.is_some() {}
}

#[tokio::test]
async fn when_the_hub_is_full_the_longest_idle_connection_makes_room() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let hub = guarded_hub().await;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    // 100 addresses, one idle socket each (within the per-peer limit): more than the 64
    // slots, reconnecting whenever they are closed.
    let addresses: Vec<[u8; 4]> = (10..110).map(|last| [127, 0, 1, last]).collect();
    let mut holders = hold_sockets(&hub, addresses, std::sync::Arc::clone(&stop));
    tokio::time::sleep(Duration::from_millis(300)).await;
    for attempt in 0..5 {
        assert_eq!(
            health_from(&hub, [127, 0, 2, 1]).await,
            200,
            "request {attempt}"
        );
    }
    stop.store(true, Ordering::SeqCst);
    while holders.join_next().await.is_some() {}
}

/// Sockets held as [`hold_sockets_sending`] holds them, from `(address, first bytes)`
/// groups of 200 sockets each, on a thread and runtime of their own (as clients on other
/// machines: they take no turns from the hub's runtime); how many connections they made.
fn attack_from_another_thread(
    hub_address: std::net::SocketAddr,
    groups: Vec<([u8; 4], &'static [u8], usize)>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let mut holders = tokio::task::JoinSet::new();
            for (address, first, count) in groups {
                let mut group = hold_sockets_sending(
                    hub_address,
                    vec![address; count],
                    first,
                    Arc::clone(&stop),
                );
                holders.spawn(async move {
                    let mut connects = 0;
                    while let Some(n) = group.join_next().await {
                        connects += n.unwrap();
                    }
                    connects
                });
            }
            let mut connects = 0;
            while let Some(n) = holders.join_next().await {
                connects += n.unwrap();
            }
            connects
        })
    })
}

/// Half a request: a request line and a header that never ends.
const HALF_REQUEST: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: hub\r\nX-Slow: ";

/// A hub with 50 slots, up to 256 per address, and a header timeout of 30 s.
async fn fifty_slot_hub() -> TestHub {
    let limits = knooppunt_broker::ServerLimits {
        max_connections: 50,
        header_timeout: Duration::from_secs(30),
        ..knooppunt_broker::ServerLimits::default()
    };
    TestHub::builder()
        .options(test_options())
        .transport(knooppunt_broker::Transport { limits, tls: None })
        .start()
        .await
}

/// How long another client may wait while the slots are attacked: a client kept out waits
/// for the attackers' header timeout (30 s, [`fifty_slot_hub`]); one served at once takes
/// milliseconds, or a second or two when this machine's two cores also run the other tests
/// of this file beside the 1,600 attacking sockets (a wait of 1.2 s was seen in CI).
const NOT_KEPT_OUT: Duration = Duration::from_secs(5);

/// `GET /healthz` from `from`, which must be answered 200 well before the attackers' header
/// timeout ([`NOT_KEPT_OUT`]).
async fn served_soon(hub: &TestHub, from: [u8; 4], what: &str) {
    let started = std::time::Instant::now();
    let status = health_from(hub, from).await;
    let took = started.elapsed();
    assert_eq!(status, 200, "{what}: not answered ({took:?})");
    assert!(
        took < NOT_KEPT_OUT,
        "{what}: another client waited {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_requests_in_every_slot_do_not_keep_another_client_waiting() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let hub = fifty_slot_hub().await;
    let stop = Arc::new(AtomicBool::new(false));
    // Every slot holds a connection that sent part of a request's headers: none of them
    // counts as busy, so the oldest makes room for a new client at once.
    let attack = attack_from_another_thread(
        hub.address,
        vec![([127, 0, 0, 2], HALF_REQUEST, 50)],
        Arc::clone(&stop),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    for attempt in 0..5 {
        served_soon(&hub, [127, 0, 0, 3], &format!("request {attempt}")).await;
    }
    stop.store(true, Ordering::SeqCst);
    attack.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_requests_and_bodies_from_eight_addresses_do_not_keep_another_client_out() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let hub = fifty_slot_hub().await;
    let stop = Arc::new(AtomicBool::new(false));
    // 8 addresses × 200 sockets that reconnect whenever closed: half the addresses send
    // half a request's headers, the other half whole headers and part of a body. The accept
    // loop keeps draining the listen queue, and each new connection takes the slot of the
    // oldest unfinished request.
    const HALF_BODY: &[u8] = b"POST /v1/events HTTP/1.1\r\nHost: hub\r\n\
        Content-Type: application/cloudevents+json\r\nContent-Length: 500\r\n\r\n{";
    let groups = (0..8u8)
        .map(|n| {
            let first = if n % 2 == 0 { HALF_REQUEST } else { HALF_BODY };
            ([127, 0, 3, 10 + n], first, 200)
        })
        .collect();
    let attack = attack_from_another_thread(hub.address, groups, Arc::clone(&stop));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    for attempt in 0..10 {
        served_soon(&hub, [127, 0, 4, 1], &format!("request {attempt}")).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let connects = attack.join().unwrap();
    assert!(
        connects > 1600,
        "the attack reconnected: {connects} connections"
    );
}

#[tokio::test]
async fn a_full_disk_is_refused_with_503_and_recovered_without_a_restart() {
    let disk = SmallDisk::mount("16m");
    let data = tempfile::tempdir_in(disk.path()).unwrap();
    // The store's own last line of defence, so the hub's floor of free room is lifted here
    // (`backlog.rs` has the test of the floor).
    let mut options = test_options();
    options.backlog.min_free_bytes = 0;
    let hub = TestHub::builder()
        .in_dir(data)
        .options(options)
        .start()
        .await;
    let sink = Sink::start().await;
    subscribe(
        &hub,
        json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.disk"]}),
    )
    .await;
    assert_eq!(publish(&hub, "before", "nl.disk", "s").await.status, 202);
    sink.wait_for(1, WAIT).await;

    let filler = disk.fill();
    // The log's active segment holds room written ahead (zeros, 1 MiB), which events still
    // fill durably; past it the full disk shows, on the sixth 200 KB event at the latest.
    let mut kept = 0;
    let (refused_id, refused) = loop {
        let id = format!("while-full-{kept}");
        let answer = publish(&hub, &id, "nl.disk", &"x".repeat(200_000)).await;
        if answer.status != 202 {
            break (id, answer);
        }
        kept += 1;
        assert!(kept <= 5, "{kept} events of 200 KB accepted on a full disk");
    };
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.header("retry-after").is_some());
    let ready = hub.client.get(hub.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503, "not ready while the disk is full");
    let health = hub.client.get(hub.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200, "alive: it recovers by itself");

    // Space comes back: within seconds, without a restart, events are accepted again, and
    // the one refused is not taken for a duplicate when it is sent again.
    std::fs::remove_file(filler).unwrap();
    let accepted = until("a publish accepted again", WAIT, || async {
        let answer = publish(&hub, &refused_id, "nl.disk", "s").await;
        if answer.status == 202 {
            return Ok(answer);
        }
        assert_eq!(answer.status, 503, "{}", answer.body);
        Err(answer.body)
    })
    .await;
    assert_eq!(accepted.body["duplicate"], false, "{}", accepted.body);
    let ready = hub.client.get(hub.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    // What was accepted while the disk filled is delivered too, then the one refused.
    let delivered = sink.wait_for(kept + 2, WAIT).await;
    let ids: Vec<_> = delivered.iter().map(|d| d.json()["id"].clone()).collect();
    for n in 0..kept {
        assert!(ids.contains(&json!(format!("while-full-{n}"))), "{ids:?}");
    }
    assert!(ids.contains(&json!(refused_id)), "{ids:?}");
}

#[tokio::test]
async fn cbor_extension_types_reach_a_cbor_subscriber_as_they_were_published() {
    use ciborium::Value as Cbor;
    let tagged = |tag: u64, text: &str| Cbor::Tag(tag, Box::new(Cbor::Text(text.into())));
    let hub = TestHub::start().await;
    let cbor_sink = Sink::start().await;
    let json_sink = Sink::start().await;
    subscribe(
        &hub,
        json!({"sink": cbor_sink.url, "protocol": "HTTP", "types": ["nl.typed"],
               "config": {"mode": "cbor"}}),
    )
    .await;
    subscribe(
        &hub,
        json!({"sink": json_sink.url, "protocol": "HTTP", "types": ["nl.typed"]}),
    )
    .await;
    let extensions = [
        ("comexampleuri", tagged(32, "https://example.nl/zaak/1")),
        ("comexampletime", tagged(0, "2026-11-23T12:00:00+01:00")),
        ("comexamplebytes", Cbor::Bytes(vec![0, 1, 2, 255])),
        ("comexampletext", Cbor::Text("tekst".into())),
    ];
    let mut members = vec![
        (Cbor::Text("specversion".into()), Cbor::Text("1.0".into())),
        (Cbor::Text("id".into()), Cbor::Text("typed-1".into())),
        (Cbor::Text("source".into()), tagged(32, SOURCE)),
        (Cbor::Text("type".into()), Cbor::Text("nl.typed".into())),
    ];
    members.extend(
        extensions
            .iter()
            .map(|(name, value)| (Cbor::Text((*name).into()), value.clone())),
    );
    let mut body = Vec::new();
    ciborium::ser::into_writer(&Cbor::Map(members), &mut body).unwrap();
    let published = hub.publish_raw("application/cloudevents+cbor", body).await;
    assert_eq!(published.status, 202, "{}", published.body);

    let check = |delivered: &knooppunt_tests::sink::Received| {
        let Cbor::Map(members) = ciborium::de::from_reader(&delivered.body[..]).unwrap() else {
            panic!("not a CBOR map");
        };
        for (name, expected) in &extensions {
            let found = members
                .iter()
                .find(|(key, _)| key.as_text() == Some(name))
                .map(|(_, value)| value);
            assert_eq!(found, Some(expected), "{name}");
        }
    };
    check(&cbor_sink.wait_for(1, WAIT).await[0]);
    // The JSON format writes them as strings (Binary as base64).
    let json = json_sink.wait_for(1, WAIT).await[0].json();
    assert_eq!(json["comexampleuri"], "https://example.nl/zaak/1");
    assert_eq!(json["comexamplebytes"], "AAEC/w==");

    // Kept on disk: after a restart a redelivery still carries them.
    let hub = hub.restart().await;
    let list = hub
        .call(Method::GET, "/v1/subscriptions", tokens::KVK, None)
        .await;
    assert_eq!(list.body.as_array().unwrap().len(), 2);
    let event =
        knooppunt_store::EventLog::event(&hub.store, published.body["sequence"].as_u64().unwrap())
            .await
            .unwrap()
            .unwrap();
    assert!(
        event
            .extension_types
            .as_deref()
            .is_some_and(|types| types.contains("\"comexampleuri\":\"uri\"")),
        "{:?}",
        event.extension_types
    );
}

#[tokio::test]
async fn the_openapi_document_states_the_constraints_the_hub_enforces() {
    let hub = TestHub::start().await;
    let document = hub.get_json("/v1/openapi.json").await;
    let schemas = &document["components"]["schemas"];
    let headers: Vec<&Value> = document["paths"]["/events"]["post"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["in"] == "header" && p["name"].as_str().unwrap().starts_with("ce-"))
        .collect();
    assert!(headers.len() >= 4);
    // A header parameter holds in every content mode, the `ce-` headers' constraints in
    // binary mode only (issue 60): stated in the description, not the schema.
    for header in headers {
        assert_eq!(header["schema"], json!({"type": "string"}), "{header}");
        let description = header["description"].as_str().unwrap();
        assert!(
            description.starts_with("Binary mode: ")
                && description.contains("non-empty, percent-encoded")
                && description.ends_with("Not read in structured or batched mode."),
            "{header}"
        );
    }
    assert_eq!(
        schemas["NewPrincipal"]["properties"]["roles"]["minItems"],
        1
    );
    assert_eq!(
        schemas["PrincipalChange"]["properties"]["roles"]["minItems"],
        1
    );
    assert_eq!(
        schemas["ClientCertificate"]["properties"]["certificate"]["minLength"],
        1
    );
    assert!(schemas["Subscription"]["properties"]["filterBudget"].is_object());
    let cursor = document["paths"]["/subscriptions/{id}/dead-letters"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "cursor")
        .unwrap()
        .clone();
    let pattern = cursor["schema"]["pattern"].as_str().expect("a pattern");
    assert_eq!(pattern, "^[0-9]{0,20}$");
    // Every operation that reads a JSON body says it answers 415 to another type.
    for (path, operations) in document["paths"].as_object().unwrap() {
        for (method, operation) in operations.as_object().unwrap() {
            if operation["requestBody"]["content"]
                .get("application/json")
                .is_some()
            {
                assert!(
                    operation["responses"]["415"].is_object(),
                    "{method} {path} documents no 415"
                );
            }
        }
    }

    // What the hub answers is what the document lists.
    for (method, path, document_path) in [
        (Method::POST, "/v1/principals", "/principals"),
        (Method::PATCH, "/v1/principals/kvk", "/principals/{name}"),
    ] {
        let answer = Answer::from(
            hub.request(method.clone(), path, tokens::ADMIN)
                .header("content-type", "text/plain")
                .body("roles")
                .send()
                .await
                .unwrap(),
        )
        .await
        .assert_problem(415);
        let operation = method.as_str().to_lowercase();
        assert!(
            document["paths"][document_path][&operation]["responses"]["415"].is_object(),
            "{method} {path} answers 415: {}",
            answer.body
        );
    }
    let sink = Sink::start().await;
    let id = subscribe(
        &hub,
        json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.x"]}),
    )
    .await;
    let path = format!("/v1/subscriptions/{id}/dead-letters?cursor=abc");
    let refused = hub.call(Method::GET, &path, tokens::KVK, None).await;
    assert_eq!(refused.status, 400, "a cursor the pattern refuses");
    let path = format!("/v1/subscriptions/{id}/dead-letters?cursor=");
    assert_eq!(
        hub.call(Method::GET, &path, tokens::KVK, None).await.status,
        200
    );
}

/// Failed console sign-ins are on the audit trail (with the address they came from) and
/// slow that address down: after five within a minute, its sign-ins are refused with 429
/// and `Retry-After`, without the credential being checked, even a right one.
#[tokio::test]
async fn failed_console_sign_ins_are_audited_and_slowed_down() {
    use knooppunt_tests::console::sign_in;
    let hub = TestHub::start().await;
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let base = hub.url("");
    let base = base.trim_end_matches('/');
    for attempt in 0..5 {
        let (_, answer) = sign_in(&browser, base, &[("token", &format!("guess-{attempt}"))]).await;
        assert_ne!(answer.status(), 429, "attempt {attempt}");
        assert_ne!(answer.status(), 303, "a wrong token signs nobody in");
    }
    for token in ["guess-5", tokens::KVK] {
        let (_, answer) = sign_in(&browser, base, &[("token", token)]).await;
        assert_eq!(answer.status(), 429, "{token}");
        let wait: u64 = answer.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=60).contains(&wait), "{wait}");
    }
    // Every one is on the trail, the refused ones too.
    let entries = until("seven sign-ins on the trail", WAIT, || async {
        let trail = hub
            .call(
                Method::GET,
                "/v1/audit?name=console.signin",
                tokens::ADMIN,
                None,
            )
            .await;
        let entries = trail.body.as_array().cloned().unwrap_or_default();
        if entries.len() >= 7 {
            Ok(entries)
        } else {
            Err(trail.body)
        }
    })
    .await;
    assert_eq!(entries.len(), 7, "{entries:?}");
    assert!(
        entries.iter().all(|e| e["details"]["peer"] == "127.0.0.1"),
        "{entries:?}"
    );
}

/// A request that announces a body larger than any route takes is answered 413 at once,
/// not after the body timeout (408) while the hub waits for bytes that never come: a
/// problem under `/v1`, a `Fout` on the Notificaties facade, a page in the console.
#[tokio::test]
async fn an_announced_oversized_body_is_refused_at_once() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let hub = TestHub::start().await;
    let address = hub.address;
    for (path, says) in [
        ("/v1/events", "application/problem+json"),
        ("/v1/subscriptions", "application/problem+json"),
        ("/v1/eventtypes", "application/problem+json"),
        ("/api/v1/notificaties", "\"code\":\"request_too_large\""),
        ("/api/v1/abonnement", "\"code\":\"request_too_large\""),
        ("/console/login", "text/html"),
    ] {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000000000000000\r\n\r\n",
            tokens::PUBLISHER
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = vec![0; 2048];
        let read = tokio::time::timeout(Duration::from_secs(3), stream.read(&mut answer))
            .await
            .expect("answered at once")
            .unwrap();
        let text = String::from_utf8_lossy(&answer[..read]);
        assert!(text.starts_with("HTTP/1.1 413"), "{path}: {text}");
        assert!(text.contains(says), "{path}: {text}");
    }
}

/// A body nested too deep is refused saying so, naming the filters' own depth limit only
/// where a body has filters (a subscription), not for principals or catalog entries.
#[tokio::test]
async fn a_too_deep_body_is_refused_naming_only_what_applies() {
    let hub = TestHub::start().await;
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    for (path, names_filters) in [
        ("/v1/principals", false),
        ("/v1/eventtypes", false),
        ("/v1/subscriptions", true),
    ] {
        let refused = Answer::from(
            hub.request(Method::POST, path, tokens::ADMIN)
                .header("content-type", "application/json")
                .body(deep.clone())
                .send()
                .await
                .unwrap(),
        )
        .await
        .assert_problem(400);
        let detail = refused.body["detail"].as_str().unwrap();
        assert!(detail.contains("nested too deep"), "{path}: {detail}");
        assert_eq!(
            detail.contains("filters.max_depth"),
            names_filters,
            "{path}: {detail}"
        );
    }
}
