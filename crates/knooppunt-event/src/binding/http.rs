//! The HTTP protocol binding (http-protocol-binding.md): structured, binary and batched
//! content modes, in both directions, on the types of the `http` crate.
//!
//! In binary mode every attribute travels as a `ce-` header holding its canonical string, so
//! an extension's JSON type does not survive: `"comexampleothervalue": 5` becomes the header
//! `ce-comexampleothervalue: 5`, and an event received that way carries the String `"5"`
//! when it is later written in the JSON format. Structured mode forwards the JSON text as is.

use http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use crate::builder::{Assembler, RawAttribute};
use crate::data::{Data, JsonText, JsonTextError, is_json_media_type, is_text_media_type};
use crate::event::{Event, ReceivedEvent};
use crate::format::{cbor, json};
use crate::validate::{Rule, Violation, Violations};

use super::percent;

/// The prefix of every attribute header in binary mode.
pub const HEADER_PREFIX: &str = "ce-";

/// How a message carries its event(s), told by its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentMode {
    /// `application/cloudevents...`: the whole event in the body, in an event format.
    Structured,
    /// `application/cloudevents-batch...`: several events in the body.
    Batched,
    /// Anything else: the data in the body, the attributes in `ce-` headers.
    Binary,
}

impl ContentMode {
    /// Detects the mode from a `Content-Type` value, case-insensitively (section 3).
    pub fn detect(content_type: Option<&HeaderValue>) -> ContentMode {
        let Some(content_type) = content_type else {
            return ContentMode::Binary;
        };
        let lower = String::from_utf8_lossy(content_type.as_bytes()).to_ascii_lowercase();
        let lower = lower.trim_start();
        if lower.starts_with("application/cloudevents-batch") {
            ContentMode::Batched
        } else if lower.starts_with("application/cloudevents") {
            ContentMode::Structured
        } else {
            ContentMode::Binary
        }
    }
}

/// The event(s) one HTTP message carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Single(Box<ReceivedEvent>),
    /// Each event of a batch on its own, so that invalid ones can be named by index.
    Batch(Vec<Result<ReceivedEvent, Violations>>),
}

/// Why a message could not be read as CloudEvents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A CloudEvents media type with an event format other than JSON.
    #[error(
        "content type `{0}` names a CloudEvents event format this hub does not read; send \
         `application/cloudevents+json`, `application/cloudevents+cbor`, \
         `application/cloudevents-batch+json` or binary mode"
    )]
    UnsupportedFormat(String),
    #[error("{0}")]
    Invalid(Violations),
}

/// Reads the event(s) of an HTTP request or response.
pub fn decode(headers: &HeaderMap, body: &[u8]) -> Result<Message, DecodeError> {
    let content_type = headers.get(CONTENT_TYPE);
    let mode = ContentMode::detect(content_type);
    if mode != ContentMode::Binary {
        let value = String::from_utf8_lossy(content_type.map_or(&[][..], |v| v.as_bytes()));
        let format = crate::data::essence(&value);
        if mode == ContentMode::Structured && format == cbor::MEDIA_TYPE {
            return cbor::decode_event(body)
                .map(|event| Message::Single(Box::new(event)))
                .map_err(DecodeError::Invalid);
        }
        let expected = match mode {
            ContentMode::Batched => json::BATCH_MEDIA_TYPE,
            _ => json::MEDIA_TYPE,
        };
        if format != expected {
            return Err(DecodeError::UnsupportedFormat(value.into_owned()));
        }
    }
    match mode {
        ContentMode::Structured => json::decode_event(body)
            .map(|event| Message::Single(Box::new(event)))
            .map_err(DecodeError::Invalid),
        ContentMode::Batched => json::decode_batch(body)
            .map(Message::Batch)
            .map_err(DecodeError::Invalid),
        ContentMode::Binary => decode_binary(headers, body)
            .map(|event| Message::Single(Box::new(event)))
            .map_err(DecodeError::Invalid),
    }
}

