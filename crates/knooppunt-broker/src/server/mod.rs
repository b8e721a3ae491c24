//! The hub's HTTP server: our own accept loop over hyper, so that every connection is
//! bounded (issue: no client may hold the hub's resources without limit).
//!
//! - At most `max_connections` connections are served at once; past that the hub stops
//!   accepting (new clients wait in the kernel's backlog) instead of running out of file
//!   descriptors. A failed `accept` (such as EMFILE) pauses accepting briefly, never spins.
//! - `header_timeout`: from when the hub waits for a request (on a new connection, or the
//!   next one on a kept-alive connection) until its headers are complete; so it is also how
//!   long a kept-alive connection may stay idle.
//! - `body_timeout`: from the headers until the whole body is read; past it the request is
//!   answered 408 (problem+json) and the connection closed (`body.rs`).
//! - `idle_timeout`: a connection on which nothing was read or written for this long is
//!   closed, whatever it was doing (such as a client that stopped reading its response).
//! - The answers hyper gives on its own to unparseable requests (400, 414, 431, with an
//!   empty body) are rewritten into problem+json on their way out (`connection.rs`).

mod body;
mod connection;
mod tls;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub(crate) use body::{limit_body_time, timed_out};
pub use tls::TlsSettings;

/// The bounds on inbound connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// How long a request's headers (and the wait for them) may take.
    pub header_timeout: Duration,
    /// How long reading a request's body may take.
    pub body_timeout: Duration,
    /// How long a connection may see no traffic at all.
    pub idle_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// The router, with the connection's client certificate (if any) on every request.
fn with_client(
    router: axum::Router,
    client: Option<crate::api::auth::ClientCertificate>,
) -> tower::util::MapRequest<
    axum::Router,
    impl FnMut(http::Request<hyper::body::Incoming>) -> http::Request<hyper::body::Incoming> + Clone,
> {
    tower::ServiceExt::map_request(router, move |mut request: http::Request<_>| {
        if let Some(client) = &client {
            request.extensions_mut().insert(client.clone());
        }
        request
    })
}

/// Serves `router` on `listener` within `limits` (over TLS with `tls`) until `shutdown`
/// completes, then lets the requests in flight finish (kept-alive connections are closed
/// once idle).
pub(crate) async fn run(
    listener: TcpListener,
    router: axum::Router,
    limits: ServerLimits,
    tls: Option<TlsSettings>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let acceptor = tls
        .as_ref()
        .map(|tls| tokio_rustls::TlsAcceptor::from(Arc::clone(&tls.config)));
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = Arc::clone(&slots).acquire_owned() => slot.expect("never closed"),
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of descriptors or a connection reset before it was accepted:
                    // pause rather than spin; the slot goes back.
                    tracing::warn!(%error, "Accepting a connection failed; pausing for 100 ms.");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (router, http, watcher, acceptor, tls) = (
            router.clone(),
            http.clone(),
            graceful.watcher(),
            acceptor.clone(),
            tls.clone(),
        );
        tokio::spawn(async move {
            let served = match (acceptor, tls) {
                (Some(acceptor), Some(tls)) => {
                    // The handshake runs in the connection's task, within the header
                    // timeout, so a slow client holds only its own slot.
                    let handshake =
                        tokio::time::timeout(limits.header_timeout, acceptor.accept(stream)).await;
                    let stream = match handshake {
                        Ok(Ok(stream)) => stream,
                        Ok(Err(error)) => {
                            tracing::debug!(%error, "A TLS handshake failed.");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!("A TLS handshake took longer than the header timeout.");
                            return;
                        }
                    };
                    let client = tls.client(stream.get_ref().1.peer_certificates());
                    let io = TokioIo::new(connection::Guarded::new(stream, limits.idle_timeout));
                    let service = TowerToHyperService::new(with_client(router, client));
                    watcher.watch(http.serve_connection(io, service)).await
                }
                _ => {
                    let io = TokioIo::new(connection::Guarded::new(stream, limits.idle_timeout));
                    let service = TowerToHyperService::new(with_client(router, None));
                    watcher.watch(http.serve_connection(io, service)).await
                }
            };
            if let Err(error) = served {
                tracing::debug!(%error, "A connection ended with an error.");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
