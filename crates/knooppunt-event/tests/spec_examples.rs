//! The examples of json-format.md and http-protocol-binding.md, decoded and re-encoded.

use http::HeaderMap;
use http::header::CONTENT_TYPE;
use knooppunt_event::binding::http::{self as binding, Message};
use knooppunt_event::format::json;
use knooppunt_event::{AttributeValue, Data, EventBuilder};

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|value| value.to_str().unwrap())
}

/// The `ce-` headers and Content-Type of a binary-mode message, sorted.
fn binary_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    let mut pairs: Vec<_> = headers
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
        .collect();
    pairs.sort();
    pairs
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut pairs: Vec<_> = expected
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    pairs.sort();
    pairs
}

#[test]
fn xml_string_data_with_a_null_extension() {
    let text = r#"{
        "specversion" : "1.0",
        "type" : "com.example.someevent",
        "source" : "/mycontext",
        "id" : "B234-1234-1234",
        "time" : "2018-04-05T17:31:00Z",
        "comexampleextension1" : "value",
        "comexampleothervalue" : 5,
        "unsetextension": null,
        "datacontenttype" : "application/xml",
        "data" : "<much wow=\"xml\"/>"
    }"#;
    let received = json::decode_event(text.as_bytes()).unwrap();
    let event = &received.event;
    assert_eq!(
        event.data(),
        Some(&Data::Text(r#"<much wow="xml"/>"#.into()))
    );
    assert_eq!(
        event.extension("comexampleothervalue"),
        Some(&AttributeValue::Integer(5))
    );
    assert_eq!(event.extension("unsetextension"), None, "null means unset");

    let message = binding::encode_binary(event);
    assert_eq!(
        binary_headers(&message.headers),
        pairs(&[
            ("ce-specversion", "1.0"),
            ("ce-type", "com.example.someevent"),
            ("ce-source", "/mycontext"),
            ("ce-id", "B234-1234-1234"),
            ("ce-time", "2018-04-05T17:31:00Z"),
            ("ce-comexampleextension1", "value"),
            ("ce-comexampleothervalue", "5"),
            ("content-type", "application/xml"),
        ])
    );
    assert_eq!(message.body, br#"<much wow="xml"/>"#);
}

#[test]
fn json_object_data_goes_into_the_body_as_written() {
    let text = r#"{
        "specversion" : "1.0",
        "type" : "com.example.someevent",
        "source" : "/mycontext",
        "subject": null,
        "id" : "C234-1234-1234",
        "time" : "2018-04-05T17:31:00Z",
        "comexampleextension1" : "value",
        "comexampleothervalue" : 5,
        "datacontenttype" : "application/json",
        "data" : {
            "appinfoA" : "abc",
            "appinfoB" : 123,
            "appinfoC" : true
        }
    }"#;
    let received = json::decode_event(text.as_bytes()).unwrap();
    assert_eq!(received.event.subject(), None);
    let message = binding::encode_binary(&received.event);
    assert_eq!(
        header(&message.headers, "content-type"),
        Some("application/json")
    );
    let body = std::str::from_utf8(&message.body).unwrap();
    assert!(
        body.starts_with("{\n            \"appinfoA\" : \"abc\""),
        "{body}"
    );
    let reparsed: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        reparsed,
        serde_json::json!({"appinfoA": "abc", "appinfoB": 123, "appinfoC": true})
    );
}

#[test]
fn number_data() {
    let text = r#"{"specversion":"1.0","type":"com.example.someevent","source":"/mycontext",
        "id":"C234-1234-1234","datacontenttype":"application/json","data":1.5}"#;
    let event = json::decode_event(text.as_bytes()).unwrap().event;
    let message = binding::encode_binary(&event);
    assert_eq!(message.body, b"1.5");
}

