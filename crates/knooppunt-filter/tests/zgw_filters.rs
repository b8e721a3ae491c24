//! A ZGW abonnement's filters, written as Subscriptions API filters
//! (`knooppunt_event::notificatie::kanaal_filter`), route exactly as Open Notificaties
//! decides (`Notificatie::passes`): equal, `*`, or a kenmerk the notificatie lacks.

use std::collections::BTreeMap;

use knooppunt_event::notificatie::{Notificatie, kanaal_filter};
use knooppunt_filter::{Criteria, Filter, Limits};
use proptest::prelude::*;

fn notificatie(kanaal: &str, kenmerken: &BTreeMap<String, String>) -> Notificatie {
    let text = serde_json::json!({
        "kanaal": kanaal, "hoofdObject": "https://zgw.example.nl/zaken/1", "resource": "zaak",
        "resourceUrl": "https://zgw.example.nl/zaken/1", "actie": "create",
        "aanmaakdatum": "2026-11-24T08:00:00Z", "kenmerken": kenmerken,
    })
    .to_string();
    Notificatie::read(&text).unwrap()
}

fn routes(kanaal: &str, filters: &BTreeMap<String, String>, notificatie: &Notificatie) -> bool {
    let filter = kanaal_filter(kanaal, filters).expect("attribute-safe keys");
    let criteria = Criteria {
        source: None,
        types: None,
        filters: Filter::list_from_json(&[filter], "filters", &Limits::DEFAULT).unwrap(),
    };
    let event = notificatie.to_event("urn:nld:zgw:test", "1").unwrap();
    criteria.matches(&event)
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_open_notificaties_rule_as_cloudevents_filters() {
    let zaak = notificatie(
        "zaken",
        &map(&[
            ("bronorganisatie", "224557609"),
            ("vertrouwelijkheidaanduiding", "openbaar"),
        ]),
    );
    assert!(routes("zaken", &map(&[]), &zaak));
    assert!(routes(
        "zaken",
        &map(&[("bronorganisatie", "224557609")]),
        &zaak
    ));
    assert!(routes("zaken", &map(&[("bronorganisatie", "*")]), &zaak));
    assert!(
        routes("zaken", &map(&[("zaaktype", "https://x")]), &zaak),
        "a kenmerk the notificatie lacks matches"
    );
    assert!(!routes(
        "zaken",
        &map(&[("bronorganisatie", "000000000")]),
        &zaak
    ));
    assert!(!routes("besluiten", &map(&[]), &zaak), "another kanaal");
    let filters = map(&[("bronorganisatie", "224557609"), ("zaaktype", "*")]);
    assert_eq!(
        knooppunt_event::notificatie::kanaal_of_filter(&kanaal_filter("zaken", &filters).unwrap()),
        Some(("zaken".to_owned(), filters)),
        "a filter reads back"
    );
    assert_eq!(
        kanaal_filter("zaken", &map(&[("zaak type", "x")])),
        None,
        "a key that cannot be an attribute name"
    );
    // Open Notificaties' spellings of one kenmerk are one filter key.
    let camel = notificatie(
        "zaken",
        &map(&[("zaakType", "x"), ("zaaktype.catalogus", "c")]),
    );
    assert!(routes("zaken", &map(&[("zaak_type", "x")]), &camel));
    assert!(!routes("zaken", &map(&[("zaak_type", "y")]), &camel));
    assert!(routes(
        "zaken",
        &map(&[("zaaktype.catalogus", "c")]),
        &camel
    ));
    assert!(!routes(
        "zaken",
        &map(&[("zaaktype.catalogus", "d")]),
        &camel
    ));
}

proptest! {
    /// Whatever the kenmerken and filters, routing agrees with Open Notificaties' rule.
    #[test]
    fn routing_agrees_with_open_notificaties(
        kenmerken in proptest::collection::btree_map("[a-c]", "[xy]", 0..3),
        filters in proptest::collection::btree_map("[a-c]", "[xy*]", 0..3),
    ) {
        let zaak = notificatie("zaken", &kenmerken);
        prop_assert_eq!(routes("zaken", &filters, &zaak), zaak.passes(&filters));
    }
}
