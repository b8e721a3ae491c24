//! The encoding of attribute values in HTTP header values (http-protocol-binding.md section
//! 3.1.3.2): percent-encoding of space, `"`, `%` and everything outside U+0021-U+007E as
//! UTF-8 bytes with upper-case hex; on receipt, a value that is one quoted-string is unescaped
//! first (anything else is kept as it is), then one round of percent-decoding, and bytes that
//! are not UTF-8 are rejected.

use std::fmt::Write;

/// Percent-encodes an attribute's canonical string for an HTTP header value.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if c != '"' && c != '%' && ('\u{21}'..='\u{7e}').contains(&c) {
            out.push(c);
        } else {
            let mut buffer = [0; 4];
            for byte in c.encode_utf8(&mut buffer).bytes() {
                write!(out, "%{byte:02X}").expect("writing to a String never fails");
            }
        }
    }
    out
}

/// Percent-encodes text for one URI path segment or query value (RFC 3986 section 2): every
/// byte but the unreserved characters (`A-Z a-z 0-9 - . _ ~`).
pub fn encode_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(byte));
            }
            _ => write!(out, "%{byte:02X}").expect("writing to a String never fails"),
        }
    }
    out
}

/// Decodes an HTTP header value into the attribute's string, or says what is wrong with it.
pub fn decode(header_value: &[u8]) -> Result<String, String> {
    let unquoted = unquote(header_value)?;
    let mut bytes = Vec::with_capacity(unquoted.len());
    let mut i = 0;
    while i < unquoted.len() {
        if unquoted[i] == b'%' {
            let hex = unquoted
                .get(i + 1..i + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok());
            match hex {
                Some(byte) => bytes.push(byte),
                None => {
                    return Err(format!(
                        "`%` at position {i} is not followed by two hex digits; encode a literal \
                         `%` as %25"
                    ));
                }
            }
            i += 3;
        } else {
            bytes.push(unquoted[i]);
            i += 1;
        }
    }
    String::from_utf8(bytes).map_err(|error| {
        format!(
            "the percent-decoded value is not valid UTF-8 ({error}); encode each character as \
             its UTF-8 bytes"
        )
    })
}

/// Unescapes a value that is one RFC 9110 quoted-string as a whole (`"hello world"`, with its
/// backslash escapes), as older senders wrote values with spaces; compliant senders
/// percent-encode `"` and never quote (section 3.1.3.2). Anything else, such as
/// `quoted "x" end` or `"a" "b"`, is not a quoted value but text that contains `"`, and is
/// kept byte for byte: the hub never changes an attribute it cannot read as quoted.
fn unquote(value: &[u8]) -> Result<Vec<u8>, String> {
    let inner = match value {
        [b'"', inner @ .., b'"'] => inner,
        _ => return Ok(value.to_vec()),
    };
    let mut out = Vec::with_capacity(inner.len());
    let mut bytes = inner.iter();
    while let Some(&byte) = bytes.next() {
        match byte {
            // An unescaped `"` inside: not one quoted-string, so not quoted at all.
            b'"' => return Ok(value.to_vec()),
            b'\\' => match bytes.next() {
                Some(&escaped) => out.push(escaped),
                None => return Ok(value.to_vec()),
            },
            _ => out.push(byte),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specs_example() {
        assert_eq!(encode("Euro € 😀"), "Euro%20%E2%82%AC%20%F0%9F%98%80");
        assert_eq!(
            decode(b"Euro%20%E2%82%AC%20%F0%9F%98%80").unwrap(),
            "Euro € 😀"
        );
    }

    #[test]
    fn encodes_exactly_space_quote_percent_and_non_printable() {
        assert_eq!(encode("a b\"c%d"), "a%20b%22c%25d");
        assert_eq!(
            encode("!#$&'()*+,/:;<=>?@[\\]^_`{|}~"),
            "!#$&'()*+,/:;<=>?@[\\]^_`{|}~"
        );
        assert_eq!(encode("\u{7f}\u{80}é"), "%7F%C2%80%C3%A9");
    }

    #[test]
    fn decoding_accepts_lower_case_and_unnecessary_encoding() {
        assert_eq!(decode(b"%e2%82%ac").unwrap(), "€");
        assert_eq!(decode(b"%41%42c").unwrap(), "ABc");
    }

    #[test]
    fn decoding_happens_once() {
        assert_eq!(decode(b"100%2525").unwrap(), "100%25");
    }

    #[test]
    fn decoding_rejects_invalid_utf8_and_bad_escapes() {
        assert!(decode(b"%C0%A0").is_err(), "overlong encoding of space");
        assert!(decode(b"%FF").is_err());
        assert!(decode(b"%E2%82").is_err(), "truncated sequence");
        assert!(decode(b"50%").is_err());
        assert!(decode(b"%zz").is_err());
    }

    #[test]
    fn quoted_strings_are_unescaped_before_percent_decoding() {
        assert_eq!(decode(b"\"hello world\"").unwrap(), "hello world");
        assert_eq!(decode(b"\"say \\\"hi\\\"\"").unwrap(), "say \"hi\"");
        assert_eq!(decode(b"\"%E2%82%AC\"").unwrap(), "€");
    }

    #[test]
    fn a_value_that_is_not_one_quoted_string_is_kept_byte_for_byte() {
        for kept in [
            "quoted \"x\" end",
            "\"a\" \"b\"",
            "\"open",
            "close\"",
            "\"",
            "\"ends in an escape\\\"",
            "a, b, \"c\"",
        ] {
            assert_eq!(decode(kept.as_bytes()).unwrap(), kept);
        }
    }
}
