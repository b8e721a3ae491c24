//! One accepted connection, guarded: closed after `idle_timeout` without traffic, and with
//! hyper's own answers to unparseable requests turned into problem+json.
//!
//! hyper answers a request it cannot parse by itself, with `400`, `414` or `431` and an empty
//! body, and then closes the connection; the router never sees such a request. Every answer
//! of the router that is an error has a `content-type`, so a response head with
//! `content-length: 0` and one of those statuses can only be hyper's: it is replaced, as it
//! is written, by the same status with a problem+json body.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

pub(crate) struct Guarded<S> {
    stream: S,
    idle: Duration,
    /// Fires `idle` after the last traffic; re-armed lazily when it fires.
    timer: Pin<Box<Sleep>>,
    last_traffic: Instant,
    /// A rewritten answer still to be written, and how much of it was.
    replacement: Option<(Vec<u8>, usize)>,
    /// Header lines the rewritten answers carry.
    headers: std::sync::Arc<str>,
    /// Told of every read that brought bytes (part of a request may have arrived).
    connection: std::sync::Arc<super::peers::Connection>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Guarded<S> {
    pub(crate) fn new(
        stream: S,
        idle: Duration,
        headers: std::sync::Arc<str>,
        connection: std::sync::Arc<super::peers::Connection>,
    ) -> Guarded<S> {
        let now = Instant::now();
        Guarded {
            stream,
            idle,
            timer: Box::pin(tokio::time::sleep_until(now + idle)),
            last_traffic: now,
            replacement: None,
            headers,
            connection,
        }
    }

    /// After a `Pending` from the socket: an error once the connection has been idle too long.
    fn check_idle(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return Ok(());
            }
            let deadline = self.last_traffic + self.idle;
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no traffic for {} ms", self.idle.as_millis()),
                ));
            }
            self.timer.as_mut().reset(deadline);
        }
    }

    /// Notes traffic after a write, or checks the idle time when the socket is not ready.
    fn after_write(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        if written.is_ready() {
            self.last_traffic = Instant::now();
        } else {
            self.check_idle(cx)?;
        }
        written
    }

    /// Writes what is left of a replacement answer.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, written)) = &mut self.replacement {
            if *written == bytes.len() {
                self.replacement = None;
                break;
            }
            let n = ready!(Pin::new(&mut self.stream).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Poll::Ready(Ok(()))
    }
}

/// The problem+json answer that replaces hyper's empty answer `head`, if it is one. Called on
/// every write, so it rules out everything else with a glance at the status line.
fn replacement_for(head: &[u8], headers: &str) -> Option<Vec<u8>> {
    if head.len() < 16 || !head.starts_with(b"HTTP/1.1 4") {
        return None;
    }
    let (status, title, detail) = match &head[9..13] {
        b"400 " => (
            400,
            "Bad Request",
            "the request is not valid HTTP/1.1: check the request line, the header names and \
             values, and the framing (Content-Length or chunked)",
        ),
        b"414 " => (
            414,
            "URI Too Long",
            "the request's URI is longer than the hub accepts",
        ),
        b"431 " => (
            431,
            "Request Header Fields Too Large",
            "the request's headers are larger than the hub accepts (in binary mode, put large \
             attributes in a structured event instead)",
        ),
        _ => return None,
    };
    let text = std::str::from_utf8(head).ok()?;
    let lower = text.to_ascii_lowercase();
    if !text.ends_with("\r\n\r\n")
        || !lower.contains("\r\ncontent-length: 0\r\n")
        || lower.contains("\r\ncontent-type:")
    {
        return None;
    }
    let body = serde_json::json!({
        "type": format!("urn:knooppunt:problem:http-{status}"),
        "title": title,
        "status": status,
        "detail": detail,
    })
    .to_string();
    Some(
        format!(
            "HTTP/1.1 {status} {title}\r\n{}content-type: application/problem+json\r\n\
             content-length: {}\r\n{headers}connection: close\r\n\r\n{body}",
            crate::date_line(),
            body.len()
        )
        .into_bytes(),
    )
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    this.last_traffic = Instant::now();
                    this.connection.bytes_read();
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                this.check_idle(cx)?;
                Poll::Pending
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_replacement(cx))?;
        if let Some(replacement) = replacement_for(buf, &this.headers) {
            this.replacement = Some((replacement, 0));
            // What hyper wrote is accounted for; the replacement goes out on flush.
            return Poll::Ready(Ok(buf.len()));
        }
        let written = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.after_write(cx, written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut parts = bufs.iter().filter(|b| !b.is_empty());
        if let (Some(only), None) = (parts.next(), parts.next())
            && replacement_for(only, &self.headers).is_some()
        {
            return self.poll_write(cx, only);
        }
        let this = self.get_mut();
        ready!(this.poll_replacement(cx))?;
        let written = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.after_write(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_replacement(cx))?;
        Pin::new(&mut this.stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_replacement(cx))?;
        Pin::new(&mut this.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::replacement_for;

    #[test]
    fn only_hypers_empty_error_answers_are_replaced() {
        let hyper =
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let replaced =
            String::from_utf8(replacement_for(hyper, "api-version: 1\r\n").unwrap()).unwrap();
        assert!(replaced.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
        assert!(replaced.contains("content-type: application/problem+json\r\n"));
        assert!(replaced.contains("\r\napi-version: 1\r\n"));
        assert!(replaced.contains("\r\ndate: "), "RFC 9110 §6.6.1");
        assert!(replaced.ends_with("}"));
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/problem+json\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement_for(ours, "").is_none());
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n";
        assert!(replacement_for(with_body, "").is_none());
        assert!(
            replacement_for(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n", "").is_none()
        );
    }
}
