//! The NL GOV profile for CloudEvents 1.1 (Logius), on top of the core specification.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{Requirement, Rule, Severity, Violation, syntax};
use crate::{AttributeValue, Event, data};

/// How strictly the NL GOV profile is applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileLevel {
    /// The profile is not checked; only the core specification applies.
    Off,
    /// Events are accepted and every profile finding is reported as a warning.
    #[default]
    Warn,
    /// Events that break a MUST of the profile are rejected; SHOULD findings are warnings.
    Enforce,
}

impl FromStr for ProfileLevel {
    type Err = UnknownProfileLevel;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "off" => Ok(ProfileLevel::Off),
            "warn" => Ok(ProfileLevel::Warn),
            "enforce" => Ok(ProfileLevel::Enforce),
            other => Err(UnknownProfileLevel(other.to_owned())),
        }
    }
}

impl fmt::Display for ProfileLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProfileLevel::Off => "off",
            ProfileLevel::Warn => "warn",
            ProfileLevel::Enforce => "enforce",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown profile level `{0}`: use `off`, `warn` or `enforce`")]
pub struct UnknownProfileLevel(String);

/// Adds the profile's findings on `event` to `found`, with the severity `level` gives them.
pub(super) fn check(event: &Event, level: ProfileLevel, found: &mut Vec<Violation>) {
    if level == ProfileLevel::Off {
        return;
    }
    let start = found.len();
    check_type(event.ty(), found);
    check_source(event.source(), found);
    check_sequence(event, found);
    check_dataref(event, found);
    if let Some(content_type) = event.datacontenttype()
        && !data::is_json_media_type(content_type)
    {
        found.push(Violation::new(
            "datacontenttype",
            Rule::NlGovDataContentType,
            format!("`{content_type}` is not JSON; the profile recommends JSON-formatted data"),
        ));
    }
    for finding in &mut found[start..] {
        finding.severity = match (level, finding.rule.requirement()) {
            (ProfileLevel::Enforce, Requirement::Must) => Severity::Error,
            _ => Severity::Warning,
        };
    }
}

/// `type` MUST be in reverse domain name notation, with at most one version segment `vN`.
fn check_type(ty: &str, found: &mut Vec<Violation>) {
    let labels: Vec<&str> = ty.split('.').collect();
    let top_level_ok = labels[0].len() >= 2 && labels[0].bytes().all(|b| b.is_ascii_alphabetic());
    let labels_ok = labels.iter().all(|label| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    if labels.len() < 2 || !top_level_ok || !labels_ok {
        found.push(Violation::new(
            "type",
            Rule::NlGovType,
            format!(
                "`{ty}` is not in reverse domain name notation: use dot-separated labels that \
                 start with a top-level domain, e.g. `nl.brp.persoon-verhuisd`"
            ),
        ));
        return;
    }
    let versions = labels
        .iter()
        .filter(|label| {
            label.len() > 1
                && label.starts_with('v')
                && label[1..].bytes().all(|b| b.is_ascii_digit())
        })
        .count();
    if versions > 1 {
        found.push(Violation::new(
            "type",
            Rule::NlGovTypeVersion,
            format!("`{ty}` has {versions} version labels; a type may carry only one, as `vN`"),
        ));
    }
}

/// `source` SHOULD be a URN in the `nld` namespace, naming a Dutch government organisation
/// by its OIN (20 digits), and MUST NOT be a data location.
fn check_source(source: &str, found: &mut Vec<Violation>) {
    let is_nld_urn = source
        .get(..8)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("urn:nld:"));
    if !is_nld_urn {
        found.push(Violation::new(
            "source",
            Rule::NlGovSource,
            format!(
                "`{source}` is not a `urn:nld:` URN; the profile recommends one that names the \
                 organisation and system, e.g. `urn:nld:oin:00000001823288444000:systeem:BRP`"
            ),
        ));
    }
    let lower = source.get(..12).map(str::to_ascii_lowercase);
    if lower.as_deref() == Some("urn:nld:oin:") {
        let oin = source[12..].split(':').next().unwrap_or_default();
        if oin.len() != 20 || !oin.bytes().all(|b| b.is_ascii_digit()) {
            found.push(Violation::new(
                "source",
                Rule::NlGovSourceOin,
                format!(
                    "`{oin}` is not an OIN (organisatie-identificatienummer: 20 digits), though \
                     the source names one: `urn:nld:oin:<20 digits>:…`"
                ),
            ));
        }
    }
    let scheme = source
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    if let Some(scheme) = scheme
        && ["http", "https", "ftp", "ftps", "file"].contains(&scheme.as_str())
    {
        found.push(Violation::new(
            "source",
            Rule::NlGovSourceLocation,
            format!(
                "`{source}` is a data location ({scheme}); the source names the organisation \
                 and system that produced the event (`urn:nld:oin:<OIN>:systeem:<name>`): put \
                 a link to the data in `dataref`"
            ),
        ));
    }
}

/// `sequence` and `sequencetype` (profile section 3.5).
fn check_sequence(event: &Event, found: &mut Vec<Violation>) {
    let sequence = event.extension("sequence");
    let sequencetype = event.extension("sequencetype");
    let sequence_text = match sequence {
        Some(AttributeValue::String(text)) => Some(text.as_str()),
        Some(other) => {
            found.push(Violation::new(
                "sequence",
                Rule::NlGovSequence,
                format!("`sequence` must be a String, not {other:?}; send it as a JSON string"),
            ));
            None
        }
        None => None,
    };
    if sequence_text == Some("") {
        found.push(Violation::new(
            "sequence",
            Rule::NlGovSequence,
            "`sequence` must be a non-empty string",
        ));
    }
    let Some(sequencetype) = sequencetype else {
        return;
    };
    let AttributeValue::String(kind) = sequencetype else {
        found.push(Violation::new(
            "sequencetype",
            Rule::NlGovSequenceType,
            "`sequencetype` must be a String",
        ));
        return;
    };
    if kind.is_empty() {
        found.push(Violation::new(
            "sequencetype",
            Rule::NlGovSequenceType,
            "`sequencetype` must be a non-empty string",
        ));
    }
    if sequence.is_none() {
        found.push(Violation::new(
            "sequence",
            Rule::NlGovSequence,
            "`sequencetype` is set, so `sequence` is required",
        ));
    }
    if kind.eq_ignore_ascii_case("integer")
        && let Some(text) = sequence_text
        && let Err(why) = syntax::integer(text)
    {
        found.push(Violation::new(
            "sequence",
            Rule::NlGovSequenceInteger,
            format!(
                "`sequencetype` is Integer, so `sequence` must be a signed 32-bit integer: {why}"
            ),
        ));
    }
}

/// `dataref` is a URI-reference.
fn check_dataref(event: &Event, found: &mut Vec<Violation>) {
    match event.extension("dataref") {
        None => {}
        Some(AttributeValue::String(value)) => {
            if let Err(why) = syntax::uri_reference(value) {
                found.push(Violation::new("dataref", Rule::NlGovDataref, why));
            }
        }
        Some(_) => found.push(Violation::new(
            "dataref",
            Rule::NlGovDataref,
            "`dataref` must be a URI-reference string",
        )),
    }
}
