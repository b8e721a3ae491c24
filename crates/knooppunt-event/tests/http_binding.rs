//! The HTTP protocol binding: content-mode detection and binary-mode decoding rules.

use http::HeaderMap;
use knooppunt_event::binding::http::{self as binding, ContentMode, DecodeError, Message};
use knooppunt_event::{AttributeValue, Data, Rule};

fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            http::HeaderValue::from_bytes(value).unwrap(),
        );
    }
    map
}

type Headers<'a> = &'a [(&'a str, &'a [u8])];

const REQUIRED: [(&str, &[u8]); 4] = [
    ("ce-specversion", b"1.0"),
    ("ce-id", b"1"),
    ("ce-source", b"/s"),
    ("ce-type", b"com.example.t"),
];

fn binary(extra: &[(&str, &[u8])], body: &[u8]) -> Result<knooppunt_event::Event, Vec<Rule>> {
    let all: Vec<_> = REQUIRED.iter().chain(extra).copied().collect();
    binding::decode_binary(&headers(&all), body)
        .map(|received| received.event)
        .map_err(|violations| violations.iter().map(|v| v.rule).collect())
}

#[test]
fn content_mode_detection_is_case_insensitive() {
    let detect = |value: &str| ContentMode::detect(Some(&value.parse().unwrap()));
    assert_eq!(
        detect("application/cloudevents+json"),
        ContentMode::Structured
    );
    assert_eq!(
        detect("Application/CloudEvents+JSON; charset=UTF-8"),
        ContentMode::Structured
    );
    assert_eq!(
        detect("APPLICATION/CLOUDEVENTS-BATCH+JSON"),
        ContentMode::Batched
    );
    assert_eq!(detect("application/json"), ContentMode::Binary);
    assert_eq!(detect("text/plain"), ContentMode::Binary);
    assert_eq!(ContentMode::detect(None), ContentMode::Binary);
}

#[test]
fn structured_and_batched_bodies_decode_through_the_binding() {
    let body = br#"{"specversion":"1.0","id":"1","source":"/s","type":"t"}"#;
    let structured = headers(&[(
        "content-type",
        b"application/CloudEvents+json; charset=utf-8",
    )]);
    assert!(matches!(
        binding::decode(&structured, body),
        Ok(Message::Single(_))
    ));
    let batched = headers(&[("content-type", b"application/cloudevents-batch+json")]);
    let batch = [b"[".as_slice(), body, b"]"].concat();
    assert!(
        matches!(binding::decode(&batched, &batch), Ok(Message::Batch(events)) if events.len() == 1)
    );
}

#[test]
fn other_event_formats_are_unsupported() {
    for format in [
        "application/cloudevents+avro",
        "application/cloudevents-batch+protobuf",
        "application/cloudevents",
    ] {
        let message = headers(&[("content-type", format.as_bytes())]);
        assert_eq!(
            binding::decode(&message, b"{}"),
            Err(DecodeError::UnsupportedFormat(format.into())),
            "{format}"
        );
    }
}

#[test]
fn binary_mode_attributes_come_from_percent_decoded_headers() {
    let event = binary(
        &[
            ("CE-Subject", b"Euro%20%e2%82%ac%20%F0%9F%98%80"),
            ("ce-quoted", b"\"hello world\""),
            ("ce-count", b"5"),
            ("content-type", b"text/plain; charset=utf-8"),
        ],
        b"hello",
    )
    .unwrap();
    assert_eq!(event.subject(), Some("Euro € 😀"));
    assert_eq!(
        event.extension("quoted"),
        Some(&AttributeValue::String("hello world".into()))
    );
    assert_eq!(
        event.extension("count"),
        Some(&AttributeValue::String("5".into()))
    );
    assert_eq!(event.datacontenttype(), Some("text/plain; charset=utf-8"));
    assert_eq!(event.data(), Some(&Data::Text("hello".into())));
}

#[test]
fn binary_mode_rejections() {
    let cases: &[(Headers, &[u8], Rule)] = &[
        (&[("ce-subject", b"%C0%A0")], b"", Rule::HeaderEncoding),
        (&[("ce-subject", b"50%")], b"", Rule::HeaderEncoding),
        (&[("ce-subject", b"%0A")], b"", Rule::StringCharacters),
        (
            &[("ce-datacontenttype", b"text/plain")],
            b"",
            Rule::DataContentTypeHeader,
        ),
        (&[("ce-id", b"2")], b"", Rule::DuplicateAttribute),
        (&[("ce-my_ext", b"x")], b"", Rule::AttributeName),
        (&[("ce-data", b"x")], b"", Rule::AttributeName),
        (&[("ce-time", b"today")], b"", Rule::Timestamp),
        (
            &[("content-type", b"application/json")],
            b"{not json",
            Rule::DataNotJson,
        ),
        (
            &[("content-type", b"application/json")],
            b"1 2",
            Rule::DataNotJson,
        ),
        (
            &[("content-type", b"not-a-media-type")],
            b"x",
            Rule::MediaType,
        ),
    ];
    for (extra, body, rule) in cases {
        assert_eq!(binary(extra, body), Err(vec![*rule]), "{extra:?}");
    }
    let missing = binding::decode_binary(&headers(&[("ce-id", b"1")]), b"").unwrap_err();
    let mut rules: Vec<_> = missing.iter().map(|v| v.attribute.as_str()).collect();
    rules.sort();
    assert_eq!(rules, ["source", "specversion", "type"]);
}

#[test]
fn binary_mode_data_by_content_type() {
    let json = binary(
        &[("content-type", b"application/vnd.api+json")],
        b" {\"a\": 1.0} ",
    )
    .unwrap();
    assert!(matches!(json.data(), Some(Data::Json(text)) if text.as_str() == "{\"a\": 1.0}"));
    let xml = binary(&[("content-type", b"application/xml")], b"<x/>").unwrap();
    assert_eq!(xml.data(), Some(&Data::Text("<x/>".into())));
    let png = binary(&[("content-type", b"image/png")], &[0x89, b'P']).unwrap();
    assert_eq!(png.data(), Some(&Data::Binary(vec![0x89, b'P'])));
    let latin1 = binary(&[("content-type", b"text/plain")], &[0xE9]).unwrap();
    assert_eq!(
        latin1.data(),
        Some(&Data::Binary(vec![0xE9])),
        "non-UTF-8 text stays bytes"
    );
    let untyped = binary(&[], b"{}").unwrap();
    assert_eq!(
        untyped.data(),
        Some(&Data::Binary(b"{}".to_vec())),
        "no content type, no assumptions"
    );
    assert_eq!(binary(&[], b"").unwrap().data(), None);
}

#[test]
fn binary_encoding_writes_canonical_strings() {
    let event = knooppunt_event::EventBuilder::new("1", "/s", "t")
        .extension("count", 5)
        .extension("flag", true)
        .extension("negative", -12)
        .build()
        .unwrap();
    let message = binding::encode_binary(&event);
    assert_eq!(message.headers["ce-count"], "5");
    assert_eq!(message.headers["ce-flag"], "true");
    assert_eq!(message.headers["ce-negative"], "-12");
    assert_eq!(message.headers["ce-specversion"], "1.0");
    assert!(message.headers.get("content-type").is_none());
}
