//! The filter dialects of the CloudEvents Subscriptions API (subscriptions/spec.md section
//! 3.2.4): `exact`, `prefix`, `suffix`, `all`, `any`, `not` and `sql`, and the `source` and
//! `types` properties of a subscription ([`Criteria`]).

use std::collections::BTreeMap;

use knooppunt_event::{AttributeRef, Event};
use serde_json::{Map, Value};

use crate::cesql::Expression;
use crate::cost::{EvalLimits, Meter};
use crate::limits::{Budget, Limits};

/// One filter expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// Every named attribute equals its value (case-sensitive).
    Exact(BTreeMap<String, String>),
    /// Every named attribute starts with its value.
    Prefix(BTreeMap<String, String>),
    /// Every named attribute ends with its value.
    Suffix(BTreeMap<String, String>),
    /// All nested filters match (at least one).
    All(Vec<Filter>),
    /// At least one nested filter matches (at least one).
    Any(Vec<Filter>),
    Not(Box<Filter>),
    /// A CESQL expression that yields `TRUE` without errors.
    Sql(Expression),
}

/// A problem with a filter, located by a path such as `filters[1].all[0].exact`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct FilterError {
    pub path: String,
    pub message: String,
}

/// The names of the dialects, for messages and documentation.
pub const DIALECTS: [&str; 7] = ["exact", "prefix", "suffix", "all", "any", "not", "sql"];

impl Filter {
    /// Reads one filter from its JSON form within `limits`, reporting every problem found.
    pub fn from_json(
        value: &Value,
        path: &str,
        limits: &Limits,
    ) -> Result<Filter, Vec<FilterError>> {
        let mut errors = Vec::new();
        let mut budget = Budget::new(*limits);
        let filter = read(value, path, 1, &mut budget, &mut errors);
        match filter {
            Some(filter) if errors.is_empty() => Ok(filter),
            _ => Err(errors),
        }
    }

    /// Reads the `filters` array of a subscription within `limits` (its nodes together).
    pub fn list_from_json(
        values: &[Value],
        path: &str,
        limits: &Limits,
    ) -> Result<Vec<Filter>, Vec<FilterError>> {
        let mut errors = Vec::new();
        let mut budget = Budget::new(*limits);
        let mut filters = Vec::with_capacity(values.len());
        for (i, value) in values.iter().enumerate() {
            let path = format!("{path}[{i}]");
            // Past the node limit, the rest would only repeat that error.
            if let Some(filter) = read(value, &path, 1, &mut budget, &mut errors) {
                filters.push(filter);
            } else if budget.exhausted() {
                break;
            }
        }
        if errors.is_empty() {
            Ok(filters)
        } else {
            Err(errors)
        }
    }

    /// The JSON form, as the Subscriptions API writes it.
    pub fn to_json(&self) -> Value {
        let (dialect, body) = match self {
            Filter::Exact(map) => ("exact", attribute_map(map)),
            Filter::Prefix(map) => ("prefix", attribute_map(map)),
            Filter::Suffix(map) => ("suffix", attribute_map(map)),
            Filter::All(filters) => ("all", filters.iter().map(Filter::to_json).collect()),
            Filter::Any(filters) => ("any", filters.iter().map(Filter::to_json).collect()),
            Filter::Not(filter) => ("not", filter.to_json()),
            Filter::Sql(expression) => ("sql", Value::String(expression.as_str().to_owned())),
        };
        let mut object = Map::new();
        object.insert(dialect.to_owned(), body);
        Value::Object(object)
    }

    /// Whether the event matches, within the default [`EvalLimits`].
    pub fn matches(&self, event: &Event) -> bool {
        self.matches_metered(event, &mut Meter::new(EvalLimits::DEFAULT))
    }

    /// Whether the event matches, charging `meter` (each value compared costs its length);
    /// `false` once the meter's budget is spent.
    pub fn matches_metered(&self, event: &Event, meter: &mut Meter) -> bool {
        let mut compare = |map: &BTreeMap<String, String>, test: fn(&str, &str) -> bool| {
            map.iter().all(|(name, expected)| {
                let value = event.attribute(name);
                let cost = match &value {
                    Some(AttributeRef::String(value)) => value.len().min(expected.len()),
                    _ => expected.len(),
                };
                meter.charge(1 + cost as u64)
                    && match value {
                        Some(AttributeRef::String(value)) => test(value, expected),
                        Some(other) => test(&other.to_string(), expected),
                        None => false,
                    }
            })
        };
        let matched = match self {
            Filter::Exact(map) => compare(map, |value, expected| value == expected),
            Filter::Prefix(map) => compare(map, |value, expected| value.starts_with(expected)),
            Filter::Suffix(map) => compare(map, |value, expected| value.ends_with(expected)),
            Filter::All(filters) => filters.iter().all(|f| f.matches_metered(event, meter)),
            Filter::Any(filters) => filters.iter().any(|f| f.matches_metered(event, meter)),
            Filter::Not(filter) => !filter.matches_metered(event, meter),
            Filter::Sql(expression) => expression.matches_metered(event, meter),
        };
        matched && !meter.exceeded()
    }
}

