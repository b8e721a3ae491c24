//! Building events: the one place where attribute values are checked against the core
//! specification, used by the decoders and by [`EventBuilder`] alike.

use std::collections::{BTreeMap, HashSet};

use crate::data::{Data, is_json_media_type};
use crate::event::{AttributeValue, CORE_ATTRIBUTES, Event, SPEC_VERSION};
use crate::validate::{Rule, Violation, Violations, syntax};

/// An attribute value as a format delivered it, before it is checked.
#[derive(Debug, Clone)]
pub(crate) enum RawAttribute {
    String(String),
    /// A JSON number, as its exact text.
    Number(String),
    Boolean(bool),
    /// A JSON value no attribute may have (`"an object"`, `"an array"`).
    Other(&'static str),
}

impl From<AttributeValue> for RawAttribute {
    fn from(value: AttributeValue) -> Self {
        match value {
            AttributeValue::String(value) => RawAttribute::String(value),
            AttributeValue::Integer(value) => RawAttribute::Number(value.to_string()),
            AttributeValue::Boolean(value) => RawAttribute::Boolean(value),
        }
    }
}

/// Collects attributes one by one, recording every violation, and yields the event if there
/// were none.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    violations: Vec<Violation>,
    seen: HashSet<String>,
    specversion: Option<String>,
    core: BTreeMap<&'static str, String>,
    extensions: BTreeMap<String, AttributeValue>,
}

impl Assembler {
    pub(crate) fn report(&mut self, violation: Violation) {
        self.violations.push(violation);
    }

    pub(crate) fn has_errors(&self) -> bool {
        !self.violations.is_empty()
    }

    /// The `datacontenttype` set so far, if it was valid.
    pub(crate) fn datacontenttype(&self) -> Option<&str> {
        self.core.get("datacontenttype").map(String::as_str)
    }

    /// Sets one attribute; `null` values are not passed here (they mean unset).
    pub(crate) fn set(&mut self, name: &str, value: RawAttribute) {
        if !self.seen.insert(name.to_owned()) {
            self.report(Violation::new(
                name,
                Rule::DuplicateAttribute,
                format!("attribute `{name}` appears more than once; it may appear at most once"),
            ));
            return;
        }
        if let Err(why) = syntax::attribute_name(name) {
            self.report(Violation::new(name, Rule::AttributeName, why));
            return;
        }
        match CORE_ATTRIBUTES.iter().find(|core| **core == name) {
            Some(core) => self.set_core(core, value),
            None => self.set_extension(name, value),
        }
    }

    fn set_core(&mut self, name: &'static str, value: RawAttribute) {
        let value = match value {
            RawAttribute::String(value) => value,
            other => {
                let kind = match other {
                    RawAttribute::Number(_) => "a number",
                    RawAttribute::Boolean(_) => "a boolean",
                    RawAttribute::Other(kind) => kind,
                    RawAttribute::String(_) => unreachable!("handled above"),
                };
                self.report(Violation::new(
                    name,
                    Rule::JsonType,
                    format!("`{name}` must be a string, not {kind}"),
                ));
                return;
            }
        };
        if let Err(why) = syntax::string_characters(&value) {
            self.report(Violation::new(name, Rule::StringCharacters, why));
            return;
        }
        if value.is_empty() {
            self.report(Violation::new(
                name,
                Rule::NonEmpty,
                format!("`{name}` must not be empty"),
            ));
            return;
        }
        let checked = match name {
            "specversion" if value != SPEC_VERSION => Err((
                Rule::SpecVersion,
                format!(
                    "specversion `{value}` is not supported: this hub accepts CloudEvents \
                     `{SPEC_VERSION}`"
                ),
            )),
            "source" => syntax::uri_reference(&value).map_err(|why| (Rule::UriReference, why)),
            "dataschema" => syntax::uri(&value).map_err(|why| (Rule::Uri, why)),
            "time" => syntax::timestamp(&value).map_err(|why| (Rule::Timestamp, why)),
            "datacontenttype" => syntax::media_type(&value).map_err(|why| (Rule::MediaType, why)),
            _ => Ok(()),
        };
        match checked {
            Err((rule, why)) => self.report(Violation::new(name, rule, why)),
            Ok(()) if name == "specversion" => self.specversion = Some(value),
            Ok(()) => {
                self.core.insert(name, value);
            }
        }
    }

    fn set_extension(&mut self, name: &str, value: RawAttribute) {
        let checked = match value {
            RawAttribute::String(value) => syntax::string_characters(&value)
                .map(|()| AttributeValue::String(value))
                .map_err(|why| (Rule::StringCharacters, why)),
            RawAttribute::Number(text) => syntax::integer(&text)
                .map(AttributeValue::Integer)
                .map_err(|why| (Rule::Integer, why)),
            RawAttribute::Boolean(value) => Ok(AttributeValue::Boolean(value)),
            RawAttribute::Other(kind) => Err((
                Rule::JsonType,
                format!(
                    "extension `{name}` is {kind}; attribute values must be a string, an integer \
                     or a boolean"
                ),
            )),
        };
        match checked {
            Ok(value) => {
                self.extensions.insert(name.to_owned(), value);
            }
            Err((rule, why)) => self.report(Violation::new(name, rule, why)),
        }
    }

