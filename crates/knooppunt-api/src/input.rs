//! The typed request boundary: a JSON body read as a type of its resource ([`Input`]),
//! member by member with serde, every problem collected into the problem+json
//! `invalidParams` list (unknown members, missing ones, wrong types, bad values), so that a
//! client fixes them all at once. A `null` is refused where a value is required; an optional
//! member may be `null` or left out alike.

use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::JsonBody;
use crate::problem::{ApiError, InvalidParam};

/// A request body of a resource, read by [`Input`]; its schema (in the OpenAPI document)
/// names the members it reads (`MEMBERS`, tested in `api/mod.rs`).
pub(crate) trait Body: Sized + schemars::JsonSchema {
    /// What the body is, for the problem's detail ("the replay has problems").
    const NAME: &'static str;
    /// The members it has, in the order the API documents them.
    const MEMBERS: &'static [&'static str];
    /// Members of the resource's representation a client may send back (ignored).
    const READ_ONLY: &'static [&'static str] = &[];

    /// Reads the body from its members; `None` when a problem was recorded.
    fn read(members: &mut Members<'_>) -> Option<Self>;
}

/// The members of a body being read, and the problems found so far.
#[derive(Debug)]
pub(crate) struct Members<'a> {
    object: &'a Map<String, Value>,
    problems: Vec<InvalidParam>,
}

impl<'a> Members<'a> {
    /// Member `name`, which must be there and not `null`; `what` says what it must be
    /// ("an RFC 3339 time such as 2026-11-20T08:00:00Z").
    pub(crate) fn required<T: DeserializeOwned>(&mut self, name: &str, what: &str) -> Option<T> {
        match self.object.get(name) {
            None | Some(Value::Null) => {
                self.problem(name, format!("is required: {what}"));
                None
            }
            Some(value) => self.value(name, value, what),
        }
    }

    /// Member `name` if it is there and not `null`.
    pub(crate) fn optional<T: DeserializeOwned>(&mut self, name: &str, what: &str) -> Option<T> {
        match self.object.get(name) {
            None | Some(Value::Null) => None,
            Some(value) => self.value(name, value, what),
        }
    }

    fn value<T: DeserializeOwned>(&mut self, name: &str, value: &Value, what: &str) -> Option<T> {
        match T::deserialize(value) {
            Ok(read) => Some(read),
            Err(_) => {
                self.problem(name, format!("must be {what}"));
                None
            }
        }
    }

    /// Records a problem of member `name` (found by a check of the body's own).
    pub(crate) fn problem(&mut self, name: &str, reason: impl Into<String>) {
        self.problems.push(InvalidParam::new(name, reason));
    }

    /// Whether no problem was recorded.
    pub(crate) fn fine(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Reads `body` as a `T`: every problem of it, or the value.
pub(crate) fn read<T: Body>(body: &Value) -> Result<T, ApiError> {
    let Some(object) = body.as_object() else {
        return Err(ApiError::invalid(
            format!("the {} must be a JSON object", T::NAME),
            vec![InvalidParam::new(
                "",
                format!("send an object with {}", listed(T::MEMBERS)),
            )],
        ));
    };
    let mut members = Members {
        object,
        problems: Vec::new(),
    };
    for name in object.keys() {
        if !T::MEMBERS.contains(&name.as_str()) && !T::READ_ONLY.contains(&name.as_str()) {
            members.problem(
                name,
                format!(
                    "unknown member; {} has {}",
                    article(T::NAME),
                    listed(T::MEMBERS)
                ),
            );
        }
    }
    let read = T::read(&mut members);
    match read {
        Some(value) if members.fine() => Ok(value),
        _ => Err(ApiError::invalid(
            format!("the {} has problems; see invalidParams", T::NAME),
            members.problems,
        )),
    }
}

/// `a replay`, `an approval decision`.
fn article(name: &str) -> String {
    let vowel = name.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {name}", if vowel { "an" } else { "a" })
}

/// `from and until`, `state, reason and delay`.
fn listed(members: &[&str]) -> String {
    match members {
        [] => "no members".into(),
        [one] => format!("`{one}`"),
        [rest @ .., last] => format!(
            "{} and `{last}`",
            rest.iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A request body read as `T` (see [`read`]); the body is JSON as [`JsonBody`] reads it.
#[derive(Debug)]
pub(crate) struct Input<T>(pub(crate) T);

impl<S: Send + Sync, T: Body> FromRequest<S> for Input<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let JsonBody(body) = JsonBody::from_request(request, state).await?;
        read(&body).map(Input)
    }
}

/// An RFC 3339 time in a body, as milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Time(pub(crate) u64);

impl<'de> serde::Deserialize<'de> for Time {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        knooppunt_event::timestamp::epoch_millis(&text)
            .map(Time)
            .ok_or_else(|| serde::de::Error::custom("not an RFC 3339 time"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, schemars::JsonSchema)]
    struct Window {
        from: u64,
        until: Option<u64>,
    }

    impl Body for Window {
        const NAME: &'static str = "replay";
        const MEMBERS: &'static [&'static str] = &["from", "until"];
        const READ_ONLY: &'static [&'static str] = &["id"];

        fn read(members: &mut Members<'_>) -> Option<Self> {
            let from = members.required::<Time>("from", "an RFC 3339 time");
            let until = members.optional::<Time>("until", "an RFC 3339 time");
            Some(Window {
                from: from?.0,
                until: until.map(|t| t.0),
            })
        }
    }

    fn problems(body: Value) -> Vec<(String, String)> {
        match read::<Window>(&body) {
            Ok(window) => panic!("read {window:?}"),
            Err(ApiError::InvalidInput { invalid_params, .. }) => invalid_params
                .into_iter()
                .map(|p| (p.name, p.reason))
                .collect(),
            Err(other) => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_problem_is_listed_at_once() {
        let found = problems(json!({"from": 5, "until": "yesterday", "colour": "red"}));
        let names: Vec<&str> = found.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["colour", "from", "until"]);
        assert_eq!(
            found[0].1,
            "unknown member; a replay has `from` and `until`"
        );
        assert_eq!(found[1].1, "must be an RFC 3339 time");
    }

    #[test]
    fn null_is_refused_where_a_value_is_required_and_absent_elsewhere() {
        assert_eq!(
            problems(json!({"from": null})),
            [(
                "from".to_owned(),
                "is required: an RFC 3339 time".to_owned()
            )]
        );
        let window =
            read::<Window>(&json!({"from": "2026-11-20T08:00:00Z", "until": null, "id": "x"}))
                .unwrap();
        assert_eq!(window.until, None);
        assert_eq!(window.from, 1_795_161_600_000);
        assert_eq!(
            problems(json!([1])),
            [(
                String::new(),
                "send an object with `from` and `until`".to_owned()
            )]
        );
    }
}
