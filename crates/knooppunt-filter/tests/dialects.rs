//! The Subscriptions API filter dialects: meaning and validation.

use knooppunt_event::{Event, EventBuilder};
use knooppunt_filter::{Criteria, Filter, Limits};
use serde_json::json;

fn event() -> Event {
    EventBuilder::new("1", "urn:nld:oin:1:systeem:brp", "nl.brp.persoon-verhuisd")
        .subject("999990342")
        .extension("count", 5)
        .extension("flag", true)
        .extension("region", "Gelderland")
        .build()
        .unwrap()
}

fn filter(value: serde_json::Value) -> Filter {
    Filter::from_json(&value, "filters[0]", &Limits::DEFAULT).unwrap()
}

fn matches(value: serde_json::Value) -> bool {
    filter(value).matches(&event())
}

#[test]
fn exact_prefix_suffix_over_any_attribute() {
    assert!(matches(
        json!({"exact": {"type": "nl.brp.persoon-verhuisd"}})
    ));
    assert!(matches(
        json!({"exact": {"type": "nl.brp.persoon-verhuisd", "subject": "999990342"}})
    ));
    assert!(!matches(
        json!({"exact": {"type": "nl.brp.persoon-verhuisd", "subject": "1"}})
    ));
    assert!(
        !matches(json!({"exact": {"type": "NL.BRP.PERSOON-VERHUISD"}})),
        "case-sensitive"
    );
    assert!(matches(
        json!({"prefix": {"type": "nl.brp.", "source": "urn:nld:"}})
    ));
    assert!(matches(json!({"suffix": {"type": "-verhuisd"}})));
    assert!(
        matches(json!({"exact": {"region": "Gelderland"}})),
        "extensions"
    );
    assert!(
        matches(json!({"exact": {"count": "5"}})),
        "typed extensions by canonical string"
    );
    assert!(matches(json!({"exact": {"flag": "true"}})));
    assert!(
        !matches(json!({"exact": {"dataschema": "x"}})),
        "a missing attribute is false"
    );
    assert!(!matches(json!({"prefix": {"missing": "x"}})));
}

#[test]
fn all_any_not_and_sql() {
    assert!(matches(
        json!({"all": [{"prefix": {"type": "nl."}}, {"exact": {"subject": "999990342"}}]})
    ));
    assert!(!matches(
        json!({"all": [{"prefix": {"type": "nl."}}, {"exact": {"subject": "x"}}]})
    ));
    assert!(matches(
        json!({"any": [{"exact": {"type": "x"}}, {"suffix": {"subject": "342"}}]})
    ));
    assert!(!matches(
        json!({"any": [{"exact": {"type": "x"}}, {"exact": {"type": "y"}}]})
    ));
    assert!(matches(json!({"not": {"exact": {"type": "x"}}})));
    assert!(matches(
        json!({"sql": "type LIKE 'nl.brp.%' AND count > 3 AND region = 'Gelderland'"})
    ));
    assert!(
        !matches(json!({"sql": "missing = 'x'"})),
        "an error means no match"
    );
    assert!(
        !matches(json!({"sql": "count + 1"})),
        "a non-boolean result means no match"
    );
}

#[test]
fn criteria_source_and_types() {
    let mut criteria = Criteria {
        source: Some("urn:nld:oin:1:systeem:brp".into()),
        types: Some(vec!["a".into(), "nl.brp.persoon-verhuisd".into()]),
        filters: vec![filter(json!({"exact": {"subject": "999990342"}}))],
    };
    assert!(criteria.matches(&event()));
    criteria.types = Some(vec!["a".into()]);
    assert!(!criteria.matches(&event()));
    criteria.types = Some(Vec::new());
    assert!(
        !criteria.matches(&event()),
        "an empty list of types matches no type"
    );
    criteria.types = None;
    assert!(criteria.matches(&event()), "no list: any type");
    criteria.source = Some("urn:nld:oin:2".into());
    assert!(!criteria.matches(&event()));
    assert!(
        Criteria::default().matches(&event()),
        "no constraints match everything"
    );
}

#[test]
fn invalid_filters_name_the_place_and_the_problem() {
    let cases = [
        (
            json!({"regex": {"type": "x"}}),
            "filters[0].regex",
            "unknown filter dialect `regex`",
        ),
        (
            json!({"exact": {"type": ""}}),
            "filters[0].exact",
            "must not be empty",
        ),
        (
            json!({"exact": {"": "x"}}),
            "filters[0].exact",
            "not a CloudEvents attribute name",
        ),
        (
            json!({"exact": {"Type": "x"}}),
            "filters[0].exact",
            "not a CloudEvents attribute name",
        ),
        (
            json!({"exact": {"type": 5}}),
            "filters[0].exact",
            "must be a string",
        ),
        (
            json!({"exact": {}}),
            "filters[0].exact",
            "at least one attribute",
        ),
        (json!({"all": []}), "filters[0].all", "at least one filter"),
        (json!({"any": {}}), "filters[0].any", "must be an array"),
        (
            json!({"not": []}),
            "filters[0].not",
            "must be a JSON object",
        ),
        (
            json!({"sql": "type ="}),
            "filters[0].sql",
            "invalid CESQL expression",
        ),
        (
            json!({"sql": "NOPE(type)"}),
            "filters[0].sql",
            "no function NOPE",
        ),
        (json!({"sql": 5}), "filters[0].sql", "must be a string"),
        (
            json!({"exact": {"a": "b"}, "prefix": {"a": "b"}}),
            "filters[0]",
            "exactly one dialect",
        ),
        (json!("type = x"), "filters[0]", "must be a JSON object"),
        (
            json!({"all": [{"exact": {"a": "b"}}, {"bogus": 1}]}),
            "filters[0].all[1].bogus",
            "unknown filter dialect",
        ),
    ];
    for (value, path, message) in cases {
        let errors = Filter::from_json(&value, "filters[0]", &Limits::DEFAULT).unwrap_err();
        assert_eq!(errors.len(), 1, "{value}: {errors:?}");
        assert_eq!(errors[0].path, path, "{value}");
        assert!(
            errors[0].message.contains(message),
            "{value}: {}",
            errors[0].message
        );
    }
}

#[test]
fn every_problem_in_a_list_is_reported() {
    let list = [
        json!({"exact": {"type": ""}}),
        json!({"sql": "("}),
        json!({"prefix": {"type": "ok"}}),
    ];
    let errors = Filter::list_from_json(&list, "filters", &Limits::DEFAULT).unwrap_err();
    let paths: Vec<_> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["filters[0].exact", "filters[1].sql"]);
}

#[test]
fn json_form_round_trips() {
    for value in [
        json!({"exact": {"type": "a", "subject": "b"}}),
        json!({"all": [{"prefix": {"type": "a"}}, {"not": {"suffix": {"type": "b"}}}]}),
        json!({"any": [{"sql": "EXISTS subject"}]}),
    ] {
        assert_eq!(filter(value.clone()).to_json(), value);
    }
}