/// Reads a binary-mode message: attributes from `ce-` headers, `datacontenttype` from
/// `Content-Type`, data from the body.
pub fn decode_binary(headers: &HeaderMap, body: &[u8]) -> Result<ReceivedEvent, Violations> {
    let mut assembler = Assembler::default();
    for (name, value) in headers {
        let Some(attribute) = name.as_str().strip_prefix(HEADER_PREFIX) else {
            continue;
        };
        if attribute == "datacontenttype" {
            assembler.report(Violation::new(
                name.as_str(),
                Rule::DataContentTypeHeader,
                "binary mode carries `datacontenttype` in `Content-Type`; a \
                 `ce-datacontenttype` header must not be present",
            ));
            continue;
        }
        match percent::decode(value.as_bytes()) {
            Ok(decoded) => assembler.set(attribute, RawAttribute::String(decoded)),
            Err(why) => assembler.report(Violation::new(
                attribute,
                Rule::HeaderEncoding,
                format!("header `{name}`: {why}"),
            )),
        }
    }
    if let Some(content_type) = headers.get(CONTENT_TYPE) {
        match content_type.to_str() {
            Ok(content_type) => assembler.set(
                "datacontenttype",
                RawAttribute::String(content_type.to_owned()),
            ),
            Err(_) => assembler.report(Violation::new(
                "datacontenttype",
                Rule::MediaType,
                "the Content-Type header is not printable ASCII",
            )),
        }
    }
    let data = binary_data(&mut assembler, body);
    Ok(ReceivedEvent {
        event: assembler.finish(data)?,
        json: None,
    })
}

/// Turns a binary-mode body into [`Data`]: JSON for a JSON content type (it must parse),
/// text for a textual content type when the body is UTF-8, bytes otherwise.
fn binary_data(assembler: &mut Assembler, body: &[u8]) -> Option<Data> {
    if body.is_empty() {
        return None;
    }
    let content_type = match assembler.datacontenttype() {
        Some(content_type) => content_type,
        None if assembler.has_errors() => return None,
        None => return Some(Data::Binary(body.to_vec())),
    };
    if is_json_media_type(content_type) {
        let parsed = std::str::from_utf8(body)
            .map_err(|error| error.to_string())
            .and_then(|text| match JsonText::parse(text) {
                Ok(json) => Ok(Ok(json)),
                Err(
                    error @ (JsonTextError::TooDeep { .. } | JsonTextError::NotInteroperable(_)),
                ) => Ok(Err(error)),
                Err(error) => Err(error.to_string()),
            });
        return match parsed {
            Ok(Ok(json)) => Some(Data::Json(json)),
            Ok(Err(refused)) => {
                assembler.report(Violation::new(
                    "data",
                    Rule::of_data(&refused),
                    refused.to_string(),
                ));
                None
            }
            Err(error) => {
                assembler.report(Violation::new(
                    "data",
                    Rule::DataNotJson,
                    format!("Content-Type `{content_type}` declares JSON but the body is not JSON: {error}"),
                ));
                None
            }
        };
    }
    if is_text_media_type(content_type)
        && let Ok(text) = std::str::from_utf8(body)
    {
        return Some(Data::Text(text.to_owned()));
    }
    Some(Data::Binary(body.to_vec()))
}

/// The headers and body of an HTTP message that carries events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpMessage {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// Structured mode: the JSON format in the body, its original text when it has one.
pub fn encode_structured(event: &ReceivedEvent) -> HttpMessage {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(json::MEDIA_TYPE));
    HttpMessage {
        headers,
        body: event.to_json().into_owned().into_bytes(),
    }
}

/// Batched mode: a JSON array of events.
pub fn encode_batch<'a>(events: impl IntoIterator<Item = &'a ReceivedEvent>) -> HttpMessage {
    let mut headers = HeaderMap::new();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static(json::BATCH_MEDIA_TYPE),
    );
    HttpMessage {
        headers,
        body: json::encode_batch(events).into_bytes(),
    }
}

/// Binary mode: every attribute but `datacontenttype` as a percent-encoded `ce-` header, the
/// (effective) `datacontenttype` as `Content-Type`, the data bytes as the body.
pub fn encode_binary(event: &Event) -> HttpMessage {
    let mut headers = HeaderMap::new();
    for (name, value) in event.attributes() {
        if name == "datacontenttype" {
            continue;
        }
        let header = HeaderName::try_from(format!("{HEADER_PREFIX}{name}"))
            .expect("attribute names are [a-z0-9]+");
        let value = HeaderValue::try_from(percent::encode(&value.to_string()))
            .expect("percent-encoded values are printable ASCII");
        headers.insert(header, value);
    }
    if let Some(content_type) = event.effective_datacontenttype() {
        let value = HeaderValue::try_from(content_type)
            .expect("a validated media type is a valid header value");
        headers.insert(CONTENT_TYPE, value);
    }
    HttpMessage {
        headers,
        body: event
            .data()
            .map(Data::as_bytes)
            .unwrap_or_default()
            .to_vec(),
    }
}
