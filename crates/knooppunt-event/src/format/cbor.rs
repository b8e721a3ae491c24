//! The CBOR event format (`application/cloudevents+cbor`, the CBOR format for CloudEvents in
//! `specs/seeds`): an event is a CBOR map with a text key per attribute, extensions
//! as top-level keys like the core attributes. Types map as the format's table says:
//!
//! | CloudEvents | CBOR |
//! | --- | --- |
//! | Boolean | simple values 20 (`false`) and 21 (`true`) |
//! | Integer | major type 0, and 1 for negative numbers |
//! | String | major type 3 (text) |
//! | Binary | major type 2 (bytes) |
//! | URI, URI-reference | tag 32 on text |
//! | Timestamp | tag 0 (standard date/time string) on text |
//!
//! `null` (simple value 22) is an unset attribute. On reading, a URI or Timestamp attribute
//! is also accepted as untagged text; a tagged extension, or one of Binary type, becomes its
//! canonical string (base64 for Binary), as in the JSON format, and keeps its type
//! ([`Event::extension_type`]), so that it is written with its tag (or as bytes) again.
//! `data` is a byte string (Binary data), a text string, or a native CBOR value, which is
//! JSON data. The codec is `ciborium`; this module only maps.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use ciborium::value::{Integer, Value};

use crate::builder::{Assembler, RawAttribute};
use crate::data::{Data, JsonText, MAX_DATA_DEPTH, is_json_media_type};
use crate::event::{AttributeValue, Event, ExtensionType, ReceivedEvent};
use crate::validate::{Rule, Violation, Violations};

/// The media type of a single event in the CBOR format.
pub const MEDIA_TYPE: &str = "application/cloudevents+cbor";

/// CBOR tag 0: a standard date/time string (RFC 8949 section 3.4.1).
const TAG_DATE_TIME: u64 = 0;
/// CBOR tag 32: a URI (RFC 8949 section 3.4.5.3).
const TAG_URI: u64 = 32;

/// The attributes whose CloudEvents type is URI or URI-reference, and Timestamp.
const URI_ATTRIBUTES: [&str; 2] = ["source", "dataschema"];
const TIMESTAMP_ATTRIBUTES: [&str; 1] = ["time"];

fn violation(attribute: &str, rule: Rule, detail: impl Into<String>) -> Violations {
    Violations::one(Violation::new(attribute, rule, detail))
}

/// What a CBOR decoding error means, in words (the decoder's own text is its debug form).
fn explain(error: &ciborium::de::Error<std::io::Error>) -> String {
    use ciborium::de::Error;
    let at = |offset: Option<usize>| {
        offset
            .map(|o| format!(" (at byte {o})"))
            .unwrap_or_default()
    };
    match error {
        Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            "it ends in the middle of a data item".into()
        }
        Error::Io(io) => format!("it could not be read: {io}"),
        Error::Syntax(offset) => format!("it is not well-formed CBOR{}", at(Some(*offset))),
        Error::Semantic(offset, message) if message.starts_with("invalid type: simple") => format!(
            "it holds a CBOR simple value other than false, true, null and undefined, which no \
             CloudEvents type is{}",
            at(*offset)
        ),
        Error::Semantic(offset, message) => {
            format!(
                "it holds a value the hub cannot read ({message}){}",
                at(*offset)
            )
        }
        Error::RecursionLimitExceeded => {
            "arrays, maps and tags nest in it deeper than the 256 levels the hub reads".into()
        }
    }
}

