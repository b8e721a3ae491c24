//! The typed request boundary. Each request body is one type, `#[derive(Deserialize,
//! JsonSchema)]`: the same declaration is what the hub reads and what the OpenAPI document
//! shows. Its members are [`Field`]s, which never fail the read: a wrong value is recorded,
//! so that every problem of a body (unknown members, missing ones, wrong types, bad values)
//! is named at once in the problem+json `invalidParams` list and a client fixes them all
//! together. A member is required exactly when it has no `#[serde(default)]`, for the
//! reader and the schema alike; unknown members are found against the derived schema, and
//! the read-only members of the resource's representation may be sent back (ignored).

use std::any::TypeId;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock, RwLock};

use axum::extract::{FromRequest, FromRequestParts, Request};
use http::request::Parts;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{DeserializeOwned, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::JsonBody;
use crate::problem::{ApiError, InvalidParam};

/// One member of a request body as it was read.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Field<T> {
    /// Left out.
    #[default]
    Absent,
    /// `null` (or, for a required member, left out: serde cannot tell the two apart there).
    Null,
    /// A value of the member's type.
    Given(T),
    /// A value of another type, or one the type refuses: as it was sent.
    Wrong(Value),
}

impl<T> Field<T> {
    /// The value of a member that must be there and not `null`; `what` says what it must be
    /// ("an RFC 3339 time such as 2026-11-20T08:00:00Z").
    pub fn required(self, name: &str, what: &str, problems: &mut Problems) -> Option<T> {
        match self {
            Field::Given(value) => Some(value),
            Field::Absent | Field::Null => {
                problems.add(name, format!("is required: {what}"));
                None
            }
            Field::Wrong(_) => {
                problems.add(name, format!("must be {what}"));
                None
            }
        }
    }

    /// The value of a member that may be left out (or be `null`, where its schema says it
    /// is `nullable`: the reader refuses a `null` elsewhere, see [`unknown_members`]).
    pub fn optional(self, name: &str, what: &str, problems: &mut Problems) -> Option<T> {
        match self {
            Field::Given(value) => Some(value),
            Field::Absent | Field::Null => None,
            Field::Wrong(_) => {
                problems.add(name, format!("must be {what}"));
                None
            }
        }
    }

    /// Whether the member was left out (a typed request leaves it out when it is sent on).
    pub fn is_absent(&self) -> bool {
        matches!(self, Field::Absent)
    }

    /// Whether the member was sent (even as `null` or a wrong value).
    pub fn is_sent(&self) -> bool {
        !matches!(self, Field::Absent)
    }

    /// The value, if one of the member's type was sent.
    pub fn given(&self) -> Option<&T> {
        match self {
            Field::Given(value) => Some(value),
            _ => None,
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Lenient<T>(PhantomData<T>);

        impl<'de, T: DeserializeOwned> Visitor<'de> for Lenient<T> {
            type Value = Field<T>;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("any JSON value")
            }

            fn visit_none<E>(self) -> Result<Field<T>, E> {
                Ok(Field::Null)
            }

            fn visit_unit<E>(self) -> Result<Field<T>, E> {
                Ok(Field::Null)
            }

            fn visit_some<D: Deserializer<'de>>(self, value: D) -> Result<Field<T>, D::Error> {
                let value = Value::deserialize(value)?;
                Ok(match T::deserialize(&value) {
                    Ok(read) => Field::Given(read),
                    Err(_) => Field::Wrong(value),
                })
            }
        }

        // Through `Option`: a required member left out reads as `Null` instead of failing
        // the whole body.
        deserializer.deserialize_option(Lenient(PhantomData))
    }
}

/// Written as it was read, so that a surface (the console) builds a typed request: a
/// member left out is skipped (`#[serde(skip_serializing_if = "Field::is_absent")]`).
impl<T: Serialize> Serialize for Field<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Given(value) => value.serialize(serializer),
            Field::Wrong(value) => value.serialize(serializer),
            Field::Absent | Field::Null => serializer.serialize_none(),
        }
    }
}

impl<T> From<T> for Field<T> {
    fn from(value: T) -> Self {
        Field::Given(value)
    }
}

/// A member's schema is its value's: `Field` is how it is read, not what it is.
impl<T: JsonSchema> JsonSchema for Field<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        generator.subschema_for::<T>()
    }
}

/// The problems of a body found so far.
#[derive(Debug, Default)]
pub struct Problems(Vec<InvalidParam>);