fn attribute_map(map: &BTreeMap<String, String>) -> Value {
    Value::Object(
        map.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

fn read(
    value: &Value,
    path: &str,
    depth: usize,
    budget: &mut Budget,
    errors: &mut Vec<FilterError>,
) -> Option<Filter> {
    let mut fail = |message: String| {
        errors.push(FilterError {
            path: path.to_owned(),
            message,
        });
        None
    };
    if let Err(exceeded) = budget.enter(depth).and_then(|()| budget.take()) {
        return fail(exceeded.to_string());
    }
    let Some(object) = value.as_object() else {
        return fail("a filter must be a JSON object with one dialect, e.g. {\"exact\": {\"type\": \"nl.x\"}}".into());
    };
    if object.len() != 1 {
        return fail(format!(
            "a filter must have exactly one dialect member, found {}",
            object.len()
        ));
    }
    let (dialect, body) = object.iter().next().expect("one member");
    let path = format!("{path}.{dialect}");
    let mut fail = |message: String| {
        errors.push(FilterError {
            path: path.clone(),
            message,
        });
        None
    };
    match dialect.as_str() {
        "exact" | "prefix" | "suffix" => {
            let Some(map) = body.as_object() else {
                return fail("must be an object of attribute names to string values".into());
            };
            if map.is_empty() {
                return fail("must name at least one attribute".into());
            }
            let mut attributes = BTreeMap::new();
            let mut problems = Vec::new();
            for (name, value) in map {
                let valid_name = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
                match value.as_str() {
                    _ if !valid_name => problems.push(format!(
                        "`{name}` is not a CloudEvents attribute name (a-z and 0-9 only)"
                    )),
                    Some("") => problems.push(format!("the value for `{name}` must not be empty")),
                    Some(text) => {
                        attributes.insert(name.clone(), text.to_owned());
                    }
                    None => problems.push(format!("the value for `{name}` must be a string")),
                }
            }
            if !problems.is_empty() {
                return fail(problems.join("; "));
            }
            Some(match dialect.as_str() {
                "exact" => Filter::Exact(attributes),
                "prefix" => Filter::Prefix(attributes),
                _ => Filter::Suffix(attributes),
            })
        }
        "all" | "any" => {
            let Some(list) = body.as_array() else {
                return fail("must be an array of filters".into());
            };
            if list.is_empty() {
                return fail("must contain at least one filter".into());
            }
            let mut nested = Some(Vec::with_capacity(list.len()));
            for (i, value) in list.iter().enumerate() {
                match read(value, &format!("{path}[{i}]"), depth + 1, budget, errors) {
                    Some(filter) => {
                        if let Some(nested) = &mut nested {
                            nested.push(filter);
                        }
                    }
                    None if budget.exhausted() => return None,
                    None => nested = None,
                }
            }
            let nested = nested?;
            Some(if dialect == "all" {
                Filter::All(nested)
            } else {
                Filter::Any(nested)
            })
        }
        "not" => {
            read(body, &path, depth + 1, budget, errors).map(|filter| Filter::Not(Box::new(filter)))
        }
        "sql" => {
            let Some(text) = body.as_str() else {
                return fail("must be a string holding a CESQL expression".into());
            };
            match Expression::compile_within(text, budget) {
                Ok(expression) => Some(Filter::Sql(expression)),
                Err(error) => fail(format!("invalid CESQL expression: {error}")),
            }
        }
        other => fail(format!(
            "unknown filter dialect `{other}`; supported: {}",
            DIALECTS.join(", ")
        )),
    }
}

/// What a subscription selects: its `source`, `types` and `filters`, all of which must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Criteria {
    /// The event's `source` must equal this.
    pub source: Option<String>,
    /// The event's `type` must be one of these; `None` for any type (an empty list matches
    /// no event).
    pub types: Option<Vec<String>>,
    pub filters: Vec<Filter>,
}

impl Criteria {
    /// Whether the event matches, within the default [`EvalLimits`].
    pub fn matches(&self, event: &Event) -> bool {
        self.matches_metered(event, &mut Meter::new(EvalLimits::DEFAULT))
    }

    /// Whether the event matches, charging `meter`; `false` once its budget is spent (ask
    /// [`Meter::exceeded`] to tell that from a filter that did not match).
    pub fn matches_metered(&self, event: &Event, meter: &mut Meter) -> bool {
        self.source
            .as_deref()
            .is_none_or(|source| source == event.source())
            && self
                .types
                .as_ref()
                .is_none_or(|types| types.iter().any(|ty| ty == event.ty()))
            && self
                .filters
                .iter()
                .all(|filter| filter.matches_metered(event, meter))
    }
}