/// Decodes one event from its CBOR map, reporting every problem found.
pub fn decode_event(bytes: &[u8]) -> Result<ReceivedEvent, Violations> {
    let mut rest = bytes;
    let value: Value = ciborium::de::from_reader(&mut rest).map_err(|error| {
        violation(
            "",
            Rule::CborSyntax,
            format!("the body is not one CBOR data item: {}", explain(&error)),
        )
    })?;
    // One data item, nothing after it (RFC 8949 section 5.3: a well-formed item with
    // bytes after it is not one item).
    if !rest.is_empty() {
        return Err(violation(
            "",
            Rule::CborSyntax,
            format!(
                "the body holds {} bytes after the event's CBOR data item; send exactly one item",
                rest.len()
            ),
        ));
    }
    let Value::Map(members) = value else {
        return Err(violation(
            "",
            Rule::NotAnObject,
            "a CloudEvent in the CBOR format is a map of attribute names to values",
        ));
    };
    let mut assembler = Assembler::default();
    let mut data = None;
    for (key, value) in members {
        let Value::Text(name) = key else {
            assembler.report(Violation::new(
                "",
                Rule::CborType,
                format!(
                    "every key of the event's map must be a text string, not {}",
                    describe(&key)
                ),
            ));
            continue;
        };
        if name == "data" {
            // Not an attribute: `null` here is an explicit null payload, as in JSON.
            data = Some(value);
            continue;
        }
        if value.is_null() {
            // An unset attribute (the format's simple value 22).
            continue;
        }
        match attribute(&name, value) {
            Ok((raw, ty)) => {
                assembler.set(&name, raw);
                if let Some(ty) = ty {
                    assembler.set_extension_type(&name, ty);
                }
            }
            Err(why) => assembler.report(Violation::new(name.as_str(), Rule::CborType, why)),
        }
    }
    let content_type = assembler.datacontenttype().map(str::to_owned);
    let data = match data.map(|value| read_data(value, content_type.as_deref())) {
        None => None,
        Some(Ok(data)) => Some(data),
        Some(Err(why)) => {
            assembler.report(Violation::new("data", Rule::CborData, why));
            None
        }
    };
    assembler.finish(data).map(ReceivedEvent::from)
}

/// An attribute's value as the assembler takes it (with the type its tag or major type said,
/// for an extension that is more than a string), or why the CBOR type cannot be one.
fn attribute(name: &str, value: Value) -> Result<(RawAttribute, Option<ExtensionType>), String> {
    let tag = if URI_ATTRIBUTES.contains(&name) {
        Some((TAG_URI, "a URI (tag 32 on text)"))
    } else if TIMESTAMP_ATTRIBUTES.contains(&name) {
        Some((TAG_DATE_TIME, "a timestamp (tag 0 on text)"))
    } else {
        None
    };
    match value {
        Value::Text(text) => Ok((RawAttribute::String(text), None)),
        Value::Tag(number, inner) if matches!(*inner, Value::Text(_)) => {
            let Value::Text(text) = *inner else {
                unreachable!("matched above")
            };
            match tag {
                Some((expected, _)) if expected == number => Ok((RawAttribute::String(text), None)),
                Some((_, what)) => Err(format!("must be {what}, not text with tag {number}")),
                // An extension of type URI, URI-reference or Timestamp: its string, and the
                // type, so that it is tagged again on the way out.
                // The tag says what the text is, so it must be one (RFC 8949, 3.4.5.3 and
                // 3.4.1; CloudEvents writes URI and URI-reference with tag 32).
                None if number == TAG_URI => crate::validate::syntax::uri_reference(&text)
                    .map(|()| (RawAttribute::String(text), Some(ExtensionType::Uri)))
                    .map_err(|why| format!("is tagged 32 (URI) but {why}")),
                None if number == TAG_DATE_TIME => crate::validate::syntax::timestamp(&text)
                    .map(|()| (RawAttribute::String(text), Some(ExtensionType::Timestamp)))
                    .map_err(|why| format!("is tagged 0 (timestamp) but {why}")),
                None => Err(format!(
                    "text with tag {number} is not a CloudEvents type; use tag 32 (URI) or 0 \
                     (timestamp), or plain text"
                )),
            }
        }
        Value::Integer(n) => Ok((RawAttribute::Number(i128::from(n).to_string()), None)),
        Value::Bool(b) => Ok((RawAttribute::Boolean(b), None)),
        // An extension of type Binary: its canonical string, base64.
        Value::Bytes(bytes) if tag.is_none() => Ok((
            RawAttribute::String(BASE64.encode(bytes)),
            Some(ExtensionType::Binary),
        )),
        other => Err(match tag {
            Some((_, what)) => format!("must be {what} or text, not {}", describe(&other)),
            None => format!(
                "{} is not a CloudEvents type: attributes are text, integers, booleans, byte \
                 strings, or text tagged 32 (URI) or 0 (timestamp)",
                describe(&other)
            ),
        }),
    }
}

