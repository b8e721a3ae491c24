//! One connection to a broker, owned by one task: it connects at the first request (the
//! address checked against the hub's sink networks, TLS for `mqtts`), publishes each
//! request with a packet identifier of its own, answers each when the broker acknowledged
//! it, pings every half keep-alive (a ping unanswered by the next means a dead connection),
//! and ends after [`IDLE`] without requests. A connection that breaks
//! off fails what waits for an acknowledgement (those deliveries are tried again) and is
//! made again at the next request.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use rumqttc::v5::mqttbytes::v5::{
    ConnectReturnCode, Login, Packet, PingReq, PubAckReason, PubCompReason, PubRecReason, PubRel,
    Publish, PublishProperties,
};
use rumqttc::v5::mqttbytes::{QoS, v5::Connect};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::{Endpoint, Published, Request};
use crate::sink::address::{AddressRefused, SinkNetworks};

/// A connection without requests for this long is closed.
const IDLE: Duration = Duration::from_secs(60);

/// The keep-alive the hub asks for; it pings at half of it while idle.
const KEEP_ALIVE: u16 = 60;

/// How long connecting (TCP, TLS, CONNECT and CONNACK) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most messages the hub leaves unacknowledged on one connection, whatever the broker
/// allows.
const MAX_IN_FLIGHT: usize = 256;

/// The largest packet the hub reads from a broker (acknowledgements are small).
const MAX_INCOMING: u32 = 64 * 1024;

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

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
        let connected = tokio::time::timeout(CONNECT_TIMEOUT, connect(&endpoint, &networks, &tls))
            .await
            .unwrap_or_else(|_| {
                Err(Published::Failed(format!(
                    "no connection to the broker within {} s",
                    CONNECT_TIMEOUT.as_secs()
                )))
            });
        match connected {
            Ok((io, receive_maximum)) => {
                let limit = usize::from(receive_maximum).clamp(1, MAX_IN_FLIGHT);
                if let Err(why) = serve(io, limit, first, &mut requests).await {
                    tracing::debug!(broker = %endpoint.host, %why, "An MQTT connection ended.");
                }
            }
            Err(refused) => {
                // Everything queued now would meet the same refusal.
                let _ = first.reply.send(refused.clone());
                while let Ok(request) = requests.try_recv() {
                    let _ = request.reply.send(refused.clone());
                }
            }
        }
    }
}

