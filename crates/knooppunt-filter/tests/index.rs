//! The matching index returns exactly what evaluating every subscription returns.

use std::collections::BTreeSet;

use knooppunt_filter::cesql::Expression;
use knooppunt_filter::{Criteria, Filter, Limits, MatchIndex};
use proptest::prelude::*;

#[allow(dead_code)] // each test uses only some of the strategies
mod strategies;
use strategies::{criteria, event};

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