/// The event data: bytes as Binary data, text as text (or as a JSON string for a JSON
/// content type), any other value as JSON data.
fn read_data(value: Value, content_type: Option<&str>) -> Result<Data, String> {
    let json_content = content_type.is_none_or(is_json_media_type);
    match value {
        Value::Bytes(bytes) => Ok(Data::Binary(bytes)),
        Value::Text(text) if !json_content => Ok(Data::Text(text)),
        other if json_content => {
            let json = to_json(other, 0)?;
            Ok(Data::Json(JsonText::from_value(&json)))
        }
        other => Err(format!(
            "{} cannot be data of content type `{}`: send it as a byte string or as text",
            describe(&other),
            content_type.unwrap_or_default()
        )),
    }
}

/// A native CBOR value as JSON, or why it has none; `depth` is how many arrays and maps
/// enclose it (at most [`MAX_DATA_DEPTH`] may nest).
fn to_json(value: Value, depth: usize) -> Result<serde_json::Value, String> {
    if matches!(value, Value::Array(_) | Value::Map(_)) && depth >= MAX_DATA_DEPTH {
        return Err(format!(
            "the data nests arrays and maps more than {MAX_DATA_DEPTH} levels deep; at most \
             {MAX_DATA_DEPTH} are allowed"
        ));
    }
    Ok(match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(b),
        Value::Text(text) => serde_json::Value::String(text),
        Value::Integer(n) => {
            let n = i128::from(n);
            if let Ok(n) = i64::try_from(n) {
                n.into()
            } else if let Ok(n) = u64::try_from(n) {
                n.into()
            } else {
                return Err(format!("the integer {n} does not fit in JSON data"));
            }
        }
        Value::Float(f) => serde_json::Number::from_f64(f)
            .map(serde_json::Value::Number)
            .ok_or_else(|| format!("the float {f} has no JSON form"))?,
        Value::Array(items) => {
            let items = items.into_iter().map(|item| to_json(item, depth + 1));
            serde_json::Value::Array(items.collect::<Result<_, _>>()?)
        }
        Value::Map(members) => {
            let mut object = serde_json::Map::new();
            for (key, value) in members {
                let Value::Text(key) = key else {
                    return Err(format!(
                        "a map in the data has a key that is {}; JSON data needs text keys \
                         (or send the data as a byte string)",
                        describe(&key)
                    ));
                };
                object.insert(key, to_json(value, depth + 1)?);
            }
            serde_json::Value::Object(object)
        }
        other => {
            return Err(format!(
                "{} inside the data has no JSON form; send the data as a byte string",
                describe(&other)
            ));
        }
    })
}

fn describe(value: &Value) -> String {
    match value {
        Value::Integer(_) => "an integer".into(),
        Value::Bytes(_) => "a byte string".into(),
        Value::Float(_) => "a float".into(),
        Value::Text(_) => "text".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Null => "null".into(),
        Value::Tag(tag, _) => format!("a value with tag {tag}"),
        Value::Array(_) => "an array".into(),
        Value::Map(_) => "a map".into(),
        _ => "an unknown CBOR value".into(),
    }
}

