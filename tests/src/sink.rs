//! A real HTTP sink on 127.0.0.1 port 0 for delivery tests: it records every request and
//! answers the validation handshake and deliveries as the test scripts it. It speaks plain
//! HTTP, or HTTPS with the test certificate of `tests/fixtures/tls` (issued for
//! `localhost` and `127.0.0.1` by the test CA in `ca.pem`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

/// One request the sink received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: Method,
    /// The request target: path and query.
    pub uri: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
    /// When it arrived, in milliseconds since the Unix epoch (to compare with times the
    /// hub reports).
    pub at_ms: u64,
    /// The status the sink answered with.
    pub status: u16,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// How the sink answers one delivery.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// How long to wait before answering.
    pub delay: Duration,
    /// The answer's body.
    pub body: String,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            delay: Duration::ZERO,
            body: String::new(),
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn with_body(mut self, body: &str) -> Reply {
        self.body = body.into();
        self
    }

    pub fn after(mut self, delay: Duration) -> Reply {
        self.delay = delay;
        self
    }
}

/// How the sink answers the `OPTIONS` handshake.
#[derive(Debug, Clone)]
pub enum Consent {
    /// `WebHook-Allowed-Origin` with this value (and `WebHook-Allowed-Rate` when given).
    Grant {
        origin: String,
        rate: Option<String>,
    },
    /// 200 without `WebHook-Allowed-Origin`.
    Refuse,
}

#[derive(Debug)]
struct SinkState {
    received: Mutex<Vec<Received>>,
    script: Mutex<VecDeque<Reply>>,
    default: Mutex<Reply>,
    consent: Mutex<Consent>,
    /// Deliveries being answered now, and the most there ever were at once.
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

/// A sink server that lives as long as the test.
#[derive(Debug, Clone)]
pub struct Sink {
    pub url: String,
    state: Arc<SinkState>,
}

impl Sink {
    /// A sink that grants the test hub's origin and answers every delivery 204.
    pub async fn start() -> Sink {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        Sink::serve(listener, url)
    }

    /// A sink that consents to any hub (`WebHook-Allowed-Origin: *`): a hub started as a
    /// process names its own origin.
    pub async fn start_for_any_hub() -> Sink {
        let sink = Sink::start().await;
        sink.consent(Consent::Grant {
            origin: "*".into(),
            rate: None,
        });
        sink
    }

    /// The same over HTTPS, with a certificate of the test CA ([`test_ca_pem`]).
    pub async fn start_tls() -> Sink {
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/hook", tcp.local_addr().unwrap());
        Sink::serve(TlsListener::new(tcp, None), url)
    }

    /// The same over HTTPS that requires a client certificate issued under `client_ca`
    /// (PEM): a delivery without one never arrives (mutual TLS).
    pub async fn start_mtls(client_ca: &[u8]) -> Sink {
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/hook", tcp.local_addr().unwrap());
        Sink::serve(TlsListener::new(tcp, Some(client_ca)), url)
    }

