//! Fidelity: what the publisher sent is what the subscriber gets, through every content
//! mode, and the Subscriptions API keeps what the subscriber sent.

use std::time::Duration;

use knooppunt_tests::sink::Sink;
use knooppunt_tests::{Answer, TestHub, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:BRP";
const TYPE: &str = "nl.brp.persoon-verhuisd";
const WAIT: Duration = Duration::from_secs(15);

async fn subscribe(hub: &TestHub, body: Value) -> Answer {
    Answer::from(
        hub.request(Method::POST, "/v1/subscriptions", tokens::KVK)
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await
}

async fn subscribe_sink(hub: &TestHub, sink: &Sink, mode: &str) {
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
                      "config": {"mode": mode}});
    let created = subscribe(hub, body).await;
    assert_eq!(created.status, 201, "{}", created.body);
}

/// Publishes in binary mode with these `ce-` headers (besides the required ones) and body.
async fn publish_binary(hub: &TestHub, id: &str, headers: &[(&str, &[u8])], body: Vec<u8>) {
    let mut request = hub
        .request(Method::POST, "/v1/events", tokens::PUBLISHER)
        .header("ce-specversion", "1.0")
        .header("ce-id", id)
        .header("ce-source", SOURCE)
        .header("ce-type", TYPE);
    for (name, value) in headers {
        request = request.header(*name, reqwest::header::HeaderValue::from_bytes(value).unwrap());
    }
    let answer = Answer::from(request.body(body).send().await.unwrap()).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
}

/// http-protocol-binding.md 3.1.3.2: a value that is one quoted-string is unquoted (older
/// senders); a `"` anywhere else is part of the value, kept byte for byte. Then one round of
/// percent-decoding; on the way out, space, `"`, `%` and non-ASCII are percent-encoded.
#[tokio::test]
async fn header_values_keep_their_quotes_commas_percents_and_non_ascii_both_ways() {
    let hub = TestHub::start().await;
    let structured = Sink::start().await;
    let binary = Sink::start().await;
    subscribe_sink(&hub, &structured, "structured").await;
    subscribe_sink(&hub, &binary, "binary").await;
    let cases: [(&str, &[u8], &str, &str); 6] = [
        (
            "ce-subject",
            b"quoted \"x\" end",
            "quoted \"x\" end",
            "quoted%20%22x%22%20end",
        ),
        ("ce-comexamplepair", b"\"a\" \"b\"", "\"a\" \"b\"", "%22a%22%20%22b%22"),
        ("ce-comexampleold", b"\"hello world\"", "hello world", "hello%20world"),
        (
            "ce-comexampleescaped",
            b"\"say \\\"hi\\\"\"",
            "say \"hi\"",
            "say%20%22hi%22",
        ),
        ("ce-comexamplelist", b"a,b, c;d", "a,b, c;d", "a,b,%20c;d"),
        (
            "ce-comexamplemixed",
            b"100%25 %C3%BC%e2%82%ac \"%25\"",
            "100% ü€ \"%\"",
            "100%25%20%C3%BC%E2%82%AC%20%22%25%22",
        ),
    ];
    let headers: Vec<(&str, &[u8])> = cases.iter().map(|(n, v, _, _)| (*n, *v)).collect();
    publish_binary(&hub, "quotes-1", &headers, Vec::new()).await;

    let received = structured.wait_for(1, WAIT).await[0].json();
    let sent = binary.wait_for(1, WAIT).await.remove(0);
    for (name, _, attribute, header) in cases {
        let attribute_name = name.strip_prefix("ce-").unwrap();
        assert_eq!(received[attribute_name], attribute, "{name} in structured mode");
        assert_eq!(sent.header(name), Some(header), "{name} in binary mode");
    }
}

/// A binary-mode delivery of an event without data says so: `Content-Length: 0`.
#[tokio::test]
async fn a_binary_delivery_without_data_has_content_length_zero() {
    let hub = TestHub::start().await;
    let binary = Sink::start().await;
    subscribe_sink(&hub, &binary, "binary").await;
    publish_binary(&hub, "no-data-1", &[], Vec::new()).await;
    let delivery = binary.wait_for(1, WAIT).await.remove(0);
    assert!(delivery.body.is_empty());
    assert_eq!(delivery.header("content-length"), Some("0"));
    assert_eq!(delivery.header("transfer-encoding"), None);
}
