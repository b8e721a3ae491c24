//! Whether a subscription's criteria can match some event of a scope: events whose
//! `source` starts with a prefix and whose `type` is a given one (or starts with it). What
//! approval by a catalog entry's owner asks of every subscription.
//!
//! Decided conservatively: `false` only when no event of the scope can match, judged from
//! `source`, `types` and the `exact`, `prefix` and `suffix` conditions on `source` and `type`
//! in the dialects (through `all` and `any`). A condition on any other attribute, `not`, and
//! CESQL count as "can match": whether a CESQL expression can be true for some event of a
//! scope is not decided here, so such a subscription is always asked about.

use crate::dialect::{Criteria, Filter};

/// Events of a source prefix and a type, exact or a prefix of types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope<'a> {
    pub source_prefix: &'a str,
    pub event_type: &'a str,
    /// `event_type` is a prefix of the scope's types.
    pub type_is_prefix: bool,
}

impl Scope<'_> {
    /// Some event of the scope has a `source` equal to `value`.
    fn source_can_equal(&self, value: &str) -> bool {
        value.starts_with(self.source_prefix)
    }

    /// Some event of the scope has a `source` starting with `value`.
    fn source_can_start_with(&self, value: &str) -> bool {
        value.starts_with(self.source_prefix) || self.source_prefix.starts_with(value)
    }

    /// Some event of the scope has a `type` equal to `value`.
    fn type_can_equal(&self, value: &str) -> bool {
        if self.type_is_prefix {
            value.starts_with(self.event_type)
        } else {
            value == self.event_type
        }
    }

    /// Some event of the scope has a `type` starting with `value`.
    fn type_can_start_with(&self, value: &str) -> bool {
        if self.type_is_prefix {
            value.starts_with(self.event_type) || self.event_type.starts_with(value)
        } else {
            self.event_type.starts_with(value)
        }
    }

    /// Some event of the scope has a `type` ending with `value`.
    fn type_can_end_with(&self, value: &str) -> bool {
        self.type_is_prefix || self.event_type.ends_with(value)
    }

    fn filter_can_match(&self, filter: &Filter) -> bool {
        let each = |map: &std::collections::BTreeMap<String, String>,
                    source: &dyn Fn(&str) -> bool,
                    ty: &dyn Fn(&str) -> bool| {
            map.iter().all(|(name, value)| match name.as_str() {
                "source" => source(value),
                "type" => ty(value),
                _ => true,
            })
        };
        match filter {
            Filter::Exact(map) => each(map, &|v| self.source_can_equal(v), &|v| {
                self.type_can_equal(v)
            }),
            Filter::Prefix(map) => each(map, &|v| self.source_can_start_with(v), &|v| {
                self.type_can_start_with(v)
            }),
            Filter::Suffix(map) => each(map, &|_| true, &|v| self.type_can_end_with(v)),
            Filter::All(filters) => filters.iter().all(|f| self.filter_can_match(f)),
            Filter::Any(filters) => {
                filters.is_empty() || filters.iter().any(|f| self.filter_can_match(f))
            }
            Filter::Not(_) | Filter::Sql(_) => true,
        }
    }
}

impl Criteria {
    /// Whether some event of `scope` could match these criteria (conservatively: see the
    /// module's documentation).
    pub fn can_match(&self, scope: &Scope<'_>) -> bool {
        self.source
            .as_deref()
            .is_none_or(|source| scope.source_can_equal(source))
            && self
                .types
                .as_ref()
                .is_none_or(|types| types.iter().any(|ty| scope.type_can_equal(ty)))
            && self.filters.iter().all(|f| scope.filter_can_match(f))
    }
}
