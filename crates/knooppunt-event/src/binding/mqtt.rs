//! The MQTT protocol binding (MQTT 5): an event as the properties and payload of a PUBLISH
//! message, in binary mode (section 3.1: `datacontenttype` as the Content Type property,
//! every other attribute as a User Property of its own name with its canonical string, the
//! data as the payload) or in structured mode (section 3.2: the JSON format as the
//! payload, its media type as the Content Type).

use crate::Event;
use crate::data::Data;
use crate::format::json;

/// What an MQTT 5 PUBLISH carries of an event; the topic and the delivery settings are the
/// subscription's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttMessage {
    /// The Content Type property.
    pub content_type: Option<String>,
    /// User Properties, in order.
    pub user_properties: Vec<(String, String)>,
    pub payload: Vec<u8>,
}

/// Binary mode.
pub fn encode_binary(event: &Event) -> MqttMessage {
    MqttMessage {
        content_type: event.effective_datacontenttype().map(str::to_owned),
        user_properties: event
            .attributes()
            .filter(|(name, _)| *name != "datacontenttype")
            .map(|(name, value)| (name.to_owned(), value.to_string()))
            .collect(),
        payload: event
            .data()
            .map(Data::as_bytes)
            .unwrap_or_default()
            .to_vec(),
    }
}

/// Structured mode: the event's JSON as the publisher sent it (`json_text`, the stored
/// form), unchanged.
pub fn encode_structured(json_text: &str) -> MqttMessage {
    MqttMessage {
        content_type: Some(json::MEDIA_TYPE.to_owned()),
        user_properties: Vec::new(),
        payload: json_text.as_bytes().to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_mode_maps_attributes_to_user_properties_and_data_to_the_payload() {
        let text = r#"{"specversion":"1.0","id":"1","source":"/s","type":"t",
            "datacontenttype":"text/plain","subject":"a b%","count":3,"data":"hallo"}"#;
        let event = json::decode_event(text.as_bytes()).unwrap().event;
        let message = encode_binary(&event);
        assert_eq!(message.content_type.as_deref(), Some("text/plain"));
        assert_eq!(message.payload, b"hallo");
        let properties: std::collections::BTreeMap<_, _> =
            message.user_properties.iter().cloned().collect();
        // Names unchanged, values as canonical strings (no percent-encoding: MQTT carries
        // UTF-8 strings).
        assert_eq!(properties["subject"], "a b%");
        assert_eq!(properties["count"], "3");
        assert_eq!(properties["specversion"], "1.0");
        assert!(!properties.contains_key("datacontenttype"));
        let structured = encode_structured(text);
        assert_eq!(structured.payload, text.as_bytes());
        assert_eq!(
            structured.content_type.as_deref(),
            Some("application/cloudevents+json")
        );
    }
}
