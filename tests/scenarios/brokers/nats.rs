//! NATS: core NATS and JetStream on Debian's `nats-server`, read with nats-py (NATS's own
//! Python client). Both modes as the NATS binding maps them, byte for byte; the server's
//! refusals as clear statuses; a server restarted mid-stream loses nothing of a JetStream
//! subscription, in order.

use super::*;
use knooppunt_tests::brokers::{NatsReceived, NatsServer, NatsSubscriber};

/// A NATS subscription to `server` with these settings and config, logged in as the hub.
fn nats(server: &NatsServer, settings: Value, config: Value) -> Value {
    json!({"sink": server.url(), "protocol": "NATS", "types": [TYPE],
           "protocolsettings": settings, "config": config,
           "sinkcredential": {"credentialtype": "PLAIN", "identifier": HUB.0, "secret": HUB.1}})
}

fn receive_nats(subscriber: &NatsSubscriber, count: usize) -> Vec<NatsReceived> {
    tokio::task::block_in_place(|| subscriber.take(count, WAIT))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nats_gets_every_attribute_and_the_data_byte_for_byte_in_both_modes() {
    let server = NatsServer::start(&[HUB, READER]);
    let core = NatsSubscriber::core(&server, "knooppunt.binary", READER);
    let stream = NatsSubscriber::stream(&server, "knooppunt.structured", READER, "EVENTS");
    let hub = TestHub::start().await;
    let binary = create(
        &hub,
        nats(
            &server,
            json!({"subject": "knooppunt.binary"}),
            json!({"mode": "binary"}),
        ),
    )
    .await;
    assert_eq!(binary.status, 201, "{}", binary.body);
    // The server took the hub's connection and credentials: that is its consent.
    assert_eq!(binary.body["state"], "active", "{}", binary.body);
    assert_eq!(binary.body["protocol"], "NATS");
    assert_eq!(
        binary.body["protocolsettings"],
        json!({"subject": "knooppunt.binary", "jetstream": false})
    );
    let structured = create(
        &hub,
        nats(
            &server,
            json!({"subject": "knooppunt.structured", "jetstream": true}),
            json!({"mode": "structured"}),
        ),
    )
    .await;
    assert_eq!(structured.status, 201, "{}", structured.body);
    assert_eq!(structured.body["state"], "active", "{}", structured.body);

    publish(&hub, EVENT).await;

    // Binary mode (NATS binding 3.1): every attribute, datacontenttype included, as a
    // `ce-` header with its canonical string percent-encoded; the data as the payload.
    let message = receive_nats(&core, 1).remove(0);
    assert_eq!(message.subject, "knooppunt.binary");
    assert_eq!(
        String::from_utf8(message.payload_bytes()).unwrap(),
        r#"{"bsn":"999990019","nieuw":"Utrecht"}"#
    );
    let published: Value = serde_json::from_str(EVENT).unwrap();
    let mut expected: Vec<(String, String)> = published
        .as_object()
        .unwrap()
        .iter()
        .filter(|(name, _)| *name != "data")
        .map(|(name, value)| {
            let text = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            (format!("ce-{name}"), text)
        })
        .collect();
    expected.sort();
    let decoded: Vec<(String, String)> = message
        .headers
        .iter()
        .map(|(name, value)| {
            let value = knooppunt_event::binding::percent::decode(value.as_bytes()).unwrap();
            (name.clone(), value)
        })
        .collect();
    assert_eq!(decoded, expected);
    // Percent-encoded on the wire: space, `%` and what is not printable ASCII.
    assert_eq!(
        message.header("ce-subject"),
        Some("persoon%20999990019%20%25%20%C3%A9")
    );

    // Structured mode over JetStream: the event exactly as published, named by its
    // Content-Type; stored by the stream the subscriber reads.
    let message = receive_nats(&stream, 1).remove(0);
    assert_eq!(message.subject, "knooppunt.structured");
    assert_eq!(message.payload_bytes(), EVENT.as_bytes());
    assert_eq!(
        message.header("Content-Type"),
        Some("application/cloudevents+json")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nats_server_that_refuses_gives_a_clear_status() {
    let server = NatsServer::start(&[HUB, READER]);
    let hub = TestHub::start().await;

    // Wrong credentials: the subscription waits for consent, saying why.
    let mut body = nats(&server, json!({"subject": "knooppunt.x"}), json!({}));
    body["sinkcredential"]["secret"] = "wrong".into();
    let refused = create(&hub, body).await;
    assert_eq!(refused.status, 201, "{}", refused.body);
    assert_eq!(refused.body["state"], "pending", "{}", refused.body);
    let problem = refused.body["validationProblem"].as_str().unwrap();
    assert!(
        problem.contains("refused the login") && problem.contains("sinkcredential"),
        "{problem}"
    );

    // A subject the hub's user may not publish to, in core NATS and over JetStream: a
    // dead letter with the server's reason at the first attempt, not a retry loop.
    for jetstream in [false, true] {
        let forbidden = create(
            &hub,
            nats(
                &server,
                json!({"subject": "elsewhere.x", "jetstream": jetstream}),
                json!({"maxAttempts": "10"}),
            ),
        )
        .await;
        assert_eq!(forbidden.body["state"], "active", "{}", forbidden.body);
        let id = forbidden.body["id"].as_str().unwrap().to_owned();
        // A new event each time (the hub takes a repeated id and source once).
        publish(
            &hub,
            &EVENT.replace("mqtt-1", &format!("forbidden-{jetstream}")),
        )
        .await;
        let dead = dead_letters(&hub, &id).await;
        assert_eq!(dead[0]["attempts"], 1, "{dead:?}");
        let reason = dead[0]["reason"].as_str().unwrap();
        assert!(reason.contains("Permissions Violation"), "{reason}");
        hub.call(
            Method::DELETE,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            None,
        )
        .await;
    }

    // JetStream to a subject no stream takes: nobody acknowledges; a dead letter saying so.
    let unstored = create(
        &hub,
        nats(
            &server,
            json!({"subject": "knooppunt.nostream", "jetstream": true}),
            json!({"maxAttempts": "10"}),
        ),
    )
    .await;
    let id = unstored.body["id"].as_str().unwrap().to_owned();
    publish(&hub, &EVENT.replace("mqtt-1", "nostream")).await;
    let dead = dead_letters(&hub, &id).await;
    assert_eq!(dead[0]["attempts"], 1, "{dead:?}");
    let reason = dead[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("no JetStream stream takes subject `knooppunt.nostream`"),
        "{reason}"
    );

    // What the hub refuses before it stores anything, naming the member.
    let cases = [
        (
            json!({"sink": "nats://192.168.7.7:4222", "protocol": "NATS",
                   "protocolsettings": {"subject": "knooppunt.x"}}),
            "sink",
        ),
        (
            json!({"sink": server.url(), "protocol": "NATS",
                   "protocolsettings": {"subject": "knooppunt.>"}}),
            "protocolsettings.subject",
        ),
        (
            json!({"sink": server.url(), "protocol": "NATS"}),
            "protocolsettings.subject",
        ),
        (
            json!({"sink": server.url(), "protocol": "NATS",
                   "protocolsettings": {"subject": "knooppunt.x", "topicname": "a"}}),
            "protocolsettings.topicname",
        ),
        (
            json!({"sink": server.url(), "protocol": "NATS",
                   "protocolsettings": {"subject": "knooppunt.x", "jetstream": "yes"}}),
            "protocolsettings.jetstream",
        ),
        (
            json!({"sink": server.url(), "protocol": "NATS", "config": {"mode": "cbor"},
                   "protocolsettings": {"subject": "knooppunt.x"}}),
            "config.mode",
        ),
        (
            json!({"sink": server.url(), "protocol": "MQTT5",
                   "protocolsettings": {"topicname": "knooppunt/x"}}),
            "sink",
        ),
        (
            json!({"sink": "https://example.nl/x", "protocol": "HTTP",
                   "protocolsettings": {"subject": "knooppunt.x"}}),
            "protocolsettings.subject",
        ),
    ];
    assert_refused(&hub, &cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nats_server_restarted_mid_stream_loses_nothing_of_jetstream_in_order() {
    let mut server = NatsServer::start(&[HUB, READER]);
    let subscriber = NatsSubscriber::stream(&server, "knooppunt.ordered", READER, "ORDERED");
    let hub = TestHub::start().await;
    let made = create(
        &hub,
        nats(
            &server,
            json!({"subject": "knooppunt.ordered", "jetstream": true}),
            json!({"ordering": "ordered", "initialBackoff": "PT0.05S", "maxBackoff": "PT0.5S"}),
        ),
    )
    .await;
    assert_eq!(made.body["state"], "active", "{}", made.body);
    ordered_across_a_restart(&hub, &mut server, |within| {
        subscriber.next(within).map(|m| id_in(&m.payload_bytes()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_into_nats_names_the_replay() {
    let server = NatsServer::start(&[HUB, READER]);
    let subscriber = NatsSubscriber::core(&server, "knooppunt.replayed", READER);
    let hub = TestHub::start().await;
    let made = create(
        &hub,
        nats(
            &server,
            json!({"subject": "knooppunt.replayed"}),
            json!({"mode": "binary"}),
        ),
    )
    .await;
    let id = made.body["id"].as_str().unwrap().to_owned();
    publish(&hub, EVENT).await;
    let first = receive_nats(&subscriber, 1).remove(0);
    assert_eq!(first.header("ce-id"), Some("mqtt-1"));
    assert_eq!(first.header("knooppunt-replay"), None);
    let replay = hub
        .call(
            Method::POST,
            &format!("/v1/subscriptions/{id}/replays"),
            tokens::KVK,
            Some(json!({"from": "2000-01-01T00:00:00Z"})),
        )
        .await;
    assert_eq!(replay.status, 202, "{}", replay.body);
    let again = receive_nats(&subscriber, 1).remove(0);
    assert_eq!(again.payload, first.payload);
    assert_eq!(again.header("ce-id"), Some("mqtt-1"));
    assert_eq!(again.header("knooppunt-replay"), replay.body["id"].as_str());
}

/// `tls://`: the server's certificate is checked against the hub's trust store.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tls_nats_servers_are_verified_against_the_hubs_trust_store() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tls");
    let server = NatsServer::start_tls(
        &[HUB, READER],
        &fixtures.join("sink.pem"),
        &fixtures.join("sink.key"),
    );
    let subscriber =
        NatsSubscriber::core_tls(&server, "knooppunt.tls", READER, &fixtures.join("ca.pem"));
    let body = nats(&server, json!({"subject": "knooppunt.tls"}), json!({}));
    assert!(body["sink"].as_str().unwrap().starts_with("tls://"));

    let untrusting = TestHub::start().await;
    let refused = create(&untrusting, body.clone()).await;
    assert_eq!(refused.body["state"], "pending", "{}", refused.body);
    let problem = refused.body["validationProblem"].as_str().unwrap();
    assert!(problem.contains("certificate"), "{problem}");

    // A plain `nats://` sink to a server that requires TLS: pending, saying to use tls://.
    let mut plain = body.clone();
    plain["sink"] = format!("nats://127.0.0.1:{}", server.port).into();
    let plain = create(&untrusting, plain).await;
    assert_eq!(plain.body["state"], "pending", "{}", plain.body);
    assert!(
        plain.body["validationProblem"]
            .as_str()
            .unwrap()
            .contains("tls://"),
        "{}",
        plain.body
    );

    let mut options = knooppunt_tests::test_options();
    options.delivery.extra_root_certificates = knooppunt_tests::sink::test_ca_pem();
    let hub = TestHub::builder().options(options).start().await;
    let made = create(&hub, body).await;
    assert_eq!(made.body["state"], "active", "{}", made.body);
    publish(&hub, EVENT).await;
    let message = receive_nats(&subscriber, 1).remove(0);
    assert_eq!(message.payload_bytes(), EVENT.as_bytes());
}
