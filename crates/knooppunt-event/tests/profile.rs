//! The NL GOV profile at its three levels.

use knooppunt_event::format::json;
use knooppunt_event::validate::{self, findings};
use knooppunt_event::{Event, ProfileLevel, Rule, Severity};

fn event(members: &str) -> Event {
    let text = format!(r#"{{"specversion":"1.0","id":"1",{members}}}"#);
    json::decode_event(text.as_bytes()).unwrap().event
}

fn nl(extra: &str) -> Event {
    event(&format!(
        r#""source":"urn:nld:oin:00000001823288444000:systeem:BRP-component",
           "type":"nl.brp.persoon-verhuisd"{extra}"#
    ))
}

fn rules_at(event: &Event, level: ProfileLevel) -> Vec<(Rule, Severity)> {
    findings(event, level)
        .iter()
        .map(|v| (v.rule, v.severity))
        .collect()
}

#[test]
fn the_guidelines_example_is_clean() {
    let text = r#"{
      "specversion": "1.0",
      "type": "nl.overheid.zaken.zaakstatus-gewijzigd",
      "source": "urn:nld:oin:00000001823288444000:systeem:BRP-component",
      "subject": "123456789",
      "id": "f3dce042-cd6e-4977-844d-05be8dce7cea",
      "time": "2021-12-10T17:31:00Z",
      "nlbrpnationaliteit": "0083",
      "geheimnummer": null,
      "dataref": "https://gemeenteX/api/persoon/123456789",
      "sequence": "1234",
      "sequencetype": "integer",
      "datacontenttype": "application/json",
      "data": {"bsn": "1234567789", "naam": "Jan Jansen", "gecontroleerd": "ja"}
    }"#;
    let event = json::decode_event(text.as_bytes()).unwrap().event;
    assert_eq!(findings(&event, ProfileLevel::Enforce), vec![]);
    assert_eq!(validate::check(&event, ProfileLevel::Enforce), Ok(vec![]));
}

