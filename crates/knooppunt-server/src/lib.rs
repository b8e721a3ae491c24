//! The hub's HTTP server: our own accept loop over hyper, so that every connection is
//! bounded (issue: no client may hold the hub's resources without limit).
//!
//! - At most `max_connections` connections are served at once. When all are taken, the
//!   connection that has waited longest without a whole request being answered (an idle
//!   kept-alive one, or one whose request's headers or body are still arriving) is closed
//!   to make room for the next, unfinished ones first and at once (a fresh connection
//!   nothing was read from yet has 50 ms for its first request); the accept loop goes on draining
//!   the kernel's backlog meanwhile. When every slot answers a whole request, the hub stops
//!   accepting (new clients wait in the backlog) instead of running out of file
//!   descriptors (`peers.rs`).
//! - At most `max_connections_per_peer` of them per client IP address; past it a new
//!   connection of that address is answered 429 and closed at once.
//! - A failed `accept` (such as EMFILE) pauses accepting briefly, never spins.
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
mod peers;
mod tls;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub use body::{BodyTimedOut, timed_out};
pub use tls::TlsSettings;

/// The bounds on inbound connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections served at once.
    pub max_connections: usize,
    /// Connections served at once for one client IP address (behind a reverse proxy, that
    /// is the proxy's: set it to `max_connections` there).
    pub max_connections_per_peer: usize,
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
            max_connections_per_peer: 256,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(90),
        }
    }
}

/// The IP address a request's connection came from (set by the server on every request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerIp(pub std::net::IpAddr);

/// What the server knows of every request of one connection.
struct Requests {
    /// The client's certificate, if it presented one.
    client: Option<knooppunt_identity::ClientCertificate>,
    peer: PeerIp,
    body_timeout: Duration,
    /// How long the connection may stay silent (`Guarded`).
    idle_timeout: Duration,
}

/// The router, with the connection's client certificate (if any) and its peer's address on
/// every request, telling the connection when each request starts and is answered; a body
/// must arrive within `body_timeout`.
fn with_client(
    router: axum::Router,
    Requests {
        client,
        peer,
        body_timeout,
        ..
    }: Requests,
    connection: Arc<peers::Connection>,
) -> impl tower::Service<
    http::Request<hyper::body::Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    let answered = Arc::clone(&connection);
    let router = tower::ServiceExt::<http::Request<hyper::body::Incoming>>::map_response(
        router,
        move |response| {
            answered.request_answered();
            response
        },
    );
    tower::ServiceExt::map_request(
        router,
        move |request: http::Request<hyper::body::Incoming>| {
            let with_body = !http_body::Body::is_end_stream(request.body());
            connection.request_started(with_body);
            let mut request = if with_body {
                let connection = Arc::clone(&connection);
                request.map(|body| {
                    axum::body::Body::new(body::Receiving::new(body, connection, body_timeout))
                })
            } else {
                request.map(axum::body::Body::new)
            };
            request.extensions_mut().insert(peer);
            if let Some(client) = &client {
                request.extensions_mut().insert(client.clone());
            }
            request
        },
    )
}

