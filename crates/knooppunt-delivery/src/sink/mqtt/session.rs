//! One connection to a broker, owned by one task: it connects at the first request (the
//! address checked against the hub's sink networks, TLS for `mqtts`), publishes each
//! request with a packet identifier of its own, answers each when the broker acknowledged
//! it, pings every half keep-alive (a ping unanswered by the next, or a message left
//! unacknowledged past its attempt's timeout, means a connection to make again), and ends
//! after [`IDLE`] without requests. A connection that breaks off fails what waits for an
//! acknowledgement (those deliveries are tried again) and is made again at the next request.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

use super::codec::{Incoming, Version};
use super::{Endpoint, Publication, Published};
use crate::sink::address::SinkNetworks;
use crate::sink::broker::{self, Io, failed};

type Request = broker::Request<Publication>;

/// A connection without requests for this long is closed.
const IDLE: Duration = Duration::from_secs(60);

/// The keep-alive the hub asks for; it pings at half of it.
pub(super) const KEEP_ALIVE: u16 = 60;

/// How long connecting (TCP, TLS, CONNECT and CONNACK) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The most messages the hub leaves unacknowledged on one connection, whatever the broker
/// allows.
const MAX_IN_FLIGHT: usize = 256;

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
                let link = (endpoint.version, endpoint.keep_alive);
                if let Err(why) = serve(io, link, limit, first, &mut requests).await {
                    tracing::debug!(broker = %endpoint.at.host, %why, "An MQTT connection ended.");
                }
            }
            Err(refused) => broker::refuse_queued(first, &mut requests, &refused),
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
    if endpoint.version.disconnect(&mut out).is_ok() {
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
    let tcp = broker::dial(&endpoint.at.host, endpoint.at.port, networks).await?;
    let mut io: Box<dyn Io> = if endpoint.at.tls {
        broker::secure(tcp, &endpoint.at.host, tls).await?
    } else {
        Box::new(tcp)
    };
    let mut out = BytesMut::new();
    endpoint
        .version
        .connect(
            format!("knooppunt-{:016x}", fastrand::u64(..)),
            endpoint.keep_alive,
            endpoint.at.login.clone(),
            &mut out,
        )
        .map_err(Published::Failed)?;
    io.write_all(&out)
        .await
        .map_err(|error| failed("writing to", &error))?;
    let mut incoming = BytesMut::with_capacity(1024);
    loop {
        if let Some(packet) = endpoint
            .version
            .read(&mut incoming)
            .map_err(Published::Failed)?
        {
            return match packet {
                Incoming::ConnAck(answer) => answer.map(|receive_maximum| (io, receive_maximum)),
                _ => Err(Published::Failed(
                    "the broker did not answer the connection with a CONNACK".into(),
                )),
            };
        }
        let read = io
            .read_buf(&mut incoming)
            .await
            .map_err(|error| failed("reading from", &error))?;
        if read == 0 {
            return Err(Published::Failed("the broker closed the connection".into()));
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
    (version, keep_alive): (Version, u16),
    limit: usize,
    first: Request,
    requests: &mut mpsc::Receiver<Request>,
) -> Result<(), String> {
    let (mut reader, mut writer) = tokio::io::split(io);
    let mut waiting: HashMap<u16, Waiting> = HashMap::new();
    let mut next_id: u16 = 0;
    let mut incoming = BytesMut::with_capacity(4096);
    let mut out = BytesMut::with_capacity(4096);
    let mut ping = tokio::time::interval(Duration::from_secs(u64::from(keep_alive / 2).max(1)));
    ping.reset();
    // A ping the broker has not answered yet: unanswered at the next tick, the connection
    // is taken for dead (a broker gone without closing it).
    let mut pinged = false;
    let mut last_request = tokio::time::Instant::now();
    let mut pending = Some(first);
    let result: Result<(), String> = async {
        loop {
            if let Some(request) = pending.take() {
                let at_most_once = request.message.qos == 0;
                if !at_most_once {
                    // A free packet identifier (1 to 65,535).
                    loop {
                        next_id = next_id.wrapping_add(1).max(1);
                        if !waiting.contains_key(&next_id) {
                            break;
                        }
                    }
                }
                out.clear();
                if let Err(why) = version.publish(request.message, next_id, &mut out) {
                    let _ = request.reply.send(Published::Refused {
                        reason: format!("the message cannot be sent over MQTT: {why}"),
                        for_good: true,
                    });
                    continue;
                }
                writer
                    .write_all(&out)
                    .await
                    .map_err(|error| format!("writing to the broker failed: {error}"))?;
                if at_most_once {
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
                    while let Some(packet) = version.read(&mut incoming)? {
                        if matches!(packet, Incoming::PingResp) {
                            pinged = false;
                        }
                        if let Some(reply) = answer(version, packet, &mut waiting, &mut out)? {
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
                            keep_alive / 2
                        ));
                    }
                    // A message its attempt stopped waiting for (past the subscription's
                    // timeout) still unacknowledged: the broker is not answering on this
                    // connection, which is made again (those deliveries are retried).
                    if waiting.values().any(|w| w.reply.is_closed()) {
                        return Err(
                            "the broker left messages unacknowledged past their attempts' \
                             timeout"
                                .into(),
                        );
                    }
                    pinged = true;
                    out.clear();
                    version.ping(&mut out)?;
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

/// What a packet means for the publication it names; the packet to send back (PUBREL
/// after a PUBREC), if any.
fn answer(
    version: Version,
    packet: Incoming,
    waiting: &mut HashMap<u16, Waiting>,
    out: &mut BytesMut,
) -> Result<Option<BytesMut>, String> {
    let (pkid, published) = match packet {
        Incoming::Done { pkid, published } => (pkid, published),
        Incoming::Received {
            pkid,
            refused: None,
        } => {
            out.clear();
            version.pubrel(pkid, out)?;
            return Ok(Some(out.split()));
        }
        Incoming::Received {
            pkid,
            refused: Some(refused),
        } => (pkid, refused),
        Incoming::Disconnect(why) => return Err(why),
        Incoming::ConnAck(_) | Incoming::PingResp | Incoming::Other => return Ok(None),
    };
    if let Some(waiting) = waiting.remove(&pkid) {
        let _ = waiting.reply.send(published);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::mqtt::codec::puback;
    use rumqttc::v5::mqttbytes::v5::{PubAckReason, PubComp, PubRec, PubRel};

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
        let mut wire = BytesMut::new();
        rumqttc::v5::mqttbytes::v5::Packet::PubRec(PubRec::new(7, None))
            .write(&mut wire, None)
            .unwrap();
        let rec = Version::V5.read(&mut wire).unwrap().unwrap();
        let mut sent = answer(Version::V5, rec, &mut waiting, &mut out)
            .expect("answered")
            .expect("a PUBREL");
        assert!(matches!(
            rumqttc::v5::mqttbytes::v5::Packet::read(&mut sent, None),
            Ok(rumqttc::v5::mqttbytes::v5::Packet::PubRel(PubRel {
                pkid: 7,
                ..
            }))
        ));
        assert!(
            acknowledged.try_recv().is_err(),
            "not delivered before PUBCOMP"
        );
        rumqttc::v5::mqttbytes::v5::Packet::PubComp(PubComp::new(7, None))
            .write(&mut wire, None)
            .unwrap();
        let comp = Version::V5.read(&mut wire).unwrap().unwrap();
        assert!(
            answer(Version::V5, comp, &mut waiting, &mut out)
                .unwrap()
                .is_none()
        );
        assert_eq!(acknowledged.try_recv().unwrap(), Published::Accepted);
    }
}
