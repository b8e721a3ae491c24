//! The NATS client protocol, as much of it as a publisher needs: what the hub writes
//! (CONNECT, HPUB, SUB, PING, PONG) and what it reads (INFO, PING, PONG, +OK, -ERR, MSG,
//! HMSG), each bounded (a server cannot make the hub buffer without limit).

use bytes::{Buf, BufMut, BytesMut};

/// The longest control line read (an INFO with a large cluster's URLs fits).
const MAX_LINE: usize = 64 * 1024;

/// The largest message read (the hub reads only acknowledgements).
const MAX_MESSAGE: usize = 1024 * 1024;

/// What the server sent.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Op {
    Info(serde_json::Value),
    Ping,
    Pong,
    Ok,
    /// `-ERR`, the text between its quotes.
    Err(String),
    /// A message for one of the hub's subscriptions (an acknowledgement): its subject, the
    /// status of its header block (`503` for no responders), and its payload.
    Msg {
        subject: String,
        status: Option<u16>,
        payload: Vec<u8>,
    },
}

/// The next whole operation in `buffer`, taken out of it; `None` until one has arrived.
pub(super) fn read(buffer: &mut BytesMut) -> Result<Option<Op>, String> {
    let Some(end) = buffer.windows(2).position(|w| w == b"\r\n") else {
        if buffer.len() > MAX_LINE {
            return Err("the server sent a line longer than 64 KiB".into());
        }
        return Ok(None);
    };
    let line = std::str::from_utf8(&buffer[..end])
        .map_err(|_| "the server sent a line that is not UTF-8".to_owned())?;
    let (verb, rest) = line.split_once([' ', '\t']).unwrap_or((line, ""));
    let rest = rest.trim();
    let op = match verb.to_ascii_uppercase().as_str() {
        "INFO" => Op::Info(
            serde_json::from_str(rest)
                .map_err(|error| format!("the server's INFO is not JSON: {error}"))?,
        ),
        "PING" => Op::Ping,
        "PONG" => Op::Pong,
        "+OK" => Op::Ok,
        "-ERR" => Op::Err(rest.trim_matches('\'').to_owned()),
        "MSG" | "HMSG" => {
            let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
            let headers = verb.eq_ignore_ascii_case("HMSG");
            // MSG subject sid [reply] size; HMSG subject sid [reply] header-size size.
            let numbers = if headers { 2 } else { 1 };
            if !(2 + numbers..=3 + numbers).contains(&fields.len()) {
                return Err(format!("the server sent a malformed `{verb}` line"));
            }
            let number = |text: &str| {
                text.parse::<usize>()
                    .map_err(|_| format!("the server sent a malformed `{verb}` size"))
            };
            let size = number(fields[fields.len() - 1])?;
            let header_size = if headers {
                number(fields[fields.len() - 2])?
            } else {
                0
            };
            if size > MAX_MESSAGE || header_size > size {
                return Err(format!(
                    "the server sent a message of {size} bytes; the hub reads at most \
                     {MAX_MESSAGE} (acknowledgements)"
                ));
            }
            let whole = end + 2 + size + 2;
            if buffer.len() < whole {
                return Ok(None);
            }
            let subject = fields[0].to_owned();
            let body = &buffer[end + 2..end + 2 + size];
            let status = if headers {
                status_of(&body[..header_size])
            } else {
                None
            };
            let payload = body[header_size..].to_vec();
            buffer.advance(whole);
            return Ok(Some(Op::Msg {
                subject,
                status,
                payload,
            }));
        }
        _ => return Err(format!("the server sent an unknown operation `{verb}`")),
    };
    buffer.advance(end + 2);
    Ok(Some(op))
}

