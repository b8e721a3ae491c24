//! One connection to an AMQP 1.0 broker, owned by one task: it connects at the first
//! request (the address checked against the hub's sink networks, TLS for `amqps`, SASL
//! PLAIN with the subscription's credential, or ANONYMOUS without one), and the first time
//! it is asked to send to a target it begins a session of that target's own and attaches
//! its sending link, served by a task of its own ([`link`]): each message's outcome answers
//! its request as the broker settles it. A broker that refuses a message by ending the
//! session (RabbitMQ does, for a target the user may not write to) refuses what waited on
//! that target only; the connection and the other targets go on. The connection task ends
//! after [`IDLE`] without requests.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fe2o3_amqp::connection::{ConnectionHandle, OpenError};
use fe2o3_amqp::link::{
    DetachError, LinkStateError, SendError, SenderAttachError, SessionStopReason,
};
use fe2o3_amqp::sasl_profile::SaslProfile;
use fe2o3_amqp::session::{self, SessionHandle};
use fe2o3_amqp::types::definitions::{self, AmqpError, ErrorCondition, Fields, SenderSettleMode};
use fe2o3_amqp::types::messaging::{ApplicationProperties, Header, Message, Outcome, Properties};
use fe2o3_amqp::types::primitives::{Binary, SimpleValue, Symbol, Value};
use fe2o3_amqp::{Connection, Sender, Session};
use knooppunt_event::binding::amqp::{AmqpMessage, AmqpValue};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use super::{LinkSpec, Publication};
use crate::sink::address::SinkNetworks;
use crate::sink::broker::Endpoint;
use crate::sink::broker::{self, Io, Published};

type Request = broker::Request<Publication>;

/// A connection without requests for this long is closed.
const IDLE: Duration = Duration::from_secs(60);

/// How long connecting (TCP, TLS, SASL, open, begin) or attaching a link may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a message may wait for link credit before the connection is given up.
const CREDIT_TIMEOUT: Duration = Duration::from_secs(30);

/// The broker's heartbeat the hub asks for: a broker silent for this long is gone.
const IDLE_TIME_OUT_MS: u32 = 60_000;

/// The most messages left unsettled on one link, and queued for it.
const MAX_IN_FLIGHT: usize = 256;

/// How long closing a link, session or connection politely may take.
const CLOSING: Duration = Duration::from_secs(1);

/// A target's own session and its sending link.
struct Link {
    session: SessionHandle<()>,
    sender: Sender,
}

impl Link {
    async fn close(mut self) {
        let _ = tokio::time::timeout(CLOSING, self.sender.close()).await;
        let _ = tokio::time::timeout(CLOSING, self.session.close()).await;
    }
}

pub(super) async fn run(
    endpoint: Endpoint,
    networks: Arc<SinkNetworks>,
    tls: Arc<rustls::ClientConfig>,
    mut requests: mpsc::Receiver<Request>,
) {
    loop {
        let first = match tokio::time::timeout(IDLE, requests.recv()).await {
            Ok(Some(first)) => first,
            _ => return,
        };
        match within(connect(&endpoint, &networks, &tls)).await {
            Ok(connection) => {
                if let Err(why) = serve(connection, first, &mut requests).await {
                    tracing::debug!(broker = %endpoint.host, %why, "An AMQP connection ended.");
                }
            }
            Err(refused) => broker::refuse_queued(first, &mut requests, &refused),
        }
    }
}

/// `future` within [`CONNECT_TIMEOUT`].
async fn within<T>(future: impl Future<Output = Result<T, Published>>) -> Result<T, Published> {
    tokio::time::timeout(CONNECT_TIMEOUT, future)
        .await
        .unwrap_or_else(|_| {
            Err(Published::Failed(format!(
                "no answer from the broker within {} s",
                CONNECT_TIMEOUT.as_secs()
            )))
        })
}

