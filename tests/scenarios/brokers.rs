//! Delivery to message brokers over their own protocols, against real brokers from
//! Debian's packages and received with the protocols' own clients: MQTT 5 to Mosquitto,
//! read with Eclipse Paho; NATS in [`nats`], AMQP 1.0 in [`amqp`]. Every attribute and the data arrive as the MQTT binding maps
//! them, byte for byte; a broker's refusals are clear statuses; a broker restarted
//! mid-stream loses nothing, and an ordered subscription keeps its order.

use std::collections::BTreeMap;
use std::time::Duration;

use knooppunt_tests::brokers::{Mosquitto, MqttReceived, MqttSubscriber};
use knooppunt_tests::{Answer, TestHub, tokens};
use reqwest::Method;
use serde_json::{Value, json};

#[path = "brokers/amqp.rs"]
mod amqp;
#[path = "brokers/nats.rs"]
mod nats;

const TYPE: &str = "nl.brp.persoon-verhuisd";
const WAIT: Duration = Duration::from_secs(20);
const HUB: (&str, &str) = ("hub", "hub-secret");
const READER: (&str, &str) = ("reader", "reader-secret");

/// An event with extension attributes of three types and JSON data, as a publisher sends
/// it (the exact text).
const EVENT: &str = r#"{"specversion":"1.0","id":"mqtt-1","source":"urn:nld:oin:00000001823288444000:systeem:BRP","type":"nl.brp.persoon-verhuisd","time":"2026-01-02T03:04:05Z","subject":"persoon 999990019 % é","datacontenttype":"application/json","aantal":3,"spoed":true,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","data":{"bsn":"999990019","nieuw":"Utrecht"}}"#;

async fn create(hub: &TestHub, body: Value) -> Answer {
    hub.call(Method::POST, "/v1/subscriptions", tokens::KVK, Some(body))
        .await
}

/// An MQTT subscription to `broker` with these settings and config, logged in as the hub.
fn mqtt(broker: &Mosquitto, settings: Value, config: Value) -> Value {
    json!({"sink": broker.url(), "protocol": "MQTT5", "types": [TYPE],
           "protocolsettings": settings, "config": config,
           "sinkcredential": {"credentialtype": "PLAIN", "identifier": HUB.0, "secret": HUB.1}})
}

async fn publish(hub: &TestHub, text: &str) {
    let answer = hub
        .publish_raw("application/cloudevents+json", text.to_owned())
        .await;
    assert_eq!(answer.status, 202, "{}", answer.body);
}

fn receive(subscriber: &MqttSubscriber, count: usize) -> Vec<MqttReceived> {
    tokio::task::block_in_place(|| subscriber.take(count, WAIT))
}

/// The dead letters of a subscription, once there is one.
async fn dead_letters(hub: &TestHub, id: &str) -> Vec<Value> {
    let path = format!("/v1/subscriptions/{id}/dead-letters");
    knooppunt_tests::wait::until("a dead letter", WAIT, || async {
        let list = hub.call(Method::GET, &path, tokens::KVK, None).await;
        list.body
            .as_array()
            .filter(|l| !l.is_empty())
            .cloned()
            .ok_or(list.body)
    })
    .await
}

/// Each body refused with a 400 naming its member, before anything is stored.
async fn assert_refused(hub: &TestHub, cases: &[(Value, &str)]) {
    for (body, member) in cases {
        let answer = create(hub, body.clone()).await.assert_problem(400);
        assert!(
            answer.invalid_params().iter().any(|p| p == member),
            "{body}: {:?}",
            answer.body
        );
    }
}

/// A broker a test stops and starts again on the same ports.
trait Restartable {
    fn stop(&mut self);
    fn restart(&mut self);
}

macro_rules! restartable {
    ($($broker:ty),*) => {$(
        impl Restartable for $broker {
            fn stop(&mut self) {
                <$broker>::stop(self);
            }
            fn restart(&mut self) {
                <$broker>::restart(self);
            }
        }
    )*};
}

restartable!(
    Mosquitto,
    knooppunt_tests::brokers::NatsServer,
    knooppunt_tests::brokers::RabbitMq
);