#[test]
fn json_string_data_without_datacontenttype_is_never_parsed_again() {
    let text = r#"{"specversion":"1.0","type":"com.example.someevent","source":"/mycontext",
        "id":"D234-1234-1234","data":"I'm just a string"}"#;
    let event = json::decode_event(text.as_bytes()).unwrap().event;
    match event.data() {
        Some(Data::Json(json)) => assert_eq!(json.as_str(), r#""I'm just a string""#),
        other => panic!("expected JSON data, got {other:?}"),
    }
    assert_eq!(event.datacontenttype(), None);
    let message = binding::encode_binary(&event);
    assert_eq!(
        header(&message.headers, "content-type"),
        Some("application/json"),
        "the implied content type is set explicitly"
    );
    assert_eq!(message.body, br#""I'm just a string""#);

    let json_in_a_string = r#"{"specversion":"1.0","type":"t","source":"/s","id":"1",
        "data":"{\"a\":1}"}"#;
    let event = json::decode_event(json_in_a_string.as_bytes())
        .unwrap()
        .event;
    assert_eq!(binding::encode_binary(&event).body, br#""{\"a\":1}""#);
}

#[test]
fn binary_data_without_datacontenttype_has_no_content_type() {
    let text = r#"{"specversion":"1.0","type":"com.example.someevent","source":"/mycontext",
        "id":"D234-1234-1234","data_base64":"eyAieHl6IjogMTIzIH0="}"#;
    let event = json::decode_event(text.as_bytes()).unwrap().event;
    assert_eq!(
        event.data(),
        Some(&Data::Binary(br#"{ "xyz": 123 }"#.to_vec()))
    );
    let message = binding::encode_binary(&event);
    assert_eq!(message.headers.get(CONTENT_TYPE), None);
    assert_eq!(message.body, br#"{ "xyz": 123 }"#);

    let Message::Single(back) = binding::decode(&message.headers, &message.body).unwrap() else {
        panic!("a binary message carries one event");
    };
    assert_eq!(
        back.event, event,
        "no content type is inferred on the way back"
    );
}

#[test]
fn binary_data_with_a_content_type() {
    let text = r#"{"specversion":"1.0","type":"com.example.someevent","source":"/mycontext",
        "id":"A234-1234-1234","time":"2018-04-05T17:31:00Z","comexampleextension1":"value",
        "comexampleothervalue":5,"datacontenttype":"application/vnd.apache.thrift.binary",
        "data_base64":"AAECAwT/"}"#;
    let event = json::decode_event(text.as_bytes()).unwrap().event;
    let message = binding::encode_binary(&event);
    assert_eq!(
        header(&message.headers, "content-type"),
        Some("application/vnd.apache.thrift.binary")
    );
    assert_eq!(message.body, [0, 1, 2, 3, 4, 255]);
    assert!(json::encode_event(&event).ends_with(r#""data_base64":"AAECAwT/"}"#));
}

#[test]
fn null_data_is_an_explicit_null_payload() {
    let text = r#"{"specversion":"1.0","type":"t","source":"/s","id":"1","data":null}"#;
    let event = json::decode_event(text.as_bytes()).unwrap().event;
    assert!(matches!(event.data(), Some(Data::Json(json)) if json.as_str() == "null"));
    assert!(json::encode_event(&event).ends_with(r#""data":null}"#));
    assert_eq!(binding::encode_binary(&event).body, b"null");
}

#[test]
fn structured_events_keep_their_exact_json_text() {
    let text = r#"{ "id":"1", "specversion":"1.0", "source":"/s", "type":"t",
        "time":"2018-04-05T19:31:00.1200+02:00", "big": 1, "flag": true,
        "data": {"amount": 1.50, "huge": 123456789012345678901234567890} }"#;
    let received = json::decode_event(format!("  {text}\n").as_bytes()).unwrap();
    assert_eq!(received.json.as_deref(), Some(text));
    assert_eq!(received.to_json(), text);
    assert_eq!(
        received.event.time(),
        Some("2018-04-05T19:31:00.1200+02:00")
    );
}

#[test]
fn re_encoding_keeps_extension_json_types() {
    let text = r#"{"specversion":"1.0","type":"com.github.pull_request.opened",
        "source":"https://github.com/cloudevents/spec/pull","subject":"123","id":"A234-1234-1234",
        "time":"2018-04-05T17:31:00Z","comexampleextension1":"value","comexampleothervalue":5,
        "negative":-7,"flag":false,"numeric":"5","datacontenttype":"text/xml",
        "data":"<much wow=\"xml\"/>"}"#;
    let event = json::decode_event(text.as_bytes()).unwrap().event;
    let encoded = json::encode_event(&event);
    let value: serde_json::Value = serde_json::from_str(&encoded).unwrap();
    assert_eq!(value["comexampleothervalue"], serde_json::json!(5));
    assert_eq!(value["negative"], serde_json::json!(-7));
    assert_eq!(value["flag"], serde_json::json!(false));
    assert_eq!(value["numeric"], serde_json::json!("5"));
    assert_eq!(json::decode_event(encoded.as_bytes()).unwrap().event, event);
}

#[test]
fn binary_mode_extensions_are_strings_in_structured_mode() {
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("ce-specversion", "1.0"),
        ("ce-type", "com.example.someevent"),
        ("ce-source", "/mycontext"),
        ("ce-id", "B234-1234-1234"),
        ("ce-comexampleothervalue", "5"),
        ("content-type", "application/xml"),
    ] {
        headers.insert(name, value.parse().unwrap());
    }
    let received = binding::decode_binary(&headers, br#"<much wow="xml"/>"#).unwrap();
    assert_eq!(received.json, None);
    let value: serde_json::Value = serde_json::from_str(&received.to_json()).unwrap();
    assert_eq!(value["comexampleothervalue"], serde_json::json!("5"));
    assert_eq!(
        value["datacontenttype"],
        serde_json::json!("application/xml")
    );
    assert_eq!(value["data"], serde_json::json!(r#"<much wow="xml"/>"#));
}

#[test]
fn euro_and_emoji_in_headers() {
    let event = EventBuilder::new("1", "/s", "t")
        .subject("Euro € 😀")
        .extension("note", "50% \"off\"")
        .build()
        .unwrap();
    let message = binding::encode_binary(&event);
    assert_eq!(
        header(&message.headers, "ce-subject"),
        Some("Euro%20%E2%82%AC%20%F0%9F%98%80")
    );
    assert_eq!(
        header(&message.headers, "ce-note"),
        Some("50%25%20%22off%22")
    );
    let back = binding::decode_binary(&message.headers, &message.body).unwrap();
    assert_eq!(back.event, event);
}

#[test]
fn batches_in_both_directions() {
    let text = r#"[
        {"specversion":"1.0","type":"com.example.someevent","source":"/mycontext/4",
         "id":"B234-1234-1234","datacontenttype":"application/vnd.apache.thrift.binary",
         "data_base64":"AAEC"},
        {"specversion":"1.0","type":"com.example.someotherevent","source":"/mycontext/9",
         "id":"C234-1234-1234","datacontenttype":"application/json","data":{"a":1}}
    ]"#;
    let events: Vec<_> = json::decode_batch(text.as_bytes())
        .unwrap()
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(events.len(), 2);
    let message = binding::encode_batch(&events);
    assert_eq!(
        header(&message.headers, "content-type"),
        Some("application/cloudevents-batch+json")
    );
    let Message::Batch(back) = binding::decode(&message.headers, &message.body).unwrap() else {
        panic!("expected a batch");
    };
    let back: Vec<_> = back.into_iter().map(Result::unwrap).collect();
    assert_eq!(back, events);
    assert_eq!(json::decode_batch(b"[]").unwrap(), vec![]);
}
