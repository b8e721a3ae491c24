//! AMQP 1.0: Debian's RabbitMQ with its AMQP 1.0 plugin, read with Apache Qpid Proton.
//! Both modes as the AMQP binding maps them (typed application properties, the data as one
//! data section); the broker's refusals as clear statuses; a broker restarted mid-stream
//! loses nothing, in order.

use super::*;
use knooppunt_tests::brokers::{AmqpReceived, AmqpReceiver, RabbitMq};

/// The queue's address for a sender and a receiver: no queue is declared on the fly.
fn queue() -> String {
    format!("/amq/queue/{}", RabbitMq::QUEUE)
}

/// An AMQP subscription to `broker` with these settings and config, logged in as the hub.
fn amqp(sink: String, settings: Value, config: Value) -> Value {
    json!({"sink": sink, "protocol": "AMQP", "types": [TYPE],
           "protocolsettings": settings, "config": config,
           "sinkcredential": {"credentialtype": "PLAIN", "identifier": HUB.0, "secret": HUB.1}})
}

fn receive_amqp(receiver: &AmqpReceiver, count: usize) -> Vec<AmqpReceived> {
    tokio::task::block_in_place(|| receiver.take(count, WAIT))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn amqp_gets_both_modes_byte_for_byte_and_refusals_are_clear() {
    let broker = tokio::task::block_in_place(|| RabbitMq::start(&[HUB, READER]));
    let receiver = AmqpReceiver::start_amqp(broker.port, &queue(), READER);
    let hub = TestHub::start().await;
    // Binary mode, the target in the settings.
    let binary = create(
        &hub,
        amqp(
            broker.url(),
            json!({"address": queue(), "linkProperties": {"afdeling": "burgerzaken"}}),
            json!({"mode": "binary"}),
        ),
    )
    .await;
    assert_eq!(binary.status, 201, "{}", binary.body);
    // The broker took the login and attached the link: that is its consent.
    assert_eq!(binary.body["state"], "active", "{}", binary.body);
    assert_eq!(binary.body["protocol"], "AMQP");
    assert_eq!(
        binary.body["protocolsettings"],
        json!({"address": queue(), "sendersettlementmode": "unsettled",
               "linkProperties": {"afdeling": "burgerzaken"}})
    );
    publish(&hub, EVENT).await;
    let message = receive_amqp(&receiver, 1).remove(0);
    // Binary mode (AMQP binding 3.1): datacontenttype as content-type, every other
    // attribute as a `cloudEvents_` application property in its AMQP type, the data as
    // the body.
    assert_eq!(message.content_type.as_deref(), Some("application/json"));
    assert_eq!(
        String::from_utf8(message.body_bytes()).unwrap(),
        r#"{"bsn":"999990019","nieuw":"Utrecht"}"#
    );
    assert!(message.durable, "kept across a broker restart");
    let published: Value = serde_json::from_str(EVENT).unwrap();
    let mut expected: Vec<(String, String, Value)> = published
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "data" | "datacontenttype"))
        .map(|(name, value)| {
            let kind = match value {
                Value::Bool(_) => "bool",
                Value::Number(_) => "long",
                _ => "string",
            };
            (
                format!("cloudEvents_{name}"),
                kind.to_owned(),
                value.clone(),
            )
        })
        .collect();
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    let mut got = message.application_properties.clone();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, expected);

    // Structured mode, the target in the sink's path: the event exactly as published.
    let structured = create(
        &hub,
        amqp(
            format!("{}{}", broker.url(), queue()),
            json!({}),
            json!({"mode": "structured"}),
        ),
    )
    .await;
    assert_eq!(structured.body["state"], "active", "{}", structured.body);
    publish(&hub, &EVENT.replace("mqtt-1", "amqp-2")).await;
    // Both subscriptions get it: the structured one's is named by the format.
    let message = receive_amqp(&receiver, 2)
        .into_iter()
        .find(|m| m.content_type.as_deref() == Some("application/cloudevents+json; charset=utf-8"))
        .expect("the structured message");
    assert_eq!(
        message.body_bytes(),
        EVENT.replace("mqtt-1", "amqp-2").as_bytes()
    );
    assert!(message.application_properties.is_empty(), "{message:?}");

    // A replay names itself beside the unchanged event.
    let id = binary.body["id"].as_str().unwrap().to_owned();
    let replay = hub
        .call(
            Method::POST,
            &format!("/v1/subscriptions/{id}/replays"),
            tokens::KVK,
            Some(json!({"from": "2000-01-01T00:00:00Z"})),
        )
        .await;
    assert_eq!(replay.status, 202, "{}", replay.body);
    let replayed = receive_amqp(&receiver, 2);
    for message in &replayed {
        assert_eq!(
            message.property("knooppunt-replay").map(|(_, v)| v.clone()),
            Some(replay.body["id"].clone()),
            "{message:?}"
        );
    }

    // A wrong password: the subscription waits for consent, saying why.
    let mut wrong = amqp(broker.url(), json!({"address": queue()}), json!({}));
    wrong["sinkcredential"]["secret"] = "wrong".into();
    let refused = create(&hub, wrong).await;
    assert_eq!(refused.status, 201, "{}", refused.body);
    assert_eq!(refused.body["state"], "pending", "{}", refused.body);
    let problem = refused.body["validationProblem"].as_str().unwrap();
    assert!(problem.contains("refused the login"), "{problem}");
    // An exchange that does not exist: RabbitMQ refuses the link; pending, saying so.
    let missing = create(
        &hub,
        amqp(
            broker.url(),
            json!({"address": "/exchange/knooppunt.missing/x"}),
            json!({}),
        ),
    )
    .await;
    assert_eq!(missing.body["state"], "pending", "{}", missing.body);
    let problem = missing.body["validationProblem"].as_str().unwrap();
    assert!(
        problem.starts_with("the broker did not take the hub's connection")
            && problem.contains("amqp:not-found"),
        "{problem}"
    );
    // An exchange the hub's user may not write to: RabbitMQ attaches the link and refuses
    // the message, so the first event is a dead letter with the broker's reason, not a
    // retry loop. (A message to a queue that does not exist, `/amq/queue/<missing>`, is
    // unroutable: RabbitMQ 3 accepts and drops it.)
    for (n, (address, expected)) in [("/exchange/amq.topic/x", "amqp:unauthorized-access")]
        .into_iter()
        .enumerate()
    {
        let made = create(
            &hub,
            amqp(
                broker.url(),
                json!({"address": address}),
                json!({"maxAttempts": "10"}),
            ),
        )
        .await;
        assert_eq!(made.body["state"], "active", "{}", made.body);
        let id = made.body["id"].as_str().unwrap().to_owned();
        publish(&hub, &EVENT.replace("mqtt-1", &format!("refused-{n}"))).await;
        let dead = dead_letters(&hub, &id).await;
        assert_eq!(dead[0]["attempts"], 1, "{dead:?}");
        let reason = dead[0]["reason"].as_str().unwrap();
        assert!(reason.contains(expected), "{expected}: {reason}");
        hub.call(
            Method::DELETE,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            None,
        )
        .await;
    }

    // What the hub refuses before it stores anything, naming the member.
    let cases = [
        (
            json!({"sink": "amqp://192.168.7.7:5672", "protocol": "AMQP",
                   "protocolsettings": {"address": queue()}}),
            "sink",
        ),
        (
            json!({"sink": broker.url(), "protocol": "AMQP"}),
            "protocolsettings.address",
        ),
        (
            json!({"sink": broker.url(), "protocol": "AMQP",
                   "protocolsettings": {"address": queue(), "sendersettlementmode": "first"}}),
            "protocolsettings.sendersettlementmode",
        ),
        (
            json!({"sink": broker.url(), "protocol": "AMQP",
                   "protocolsettings": {"address": queue(), "subject": "a"}}),
            "protocolsettings.subject",
        ),
        (
            json!({"sink": broker.url(), "protocol": "AMQP", "config": {"mode": "batch"},
                   "protocolsettings": {"address": queue()}}),
            "config.mode",
        ),
        (
            json!({"sink": broker.url(), "protocol": "NATS",
                   "protocolsettings": {"subject": "a"}}),
            "sink",
        ),
    ];
    assert_refused(&hub, &cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_amqp_broker_restarted_mid_stream_loses_nothing_and_the_order_holds() {
    let mut broker = tokio::task::block_in_place(|| RabbitMq::start(&[HUB, READER]));
    let receiver = AmqpReceiver::start_amqp(broker.port, &queue(), READER);
    let hub = TestHub::start().await;
    let made = create(
        &hub,
        amqp(
            broker.url(),
            json!({"address": queue()}),
            json!({"ordering": "ordered", "initialBackoff": "PT0.05S", "maxBackoff": "PT0.5S"}),
        ),
    )
    .await;
    assert_eq!(made.body["state"], "active", "{}", made.body);
    ordered_across_a_restart(&hub, &mut broker, |within| {
        receiver.next(within).map(|m| id_in(&m.body_bytes()))
    })
    .await;
}

/// `amqps://`: the broker's certificate is checked against the hub's trust store.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn amqps_brokers_are_verified_against_the_hubs_trust_store() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tls");
    let broker = tokio::task::block_in_place(|| {
        RabbitMq::start_tls(
            &[HUB, READER],
            &fixtures.join("sink.pem"),
            &fixtures.join("sink.key"),
        )
    });
    let receiver = AmqpReceiver::start_amqp(broker.port, &queue(), READER);
    let body = amqp(
        format!("{}{}", broker.tls_url(), queue()),
        json!({}),
        json!({}),
    );
    let untrusting = TestHub::start().await;
    let refused = create(&untrusting, body.clone()).await;
    assert_eq!(refused.body["state"], "pending", "{}", refused.body);
    let problem = refused.body["validationProblem"].as_str().unwrap();
    assert!(problem.contains("certificate"), "{problem}");

    let mut options = knooppunt_tests::test_options();
    options.delivery.extra_root_certificates = knooppunt_tests::sink::test_ca_pem();
    let hub = TestHub::builder().options(options).start().await;
    let made = create(&hub, body).await;
    assert_eq!(made.body["state"], "active", "{}", made.body);
    publish(&hub, EVENT).await;
    let message = receive_amqp(&receiver, 1).remove(0);
    assert_eq!(message.body_bytes(), EVENT.as_bytes());
}
