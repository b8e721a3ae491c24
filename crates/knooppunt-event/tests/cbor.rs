//! The CBOR event format, case by case from its type mapping table
//! (`specs/seeds/002_a8ab26b7d73e570e.txt`, section 2.2).

use ciborium::value::{Integer, Value};
use knooppunt_event::format::cbor;
use knooppunt_event::{AttributeValue, Data, EventBuilder, JsonText};

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn tagged(tag: u64, s: &str) -> Value {
    Value::Tag(tag, Box::new(text(s)))
}

fn encode(members: Vec<(&str, Value)>) -> Vec<u8> {
    let map = Value::Map(members.into_iter().map(|(k, v)| (text(k), v)).collect());
    let mut out = Vec::new();
    ciborium::ser::into_writer(&map, &mut out).unwrap();
    out
}

fn required() -> Vec<(&'static str, Value)> {
    vec![
        ("specversion", text("1.0")),
        ("id", text("cbor-1")),
        (
            "source",
            tagged(32, "urn:nld:oin:00000001823288444000:systeem:BRP"),
        ),
        ("type", text("nl.brp.persoon-verhuisd")),
    ]
}

fn decoded_map(bytes: &[u8]) -> Vec<(String, Value)> {
    let Value::Map(members) = ciborium::de::from_reader(bytes).unwrap() else {
        panic!("not a map");
    };
    members
        .into_iter()
        .map(|(k, v)| (k.into_text().unwrap(), v))
        .collect()
}

#[test]
fn every_type_of_the_mapping_table_is_read() {
    let mut members = required();
    members.extend([
        ("time", tagged(0, "2026-11-23T12:00:00+01:00")),
        (
            "dataschema",
            tagged(32, "https://schemas.example/verhuisd.json"),
        ),
        ("subject", text("999990342")),
        ("datacontenttype", text("application/json")),
        ("comexampleyes", Value::Bool(true)),
        ("comexampleno", Value::Bool(false)),
        ("comexamplecount", Value::Integer(Integer::from(42))),
        ("comexampledelta", Value::Integer(Integer::from(-7))),
        ("comexamplebytes", Value::Bytes(vec![0, 1, 2, 255])),
        ("comexampleuri", tagged(32, "https://example.nl/x")),
        ("comexampletime", tagged(0, "2026-01-01T00:00:00Z")),
        ("comexampleunset", Value::Null),
        ("data", Value::Map(vec![(text("bsn"), text("999990342"))])),
    ]);
    let event = cbor::decode_event(&encode(members)).unwrap().event;
    assert_eq!(
        event.source(),
        "urn:nld:oin:00000001823288444000:systeem:BRP"
    );
    assert_eq!(event.time(), Some("2026-11-23T12:00:00+01:00"));
    assert_eq!(
        event.dataschema(),
        Some("https://schemas.example/verhuisd.json")
    );
    assert_eq!(event.subject(), Some("999990342"));
    let ext = |name| event.extension(name).cloned();
    assert_eq!(ext("comexampleyes"), Some(AttributeValue::Boolean(true)));
    assert_eq!(ext("comexampleno"), Some(AttributeValue::Boolean(false)));
    assert_eq!(ext("comexamplecount"), Some(AttributeValue::Integer(42)));
    assert_eq!(ext("comexampledelta"), Some(AttributeValue::Integer(-7)));
    assert_eq!(
        ext("comexamplebytes"),
        Some(AttributeValue::String("AAEC/w==".into()))
    );
    assert_eq!(
        ext("comexampleuri"),
        Some(AttributeValue::String("https://example.nl/x".into()))
    );
    assert_eq!(
        ext("comexampletime"),
        Some(AttributeValue::String("2026-01-01T00:00:00Z".into()))
    );
    assert_eq!(ext("comexampleunset"), None, "null is unset");
    assert_eq!(
        event.data().map(|d| match d {
            Data::Json(json) => json.to_value().unwrap(),
            other => panic!("{other:?}"),
        }),
        Some(serde_json::json!({"bsn": "999990342"}))
    );
}

#[test]
fn untagged_text_is_accepted_for_uris_and_timestamps() {
    let mut members = required();
    members[2].1 = text("/sensors/tn-1");
    members.push(("time", text("2026-11-23T11:00:00Z")));
    let event = cbor::decode_event(&encode(members)).unwrap().event;
    assert_eq!(event.source(), "/sensors/tn-1");
    assert_eq!(event.time(), Some("2026-11-23T11:00:00Z"));
}

