//! Deliveries to MQTT 5 brokers (`mqtt://`, `mqtts://`): one connection per broker endpoint
//! and credentials, kept and reused by every subscription that names them, reconnecting
//! when needed ([`session`]). A message with QoS 1 or 2 is delivered once the broker
//! acknowledged it (PUBACK, or PUBREC and PUBCOMP) with a success code; QoS 0 once it is
//! written (at most once). The broker's refusals are sorted once here: refused for good
//! (not authorized, an invalid topic, bad credentials) or for now.

mod codec;
mod session;

pub(crate) use codec::Version;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use knooppunt_event::binding::mqtt::MqttMessage;
use knooppunt_store::MqttSettings;
use tokio::sync::{mpsc, oneshot};

use crate::sink::address::SinkNetworks;

/// How a publication ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// The broker acknowledged it (or, at QoS 0, it was written).
    Accepted,
    /// The broker refused it, with its reason; `for_good` when sending it again cannot
    /// help (the broker said not authorized, an invalid topic, bad credentials).
    Refused { reason: String, for_good: bool },
    /// No answer: no connection, or the connection broke off before the acknowledgement.
    Failed(String),
}

/// The longest topic name (MQTT: a UTF-8 string of at most 65,535 bytes; the hub keeps it
/// shorter).
pub const MAX_TOPIC: usize = 1024;

/// A topic a message can be published to: not empty, no wildcards (`+`, `#`), no NUL.
pub fn check_topic(topic: &str) -> Result<(), String> {
    if topic.is_empty() {
        return Err("must not be empty".into());
    }
    if topic.len() > MAX_TOPIC {
        return Err(format!("is longer than {MAX_TOPIC} bytes"));
    }
    if topic.contains(['+', '#']) {
        return Err(
            "has a wildcard (`+` or `#`): messages are published to one topic; wildcards are \
             for subscribers"
                .into(),
        );
    }
    if topic.contains('\0') {
        return Err("contains a NUL character".into());
    }
    Ok(())
}

/// One message for the broker: the subscription's settings and the event's message.
#[derive(Debug)]
pub(crate) struct Publication {
    pub(crate) topic: String,
    pub(crate) qos: u8,
    pub(crate) retain: bool,
    pub(crate) expiry: Option<u32>,
    pub(crate) message: MqttMessage,
}

impl Publication {
    /// The event's message published as `settings` say; the subscription's own user
    /// properties come after the event's.
    pub(crate) fn new(settings: &MqttSettings, mut message: MqttMessage) -> Publication {
        message.user_properties.extend(
            settings
                .user_properties
                .iter()
                .map(|(name, value)| (name.clone(), value.clone())),
        );
        Publication {
            topic: settings.topic.clone(),
            qos: settings.qos,
            retain: settings.retain,
            expiry: settings.expiry,
            message,
        }
    }
}

/// Where and as whom the hub connects.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) tls: bool,
    pub(crate) login: Option<(String, String)>,
    pub(crate) version: Version,
    /// The keep-alive asked of the broker, in seconds; the hub pings at half of it.
    pub(crate) keep_alive: u16,
}

impl Endpoint {
    /// The endpoint of a sink URL (`mqtt://host[:1883]`, `mqtts://host[:8883]`).
    pub(crate) fn of(
        sink: &str,
        login: Option<(String, String)>,
        version: Version,
    ) -> Result<Endpoint, String> {
        let url =
            url::Url::parse(sink).map_err(|error| format!("the sink URL is invalid: {error}"))?;
        let tls = match url.scheme() {
            "mqtt" => false,
            "mqtts" => true,
            other => return Err(format!("`{other}` is not an MQTT scheme")),
        };
        let host = url
            .host_str()
            .ok_or("the sink URL has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        Ok(Endpoint {
            port: url.port().unwrap_or(if tls { 8883 } else { 1883 }),
            host,
            tls,
            login,
            version,
            keep_alive: session::KEEP_ALIVE,
        })
    }

    /// The key of its connection: endpoint and credentials (two subscriptions with other
    /// credentials never share a connection).
    fn key(&self) -> String {
        let login = self
            .login
            .as_ref()
            .map(|(user, password)| format!("{user}\n{password}"));
        format!(
            "{}://{}:{} {:?}\n{}",
            if self.tls { "mqtts" } else { "mqtt" },
            self.host,
            self.port,
            self.version,
            login.unwrap_or_default()
        )
    }
}

/// A request to a connection's task.
struct Request {
    publication: Publication,
    reply: oneshot::Sender<Published>,
}

/// The hub's connections to MQTT brokers.
pub(crate) struct Brokers {
    sessions: Mutex<HashMap<String, mpsc::Sender<Request>>>,
    networks: Arc<SinkNetworks>,
    tls: Arc<rustls::ClientConfig>,
}

/// Requests queued for one connection at most; the sink's permits bound them first.
const QUEUE: usize = 1024;

/// The most connections kept; past it, the map starts over (their tasks end when idle).
const MAX_SESSIONS: usize = 4096;

impl Brokers {
    pub(crate) fn new(networks: Arc<SinkNetworks>, tls: &rustls::ClientConfig) -> Brokers {
        let mut tls = tls.clone();
        // Brokers do not speak HTTP: offer no application protocol.
        tls.alpn_protocols.clear();
        Brokers {
            sessions: Mutex::new(HashMap::new()),
            networks,
            tls: Arc::new(tls),
        }
    }

