//! The grammars of the CloudEvents type system: attribute names, strings, integers, URIs
//! (RFC 3986), timestamps (RFC 3339) and media types (RFC 2046). Each check returns what is
//! wrong in words a publisher can act on.

use super::{Rule, Violation};

/// `[a-z0-9]+`, and not `data` (reserved by event formats).
pub(crate) fn attribute_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("an attribute name must be at least one character".into());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
    {
        return Err(format!(
            "attribute name `{name}` contains {bad:?}: names may only use lower-case letters a-z \
             and digits 0-9"
        ));
    }
    if name == "data" {
        return Err("`data` is reserved and cannot be an attribute name".into());
    }
    Ok(())
}

/// SHOULD-level advice on a valid attribute name.
pub(crate) fn advise_attribute_name(name: &str, found: &mut Vec<Violation>) {
    if name.len() > 20 {
        found.push(Violation::new(
            name,
            Rule::AttributeNameLength,
            format!(
                "attribute name is {} characters long; names should not exceed 20",
                name.len()
            ),
        ));
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        found.push(Violation::new(
            name,
            Rule::AttributeNameStart,
            "attribute names should start with a letter",
        ));
    }
}

/// No control characters (U+0000-U+001F, U+007F-U+009F) and no Unicode noncharacters. Rust
/// strings cannot hold unpaired surrogates; decoders report those themselves.
pub(crate) fn string_characters(value: &str) -> Result<(), String> {
    for (index, c) in value.char_indices() {
        let code = u32::from(c);
        let control = code <= 0x1F || (0x7F..=0x9F).contains(&code);
        let nonchar = (0xFDD0..=0xFDEF).contains(&code) || code & 0xFFFE == 0xFFFE;
        if control || nonchar {
            let kind = if control {
                "control character"
            } else {
                "Unicode noncharacter"
            };
            return Err(format!(
                "contains the {kind} U+{code:04X} at byte {index}, which CloudEvents strings do \
                 not allow"
            ));
        }
    }
    Ok(())
}

/// The integer component of a JSON number (or a canonical string), optionally negative, in
/// the signed 32-bit range.
pub(crate) fn integer(text: &str) -> Result<i32, String> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let well_formed = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !well_formed {
        return Err(format!(
            "`{text}` is not an Integer: only whole numbers without fraction, exponent or leading \
             zeros are allowed"
        ));
    }
    text.parse::<i32>()
        .map_err(|_| format!("{text} is outside the Integer range -2147483648 to 2147483647"))
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

fn is_pchar(b: u8) -> bool {
    is_unreserved(b) || is_sub_delim(b) || matches!(b, b':' | b'@')
}

/// Checks a run of characters where `allowed` bytes and percent-encoded octets may appear.
fn check_chars(part: &str, what: &str, allowed: impl Fn(u8) -> bool) -> Result<(), String> {
    let bytes = part.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3);
            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                return Err(format!(
                    "has a `%` at byte {i} of the {what} that does not start a percent-encoded \
                     octet (%XX)"
                ));
            }
            i += 3;
            continue;
        }
        if !allowed(b) {
            let shown = part[i..].chars().next().unwrap_or('?');
            return Err(format!(
                "has {shown:?} in the {what}, which a URI does not allow unencoded \
                 (percent-encode it)"
            ));
        }
        i += 1;
    }
    Ok(())
}

/// The scheme, if `value` starts with one (`ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"`).
fn split_scheme(value: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = value.split_once(':')?;
    let mut bytes = scheme.bytes();
    let first = bytes.next()?;
    let valid = first.is_ascii_alphabetic()
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    valid.then_some((scheme, rest))
}