#[test]
fn type_must_be_reverse_domain_notation() {
    for good in [
        "nl.brp.persoon-verhuisd",
        "com.github.pull_request.opened",
        "nl.vng.zaken.v2",
    ] {
        let event = event(&format!(r#""source":"urn:nld:x","type":"{good}""#));
        assert_eq!(rules_at(&event, ProfileLevel::Enforce), [], "{good}");
    }
    for bad in [
        "PersonMoved",
        "persoon verhuisd",
        "nl",
        "1.brp.x",
        "nl..brp",
        ".nl.brp",
    ] {
        let event = event(&format!(r#""source":"urn:nld:x","type":"{bad}""#));
        assert_eq!(
            rules_at(&event, ProfileLevel::Enforce),
            [(Rule::NlGovType, Severity::Error)],
            "{bad}"
        );
        assert_eq!(
            rules_at(&event, ProfileLevel::Warn),
            [(Rule::NlGovType, Severity::Warning)],
            "{bad}"
        );
        assert_eq!(rules_at(&event, ProfileLevel::Off), [], "{bad}");
        assert!(validate::check(&event, ProfileLevel::Enforce).is_err());
        assert!(validate::check(&event, ProfileLevel::Warn).is_ok());
    }
}

#[test]
fn type_carries_at_most_one_version() {
    let event = event(r#""source":"urn:nld:x","type":"nl.brp.v1.persoon.v2""#);
    assert_eq!(
        rules_at(&event, ProfileLevel::Enforce),
        [(Rule::NlGovTypeVersion, Severity::Error)]
    );
}

#[test]
fn source_should_be_an_nld_urn() {
    let event = event(r#""source":"urn:example:brp","type":"nl.brp.x""#);
    assert_eq!(
        rules_at(&event, ProfileLevel::Enforce),
        [(Rule::NlGovSource, Severity::Warning)],
        "a SHOULD never rejects"
    );
    let warnings = validate::check(&event, ProfileLevel::Enforce).unwrap();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].attribute, "source");
    assert_eq!(
        warnings[0].spec,
        "NL GOV profile for CloudEvents §3.3.2 source"
    );
}

#[test]
fn an_oin_source_names_an_oin_and_no_source_is_a_data_location() {
    // An `urn:nld:oin:` source whose OIN is not 20 digits: a SHOULD, a warning at both.
    let short = event(r#""source":"urn:nld:oin:123:systeem:BRP","type":"nl.brp.x""#);
    for level in [ProfileLevel::Warn, ProfileLevel::Enforce] {
        assert_eq!(
            rules_at(&short, level),
            [(Rule::NlGovSourceOin, Severity::Warning)]
        );
    }
    let found = findings(&short, ProfileLevel::Warn);
    assert_eq!(found[0].rule.code(), "nlgov.source.oin");
    assert!(
        found[0].detail.contains("`123` is not an OIN"),
        "{}",
        found[0].detail
    );
    let letters =
        event(r#""source":"urn:nld:oin:0000000182328844400X:systeem:BRP","type":"nl.brp.x""#);
    assert_eq!(
        rules_at(&letters, ProfileLevel::Warn),
        [(Rule::NlGovSourceOin, Severity::Warning)]
    );
    // A URL to fetch: the profile's MUST NOT, rejected at enforce.
    let location =
        event(r#""source":"https://brp.example.nl/personen/999990342","type":"nl.brp.x""#);
    assert_eq!(
        rules_at(&location, ProfileLevel::Enforce),
        [
            (Rule::NlGovSource, Severity::Warning),
            (Rule::NlGovSourceLocation, Severity::Error)
        ]
    );
    assert_eq!(
        rules_at(&location, ProfileLevel::Warn),
        [
            (Rule::NlGovSource, Severity::Warning),
            (Rule::NlGovSourceLocation, Severity::Warning)
        ]
    );
    assert_eq!(
        findings(&location, ProfileLevel::Warn)[1].rule.code(),
        "nlgov.source.data-location"
    );
    // The profile's own examples pass.
    for source in [
        "urn:nld:oin:00000001823288444000:systeem:BRP-component",
        "urn:nld:kvknr:09220932.burgerzakensysteem",
        "urn:nld:gemeente-nijmegen.burgerzakensysteem",
    ] {
        let clean = event(&format!(r#""source":"{source}","type":"nl.brp.x""#));
        assert!(
            rules_at(&clean, ProfileLevel::Enforce).is_empty(),
            "{source}"
        );
    }
}

#[test]
fn sequence_rules() {
    let cases: &[(&str, Rule)] = &[
        (r#","sequence":5"#, Rule::NlGovSequence),
        (r#","sequence":"""#, Rule::NlGovSequence),
        (r#","sequencetype":"Integer""#, Rule::NlGovSequence),
        (
            r#","sequence":"1","sequencetype":"""#,
            Rule::NlGovSequenceType,
        ),
        (
            r#","sequence":"1","sequencetype":true"#,
            Rule::NlGovSequenceType,
        ),
        (
            r#","sequence":"abc","sequencetype":"Integer""#,
            Rule::NlGovSequenceInteger,
        ),
        (
            r#","sequence":"2147483648","sequencetype":"Integer""#,
            Rule::NlGovSequenceInteger,
        ),
    ];
    for (extra, rule) in cases {
        assert_eq!(
            rules_at(&nl(extra), ProfileLevel::Enforce),
            [(*rule, Severity::Error)],
            "{extra}"
        );
    }
    let fine = nl(r#","sequence":"-5","sequencetype":"Integer""#);
    assert_eq!(rules_at(&fine, ProfileLevel::Enforce), []);
    let lexical = nl(r#","sequence":"0001""#);
    assert_eq!(rules_at(&lexical, ProfileLevel::Enforce), []);
}

#[test]
fn dataref_is_a_uri_reference() {
    assert_eq!(
        rules_at(&nl(r#","dataref":"not a uri""#), ProfileLevel::Enforce),
        [(Rule::NlGovDataref, Severity::Error)]
    );
    assert_eq!(
        rules_at(&nl(r#","dataref":7"#), ProfileLevel::Enforce),
        [(Rule::NlGovDataref, Severity::Error)]
    );
    assert_eq!(
        rules_at(&nl(r#","dataref":"/api/x/1""#), ProfileLevel::Enforce),
        []
    );
}

#[test]
fn json_data_is_recommended() {
    let event = nl(r#","datacontenttype":"text/xml","data":"<x/>""#);
    assert_eq!(
        rules_at(&event, ProfileLevel::Enforce),
        [(Rule::NlGovDataContentType, Severity::Warning)]
    );
}

#[test]
fn core_naming_advice_applies_at_every_level() {
    let event = nl(r#","averyveryverylongextension":"x""#);
    assert_eq!(
        rules_at(&event, ProfileLevel::Off),
        [(Rule::AttributeNameLength, Severity::Warning)]
    );
}

#[test]
fn every_finding_names_attribute_rule_and_section() {
    let event = event(r#""source":"/s","type":"Bad","sequence":5,"dataref":"a b""#);
    let found = findings(&event, ProfileLevel::Enforce);
    assert_eq!(found.len(), 4, "{found:?}");
    for finding in &found {
        assert!(!finding.attribute.is_empty());
        assert!(finding.rule.code().starts_with("nlgov."));
        assert!(
            finding
                .spec
                .starts_with("NL GOV profile for CloudEvents §3."),
            "{}",
            finding.spec
        );
        assert!(!finding.detail.is_empty());
    }
}

#[test]
fn levels_parse_from_configuration() {
    assert_eq!("enforce".parse(), Ok(ProfileLevel::Enforce));
    assert_eq!("warn".parse(), Ok(ProfileLevel::Warn));
    assert_eq!("off".parse(), Ok(ProfileLevel::Off));
    let error = "strict".parse::<ProfileLevel>().unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown profile level `strict`: use `off`, `warn` or `enforce`"
    );
}
