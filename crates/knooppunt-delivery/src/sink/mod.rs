//! A subscription's sink: the [`Sink`] trait the delivery path calls (an event as the
//! protocol's message, its delivery, and the subscription's consent), with one
//! implementation per protocol, each in its own folder: HTTP in [`http`], MQTT in
//! [`mqtt`], NATS in [`nats`], AMQP 1.0 in [`amqp`]. [`Sinks`] chooses by the
//! subscription's protocol; nothing outside knows one protocol from another.

pub(crate) mod address;
pub mod amqp;
pub(crate) mod broker;
pub(crate) mod connections;
pub mod http;
pub mod mqtt;
pub mod nats;

use std::sync::Arc;
use std::time::{Duration, Instant};

use knooppunt_event::trace_context::TraceContext;
use knooppunt_store::{DeliveryMode, Protocol, StoredEvent, Subscription};

use crate::outcome::Response;
use crate::sink::connections::{Connections, Permit};

/// What the API and the logs show for a secret: a sink URL's query values and password, and
/// the values of a subscription's own headers. Secrets are write-only.
pub const REDACTED: &str = "********";

/// A sink URL for reading and logging: query values and any password replaced by
/// [`REDACTED`] (a token in the query is a common way to authenticate webhooks).
pub fn redact_sink(sink: &str) -> String {
    let Ok(mut url) = reqwest::Url::parse(sink) else {
        return sink.to_owned();
    };
    if url.password().is_some() {
        let _ = url.set_password(Some(REDACTED));
    }
    if url.query().is_some() {
        let pairs: Vec<(String, bool)> = url
            .query_pairs()
            .map(|(name, value)| (name.into_owned(), !value.is_empty()))
            .collect();
        let mut query = url.query_pairs_mut();
        query.clear();
        for (name, has_value) in pairs {
            query.append_pair(&name, if has_value { REDACTED } else { "" });
        }
    }
    url.into()
}

/// An event as the store keeps it (its JSON), read again; what is wrong when it cannot be
/// (an event an older version accepted and this one would refuse).
fn read_stored(json_text: &str) -> Result<knooppunt_event::ReceivedEvent, String> {
    knooppunt_event::format::json::decode_event(json_text.as_bytes())
        .map_err(|violations| format!("the stored event cannot be read again: {violations}"))
}

/// A sink protocol: how an event becomes its message, how the message is delivered, and
/// how a subscription's sink consents to its deliveries.
pub(crate) trait Sink {
    /// The message of one event for one subscription.
    type Message: Send + 'static;

    /// The event's message in `mode` for the subscription on this hop, or why the event
    /// cannot be sent over this protocol (it becomes a dead letter saying so).
    fn message(
        &self,
        subscription: &Subscription,
        mode: DeliveryMode,
        event: &StoredEvent,
        hop: &Hop<'_>,
    ) -> Result<Self::Message, String>;

    /// Delivers the message: whatever it needs first, then [`To::begins`] at the moment it
    /// goes out, then the sink's answer.
    fn deliver(&self, to: To<'_>, message: Self::Message) -> impl Future<Output = Sent> + Send;

    /// Whether the subscription's sink consents, asked within `within` (`callback` is where
    /// it may call the hub back, for a protocol that has such a thing).
    fn consent(
        &self,
        subscription: &Subscription,
        callback: &str,
        within: Duration,
    ) -> impl Future<Output = Handshake> + Send;
}

/// What a delivery carries besides the event: a replay's name, and the trace context of its
/// hop (the event's trace with the attempt's own span).
#[derive(Default)]
pub(crate) struct Hop<'a> {
    pub(crate) replay: Option<&'a str>,
    pub(crate) trace: Option<&'a (TraceContext, u64)>,
}

/// Where one attempt goes and by when: the subscription, its sink's permit, the attempt's
/// deadline, and the subscription's cuts with the generation it was leased under.
pub(crate) struct To<'a> {
    pub(crate) subscription: &'a Subscription,
    pub(crate) permit: &'a Permit,
    pub(crate) deadline: Instant,
    pub(crate) cut: Option<&'a (Arc<crate::gate::Cut>, u64)>,
}

impl To<'_> {
    /// The time left until the deadline.
    pub(crate) fn within(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Whether the attempt may start now: under a pass of the subscription's cuts, only if
    /// no cut came since its lease (what was taken away is never started after the cut).
    pub(crate) fn begins(&self) -> bool {
        self.cut
            .is_none_or(|(cut, generation)| cut.begins(*generation))
    }
}

/// How a delivery ended.
pub(crate) enum Sent {
    /// A cut came first: it did not start.
    Cut,
    /// Nothing went out, for this reason (the sink was not asked).
    Unsent(String),
    /// It went out, and this is how the sink answered.
    Answered(Response),
}

