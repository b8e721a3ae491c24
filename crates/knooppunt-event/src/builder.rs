//! Building events: the one place where attribute values are checked against the core
//! specification, used by the decoders and by [`EventBuilder`] alike.

use std::collections::BTreeMap;

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
    /// The core attributes seen (valid or not), a bit for each by its place in
    /// [`CORE_ATTRIBUTES`].
    seen_core: u16,
    /// The valid core attribute values, by their place in [`CORE_ATTRIBUTES`].
    core: [Option<String>; CORE_ATTRIBUTES.len()],
    /// Extensions seen whose name or value was rejected (the valid ones are in `extensions`).
    rejected: Vec<String>,
    extensions: BTreeMap<String, AttributeValue>,
    /// What a format said of string-valued extensions' types (CBOR tags).
    extension_types: BTreeMap<String, crate::event::ExtensionType>,
}

/// The place of each core attribute in [`CORE_ATTRIBUTES`].
const ID: usize = 0;
const SOURCE: usize = 1;
const SPECVERSION: usize = 2;
const TYPE: usize = 3;
const DATACONTENTTYPE: usize = 4;
const DATASCHEMA: usize = 5;
const SUBJECT: usize = 6;
const TIME: usize = 7;

impl Assembler {
    pub(crate) fn report(&mut self, violation: Violation) {
        self.violations.push(violation);
    }

    pub(crate) fn has_errors(&self) -> bool {
        !self.violations.is_empty()
    }

    /// The `datacontenttype` set so far, if it was valid.
    pub(crate) fn datacontenttype(&self) -> Option<&str> {
        self.core[DATACONTENTTYPE].as_deref()
    }

    /// Sets one attribute; `null` values are not passed here (they mean unset).
    /// Notes what a format said of an extension's type (kept only if the extension is
    /// accepted as a string).
    pub(crate) fn set_extension_type(&mut self, name: &str, ty: crate::event::ExtensionType) {
        self.extension_types.insert(name.to_owned(), ty);
    }

    pub(crate) fn set(&mut self, name: &str, value: RawAttribute) {
        let core = CORE_ATTRIBUTES.iter().position(|core| *core == name);
        let seen = match core {
            Some(at) => self.seen_core & (1 << at) != 0,
            None => self.extensions.contains_key(name) || self.rejected.iter().any(|r| r == name),
        };
        if seen {
            self.report(Violation::new(
                name,
                Rule::DuplicateAttribute,
                format!("attribute `{name}` appears more than once; it may appear at most once"),
            ));
            return;
        }
        match core {
            Some(at) => {
                self.seen_core |= 1 << at;
                self.set_core(at, value);
            }
            None => match syntax::attribute_name(name) {
                Ok(()) => self.set_extension(name, value),
                Err(why) => {
                    self.rejected.push(name.to_owned());
                    self.report(Violation::new(name, Rule::AttributeName, why));
                }
            },
        }
    }

    fn set_core(&mut self, at: usize, value: RawAttribute) {
        let name = CORE_ATTRIBUTES[at];
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
            Ok(()) => self.core[at] = Some(value),
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
            Err((rule, why)) => {
                self.rejected.push(name.to_owned());
                self.report(Violation::new(name, rule, why));
            }
        }
    }

    /// Checks the required attributes and the data against the content type, and returns the
    /// event or every violation found.
    pub(crate) fn finish(mut self, data: Option<Data>) -> Result<Event, Violations> {
        for at in [ID, SOURCE, SPECVERSION, TYPE] {
            if self.seen_core & (1 << at) == 0 {
                let required = CORE_ATTRIBUTES[at];
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
        let mut take = |at: usize| self.core[at].take();
        Ok(Event {
            id: take(ID).expect("checked above"),
            source: take(SOURCE).expect("checked above"),
            ty: take(TYPE).expect("checked above"),
            datacontenttype: take(DATACONTENTTYPE),
            dataschema: take(DATASCHEMA),
            subject: take(SUBJECT),
            time: take(TIME),
            extension_types: std::mem::take(&mut self.extension_types)
                .into_iter()
                .filter(|(name, _)| {
                    matches!(self.extensions.get(name), Some(AttributeValue::String(_)))
                })
                .collect(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_places_name_the_core_attributes() {
        let places = [
            (ID, "id"),
            (SOURCE, "source"),
            (SPECVERSION, "specversion"),
            (TYPE, "type"),
            (DATACONTENTTYPE, "datacontenttype"),
            (DATASCHEMA, "dataschema"),
            (SUBJECT, "subject"),
            (TIME, "time"),
        ];
        for (at, name) in places {
            assert_eq!(CORE_ATTRIBUTES[at], name);
        }
        assert_eq!(places.len(), CORE_ATTRIBUTES.len());
    }
}