impl Problems {
    /// Records a problem of member `name` (`protocolsettings.method`, `types[2]`).
    pub fn add(&mut self, name: impl Into<String>, reason: impl Into<String>) {
        self.0.push(InvalidParam::new(name, reason));
    }

    /// How many problems were recorded.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no problem was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems, in the order they were found.
    pub fn into_vec(self) -> Vec<InvalidParam> {
        self.0
    }
}

/// A request body of a resource, read by [`Input`].
pub(crate) trait Body: DeserializeOwned + JsonSchema + 'static {
    /// What the body is, for the problem's detail ("the replay has problems").
    const NAME: &'static str;
    /// The resource's representation: its members may be sent back, and are ignored.
    type Representation: JsonSchema + 'static;
    /// What the body means once its values are checked.
    type Read;

    /// Checks the values read; `None` when a problem was recorded.
    fn read(self, problems: &mut Problems) -> Option<Self::Read>;
}

/// The schema of `T` as a client sends it, its definitions inline under `$defs`: derived
/// once per type, the first time a request needs it.
pub(crate) fn input_schema<T: JsonSchema + 'static>() -> Arc<Value> {
    type Schemas = RwLock<HashMap<TypeId, Arc<Value>>>;
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(Schemas::default);
    let key = TypeId::of::<T>();
    if let Some(found) = schemas.read().expect("the schemas' lock").get(&key) {
        return Arc::clone(found);
    }
    let schema = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    let mut schemas = schemas.write().expect("the schemas' lock");
    Arc::clone(schemas.entry(key).or_insert_with(|| Arc::new(schema)))
}

/// A whole number from `range` in a query parameter `name`, `default` when it is left out.
pub(crate) fn whole_number(
    field: &Field<String>,
    name: &str,
    range: std::ops::RangeInclusive<usize>,
    default: usize,
    problems: &mut Problems,
) -> usize {
    match field.given().map(|v| v.parse::<usize>()) {
        None => default,
        Some(Ok(n)) if range.contains(&n) => n,
        Some(_) => {
            problems.add(
                name,
                format!(
                    "must be a whole number from {} to {}",
                    range.start(),
                    range.end()
                ),
            );
            default
        }
    }
}

/// An ISO 8601 duration of at most `longest` (written `longest_text`: `PT60S`) in a query
/// parameter `name`, if it is given.
pub(crate) fn duration_at_most(
    field: &Field<String>,
    name: &str,
    (longest, longest_text): (std::time::Duration, &str),
    problems: &mut Problems,
) -> Option<std::time::Duration> {
    match field
        .given()
        .map(|v| knooppunt_store::parse_iso8601_duration(v))
    {
        None => None,
        Some(Ok(duration)) if duration <= longest => Some(duration),
        Some(Ok(_)) => {
            problems.add(name, format!("must be at most {longest_text}"));
            None
        }
        Some(Err(why)) => {
            problems.add(name, why);
            None
        }
    }
}

/// The members an object schema names, in its order.
pub(crate) fn members_of(schema: &Value) -> Vec<String> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

/// The schema of request body `T` as the hub reads it: `T`'s ([`input_schema`]) closed
/// over `R`, the resource's representation (see [`close_over`]); derived once per pair.
pub(crate) fn body_schema<T: JsonSchema + 'static, R: JsonSchema + 'static>() -> Arc<Value> {
    type Schemas = RwLock<HashMap<(TypeId, TypeId), Arc<Value>>>;
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(Schemas::default);
    let key = (TypeId::of::<T>(), TypeId::of::<R>());
    if let Some(found) = schemas.read().expect("the schemas' lock").get(&key) {
        return Arc::clone(found);
    }
    let mut schema = Value::clone(&input_schema::<T>());
    close_over(&mut schema, &input_schema::<R>());
    let mut schemas = schemas.write().expect("the schemas' lock");
    Arc::clone(schemas.entry(key).or_insert_with(|| Arc::new(schema)))
}

/// Closes the schema of a request body (`additionalProperties: false`) over the resource's
/// `representation`: each member of the representation the request does not name is added
/// `readOnly`, to say that it may be sent back and is ignored. The reader and the OpenAPI
/// document both close a body with this, so the document refuses what the hub refuses.
pub(crate) fn close_over(request: &mut Value, representation: &Value) {
    let Some(object) = request.as_object_mut() else {
        return;
    };
    object.insert("additionalProperties".into(), Value::Bool(false));
    let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for name in members_of(representation) {
        properties.entry(name).or_insert_with(|| {
            serde_json::json!({
                "readOnly": true,
                "description": "A read-only member of the resource's representation: it may \
                                be sent back, and is ignored."
            })
        });
    }
}

