//! The NATS protocol binding: an event as the headers and payload of a NATS message, in
//! binary mode (section 3.1: every attribute, `datacontenttype` included, as a `ce-` header
//! with its canonical string percent-encoded as over HTTP, the data as the payload) or in
//! structured mode (section 3: the JSON format as the payload, with a `Content-Type` header
//! naming it).

use crate::Event;
use crate::binding::percent;
use crate::data::Data;
use crate::format::json;

/// What a NATS message (HPUB) carries of an event; the subject is the subscription's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsMessage {
    /// Headers, in order: names and values of printable ASCII.
    pub headers: Vec<(String, String)>,
    pub payload: Vec<u8>,
}

/// The prefix of an attribute's header (section 3.1.3.1).
pub const HEADER_PREFIX: &str = "ce-";

/// Binary mode. `datacontenttype` is the event's effective one (`application/json` for JSON
/// data without it), so that a receiver can read the payload.
pub fn encode_binary(event: &Event) -> NatsMessage {
    let mut headers: Vec<(String, String)> = event
        .attributes()
        .filter(|(name, _)| *name != "datacontenttype")
        .map(|(name, value)| {
            (
                format!("{HEADER_PREFIX}{name}"),
                percent::encode(&value.to_string()),
            )
        })
        .collect();
    if let Some(content_type) = event.effective_datacontenttype() {
        headers.push((
            format!("{HEADER_PREFIX}datacontenttype"),
            percent::encode(content_type),
        ));
    }
    NatsMessage {
        headers,
        payload: event
            .data()
            .map(Data::as_bytes)
            .unwrap_or_default()
            .to_vec(),
    }
}

/// Structured mode: the event's JSON as the publisher sent it (`json_text`, the stored
/// form), unchanged, with `Content-Type: application/cloudevents+json`.
pub fn encode_structured(json_text: &str) -> NatsMessage {
    NatsMessage {
        headers: vec![("Content-Type".to_owned(), json::MEDIA_TYPE.to_owned())],
        payload: json_text.as_bytes().to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_mode_maps_every_attribute_to_a_percent_encoded_ce_header() {
        let text = r#"{"specversion":"1.0","id":"1","source":"/s","type":"t",
            "datacontenttype":"text/plain","subject":"a b%é","count":3,"data":"hallo"}"#;
        let event = json::decode_event(text.as_bytes()).unwrap().event;
        let message = encode_binary(&event);
        assert_eq!(message.payload, b"hallo");
        let headers: std::collections::BTreeMap<_, _> = message.headers.iter().cloned().collect();
        assert_eq!(headers["ce-subject"], "a%20b%25%C3%A9");
        assert_eq!(headers["ce-count"], "3");
        assert_eq!(headers["ce-specversion"], "1.0");
        assert_eq!(headers["ce-datacontenttype"], "text/plain");
        assert!(!headers.contains_key("Content-Type"));
        let structured = encode_structured(text);
        assert_eq!(structured.payload, text.as_bytes());
        assert_eq!(
            structured.headers,
            [(
                "Content-Type".to_owned(),
                "application/cloudevents+json".to_owned()
            )]
        );
    }

    #[test]
    fn json_data_without_a_content_type_is_named_json() {
        let text = r#"{"specversion":"1.0","id":"1","source":"/s","type":"t","data":{"a":1}}"#;
        let event = json::decode_event(text.as_bytes()).unwrap().event;
        let message = encode_binary(&event);
        let headers: std::collections::BTreeMap<_, _> = message.headers.iter().cloned().collect();
        assert_eq!(headers["ce-datacontenttype"], "application/json");
        assert_eq!(message.payload, br#"{"a":1}"#);
    }
}
