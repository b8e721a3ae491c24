//! Core-specification validation: every rule, and every problem of an event at once.

use knooppunt_event::format::json;
use knooppunt_event::{Rule, Severity, Violations};

const VALID: &str = r#""specversion":"1.0","id":"1","source":"/s","type":"com.example.t""#;

fn violations(text: &str) -> Violations {
    match json::decode_event(text.as_bytes()) {
        Ok(event) => panic!("expected {text} to be rejected, got {event:?}"),
        Err(violations) => violations,
    }
}

fn rules(text: &str) -> Vec<(String, Rule)> {
    violations(text)
        .iter()
        .map(|v| (v.attribute.clone(), v.rule))
        .collect()
}

fn with(extra: &str) -> String {
    format!("{{{VALID},{extra}}}")
}

#[test]
fn one_broken_rule_each() {
    let table: &[(&str, &str, Rule)] = &[
        (
            r#""specversion":"1.0","source":"/s","type":"t""#,
            "id",
            Rule::Required,
        ),
        (
            r#""specversion":"0.3","id":"1","source":"/s","type":"t""#,
            "specversion",
            Rule::SpecVersion,
        ),
        (
            r#""specversion":"1.0","id":"","source":"/s","type":"t""#,
            "id",
            Rule::NonEmpty,
        ),
        (
            r#""specversion":"1.0","id":5,"source":"/s","type":"t""#,
            "id",
            Rule::JsonType,
        ),
        (
            r#""specversion":"1.0","id":"1","source":"a b","type":"t""#,
            "source",
            Rule::UriReference,
        ),
        (
            r#""specversion":"1.0","id":"1","source":"/s","type":{}"#,
            "type",
            Rule::JsonType,
        ),
        (
            r#""specversion":"1.0","id":"1","source":"/s","type":"t","id":"2""#,
            "id",
            Rule::DuplicateAttribute,
        ),
    ];
    for (members, attribute, rule) in table {
        let text = format!("{{{members}}}");
        assert_eq!(rules(&text), [(attribute.to_string(), *rule)], "{text}");
    }

    let extra: &[(&str, &str, Rule)] = &[
        (r#""subject":"""#, "subject", Rule::NonEmpty),
        (r#""subject":"a\u0001b""#, "subject", Rule::StringCharacters),
        (r#""subject":"\uDEAD""#, "subject", Rule::StringCharacters),
        (r#""subject":"\uFFFF""#, "subject", Rule::StringCharacters),
        (r#""time":"2018-04-05 17:31""#, "time", Rule::Timestamp),
        (r#""time":123"#, "time", Rule::JsonType),
        (r#""dataschema":"/relative""#, "dataschema", Rule::Uri),
        (
            r#""datacontenttype":"json""#,
            "datacontenttype",
            Rule::MediaType,
        ),
        (
            r#""comexampleothervalue":5.5"#,
            "comexampleothervalue",
            Rule::Integer,
        ),
        (
            r#""comexampleothervalue":1e3"#,
            "comexampleothervalue",
            Rule::Integer,
        ),
        (
            r#""comexampleothervalue":2147483648"#,
            "comexampleothervalue",
            Rule::Integer,
        ),
        (
            r#""comexampleothervalue":-2147483649"#,
            "comexampleothervalue",
            Rule::Integer,
        ),
        (
            r#""comexampleobject":{"a":1}"#,
            "comexampleobject",
            Rule::JsonType,
        ),
        (r#""comexamplelist":[1]"#, "comexamplelist", Rule::JsonType),
        (r#""My-Extension":"x""#, "My-Extension", Rule::AttributeName),
        (
            r#""data":1,"data_base64":"AA==""#,
            "data_base64",
            Rule::DataExclusive,
        ),
        // `"data": null` is a present member too (json-format.md 3.1.1: mutually exclusive).
        (
            r#""data":null,"data_base64":"AA==""#,
            "data_base64",
            Rule::DataExclusive,
        ),
        (r#""data_base64":"!!!""#, "data_base64", Rule::DataBase64),
        (r#""data_base64":5"#, "data_base64", Rule::DataBase64),
        (
            r#""datacontenttype":"text/plain","data":{"a":1}"#,
            "data",
            Rule::DataNotString,
        ),
        (r#""data":1,"data":2"#, "data", Rule::DuplicateAttribute),
    ];
    for (member, attribute, rule) in extra {
        let text = with(member);
        assert_eq!(rules(&text), [(attribute.to_string(), *rule)], "{text}");
    }
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = r#"{"specversion":"1.0","id":"","type":"t","time":"yesterday",
        "dataschema":"x","BadName":1,"count":1.5}"#;
    let mut found = rules(text);
    found.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        found,
        [
            ("BadName".to_string(), Rule::AttributeName),
            ("count".to_string(), Rule::Integer),
            ("dataschema".to_string(), Rule::Uri),
            ("id".to_string(), Rule::NonEmpty),
            ("source".to_string(), Rule::Required),
            ("time".to_string(), Rule::Timestamp),
        ]
    );
}

#[test]
fn null_is_unset() {
    let event = json::decode_event(with(r#""subject":null,"time":null,"ext":null"#).as_bytes())
        .unwrap()
        .event;
    assert_eq!(event.subject(), None);
    assert_eq!(event.time(), None);
    assert!(event.extensions().is_empty());
    assert_eq!(
        rules(r#"{"specversion":"1.0","id":null,"source":"/s","type":"t"}"#),
        [("id".to_string(), Rule::Required)]
    );
}

#[test]
fn the_message_itself() {
    assert_eq!(rules("{"), [(String::new(), Rule::JsonSyntax)]);
    assert_eq!(rules("[1]"), [(String::new(), Rule::NotAnObject)]);
    assert_eq!(rules("\"x\""), [(String::new(), Rule::NotAnObject)]);
    let not_utf8 = json::decode_event(b"{\"id\":\"\xff\"}").unwrap_err();
    assert!(not_utf8.contains(Rule::JsonSyntax));
    assert!(
        json::decode_batch(b"{}")
            .unwrap_err()
            .contains(Rule::NotAnArray)
    );
}

#[test]
fn batches_report_each_invalid_event_by_position() {
    let text = format!("[{{{VALID}}}, {{\"id\":\"2\"}}, 7]");
    let results = json::decode_batch(text.as_bytes()).unwrap();
    assert!(results[0].is_ok());
    let second = results[1].as_ref().unwrap_err();
    assert_eq!(
        second.iter().filter(|v| v.rule == Rule::Required).count(),
        3
    );
    assert!(results[2].as_ref().unwrap_err().contains(Rule::NotAnObject));
}

#[test]
fn violations_say_what_where_and_why() {
    let found = violations(&with(r#""time":"2018-02-30T00:00:00Z""#));
    let violation = &found.as_slice()[0];
    assert_eq!(violation.severity, Severity::Error);
    assert!(
        violation.detail.contains("2018-02-30T00:00:00Z"),
        "{}",
        violation.detail
    );
    let json = serde_json::to_value(violation).unwrap();
    assert_eq!(json["attribute"], "time");
    assert_eq!(json["rule"], "core.timestamp");
    assert_eq!(json["severity"], "error");
    assert_eq!(json["spec"], "CloudEvents 1.0 spec.md §Type System");
    assert!(found.to_string().starts_with("`time`: "), "{found}");
}

#[test]
fn builder_applies_the_same_rules() {
    use knooppunt_event::{Data, EventBuilder, JsonText};
    let problems = EventBuilder::new("", "not a uri", "t")
        .time("now")
        .extension("Bad", "x")
        .build()
        .unwrap_err();
    let mut found: Vec<_> = problems.iter().map(|v| v.rule).collect();
    found.sort_by_key(|rule| rule.code());
    assert_eq!(
        found,
        [
            Rule::AttributeName,
            Rule::NonEmpty,
            Rule::Timestamp,
            Rule::UriReference
        ]
    );
    let mismatch = EventBuilder::new("1", "/s", "t")
        .datacontenttype("text/plain")
        .data(Data::Json(JsonText::parse("{}").unwrap()))
        .build()
        .unwrap_err();
    assert!(mismatch.contains(Rule::DataNotString));
    let mismatch = EventBuilder::new("1", "/s", "t")
        .data(Data::Text("x".into()))
        .build()
        .unwrap_err();
    assert!(mismatch.contains(Rule::DataNotJson));
}

/// An attribute may appear once, whether it is a core attribute or an extension, and whether
/// its first value was valid or not; each repeat is reported once.
#[test]
fn repeated_attributes_are_reported_once_each() {
    let table: &[(&str, &[(&str, Rule)])] = &[
        (
            r#""comexampleext":"a","comexampleext":"b""#,
            &[("comexampleext", Rule::DuplicateAttribute)],
        ),
        (
            r#""comexampleext":{},"comexampleext":1"#,
            &[
                ("comexampleext", Rule::JsonType),
                ("comexampleext", Rule::DuplicateAttribute),
            ],
        ),
        (
            r#""Bad-Name":"a","Bad-Name":"b","Bad-Name":"c""#,
            &[
                ("Bad-Name", Rule::AttributeName),
                ("Bad-Name", Rule::DuplicateAttribute),
                ("Bad-Name", Rule::DuplicateAttribute),
            ],
        ),
        (
            r#""subject":"","subject":"s""#,
            &[
                ("subject", Rule::NonEmpty),
                ("subject", Rule::DuplicateAttribute),
            ],
        ),
    ];
    for (extra, expected) in table {
        let text = with(extra);
        let expected: Vec<(String, Rule)> = expected
            .iter()
            .map(|(name, rule)| (name.to_string(), *rule))
            .collect();
        assert_eq!(rules(&text), expected, "{text}");
    }
}