/// Records each member of `value` that its schema (`root`, as [`body_schema`] or
/// [`input_schema`] makes it) does not name, at any depth the schema closes
/// (`additionalProperties: false`, and the `body` itself), and each `null` sent for a
/// member whose schema is not `nullable` (a required member's `null` is reported by the
/// read as missing).
pub(crate) fn unknown_members(
    root: &Value,
    value: &Map<String, Value>,
    body: &str,
    problems: &mut Problems,
) {
    check_object(root, root, value, "", Some(body), problems);
}

fn check_object(
    root: &Value,
    schema: &Value,
    value: &Map<String, Value>,
    path: &str,
    body: Option<&str>,
    problems: &mut Problems,
) {
    let schema = resolve(root, schema);
    if let Some(variants) = schema.get("oneOf").and_then(Value::as_array) {
        // A tagged choice (`credentialtype`): the variant whose tag the value carries.
        if let Some(variant) = variants.iter().map(|v| resolve(root, v)).find(|variant| {
            variant
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|properties| {
                    properties.iter().any(|(name, property)| {
                        property
                            .get("const")
                            .is_some_and(|tag| value.get(name) == Some(tag))
                    })
                })
        }) {
            check_object(root, variant, value, path, body, problems);
        }
        return;
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let closed = body.is_some() || schema.get("additionalProperties") == Some(&Value::Bool(false));
    let required = |name: &str| {
        schema
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|names| names.iter().any(|n| n == name))
    };
    for (name, member) in value {
        let here = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        match properties.get(name) {
            Some(property) => match member {
                Value::Object(inner) => {
                    check_object(root, property, inner, &here, None, problems);
                }
                Value::Null if !required(name) && !nullable(property) => problems.add(
                    here,
                    "`null` is not a value of this member: leave the member out instead",
                ),
                _ => {}
            },
            None if closed => {
                let names: Vec<&str> = properties
                    .iter()
                    .filter(|(_, property)| property.get("readOnly") != Some(&Value::Bool(true)))
                    .map(|(name, _)| name.as_str())
                    .collect();
                let has = match body {
                    Some(body) => format!("{} has", article(body)),
                    None => "it has".to_owned(),
                };
                problems.add(here, format!("unknown member; {has} {}", listed(&names)));
            }
            None => {}
        }
    }
}

/// Whether a member of `schema` may be `null`: it says `nullable` (OpenAPI 3.0), has `null`
/// among its types or choices (JSON Schema), or takes any value.
fn nullable(schema: &Value) -> bool {
    const CONSTRAINING: [&str; 7] = ["type", "$ref", "allOf", "anyOf", "oneOf", "enum", "const"];
    let Some(object) = schema.as_object() else {
        return schema == &Value::Bool(true);
    };
    object.get("nullable") == Some(&Value::Bool(true))
        || match object.get("type") {
            Some(Value::String(one)) => one == "null",
            Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
            _ => false,
        }
        || ["anyOf", "oneOf"].iter().any(|choice| {
            object
                .get(*choice)
                .and_then(Value::as_array)
                .is_some_and(|options| options.iter().any(nullable))
        })
        || !CONSTRAINING
            .iter()
            .any(|keyword| object.contains_key(*keyword))
}

/// The schema a `$ref` within `root` points at (`#/$defs/Name`); others as they are.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => reference
            .strip_prefix("#/$defs/")
            .and_then(|name| root.get("$defs")?.get(name))
            .unwrap_or(schema),
        None => schema,
    }
}

/// Reads `body` as a `T` (a `body` of this API, `name`d for the messages), recording its
/// unknown members; `None` when it is no object or not even a `T`.
pub(crate) fn typed<T: DeserializeOwned + JsonSchema + 'static>(
    body: &Value,
    name: &str,
    problems: &mut Problems,
) -> Option<T> {
    let Some(object) = body.as_object() else {
        problems.add("", format!("the {name} must be a JSON object"));
        return None;
    };
    unknown_members(&input_schema::<T>(), object, name, problems);
    match T::deserialize(body) {
        Ok(typed) => Some(typed),
        Err(error) => {
            problems.add("", error.to_string());
            None
        }
    }
}

