//! The JSON event format (json-format.md): single events (`application/cloudevents+json`)
//! and batches (`application/cloudevents-batch+json`), in both directions.
//!
//! Decoding keeps each event's exact JSON text in [`ReceivedEvent::json`], so re-sending an
//! event in structured mode changes nothing: not the order of members, not the spelling of
//! numbers, not an extension's JSON type.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::builder::{Assembler, RawAttribute};
use crate::data::{Data, JsonText, is_json_media_type};
use crate::event::{AttributeValue, Event, ReceivedEvent};
use crate::validate::{Rule, Violation, Violations};

/// The media type of a single event in the JSON format.
pub const MEDIA_TYPE: &str = "application/cloudevents+json";
/// The media type of a batch of events in the JSON format.
pub const BATCH_MEDIA_TYPE: &str = "application/cloudevents-batch+json";

/// Decodes one event from its JSON object.
pub fn decode_event(json: &[u8]) -> Result<ReceivedEvent, Violations> {
    let raw = parse_document(json)?;
    decode_object(raw)
}

/// Decodes a JSON array of events. The outer error is for a body that is not a JSON array;
/// each element is decoded on its own so that every invalid event can be reported by index.
pub fn decode_batch(json: &[u8]) -> Result<Vec<Result<ReceivedEvent, Violations>>, Violations> {
    let raw = parse_document(json)?;
    let elements: Vec<&RawValue> = serde_json::from_str(raw.get()).map_err(|_| {
        Violations::one(Violation::new(
            "",
            Rule::NotAnArray,
            "a batch must be a JSON array of events",
        ))
    })?;
    Ok(elements.into_iter().map(decode_object).collect())
}

fn parse_document(json: &[u8]) -> Result<&RawValue, Violations> {
    let text = std::str::from_utf8(json).map_err(|error| {
        Violations::one(Violation::new(
            "",
            Rule::JsonSyntax,
            format!("the body is not UTF-8 encoded JSON: {error}"),
        ))
    })?;
    serde_json::from_str(text).map_err(|error| {
        Violations::one(Violation::new(
            "",
            Rule::JsonSyntax,
            format!("the body is not valid JSON: {error}"),
        ))
    })
}

/// The members of a JSON object in document order, duplicates included.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    members.push((name, map.next_value::<&'de RawValue>()?));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// What a member's JSON value is, without parsing more than needed.
enum Member {
    Null,
    Value(RawAttribute),
    /// A JSON string that cannot be a Rust string (an unpaired surrogate escape).
    BadString(String),
}

fn classify(raw: &RawValue) -> Member {
    let text = raw.get();
    match text.as_bytes()[0] {
        b'n' => Member::Null,
        b't' => Member::Value(RawAttribute::Boolean(true)),
        b'f' => Member::Value(RawAttribute::Boolean(false)),
        b'{' => Member::Value(RawAttribute::Other("an object")),
        b'[' => Member::Value(RawAttribute::Other("an array")),
        b'"' => match serde_json::from_str::<String>(text) {
            Ok(value) => Member::Value(RawAttribute::String(value)),
            Err(error) => Member::BadString(error.to_string()),
        },
        _ => Member::Value(RawAttribute::Number(text.to_owned())),
    }
}

fn decode_object(raw: &RawValue) -> Result<ReceivedEvent, Violations> {
    let Members(members) = serde_json::from_str(raw.get()).map_err(|_| {
        Violations::one(Violation::new(
            "",
            Rule::NotAnObject,
            "an event must be a JSON object",
        ))
    })?;
    let mut assembler = Assembler::default();
    let mut data: Option<&RawValue> = None;
    let mut data_base64: Option<&RawValue> = None;
    for (name, value) in members {
        let slot = match name.as_str() {
            "data" => Some(&mut data),
            "data_base64" => Some(&mut data_base64),
            _ => None,
        };
        if let Some(slot) = slot {
            if slot.replace(value).is_some() {
                assembler.report(Violation::new(
                    &name,
                    Rule::DuplicateAttribute,
                    format!("member `{name}` appears more than once"),
                ));
            }
            continue;
        }
        match classify(value) {
            Member::Null => {}
            Member::Value(value) => assembler.set(&name, value),
            Member::BadString(error) => assembler.report(Violation::new(
                &name,
                Rule::StringCharacters,
                format!("the string is not valid Unicode: {error}"),
            )),
        }
    }
    let data = decode_data(&mut assembler, data, data_base64);
    let event = assembler.finish(data)?;
    Ok(ReceivedEvent {
        event,
        json: Some(raw.get().into()),
    })
}

