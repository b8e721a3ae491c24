//! The event: context attributes with their CloudEvents types, and the data.

use std::collections::BTreeMap;
use std::fmt;

use crate::data::{self, Data};

/// The only `specversion` this crate accepts and writes.
pub const SPEC_VERSION: &str = "1.0";

/// A CloudEvent whose every attribute satisfies the core specification.
///
/// Values are kept as the producer wrote them: `time` keeps its exact string (offset and
/// fraction digits included), extensions keep the JSON type they arrived with and `data` keeps
/// its original JSON text. Build one with [`crate::EventBuilder`] or decode one with
/// [`crate::format::json`] or [`crate::binding::http`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub(crate) id: String,
    pub(crate) source: String,
    pub(crate) ty: String,
    pub(crate) datacontenttype: Option<String>,
    pub(crate) dataschema: Option<String>,
    pub(crate) subject: Option<String>,
    pub(crate) time: Option<String>,
    pub(crate) extensions: BTreeMap<String, AttributeValue>,
    /// The CloudEvents type of string-valued extensions that are more than strings (a URI,
    /// a Timestamp, Binary) when the format they arrived in said so (CBOR tags them; JSON
    /// and HTTP headers cannot). Only extensions whose value is a
    /// [`AttributeValue::String`] are in it.
    pub(crate) extension_types: BTreeMap<String, ExtensionType>,
    pub(crate) data: Option<Data>,
}

/// The CloudEvents type of an extension whose canonical form is a string, when a format
/// told it: the JSON format writes all of these as strings, the CBOR format tags them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtensionType {
    /// URI or URI-reference (CBOR tag 32).
    Uri,
    /// Timestamp (CBOR tag 0).
    Timestamp,
    /// Binary (a CBOR byte string; its canonical string is base64).
    Binary,
}

impl ExtensionType {
    fn name(self) -> &'static str {
        match self {
            ExtensionType::Uri => "uri",
            ExtensionType::Timestamp => "timestamp",
            ExtensionType::Binary => "binary",
        }
    }

    fn from_name(name: &str) -> Option<ExtensionType> {
        match name {
            "uri" => Some(ExtensionType::Uri),
            "timestamp" => Some(ExtensionType::Timestamp),
            "binary" => Some(ExtensionType::Binary),
            _ => None,
        }
    }
}

/// The value of an extension attribute, in the JSON type it arrived with.
///
/// Binary, URI, URI-reference and Timestamp extension values are JSON strings and stay
/// [`AttributeValue::String`]. An extension that arrived in HTTP binary mode is always a string:
/// a header cannot say `5` is a number, so it is forwarded in structured mode as `"5"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AttributeValue {
    String(String),
    Integer(i32),
    Boolean(bool),
}

impl fmt::Display for AttributeValue {
    /// The canonical string encoding of the CloudEvents type system.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttributeValue::String(value) => f.write_str(value),
            AttributeValue::Integer(value) => write!(f, "{value}"),
            AttributeValue::Boolean(value) => write!(f, "{value}"),
        }
    }
}

/// The names of the context attributes this specification defines (not extensions).
pub const CORE_ATTRIBUTES: [&str; 8] = [
    "id",
    "source",
    "specversion",
    "type",
    "datacontenttype",
    "dataschema",
    "subject",
    "time",
];

