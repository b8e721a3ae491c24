//! Property tests: any valid event survives every trip between the JSON format and the HTTP
//! content modes.

use knooppunt_event::binding::http::{self as binding, Message};
use knooppunt_event::format::{cbor, json};
use knooppunt_event::{
    AttributeValue, CORE_ATTRIBUTES, Data, Event, EventBuilder, JsonText, ReceivedEvent,
};
use proptest::prelude::*;

/// Strings CloudEvents allows: no control characters, surrogates or unassigned code points,
/// with the characters that need percent-encoding well represented.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[^\\p{Cc}\\p{Cn}]{1,16}",
        "[ a-zA-Z0-9%\"€😀é\\\\]{1,12}",
        Just("Euro € 😀".to_owned()),
    ]
}

fn source() -> impl Strategy<Value = String> {
    prop_oneof![
        "urn:nld:oin:[0-9]{20}:systeem:[A-Za-z0-9-]{1,10}",
        "https://[a-z]{1,8}\\.example/[a-z0-9/]{0,12}",
        "/[a-z0-9-]{1,8}(/[a-z0-9-]{1,8}){0,2}",
        Just("1-555-123-4567".to_owned()),
        Just("urn:nld:gemeente-Bergen%20%28L%29.burgerzakensysteem".to_owned()),
    ]
}

fn time() -> impl Strategy<Value = String> {
    (
        1970u32..2100,
        1u32..=12,
        1u32..=28,
        0u32..24,
        0u32..60,
        0u32..60,
        proptest::option::of("[0-9]{1,9}"),
        prop_oneof![
            Just("Z".to_owned()),
            Just("z".to_owned()),
            "[+-](0[0-9]|1[0-4]):[0-5][0-9]"
        ],
    )
        .prop_map(|(y, mo, d, h, mi, s, fraction, offset)| {
            let fraction = fraction.map(|f| format!(".{f}")).unwrap_or_default();
            format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{fraction}{offset}")
        })
}

