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
    /// Data every format the hub delivers cannot carry as it is (I-JSON, RFC 7493).
    #[error("{0}")]
    NotInteroperable(String),
}

/// The longest piece of a number quoted in an error.
const QUOTED: usize = 40;

/// What the one pass over JSON data finds.
struct Scan {
    deepest: usize,
    /// The first thing no format but JSON could carry as it is.
    problem: Option<String>,
    /// An integer beyond 64 bits is in it (CBOR carries it as a bignum).
    big_integer: bool,
}

/// One pass over `text` (valid JSON): how deeply arrays and objects nest, and the first
/// number or string that I-JSON (RFC 7493 §2.1, §2.2) rules out and that the hub could not
/// deliver unchanged in every mode: a number with a fraction or an exponent beyond an IEEE
/// 754 double's range (CBOR carries such numbers as doubles), or a `\u` escape of an
/// unpaired UTF-16 surrogate (no Unicode text can hold it). Integers of any size are
/// carried (beyond 64 bits as CBOR bignums).
fn scan(text: &str) -> Scan {
    let bytes = text.as_bytes();
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut problem, mut big_integer) = (None, false);
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                at += 1;
                loop {
                    // Jump to the next quote or backslash (most strings have neither).
                    let Some(found) = memchr::memchr2(b'"', b'\\', &bytes[at..]) else {
                        at = bytes.len();
                        break;
                    };
                    at += found;
                    if bytes[at] == b'"' {
                        break;
                    }
                    if bytes.get(at + 1) != Some(&b'u') {
                        at += 2;
                        continue;
                    }
                    let unit = |at: usize| {
                        text.get(at..at + 6)
                            .filter(|escape| escape.starts_with("\\u"))
                            .and_then(|escape| u16::from_str_radix(&escape[2..], 16).ok())
                    };
                    let this = unit(at).unwrap_or(0);
                    let paired = match this {
                        // A high surrogate's low one must follow at once.
                        0xD800..0xDC00 => {
                            unit(at + 6).is_some_and(|u| (0xDC00..0xE000).contains(&u))
                        }
                        // A low one here had no high one before it.
                        0xDC00..0xE000 => false,
                        _ => true,
                    };
                    if !paired && problem.is_none() {
                        problem = Some(format!(
                            "a string holds the escape `{}` of an unpaired UTF-16 surrogate, \
                             which is no Unicode character",
                            &text[at..at + 6]
                        ));
                    }
                    at += if paired && (0xD800..0xDC00).contains(&this) {
                        12
                    } else {
                        6
                    };
                }
            }
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'-' | b'0'..=b'9' => {
                let start = at;
                let (mut integer, mut exponent) = (true, false);
                while at < bytes.len()
                    && matches!(bytes[at], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    integer &= matches!(bytes[at], b'-' | b'0'..=b'9');
                    exponent |= matches!(bytes[at], b'e' | b'E');
                    at += 1;
                }
                let number = &text[start..at];
                // Integers of up to 18 characters always fit, and so does a number without
                // an exponent short of 300 digits; the others are parsed.
                let checked = if integer {
                    number.len() > 18
                } else {
                    exponent || number.len() > 300
                };
                if checked {
                    if integer {
                        big_integer |=
                            number.parse::<i64>().is_err() && number.parse::<u64>().is_err();
                    } else if problem.is_none() {
                        problem = number_problem(number);
                    }
                }
                continue;
            }
            _ => {}
        }
        at += 1;
    }
    Scan {
        deepest,
        problem,
        big_integer,
    }
}

/// Why a number with a fraction or an exponent cannot go as it is, if it cannot.
fn number_problem(number: &str) -> Option<String> {
    let finite = number.parse::<f64>().is_ok_and(f64::is_finite);
    (!finite).then(|| {
        let quoted = if number.len() > QUOTED {
            format!("{}… ({} characters)", &number[..QUOTED], number.len())
        } else {
            number.to_owned()
        };
        format!(
            "the number {quoted} is beyond the range of an IEEE 754 double; send it as a string"
        )
    })
}

/// How deeply arrays and objects nest in `text` (valid JSON), in one pass over its bytes.
pub fn json_depth(text: &str) -> usize {
    scan(text).deepest
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

    /// Whether an integer beyond 64 bits is in it (one more pass over the text).
    pub fn has_big_integer(&self) -> bool {
        scan(&self.0).big_integer
    }

    /// Parses the text into a [`serde_json::Value`] (numbers beyond f64 precision lose
    /// digits). It does not fail for text this type made (valid, within the depth limit);
    /// the error is `serde_json`'s.
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.0)
    }

    /// Keeps a raw JSON value that is within [`MAX_DATA_DEPTH`] and that every format can
    /// carry (see [`JsonTextError::NotInteroperable`]).
    pub(crate) fn from_raw(raw: &RawValue) -> Result<Self, JsonTextError> {
        let scan = scan(raw.get());
        if scan.deepest > MAX_DATA_DEPTH {
            return Err(JsonTextError::TooDeep {
                depth: scan.deepest,
            });
        }
        if let Some(problem) = scan.problem {
            return Err(JsonTextError::NotInteroperable(problem));
        }
        Ok(JsonText(raw.get().into()))
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
    fn data_every_format_can_carry_is_kept_and_other_data_refused() {
        for fine in [
            r#"{"n": 1e300, "m": -1.5E-300, "i": 9223372036854775807, "u": 18446744073709551615}"#,
            r#"[-9223372036854775808, 0.000000000000000000000000000001, 1.7976931348623157e308]"#,
            r#"[18446744073709551616, -9223372036854775809, 1234567890123456789012345678901234567890]"#,
            r#""\ud83d\ude00 and \\ud800 (an escaped backslash) and \u00e9""#,
            r#"{"\ud83d\ude00": "e\"1e999\"", "t": true}"#,
        ] {
            assert!(JsonText::parse(fine).is_ok(), "{fine}");
        }
        for (refused, says) in [
            (r#"{"n": 1e400}"#, "the number 1e400 is beyond"),
            (r#"[-1e309]"#, "the number -1e309 is beyond"),
            (r#""\ud800x""#, "`\\ud800` of an unpaired"),
            (r#""x\udc00""#, "`\\udc00` of an unpaired"),
            (r#"{"\ud800": 1}"#, "`\\ud800` of an unpaired"),
            (r#""\ud800\u0041""#, "`\\ud800` of an unpaired"),
        ] {
            let error = JsonText::parse(refused).unwrap_err();
            assert!(
                matches!(error, JsonTextError::NotInteroperable(_)),
                "{refused}: {error:?}"
            );
            assert!(error.to_string().contains(says), "{refused}: {error}");
        }
        assert!(
            JsonText::parse("[18446744073709551616]")
                .unwrap()
                .has_big_integer()
        );
        assert!(
            !JsonText::parse("[18446744073709551615, 1e300]")
                .unwrap()
                .has_big_integer()
        );
        let long = format!("[{}.5]", "9".repeat(5000));
        let error = JsonText::parse(&long).unwrap_err().to_string();
        assert!(
            error.len() < 200,
            "a long number is not quoted whole: {error}"
        );
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
