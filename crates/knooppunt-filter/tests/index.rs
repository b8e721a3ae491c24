//! The matching index returns exactly what evaluating every subscription returns.

use std::collections::BTreeSet;

use knooppunt_event::{Event, EventBuilder};
use knooppunt_filter::cesql::Expression;
use knooppunt_filter::{Criteria, Filter, Limits, MatchIndex};
use proptest::prelude::*;

const TYPES: [&str; 4] = [
    "nl.brp.verhuisd",
    "nl.brp.gehuwd",
    "nl.kvk.opgericht",
    "com.example.x",
];
const SOURCES: [&str; 3] = ["urn:nld:oin:1:brp", "urn:nld:oin:2:kvk", "/local"];
const SUBJECTS: [&str; 3] = ["999990342", "123", "abc.jpg"];

fn pick(values: &[&'static str]) -> impl Strategy<Value = String> + use<> {
    prop::sample::select(values.to_vec()).prop_map(str::to_owned)
}

fn attribute() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["type", "source", "subject", "region"]).prop_map(str::to_owned)
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        pick(&TYPES),
        pick(&SOURCES),
        pick(&SUBJECTS),
        prop::sample::select(vec![
            "nl.", "nl.brp.", "urn:nld:", ".jpg", "gehuwd", "9", "noord"
        ])
        .prop_map(str::to_owned),
    ]
}

fn leaf() -> impl Strategy<Value = Filter> {
    let map = || prop::collection::btree_map(attribute(), value(), 1..3);
    prop_oneof![
        map().prop_map(Filter::Exact),
        map().prop_map(Filter::Prefix),
        map().prop_map(Filter::Suffix),
        (attribute(), value(), 0..4u8).prop_map(|(name, value, shape)| {
            let text = match shape {
                0 => format!("{name} = '{value}'"),
                1 => format!("{name} LIKE '{value}%'"),
                2 => format!("{name} LIKE '%{value}' AND EXISTS subject"),
                _ => format!("{name} IN ('{value}', 'other') OR region = 'noord'"),
            };
            Filter::Sql(Expression::compile(&text, &Limits::DEFAULT).unwrap())
        }),
    ]
}

fn filter() -> impl Strategy<Value = Filter> {
    leaf().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..3).prop_map(Filter::All),
            prop::collection::vec(inner.clone(), 1..3).prop_map(Filter::Any),
            inner.prop_map(|f| Filter::Not(Box::new(f))),
        ]
    })
}

fn criteria() -> impl Strategy<Value = Criteria> {
    (
        proptest::option::of(pick(&SOURCES)),
        proptest::option::of(prop::collection::vec(pick(&TYPES), 0..3)),
        prop::collection::vec(filter(), 0..3),
    )
        .prop_map(|(source, types, filters)| Criteria {
            source,
            types,
            filters,
        })
}

fn event() -> impl Strategy<Value = Event> {
    (
        pick(&TYPES),
        pick(&SOURCES),
        proptest::option::of(pick(&SUBJECTS)),
        proptest::option::of(pick(&["noord", "zuid"])),
    )
        .prop_map(|(ty, source, subject, region)| {
            let mut builder = EventBuilder::new("1", source, ty);
            if let Some(subject) = subject {
                builder = builder.subject(subject);
            }
            if let Some(region) = region {
                builder = builder.extension("region", region);
            }
            builder.build().unwrap()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn index_equals_full_evaluation(
        subscriptions in prop::collection::vec(criteria(), 0..40),
        removals in prop::collection::vec(any::<prop::sample::Index>(), 0..5),
        events in prop::collection::vec(event(), 1..8),
    ) {
        let mut index = MatchIndex::new();
        for (id, criteria) in subscriptions.iter().enumerate() {
            index.insert(id, criteria.clone());
        }
        if !subscriptions.is_empty() {
            for removal in removals {
                index.remove(&removal.index(subscriptions.len()));
            }
        }
        for event in &events {
            let fast: BTreeSet<_> = index.matching(event).into_iter().collect();
            let slow: BTreeSet<_> = index.matching_by_scan(event).into_iter().collect();
            prop_assert_eq!(index.matching(event).len(), fast.len(), "no duplicates");
            prop_assert_eq!(fast, slow);
        }
    }
}

#[test]
fn anchored_subscriptions_stay_out_of_the_residue() {
    let mut index = MatchIndex::new();
    let sql = |text| Criteria {
        filters: vec![Filter::Sql(
            Expression::compile(text, &Limits::DEFAULT).unwrap(),
        )],
        ..Criteria::default()
    };
    index.insert(
        1,
        Criteria {
            types: Some(vec!["a".into()]),
            ..Criteria::default()
        },
    );
    index.insert(2, sql("type LIKE 'nl.%' AND count > 3"));
    index.insert(3, sql("source = 'urn:nld:x' OR subject IN ('1', '2')"));
    index.insert(4, Criteria {
        filters: vec![Filter::from_json(&serde_json::json!({"any": [{"prefix": {"type": "nl."}}, {"suffix": {"subject": ".jpg"}}]}), "f", &Limits::DEFAULT).unwrap()],
        ..Criteria::default()
    });
    index.insert(5, sql("count > 3"));
    index.insert(6, Criteria::default());
    assert_eq!(
        index.residue_len(),
        2,
        "only the unanchorable ones are scanned"
    );
    index.remove(&5);
    index.insert(
        6,
        Criteria {
            source: Some("s".into()),
            ..Criteria::default()
        },
    );
    assert_eq!(index.residue_len(), 0);
    assert_eq!(index.len(), 5);
}
