//! The event payload (`data`) kept exactly as it came, and the media-type questions that
//! decide how it is represented (json-format.md section 3.1).

use serde_json::value::RawValue;

/// The `data` of an event, in the runtime type the JSON event format distinguishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    /// JSON-formatted data (`datacontenttype` absent, `*/json` or `*/*+json`), kept as the
    /// producer's JSON text: numbers, white space and key order are never re-formatted, and a
    /// JSON string is never parsed a second time.
    Json(JsonText),
    /// Text data with a non-JSON content type, carried as a JSON string in `data`.
    Text(String),
    /// Binary data, carried as `data_base64` in JSON.
    Binary(Vec<u8>),
}

impl Data {
    /// The bytes this data has in an HTTP body (binary content mode).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Data::Json(json) => json.as_str().as_bytes(),
            Data::Text(text) => text.as_bytes(),
            Data::Binary(bytes) => bytes,
        }
    }
}

/// The deepest nesting of arrays and objects JSON data may have. One limit, checked
/// wherever JSON data enters the hub (the JSON format, binary mode, CBOR data), so that
/// every encoder the hub has (CBOR delivery reads the data into a tree) can take whatever
/// was accepted; far inside `serde_json`'s own limit of 128.
pub const MAX_DATA_DEPTH: usize = 64;

/// Why text is not JSON data the hub takes.
#[derive(Debug, thiserror::Error)]
pub enum JsonTextError {
    #[error("{0}")]
    Syntax(#[from] serde_json::Error),
    #[error(
        "the JSON data is nested {depth} levels deep (arrays and objects); at most \
         {MAX_DATA_DEPTH} are allowed"
    )]
    TooDeep { depth: usize },
}

/// How deeply arrays and objects nest in `text` (valid JSON), in one pass over its bytes.
pub fn json_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// A piece of text that is known to be one valid JSON value, nested at most
/// [`MAX_DATA_DEPTH`] levels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonText(Box<str>);

impl JsonText {
    /// Checks that `text` is exactly one JSON value within [`MAX_DATA_DEPTH`] and keeps it
    /// unchanged (surrounding white space is dropped).
    pub fn parse(text: &str) -> Result<Self, JsonTextError> {
        let raw: &RawValue = serde_json::from_str(text)?;
        JsonText::from_raw(raw)
    }

    /// Serialises a value. Use this when the hub itself creates data.
    pub fn from_value(value: &serde_json::Value) -> Self {
        JsonText(value.to_string().into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Parses the text into a [`serde_json::Value`] (numbers beyond f64 precision lose
    /// digits). It does not fail for text this type made (valid, within the depth limit);
    /// the error is `serde_json`'s.
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.0)
    }

    /// Keeps a raw JSON value that is within [`MAX_DATA_DEPTH`].
    pub(crate) fn from_raw(raw: &RawValue) -> Result<Self, JsonTextError> {
        match json_depth(raw.get()) {
            depth if depth > MAX_DATA_DEPTH => Err(JsonTextError::TooDeep { depth }),
            _ => Ok(JsonText(raw.get().into())),
        }
    }
}

/// The media type of a content type, without parameters, trimmed and lower-cased.
pub(crate) fn essence(content_type: &str) -> String {
    let end = content_type.find(';').unwrap_or(content_type.len());
    content_type[..end].trim().to_ascii_lowercase()
}

/// Whether a content type declares JSON-formatted data: subtype `json` or a `+json` suffix
/// (json-format.md section 3.1.1).
pub fn is_json_media_type(content_type: &str) -> bool {
    let essence = essence(content_type);
    match essence.split_once('/') {
        Some((_, subtype)) => subtype == "json" || subtype.ends_with("+json"),
        None => false,
    }
}

/// Whether a non-JSON content type declares text, so that a binary-mode body becomes a JSON
/// string (`data`) rather than `data_base64` when the event is written in the JSON format.
pub fn is_text_media_type(content_type: &str) -> bool {
    let essence = essence(content_type);
    let has_charset = content_type
        .split(';')
        .skip(1)
        .any(|param| param.trim().to_ascii_lowercase().starts_with("charset="));
    match essence.split_once('/') {
        Some((kind, subtype)) => {
            has_charset
                || kind == "text"
                || subtype == "xml"
                || subtype.ends_with("+xml")
                || subtype == "javascript"
                || subtype == "x-www-form-urlencoded"
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_media_types_follow_section_3_1() {
        for json in [
            "application/json",
            "APPLICATION/JSON",
            "application/json; charset=utf-8",
            "application/vnd.api+json",
            "text/json",
            "application/cloudevents+json",
        ] {
            assert!(is_json_media_type(json), "{json}");
        }
        for other in [
            "text/plain",
            "application/xml",
            "application/jsonx",
            "json",
            "",
        ] {
            assert!(!is_json_media_type(other), "{other}");
        }
    }

    #[test]
    fn text_media_types() {
        for text in [
            "text/plain",
            "application/xml",
            "image/svg+xml",
            "application/x; charset=utf-8",
        ] {
            assert!(is_text_media_type(text), "{text}");
        }
        for other in [
            "application/octet-stream",
            "image/png",
            "application/vnd.apache.thrift.binary",
        ] {
            assert!(!is_text_media_type(other), "{other}");
        }
    }

    #[test]
    fn json_text_keeps_the_producers_text() {
        let text = JsonText::parse(" {\"b\" : 1.50, \"a\": [1e3]} ").unwrap();
        assert_eq!(text.as_str(), "{\"b\" : 1.50, \"a\": [1e3]}");
        assert!(JsonText::parse("{").is_err());
        assert!(JsonText::parse("1 2").is_err());
    }

    #[test]
    fn depth_is_limited_and_strings_do_not_count() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert_eq!(json_depth(&nested(3)), 3);
        assert_eq!(json_depth(r#"{"a": "[[[{{{\"]]", "b": [{}]}"#), 3);
        assert!(JsonText::parse(&nested(MAX_DATA_DEPTH)).is_ok());
        let error = JsonText::parse(&nested(MAX_DATA_DEPTH + 1)).unwrap_err();
        assert!(
            matches!(error, JsonTextError::TooDeep { depth: 65 }),
            "{error}"
        );
        assert!(error.to_string().contains("at most 64"), "{error}");
        // Far past serde_json's own limit, still one pass and a clear error.
        assert!(matches!(
            JsonText::parse(&nested(100_000)),
            Err(JsonTextError::TooDeep { .. })
        ));
    }
}
