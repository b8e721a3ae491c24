//! Our JSON output validates against the official CloudEvents JSON schema
//! (`specs/cloudevents/cloudevents.json`), formats (`uri`, `uri-reference`,
//! `date-time`) included.

use jsonschema::{Draft, Validator};
use knooppunt_event::binding::http as binding;
use knooppunt_event::format::json;
use knooppunt_event::{Data, EventBuilder, JsonText, ReceivedEvent};
use knooppunt_tests::read_spec;
use proptest::prelude::*;

fn schema() -> Validator {
    let schema: serde_json::Value =
        serde_json::from_str(&read_spec("cloudevents/cloudevents.json")).unwrap();
    jsonschema::options()
        .with_draft(Draft::Draft7)
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
}

fn assert_valid(validator: &Validator, text: &str) {
    let instance: serde_json::Value = serde_json::from_str(text).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{text}\nbreaks the schema: {errors:?}");
}

#[test]
fn the_schema_checks_formats() {
    let validator = schema();
    let bad_time = serde_json::json!({"specversion":"1.0","id":"1","source":"/s","type":"t",
        "time":"yesterday"});
    assert!(
        !validator.is_valid(&bad_time),
        "format validation must be on for this test to mean anything"
    );
}

#[test]
fn encoded_events_validate() {
    let validator = schema();
    let events = [
        EventBuilder::new(
            "A234-1234-1234",
            "https://github.com/cloudevents/spec/pull",
            "com.github.pull_request.opened",
        )
        .subject("123")
        .time("2018-04-05T17:31:00Z")
        .extension("comexampleextension1", "value")
        .extension("comexampleothervalue", 5)
        .datacontenttype("text/xml")
        .data(Data::Text("<much wow=\"xml\"/>".into()))
        .build()
        .unwrap(),
        EventBuilder::new(
            "f3dce042",
            "urn:nld:oin:00000001823288444000:systeem:BRP-component",
            "nl.brp.persoon-verhuisd",
        )
        .dataschema("https://schemas.example/persoon.json")
        .time("2021-12-10T17:31:00.123+01:00")
        .extension("sequence", "1234")
        .extension("flag", true)
        .data(Data::Json(
            JsonText::parse(r#"{"bsn":"999990342"}"#).unwrap(),
        ))
        .build()
        .unwrap(),
        EventBuilder::new("1", "/sensors/tn-1234567/alerts", "com.example.bin")
            .datacontenttype("application/octet-stream")
            .data(Data::Binary(vec![0, 159, 146, 150]))
            .build()
            .unwrap(),
    ];
    for event in &events {
        assert_valid(&validator, &json::encode_event(event));
    }
    let batch = binding::encode_batch(
        &events
            .iter()
            .cloned()
            .map(ReceivedEvent::from)
            .collect::<Vec<_>>(),
    );
    let array: Vec<serde_json::Value> = serde_json::from_slice(&batch.body).unwrap();
    for element in array {
        assert!(validator.is_valid(&element));
    }
}

#[test]
fn binary_mode_events_validate_once_structured() {
    let mut headers = http_headers();
    headers.insert("content-type", "text/plain; charset=utf-8".parse().unwrap());
    let received = binding::decode_binary(&headers, "Euro € 😀".as_bytes()).unwrap();
    assert_valid(&schema(), &received.to_json());
}

fn http_headers() -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    for (name, value) in [
        ("ce-specversion", "1.0"),
        ("ce-id", "1"),
        ("ce-source", "urn:nld:x"),
        ("ce-type", "nl.x.y"),
        ("ce-subject", "Euro%20%E2%82%AC%20%F0%9F%98%80"),
        ("ce-time", "2026-11-21T12:00:00+01:00"),
    ] {
        headers.insert(name, value.parse().unwrap());
    }
    headers
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_events_validate(
        id in "[^\\p{Cc}\\p{Cn}]{1,12}",
        subject in proptest::option::of("[^\\p{Cc}\\p{Cn}]{1,12}"),
        offset in "Z|[+-]0[0-9]:[0-5][0-9]",
        fraction in proptest::option::of("[0-9]{1,9}"),
        count in any::<i32>(),
    ) {
        let time = format!("2026-11-21T12:00:00{}{offset}", fraction.map(|f| format!(".{f}")).unwrap_or_default());
        let mut builder = EventBuilder::new(id, "urn:nld:x", "nl.x.y").time(time).extension("count", count);
        if let Some(subject) = subject {
            builder = builder.subject(subject);
        }
        let text = json::encode_event(&builder.build().unwrap());
        let instance: serde_json::Value = serde_json::from_str(&text).unwrap();
        prop_assert!(schema().is_valid(&instance), "{}", text);
    }
}