/// Reads `body` as a `T`: every problem of it, or what it means.
pub(crate) fn read<T: Body>(body: &Value) -> Result<T::Read, ApiError> {
    let schema = body_schema::<T, T::Representation>();
    let Some(object) = body.as_object() else {
        let names = members_of(&input_schema::<T>());
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        return Err(ApiError::invalid(
            format!("the {} must be a JSON object", T::NAME),
            vec![InvalidParam::new(
                "",
                format!("send an object with {}", listed(&names)),
            )],
        ));
    };
    let mut problems = Problems::default();
    unknown_members(&schema, object, T::NAME, &mut problems);
    let read = match T::deserialize(body) {
        Ok(typed) => typed.read(&mut problems),
        Err(error) => {
            problems.add("", error.to_string());
            None
        }
    };
    match read {
        Some(value) if problems.is_empty() => Ok(value),
        _ => Err(ApiError::invalid(
            format!("the {} has problems; see invalidParams", T::NAME),
            problems.into_vec(),
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

/// A request body read as `T` and checked (see [`read`]); the body is JSON as [`JsonBody`]
/// reads it.
#[derive(Debug)]
pub(crate) struct Input<T: Body>(pub(crate) T::Read);

impl<S: Send + Sync, T: Body> FromRequest<S> for Input<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let JsonBody(body) = JsonBody::from_request(request, state).await?;
        read::<T>(&body).map(Input)
    }
}

/// A query string read as `T` (its parameters are `T`'s members, each a text: a member
/// whose schema says integer is a [`Field<String>`] read as a number by `T::read`) and
/// checked: every problem of it at once, as a body's. The same type describes the
/// operation's query parameters ([`query_parameters`]). A parameter given twice is a
/// problem: which one counts would be a guess.
#[derive(Debug)]
pub(crate) struct Params<T: Body>(pub(crate) T::Read);

impl<S: Send + Sync, T: Body> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let mut problems = Problems::default();
        let mut object = Map::new();
        let query = parts.uri.query().unwrap_or_default();
        for (name, value) in form_urlencoded::parse(query.as_bytes()) {
            if object
                .insert(name.clone().into_owned(), Value::String(value.into_owned()))
                .is_some()
            {
                problems.add(name, "is given twice; give it once");
            }
        }
        let members = members_of(&input_schema::<T>());
        let names: Vec<&str> = members.iter().map(String::as_str).collect();
        for name in object.keys() {
            if !members.contains(name) {
                problems.add(
                    name.as_str(),
                    format!(
                        "unknown query parameter; the parameters are {}",
                        listed(&names)
                    ),
                );
            }
        }
        let read = match T::deserialize(Value::Object(object)) {
            Ok(typed) => typed.read(&mut problems),
            Err(error) => {
                problems.add("", error.to_string());
                None
            }
        };
        match read {
            Some(value) if problems.is_empty() => Ok(Params(value)),
            _ => Err(ApiError::invalid(
                "the query is invalid",
                problems.into_vec(),
            )),
        }
    }
}

/// The OpenAPI query parameters of the query string `T` ([`Params`]): one per member, in
/// order, required when the member is, with its description and schema.
pub(crate) fn query_parameters<T: JsonSchema>() -> Vec<Value> {
    let schema = SchemaSettings::openapi3()
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let mut property = property.clone();
            let description = property
                .as_object_mut()
                .and_then(|p| p.remove("description"))
                .unwrap_or(Value::Null);
            // A parameter left out is absent, not `null`.
            if let Some(p) = property.as_object_mut()
                && p.get("default") == Some(&Value::Null)
            {
                p.remove("default");
            }
            let mut parameter = serde_json::json!({
                "name": name, "in": "query", "required": required.contains(&name.as_str()),
                "schema": property,
            });
            if !description.is_null() {
                parameter["description"] = description;
            }
            parameter
        })
        .collect()
}

/// An RFC 3339 time in a body, as milliseconds since the Unix epoch: a bound of a window
/// of what the hub holds, so a time before 1970 is 1970's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Time(pub u64);

impl Serialize for Time {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&knooppunt_event::timestamp::utc_timestamp(self.0))
    }
}

impl<'de> serde::Deserialize<'de> for Time {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        knooppunt_event::timestamp::epoch_millis_bound(&text)
            .map(Time)
            .ok_or_else(|| serde::de::Error::custom("not an RFC 3339 time"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize, JsonSchema)]
    struct Window {
        #[schemars(with = "String")]
        from: Field<Time>,
        #[serde(default)]
        #[schemars(with = "String")]
        until: Field<Time>,
    }

    #[derive(Debug, JsonSchema)]
    #[allow(dead_code)]
    struct WindowOut {
        id: String,
        from: String,
    }