/// Encodes an event as a CBOR map: the attributes in the JSON format's order, typed by the
/// table above, then `data` (bytes for Binary data, text for text, native values for JSON).
/// Fails only for JSON data that cannot be read into a tree (an event the hub would not
/// have accepted: nested past [`MAX_DATA_DEPTH`]), saying so.
pub fn encode_event(event: &Event) -> Result<Vec<u8>, String> {
    let mut members: Vec<(Value, Value)> = Vec::with_capacity(8 + event.extensions().len());
    let mut put = |name: &str, value: Value| members.push((Value::Text(name.to_owned()), value));
    let text = |s: &str| Value::Text(s.to_owned());
    let tagged = |tag: u64, s: &str| Value::Tag(tag, Box::new(Value::Text(s.to_owned())));
    put("specversion", text(event.specversion()));
    put("id", text(event.id()));
    put("source", tagged(TAG_URI, event.source()));
    put("type", text(event.ty()));
    match event.datacontenttype() {
        Some(value) => put("datacontenttype", text(value)),
        // JSON data whose type the JSON format implied: said in CBOR, where nothing implies
        // it (json-format.md §3.1.2: re-serialized, the event SHOULD carry it).
        None if matches!(event.data(), Some(Data::Json(_))) => {
            put("datacontenttype", text("application/json"));
        }
        None => {}
    }
    if let Some(value) = event.dataschema() {
        put("dataschema", tagged(TAG_URI, value));
    }
    if let Some(value) = event.subject() {
        put("subject", text(value));
    }
    if let Some(value) = event.time() {
        put("time", tagged(TAG_DATE_TIME, value));
    }
    for (name, value) in event.extensions() {
        let value = match value {
            AttributeValue::String(s) => match event.extension_type(name) {
                Some(ExtensionType::Uri) => tagged(TAG_URI, s),
                Some(ExtensionType::Timestamp) => tagged(TAG_DATE_TIME, s),
                Some(ExtensionType::Binary) => match BASE64.decode(s) {
                    Ok(bytes) => Value::Bytes(bytes),
                    Err(_) => text(s),
                },
                None => text(s),
            },
            AttributeValue::Integer(n) => Value::Integer(Integer::from(*n)),
            AttributeValue::Boolean(b) => Value::Bool(*b),
        };
        put(name, value);
    }
    match event.data() {
        None => {}
        Some(Data::Binary(bytes)) => put("data", Value::Bytes(bytes.clone())),
        Some(Data::Text(s)) => put("data", text(s)),
        Some(Data::Json(json)) if json.has_big_integer() => {
            // Rare: read from the text itself, so that such integers stay exact.
            let mut reader = ExactJson {
                text: json.as_str(),
                at: 0,
            };
            put("data", reader.value());
        }
        Some(Data::Json(json)) => {
            let value = json
                .to_value()
                .map_err(|error| format!("the event's JSON data cannot be encoded: {error}"))?;
            put("data", from_json(&value));
        }
    }
    let mut out = Vec::with_capacity(256);
    ciborium::ser::into_writer(&Value::Map(members), &mut out)
        .map_err(|error| format!("the event cannot be encoded as CBOR: {error}"))?;
    Ok(out)
}

/// JSON data (valid, checked by [`JsonText`]) read into native CBOR values straight from
/// its text, for data with integers beyond 64 bits: those become bignums (tag 2, or tag 3
/// for negative ones, RFC 8949 §3.4.3), exact; everything else as [`from_json`] makes it.
struct ExactJson<'a> {
    text: &'a str,
    at: usize,
}