    /// Checks the required attributes and the data against the content type, and returns the
    /// event or every violation found.
    pub(crate) fn finish(mut self, data: Option<Data>) -> Result<Event, Violations> {
        for required in ["id", "source", "specversion", "type"] {
            if !self.seen.contains(required) {
                self.report(Violation::new(
                    required,
                    Rule::Required,
                    format!("required attribute `{required}` is missing"),
                ));
            }
        }
        let json_content = self.datacontenttype().is_none_or(is_json_media_type);
        match (&data, json_content) {
            (Some(Data::Text(_)), true) => self.report(Violation::new(
                "data",
                Rule::DataNotJson,
                "the data is text but `datacontenttype` declares JSON; give JSON data or a \
                 non-JSON content type",
            )),
            (Some(Data::Json(_)), false) => self.report(Violation::new(
                "data",
                Rule::DataNotString,
                "the data is JSON but `datacontenttype` is not a JSON media type",
            )),
            _ => {}
        }
        Violations::from_errors(std::mem::take(&mut self.violations))?;
        let mut take = |name| self.core.remove(name);
        Ok(Event {
            id: take("id").expect("checked above"),
            source: take("source").expect("checked above"),
            ty: take("type").expect("checked above"),
            datacontenttype: take("datacontenttype"),
            dataschema: take("dataschema"),
            subject: take("subject"),
            time: take("time"),
            extensions: self.extensions,
            data,
        })
    }
}

/// Builds an event in code, with the same checks the decoders apply.
///
/// ```
/// use knooppunt_event::{Data, EventBuilder, JsonText};
///
/// let event = EventBuilder::new("1", "urn:nld:oin:00000001823288444000:systeem:BRP", "nl.brp.persoon-verhuisd")
///     .time("2026-11-21T12:00:00+01:00")
///     .extension("sequence", "42")
///     .data(Data::Json(JsonText::parse(r#"{"bsn": "999990342"}"#).unwrap()))
///     .build()
///     .unwrap();
/// assert_eq!(event.time(), Some("2026-11-21T12:00:00+01:00"));
/// ```
#[derive(Debug, Clone)]
pub struct EventBuilder {
    attributes: Vec<(String, RawAttribute)>,
    data: Option<Data>,
}

impl EventBuilder {
    /// Starts an event with the required attributes (and `specversion` 1.0).
    pub fn new(id: impl Into<String>, source: impl Into<String>, ty: impl Into<String>) -> Self {
        let attributes = [
            ("specversion", SPEC_VERSION.to_owned()),
            ("id", id.into()),
            ("source", source.into()),
            ("type", ty.into()),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), RawAttribute::String(value)))
        .collect();
        EventBuilder {
            attributes,
            data: None,
        }
    }

    fn string(mut self, name: &str, value: String) -> Self {
        self.attributes
            .push((name.to_owned(), RawAttribute::String(value)));
        self
    }

    pub fn datacontenttype(self, value: impl Into<String>) -> Self {
        self.string("datacontenttype", value.into())
    }

    pub fn dataschema(self, value: impl Into<String>) -> Self {
        self.string("dataschema", value.into())
    }

    pub fn subject(self, value: impl Into<String>) -> Self {
        self.string("subject", value.into())
    }

    /// An RFC 3339 timestamp, kept exactly as given.
    pub fn time(self, value: impl Into<String>) -> Self {
        self.string("time", value.into())
    }

    pub fn extension(mut self, name: impl Into<String>, value: impl Into<AttributeValue>) -> Self {
        self.attributes.push((name.into(), value.into().into()));
        self
    }

    pub fn data(mut self, data: Data) -> Self {
        self.data = Some(data);
        self
    }

    /// The event, or every violation of the core specification.
    pub fn build(self) -> Result<Event, Violations> {
        let mut assembler = Assembler::default();
        for (name, value) in self.attributes {
            assembler.set(&name, value);
        }
        assembler.finish(self.data)
    }
}

impl From<&str> for AttributeValue {
    fn from(value: &str) -> Self {
        AttributeValue::String(value.to_owned())
    }
}

impl From<String> for AttributeValue {
    fn from(value: String) -> Self {
        AttributeValue::String(value)
    }
}

impl From<i32> for AttributeValue {
    fn from(value: i32) -> Self {
        AttributeValue::Integer(value)
    }
}

impl From<bool> for AttributeValue {
    fn from(value: bool) -> Self {
        AttributeValue::Boolean(value)
    }
}
