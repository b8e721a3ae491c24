//! What every broker protocol shares (MQTT in [`super::mqtt`], NATS in [`super::nats`], AMQP
//! 1.0 in [`super::amqp`]): how a publication ended ([`Published`]), one connection task
//! per endpoint and credentials ([`Sessions`]), dialling a broker through the hub's address
//! check and trust store ([`dial`]), and an event's message, delivery and consent as the
//! [`super::Sink`] trait has them ([`encoded`], [`Sessions::deliver_to`], [`consent`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use knooppunt_store::{DeliveryMode, SinkCredential, StoredEvent, Subscription};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};

use crate::outcome::Response;
use crate::sink::address::{AddressRefused, SinkNetworks};
use crate::sink::{Handshake, Sent, To};

/// How a publication ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// The broker acknowledged it (or, at most once, it was written).
    Accepted,
    /// The broker refused it, with its reason; `for_good` when sending it again cannot
    /// help (not authorized, an invalid topic, bad credentials, no stream).
    Refused { reason: String, for_good: bool },
    /// No answer: no connection, or the connection broke off before the acknowledgement.
    Failed(String),
}

impl From<Published> for Response {
    fn from(published: Published) -> Response {
        match published {
            Published::Accepted => Response::Acknowledged,
            Published::Refused { reason, for_good } => Response::Refused { reason, for_good },
            Published::Failed(why) => Response::Failed(why),
        }
    }
}

/// A subscription's PLAIN credential as a broker login (user name, password).
pub(crate) fn login(subscription: &Subscription) -> Option<(String, String)> {
    match &subscription.sink_credential {
        Some(SinkCredential::Plain { identifier, secret }) => {
            Some((identifier.clone(), secret.clone()))
        }
        _ => None,
    }
}

/// A request to a connection's task: a message and where its answer goes.
pub(crate) struct Request<M> {
    pub(crate) message: M,
    pub(crate) reply: oneshot::Sender<Published>,
}

/// Requests queued for one connection at most; the sink's permits bound them first.
const QUEUE: usize = 1024;

/// The most connections kept; past it, the map starts over (their tasks end when idle).
const MAX_SESSIONS: usize = 4096;

/// The connection tasks of one protocol, by endpoint and credentials, and what they connect
/// with: the hub's sink networks and TLS settings.
pub(crate) struct Sessions<M> {
    sessions: Mutex<HashMap<String, mpsc::Sender<Request<M>>>>,
    networks: Arc<SinkNetworks>,
    tls: Arc<rustls::ClientConfig>,
}

impl<M: Send + 'static> Sessions<M> {
    pub(crate) fn new(networks: Arc<SinkNetworks>, tls: Arc<rustls::ClientConfig>) -> Self {
        Sessions {
            sessions: Mutex::new(HashMap::new()),
            networks,
            tls,
        }
    }

    pub(crate) fn networks(&self) -> &SinkNetworks {
        &self.networks
    }

    pub(crate) fn tls(&self) -> &Arc<rustls::ClientConfig> {
        &self.tls
    }

    /// Sends `message` to the connection task of `key` (started with `start` if there is
    /// none, or if it ended) and waits up to `within` for the answer.
    pub(crate) async fn send<F>(
        &self,
        key: &str,
        start: impl Fn(Arc<SinkNetworks>, Arc<rustls::ClientConfig>, mpsc::Receiver<Request<M>>) -> F,
        message: M,
        within: Duration,
    ) -> Published
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let mut request = Request { message, reply };
        // A connection whose task ended (idle, or the map started over) is made again.
        for _ in 0..2 {
            let sender = self.session(key, &start);
            match sender.try_send(request) {
                Ok(()) => {
                    return match tokio::time::timeout(within, answer).await {
                        Ok(Ok(published)) => published,
                        Ok(Err(_)) => Published::Failed(
                            "the connection to the broker ended before it answered".into(),
                        ),
                        Err(_) => Published::Failed(format!(
                            "no acknowledgement from the broker within {} ms",
                            within.as_millis()
                        )),
                    };
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    return Published::Failed(
                        "too many messages wait for this broker's connection".into(),
                    );
                }
                Err(mpsc::error::TrySendError::Closed(back)) => {
                    request = back;
                    self.sessions.lock().expect("sessions lock").remove(key);
                }
            }
        }
        Published::Failed("no connection to the broker could be started".into())
    }

    /// The sender of the key's connection task, started if there is none.
    fn session<F>(
        &self,
        key: &str,
        start: &impl Fn(Arc<SinkNetworks>, Arc<rustls::ClientConfig>, mpsc::Receiver<Request<M>>) -> F,
    ) -> mpsc::Sender<Request<M>>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut sessions = self.sessions.lock().expect("sessions lock");
        if let Some(sender) = sessions.get(key)
            && !sender.is_closed()
        {
            return sender.clone();
        }
        if sessions.len() >= MAX_SESSIONS {
            sessions.clear();
        }
        let (sender, requests) = mpsc::channel(QUEUE);
        tokio::spawn(start(
            Arc::clone(&self.networks),
            Arc::clone(&self.tls),
            requests,
        ));
        sessions.insert(key.to_owned(), sender.clone());
        sender
    }
}

/// Fails every request that waits in `requests` now with `why` (after a refused
/// connection: they would meet the same refusal).
pub(crate) fn refuse_queued<M>(
    first: Request<M>,
    requests: &mut mpsc::Receiver<Request<M>>,
    why: &Published,
) {
    let _ = first.reply.send(why.clone());
    while let Ok(request) = requests.try_recv() {
        let _ = request.reply.send(why.clone());
    }
}

