//! Validation: the rules an event is checked against and the findings they produce.
//!
//! Two layers:
//! - The MUST rules of the core specification are enforced while an event is decoded or
//!   built ([`crate::EventBuilder`]); an event that breaks one is never constructed, and every
//!   broken rule is reported at once as [`Violations`].
//! - [`findings`] looks at a valid [`crate::Event`] and reports SHOULD-level advice of the core
//!   specification and the NL GOV profile at the configured [`ProfileLevel`].
//!
//! Every [`Violation`] names the attribute, the [`Rule`] and the section of the specification
//! the rule comes from, and serialises to JSON for problem+json responses.

mod profile;
mod rule;
pub mod syntax;

pub use profile::{ProfileLevel, UnknownProfileLevel};
pub use rule::{Requirement, Rule};

use std::fmt;

use serde::Serialize;

use crate::Event;

/// Whether a finding rejects the event or is reported alongside an accepted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem with one attribute of one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The attribute (or `data`, `data_base64`, or an HTTP header name) the problem is in;
    /// empty when it concerns the message as a whole.
    pub attribute: String,
    pub rule: Rule,
    /// What is wrong and what to do about it, in words.
    pub detail: String,
    /// The document and section the rule comes from.
    pub spec: &'static str,
    pub severity: Severity,
}

impl Violation {
    /// A violation with the rule's own severity.
    pub fn new(attribute: impl Into<String>, rule: Rule, detail: impl Into<String>) -> Self {
        Violation {
            attribute: attribute.into(),
            rule,
            detail: detail.into(),
            spec: rule.spec(),
            severity: match rule.requirement() {
                Requirement::Must => Severity::Error,
                Requirement::Should => Severity::Warning,
            },
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.attribute.is_empty() {
            write!(f, "{} ({})", self.detail, self.spec)
        } else {
            write!(f, "`{}`: {} ({})", self.attribute, self.detail, self.spec)
        }
    }
}

/// All the errors found in one event (never empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Violations(Vec<Violation>);

impl Violations {
    /// Wraps a list of findings if it contains an error.
    pub(crate) fn from_errors(violations: Vec<Violation>) -> Result<(), Violations> {
        if violations.iter().any(|v| v.severity == Severity::Error) {
            Err(Violations(violations))
        } else {
            Ok(())
        }
    }

    /// Problems found outside this crate (such as a catalog entry's data schema); `None`
    /// when there are none.
    pub fn of(violations: Vec<Violation>) -> Option<Violations> {
        (!violations.is_empty()).then_some(Violations(violations))
    }

    pub(crate) fn one(violation: Violation) -> Self {
        Violations(vec![violation])
    }

    pub fn as_slice(&self) -> &[Violation] {
        &self.0
    }

    pub fn into_vec(self) -> Vec<Violation> {
        self.0
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Violation> {
        self.0.iter()
    }

    /// Whether any violation is of this rule.
    pub fn contains(&self, rule: Rule) -> bool {
        self.0.iter().any(|violation| violation.rule == rule)
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, violation) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{violation}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Violations {}

impl<'a> IntoIterator for &'a Violations {
    type Item = &'a Violation;
    type IntoIter = std::slice::Iter<'a, Violation>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// Checks a valid event against the SHOULD rules of the core specification and the NL GOV
/// profile at `level`.
///
/// At [`ProfileLevel::Enforce`] a broken MUST of the profile is an error
/// ([`Severity::Error`]): the caller rejects the event. At [`ProfileLevel::Warn`] every finding
/// is a warning. Core advice (such as attribute names over 20 characters) is always a warning.
pub fn findings(event: &Event, level: ProfileLevel) -> Vec<Violation> {
    let mut found = Vec::new();
    for name in event.extensions().keys() {
        syntax::advise_attribute_name(name, &mut found);
    }
    profile::check(event, level, &mut found);
    found
}

/// Like [`findings`], but fails with the errors when the profile level rejects the event.
/// The warnings are returned when it does not.
pub fn check(event: &Event, level: ProfileLevel) -> Result<Vec<Violation>, Violations> {
    let found = findings(event, level);
    Violations::from_errors(found.clone())?;
    Ok(found)
}