impl ExactJson<'_> {
    fn skip_space(&mut self) {
        let bytes = self.text.as_bytes();
        while self.at < bytes.len() && matches!(bytes[self.at], b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
    }

    fn peek(&self) -> u8 {
        self.text.as_bytes().get(self.at).copied().unwrap_or(0)
    }

    fn value(&mut self) -> Value {
        self.skip_space();
        match self.peek() {
            b'{' => {
                self.at += 1;
                let mut members = Vec::new();
                loop {
                    self.skip_space();
                    match self.peek() {
                        b'}' => {
                            self.at += 1;
                            return Value::Map(members);
                        }
                        b',' => self.at += 1,
                        _ => {
                            let key = self.string();
                            self.skip_space();
                            self.at += 1; // the `:`
                            let value = self.value();
                            members.push((key, value));
                        }
                    }
                }
            }
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_space();
                    match self.peek() {
                        b']' => {
                            self.at += 1;
                            return Value::Array(items);
                        }
                        b',' => self.at += 1,
                        _ => items.push(self.value()),
                    }
                }
            }
            b'"' => self.string(),
            b't' => {
                self.at += 4;
                Value::Bool(true)
            }
            b'f' => {
                self.at += 5;
                Value::Bool(false)
            }
            b'n' => {
                self.at += 4;
                Value::Null
            }
            _ => self.number(),
        }
    }

    fn string(&mut self) -> Value {
        let bytes = self.text.as_bytes();
        let start = self.at;
        self.at += 1;
        while self.at < bytes.len() && bytes[self.at] != b'"' {
            self.at += if bytes[self.at] == b'\\' { 2 } else { 1 };
        }
        self.at += 1;
        let quoted = &self.text[start..self.at.min(self.text.len())];
        Value::Text(serde_json::from_str(quoted).unwrap_or_default())
    }

    fn number(&mut self) -> Value {
        let bytes = self.text.as_bytes();
        let start = self.at;
        while self.at < bytes.len()
            && matches!(
                bytes[self.at],
                b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
            )
        {
            self.at += 1;
        }
        let number = &self.text[start..self.at];
        if number.contains(['.', 'e', 'E']) {
            return Value::Float(number.parse().unwrap_or(f64::NAN));
        }
        if let Ok(n) = number.parse::<i64>() {
            return Value::Integer(Integer::from(n));
        }
        if let Ok(n) = number.parse::<u64>() {
            return Value::Integer(Integer::from(n));
        }
        bignum(number)
    }
}

/// A decimal integer beyond 64 bits as a CBOR bignum: tag 2 with its magnitude, or for a
/// negative `n` tag 3 with `-1 - n`, big-endian bytes.
fn bignum(decimal: &str) -> Value {
    let (negative, digits) = match decimal.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, decimal),
    };
    // Base 256, least significant byte first.
    let mut magnitude: Vec<u8> = Vec::new();
    for digit in digits.bytes().map(|b| u32::from(b - b'0')) {
        let mut carry = digit;
        for byte in &mut magnitude {
            let next = u32::from(*byte) * 10 + carry;
            *byte = next as u8;
            carry = next >> 8;
        }
        while carry > 0 {
            magnitude.push(carry as u8);
            carry >>= 8;
        }
    }
    if negative {
        // -1 - n = |n| - 1: take one away (|n| > 2^64, so it stays positive).
        for byte in &mut magnitude {
            if *byte == 0 {
                *byte = 0xff;
            } else {
                *byte -= 1;
                break;
            }
        }
    }
    while magnitude.len() > 1 && magnitude.last() == Some(&0) {
        magnitude.pop();
    }
    magnitude.reverse();
    Value::Tag(
        if negative { 3 } else { 2 },
        Box::new(Value::Bytes(magnitude)),
    )
}

/// JSON data as native CBOR values: integers stay integers, other numbers become floats.
fn from_json(value: &serde_json::Value) -> Value {
    match value {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Integer(Integer::from(i))
            } else if let Some(u) = n.as_u64() {
                Value::Integer(Integer::from(u))
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::Text(s.clone()),
        serde_json::Value::Array(items) => Value::Array(items.iter().map(from_json).collect()),
        serde_json::Value::Object(members) => Value::Map(
            members
                .iter()
                .map(|(k, v)| (Value::Text(k.clone()), from_json(v)))
                .collect(),
        ),
    }
}