/// A connection to a broker: TCP, or TLS over it.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send + std::fmt::Debug {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + std::fmt::Debug> Io for T {}

/// "`what` the broker failed: `error`", a failure to try again.
pub(crate) fn failed(what: &str, error: &dyn std::fmt::Display) -> Published {
    Published::Failed(format!("{what} the broker failed: {error}"))
}

/// A TCP connection to `host:port` at an address the hub's sink networks permit (checked
/// at every connection, so a name that later resolves to a private address is refused).
pub(crate) async fn dial(
    host: &str,
    port: u16,
    networks: &SinkNetworks,
) -> Result<tokio::net::TcpStream, Published> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|error| failed("resolving the name of", &error))?
        .collect();
    let Some(address) = addresses
        .iter()
        .find(|address| networks.permits(address.ip()))
    else {
        return Err(Published::Failed(AddressRefused.to_string()));
    };
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|error| failed("connecting to", &error))?;
    let _ = tcp.set_nodelay(true);
    Ok(tcp)
}

/// TLS over `io` to `host`, its certificate checked against the hub's trust store.
pub(crate) async fn secure<S: Io + 'static>(
    io: S,
    host: &str,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<Box<dyn Io>, Published> {
    let name = rustls_pki_types::ServerName::try_from(host.to_owned())
        .map_err(|error| failed("naming", &error))?;
    let stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
        .connect(name, io)
        .await
        .map_err(|error| failed("the TLS handshake with", &error))?;
    Ok(Box::new(stream))
}

/// The broker's answer to a try at connecting within `within`, as a consent check reads it.
pub(crate) async fn consent(
    within: Duration,
    tried: impl Future<Output = Result<(), Published>>,
) -> Handshake {
    match tokio::time::timeout(within, tried).await {
        Err(_) => Handshake::Failed(format!(
            "no connection to the broker within {} ms",
            within.as_millis()
        )),
        Ok(Ok(()) | Err(Published::Accepted)) => Handshake::Granted { allowed_rate: None },
        Ok(Err(Published::Refused { reason, .. } | Published::Failed(reason))) => {
            Handshake::Failed(reason)
        }
    }
}

impl<M: Send + 'static> Sessions<M> {
    /// A delivery to a broker: once it may begin, `message` on the connection of `endpoint`
    /// (keyed by `key`; its task `run`), the broker's answer awaited until the deadline; or
    /// why there is no endpoint.
    pub(crate) async fn deliver_to<E, R, F>(
        &self,
        to: To<'_>,
        endpoint: Result<E, String>,
        key: impl FnOnce(&E) -> String,
        run: R,
        message: M,
    ) -> Sent
    where
        E: Clone,
        R: Fn(E, Arc<SinkNetworks>, Arc<rustls::ClientConfig>, mpsc::Receiver<Request<M>>) -> F,
        F: Future<Output = ()> + Send + 'static,
    {
        let endpoint = match endpoint {
            Ok(endpoint) => endpoint,
            Err(why) => return Sent::Unsent(why),
        };
        if !to.begins() {
            return Sent::Cut;
        }
        let key = key(&endpoint);
        let start = |networks, tls, requests| run(endpoint.clone(), networks, tls, requests);
        Sent::Answered(self.send(&key, start, message, to.within()).await.into())
    }
}

/// The event in structured or binary mode, the two modes every broker binding defines
/// (`binary` and `structured` encode it); another mode is refused naming the `protocol`.
pub(crate) fn encoded<T>(
    subscription: &Subscription,
    mode: DeliveryMode,
    event: &StoredEvent,
    protocol: &str,
    binary: fn(&knooppunt_event::Event) -> T,
    structured: fn(&str) -> T,
) -> Result<T, String> {
    match mode {
        DeliveryMode::Binary => Ok(binary(&super::read_stored(&event.json)?.event)),
        DeliveryMode::Structured => Ok(structured(&event.json)),
        other => Err(format!(
            "subscription `{}` delivers to {protocol} in mode {other:?}, which the {protocol} \
             binding does not define: use `structured` or `binary`",
            subscription.id
        )),
    }
}

/// Where and as whom the hub connects to a broker.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) tls: bool,
    pub(crate) login: Option<(String, String)>,
}

impl Endpoint {
    /// The endpoint of a sink URL (`scheme://host[:port]`) whose scheme is `schemes.0`
    /// (plain, port `ports.0` by default) or `schemes.1` (TLS, port `ports.1`).
    pub(crate) fn of(
        sink: &str,
        (plain_scheme, tls_scheme): (&str, &str),
        ports: (u16, u16),
        login: Option<(String, String)>,
    ) -> Result<Endpoint, String> {
        let url =
            url::Url::parse(sink).map_err(|error| format!("the sink URL is invalid: {error}"))?;
        let tls = match url.scheme() {
            scheme if scheme == plain_scheme => false,
            scheme if scheme == tls_scheme => true,
            other => return Err(format!("`{other}` is not a {plain_scheme} scheme")),
        };
        let host = url
            .host_str()
            .ok_or("the sink URL has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        Ok(Endpoint {
            host,
            port: url.port().unwrap_or(if tls { ports.1 } else { ports.0 }),
            tls,
            login,
        })
    }

    /// The key of its connection: endpoint and credentials (subscriptions with other
    /// credentials never share a connection), and what else tells connections apart (the
    /// protocol, a version).
    pub(crate) fn key(&self, other: &str) -> String {
        let login = self
            .login
            .as_ref()
            .map(|(user, password)| format!("{user}\n{password}"));
        format!(
            "{}:{} {} {other}\n{}",
            self.host,
            self.port,
            self.tls,
            login.unwrap_or_default()
        )
    }
}