    fn serve<L: axum::serve::Listener>(listener: L, url: String) -> Sink
    where
        L::Addr: std::fmt::Debug,
    {
        let state = Arc::new(SinkState {
            received: Mutex::new(Vec::new()),
            script: Mutex::new(VecDeque::new()),
            default: Mutex::new(Reply::status(204)),
            consent: Mutex::new(Consent::Grant {
                origin: crate::ORIGIN.into(),
                rate: None,
            }),
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
        });
        let router = axum::Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&state));
        tokio::spawn(async move { axum::serve(listener, router).await });
        Sink { url, state }
    }

    /// The next deliveries get these answers, in order; after them the default.
    pub fn answer(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.script.lock().unwrap().extend(replies);
    }

    /// The answer once the script is used up.
    pub fn answer_always(&self, reply: Reply) {
        *self.state.default.lock().unwrap() = reply;
    }

    pub fn consent(&self, consent: Consent) {
        *self.state.consent.lock().unwrap() = consent;
    }

    /// The most deliveries that were in flight at this sink at once.
    pub fn most_in_flight(&self) -> usize {
        self.state.most_in_flight.load(Ordering::SeqCst)
    }

    /// Every request but `OPTIONS`, in arrival order.
    /// How many deliveries arrived after `after_ms` and before `before_ms` (milliseconds
    /// since the Unix epoch, as the hub reports times; one arriving within the millisecond
    /// after `after_ms` is not counted, as it may have been sent before it).
    pub fn arrived_between(&self, after_ms: u64, before_ms: u64) -> usize {
        self.deliveries()
            .iter()
            .filter(|d| d.at_ms > after_ms + 1 && d.at_ms < before_ms)
            .count()
    }

    pub fn deliveries(&self) -> Vec<Received> {
        self.requests(|m| m != Method::OPTIONS)
    }

    /// The `OPTIONS` handshakes.
    pub fn handshakes(&self) -> Vec<Received> {
        self.requests(|m| m == Method::OPTIONS)
    }

    fn requests(&self, keep: impl Fn(&Method) -> bool) -> Vec<Received> {
        let received = self.state.received.lock().unwrap();
        received
            .iter()
            .filter(|r| keep(&r.method))
            .cloned()
            .collect()
    }

    /// Waits until at least `count` deliveries arrived (at most `within`), and returns them.
    pub async fn wait_for(&self, count: usize, within: Duration) -> Vec<Received> {
        let deadline = Instant::now() + within;
        loop {
            let deliveries = self.deliveries();
            if deliveries.len() >= count {
                return deliveries;
            }
            assert!(
                Instant::now() < deadline,
                "expected {count} deliveries within {within:?}, got {}",
                deliveries.len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn handle(
    State(state): State<Arc<SinkState>>,
    method: Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let options = method == Method::OPTIONS;
    let reply = (!options).then(|| {
        let scripted = state.script.lock().unwrap().pop_front();
        scripted.unwrap_or_else(|| state.default.lock().unwrap().clone())
    });
    state.received.lock().unwrap().push(Received {
        method,
        uri: uri.to_string(),
        headers,
        body,
        at: Instant::now(),
        at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        status: reply.as_ref().map_or(200, |r| r.status),
    });
    let Some(reply) = reply else {
        let consent = state.consent.lock().unwrap().clone();
        let mut response = StatusCode::OK.into_response();
        if let Consent::Grant { origin, rate } = consent {
            let headers = response.headers_mut();
            headers.insert(
                "webhook-allowed-origin",
                HeaderValue::try_from(origin).unwrap(),
            );
            if let Some(rate) = rate {
                headers.insert("webhook-allowed-rate", HeaderValue::try_from(rate).unwrap());
            }
        }
        return response;
    };
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.most_in_flight.fetch_max(now, Ordering::SeqCst);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    let mut response = (StatusCode::from_u16(reply.status).unwrap(), reply.body).into_response();
    for (name, value) in reply.headers {
        response.headers_mut().insert(
            HeaderName::try_from(name).unwrap(),
            HeaderValue::try_from(value).unwrap(),
        );
    }
    response
}

/// The test CA's certificate (PEM), which issued the HTTPS sink's certificate.
pub fn test_ca_pem() -> Vec<u8> {
    std::fs::read(fixture("ca.pem")).unwrap()
}

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tls")
        .join(name)
}

/// Accepts TCP connections and completes the TLS handshake before handing them to axum; a
/// client that refuses the certificate is dropped.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl TlsListener {
    fn new(tcp: tokio::net::TcpListener, client_ca: Option<&[u8]>) -> TlsListener {
        use tokio_rustls::rustls;
        use tokio_rustls::rustls::pki_types::pem::PemObject;
        use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

        let chain = vec![CertificateDer::from_pem_file(fixture("sink.pem")).unwrap()];
        let key = PrivateKeyDer::from_pem_file(fixture("sink.key")).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for certificate in CertificateDer::pem_slice_iter(pem) {
                    roots.add(certificate.unwrap()).unwrap();
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .unwrap();
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder.with_single_cert(chain, key).unwrap();
        TlsListener {
            tcp,
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, address)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(stream).await {
                return (tls, address);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