/// Serves `router` on `listener` within `limits` (over TLS with `tls`) until `shutdown`
/// completes, then lets the requests in flight finish (kept-alive connections are closed
/// once idle). `headers` (lines of `name: value\r\n`) go on the answers the server writes
/// itself: the transport knows nothing else of the application it carries.
pub async fn run(
    listener: TcpListener,
    router: axum::Router,
    limits: ServerLimits,
    tls: Option<TlsSettings>,
    headers: Arc<str>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let max = limits.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let slots = Arc::new(Semaphore::new(max));
    let peers = Arc::new(peers::Peers::default());
    let (stopping, _) = tokio::sync::watch::channel(false);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let acceptor = tls
        .as_ref()
        .map(|tls| tokio_rustls::TlsAcceptor::from(Arc::clone(&tls.config)));
    tokio::pin!(shutdown);
    loop {
        // With every slot taken by a connection with a request in flight, wait here (new
        // clients wait in the backlog); otherwise accept.
        tokio::select! {
            () = &mut shutdown => break,
            () = room(&slots, &peers) => {}
        }
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors or a connection reset before it was accepted:
                    // pause rather than spin.
                    tracing::warn!(%error, "Accepting a connection failed; pausing for 100 ms.");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Some(admitted) = peers.admit(peer.ip(), limits.max_connections_per_peer) else {
            refuse(
                &stream,
                tls.is_none(),
                limits.max_connections_per_peer,
                &headers,
            );
            continue;
        };
        // A slot: a free one, or the one the longest idle connection gives back.
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                peers.close_longest_idle(&admitted);
                tokio::select! {
                    () = &mut shutdown => break,
                    slot = Arc::clone(&slots).acquire_owned() => slot.expect("never closed"),
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let (router, http, acceptor, tls, stop, headers) = (
            router.clone(),
            http.clone(),
            acceptor.clone(),
            tls.clone(),
            stopping.subscribe(),
            Arc::clone(&headers),
        );
        tokio::spawn(async move {
            let connection = Arc::clone(&admitted.connection);
            // Nothing yields before the first read of the socket (or the TLS handshake's).
            connection.seen();
            let requests = Requests {
                client: None,
                peer: PeerIp(peer.ip()),
                body_timeout: limits.body_timeout,
                idle_timeout: limits.idle_timeout,
            };
            let served = match (acceptor, tls) {
                (Some(acceptor), Some(tls)) => {
                    // The handshake runs in the connection's task, within the header
                    // timeout, so a slow client holds only its own slot (and gives it up
                    // when the hub needs it).
                    let handshake = tokio::select! {
                        handshake = tokio::time::timeout(limits.header_timeout, acceptor.accept(stream)) => handshake,
                        () = connection.close.notified() => return,
                    };
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
                    let requests = Requests {
                        client: tls.client(stream.get_ref().1.peer_certificates()),
                        ..requests
                    };
                    serve_stream(stream, requests, headers, router, &http, &connection, stop).await
                }
                _ => {
                    serve_stream(stream, requests, headers, router, &http, &connection, stop).await
                }
            };
            if let Err(error) = served {
                tracing::debug!(%error, "A connection ended with an error.");
            }
            drop((admitted, slot));
        });
    }
    drop(listener);
    // Every connection closes once its requests are answered; wait for all of them.
    stopping.send_replace(true);
    let _all = slots.acquire_many(max as u32).await;
    Ok(())
}

/// Waits until a connection can be taken: a slot is free, or a connection without a
/// request in flight can give its slot up.
async fn room(slots: &Semaphore, peers: &peers::Peers) {
    loop {
        if slots.available_permits() > 0 || peers.any_idle() {
            return;
        }
        // A slot that frees, or a connection whose request was answered (polled: the
        // table has no notification for it, and a full hub is the rare case).
        tokio::select! {
            permit = slots.acquire() => {
                drop(permit);
                return;
            }
            () = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
    }
}

/// Serves the requests of one connection (plain or TLS) until it ends, each knowing the
/// client's certificate, if it presented one.
/// Serves the requests of `stream` (a plain or TLS connection), guarded by the connection's
/// limits; `headers` go on the answers the server writes itself.
async fn serve_stream<S>(
    stream: S,
    requests: Requests,
    headers: Arc<str>,
    router: axum::Router,
    http: &hyper::server::conn::http1::Builder,
    state: &Arc<peers::Connection>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), hyper::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let stream =
        connection::Guarded::new(stream, requests.idle_timeout, headers, Arc::clone(state));
    let service = TowerToHyperService::new(with_client(router, requests, Arc::clone(state)));
    serve(
        http.serve_connection(TokioIo::new(stream), service),
        state,
        stop,
    )
    .await
}

async fn serve<C: hyper_util::server::graceful::GracefulConnection>(
    connection: C,
    state: &peers::Connection,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), C::Error> {
    tokio::pin!(connection);
    let mut closing = false;
    loop {
        tokio::select! {
            served = connection.as_mut() => return served,
            () = state.close.notified(), if !closing => {
                // Part of a request and no whole one being answered: dropped at once (a
                // graceful close would wait for the rest of it, up to the header or body
                // timeout, while another client waits for the slot).
                if state.unfinished() {
                    return Ok(());
                }
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = stop.wait_for(|stopping| *stopping), if !closing => {
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The `Date` header line of an answer the server writes itself (RFC 9110 §6.6.1: an
/// origin server with a clock MUST send it), as hyper puts it on the others.
fn date_line() -> String {
    format!(
        "date: {}\r\n",
        httpdate::fmt_http_date(std::time::SystemTime::now())
    )
}

/// A connection of a peer past its limit: answered 429 (on plain HTTP, if the socket takes
/// the few bytes at once; it is never waited for) and closed.
fn refuse(stream: &tokio::net::TcpStream, plain: bool, limit: usize, headers: &str) {
    if plain {
        let body = format!(
            r#"{{"type":"urn:knooppunt:problem:too-many-connections","title":"Too many connections","status":429,"detail":"this address has {limit} connections open to the hub, the most one client may have (server.max_connections_per_peer): reuse or close one"}}"#
        );
        let answer = format!(
            "HTTP/1.1 429 Too Many Requests\r\n{}content-type: application/problem+json\r\n\
             retry-after: 1\r\n{headers}connection: close\r\ncontent-length: {}\r\n\r\n{body}",
            date_line(),
            body.len()
        );
        let _ = stream.try_write(answer.as_bytes());
    }
    tracing::debug!("A connection past the per-peer limit was refused.");
}
