//! Deliveries to NATS servers (`nats://`, `tls://`): one connection per server endpoint and
//! credentials, kept and reused by every subscription that names them ([`session`]).
//!
//! Core NATS is at most once: a message is delivered once the server has read it without
//! refusing it (a PING after it is answered, and no permissions violation came first);
//! whoever listens then gets it, and nobody else ever will. With `jetstream`, a message is
//! delivered once a stream stored it: the server's publish acknowledgement, matched by the
//! reply subject each message carries. No stream for the subject, or a permissions
//! violation, is refused for good; anything else is tried again.

mod protocol;
mod session;

use std::time::Duration;

use knooppunt_event::binding::nats::NatsMessage;
use knooppunt_store::{DeliveryMode, ProtocolSettings, StoredEvent, Subscription};

use super::broker::{self, Endpoint, Sessions};
use super::{Handshake, Hop, Sent, Sink, To};

/// The longest subject the hub publishes to.
pub const MAX_SUBJECT: usize = 1024;

/// A subject a message can be published to: dot-separated tokens of printable ASCII, none
/// empty and none a wildcard (`*`, `>`).
pub fn check_subject(subject: &str) -> Result<(), String> {
    if subject.is_empty() {
        return Err("must not be empty".into());
    }
    if subject.len() > MAX_SUBJECT {
        return Err(format!("is longer than {MAX_SUBJECT} bytes"));
    }
    if !subject.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("must be printable ASCII without spaces".into());
    }
    for token in subject.split('.') {
        if token.is_empty() {
            return Err("has an empty token (a leading, trailing or double `.`)".into());
        }
        if token == "*" || token == ">" {
            return Err(
                "has a wildcard (`*` or `>`): messages are published to one subject; \
                 wildcards are for subscribers"
                    .into(),
            );
        }
    }
    Ok(())
}

/// One message for the server.
#[derive(Debug)]
pub(crate) struct Publication {
    pub(crate) subject: String,
    pub(crate) message: NatsMessage,
    /// Whether a JetStream stream must acknowledge it.
    pub(crate) jetstream: bool,
}

/// The endpoint of a sink URL (`nats://host[:4222]`, `tls://host[:4222]`).
fn endpoint(sink: &str, login: Option<(String, String)>) -> Result<Endpoint, String> {
    Endpoint::of(sink, ("nats", "tls"), (4222, 4222), login)
}

/// The hub's connections to NATS servers.
pub(crate) type Servers = Sessions<Publication>;

impl Sink for Sessions<Publication> {
    type Message = Publication;

    /// Binary or structured mode (the NATS binding defines no other); a replay adds a
    /// header naming it.
    fn message(
        &self,
        subscription: &Subscription,
        mode: DeliveryMode,
        event: &StoredEvent,
        hop: &Hop<'_>,
    ) -> Result<Publication, String> {
        use knooppunt_event::binding::nats as binding;
        let ProtocolSettings::Nats(settings) = &subscription.protocol_settings else {
            return Err("the subscription is not one to a NATS server".into());
        };
        let mut message = broker::encoded(
            subscription,
            mode,
            event,
            "NATS",
            binding::encode_binary,
            binding::encode_structured,
        )?;
        if let Some(replay) = hop.replay {
            message
                .headers
                .push((crate::REPLAY_HEADER.as_str().to_owned(), replay.to_owned()));
        }
        Ok(Publication {
            subject: settings.subject.clone(),
            message,
            jetstream: settings.jetstream,
        })
    }

    async fn deliver(&self, to: To<'_>, publication: Publication) -> Sent {
        let endpoint = endpoint(&to.subscription.sink, broker::login(to.subscription));
        self.deliver_to(
            to,
            endpoint,
            |endpoint| endpoint.key("nats"),
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
    fn subjects_are_checked() {
        assert!(check_subject("nl.brp.verhuizingen").is_ok());
        assert!(check_subject("").is_err());
        assert!(check_subject("a.*.b").unwrap_err().contains("wildcard"));
        assert!(check_subject("a.>").is_err());
        assert!(check_subject("a..b").unwrap_err().contains("empty token"));
        assert!(check_subject("a b").is_err());
        assert!(check_subject(".a").is_err());
        assert!(check_subject(&"a".repeat(MAX_SUBJECT + 1)).is_err());
    }

    #[test]
    fn endpoints_have_the_default_port_and_keys_per_credentials() {
        let plain = endpoint("nats://n.example", None).unwrap();
        assert_eq!((plain.port, plain.tls), (4222, false));
        let tls = endpoint("tls://n.example:4443", None).unwrap();
        assert_eq!((tls.port, tls.tls), (4443, true));
        let a = endpoint("nats://n:1", Some(("u".into(), "p".into()))).unwrap();
        let b = endpoint("nats://n:1", Some(("u".into(), "q".into()))).unwrap();
        assert_ne!(a.key("x"), b.key("x"));
        assert!(endpoint("mqtt://n", None).is_err());
    }
}