/// Applies json-format.md section 3.1.2 to the `data` and `data_base64` members.
fn decode_data(
    assembler: &mut Assembler,
    data: Option<&RawValue>,
    data_base64: Option<&RawValue>,
) -> Option<Data> {
    let data = data.map(|raw| (raw, classify(raw)));
    let data_base64 = data_base64.filter(|raw| !matches!(classify(raw), Member::Null));
    if let Some(raw) = data_base64 {
        if data
            .as_ref()
            .is_some_and(|(_, member)| !matches!(member, Member::Null))
        {
            assembler.report(Violation::new(
                "data_base64",
                Rule::DataExclusive,
                "an event has either `data` or `data_base64`, not both",
            ));
            return None;
        }
        let decoded = serde_json::from_str::<&str>(raw.get())
            .map_err(|_| "`data_base64` must be a JSON string of Base64 text".to_owned())
            .and_then(|text| {
                BASE64.decode(text).map_err(|error| {
                    format!("`data_base64` is not valid Base64 (RFC 4648): {error}")
                })
            });
        return match decoded {
            Ok(bytes) => Some(Data::Binary(bytes)),
            Err(why) => {
                assembler.report(Violation::new("data_base64", Rule::DataBase64, why));
                None
            }
        };
    }
    let (raw, member) = data?;
    if assembler.datacontenttype().is_none_or(is_json_media_type) {
        // JSON data, `null` included, kept as its text; a JSON string is never parsed again.
        return Some(Data::Json(JsonText::from_raw(raw)));
    }
    match member {
        Member::Null => None,
        Member::Value(RawAttribute::String(text)) => Some(Data::Text(text)),
        Member::BadString(error) => {
            assembler.report(Violation::new(
                "data",
                Rule::StringCharacters,
                format!("the data string is not valid Unicode: {error}"),
            ));
            None
        }
        Member::Value(_) => {
            assembler.report(Violation::new(
                "data",
                Rule::DataNotString,
                format!(
                    "`datacontenttype` `{}` is not JSON, so `data` must be a string; send binary \
                     data as `data_base64`",
                    assembler.datacontenttype().unwrap_or_default()
                ),
            ));
            None
        }
    }
}

/// Encodes an event as a JSON object: `specversion`, `id`, `source`, `type`, the optional
/// attributes, the extensions in name order, then `data` or `data_base64`.
pub fn encode_event(event: &Event) -> String {
    let mut out = String::with_capacity(256);
    out.push('{');
    for (name, value) in event.attributes_in_format_order() {
        push_key(&mut out, name);
        match value {
            AttributeValueRef::Str(text) => push_string(&mut out, text),
            AttributeValueRef::Extension(AttributeValue::String(text)) => {
                push_string(&mut out, text)
            }
            AttributeValueRef::Extension(AttributeValue::Integer(n)) => {
                out.push_str(&n.to_string())
            }
            AttributeValueRef::Extension(AttributeValue::Boolean(b)) => {
                out.push_str(if *b { "true" } else { "false" })
            }
        }
    }
    match event.data() {
        None => {}
        Some(Data::Json(json)) => {
            push_key(&mut out, "data");
            out.push_str(json.as_str());
        }
        Some(Data::Text(text)) => {
            push_key(&mut out, "data");
            push_string(&mut out, text);
        }
        Some(Data::Binary(bytes)) => {
            push_key(&mut out, "data_base64");
            push_string(&mut out, &BASE64.encode(bytes));
        }
    }
    out.push('}');
    out
}

/// Encodes a batch; events that arrived as JSON keep their original text.
pub fn encode_batch<'a>(events: impl IntoIterator<Item = &'a ReceivedEvent>) -> String {
    let mut out = String::from("[");
    for (index, event) in events.into_iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&event.to_json());
    }
    out.push(']');
    out
}

fn push_key(out: &mut String, name: &str) {
    if !out.ends_with('{') {
        out.push(',');
    }
    push_string(out, name);
    out.push(':');
}

fn push_string(out: &mut String, text: &str) {
    out.push_str(&serde_json::to_string(text).expect("strings always serialise"));
}

pub(crate) enum AttributeValueRef<'a> {
    Str(&'a str),
    Extension(&'a AttributeValue),
}

impl Event {
    fn attributes_in_format_order(&self) -> impl Iterator<Item = (&str, AttributeValueRef<'_>)> {
        let core = [
            ("specversion", Some(self.specversion())),
            ("id", Some(self.id())),
            ("source", Some(self.source())),
            ("type", Some(self.ty())),
            ("datacontenttype", self.datacontenttype()),
            ("dataschema", self.dataschema()),
            ("subject", self.subject()),
            ("time", self.time()),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|value| (name, AttributeValueRef::Str(value))));
        let extensions = self
            .extensions()
            .iter()
            .map(|(name, value)| (name.as_str(), AttributeValueRef::Extension(value)));
        core.chain(extensions)
    }
}
