//! The AMQP 1.0 protocol binding: an event as the properties, application properties and
//! body of an AMQP message, in binary mode (section 3.1: `datacontenttype` as the
//! `content-type` property, every other attribute as an application property named
//! `cloudEvents_` and the attribute, the data as one data section) or in structured mode
//! (section 3.2: the JSON format as the data section, with its media type as
//! `content-type`).

use crate::Event;
use crate::data::Data;
use crate::event::AttributeRef;
use crate::format::json;

/// The prefix of an attribute's application property (section 3.1.3.1; the `_` separator
/// is the one JMS 2.0 consumers understand).
pub const PROPERTY_PREFIX: &str = "cloudEvents_";

/// The content type of structured mode (section 3.2.1).
pub const STRUCTURED_CONTENT_TYPE: &str = "application/cloudevents+json; charset=utf-8";

/// An application property's value, in the AMQP type of its attribute's type (section
/// 3.1.3.2): Boolean as boolean, Integer as long, every other type as string (the
/// canonical string of Timestamp, URI and URI-reference).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AmqpValue {
    Boolean(bool),
    Long(i64),
    String(String),
}

/// What an AMQP message carries of an event; the address and link are the subscription's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmqpMessage {
    /// The `content-type` property.
    pub content_type: Option<String>,
    /// Application properties, in order.
    pub application_properties: Vec<(String, AmqpValue)>,
    /// The one data section.
    pub body: Vec<u8>,
}

/// Binary mode.
pub fn encode_binary(event: &Event) -> AmqpMessage {
    AmqpMessage {
        content_type: event.effective_datacontenttype().map(str::to_owned),
        application_properties: event
            .attributes()
            .filter(|(name, _)| *name != "datacontenttype")
            .map(|(name, value)| {
                let value = match value {
                    AttributeRef::Boolean(value) => AmqpValue::Boolean(value),
                    AttributeRef::Integer(value) => AmqpValue::Long(i64::from(value)),
                    AttributeRef::String(value) => AmqpValue::String(value.to_owned()),
                };
                (format!("{PROPERTY_PREFIX}{name}"), value)
            })
            .collect(),
        body: event
            .data()
            .map(Data::as_bytes)
            .unwrap_or_default()
            .to_vec(),
    }
}

/// Structured mode: the event's JSON as the publisher sent it (`json_text`, the stored
/// form), unchanged.
pub fn encode_structured(json_text: &str) -> AmqpMessage {
    debug_assert!(STRUCTURED_CONTENT_TYPE.starts_with(json::MEDIA_TYPE));
    AmqpMessage {
        content_type: Some(STRUCTURED_CONTENT_TYPE.to_owned()),
        application_properties: Vec::new(),
        body: json_text.as_bytes().to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_mode_maps_attributes_to_typed_application_properties() {
        let text = r#"{"specversion":"1.0","id":"1","source":"/s","type":"t",
            "datacontenttype":"text/plain","subject":"a b%","count":3,"urgent":true,
            "time":"2026-01-02T03:04:05Z","data":"hallo"}"#;
        let event = json::decode_event(text.as_bytes()).unwrap().event;
        let message = encode_binary(&event);
        assert_eq!(message.content_type.as_deref(), Some("text/plain"));
        assert_eq!(message.body, b"hallo");
        let properties: std::collections::BTreeMap<_, _> =
            message.application_properties.iter().cloned().collect();
        assert_eq!(
            properties["cloudEvents_subject"],
            AmqpValue::String("a b%".into())
        );
        assert_eq!(properties["cloudEvents_count"], AmqpValue::Long(3));
        assert_eq!(properties["cloudEvents_urgent"], AmqpValue::Boolean(true));
        assert_eq!(
            properties["cloudEvents_time"],
            AmqpValue::String("2026-01-02T03:04:05Z".into())
        );
        assert!(!properties.contains_key("cloudEvents_datacontenttype"));
        let structured = encode_structured(text);
        assert_eq!(structured.body, text.as_bytes());
        assert_eq!(
            structured.content_type.as_deref(),
            Some("application/cloudevents+json; charset=utf-8")
        );
    }
}