/// Every protocol's sink, chosen by the subscription's protocol.
pub(crate) struct Sinks {
    http: http::Http,
    mqtt: mqtt::Brokers,
    nats: nats::Servers,
    amqp: amqp::Brokers,
}

/// An event's message for a subscription's sink.
pub(crate) enum Message {
    Http(<http::Http as Sink>::Message),
    Mqtt(<mqtt::Brokers as Sink>::Message),
    Nats(<nats::Servers as Sink>::Message),
    Amqp(<amqp::Brokers as Sink>::Message),
}

impl Sinks {
    /// Sinks reached through the hub's connections (their address check and trust store),
    /// in the name of `origin`, signing with `hub_keys`, asking consent for `request_rate`.
    pub(crate) fn new(
        connections: &Arc<Connections>,
        origin: (String, ::http::HeaderValue),
        hub_keys: http::signing::HubKeys,
        request_rate: u32,
    ) -> Sinks {
        let networks = connections.networks();
        let mut tls = connections.tls().clone();
        // Brokers do not speak HTTP: offer no application protocol.
        tls.alpn_protocols.clear();
        let tls = Arc::new(tls);
        Sinks {
            http: http::Http::new(Arc::clone(connections), origin, hub_keys, request_rate),
            mqtt: mqtt::Brokers::new(Arc::clone(networks), Arc::clone(&tls)),
            nats: nats::Servers::new(Arc::clone(networks), Arc::clone(&tls)),
            amqp: amqp::Brokers::new(Arc::clone(networks), tls),
        }
    }

    /// The HTTP sinks, for what only HTTP does (a ZGW abonnement's test notificatie).
    pub(crate) fn http(&self) -> &http::Http {
        &self.http
    }

    /// The event's message for the subscription's sink, or why it cannot be sent.
    pub(crate) fn message(
        &self,
        subscription: &Subscription,
        mode: DeliveryMode,
        event: &StoredEvent,
        hop: &Hop<'_>,
    ) -> Result<Message, String> {
        match subscription.protocol() {
            Protocol::Http => self
                .http
                .message(subscription, mode, event, hop)
                .map(Message::Http),
            Protocol::Mqtt5 | Protocol::Mqtt3 => self
                .mqtt
                .message(subscription, mode, event, hop)
                .map(Message::Mqtt),
            Protocol::Nats => self
                .nats
                .message(subscription, mode, event, hop)
                .map(Message::Nats),
            Protocol::Amqp => self
                .amqp
                .message(subscription, mode, event, hop)
                .map(Message::Amqp),
        }
    }

    /// Delivers the message to the subscription's sink.
    pub(crate) async fn deliver(&self, to: To<'_>, message: Message) -> Sent {
        match message {
            Message::Http(m) => self.http.deliver(to, m).await,
            Message::Mqtt(m) => self.mqtt.deliver(to, m).await,
            Message::Nats(m) => self.nats.deliver(to, m).await,
            Message::Amqp(m) => self.amqp.deliver(to, m).await,
        }
    }

    /// Whether the subscription's sink consents to its deliveries.
    pub(crate) async fn consent(
        &self,
        subscription: &Subscription,
        callback: &str,
        within: Duration,
    ) -> Handshake {
        match subscription.protocol() {
            Protocol::Http => self.http.consent(subscription, callback, within).await,
            Protocol::Mqtt5 | Protocol::Mqtt3 => {
                self.mqtt.consent(subscription, callback, within).await
            }
            Protocol::Nats => self.nats.consent(subscription, callback, within).await,
            Protocol::Amqp => self.amqp.consent(subscription, callback, within).await,
        }
    }
}

/// Whether a sink consents: for HTTP, its answer to the validation handshake; for a
/// broker, whether it took a connection with the subscription's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handshake {
    /// `WebHook-Allowed-Origin` is our origin or `*`; with the rate it allowed, if any
    /// (requests per minute; `*` means no limit).
    Granted { allowed_rate: Option<u32> },
    /// The sink answered, but did not grant.
    Refused(String),
    /// No usable answer.
    Failed(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_and_passwords_are_redacted() {
        assert_eq!(
            redact_sink("https://sink.example/hook?token=s3cret&tenant=kvk&flag"),
            "https://sink.example/hook?token=********&tenant=********&flag="
        );
        assert_eq!(
            redact_sink("https://user:pw@sink.example/hook"),
            "https://user:********@sink.example/hook"
        );
        assert_eq!(
            redact_sink("https://sink.example/hook"),
            "https://sink.example/hook"
        );
    }
}
