//! Deliveries to AMQP 1.0 brokers (`amqp://`, `amqps://`): RabbitMQ with its AMQP 1.0
//! plugin, Azure Service Bus, ActiveMQ. One connection and session per broker endpoint and
//! credentials, kept and reused by every subscription that names them, with one sending
//! link per target address and link settings ([`session`]); the AMQP frames are
//! fe2o3-amqp's, over the hub's own TCP and TLS (the address check, the trust store).
//!
//! Unsettled (the default) is at least once: a message is delivered once the broker settled
//! it with `accepted`. `rejected` is refused for good, with the broker's error; `released`
//! and `modified` are tried again. Settled (`sendersettlementmode` `settled`) is at most
//! once. A link the broker refuses to attach (`amqp:not-found`, `amqp:unauthorized-access`)
//! is refused for good, and so is a login it refuses.

mod session;

use std::collections::BTreeMap;
use std::time::Duration;

use knooppunt_event::binding::amqp::AmqpMessage;
use knooppunt_store::{AmqpSettings, DeliveryMode, ProtocolSettings, StoredEvent, Subscription};

use super::broker::{self, Endpoint, Sessions};
use super::{Handshake, Hop, Sent, Sink, To};

/// The longest target address the hub attaches to.
pub const MAX_ADDRESS: usize = 1024;

/// A target address: not empty, printable, not too long.
pub fn check_address(address: &str) -> Result<(), String> {
    if address.is_empty() {
        return Err("must not be empty".into());
    }
    if address.len() > MAX_ADDRESS {
        return Err(format!("is longer than {MAX_ADDRESS} bytes"));
    }
    if address.chars().any(char::is_control) {
        return Err("contains control characters".into());
    }
    Ok(())
}

/// The target address of a subscription: its `address` setting, or else its sink URL's
/// path (the Subscriptions API: "if not expressed in the sink URI's path portion").
pub fn target_address(sink: &str, settings: &AmqpSettings) -> Option<String> {
    if let Some(address) = &settings.address {
        return Some(address.clone());
    }
    let url = url::Url::parse(sink).ok()?;
    let path = url.path();
    (!path.is_empty() && path != "/").then(|| percent_decode(path))
}

/// A URL path, percent-decoded (an address like `/exchange/amq.topic/a b`).
fn percent_decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = path.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The sending link a message goes over: its target and how it is attached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LinkSpec {
    pub(crate) address: String,
    /// The link's name; a random one when the subscription gives none.
    pub(crate) name: Option<String>,
    pub(crate) settled: bool,
    pub(crate) properties: BTreeMap<String, String>,
}

/// One message for the broker.
#[derive(Debug)]
pub(crate) struct Publication {
    pub(crate) link: LinkSpec,
    pub(crate) message: AmqpMessage,
}

/// The endpoint of a sink URL (`amqp://host[:5672]`, `amqps://host[:5671]`).
fn endpoint(sink: &str, login: Option<(String, String)>) -> Result<Endpoint, String> {
    Endpoint::of(sink, ("amqp", "amqps"), (5672, 5671), login)
}

/// The link of an AMQP subscription, or why it has none.
fn link_of(subscription: &Subscription) -> Result<LinkSpec, String> {
    let ProtocolSettings::Amqp(settings) = &subscription.protocol_settings else {
        return Err("the subscription is not one to an AMQP broker".into());
    };
    let address = target_address(&subscription.sink, settings).ok_or_else(|| {
        "the subscription names no target address (`protocolsettings.address` or the sink \
         URL's path)"
            .to_owned()
    })?;
    Ok(LinkSpec {
        address,
        name: settings.link_name.clone(),
        settled: settings.settled,
        properties: settings.link_properties.clone(),
    })
}

/// The hub's connections to AMQP 1.0 brokers.
pub(crate) type Brokers = Sessions<Publication>;

impl Sink for Sessions<Publication> {
    type Message = Publication;

    /// Binary or structured mode (the AMQP binding defines no other); a replay adds an
    /// application property naming it.
    fn message(
        &self,
        subscription: &Subscription,
        mode: DeliveryMode,
        event: &StoredEvent,
        hop: &Hop<'_>,
    ) -> Result<Publication, String> {
        use knooppunt_event::binding::amqp as binding;
        let link = link_of(subscription)?;
        let mut message = broker::encoded(
            subscription,
            mode,
            event,
            "AMQP",
            binding::encode_binary,
            binding::encode_structured,
        )?;
        if let Some(replay) = hop.replay {
            message.application_properties.push((
                crate::REPLAY_HEADER.as_str().to_owned(),
                binding::AmqpValue::String(replay.to_owned()),
            ));
        }
        Ok(Publication { link, message })
    }

    async fn deliver(&self, to: To<'_>, publication: Publication) -> Sent {
        let endpoint = endpoint(&to.subscription.sink, broker::login(to.subscription));
        self.deliver_to(
            to,
            endpoint,
            |endpoint| endpoint.key("amqp"),
            session::run,
            publication,
        )
        .await
    }

    async fn consent(
        &self,
        subscription: &Subscription,
        _callback: &str,
        within: Duration,
    ) -> Handshake {
        let endpoint = match endpoint(&subscription.sink, broker::login(subscription)) {
            Ok(endpoint) => endpoint,
            Err(why) => return Handshake::Failed(why),
        };
        let link = match link_of(subscription) {
            Ok(link) => link,
            Err(why) => return Handshake::Failed(why),
        };
        broker::consent(
            within,
            session::try_link(&endpoint, &link, self.networks(), self.tls()),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_is_the_setting_or_the_sinks_path() {
        let settings = |address: Option<&str>| AmqpSettings {
            address: address.map(str::to_owned),
            link_name: None,
            settled: false,
            link_properties: BTreeMap::new(),
        };
        assert_eq!(
            target_address("amqps://b.example/queue/a%20b", &settings(None)).as_deref(),
            Some("/queue/a b")
        );
        assert_eq!(
            target_address(
                "amqps://b.example/queue/x",
                &settings(Some("/exchange/e/k"))
            )
            .as_deref(),
            Some("/exchange/e/k")
        );
        assert_eq!(target_address("amqps://b.example", &settings(None)), None);
        assert_eq!(target_address("amqps://b.example/", &settings(None)), None);
        assert!(check_address("").is_err());
        assert!(check_address("a\nb").is_err());
    }

    #[test]
    fn endpoints_have_the_default_ports() {
        let plain = endpoint("amqp://b.example", None).unwrap();
        assert_eq!((plain.port, plain.tls), (5672, false));
        let tls = endpoint("amqps://b.example/queue/x", None).unwrap();
        assert_eq!((tls.port, tls.tls), (5671, true));
        let a = endpoint("amqp://b:1", Some(("u".into(), "p".into()))).unwrap();
        let b = endpoint("amqp://b:1", Some(("u".into(), "q".into()))).unwrap();
        assert_ne!(a.key("x"), b.key("x"));
    }
}
