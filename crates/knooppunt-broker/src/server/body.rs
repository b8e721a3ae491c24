//! The body timeout: a request body that is not complete within `body_timeout` fails with
//! [`BodyTimedOut`], which the handlers answer with 408.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::time::Sleep;

/// The error of a body that took too long.
#[derive(Debug, thiserror::Error)]
#[error("the request body was not complete within {0} ms")]
pub(crate) struct BodyTimedOut(pub(crate) u128);

struct Timed {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
    limit: Duration,
}

impl HttpBody for Timed {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                let millis = self.limit.as_millis();
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

/// Middleware: the body of every request with one must be read within `limit`.
pub(crate) async fn limit_body_time(limit: Duration, request: Request, next: Next) -> Response {
    let empty = request.body().is_end_stream();
    let request = if empty {
        request
    } else {
        request.map(|inner| {
            Body::new(Timed {
                inner,
                deadline: Box::pin(tokio::time::sleep(limit)),
                limit,
            })
        })
    };
    next.run(request).await
}

/// Whether a body error (from an extractor's rejection) is a body timeout.
pub(crate) fn timed_out<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a BodyTimedOut> {
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
/// to make room (`peers.rs`).
pub(super) struct Receiving {
    inner: hyper::body::Incoming,
    connection: Option<std::sync::Arc<super::peers::Connection>>,
}

impl Receiving {
    pub(super) fn new(
        inner: hyper::body::Incoming,
        connection: std::sync::Arc<super::peers::Connection>,
    ) -> Receiving {
        Receiving {
            inner,
            connection: Some(connection),
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
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let frame = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(frame, Poll::Ready(None | Some(Err(_)))) || self.inner.is_end_stream() {
            self.ended();
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