#[test]
fn events_are_written_with_the_tables_types() {
    let event = EventBuilder::new(
        "w-1",
        "urn:nld:oin:00000001823288444000:systeem:BRP",
        "nl.x",
    )
    .time("2026-11-23T12:00:00Z")
    .dataschema("https://schemas.example/x.json")
    .extension("comexampleflag", true)
    .extension("comexampleoff", false)
    .extension("comexamplecount", -3)
    .extension("comexamplename", "Zoë")
    .data(Data::Binary(vec![1, 2, 3]))
    .build()
    .unwrap();
    let bytes = cbor::encode_event(&event).unwrap();
    let members = decoded_map(&bytes);
    let get = |name: &str| {
        members
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get("source"), Some(tagged(32, event.source())));
    assert_eq!(
        get("dataschema"),
        Some(tagged(32, "https://schemas.example/x.json"))
    );
    assert_eq!(get("time"), Some(tagged(0, "2026-11-23T12:00:00Z")));
    assert_eq!(get("comexampleflag"), Some(Value::Bool(true)));
    assert_eq!(
        get("comexamplecount"),
        Some(Value::Integer(Integer::from(-3)))
    );
    assert_eq!(get("comexamplename"), Some(text("Zoë")));
    assert_eq!(get("data"), Some(Value::Bytes(vec![1, 2, 3])));
    // On the wire: true is simple value 21 (0xf5), false 20 (0xf4), -3 major type 1 (0x22),
    // tag 32 is 0xd8 0x20 and tag 0 is 0xc0.
    let contains = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    assert!(contains(b"flag\xf5"));
    assert!(contains(b"off\xf4"));
    assert!(contains(b"count\x22"));
    assert!(contains(b"source\xd8\x20"));
    assert!(contains(b"time\xc0"));
}