    impl Body for Window {
        const NAME: &'static str = "replay";
        type Representation = WindowOut;
        type Read = (u64, Option<u64>);

        fn read(self, problems: &mut Problems) -> Option<Self::Read> {
            let from = self.from.required("from", "an RFC 3339 time", problems);
            let until = self.until.optional("until", "an RFC 3339 time", problems);
            Some((from?.0, until.map(|t| t.0)))
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
    fn null_is_missing_where_a_value_is_required_and_refused_where_not_nullable() {
        assert_eq!(
            problems(json!({"from": null})),
            [(
                "from".to_owned(),
                "is required: an RFC 3339 time".to_owned()
            )]
        );
        assert_eq!(
            problems(json!({})),
            [(
                "from".to_owned(),
                "is required: an RFC 3339 time".to_owned()
            )]
        );
        let window = read::<Window>(&json!({"from": "2026-11-20T08:00:00Z", "id": "x"})).unwrap();
        assert_eq!(window, (1_795_161_600_000, None));
        assert_eq!(
            problems(json!({"from": "2026-11-20T08:00:00Z", "until": null})),
            [(
                "until".to_owned(),
                "`null` is not a value of this member: leave the member out instead".to_owned()
            )]
        );
        assert_eq!(
            problems(json!([1])),
            [(
                String::new(),
                "send an object with `from` and `until`".to_owned()
            )]
        );
    }

    #[test]
    fn the_schema_requires_exactly_the_members_without_a_default() {
        let schema = input_schema::<Window>();
        assert_eq!(schema["required"], json!(["from"]));
        assert_eq!(members_of(&schema), ["from", "until"]);
    }

    #[allow(dead_code)]
    #[derive(Debug, Deserialize, JsonSchema)]
    struct Outer {
        #[serde(default)]
        inner: Field<Inner>,
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    #[allow(dead_code)]
    #[schemars(extend("additionalProperties" = false))]
    struct Inner {
        #[serde(default)]
        a: Field<String>,
    }

    #[test]
    fn unknown_members_are_found_in_closed_objects_at_any_depth() {
        let schema = input_schema::<Outer>();
        let body = json!({"inner": {"a": "x", "b": 1}, "c": 2, "id": 3});
        let mut found = Problems::default();
        unknown_members(&schema, body.as_object().unwrap(), "outer", &mut found);
        let found = found.into_vec();
        let names: Vec<&str> = found.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["c", "id", "inner.b"]);
        assert_eq!(found[0].reason, "unknown member; an outer has `inner`");
    }

    #[derive(Debug, JsonSchema)]
    #[allow(dead_code)]
    struct OuterOut {
        id: String,
        inner: Option<String>,
    }

    #[test]
    fn a_body_is_closed_over_its_representation_and_refuses_null_where_its_schema_does() {
        let schema = body_schema::<Outer, OuterOut>();
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["properties"]["id"]["readOnly"], json!(true));
        let found = |body: Value| {
            let mut found = Problems::default();
            unknown_members(&schema, body.as_object().unwrap(), "outer", &mut found);
            found.into_vec()
        };
        // The representation's read-only members come back ignored, even as `null`.
        assert!(found(json!({"id": "x", "inner": {"a": "y"}})).is_empty());
        assert!(found(json!({"id": null})).is_empty());
        // A member whose schema is not nullable is left out, never `null`; in a nested
        // object too.
        let nulls = found(json!({"inner": null}));
        assert_eq!(nulls.len(), 1);
        assert_eq!(nulls[0].name, "inner");
        assert!(
            nulls[0]
                .reason
                .starts_with("`null` is not a value of this member")
        );
        assert_eq!(found(json!({"inner": {"a": null}}))[0].name, "inner.a");
        // The list of members a body has leaves the ignored ones out.
        assert_eq!(
            found(json!({"colour": 1}))[0].reason,
            "unknown member; an outer has `inner`"
        );
    }

    #[test]
    fn nullable_is_read_in_both_dialects() {
        assert!(nullable(&json!({"type": "string", "nullable": true})));
        assert!(nullable(&json!({"type": ["string", "null"]})));
        assert!(nullable(
            &json!({"anyOf": [{"$ref": "#/x"}, {"type": "null"}]})
        ));
        assert!(nullable(&json!({"description": "anything"})));
        assert!(!nullable(&json!({"type": "string"})));
        assert!(!nullable(&json!({"$ref": "#/x"})));
        assert!(!nullable(&json!({"allOf": [{"$ref": "#/x"}]})));
    }
}
