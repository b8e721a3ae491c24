//! Fidelity: what the publisher sent is what the subscriber gets, through every content
//! mode, and the Subscriptions API keeps what the subscriber sent.

use std::time::Duration;

use knooppunt_tests::sink::Sink;
use knooppunt_tests::wait::quiet;
use knooppunt_tests::wait::until;
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
        request = request.header(
            *name,
            reqwest::header::HeaderValue::from_bytes(value).unwrap(),
        );
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
        (
            "ce-comexamplepair",
            b"\"a\" \"b\"",
            "\"a\" \"b\"",
            "%22a%22%20%22b%22",
        ),
        (
            "ce-comexampleold",
            b"\"hello world\"",
            "hello world",
            "hello%20world",
        ),
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
        assert_eq!(
            received[attribute_name], attribute,
            "{name} in structured mode"
        );
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

/// The `invalidParams` names and reasons of a 400.
fn refused(answer: Answer) -> Vec<(String, String)> {
    let answer = answer.assert_problem(400);
    answer.body["invalidParams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn later(seconds: u64) -> String {
    knooppunt_event::timestamp::utc_timestamp(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
            + seconds * 1000,
    )
}

#[tokio::test]
async fn sink_credentials_are_checked_as_the_spec_defines_them() {
    let hub = TestHub::start().await;
    let with = |credential: Value| {
        json!({"sink": "https://kvk.example.nl/events", "protocol": "HTTP",
               "sinkcredential": credential})
    };
    let token = |extra: Value| {
        let mut credential = json!({"credentialtype": "ACCESSTOKEN", "accesstoken": "t0k3n",
                                    "accesstokentype": "bearer",
                                    "accesstokenexpiresutc": later(3600)});
        for (key, value) in extra.as_object().unwrap() {
            if value.is_null() {
                credential.as_object_mut().unwrap().remove(key);
            } else {
                credential[key] = value.clone();
            }
        }
        credential
    };
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            token(json!({"accesstokenexpiresutc": null})),
            "sinkcredential.accesstokenexpiresutc",
            "required",
        ),
        (
            token(json!({"accesstokentype": null})),
            "sinkcredential.accesstokentype",
            "required",
        ),
        (
            token(json!({"accesstokentype": "mac"})),
            "sinkcredential.accesstokentype",
            "bearer",
        ),
        (
            token(json!({"accesstokenexpiresutc": "2020-01-01T00:00:00Z"})),
            "sinkcredential.accesstokenexpiresutc",
            "has passed",
        ),
        (
            token(json!({"refreshtoken": "r"})),
            "sinkcredential.refreshtoken",
            "unknown member",
        ),
        (
            json!({"credentialtype": "REFRESHTOKEN", "accesstoken": "a", "refreshtoken": "r",
                   "refreshtokenendpoint": "https://idp.example/token"}),
            "sinkcredential.credentialtype",
            "not supported",
        ),
        (
            json!({"credentialtype": "PLAIN", "identifier": "hub"}),
            "sinkcredential.secret",
            "required",
        ),
        (
            json!({"credentialtype": "PLAIN", "identifier": "hub", "secret": "s", "extra": 1}),
            "sinkcredential.extra",
            "unknown member",
        ),
        (
            json!({"accesstoken": "a"}),
            "sinkcredential.credentialtype",
            "required",
        ),
    ];
    for (credential, name, reason) in cases {
        let problems = refused(subscribe(&hub, with(credential.clone())).await);
        assert!(
            problems
                .iter()
                .any(|(n, r)| n == name && r.contains(reason)),
            "{credential}: {problems:?}"
        );
    }
    let ok = subscribe(&hub, with(token(json!({"accesstokentype": "Bearer"})))).await;
    assert_eq!(ok.status, 201, "{}", ok.body);
}