/// Connects and logs in once, then leaves: whether the broker takes the endpoint's
/// credentials.
pub(super) async fn try_connect(
    endpoint: &Endpoint,
    networks: &SinkNetworks,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<(), Published> {
    let (mut io, _) = connect(endpoint, networks, tls).await?;
    let mut out = BytesMut::new();
    let disconnect = rumqttc::v5::mqttbytes::v5::Disconnect {
        reason_code: rumqttc::v5::mqttbytes::v5::DisconnectReasonCode::NormalDisconnection,
        properties: None,
    };
    if Packet::Disconnect(disconnect).write(&mut out, None).is_ok() {
        let _ = io.write_all(&out).await;
    }
    let _ = io.shutdown().await;
    Ok(())
}

/// Connects, logs in and reads the broker's CONNACK: the connection and the broker's
/// receive maximum, or how the broker or the network refused.
async fn connect(
    endpoint: &Endpoint,
    networks: &SinkNetworks,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<(Box<dyn Io>, u16), Published> {
    let failed = |what: &str, error: &dyn std::fmt::Display| {
        Published::Failed(format!("{what} the broker failed: {error}"))
    };
    let addresses: Vec<SocketAddr> =
        tokio::net::lookup_host((endpoint.host.as_str(), endpoint.port))
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
    let mut io: Box<dyn Io> = if endpoint.tls {
        let name = rustls_pki_types::ServerName::try_from(endpoint.host.clone())
            .map_err(|error| failed("naming", &error))?;
        let stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
            .connect(name, tcp)
            .await
            .map_err(|error| failed("the TLS handshake with", &error))?;
        Box::new(stream)
    } else {
        Box::new(tcp)
    };
    let connect = Connect {
        keep_alive: KEEP_ALIVE,
        client_id: format!("knooppunt-{:016x}", fastrand::u64(..)),
        clean_start: true,
        properties: None,
    };
    let login = endpoint.login.as_ref().map(|(username, password)| Login {
        username: username.clone(),
        password: password.clone(),
    });
    let mut out = BytesMut::new();
    Packet::Connect(connect, None, login)
        .write(&mut out, None)
        .map_err(|error| failed("writing to", &error))?;
    io.write_all(&out)
        .await
        .map_err(|error| failed("writing to", &error))?;
    let mut incoming = BytesMut::with_capacity(1024);
    let packet = read_packet(&mut io, &mut incoming)
        .await
        .map_err(Published::Failed)?;
    let Packet::ConnAck(connack) = packet else {
        return Err(Published::Failed(
            "the broker did not answer the connection with a CONNACK".into(),
        ));
    };
    if connack.code != ConnectReturnCode::Success {
        let for_good = matches!(
            connack.code,
            ConnectReturnCode::BadUserNamePassword
                | ConnectReturnCode::NotAuthorized
                | ConnectReturnCode::Banned
                | ConnectReturnCode::BadAuthenticationMethod
                | ConnectReturnCode::ClientIdentifierNotValid
                | ConnectReturnCode::UnsupportedProtocolVersion
                | ConnectReturnCode::RefusedProtocolVersion
        );
        return Err(Published::Refused {
            reason: format!(
                "the broker refused the connection: {:?}{}",
                connack.code,
                if for_good {
                    " (check the subscription's sinkcredential)"
                } else {
                    ""
                }
            ),
            for_good,
        });
    }
    let receive_maximum = connack
        .properties
        .and_then(|p| p.receive_max)
        .unwrap_or(u16::MAX);
    Ok((io, receive_maximum))
}

/// Reads one whole packet.
async fn read_packet(io: &mut Box<dyn Io>, incoming: &mut BytesMut) -> Result<Packet, String> {
    loop {
        match Packet::read(incoming, Some(MAX_INCOMING)) {
            Ok(packet) => return Ok(packet),
            Err(rumqttc::v5::mqttbytes::Error::InsufficientBytes(_)) => {}
            Err(error) => return Err(format!("the broker sent what is not MQTT 5: {error}")),
        }
        let read = io
            .read_buf(incoming)
            .await
            .map_err(|error| format!("reading from the broker failed: {error}"))?;
        if read == 0 {
            return Err("the broker closed the connection".into());
        }
    }
}

/// A publication waiting for its acknowledgement.
struct Waiting {
    reply: oneshot::Sender<Published>,
}

/// Publishes requests and answers them until the connection ends (idle, or broken: then
/// every waiting request is failed).
async fn serve(
    io: Box<dyn Io>,
    limit: usize,
    first: Request,
    requests: &mut mpsc::Receiver<Request>,
) -> Result<(), String> {
    let (mut reader, mut writer) = tokio::io::split(io);
    let mut waiting: HashMap<u16, Waiting> = HashMap::new();
    let mut next_id: u16 = 0;
    let mut incoming = BytesMut::with_capacity(4096);
    let mut out = BytesMut::with_capacity(4096);
    let mut ping = tokio::time::interval(Duration::from_secs(u64::from(KEEP_ALIVE) / 2));
    ping.reset();
    // A ping the broker has not answered yet: unanswered at the next tick, the connection
    // is taken for dead (a broker gone without closing it).
    let mut pinged = false;
    let mut last_request = tokio::time::Instant::now();
    let mut pending = Some(first);
    let result: Result<(), String> = async {
        loop {
            if let Some(request) = pending.take() {
                let publication = request.publication;
                let qos = rumqttc::v5::mqttbytes::qos(publication.qos).unwrap_or(QoS::AtLeastOnce);
                let mut publish = Publish::new(
                    publication.topic,
                    qos,
                    publication.message.payload,
                    Some(PublishProperties {
                        message_expiry_interval: publication.expiry,
                        user_properties: publication.message.user_properties,
                        content_type: publication.message.content_type,
                        ..PublishProperties::default()
                    }),
                );
                publish.retain = publication.retain;
                if qos != QoS::AtMostOnce {
                    // A free packet identifier (1 to 65,535).
                    loop {
                        next_id = next_id.wrapping_add(1).max(1);
                        if !waiting.contains_key(&next_id) {
                            break;
                        }
                    }
                    publish.pkid = next_id;
                }
                out.clear();
                if let Err(error) = Packet::Publish(publish).write(&mut out, None) {
                    let _ = request.reply.send(Published::Refused {
                        reason: format!("the message cannot be sent over MQTT: {error}"),
                        for_good: true,
                    });
                    continue;
                }
                writer
                    .write_all(&out)
                    .await
                    .map_err(|error| format!("writing to the broker failed: {error}"))?;
                if qos == QoS::AtMostOnce {
                    let _ = request.reply.send(Published::Accepted);
                } else {
                    waiting.insert(next_id, Waiting { reply: request.reply });
                }
            }
            tokio::select! {
                request = requests.recv(), if waiting.len() < limit => match request {
                    Some(request) => {
                        last_request = tokio::time::Instant::now();
                        pending = Some(request);
                    }
                    None => return Ok(()),
                },
                read = reader.read_buf(&mut incoming) => {
                    match read {
                        Ok(0) => return Err("the broker closed the connection".into()),
                        Ok(_) => {}
                        Err(error) => return Err(format!("reading from the broker failed: {error}")),
                    }
                    loop {
                        let packet = match Packet::read(&mut incoming, Some(MAX_INCOMING)) {
                            Ok(packet) => packet,
                            Err(rumqttc::v5::mqttbytes::Error::InsufficientBytes(_)) => break,
                            Err(error) => return Err(format!("the broker sent what is not MQTT 5: {error}")),
                        };
                        if matches!(packet, Packet::PingResp(_)) {
                            pinged = false;
                        }
                        if let Some(reply) = answer(packet, &mut waiting, &mut out)? {
                            writer
                                .write_all(&reply)
                                .await
                                .map_err(|error| format!("writing to the broker failed: {error}"))?;
                        }
                    }
                }
                _ = ping.tick() => {
                    if pinged {
                        return Err(format!(
                            "the broker did not answer a ping within {} s",
                            KEEP_ALIVE / 2
                        ));
                    }
                    pinged = true;
                    out.clear();
                    Packet::PingReq(PingReq).write(&mut out, None).map_err(|e| e.to_string())?;
                    writer
                        .write_all(&out)
                        .await
                        .map_err(|error| format!("writing to the broker failed: {error}"))?;
                }
                _ = tokio::time::sleep_until(last_request + IDLE), if waiting.is_empty() => {
                    return Ok(());
                }
            }
        }
    }
    .await;
    if let Err(why) = &result {
        for (_, waiting) in waiting.drain() {
            let _ = waiting.reply.send(Published::Failed(format!(
                "{why}; the message was not acknowledged"
            )));
        }
    }
    result
}

/// What an acknowledgement means for the publication it names; the packet to send back
/// (PUBREL after a PUBREC), if any.
fn answer(
    packet: Packet,
    waiting: &mut HashMap<u16, Waiting>,
    out: &mut BytesMut,
) -> Result<Option<BytesMut>, String> {
    let (pkid, published) = match packet {
        Packet::PubAck(ack) => (ack.pkid, puback(ack.reason)),
        Packet::PubRec(rec) => match rec.reason {
            PubRecReason::Success | PubRecReason::NoMatchingSubscribers => {
                out.clear();
                Packet::PubRel(PubRel::new(rec.pkid, None))
                    .write(out, None)
                    .map_err(|e| e.to_string())?;
                return Ok(Some(out.split()));
            }
            reason => (
                rec.pkid,
                refusal(&format!("{reason:?}"), refused_for_good_rec(reason)),
            ),
        },
        Packet::PubComp(comp) => (
            comp.pkid,
            match comp.reason {
                PubCompReason::Success => Published::Accepted,
                reason => refusal(&format!("{reason:?}"), false),
            },
        ),
        Packet::Disconnect(disconnect) => {
            return Err(format!(
                "the broker ended the connection: {:?}",
                disconnect.reason_code
            ));
        }
        _ => return Ok(None),
    };
    if let Some(waiting) = waiting.remove(&pkid) {
        let _ = waiting.reply.send(published);
    }
    Ok(None)
}

fn puback(reason: PubAckReason) -> Published {
    match reason {
        PubAckReason::Success | PubAckReason::NoMatchingSubscribers => Published::Accepted,
        PubAckReason::NotAuthorized
        | PubAckReason::TopicNameInvalid
        | PubAckReason::PayloadFormatInvalid => refusal(&format!("{reason:?}"), true),
        reason => refusal(&format!("{reason:?}"), false),
    }
}

fn refused_for_good_rec(reason: PubRecReason) -> bool {
    matches!(
        reason,
        PubRecReason::NotAuthorized
            | PubRecReason::TopicNameInvalid
            | PubRecReason::PayloadFormatInvalid
    )
}

fn refusal(reason: &str, for_good: bool) -> Published {
    Published::Refused {
        reason: format!("the broker refused the message: {reason}"),
        for_good,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgements_are_sorted_into_delivered_refused_for_good_and_for_now() {
        assert_eq!(puback(PubAckReason::Success), Published::Accepted);
        // Nobody listens: the broker took it all the same.
        assert_eq!(
            puback(PubAckReason::NoMatchingSubscribers),
            Published::Accepted
        );
        for reason in [
            PubAckReason::NotAuthorized,
            PubAckReason::TopicNameInvalid,
            PubAckReason::PayloadFormatInvalid,
        ] {
            assert!(
                matches!(puback(reason), Published::Refused { for_good: true, .. }),
                "{reason:?}"
            );
        }
        for reason in [PubAckReason::QuotaExceeded, PubAckReason::UnspecifiedError] {
            assert!(
                matches!(
                    puback(reason),
                    Published::Refused {
                        for_good: false,
                        ..
                    }
                ),
                "{reason:?}"
            );
        }
    }

    #[test]
    fn a_pubrec_is_answered_with_a_pubrel_and_a_pubcomp_delivers() {
        let (reply, mut acknowledged) = oneshot::channel();
        let mut waiting = HashMap::from([(7, Waiting { reply })]);
        let mut out = BytesMut::new();
        let rec = rumqttc::v5::mqttbytes::v5::PubRec::new(7, None);
        let sent = answer(Packet::PubRec(rec), &mut waiting, &mut out);
        let mut sent = sent.expect("answered").expect("a PUBREL");
        assert!(matches!(
            Packet::read(&mut sent, None),
            Ok(Packet::PubRel(PubRel { pkid: 7, .. }))
        ));
        assert!(
            acknowledged.try_recv().is_err(),
            "not delivered before PUBCOMP"
        );
        let comp = rumqttc::v5::mqttbytes::v5::PubComp::new(7, None);
        assert!(
            answer(Packet::PubComp(comp), &mut waiting, &mut out)
                .unwrap()
                .is_none()
        );
        assert_eq!(acknowledged.try_recv().unwrap(), Published::Accepted);
    }
}
