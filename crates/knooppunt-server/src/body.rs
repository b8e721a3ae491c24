//! A request's body as the server hands it on: it tells its connection when it has ended,
//! and fails with [`BodyTimedOut`] (which the handlers answer with 408) when it is not
//! complete within `body_timeout` of its headers.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The error of a body that took too long.
#[derive(Debug, thiserror::Error)]
#[error("the request body was not complete within {0} ms")]
pub struct BodyTimedOut(pub u128);

/// Whether a body error (from an extractor's rejection) is a body timeout.
pub fn timed_out<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a BodyTimedOut> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(timed_out) = error.downcast_ref::<BodyTimedOut>() {
            return Some(timed_out);
        }
        current = error.source();
    }
    None
}

/// A request body that tells its connection when it has ended (read whole, failed, or
/// dropped unread): until then the request is not whole, and its connection may be closed
/// to make room (`peers.rs`). Its deadline is armed only when a read has to wait: most
/// bodies are in the connection's buffer with their headers, and cost no timer.
pub(super) struct Receiving {
    inner: hyper::body::Incoming,
    connection: Option<std::sync::Arc<super::peers::Connection>>,
    limit: Duration,
    /// When the headers were read.
    started: Instant,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl Receiving {
    pub(super) fn new(
        inner: hyper::body::Incoming,
        connection: std::sync::Arc<super::peers::Connection>,
        limit: Duration,
    ) -> Receiving {
        Receiving {
            inner,
            connection: Some(connection),
            limit,
            started: Instant::now(),
            deadline: None,
        }
    }

    fn ended(&mut self) {
        if let Some(connection) = self.connection.take() {
            connection.body_received();
        }
    }
}

impl Drop for Receiving {
    fn drop(&mut self) {
        self.ended();
    }
}

impl HttpBody for Receiving {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            if matches!(frame, None | Some(Err(_))) || this.inner.is_end_stream() {
                this.ended();
            }
            return Poll::Ready(frame.map(|frame| frame.map_err(axum::Error::new)));
        }
        let (started, limit) = (this.started, this.limit);
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(started + limit)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.ended();
                let millis = this.limit.as_millis();
                Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut(millis)))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
