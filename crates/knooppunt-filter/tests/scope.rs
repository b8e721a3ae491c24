//! Whether criteria can match some event of a scope (approval by a catalog entry's owner
//! asks it of every subscription): never "no" for criteria that match an event of the
//! scope (checked on random criteria and events), and "no" where no event can match.

use knooppunt_event::Event;
use knooppunt_filter::{Criteria, Filter, Scope};
use proptest::prelude::*;

#[allow(dead_code)] // each test uses only some of the strategies
mod strategies;
use strategies::{criteria, event};

/// The scopes the random events fall in or out of.
const SCOPES: [(&str, &str, bool); 6] = [
    ("urn:nld:oin:1:", "nl.brp.verhuisd", false),
    ("urn:nld:oin:1:", "nl.brp.", true),
    ("urn:nld:", "nl.", true),
    ("urn:nld:oin:2:", "nl.kvk.opgericht", false),
    ("/", "com.example.x", false),
    ("", "", true),
];

fn in_scope(event: &Event, scope: &Scope<'_>) -> bool {
    event.source().starts_with(scope.source_prefix)
        && if scope.type_is_prefix {
            event.ty().starts_with(scope.event_type)
        } else {
            event.ty() == scope.event_type
        }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Sound: criteria that match an event of a scope can match the scope.
    #[test]
    fn never_no_for_criteria_that_match_an_event_of_the_scope(
        criteria in criteria(),
        events in prop::collection::vec(event(), 1..8),
    ) {
        for (source_prefix, event_type, type_is_prefix) in SCOPES {
            let scope = Scope { source_prefix, event_type, type_is_prefix };
            if events.iter().any(|e| in_scope(e, &scope) && criteria.matches(e)) {
                prop_assert!(criteria.can_match(&scope), "{criteria:?} in {scope:?}");
            }
        }
    }
}

fn filter(json: serde_json::Value) -> Filter {
    Filter::list_from_json(&[json], "filters", &knooppunt_filter::Limits::DEFAULT)
        .unwrap()
        .remove(0)
}

#[test]
fn no_where_no_event_of_the_scope_can_match() {
    let brp = Scope {
        source_prefix: "urn:nld:oin:00000001823288444000:",
        event_type: "nl.brp.persoon-verhuisd",
        type_is_prefix: false,
    };
    let family = Scope {
        event_type: "nl.brp.",
        type_is_prefix: true,
        ..brp
    };
    let with = |source: Option<&str>, types: Option<Vec<&str>>, filters: Vec<Filter>| Criteria {
        source: source.map(str::to_owned),
        types: types.map(|t| t.into_iter().map(str::to_owned).collect()),
        filters,
    };
    let cases = [
        (with(None, None, vec![]), true, true),
        (
            with(None, Some(vec!["nl.kvk.opgericht"]), vec![]),
            false,
            false,
        ),
        (with(None, Some(vec![]), vec![]), false, false),
        (
            with(None, Some(vec!["nl.brp.persoon-geboren"]), vec![]),
            false,
            true,
        ),
        (
            with(Some("urn:nld:oin:00000001823288444000:brp"), None, vec![]),
            true,
            true,
        ),
        (
            with(Some("urn:nld:oin:00000001003214345000:rvo"), None, vec![]),
            false,
            false,
        ),
        (
            with(
                None,
                None,
                vec![filter(serde_json::json!({"prefix": {"type": "nl.kvk."}}))],
            ),
            false,
            false,
        ),
        (
            with(
                None,
                None,
                vec![filter(serde_json::json!({"prefix": {"type": "nl."}}))],
            ),
            true,
            true,
        ),
        (
            with(
                None,
                None,
                vec![filter(serde_json::json!({"exact": {"source": "/elders"}}))],
            ),
            false,
            false,
        ),
        (
            with(
                None,
                None,
                vec![filter(serde_json::json!({"any": [
                    {"exact": {"type": "nl.kvk.opgericht"}},
                    {"exact": {"type": "nl.brp.persoon-verhuisd"}}
                ]}))],
            ),
            true,
            true,
        ),
        (
            with(
                None,
                None,
                vec![filter(serde_json::json!({"suffix": {"type": "-geboren"}}))],
            ),
            false,
            true,
        ),
        // Undecided here, so always asked about: CESQL and `not`.
        (
            with(
                None,
                None,
                vec![filter(
                    serde_json::json!({"sql": "type = 'nl.kvk.opgericht'"}),
                )],
            ),
            true,
            true,
        ),
        (
            with(
                None,
                None,
                vec![filter(
                    serde_json::json!({"not": {"prefix": {"type": "nl."}}}),
                )],
            ),
            true,
            true,
        ),
    ];
    for (criteria, exact, prefix) in cases {
        assert_eq!(criteria.can_match(&brp), exact, "{criteria:?} for the type");
        assert_eq!(
            criteria.can_match(&family),
            prefix,
            "{criteria:?} for the family"
        );
    }
}