#[tokio::test]
async fn null_is_refused_where_a_member_may_only_be_left_out() {
    let hub = TestHub::start().await;
    for member in [
        "types",
        "source",
        "filters",
        "sinkcredential",
        "protocolsettings",
        "config",
    ] {
        let mut body = json!({"sink": "https://kvk.example.nl/events", "protocol": "HTTP"});
        body[member] = Value::Null;
        let problems = refused(subscribe(&hub, body).await);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, member);
        assert!(
            problems[0].1.contains("leave the member out"),
            "{problems:?}"
        );
    }
}

#[tokio::test]
async fn an_empty_list_of_types_is_kept_and_matches_no_event() {
    let hub = TestHub::start().await;
    let none = Sink::start().await;
    let all = Sink::start().await;
    let created = subscribe(
        &hub,
        json!({"sink": none.url, "protocol": "HTTP", "types": []}),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["types"], json!([]), "kept as sent");
    let id = created.body["id"].as_str().unwrap().to_owned();
    let read = Answer::from(
        hub.request(Method::GET, &format!("/v1/subscriptions/{id}"), tokens::KVK)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(read.body["types"], json!([]));
    let open = subscribe(&hub, json!({"sink": all.url, "protocol": "HTTP"})).await;
    assert!(open.body.get("types").is_none(), "absent stays absent");
    publish_binary(&hub, "typed-1", &[], Vec::new()).await;
    all.wait_for(1, WAIT).await;
    quiet("a delivery to `types: []`", Duration::from_millis(300)).await;
    assert!(none.deliveries().is_empty(), "`types: []` matches no type");
}

#[tokio::test]
async fn an_expired_access_token_is_never_sent() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
        "sinkcredential": {"credentialtype": "ACCESSTOKEN", "accesstoken": "short-lived",
                           "accesstokentype": "bearer", "accesstokenexpiresutc": later(2)}});
    let created = subscribe(&hub, body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_owned();
    publish_binary(&hub, "fresh-1", &[], Vec::new()).await;
    let first = sink.wait_for(1, WAIT).await;
    assert_eq!(first[0].header("authorization"), Some("Bearer short-lived"));

    tokio::time::sleep(Duration::from_millis(2500)).await;
    publish_binary(&hub, "stale-1", &[], Vec::new()).await;
    let dead = until("a dead letter", WAIT, || async {
        let answer = Answer::from(
            hub.request(
                Method::GET,
                &format!("/v1/subscriptions/{id}/dead-letters"),
                tokens::KVK,
            )
            .send()
            .await
            .unwrap(),
        )
        .await;
        match answer.body.as_array().and_then(|list| list.first()) {
            Some(first) => Ok(first.clone()),
            None => Err(answer.body),
        }
    })
    .await;
    assert!(
        dead["reason"].as_str().unwrap().contains("expired"),
        "{dead}"
    );
    assert_eq!(
        sink.deliveries().len(),
        1,
        "the expired token was never sent"
    );
}