/// `hier-part` or `relative-part`, then query and fragment.
fn check_after_scheme(rest: &str, relative: bool) -> Result<(), String> {
    let (rest, fragment) = match rest.split_once('#') {
        Some((rest, fragment)) => (rest, Some(fragment)),
        None => (rest, None),
    };
    let (hier, query) = match rest.split_once('?') {
        Some((hier, query)) => (hier, Some(query)),
        None => (rest, None),
    };
    let path = if let Some(after) = hier.strip_prefix("//") {
        let end = after.find('/').unwrap_or(after.len());
        check_authority(&after[..end])?;
        &after[end..]
    } else {
        hier
    };
    if relative {
        let first_segment = path.split('/').next().unwrap_or("");
        if !path.starts_with('/') && first_segment.contains(':') {
            return Err(
                "has a `:` in its first path segment, which makes it read as a scheme; \
                 prefix the path with `./`"
                    .into(),
            );
        }
    }
    check_chars(path, "path", |b| is_pchar(b) || b == b'/')?;
    if let Some(query) = query {
        check_chars(query, "query", |b| is_pchar(b) || b == b'/' || b == b'?')?;
    }
    if let Some(fragment) = fragment {
        check_chars(fragment, "fragment", |b| {
            is_pchar(b) || b == b'/' || b == b'?'
        })?;
    }
    Ok(())
}

fn check_authority(authority: &str) -> Result<(), String> {
    let host_port = match authority.rsplit_once('@') {
        Some((userinfo, host_port)) => {
            check_chars(userinfo, "userinfo", |b| {
                is_unreserved(b) || is_sub_delim(b) || b == b':'
            })?;
            host_port
        }
        None => authority,
    };
    let (host, port) = if let Some(literal) = host_port.strip_prefix('[') {
        let (inside, after) = literal
            .split_once(']')
            .ok_or("has an IP literal host without its closing `]`")?;
        check_chars(inside, "IP literal host", |b| {
            b.is_ascii_hexdigit() || matches!(b, b':' | b'.') || is_unreserved(b) || is_sub_delim(b)
        })?;
        match after {
            "" => ("", None),
            _ => match after.strip_prefix(':') {
                Some(port) => ("", Some(port)),
                None => return Err("has characters after its IP literal host".into()),
            },
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    check_chars(host, "host", |b| is_unreserved(b) || is_sub_delim(b))?;
    if let Some(port) = port
        && !port.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(format!("has port `{port}`, which is not a number"));
    }
    Ok(())
}

/// An absolute URI (RFC 3986 section 4.3): a scheme, no fragment.
pub fn uri(value: &str) -> Result<(), String> {
    let Some((_, rest)) = split_scheme(value) else {
        return Err(format!(
            "`{value}` is not an absolute URI: it must start with a scheme such as `https:` or \
             `urn:`"
        ));
    };
    if value.contains('#') {
        return Err(format!(
            "`{value}` has a fragment (`#...`), which an absolute URI (RFC 3986 §4.3) does not \
             allow"
        ));
    }
    check_after_scheme(rest, false).map_err(|why| format!("`{value}` {why}"))
}

/// A URI-reference (RFC 3986 section 4.1): a URI or a relative reference.
pub fn uri_reference(value: &str) -> Result<(), String> {
    let result = match split_scheme(value) {
        Some((_, rest)) => check_after_scheme(rest, false),
        None => check_after_scheme(value, true),
    };
    result.map_err(|why| format!("`{value}` is not a URI-reference: it {why}"))
}

/// An RFC 3339 `date-time`.
pub fn timestamp(value: &str) -> Result<(), String> {
    parse_timestamp(value).map_err(|why| {
        format!(
            "`{value}` is not an RFC 3339 timestamp ({why}); expected e.g. \
             `2026-11-21T17:31:00Z` or `2026-11-21T18:31:00.123+01:00`"
        )
    })
}

fn parse_timestamp(value: &str) -> Result<(), &'static str> {
    let b = value.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Result<u32, &'static str> {
        let part = b.get(range).ok_or("too short")?;
        if !part.iter().all(u8::is_ascii_digit) {
            return Err("a date or time field is not a number");
        }
        Ok(part.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
    };
    let expect = |index: usize, allowed: &[u8], why: &'static str| -> Result<(), &'static str> {
        match b.get(index) {
            Some(c) if allowed.contains(c) => Ok(()),
            _ => Err(why),
        }
    };
    let year = digits(0..4)?;
    expect(4, b"-", "the date must be YYYY-MM-DD")?;
    let month = digits(5..7)?;
    expect(7, b"-", "the date must be YYYY-MM-DD")?;
    let day = digits(8..10)?;
    expect(10, b"Tt", "the date and time must be separated by `T`")?;
    let hour = digits(11..13)?;
    expect(13, b":", "the time must be hh:mm:ss")?;
    let minute = digits(14..16)?;
    expect(16, b":", "the time must be hh:mm:ss")?;
    let second = digits(17..19)?;
    if !(1..=12).contains(&month) {
        return Err("the month is out of range");
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if day == 0 || day > days {
        return Err("the day does not exist in that month");
    }
    if hour > 23 || minute > 59 || second > 60 {
        return Err("the time is out of range");
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Err("the fraction of a second has no digits");
        }
    }
    match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => Ok(()),
        Some(b'+' | b'-') => {
            let offset_hour = digits(i + 1..i + 3)?;
            expect(i + 3, b":", "the offset must be +hh:mm or -hh:mm")?;
            let offset_minute = digits(i + 4..i + 6)?;
            if offset_hour > 23 || offset_minute > 59 {
                return Err("the offset is out of range");
            }
            if i + 6 != b.len() {
                return Err("there is text after the offset");
            }
            Ok(())
        }
        _ => Err("a time offset (`Z` or +hh:mm) is required"),
    }
}

fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(is_token_char)
}

/// `type "/" subtype *( OWS ";" OWS parameter )` with `parameter = token "=" ( token /
/// quoted-string )` (RFC 2045, RFC 2046, RFC 9110 §8.3.1).
pub fn media_type(value: &str) -> Result<(), String> {
    let invalid = |why: &str| {
        Err(format!(
            "`{value}` is not a media type ({why}); expected e.g. `application/json` or \
             `text/plain; charset=utf-8`"
        ))
    };
    if !value
        .bytes()
        .all(|b| (0x20..=0x7E).contains(&b) || b == b'\t')
    {
        return invalid("it has characters outside printable ASCII");
    }
    let (essence, mut params) = match value.find(';') {
        Some(at) => (&value[..at], &value[at..]),
        None => (value, ""),
    };
    let Some((kind, subtype)) = essence.split_once('/') else {
        return invalid("it has no `/` between type and subtype");
    };
    if !is_token(kind) || !is_token(subtype.trim_end_matches([' ', '\t'])) {
        return invalid("the type or subtype has characters a token does not allow");
    }
    while !params.is_empty() {
        params = params.trim_start_matches([' ', '\t']);
        let Some(rest) = params.strip_prefix(';') else {
            return invalid("parameters must be separated by `;`");
        };
        let rest = rest.trim_start_matches([' ', '\t']);
        let Some((name, after)) = rest.split_once('=') else {
            return invalid("a parameter has no `=`");
        };
        if !is_token(name) {
            return invalid("a parameter name is not a token");
        }
        let consumed = if let Some(quoted) = after.strip_prefix('"') {
            let mut escaped = false;
            let mut end = None;
            for (index, c) in quoted.char_indices() {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => {
                        end = Some(index);
                        break;
                    }
                    _ => {}
                }
            }
            match end {
                Some(end) => end + 2,
                None => return invalid("a quoted parameter value is not closed"),
            }
        } else {
            let end = after.find([';', ' ', '\t']).unwrap_or(after.len());
            if !is_token(&after[..end]) {
                return invalid("a parameter value is not a token or quoted string");
            }
            end
        };
        params = &after[consumed..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_names() {
        for good in ["id", "comexampleextension1", "a", "0abc", "traceparent"] {
            assert_eq!(attribute_name(good), Ok(()), "{good}");
        }
        for bad in ["", "Id", "my-ext", "my_ext", "data", "é", "a b"] {
            assert!(attribute_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn naming_advice() {
        let mut found = Vec::new();
        advise_attribute_name("abcdefghijklmnopqrstu", &mut found);
        advise_attribute_name("9lives", &mut found);
        advise_attribute_name("fine", &mut found);
        let rules: Vec<_> = found.iter().map(|v| v.rule).collect();
        assert_eq!(rules, [Rule::AttributeNameLength, Rule::AttributeNameStart]);
    }

    #[test]
    fn strings_reject_controls_and_noncharacters() {
        assert_eq!(string_characters("Euro € 😀 \"quoted\" 100%"), Ok(()));
        for bad in [
            "a\nb",
            "\u{0}",
            "\u{7f}",
            "\u{9f}",
            "\u{fdd0}",
            "\u{fffe}",
            "\u{1ffff}",
        ] {
            assert!(string_characters(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn integers() {
        assert_eq!(integer("5"), Ok(5));
        assert_eq!(integer("-0"), Ok(0));
        assert_eq!(integer("2147483647"), Ok(i32::MAX));
        assert_eq!(integer("-2147483648"), Ok(i32::MIN));
        for bad in [
            "2147483648",
            "-2147483649",
            "5.0",
            "1e3",
            "05",
            "",
            "-",
            "+5",
            " 5",
        ] {
            assert!(integer(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn uris() {
        for good in [
            "https://github.com/cloudevents/spec/pull",
            "urn:nld:oin:00000001823288444000:systeem:BRP-component",
            "mailto:cncf-wg-serverless@lists.cncf.io",
            "http://[::1]:8080/x?y=z",
            "https://user:pw@example.com:443/a%20b",
        ] {
            assert_eq!(uri(good), Ok(()), "{good}");
            assert_eq!(uri_reference(good), Ok(()), "{good}");
        }
        for bad in [
            "/relative",
            "https://example.com/a b",
            "https://example.com/#frag",
            "https://example.com:80x/",
            "https://example.com/%zz",
            "1http://x",
        ] {
            assert!(uri(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn uri_references() {
        for good in [
            "/cloudevents/spec/pull/123",
            "/sensors/tn-1234567/alerts",
            "1-555-123-4567",
            "cloudevents/spec/pull/123",
            "./a:b",
            "https://example.com/#frag",
            "urn:nld:gemeente-Bergen%20%28L%29.burgerzakensysteem",
        ] {
            assert_eq!(uri_reference(good), Ok(()), "{good}");
        }
        for bad in ["a b", "%", "a:b c", "x|y", "//host:port/", "é"] {
            assert!(uri_reference(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timestamps() {
        for good in [
            "2018-04-05T17:31:00Z",
            "2018-04-05t17:31:00z",
            "2024-02-29T23:59:60.123456789+01:00",
            "1985-04-12T23:20:50.52-04:00",
        ] {
            assert_eq!(timestamp(good), Ok(()), "{good}");
        }
        for bad in [
            "2018-04-05",
            "2018-04-05 17:31:00Z",
            "2018-04-05T17:31:00",
            "2023-02-29T00:00:00Z",
            "2018-13-05T17:31:00Z",
            "2018-04-05T24:00:00Z",
            "2018-04-05T17:31:00.Z",
            "2018-04-05T17:31:00+0100",
            "2018-04-05T17:31:00Zjunk",
        ] {
            assert!(timestamp(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn media_types() {
        for good in [
            "application/json",
            "text/plain; charset=utf-8",
            "text/plain;charset=\"utf-8\"",
            "application/vnd.apache.thrift.binary",
            "multipart/form-data; boundary=abc",
        ] {
            assert_eq!(media_type(good), Ok(()), "{good}");
        }
        for bad in [
            "json",
            "text/",
            "/plain",
            "text/plain; charset",
            "te xt/plain",
            "a/b;x=\"y",
        ] {
            assert!(media_type(bad).is_err(), "{bad}");
        }
    }
}