fn extension_value() -> impl Strategy<Value = AttributeValue> {
    prop_oneof![
        text().prop_map(AttributeValue::String),
        any::<i32>().prop_map(AttributeValue::Integer),
        any::<bool>().prop_map(AttributeValue::Boolean),
    ]
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(serde_json::Value::from),
        (-1e9f64..1e9).prop_map(serde_json::Value::from),
        text().prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Data together with a content type that fits it.
fn data() -> impl Strategy<Value = (Option<&'static str>, Option<Data>)> {
    let json = (
        prop::sample::select(vec![
            None,
            Some("application/json"),
            Some("application/vnd.nl+json"),
        ]),
        json_value(),
    )
        .prop_map(|(ct, value)| (ct, Some(Data::Json(JsonText::from_value(&value)))));
    let text_data = (
        prop::sample::select(vec![
            "text/plain",
            "application/xml",
            "text/csv; charset=utf-8",
        ]),
        text(),
    )
        .prop_map(|(ct, text)| (Some(ct), Some(Data::Text(text))));
    let binary = (
        prop::sample::select(vec![
            None,
            Some("application/octet-stream"),
            Some("image/png"),
        ]),
        prop::collection::vec(any::<u8>(), 1..64),
    )
        .prop_map(|(ct, bytes)| (ct, Some(Data::Binary(bytes))));
    prop_oneof![Just((None, None)), json, text_data, binary]
}

fn event() -> impl Strategy<Value = Event> {
    let extension_name = "[a-z][a-z0-9]{0,10}".prop_filter("not a core attribute", |name| {
        name != "data" && !CORE_ATTRIBUTES.contains(&name.as_str())
    });
    (
        text(),
        source(),
        "[a-z]{2,3}(\\.[a-z0-9_-]{1,8}){1,4}",
        proptest::option::of(text()),
        proptest::option::of(time()),
        proptest::option::of("https://schemas\\.example/[a-z]{1,8}\\.json"),
        prop::collection::btree_map(extension_name, extension_value(), 0..4),
        data(),
    )
        .prop_map(
            |(id, source, ty, subject, time, schema, extensions, (content_type, data))| {
                let mut builder = EventBuilder::new(id, source, ty);
                if let Some(subject) = subject {
                    builder = builder.subject(subject);
                }
                if let Some(time) = time {
                    builder = builder.time(time);
                }
                if let Some(schema) = schema {
                    builder = builder.dataschema(schema);
                }
                if let Some(content_type) = content_type {
                    builder = builder.datacontenttype(content_type);
                }
                for (name, value) in extensions {
                    builder = builder.extension(name, value);
                }
                if let Some(data) = data {
                    builder = builder.data(data);
                }
                builder
                    .build()
                    .expect("the strategy only makes valid events")
            },
        )
}

fn single(message: Message) -> ReceivedEvent {
    match message {
        Message::Single(event) => *event,
        Message::Batch(_) => panic!("expected a single event"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// JSON format → event is exact: every attribute keeps its value and JSON type.
    #[test]
    fn json_format_round_trip_is_exact(event in event()) {
        let encoded = json::encode_event(&event);
        let decoded = json::decode_event(encoded.as_bytes()).unwrap();
        prop_assert_eq!(&decoded.event, &event);
        prop_assert_eq!(decoded.json.as_deref(), Some(encoded.as_str()));
    }

    /// CBOR format → event keeps every attribute with its type (String, Integer, Boolean;
    /// URI and Timestamp as tagged text), and the data: bytes, text, or the same JSON value;
    /// JSON data without a `datacontenttype` gains its implied `application/json`.
    #[test]
    fn cbor_format_round_trip_is_lossless(event in event()) {
        let encoded = cbor::encode_event(&event).unwrap();
        let decoded = cbor::decode_event(&encoded).unwrap().event;
        let attributes = |e: &Event| {
            e.attributes().map(|(n, v)| (n.to_owned(), v.to_string(), format!("{v:?}"))).collect::<Vec<_>>()
        };
        // JSON data's implied type is said in CBOR (json-format.md §3.1.2); nothing else is
        // added or lost.
        let mut expected = attributes(&event);
        if event.datacontenttype().is_none() && matches!(event.data(), Some(Data::Json(_))) {
            let implied = "application/json";
            expected.push(("datacontenttype".into(), implied.into(), format!("String({implied:?})")));
        }
        let mut found = attributes(&decoded);
        found.sort();
        expected.sort();
        prop_assert_eq!(found, expected);
        prop_assert!(decoded.is_equivalent(&event), "{:?}\n!=\n{:?}", decoded, event);
        let value = |e: &Event| match e.data() {
            Some(Data::Json(json)) => Some(json.to_value().unwrap()),
            _ => None,
        };
        prop_assert_eq!(value(&decoded), value(&event));
        prop_assert_eq!(cbor::encode_event(&decoded).unwrap(), encoded, "stable");
    }

    /// JSON → CBOR → JSON is the same event, and so is CBOR → JSON → CBOR.
    #[test]
    fn json_and_cbor_convert_both_ways(event in event()) {
        let json_text = json::encode_event(&event);
        let from_json = json::decode_event(json_text.as_bytes()).unwrap().event;
        let through_cbor = cbor::decode_event(&cbor::encode_event(&from_json).unwrap()).unwrap().event;
        let back = json::decode_event(json::encode_event(&through_cbor).as_bytes()).unwrap().event;
        prop_assert!(back.is_equivalent(&event));
        let cbor_bytes = cbor::encode_event(&event).unwrap();
        let via_json = json::decode_event(
            json::encode_event(&cbor::decode_event(&cbor_bytes).unwrap().event).as_bytes(),
        )
        .unwrap()
        .event;
        prop_assert_eq!(cbor::encode_event(&via_json).unwrap(), cbor_bytes);
    }

    /// structured → binary → structured is the same event.
    #[test]
    fn structured_binary_structured(event in event()) {
        let structured = binding::encode_structured(&ReceivedEvent::from(event.clone()));
        let first = single(binding::decode(&structured.headers, &structured.body).unwrap());
        prop_assert_eq!(&first.event, &event);

        let binary = binding::encode_binary(&first.event);
        let second = single(binding::decode(&binary.headers, &binary.body).unwrap());
        prop_assert!(second.event.is_equivalent(&event), "{:?}\n!=\n{:?}", second.event, event);

        let again = binding::encode_structured(&second);
        let third = single(binding::decode(&again.headers, &again.body).unwrap());
        prop_assert_eq!(&third.event, &second.event);
        prop_assert!(third.event.is_equivalent(&event));
    }

    /// What binary mode can carry, it carries exactly: strings stay strings, data stays bytes.
    #[test]
    fn binary_round_trip_is_stable(event in event()) {
        let first = binding::encode_binary(&event);
        let decoded = binding::decode_binary(&first.headers, &first.body).unwrap().event;
        let second = binding::encode_binary(&decoded);
        prop_assert_eq!(&first, &second);
        for (name, value) in event.extensions() {
            prop_assert_eq!(
                decoded.extension(name),
                Some(&AttributeValue::String(value.to_string()))
            );
        }
        prop_assert_eq!(decoded.time(), event.time());
    }

    /// A batch carries its events' original JSON text.
    #[test]
    fn batch_round_trip(events in prop::collection::vec(event(), 0..5)) {
        let received: Vec<ReceivedEvent> = events.iter().cloned().map(ReceivedEvent::from).collect();
        let message = binding::encode_batch(&received);
        let Message::Batch(back) = binding::decode(&message.headers, &message.body).unwrap() else {
            panic!("expected a batch");
        };
        let back: Vec<Event> = back.into_iter().map(|event| event.unwrap().event).collect();
        prop_assert_eq!(back, events);
    }
}
