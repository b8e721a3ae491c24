//! Deliveries to MQTT 5 brokers (`mqtt://`, `mqtts://`): one connection per broker endpoint
//! and credentials, kept and reused by every subscription that names them, reconnecting
//! when needed ([`session`]). A message with QoS 1 or 2 is delivered once the broker
//! acknowledged it (PUBACK, or PUBREC and PUBCOMP) with a success code; QoS 0 once it is
//! written (at most once). The broker's refusals are sorted once here: refused for good
//! (not authorized, an invalid topic, bad credentials) or for now.

mod codec;
mod session;

pub(crate) use codec::Version;

use std::time::Duration;

use knooppunt_event::binding::mqtt::MqttMessage;
use knooppunt_store::{
    DeliveryMode, MqttSettings, MqttVersion, ProtocolSettings, StoredEvent, Subscription,
};

use super::broker::{self, Published, Sessions};
use super::{Handshake, Hop, Sent, Sink, To};

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

/// Where and as whom the hub connects, and in which version.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub(crate) at: broker::Endpoint,
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
        Ok(Endpoint {
            at: broker::Endpoint::of(sink, ("mqtt", "mqtts"), (1883, 8883), login)?,
            version,
            keep_alive: session::KEEP_ALIVE,
        })
    }

    /// The key of its connection: endpoint, credentials and version.
    fn key(&self) -> String {
        self.at.key(&format!("mqtt {:?}", self.version))
    }

    /// The endpoint of an MQTT subscription: its sink, logged in with its PLAIN credential.
    fn of_subscription(subscription: &Subscription) -> Result<Endpoint, String> {
        let version = match &subscription.protocol_settings {
            ProtocolSettings::Mqtt(settings) => match settings.version {
                MqttVersion::V3 => Version::V3,
                MqttVersion::V5 => Version::V5,
            },
            _ => return Err("the subscription is not one to an MQTT broker".into()),
        };
        Endpoint::of(&subscription.sink, broker::login(subscription), version)
    }
}

/// The hub's connections to MQTT brokers.
pub(crate) type Brokers = Sessions<Publication>;

impl Sink for Sessions<Publication> {
    type Message = Publication;

    /// Binary mode, or structured mode in the JSON format (the MQTT binding defines no
    /// other); a replay adds a user property naming it.
    fn message(
        &self,
        subscription: &Subscription,
        mode: DeliveryMode,
        event: &StoredEvent,
        hop: &Hop<'_>,
    ) -> Result<Publication, String> {
        use knooppunt_event::binding::mqtt as binding;
        let ProtocolSettings::Mqtt(settings) = &subscription.protocol_settings else {
            return Err("the subscription is not one to an MQTT broker".into());
        };
        let message = match mode {
            // MQTT 3.1.1 has no properties to carry the attributes in.
            DeliveryMode::Binary if settings.version == MqttVersion::V3 => {
                return Err(format!(
                    "subscription `{}` delivers to MQTT 3.1.1 in binary mode, which the MQTT \
                     binding does not define: use `structured`",
                    subscription.id
                ));
            }
            _ => broker::encoded(
                subscription,
                mode,
                event,
                "MQTT",
                binding::encode_binary,
                binding::encode_structured,
            )?,
        };
        let mut publication = Publication::new(settings, message);
        if let Some(replay) = hop.replay {
            // A replayed delivery names its replay, as over HTTP (a user property's name
            // with a hyphen is never an attribute's).
            publication
                .message
                .user_properties
                .push((crate::REPLAY_HEADER.as_str().to_owned(), replay.to_owned()));
        }
        Ok(publication)
    }

    async fn deliver(&self, to: To<'_>, publication: Publication) -> Sent {
        let endpoint = Endpoint::of_subscription(to.subscription);
        self.deliver_to(to, endpoint, Endpoint::key, session::run, publication)
            .await
    }

    async fn consent(
        &self,
        subscription: &Subscription,
        _callback: &str,
        within: Duration,
    ) -> Handshake {
        let endpoint = match Endpoint::of_subscription(subscription) {
            Ok(endpoint) => endpoint,
            Err(why) => return Handshake::Failed(why),
        };
        broker::consent(
            within,
            session::try_connect(&endpoint, self.networks(), self.tls()),
        )
        .await
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
        assert_eq!((plain.at.port, plain.at.tls), (1883, false));
        let tls = Endpoint::of("mqtts://broker.example", None, Version::V5).unwrap();
        assert_eq!((tls.at.port, tls.at.tls), (8883, true));
        let v6 = Endpoint::of("mqtt://[::1]:1884", None, Version::V5).unwrap();
        assert_eq!((v6.at.host.as_str(), v6.at.port), ("::1", 1884));
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
    use crate::sink::address::SinkNetworks;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Publishes to the broker of `endpoint` (the connection a delivery would use),
    /// waiting up to `within` for its answer.
    async fn publish_to(
        brokers: &Brokers,
        endpoint: Endpoint,
        publication: Publication,
        within: Duration,
    ) -> Published {
        let key = endpoint.key();
        let start =
            |networks, tls, requests| session::run(endpoint.clone(), networks, tls, requests);
        brokers.send(&key, start, publication, within).await
    }

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
        let brokers = Brokers::new(networks, Arc::new(tls));
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
        let first = publish_to(
            &brokers,
            endpoint.clone(),
            publication(),
            Duration::from_millis(300),
        )
        .await;
        assert!(
            matches!(&first, Published::Failed(why) if why.contains("no acknowledgement")),
            "{first:?}"
        );
        // The ping a second later finds the abandoned message: the connection ends.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let _ = publish_to(
            &brokers,
            endpoint,
            publication(),
            Duration::from_millis(300),
        )
        .await;
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "connected again");
    }
}
