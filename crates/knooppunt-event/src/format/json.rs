//! The JSON event format (json-format.md): single events (`application/cloudevents+json`)
//! and batches (`application/cloudevents-batch+json`), in both directions.
//!
//! Decoding keeps each event's exact JSON text in [`ReceivedEvent::json`], so re-sending an
//! event in structured mode changes nothing: not the order of members, not the spelling of
//! numbers, not an extension's JSON type.

use std::borrow::Cow;
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
    // One pass in the common case: the members straight from the body. A body that is not a
    // JSON object takes the long way, which says precisely what is wrong with it.
    if let Ok(text) = std::str::from_utf8(json)
        && let Ok(Members(members)) = serde_json::from_str(text)
    {
        return decode_members(text.trim_matches(is_json_whitespace), members);
    }
    let raw = parse_document(json)?;
    decode_object(raw)
}

/// White space around JSON values (RFC 8259 section 2).
fn is_json_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
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
struct Members<'a>(Vec<(Key<'a>, &'a RawValue)>);

/// A member's name: borrowed from the document unless it had escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                name: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(name)))
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(name.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, name: String) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(name)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(12);
                while let Some(name) = map.next_key::<Key<'de>>()? {
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
        // Without escapes the text between the quotes is the string (the parser checked it).
        b'"' if !text.contains('\\') => {
            Member::Value(RawAttribute::String(text[1..text.len() - 1].to_owned()))
        }
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
    decode_members(raw.get(), members)
}

/// Builds the event from an object's members; `text` is the object's JSON text.
fn decode_members(
    text: &str,
    members: Vec<(Key<'_>, &RawValue)>,
) -> Result<ReceivedEvent, Violations> {
    let mut assembler = Assembler::default();
    let mut data: Option<&RawValue> = None;
    let mut data_base64: Option<&RawValue> = None;
    for (Key(name), value) in members {
        let slot = match &*name {
            "data" => Some(&mut data),
            "data_base64" => Some(&mut data_base64),
            _ => None,
        };
        if let Some(slot) = slot {
            if slot.replace(value).is_some() {
                assembler.report(Violation::new(
                    &*name,
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
                &*name,
                Rule::StringCharacters,
                format!("the string is not valid Unicode: {error}"),
            )),
        }
    }
    let data = decode_data(&mut assembler, data, data_base64);
    let event = assembler.finish(data)?;
    Ok(ReceivedEvent {
        event,
        json: Some(text.into()),
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
        // `"data": null` is present too (an explicit null payload, section 3.1.1): the two
        // members are mutually exclusive.
        if data.is_some() {
            assembler.report(Violation::new(
                "data_base64",
                Rule::DataExclusive,
                "an event has either `data` or `data_base64`, not both (not even `\"data\": null`)",
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
        return match JsonText::from_raw(raw) {
            Ok(json) => Some(Data::Json(json)),
            Err(error) => {
                assembler.report(Violation::new(
                    "data",
                    Rule::of_data(&error),
                    error.to_string(),
                ));
                None
            }
        };
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

/// The `source`, `id` and `type` of an event in the JSON format, as stored (read without
/// building the rest: `data` is skipped, not kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub source: String,
    pub id: String,
    pub ty: String,
}

impl Identity {
    pub fn of_json(json: &str) -> Option<Identity> {
        #[derive(serde::Deserialize)]
        struct Members<'a> {
            #[serde(borrow)]
            source: std::borrow::Cow<'a, str>,
            #[serde(borrow)]
            id: std::borrow::Cow<'a, str>,
            #[serde(borrow, rename = "type")]
            ty: std::borrow::Cow<'a, str>,
        }
        let members: Members<'_> = serde_json::from_str(json).ok()?;
        Some(Identity {
            source: members.source.into_owned(),
            id: members.id.into_owned(),
            ty: members.ty.into_owned(),
        })
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

// An accepted event as JSON text: here, beside the format it is written in.
impl ReceivedEvent {
    /// The JSON format of this event: the original text when there is one, otherwise the
    /// encoding of the parsed event.
    pub fn to_json(&self) -> std::borrow::Cow<'_, str> {
        match &self.json {
            Some(json) => std::borrow::Cow::Borrowed(json),
            None => std::borrow::Cow::Owned(encode_event(&self.event)),
        }
    }

    /// The JSON format of this event, like [`ReceivedEvent::to_json`], taking the original
    /// text without copying it.
    pub fn into_json(self) -> String {
        match self.json {
            Some(json) => json.into_string(),
            None => encode_event(&self.event),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_read_with_escapes_and_without_the_data() {
        let json = r#"{"specversion":"1.0","data":{"deep":[1,{"x":"y"}]},"id":"a\u0062","source":"urn:x","type":"t\"q"}"#;
        assert_eq!(
            Identity::of_json(json),
            Some(Identity {
                source: "urn:x".into(),
                id: "ab".into(),
                ty: "t\"q".into(),
            })
        );
        assert_eq!(Identity::of_json(r#"{"id":"a","source":"s"}"#), None);
    }

    #[test]
    fn the_text_kept_is_the_object_without_the_white_space_around_it() {
        let object = r#"{"specversion":"1.0","id":"1","source":"/s","type":"t"}"#;
        let received = decode_event(format!(" \r\n\t{object}\n ").as_bytes()).unwrap();
        assert_eq!(received.json.as_deref(), Some(object));
    }

    #[test]
    fn escaped_names_and_values_are_read_like_plain_ones() {
        let text = r#"{"spec\u0076ersion":"1.0","\u0069d":"a\"b\\c","source":"/s\u0031",
                       "type":"t","comexample\u0065xt":"\u00e9","subject":"caf\u00e9"}"#;
        let received = decode_event(text.as_bytes()).unwrap();
        let event = &received.event;
        assert_eq!(event.id(), "a\"b\\c");
        assert_eq!(event.source(), "/s1");
        assert_eq!(event.subject(), Some("caf\u{e9}"));
        assert_eq!(
            event.extension("comexampleext"),
            Some(&AttributeValue::String("\u{e9}".into()))
        );
        assert_eq!(received.json.as_deref(), Some(text));
    }

    #[test]
    fn bodies_that_are_not_objects_say_what_they_are() {
        let rule = |body: &[u8]| decode_event(body).unwrap_err().as_slice()[0].rule;
        assert_eq!(rule(b"[1]"), Rule::NotAnObject);
        assert_eq!(rule(b"{\"id\":"), Rule::JsonSyntax);
        assert_eq!(rule(b"{} {}"), Rule::JsonSyntax);
        assert_eq!(rule(b"\xff{}"), Rule::JsonSyntax);
    }
}