/// The status code of a header block's first line (`NATS/1.0 503`), if it has one.
fn status_of(headers: &[u8]) -> Option<u16> {
    let first = headers.split(|b| *b == b'\r').next()?;
    let first = std::str::from_utf8(first).ok()?;
    first
        .strip_prefix("NATS/1.0")?
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

/// CONNECT: headers and no-responders on (a publish acknowledgement with no stream behind
/// it is answered with status 503), not verbose, with the login if there is one.
pub(super) fn connect(tls: bool, login: Option<&(String, String)>, out: &mut BytesMut) {
    let mut options = serde_json::json!({
        "verbose": false,
        "pedantic": false,
        "tls_required": tls,
        "name": "knooppunt",
        "lang": "rust",
        "version": env!("CARGO_PKG_VERSION"),
        "protocol": 1,
        "headers": true,
        "no_responders": true,
    });
    if let Some((user, password)) = login {
        options["user"] = user.as_str().into();
        options["pass"] = password.as_str().into();
    }
    out.put_slice(b"CONNECT ");
    out.put_slice(options.to_string().as_bytes());
    out.put_slice(b"\r\n");
}

/// SUB.
pub(super) fn subscribe(subject: &str, sid: u64, out: &mut BytesMut) {
    out.put_slice(format!("SUB {subject} {sid}\r\n").as_bytes());
}

/// HPUB of `headers` and `payload` to `subject`, replies to `reply`; what is wrong when a
/// header cannot be sent (a line end in it).
pub(super) fn publish(
    subject: &str,
    reply: Option<&str>,
    headers: &[(String, String)],
    payload: &[u8],
    out: &mut BytesMut,
) -> Result<(), String> {
    let mut block = Vec::with_capacity(64 + headers.len() * 32);
    block.extend_from_slice(b"NATS/1.0\r\n");
    for (name, value) in headers {
        let bad = |text: &str| text.bytes().any(|b| b == b'\r' || b == b'\n');
        if name.is_empty() || bad(name) || name.contains(':') || bad(value) {
            return Err(format!(
                "the header `{name}` cannot be sent in a NATS message"
            ));
        }
        block.extend_from_slice(name.as_bytes());
        block.extend_from_slice(b": ");
        block.extend_from_slice(value.as_bytes());
        block.extend_from_slice(b"\r\n");
    }
    block.extend_from_slice(b"\r\n");
    let reply = reply.map(|r| format!(" {r}")).unwrap_or_default();
    out.put_slice(
        format!(
            "HPUB {subject}{reply} {} {}\r\n",
            block.len(),
            block.len() + payload.len()
        )
        .as_bytes(),
    );
    out.put_slice(&block);
    out.put_slice(payload);
    out.put_slice(b"\r\n");
    Ok(())
}

/// The bytes an HPUB of these counts as the server's `max_payload` counts them (headers
/// and payload).
pub(super) fn size(headers: &[(String, String)], payload: &[u8]) -> usize {
    12 + headers
        .iter()
        .map(|(name, value)| name.len() + value.len() + 4)
        .sum::<usize>()
        + payload.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(mut wire: BytesMut) -> Vec<Op> {
        let mut ops = Vec::new();
        while let Some(op) = read(&mut wire).unwrap() {
            ops.push(op);
        }
        assert!(wire.is_empty(), "{wire:?} left");
        ops
    }

    #[test]
    fn server_operations_are_read_whole_and_only_when_whole() {
        let wire = BytesMut::from(
            &b"INFO {\"headers\":true,\"max_payload\":1048576}\r\nPING\r\n+OK\r\n\
              -ERR 'Permissions Violation for Publish to \"a.b\"'\r\n\
              MSG _INBOX.x.1 1 24\r\n{\"stream\":\"S\",\"seq\":1}  \r\n\
              HMSG _INBOX.x.2 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\nPONG\r\n"[..],
        );
        let ops = all(wire);
        assert_eq!(ops.len(), 7, "{ops:?}");
        assert!(matches!(&ops[0], Op::Info(info) if info["max_payload"] == 1_048_576));
        assert_eq!(
            ops[3],
            Op::Err("Permissions Violation for Publish to \"a.b\"".into())
        );
        assert_eq!(
            ops[4],
            Op::Msg {
                subject: "_INBOX.x.1".into(),
                status: None,
                payload: b"{\"stream\":\"S\",\"seq\":1}  ".to_vec()
            }
        );
        assert!(
            matches!(&ops[5], Op::Msg { status: Some(503), payload, .. } if payload.is_empty())
        );
        let mut half = BytesMut::from(&b"MSG a 1 5\r\nhel"[..]);
        assert_eq!(
            read(&mut half).unwrap(),
            None,
            "not before the payload is in"
        );
        half.put_slice(b"lo\r\n");
        assert!(matches!(read(&mut half).unwrap(), Some(Op::Msg { .. })));
    }

    #[test]
    fn a_server_cannot_make_the_hub_buffer_without_bound() {
        let mut huge = BytesMut::from(&b"MSG a 1 999999999\r\n"[..]);
        assert!(read(&mut huge).is_err());
        let mut endless = BytesMut::from(&vec![b'x'; MAX_LINE + 1][..]);
        assert!(read(&mut endless).is_err());
    }

    #[test]
    fn hpub_counts_its_header_block_and_refuses_line_ends() {
        let mut out = BytesMut::new();
        let headers = [("ce-id".to_owned(), "1".to_owned())];
        publish("a.b", Some("_INBOX.x.1"), &headers, b"data", &mut out).unwrap();
        let block = "NATS/1.0\r\nce-id: 1\r\n\r\n";
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            format!(
                "HPUB a.b _INBOX.x.1 {} {}\r\n{block}data\r\n",
                block.len(),
                block.len() + 4
            )
        );
        assert_eq!(size(&headers, b"data"), block.len() + 4);
        let bad = [("x".to_owned(), "a\r\nb".to_owned())];
        assert!(publish("a", None, &bad, b"", &mut out).is_err());
    }
}