#[test]
fn json_data_becomes_native_cbor_values_and_text_stays_text() {
    let json = EventBuilder::new("d-1", "/s", "nl.x")
        .data(Data::Json(
            JsonText::parse(r#"{"n": 1, "f": 1.5, "l": [true, null]}"#).unwrap(),
        ))
        .build()
        .unwrap();
    let members = decoded_map(&cbor::encode_event(&json).unwrap());
    let data = members.iter().find(|(n, _)| n == "data").unwrap().1.clone();
    assert_eq!(
        data,
        Value::Map(vec![
            (text("f"), Value::Float(1.5)),
            (
                text("l"),
                Value::Array(vec![Value::Bool(true), Value::Null])
            ),
            (text("n"), Value::Integer(Integer::from(1))),
        ])
    );
    // The JSON format implied its type; CBOR says it (json-format.md §3.1.2).
    let content_type = members
        .iter()
        .find(|(n, _)| n == "datacontenttype")
        .map(|(_, v)| v.clone());
    assert_eq!(content_type, Some(text("application/json")));
    let bare = EventBuilder::new("d-0", "/s", "nl.x").build().unwrap();
    let members = decoded_map(&cbor::encode_event(&bare).unwrap());
    assert!(
        members.iter().all(|(n, _)| n != "datacontenttype"),
        "no data, nothing implied"
    );
    let xml = EventBuilder::new("d-2", "/s", "nl.x")
        .datacontenttype("application/xml")
        .data(Data::Text("<a/>".into()))
        .build()
        .unwrap();
    let back = cbor::decode_event(&cbor::encode_event(&xml).unwrap())
        .unwrap()
        .event;
    assert_eq!(back.data(), Some(&Data::Text("<a/>".into())));
}

#[test]
fn what_the_mapping_cannot_carry_is_refused_with_the_attribute_named() {
    let not_a_map = {
        let mut out = Vec::new();
        ciborium::ser::into_writer(&Value::Array(vec![]), &mut out).unwrap();
        out
    };
    let cases: Vec<(Vec<u8>, &str, &str)> = vec![
        (not_a_map, "", "map"),
        (b"\xff\x00".to_vec(), "", "CBOR"),
        // One item and then more: not one item (RFC 8949 section 5.3).
        (
            {
                let mut bytes = encode(required());
                bytes.extend_from_slice(&[0x01, 0x02]);
                bytes
            },
            "",
            "2 bytes after",
        ),
        (
            {
                let mut m = required();
                m.push(("comexamplefloat", Value::Float(1.5)));
                encode(m)
            },
            "comexamplefloat",
            "a float",
        ),
        (
            {
                let mut m = required();
                m[2].1 = tagged(0, "2026-01-01T00:00:00Z");
                encode(m)
            },
            "source",
            "tag 32",
        ),
        // An extension's tag says what its text is: it must be one.
        (
            {
                let mut m = required();
                m.push(("comexamplelink", tagged(32, "not a uri at all")));
                encode(m)
            },
            "comexamplelink",
            "tagged 32 (URI)",
        ),
        (
            {
                let mut m = required();
                m.push(("comexamplewhen", tagged(0, "yesterday")));
                encode(m)
            },
            "comexamplewhen",
            "tagged 0 (timestamp)",
        ),
        (
            {
                let mut m = required();
                m.push(("time", tagged(0, "not a date")));
                encode(m)
            },
            "time",
            "RFC 3339",
        ),
        (
            {
                let mut m = required();
                m.push((
                    "data",
                    Value::Map(vec![(Value::Integer(Integer::from(1)), text("x"))]),
                ));
                encode(m)
            },
            "data",
            "text keys",
        ),
        (
            {
                let mut m = required();
                m.push(("datacontenttype", text("text/plain")));
                m.push(("data", Value::Integer(Integer::from(5))));
                encode(m)
            },
            "data",
            "byte string",
        ),
    ];
    for (bytes, attribute, detail) in cases {
        let violations = cbor::decode_event(&bytes).unwrap_err();
        let text = format!("{violations:?}");
        assert!(
            violations
                .iter()
                .any(|v| v.attribute == attribute && v.detail.contains(detail)),
            "{attribute}/{detail}: {text}"
        );
    }
}

#[test]
fn extension_types_survive_cbor_to_cbor_also_through_the_json_form() {
    use knooppunt_event::ExtensionType;
    use knooppunt_event::format::json;
    let mut members = required();
    members.extend([
        ("comexampleuri", tagged(32, "https://example.nl/a?b=c")),
        ("comexampletime", tagged(0, "2026-11-23T12:00:00Z")),
        ("comexamplebytes", Value::Bytes(vec![0, 1, 2, 255])),
        ("comexampletext", text("plain")),
    ]);
    let bytes = encode(members);
    let event = cbor::decode_event(&bytes).unwrap().event;
    assert_eq!(
        event.extension_type("comexampleuri"),
        Some(ExtensionType::Uri)
    );
    assert_eq!(
        event.extension_type("comexampletime"),
        Some(ExtensionType::Timestamp)
    );
    assert_eq!(
        event.extension_type("comexamplebytes"),
        Some(ExtensionType::Binary)
    );
    assert_eq!(event.extension_type("comexampletext"), None);

    let expect_types = |bytes: &[u8]| {
        let map = decoded_map(bytes);
        let get = |name: &str| map.iter().find(|(k, _)| k == name).unwrap().1.clone();
        assert_eq!(get("comexampleuri"), tagged(32, "https://example.nl/a?b=c"));
        assert_eq!(get("comexampletime"), tagged(0, "2026-11-23T12:00:00Z"));
        assert_eq!(get("comexamplebytes"), Value::Bytes(vec![0, 1, 2, 255]));
        assert_eq!(get("comexampletext"), text("plain"));
    };
    expect_types(&cbor::encode_event(&event).unwrap());

    // The store keeps the JSON form, which writes them all as strings, and the types beside
    // it: together they give the CBOR back.
    let stored_json = json::encode_event(&event);
    let types = event.extension_types_text().unwrap();
    let from_store = json::decode_event(stored_json.as_bytes())
        .unwrap()
        .event
        .with_extension_types_text(&types);
    assert_eq!(from_store, event);
    expect_types(&cbor::encode_event(&from_store).unwrap());

    // Types that do not fit the value, or for no such extension, change nothing.
    let plain = json::decode_event(stored_json.as_bytes()).unwrap().event;
    let odd = plain.clone().with_extension_types_text(
        r#"{"comexampletext":"binary","missing":"uri","comexampleuri":"timestamp"}"#,
    );
    assert_eq!(odd.extension_type("comexampleuri"), None);
    assert_eq!(odd.extension_type("missing"), None);
    assert_eq!(plain.clone().with_extension_types_text("not json"), plain);
}

/// JSON integers beyond 64 bits reach a CBOR subscriber exactly, as bignums (RFC 8949
/// §3.4.3: tag 2 with the magnitude, tag 3 with -1 - n), everything around them as ever.
#[test]
fn integers_beyond_64_bits_become_exact_bignums() {
    let data = r#"{"big": 18446744073709551616, "neg": -18446744073709551617,
        "huge": 1234567890123456789012345678901234567890, "small": [1, -2, 2.5, "t\"x\u00e9"],
        "max": 18446744073709551615, "ok": true, "none": null}"#;
    let event = EventBuilder::new("1", "urn:test", "t")
        .data(Data::Json(JsonText::parse(data).unwrap()))
        .build()
        .unwrap();
    let bytes = cbor::encode_event(&event).unwrap();
    let decoded: Value = ciborium::de::from_reader(&bytes[..]).unwrap();
    let data = decoded
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
    let bignum = |tag: u64, hex: &str| {
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        Value::Tag(tag, Box::new(Value::Bytes(bytes)))
    };
    assert_eq!(member("big"), bignum(2, "010000000000000000"));
    assert_eq!(member("neg"), bignum(3, "010000000000000000"));
    // 1234567890123456789012345678901234567890 = 0x3A0C92075C0DBF3B8ACBC5F96CE3F0AD2
    assert_eq!(
        member("huge"),
        bignum(2, "03a0c92075c0dbf3b8acbc5f96ce3f0ad2")
    );
    assert_eq!(
        member("small"),
        Value::Array(vec![
            Value::Integer(Integer::from(1)),
            Value::Integer(Integer::from(-2)),
            Value::Float(2.5),
            text("t\"xé"),
        ])
    );
    assert_eq!(member("max"), Value::Integer(Integer::from(u64::MAX)));
    assert_eq!(member("ok"), Value::Bool(true));
    assert_eq!(member("none"), Value::Null);
}