impl Event {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// A URI-reference.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn specversion(&self) -> &str {
        SPEC_VERSION
    }

    /// The `type` attribute.
    pub fn ty(&self) -> &str {
        &self.ty
    }

    pub fn datacontenttype(&self) -> Option<&str> {
        self.datacontenttype.as_deref()
    }

    /// An absolute URI.
    pub fn dataschema(&self) -> Option<&str> {
        self.dataschema.as_deref()
    }

    pub fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }

    /// The RFC 3339 timestamp exactly as the producer wrote it.
    pub fn time(&self) -> Option<&str> {
        self.time.as_deref()
    }

    pub fn extensions(&self) -> &BTreeMap<String, AttributeValue> {
        &self.extensions
    }

    pub fn extension(&self, name: &str) -> Option<&AttributeValue> {
        self.extensions.get(name)
    }

    /// The type of a string-valued extension, when the format it arrived in told it.
    pub fn extension_type(&self, name: &str) -> Option<ExtensionType> {
        self.extension_types.get(name).copied()
    }

    /// The extension types as a short JSON object (`{"name":"uri",...}`), for a store to
    /// keep beside the event's JSON, which cannot carry them; `None` when there are none.
    pub fn extension_types_text(&self) -> Option<String> {
        if self.extension_types.is_empty() {
            return None;
        }
        let object: serde_json::Map<String, serde_json::Value> = self
            .extension_types
            .iter()
            .map(|(name, ty)| (name.clone(), serde_json::Value::from(ty.name())))
            .collect();
        Some(serde_json::Value::Object(object).to_string())
    }

    /// Gives the event the extension types of [`Event::extension_types_text`] (its JSON
    /// form lost them). A name that is not a string-valued extension of this event, a type
    /// its value does not fit (a Binary that is not base64, a Timestamp that is not RFC 3339)
    /// or text that is not such an object changes nothing.
    pub fn with_extension_types_text(mut self, text: &str) -> Event {
        let Ok(serde_json::Value::Object(object)) = serde_json::from_str(text) else {
            return self;
        };
        for (name, ty) in object {
            let Some(ty) = ty.as_str().and_then(ExtensionType::from_name) else {
                continue;
            };
            let Some(AttributeValue::String(value)) = self.extensions.get(&name) else {
                continue;
            };
            let fits = match ty {
                ExtensionType::Uri => crate::validate::syntax::uri_reference(value).is_ok(),
                ExtensionType::Timestamp => crate::validate::syntax::timestamp(value).is_ok(),
                ExtensionType::Binary => {
                    use base64::Engine;
                    base64::engine::general_purpose::STANDARD
                        .decode(value)
                        .is_ok()
                }
            };
            if fits {
                self.extension_types.insert(name, ty);
            }
        }
        self
    }

    pub fn data(&self) -> Option<&Data> {
        self.data.as_ref()
    }

    /// Looks up any context attribute, core or extension, by name. Core attributes are all
    /// string-typed.
    pub fn attribute(&self, name: &str) -> Option<AttributeRef<'_>> {
        let core = match name {
            "id" => Some(self.id.as_str()),
            "source" => Some(self.source.as_str()),
            "specversion" => Some(SPEC_VERSION),
            "type" => Some(self.ty.as_str()),
            "datacontenttype" => self.datacontenttype.as_deref(),
            "dataschema" => self.dataschema.as_deref(),
            "subject" => self.subject.as_deref(),
            "time" => self.time.as_deref(),
            _ => {
                return self.extensions.get(name).map(|value| match value {
                    AttributeValue::String(value) => AttributeRef::String(value),
                    AttributeValue::Integer(value) => AttributeRef::Integer(*value),
                    AttributeValue::Boolean(value) => AttributeRef::Boolean(*value),
                });
            }
        };
        core.map(AttributeRef::String)
    }

    /// Every context attribute that is set, core attributes first, each with its canonical
    /// string encoding.
    pub fn attributes(&self) -> impl Iterator<Item = (&str, AttributeRef<'_>)> {
        let core = CORE_ATTRIBUTES
            .iter()
            .filter_map(|name| self.attribute(name).map(|value| (*name, value)));
        let extensions = self
            .extensions
            .keys()
            .filter_map(|name| self.attribute(name).map(|value| (name.as_str(), value)));
        core.chain(extensions)
    }

    /// The content type the data has: `datacontenttype`, or `application/json` when it is
    /// absent and the data is JSON (json-format.md section 3.1.2).
    pub fn effective_datacontenttype(&self) -> Option<&str> {
        match (&self.datacontenttype, &self.data) {
            (Some(content_type), _) => Some(content_type),
            (None, Some(Data::Json(_))) => Some("application/json"),
            (None, _) => None,
        }
    }

    /// Whether the data is JSON-formatted by its content type.
    pub fn has_json_content_type(&self) -> bool {
        self.datacontenttype
            .as_deref()
            .is_none_or(data::is_json_media_type)
    }

    /// Whether two events are the same CloudEvent as far as the specifications can tell after
    /// a trip through another content mode: every attribute has the same canonical string
    /// (binary mode cannot carry extension types), an absent `datacontenttype` on JSON data
    /// equals `application/json`, and data compares by its bytes, an empty payload being the
    /// same as none, except that JSON data on both sides compares as JSON values (another
    /// format writes the same value with other white space). Use `==` for the exact
    /// representation.
    pub fn is_equivalent(&self, other: &Event) -> bool {
        let attributes = |event: &Event| {
            event
                .attributes()
                .filter(|(name, _)| *name != "datacontenttype")
                .map(|(name, value)| (name.to_owned(), value.to_string()))
                .collect::<Vec<_>>()
        };
        let payload = |event: &Event| {
            event
                .data
                .as_ref()
                .map(Data::as_bytes)
                .filter(|bytes| !bytes.is_empty())
                .map(<[u8]>::to_vec)
        };
        let same_data = match (&self.data, &other.data) {
            (Some(Data::Json(a)), Some(Data::Json(b))) => match (a.to_value(), b.to_value()) {
                (Ok(a), Ok(b)) => a == b,
                _ => a == b,
            },
            _ => payload(self) == payload(other),
        };
        attributes(self) == attributes(other)
            && self.effective_datacontenttype() == other.effective_datacontenttype()
            && same_data
    }
}

/// A borrowed attribute value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttributeRef<'a> {
    String(&'a str),
    Integer(i32),
    Boolean(bool),
}

impl fmt::Display for AttributeRef<'_> {
    /// The canonical string encoding of the CloudEvents type system.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttributeRef::String(value) => f.write_str(value),
            AttributeRef::Integer(value) => write!(f, "{value}"),
            AttributeRef::Boolean(value) => write!(f, "{value}"),
        }
    }
}

/// An event as it was received, with the exact JSON text it arrived in when it came in
/// structured or batched mode.
///
/// The hub routes on [`ReceivedEvent::event`] and forwards [`ReceivedEvent::json`] unchanged,
/// so every optional and extension attribute reaches a structured-mode subscriber byte for
/// byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedEvent {
    pub event: Event,
    /// The event's JSON object exactly as the publisher sent it (surrounding white space
    /// excepted); `None` when the event arrived in binary mode.
    pub json: Option<Box<str>>,
}

impl From<Event> for ReceivedEvent {
    fn from(event: Event) -> Self {
        ReceivedEvent { event, json: None }
    }
}