/// Publishes 30 events to an ordered subscription while `broker` is stopped after the
/// first 10 and started again after 20: every event arrives at least once (`next`: the id
/// of the next message, waiting up to the time given), in order.
async fn ordered_across_a_restart(
    hub: &TestHub,
    broker: &mut impl Restartable,
    next: impl Fn(Duration) -> Option<String>,
) {
    let event = |n: usize| {
        json!({"specversion": "1.0", "id": format!("ordered-{n}"), "source": "/bron",
               "type": TYPE, "data": {"n": n}})
        .to_string()
    };
    for n in 0..10 {
        publish(hub, &event(n)).await;
    }
    let mut ids: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut take = |ids: &mut Vec<String>, id: String| {
        if seen.insert(id.clone()) {
            ids.push(id);
        }
    };
    for _ in 0..10 {
        let id = tokio::task::block_in_place(|| next(WAIT)).expect("the first 10 arrive");
        take(&mut ids, id);
    }
    tokio::task::block_in_place(|| broker.stop());
    // Accepted while the broker is away: they wait in the hub.
    for n in 10..20 {
        publish(hub, &event(n)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    tokio::task::block_in_place(|| broker.restart());
    for n in 20..30 {
        publish(hub, &event(n)).await;
    }
    while ids.len() < 30 {
        let id = tokio::task::block_in_place(|| next(Duration::from_secs(60)))
            .unwrap_or_else(|| panic!("only {} of 30 events arrived: {ids:?}", ids.len()));
        take(&mut ids, id);
    }
    let expected: Vec<String> = (0..30).map(|n| format!("ordered-{n}")).collect();
    assert_eq!(ids, expected, "every event, once each at least, in order");
}

/// The `id` of an event in structured mode (its JSON as the payload).
fn id_in(payload: &[u8]) -> String {
    let event: Value = serde_json::from_slice(payload).unwrap();
    event["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_attribute_and_the_data_arrive_byte_for_byte_in_both_modes() {
    let broker = Mosquitto::start(&[HUB, READER]);
    let subscriber = MqttSubscriber::start_mqtt(&broker, "knooppunt/#", READER.0, READER.1);
    let hub = TestHub::start().await;
    let binary = create(
        &hub,
        mqtt(
            &broker,
            json!({"topicname": "knooppunt/binary", "qos": 1, "expiry": 3600,
                   "userproperties": {"afdeling": "burgerzaken"}}),
            json!({"mode": "binary"}),
        ),
    )
    .await;
    assert_eq!(binary.status, 201, "{}", binary.body);
    // The broker took the hub's connection and credentials: that is its consent.
    assert_eq!(binary.body["state"], "active", "{}", binary.body);
    assert_eq!(binary.body["protocol"], "MQTT5");
    assert_eq!(
        binary.body["protocolsettings"],
        json!({"topicname": "knooppunt/binary", "qos": 1, "retain": false, "expiry": 3600,
               "userproperties": {"afdeling": "burgerzaken"}})
    );
    let structured = create(
        &hub,
        mqtt(
            &broker,
            json!({"topicname": "knooppunt/structured", "qos": 2}),
            json!({"mode": "structured"}),
        ),
    )
    .await;
    assert_eq!(structured.status, 201, "{}", structured.body);
    assert_eq!(structured.body["state"], "active", "{}", structured.body);

    publish(&hub, EVENT).await;
    let by_topic: BTreeMap<String, MqttReceived> = receive(&subscriber, 2)
        .into_iter()
        .map(|m| (m.topic.clone(), m))
        .collect();

    // Binary mode (MQTT binding 3.1): datacontenttype as the Content Type, every other
    // attribute as a User Property of its own name with its canonical string, the data as
    // the payload; the subscription's own user properties after the event's.
    let message = &by_topic["knooppunt/binary"];
    assert_eq!(message.qos, 1);
    assert_eq!(message.content_type.as_deref(), Some("application/json"));
    assert_eq!(
        String::from_utf8(message.payload_bytes()).unwrap(),
        r#"{"bsn":"999990019","nieuw":"Utrecht"}"#
    );
    let published: Value = serde_json::from_str(EVENT).unwrap();
    let mut expected: Vec<(String, String)> = published
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "data" | "datacontenttype"))
        .map(|(name, value)| {
            let text = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            (name.clone(), text)
        })
        .collect();
    expected.push(("afdeling".into(), "burgerzaken".into()));
    let mut got = message.user_properties.clone();
    // The event's attributes in any order, the subscription's last.
    assert_eq!(got.pop(), expected.pop());
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    assert_eq!(message.property("datacontenttype"), None);
    // The broker counts the expiry down while the message waits.
    assert!(
        message.expiry.is_some_and(|e| (3590..=3600).contains(&e)),
        "{message:?}"
    );

    // Structured mode (3.2): the event exactly as published, with the format's media type.
    let message = &by_topic["knooppunt/structured"];
    assert_eq!(message.qos, 2);
    assert_eq!(
        message.content_type.as_deref(),
        Some("application/cloudevents+json")
    );
    assert_eq!(message.payload_bytes(), EVENT.as_bytes());
    assert!(message.user_properties.is_empty(), "{message:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_broker_that_refuses_gives_a_clear_status() {
    let broker = Mosquitto::start(&[HUB, READER]);
    let hub = TestHub::start().await;

    // Wrong credentials: the subscription waits for consent, saying why.
    let mut body = mqtt(&broker, json!({"topicname": "knooppunt/x"}), json!({}));
    body["sinkcredential"]["secret"] = "wrong".into();
    let refused = create(&hub, body).await;
    assert_eq!(refused.status, 201, "{}", refused.body);
    assert_eq!(refused.body["state"], "pending", "{}", refused.body);
    let problem = refused.body["validationProblem"].as_str().unwrap();
    assert!(
        problem.contains("the broker refused the connection") && problem.contains("sinkcredential"),
        "{problem}"
    );

    // A topic the hub's user may not publish to: a dead letter with the broker's reason at
    // the first attempt, not a retry loop.
    let forbidden = create(
        &hub,
        mqtt(
            &broker,
            json!({"topicname": "elsewhere/x"}),
            json!({"maxAttempts": "10"}),
        ),
    )
    .await;
    assert_eq!(forbidden.body["state"], "active", "{}", forbidden.body);
    let id = forbidden.body["id"].as_str().unwrap().to_owned();
    publish(&hub, EVENT).await;
    let dead = dead_letters(&hub, &id).await;
    assert_eq!(dead[0]["attempts"], 1, "{dead:?}");
    let reason = dead[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("the broker refused the message") && reason.contains("NotAuthorized"),
        "{reason}"
    );

    // What the hub refuses before it stores anything, naming the member.
    let cases = [
        (
            json!({"sink": "mqtt://192.168.7.7:1883", "protocol": "MQTT5",
                   "protocolsettings": {"topicname": "knooppunt/x"}}),
            "sink",
        ),
        (
            json!({"sink": broker.url(), "protocol": "MQTT5",
                   "protocolsettings": {"topicname": "knooppunt/#"}}),
            "protocolsettings.topicname",
        ),
        (
            json!({"sink": broker.url(), "protocol": "MQTT5"}),
            "protocolsettings.topicname",
        ),
        (
            json!({"sink": broker.url(), "protocol": "MQTT5",
                   "protocolsettings": {"topicname": "knooppunt/x", "qos": 3}}),
            "protocolsettings.qos",
        ),
        (
            json!({"sink": broker.url(), "protocol": "MQTT5",
                   "protocolsettings": {"topicname": "knooppunt/x", "method": "POST"}}),
            "protocolsettings.method",
        ),
        (
            json!({"sink": broker.url(), "protocol": "MQTT5", "config": {"mode": "cbor"},
                   "protocolsettings": {"topicname": "knooppunt/x"}}),
            "config.mode",
        ),
        (json!({"sink": broker.url(), "protocol": "HTTP"}), "sink"),
        (
            json!({"sink": "https://example.nl/x", "protocol": "MQTT5",
                   "protocolsettings": {"topicname": "knooppunt/x"}}),
            "sink",
        ),
        (
            json!({"sink": "https://example.nl/x", "protocol": "HTTP",
                   "protocolsettings": {"topicname": "knooppunt/x"}}),
            "protocolsettings.topicname",
        ),
    ];
    assert_refused(&hub, &cases).await;
    let kafka = create(
        &hub,
        json!({"sink": "https://example.nl/x", "protocol": "KAFKA"}),
    )
    .await
    .assert_problem(400);
    assert!(
        kafka
            .body
            .to_string()
            .contains("`HTTP`, `MQTT5`, `MQTT3`, `NATS`"),
        "{}",
        kafka.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_broker_restarted_mid_stream_loses_nothing_and_the_order_holds() {
    let mut broker = Mosquitto::start(&[HUB, READER]);
    let subscriber = MqttSubscriber::start_mqtt(&broker, "knooppunt/ordered", READER.0, READER.1);
    let hub = TestHub::start().await;
    let made = create(
        &hub,
        mqtt(
            &broker,
            json!({"topicname": "knooppunt/ordered", "qos": 1}),
            json!({"ordering": "ordered", "initialBackoff": "PT0.05S", "maxBackoff": "PT0.5S"}),
        ),
    )
    .await;
    assert_eq!(made.body["state"], "active", "{}", made.body);
    // Structured mode (the default): each message is the event.
    ordered_across_a_restart(&hub, &mut broker, |within| {
        subscriber.next(within).map(|m| id_in(&m.payload_bytes()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_publishes_the_window_again_naming_the_replay() {
    let broker = Mosquitto::start(&[HUB, READER]);
    let subscriber = MqttSubscriber::start_mqtt(&broker, "knooppunt/replayed", READER.0, READER.1);
    let hub = TestHub::start().await;
    let made = create(
        &hub,
        mqtt(
            &broker,
            json!({"topicname": "knooppunt/replayed"}),
            json!({"mode": "binary"}),
        ),
    )
    .await;
    let id = made.body["id"].as_str().unwrap().to_owned();
    publish(&hub, EVENT).await;
    let first = receive(&subscriber, 1).remove(0);
    assert_eq!(first.property("id"), Some("mqtt-1"));
    assert_eq!(first.property("knooppunt-replay"), None);

    let replay = hub
        .call(
            Method::POST,
            &format!("/v1/subscriptions/{id}/replays"),
            tokens::KVK,
            Some(json!({"from": "2000-01-01T00:00:00Z"})),
        )
        .await;
    assert_eq!(replay.status, 202, "{}", replay.body);
    let again = receive(&subscriber, 1).remove(0);
    // The event unchanged, the replay named beside it.
    assert_eq!(again.payload, first.payload);
    assert_eq!(again.property("id"), Some("mqtt-1"));
    assert_eq!(
        again.property("knooppunt-replay"),
        replay.body["id"].as_str()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_mqtt3_broker_gets_the_event_in_structured_mode() {
    let broker = Mosquitto::start(&[HUB, READER]);
    let subscriber = MqttSubscriber::start_mqtt(&broker, "knooppunt/v3", READER.0, READER.1);
    let hub = TestHub::start().await;
    let mut body = mqtt(
        &broker,
        json!({"topicname": "knooppunt/v3", "qos": 1}),
        json!({}),
    );
    body["protocol"] = "MQTT3".into();
    let made = create(&hub, body.clone()).await;
    assert_eq!(made.status, 201, "{}", made.body);
    assert_eq!(made.body["state"], "active", "{}", made.body);
    assert_eq!(made.body["protocol"], "MQTT3");
    publish(&hub, EVENT).await;
    let message = receive(&subscriber, 1).remove(0);
    // MQTT 3.1.1 carries no properties: the JSON format is implied (binding 3.2.1).
    assert_eq!(message.payload_bytes(), EVENT.as_bytes());
    assert_eq!(message.content_type, None);
    assert!(message.user_properties.is_empty(), "{message:?}");
    assert_eq!(message.qos, 1);

    // What MQTT 3.1.1 cannot carry is refused, naming the member.
    for (change, member) in [
        (json!({"config": {"mode": "binary"}}), "config.mode"),
        (
            json!({"protocolsettings": {"topicname": "knooppunt/v3", "expiry": 60}}),
            "protocolsettings.expiry",
        ),
        (
            json!({"protocolsettings": {"topicname": "knooppunt/v3",
                                        "userproperties": {"a": "b"}}}),
            "protocolsettings.userproperties",
        ),
    ] {
        let mut refused = body.clone();
        for (key, value) in change.as_object().unwrap() {
            refused[key] = value.clone();
        }
        let answer = create(&hub, refused).await.assert_problem(400);
        assert!(
            answer.invalid_params().iter().any(|p| p == member),
            "{member}: {:?}",
            answer.body
        );
    }
    // Wrong credentials: pending, saying why.
    body["sinkcredential"]["secret"] = "wrong".into();
    let pending = create(&hub, body).await;
    assert_eq!(pending.body["state"], "pending", "{}", pending.body);
    assert!(
        pending.body["validationProblem"]
            .as_str()
            .unwrap()
            .contains("the broker refused the connection"),
        "{}",
        pending.body
    );
}

/// `mqtts://`: the broker's certificate is checked against the hub's trust store (here the
/// test CA the hub is configured to trust); a hub that does not trust it sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mqtts_brokers_are_verified_against_the_hubs_trust_store() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tls");
    let broker = Mosquitto::start_tls(
        &[HUB, READER],
        &fixtures.join("sink.pem"),
        &fixtures.join("sink.key"),
    );
    let subscriber = MqttSubscriber::start_mqtt(&broker, "knooppunt/tls", READER.0, READER.1);
    let mut body = mqtt(&broker, json!({"topicname": "knooppunt/tls"}), json!({}));
    body["sink"] = broker.tls_url().into();

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
    let message = receive(&subscriber, 1).remove(0);
    assert_eq!(message.payload_bytes(), EVENT.as_bytes());
}