    /// Publishes to the broker of `endpoint`, waiting up to `within` for its answer.
    pub(crate) async fn publish(
        &self,
        endpoint: Endpoint,
        publication: Publication,
        within: Duration,
    ) -> Published {
        let (reply, answer) = oneshot::channel();
        let mut request = Request { publication, reply };
        // A connection whose task ended (idle, or the map started over) is made again.
        for _ in 0..2 {
            let sender = self.session(&endpoint);
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
                    self.sessions
                        .lock()
                        .expect("sessions lock")
                        .remove(&endpoint.key());
                }
            }
        }
        Published::Failed("no connection to the broker could be started".into())
    }

    /// Whether the broker of `endpoint` takes a connection with its credentials, within
    /// `within` (a subscription's consent: see `Deliverer::handshake`).
    pub(crate) async fn check(&self, endpoint: &Endpoint, within: Duration) -> Result<(), String> {
        let tried = tokio::time::timeout(
            within,
            session::try_connect(endpoint, &self.networks, &self.tls),
        )
        .await
        .unwrap_or_else(|_| {
            Err(Published::Failed(format!(
                "no connection to the broker within {} ms",
                within.as_millis()
            )))
        });
        match tried {
            Ok(()) => Ok(()),
            Err(Published::Refused { reason, .. } | Published::Failed(reason)) => Err(reason),
            Err(Published::Accepted) => Ok(()),
        }
    }

    /// The sender of the endpoint's connection task, started if there is none.
    fn session(&self, endpoint: &Endpoint) -> mpsc::Sender<Request> {
        let key = endpoint.key();
        let mut sessions = self.sessions.lock().expect("sessions lock");
        if let Some(sender) = sessions.get(&key)
            && !sender.is_closed()
        {
            return sender.clone();
        }
        if sessions.len() >= MAX_SESSIONS {
            sessions.clear();
        }
        let (sender, requests) = mpsc::channel(QUEUE);
        tokio::spawn(session::run(
            endpoint.clone(),
            Arc::clone(&self.networks),
            Arc::clone(&self.tls),
            requests,
        ));
        sessions.insert(key, sender.clone());
        sender
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_checked() {
        assert!(check_topic("nl/brp/verhuizingen").is_ok());
        assert!(check_topic("").is_err());
        assert!(check_topic("a/+/b").unwrap_err().contains("wildcard"));
        assert!(check_topic("a/#").is_err());
        assert!(check_topic(&"a".repeat(MAX_TOPIC + 1)).is_err());
    }

    #[test]
    fn endpoints_have_the_default_ports_and_keys_per_credentials() {
        let plain = Endpoint::of("mqtt://broker.example", None, Version::V5).unwrap();
        assert_eq!((plain.port, plain.tls), (1883, false));
        let tls = Endpoint::of("mqtts://broker.example", None, Version::V5).unwrap();
        assert_eq!((tls.port, tls.tls), (8883, true));
        let v6 = Endpoint::of("mqtt://[::1]:1884", None, Version::V5).unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 1884));
        let a = Endpoint::of("mqtt://b:1", Some(("u".into(), "p".into())), Version::V5).unwrap();
        let b = Endpoint::of("mqtt://b:1", Some(("u".into(), "q".into())), Version::V5).unwrap();
        assert_ne!(a.key(), b.key());
        let v3 = Endpoint::of("mqtt://b:1", Some(("u".into(), "p".into())), Version::V3).unwrap();
        assert_ne!(a.key(), v3.key(), "one connection per protocol version");
        assert!(Endpoint::of("http://b", None, Version::V5).is_err());
    }
}

#[cfg(test)]
mod silent_broker {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A broker that takes connections and messages but never acknowledges one: the
    /// attempts time out, and at the next ping the connection is given up and made again.
    #[tokio::test]
    async fn a_broker_that_never_acknowledges_gets_a_new_connection() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        tokio::spawn(async move {
            let mut open = Vec::new();
            loop {
                let (mut stream, _) = listener.accept().await.unwrap();
                counted.fetch_add(1, Ordering::SeqCst);
                let mut buffer = [0u8; 1024];
                let _ = stream.read(&mut buffer).await;
                // CONNACK (MQTT 5): success, no properties.
                stream
                    .write_all(&[0x20, 0x03, 0x00, 0x00, 0x00])
                    .await
                    .unwrap();
                open.push(stream);
            }
        });
        let networks = Arc::new(SinkNetworks::parse(&["127.0.0.0/8".into()]).unwrap());
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
        let brokers = Brokers::new(networks, &tls);
        let mut endpoint =
            Endpoint::of(&format!("mqtt://127.0.0.1:{port}"), None, Version::V5).unwrap();
        endpoint.keep_alive = 2;
        let publication = || Publication {
            topic: "t".into(),
            qos: 1,
            retain: false,
            expiry: None,
            message: MqttMessage {
                content_type: None,
                user_properties: Vec::new(),
                payload: b"x".to_vec(),
            },
        };
        let first = brokers
            .publish(endpoint.clone(), publication(), Duration::from_millis(300))
            .await;
        assert!(
            matches!(&first, Published::Failed(why) if why.contains("no acknowledgement")),
            "{first:?}"
        );
        // The ping a second later finds the abandoned message: the connection ends.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let _ = brokers
            .publish(endpoint, publication(), Duration::from_millis(300))
            .await;
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "connected again");
    }
}