/// Connects, logs in and attaches the link once, then leaves: whether the broker takes the
/// endpoint's credentials and the link's target.
pub(super) async fn try_link(
    endpoint: &Endpoint,
    link: &LinkSpec,
    networks: &SinkNetworks,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<(), Published> {
    let mut connection = connect(endpoint, networks, tls).await?;
    let result = match open_link(&mut connection, link).await {
        Ok(link) => {
            link.close().await;
            Ok(())
        }
        Err(refused) => Err(refused),
    };
    let _ = tokio::time::timeout(CLOSING, connection.close()).await;
    result
}

/// The text of an AMQP error: its condition and description.
fn said(error: &definitions::Error) -> String {
    let condition = match &error.condition {
        ErrorCondition::AmqpError(condition) => Symbol::from(condition).0,
        ErrorCondition::ConnectionError(condition) => Symbol::from(condition).0,
        ErrorCondition::SessionError(condition) => Symbol::from(condition).0,
        ErrorCondition::LinkError(condition) => Symbol::from(condition).0,
        ErrorCondition::Custom(condition) => condition.0.clone(),
    };
    match &error.description {
        Some(description) => format!("{condition}: {description}"),
        None => condition,
    }
}

/// Whether an error means the same request can never succeed: no such target, not
/// allowed, not authorized.
fn for_good(error: &definitions::Error) -> bool {
    matches!(
        error.condition,
        ErrorCondition::AmqpError(
            AmqpError::NotFound | AmqpError::UnauthorizedAccess | AmqpError::NotAllowed
        )
    )
}

/// The broker's own error behind a session that stopped, if it gave one.
fn stopped_with(reason: &SessionStopReason) -> Option<&definitions::Error> {
    match reason {
        SessionStopReason::RemoteEndedWithError(error)
        | SessionStopReason::EndedWithError(error) => Some(error),
        _ => None,
    }
}

/// The broker's own error behind a failed send, if it gave one (RabbitMQ ends the session
/// when the hub's user may not write to the target).
fn remote_error(error: &SendError) -> Option<&definitions::Error> {
    match error {
        SendError::LinkStateError(
            LinkStateError::RemoteDetachedWithError(error)
            | LinkStateError::RemoteClosedWithError(error),
        )
        | SendError::Detached(
            DetachError::RemoteDetachedWithError(error) | DetachError::RemoteClosedWithError(error),
        ) => Some(error),
        SendError::LinkStateError(LinkStateError::SessionStopped(reason))
        | SendError::Detached(DetachError::SessionStopped(reason)) => stopped_with(reason),
        _ => None,
    }
}

/// What a failed send means: refused for good when the broker said the target is not
/// there or not allowed, else to be tried again.
fn send_failed(error: &SendError) -> Published {
    match remote_error(error) {
        Some(remote) => Published::Refused {
            for_good: for_good(remote),
            reason: format!("the broker refused the message: {}", said(remote)),
        },
        None => Published::Failed(format!("sending to the broker failed: {error}")),
    }
}

/// Connects: TCP, TLS for `amqps`, SASL and open.
async fn connect(
    endpoint: &Endpoint,
    networks: &SinkNetworks,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<ConnectionHandle<()>, Published> {
    let tcp = broker::dial(&endpoint.host, endpoint.port, networks).await?;
    let io: Box<dyn Io> = if endpoint.tls {
        broker::secure(tcp, &endpoint.host, tls).await?
    } else {
        Box::new(tcp)
    };
    let profile = match &endpoint.login {
        Some((username, password)) => SaslProfile::Plain {
            username: username.clone(),
            password: password.clone(),
        },
        None => SaslProfile::Anonymous,
    };
    let opened = Connection::builder()
        .container_id(format!("knooppunt-{:016x}", fastrand::u64(..)))
        .hostname(endpoint.host.as_str())
        .scheme("amqp")
        .sasl_profile(profile)
        .idle_time_out(IDLE_TIME_OUT_MS)
        .open_with_stream(io)
        .await;
    opened.map_err(|error| match error {
        OpenError::SaslError { code, .. } => Published::Refused {
            reason: format!(
                "the broker refused the login ({code:?}): check the subscription's \
                 sinkcredential"
            ),
            for_good: true,
        },
        OpenError::RemoteClosedWithError(error) => Published::Refused {
            for_good: for_good(&error),
            reason: format!("the broker refused the connection: {}", said(&error)),
        },
        other => broker::failed("opening a connection to", &other),
    })
}

/// Begins a session for `link` and attaches its sending link there.
async fn open_link(
    connection: &mut ConnectionHandle<()>,
    link: &LinkSpec,
) -> Result<Link, Published> {
    let begun = tokio::time::timeout(CONNECT_TIMEOUT, Session::begin(connection)).await;
    let mut session = match begun {
        Ok(Ok(session)) => session,
        Ok(Err(error)) => return Err(broker::failed("beginning a session with", &error)),
        Err(_) => {
            return Err(Published::Failed(format!(
                "the broker did not begin a session within {} s",
                CONNECT_TIMEOUT.as_secs()
            )));
        }
    };
    match attach(&mut session, link).await {
        Ok(sender) => Ok(Link { session, sender }),
        Err(refused) => {
            let _ = tokio::time::timeout(CLOSING, session.close()).await;
            Err(refused)
        }
    }
}

/// Attaches a sending link as `link` says.
async fn attach(session: &mut SessionHandle<()>, link: &LinkSpec) -> Result<Sender, Published> {
    let mut properties = Fields::default();
    for (name, value) in &link.properties {
        properties.insert(Symbol::from(name.as_str()), Value::String(value.clone()));
    }
    let name = link
        .name
        .clone()
        .unwrap_or_else(|| format!("knooppunt-{:016x}", fastrand::u64(..)));
    let mut builder = Sender::builder()
        .name(name)
        .target(link.address.as_str())
        .sender_settle_mode(if link.settled {
            SenderSettleMode::Settled
        } else {
            SenderSettleMode::Unsettled
        });
    if !link.properties.is_empty() {
        builder = builder.properties(properties);
    }
    let Ok(attached) = tokio::time::timeout(CONNECT_TIMEOUT, builder.attach(session)).await else {
        return Err(Published::Failed(format!(
            "the broker did not attach a link to `{}` within {} s",
            link.address,
            CONNECT_TIMEOUT.as_secs()
        )));
    };
    let error = match attached {
        Ok(sender) => return Ok(sender),
        Err(error) => error,
    };
    let remote = match &error {
        SenderAttachError::RemoteClosedWithError(remote) => Some(remote),
        // RabbitMQ ends the session when the target is missing or not allowed.
        SenderAttachError::SessionStopped(reason) => stopped_with(reason),
        _ => None,
    };
    Err(match remote {
        Some(remote) => Published::Refused {
            for_good: for_good(remote),
            reason: format!(
                "the broker refused a link to `{}`: {}",
                link.address,
                said(remote)
            ),
        },
        None => Published::Failed(format!(
            "attaching a link to `{}` failed: {error}",
            link.address
        )),
    })
}

/// The AMQP message of an event's message.
fn amqp_message(message: AmqpMessage) -> Message<fe2o3_amqp::types::messaging::Data> {
    let mut properties = ApplicationProperties::builder();
    for (name, value) in message.application_properties {
        let value = match value {
            AmqpValue::Boolean(value) => SimpleValue::Bool(value),
            AmqpValue::Long(value) => SimpleValue::Long(value),
            AmqpValue::String(value) => SimpleValue::String(value),
        };
        properties = properties.insert(name, value);
    }
    // Durable: a broker keeps it across its own restart (the hub counts it delivered).
    let mut builder = Message::builder()
        .header(Header {
            durable: true,
            ..Header::default()
        })
        .application_properties(properties.build());
    if let Some(content_type) = message.content_type {
        builder = builder.properties(Properties::builder().content_type(content_type).build());
    }
    builder.data(Binary::from(message.body)).build()
}

/// What the broker's outcome means.
fn outcome(settled: Result<Outcome, SendError>) -> Published {
    match settled {
        Ok(Outcome::Accepted(_)) => Published::Accepted,
        Ok(Outcome::Rejected(rejected)) => Published::Refused {
            reason: format!(
                "the broker rejected the message: {}",
                rejected
                    .error
                    .as_ref()
                    .map_or_else(|| "no reason given".to_owned(), said)
            ),
            for_good: true,
        },
        Ok(Outcome::Released(_)) => Published::Failed("the broker released the message".into()),
        Ok(Outcome::Modified(modified)) => Published::Failed(format!(
            "the broker did not take the message (modified{})",
            if modified.undeliverable_here == Some(true) {
                ", undeliverable here"
            } else {
                ""
            }
        )),
        #[allow(unreachable_patterns)]
        Ok(other) => Published::Failed(format!("the broker answered {other:?}")),
        Err(error) => send_failed(&error),
    }
}

/// Hands requests to their targets' link tasks until the connection ends (idle, or
/// closed by the broker).
async fn serve(
    mut connection: ConnectionHandle<()>,
    first: Request,
    requests: &mut mpsc::Receiver<Request>,
) -> Result<(), String> {
    let mut links: HashMap<LinkSpec, mpsc::Sender<Request>> = HashMap::new();
    let mut pending = Some(first);
    let result = loop {
        if let Some(request) = pending.take() {
            let spec = request.message.link.clone();
            // A link whose task ended (its session did) is made again.
            if links.get(&spec).is_none_or(mpsc::Sender::is_closed) {
                match open_link(&mut connection, &spec).await {
                    Ok(link) => {
                        let (sender, queue) = mpsc::channel(MAX_IN_FLIGHT);
                        tokio::spawn(serve_link(link, queue));
                        links.insert(spec.clone(), sender);
                    }
                    Err(refused) => {
                        let _ = request.reply.send(refused);
                        if connection.is_closed() {
                            break Err("the broker closed the connection".to_owned());
                        }
                        continue;
                    }
                }
            }
            if let Err(full) = links[&spec].try_send(request) {
                let request = match full {
                    mpsc::error::TrySendError::Full(request)
                    | mpsc::error::TrySendError::Closed(request) => request,
                };
                let _ = request.reply.send(Published::Failed(
                    "too many messages wait for this target's link".into(),
                ));
            }
        }
        tokio::select! {
            request = tokio::time::timeout(IDLE, requests.recv()) => match request {
                Ok(Some(request)) => pending = Some(request),
                Ok(None) | Err(_) => break Ok(()),
            },
            closed = connection.on_close() => {
                break Err(match closed {
                    Ok(()) => "the broker closed the connection".to_owned(),
                    Err(error) => format!("the connection to the broker ended: {error}"),
                });
            }
        }
    };
    // The link tasks finish what they sent, then close their sessions.
    drop(links);
    if !connection.is_closed() {
        tokio::time::sleep(CLOSING).await;
        let _ = tokio::time::timeout(CLOSING, connection.close()).await;
    }
    result
}

/// Sends one target's messages over its link and answers each as the broker settles it,
/// until the connection task lets go of it (then what is unsettled is still waited for) or
/// its session ends (then what is unsettled gets the broker's reason).
async fn serve_link(mut link: Link, mut requests: mpsc::Receiver<Request>) {
    let mut waiting: HashMap<u64, oneshot::Sender<Published>> = HashMap::new();
    let mut settling: JoinSet<(u64, Published)> = JoinSet::new();
    let mut next: u64 = 0;
    let mut open = true;
    let ended: Option<Published> = loop {
        if !open && waiting.is_empty() {
            break None;
        }
        tokio::select! {
            request = requests.recv(), if open && waiting.len() < MAX_IN_FLIGHT => {
                let Some(request) = request else {
                    open = false;
                    continue;
                };
                let message = amqp_message(request.message.message);
                let sent = tokio::time::timeout(
                    CREDIT_TIMEOUT,
                    link.sender.send_batchable(message),
                )
                .await;
                match sent {
                    Ok(Ok(settlement)) => {
                        next += 1;
                        let id = next;
                        waiting.insert(id, request.reply);
                        settling.spawn(async move { (id, outcome(settlement.await)) });
                    }
                    Ok(Err(error)) => {
                        let published = send_failed(&error);
                        let _ = request.reply.send(published.clone());
                        break Some(published);
                    }
                    Err(_) => {
                        let _ = request.reply.send(Published::Failed(format!(
                            "the broker gave no credit to send within {} s",
                            CREDIT_TIMEOUT.as_secs()
                        )));
                        break Some(Published::Failed("no link credit".into()));
                    }
                }
            }
            Some(Ok((id, published))) = settling.join_next() => {
                if let Some(reply) = waiting.remove(&id) {
                    let _ = reply.send(published);
                }
            }
            ended = link.session.on_end() => {
                break Some(match ended {
                    Err(session::Error::RemoteEndedWithError(error)) => Published::Refused {
                        for_good: for_good(&error),
                        reason: format!("the broker refused the message: {}", said(&error)),
                    },
                    Err(error) => Published::Failed(format!("the broker ended the session: {error}")),
                    Ok(()) => Published::Failed("the broker ended the session".into()),
                });
            }
        }
    };
    match ended {
        // Everything unsettled went to this target: the session's end is their answer.
        Some(published) => {
            settling.abort_all();
            for (_, reply) in waiting.drain() {
                let _ = reply.send(published.clone());
            }
        }
        None => link.close().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fe2o3_amqp::types::messaging::{Accepted, Rejected, Released};

    #[test]
    fn outcomes_are_sorted_into_delivered_refused_for_good_and_for_now() {
        assert_eq!(
            outcome(Ok(Outcome::Accepted(Accepted {}))),
            Published::Accepted
        );
        let rejected = Rejected {
            error: Some(definitions::Error::new(
                AmqpError::ResourceLimitExceeded,
                Some("queue full".to_owned()),
                None,
            )),
        };
        assert!(matches!(
            outcome(Ok(Outcome::Rejected(rejected))),
            Published::Refused { for_good: true, reason } if reason.contains("amqp:resource-limit-exceeded: queue full")
        ));
        assert!(matches!(
            outcome(Ok(Outcome::Released(Released {}))),
            Published::Failed(_)
        ));
        let not_found = definitions::Error::new(AmqpError::NotFound, None, None);
        assert!(for_good(&not_found));
        let internal = definitions::Error::new(AmqpError::InternalError, None, None);
        assert!(!for_good(&internal));
    }

    #[test]
    fn binary_messages_carry_typed_application_properties() {
        let message = amqp_message(AmqpMessage {
            content_type: Some("text/plain".into()),
            application_properties: vec![
                ("cloudEvents_id".into(), AmqpValue::String("1".into())),
                ("cloudEvents_count".into(), AmqpValue::Long(3)),
                ("cloudEvents_urgent".into(), AmqpValue::Boolean(true)),
            ],
            body: b"hallo".to_vec(),
        });
        let properties = message.application_properties.unwrap();
        assert_eq!(
            properties.0.get("cloudEvents_count"),
            Some(&SimpleValue::Long(3))
        );
        assert_eq!(
            properties.0.get("cloudEvents_urgent"),
            Some(&SimpleValue::Bool(true))
        );
        assert_eq!(
            message.properties.unwrap().content_type,
            Some(Symbol::from("text/plain"))
        );
        assert_eq!(message.body.0.as_ref(), b"hallo");
    }
}
