//! Random criteria and events for the property tests (a small alphabet, so that they meet).

use knooppunt_event::{Event, EventBuilder};
use knooppunt_filter::cesql::Expression;
use knooppunt_filter::{Criteria, Filter, Limits};
use proptest::prelude::*;

pub(crate) const TYPES: [&str; 4] = [
    "nl.brp.verhuisd",
    "nl.brp.gehuwd",
    "nl.kvk.opgericht",
    "com.example.x",
];
pub(crate) const SOURCES: [&str; 3] = ["urn:nld:oin:1:brp", "urn:nld:oin:2:kvk", "/local"];
pub(crate) const SUBJECTS: [&str; 3] = ["999990342", "123", "abc.jpg"];

pub(crate) fn pick(values: &[&'static str]) -> impl Strategy<Value = String> + use<> {
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

pub(crate) fn filter() -> impl Strategy<Value = Filter> {
    leaf().prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..3).prop_map(Filter::All),
            prop::collection::vec(inner.clone(), 1..3).prop_map(Filter::Any),
            inner.prop_map(|f| Filter::Not(Box::new(f))),
        ]
    })
}

pub(crate) fn criteria() -> impl Strategy<Value = Criteria> {
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

pub(crate) fn event() -> impl Strategy<Value = Event> {
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