/// The CBOR event format both ways through the hub: published as CBOR, delivered as JSON and
/// as CBOR; published as JSON, delivered as CBOR. Every attribute keeps its value and type.
#[tokio::test]
async fn cbor_in_and_out_keeps_every_attribute() {
    use knooppunt_event::format::cbor;
    use knooppunt_event::{AttributeValue, Data, EventBuilder, JsonText};

    let hub = TestHub::start().await;
    let json_sink = Sink::start().await;
    let cbor_sink = Sink::start().await;
    subscribe_sink(&hub, &json_sink, "structured").await;
    subscribe_sink(&hub, &cbor_sink, "cbor").await;

    let event = EventBuilder::new("cbor-1", SOURCE, TYPE)
        .subject("Zoë \"x\"")
        .time("2026-11-23T12:00:00.5+01:00")
        .dataschema("https://schemas.example/verhuisd.json")
        .datacontenttype("application/json")
        .extension("comexampleint", -42)
        .extension("comexamplebool", false)
        .extension("comexamplestring", "tekst")
        .data(Data::Json(
            JsonText::parse(r#"{"bsn": "999990342", "n": [1, 2.5, null]}"#).unwrap(),
        ))
        .build()
        .unwrap();
    let answer = Answer::from(
        hub.request(Method::POST, "/v1/events", tokens::PUBLISHER)
            .header("content-type", cbor::MEDIA_TYPE)
            .body(cbor::encode_event(&event).unwrap())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(answer.status, 202, "{}", answer.body);

    let as_json = json_sink.wait_for(1, WAIT).await[0].json();
    assert_eq!(as_json["comexampleint"], -42);
    assert_eq!(as_json["comexamplebool"], false);
    assert_eq!(as_json["comexamplestring"], "tekst");
    assert_eq!(as_json["time"], "2026-11-23T12:00:00.5+01:00");
    assert_eq!(
        as_json["data"],
        json!({"bsn": "999990342", "n": [1, 2.5, null]})
    );
    let delivered = cbor_sink.wait_for(1, WAIT).await.remove(0);
    assert_eq!(delivered.header("content-type"), Some(cbor::MEDIA_TYPE));
    let back = cbor::decode_event(&delivered.body).unwrap().event;
    assert!(back.is_equivalent(&event), "{back:?}\n!=\n{event:?}");
    let attributes = |e: &knooppunt_event::Event| {
        e.attributes()
            .map(|(n, v)| (n.to_owned(), format!("{v:?}")))
            .collect::<Vec<_>>()
    };
    assert_eq!(attributes(&back), attributes(&event));

    // JSON in, CBOR out.
    let published = json!({"specversion": "1.0", "id": "json-1", "source": SOURCE, "type": TYPE,
                           "comexampleflag": true, "comexamplecount": 7, "data_base64": "AAEC"});
    let answer = Answer::from(
        hub.request(Method::POST, "/v1/events", tokens::PUBLISHER)
            .header("content-type", "application/cloudevents+json")
            .body(published.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    let delivered = cbor_sink.wait_for(2, WAIT).await.remove(1);
    let back = cbor::decode_event(&delivered.body).unwrap().event;
    assert_eq!(
        back.extension("comexampleflag"),
        Some(&AttributeValue::Boolean(true))
    );
    assert_eq!(
        back.extension("comexamplecount"),
        Some(&AttributeValue::Integer(7))
    );
    assert_eq!(back.data(), Some(&Data::Binary(vec![0, 1, 2])));
}

#[tokio::test]
async fn a_malformed_cbor_event_is_refused_saying_why() {
    let hub = TestHub::start().await;
    let answer = Answer::from(
        hub.request(Method::POST, "/v1/events", tokens::PUBLISHER)
            .header("content-type", "application/cloudevents+cbor")
            .body(vec![0xa1, 0x63, b'f', b'o'])
            .send()
            .await
            .unwrap(),
    )
    .await
    .assert_problem(400);
    let text = answer.body.to_string();
    assert!(
        text.contains("cbor.syntax") && text.contains("CBOR"),
        "{text}"
    );
    // Every decoding failure is said in words, never in the decoder's debug form.
    let mut deep = vec![0x81; 300];
    deep.push(0x00);
    for (body, says) in [
        (
            vec![0xa1, 0x63, b'f', b'o'],
            "ends in the middle of a data item",
        ),
        (deep, "deeper than the 256 levels"),
        (
            vec![0xa1, 0x61, b'a', 0xe0],
            "simple value other than false, true, null",
        ),
        (
            vec![0xa1, 0x61, b'a', 0x1c],
            "not well-formed CBOR (at byte 3)",
        ),
    ] {
        let answer = hub
            .publish_raw("application/cloudevents+cbor", body.clone())
            .await
            .assert_problem(400);
        let text = answer.body.to_string();
        assert!(text.contains(says), "{body:02x?}: {text}");
        for debug in ["RecursionLimitExceeded", "Syntax(", "Semantic(", "Io("] {
            assert!(!text.contains(debug), "{body:02x?}: {text}");
        }
    }
}

/// What a subscriber could not be given as sent is refused: `"data": null` beside
/// `data_base64` (json-format.md 3.1.1: the members are mutually exclusive), and a CBOR
/// extension tagged as a URI or a timestamp whose text is neither (its tag would be lost),
/// and a CBOR body with bytes after its one data item.
#[tokio::test]
async fn an_event_a_subscriber_could_not_get_as_sent_is_refused() {
    let hub = TestHub::start().await;
    let both = json!({"specversion": "1.0", "id": "both", "source": "urn:test", "type": "t",
                      "data": null, "data_base64": "AA=="});
    let refused = hub
        .publish_raw("application/cloudevents+json", both.to_string())
        .await
        .assert_problem(400);
    assert!(
        refused.body.to_string().contains("not both"),
        "{}",
        refused.body
    );

    let tagged = |tag: u64, text: &str| {
        ciborium::value::Value::Tag(tag, Box::new(ciborium::value::Value::Text(text.into())))
    };
    let text = |s: &str| ciborium::value::Value::Text(s.into());
    for (name, value) in [
        ("comexamplelink", tagged(32, "not a uri at all")),
        ("comexamplewhen", tagged(0, "gisteren")),
    ] {
        let event = ciborium::value::Value::Map(vec![
            (text("specversion"), text("1.0")),
            (text("id"), text(name)),
            (text("source"), text("urn:test")),
            (text("type"), text("t")),
            (text(name), value),
        ]);
        let mut body = Vec::new();
        ciborium::ser::into_writer(&event, &mut body).unwrap();
        let refused = hub
            .publish_raw("application/cloudevents+cbor", body.clone())
            .await
            .assert_problem(400);
        assert!(refused.body.to_string().contains(name), "{}", refused.body);
    }
    // One CBOR data item, and nothing after it (RFC 8949 section 5.3).
    let event = ciborium::value::Value::Map(vec![
        (text("specversion"), text("1.0")),
        (text("id"), text("trailing")),
        (text("source"), text("urn:test")),
        (text("type"), text("t")),
    ]);
    let mut body = Vec::new();
    ciborium::ser::into_writer(&event, &mut body).unwrap();
    body.push(0x00);
    let refused = hub
        .publish_raw("application/cloudevents+cbor", body)
        .await
        .assert_problem(400);
    assert!(
        refused.body.to_string().contains("after the event"),
        "{}",
        refused.body
    );
}

/// Data that no delivery mode but JSON could carry unchanged (I-JSON, RFC 7493: a number
/// with a fraction or exponent beyond a double's range, an unpaired surrogate) is refused
/// in every format the hub takes, saying why; what is within those bounds reaches a
/// structured, a binary and a CBOR subscriber alike, integers beyond 64 bits as exact CBOR
/// bignums.
#[tokio::test]
async fn data_no_mode_could_carry_unchanged_is_refused_in_every_format() {
    let hub = TestHub::start().await;
    let (structured, binary, cbor) = (
        Sink::start().await,
        Sink::start().await,
        Sink::start().await,
    );
    subscribe_sink(&hub, &structured, "structured").await;
    subscribe_sink(&hub, &binary, "binary").await;
    subscribe_sink(&hub, &cbor, "cbor").await;
    let event = |id: &str, data: &str| {
        format!(
            r#"{{"specversion":"1.0","id":"{id}","source":"{SOURCE}","type":"{TYPE}","data":{data}}}"#
        )
    };
    for (data, says) in [
        (r#"{"n":1e400}"#, "IEEE 754 double"),
        (r#""\ud800x""#, "surrogate"),
        (r#"{"\udc00":true}"#, "surrogate"),
    ] {
        for (content_type, body) in [
            ("application/cloudevents+json", event("bad", data)),
            (
                "application/cloudevents-batch+json",
                format!("[{}]", event("bad", data)),
            ),
        ] {
            let refused = hub
                .publish_raw(content_type, body)
                .await
                .assert_problem(400);
            let text = refused.body.to_string();
            assert!(
                text.contains(says) && text.contains("data"),
                "{content_type} {data}: {text}"
            );
        }
        let binary_publish = hub
            .request(Method::POST, "/v1/events", tokens::PUBLISHER)
            .header("ce-specversion", "1.0")
            .header("ce-id", "bad")
            .header("ce-source", SOURCE)
            .header("ce-type", TYPE)
            .header("content-type", "application/json")
            .body(data.to_owned())
            .send()
            .await
            .unwrap();
        let refused = Answer::from(binary_publish).await.assert_problem(400);
        assert!(
            refused.body.to_string().contains(says),
            "binary {data}: {}",
            refused.body
        );
    }
    let fine = r#"{"big":1e300,"small":-1.5e-300,"u":18446744073709551615,"face":"\ud83d\ude00","n":-18446744073709551617}"#;
    assert_eq!(
        hub.publish_raw("application/cloudevents+json", event("fine", fine))
            .await
            .status,
        202
    );
    let expected: Value = serde_json::from_str(fine).unwrap();
    assert_eq!(
        structured.wait_for(1, WAIT).await[0].json()["data"],
        expected
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&binary.wait_for(1, WAIT).await[0].body).unwrap(),
        expected
    );
    let received = cbor.wait_for(1, WAIT).await.remove(0);
    let event: ciborium::value::Value = ciborium::de::from_reader(&received.body[..]).unwrap();
    let data = event
        .as_map()
        .unwrap()
        .iter()
        .find(|(k, _)| k.as_text() == Some("data"))
        .map(|(_, v)| v.clone())
        .unwrap();
    let member = |name: &str| {
        data.as_map()
            .unwrap()
            .iter()
            .find(|(k, _)| k.as_text() == Some(name))
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(member("big").as_float(), Some(1e300));
    assert_eq!(member("small").as_float(), Some(-1.5e-300));
    assert_eq!(
        member("u").as_integer().map(u64::try_from),
        Some(Ok(u64::MAX))
    );
    assert_eq!(member("face").as_text(), Some("😀"));
    assert_eq!(
        member("n"),
        ciborium::value::Value::Tag(
            3,
            Box::new(ciborium::value::Value::Bytes(vec![
                1, 0, 0, 0, 0, 0, 0, 0, 0
            ]))
        ),
        "-18446744073709551617 as a bignum: tag 3 with 2^64"
    );
}

/// An event whose attributes would make binary-mode headers past 8 KiB (what common
/// servers take) reaches a binary subscriber in structured mode, unchanged; other events
/// stay binary.
#[tokio::test]
async fn an_event_too_large_for_headers_goes_structured_to_a_binary_subscriber() {
    let hub = TestHub::start().await;
    let binary = Sink::start().await;
    subscribe_sink(&hub, &binary, "binary").await;
    let subject = "s".repeat(16 * 1024);
    let large = json!({"specversion": "1.0", "id": "large", "source": SOURCE, "type": TYPE,
                       "subject": subject, "data": {"n": 1}});
    let small = json!({"specversion": "1.0", "id": "small", "source": SOURCE, "type": TYPE,
                       "subject": "s", "data": {"n": 2}});
    for event in [&large, &small] {
        let answer = hub
            .publish_raw("application/cloudevents+json", event.to_string())
            .await;
        assert_eq!(answer.status, 202, "{}", answer.body);
    }
    let received = binary.wait_for(2, WAIT).await;
    assert_eq!(
        received[0].header("content-type"),
        Some("application/cloudevents+json")
    );
    assert_eq!(received[0].json(), large);
    assert_eq!(received[0].header("ce-subject"), None);
    assert_eq!(received[1].header("ce-id"), Some("small"));
    assert_eq!(received[1].header("ce-subject"), Some("s"));
    assert_eq!(
        serde_json::from_slice::<Value>(&received[1].body).unwrap(),
        json!({"n": 2})
    );
}
