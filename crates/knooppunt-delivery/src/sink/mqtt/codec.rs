//! The packets of both MQTT versions the hub speaks, 5 and 3.1.1, written and read through
//! one interface (rumqttc's codecs), so that a connection's task knows no version.

use bytes::BytesMut;
use rumqttc::mqttbytes::v4;
use rumqttc::v5::mqttbytes::v5;
use rumqttc::v5::mqttbytes::{QoS, qos};

use super::{Publication, Published};

/// The protocol version of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Version {
    /// MQTT 3.1.1: no properties (the binding's structured mode only).
    V3,
    V5,
}

/// What a broker sent, as the connection's task needs it.
#[derive(Debug)]
pub(super) enum Incoming {
    /// The answer to CONNECT: the broker's receive maximum, or its refusal.
    ConnAck(Result<u16, Published>),
    /// The end of a publication: PUBACK (QoS 1) or PUBCOMP (QoS 2).
    Done {
        pkid: u16,
        published: Published,
    },
    /// PUBREC (QoS 2): a PUBREL is due, unless the broker refused.
    Received {
        pkid: u16,
        refused: Option<Published>,
    },
    PingResp,
    /// The broker ends the connection, saying why.
    Disconnect(String),
    Other,
}

/// The largest packet the hub reads from a broker (acknowledgements are small).
const MAX_INCOMING: usize = 64 * 1024;

fn written(result: Result<usize, impl std::fmt::Display>) -> Result<(), String> {
    result
        .map(|_| ())
        .map_err(|error| format!("the packet cannot be written: {error}"))
}

impl Version {
    pub(super) fn connect(
        self,
        client_id: String,
        keep_alive: u16,
        login: Option<(String, String)>,
        out: &mut BytesMut,
    ) -> Result<(), String> {
        match self {
            Version::V5 => {
                let connect = v5::Connect {
                    keep_alive,
                    client_id,
                    clean_start: true,
                    properties: None,
                };
                let login = login.map(|(username, password)| v5::Login { username, password });
                written(v5::Packet::Connect(connect, None, login).write(out, None))
            }
            Version::V3 => {
                let mut connect = v4::Connect::new(client_id);
                connect.keep_alive = keep_alive;
                connect.clean_session = true;
                connect.login = login.map(|(username, password)| v4::Login { username, password });
                written(connect.write(out))
            }
        }
    }

    /// A PUBLISH with this packet identifier (ignored at QoS 0).
    pub(super) fn publish(
        self,
        publication: Publication,
        pkid: u16,
        out: &mut BytesMut,
    ) -> Result<(), String> {
        let level = qos(publication.qos).unwrap_or(QoS::AtLeastOnce);
        match self {
            Version::V5 => {
                let mut publish = v5::Publish::new(
                    publication.topic,
                    level,
                    publication.message.payload,
                    Some(v5::PublishProperties {
                        message_expiry_interval: publication.expiry,
                        user_properties: publication.message.user_properties,
                        content_type: publication.message.content_type,
                        ..v5::PublishProperties::default()
                    }),
                );
                publish.retain = publication.retain;
                publish.pkid = pkid;
                written(v5::Packet::Publish(publish).write(out, None))
            }
            Version::V3 => {
                let level = match level {
                    QoS::AtMostOnce => rumqttc::QoS::AtMostOnce,
                    QoS::AtLeastOnce => rumqttc::QoS::AtLeastOnce,
                    QoS::ExactlyOnce => rumqttc::QoS::ExactlyOnce,
                };
                let mut publish =
                    v4::Publish::new(publication.topic, level, publication.message.payload);
                publish.retain = publication.retain;
                publish.pkid = pkid;
                written(publish.write(out))
            }
        }
    }

    pub(super) fn pubrel(self, pkid: u16, out: &mut BytesMut) -> Result<(), String> {
        match self {
            Version::V5 => {
                written(v5::Packet::PubRel(v5::PubRel::new(pkid, None)).write(out, None))
            }
            Version::V3 => written(v4::PubRel::new(pkid).write(out)),
        }
    }

    pub(super) fn ping(self, out: &mut BytesMut) -> Result<(), String> {
        match self {
            Version::V5 => written(v5::Packet::PingReq(v5::PingReq).write(out, None)),
            Version::V3 => written(v4::PingReq.write(out)),
        }
    }

    /// DISCONNECT (a normal end).
    pub(super) fn disconnect(self, out: &mut BytesMut) -> Result<(), String> {
        match self {
            Version::V5 => {
                let disconnect = v5::Disconnect {
                    reason_code: v5::DisconnectReasonCode::NormalDisconnection,
                    properties: None,
                };
                written(v5::Packet::Disconnect(disconnect).write(out, None))
            }
            Version::V3 => written(v4::Disconnect.write(out)),
        }
    }

    /// The next whole packet in `incoming`, if it holds one.
    pub(super) fn read(self, incoming: &mut BytesMut) -> Result<Option<Incoming>, String> {
        match self {
            Version::V5 => match v5::Packet::read(incoming, Some(MAX_INCOMING as u32)) {
                Ok(packet) => Ok(Some(incoming_v5(packet))),
                Err(rumqttc::v5::mqttbytes::Error::InsufficientBytes(_)) => Ok(None),
                Err(error) => Err(format!("the broker sent what is not MQTT 5: {error}")),
            },
            Version::V3 => match v4::Packet::read(incoming, MAX_INCOMING) {
                Ok(packet) => Ok(Some(incoming_v3(packet))),
                Err(rumqttc::mqttbytes::Error::InsufficientBytes(_)) => Ok(None),
                Err(error) => Err(format!("the broker sent what is not MQTT 3.1.1: {error}")),
            },
        }
    }
}

fn incoming_v5(packet: v5::Packet) -> Incoming {
    match packet {
        v5::Packet::ConnAck(connack) => Incoming::ConnAck(match connack.code {
            v5::ConnectReturnCode::Success => Ok(connack
                .properties
                .and_then(|p| p.receive_max)
                .unwrap_or(u16::MAX)),
            code => {
                let for_good = matches!(
                    code,
                    v5::ConnectReturnCode::BadUserNamePassword
                        | v5::ConnectReturnCode::NotAuthorized
                        | v5::ConnectReturnCode::Banned
                        | v5::ConnectReturnCode::BadAuthenticationMethod
                        | v5::ConnectReturnCode::ClientIdentifierNotValid
                        | v5::ConnectReturnCode::UnsupportedProtocolVersion
                        | v5::ConnectReturnCode::RefusedProtocolVersion
                );
                Err(connection_refused(&format!("{code:?}"), for_good))
            }
        }),
        v5::Packet::PubAck(ack) => Incoming::Done {
            pkid: ack.pkid,
            published: puback(ack.reason),
        },
        v5::Packet::PubRec(rec) => Incoming::Received {
            pkid: rec.pkid,
            refused: match rec.reason {
                v5::PubRecReason::Success | v5::PubRecReason::NoMatchingSubscribers => None,
                reason => Some(refusal(
                    &format!("{reason:?}"),
                    matches!(
                        reason,
                        v5::PubRecReason::NotAuthorized
                            | v5::PubRecReason::TopicNameInvalid
                            | v5::PubRecReason::PayloadFormatInvalid
                    ),
                )),
            },
        },
        v5::Packet::PubComp(comp) => Incoming::Done {
            pkid: comp.pkid,
            published: match comp.reason {
                v5::PubCompReason::Success => Published::Accepted,
                reason => refusal(&format!("{reason:?}"), false),
            },
        },
        v5::Packet::PingResp(_) => Incoming::PingResp,
        v5::Packet::Disconnect(disconnect) => Incoming::Disconnect(format!(
            "the broker ended the connection: {:?}",
            disconnect.reason_code
        )),
        _ => Incoming::Other,
    }
}

/// MQTT 3.1.1 acknowledgements carry no reason: one that comes means the broker took it
/// (a broker that may not take it closes the connection, or drops it unseen).
fn incoming_v3(packet: v4::Packet) -> Incoming {
    match packet {
        v4::Packet::ConnAck(connack) => Incoming::ConnAck(match connack.code {
            v4::ConnectReturnCode::Success => Ok(u16::MAX),
            code => Err(connection_refused(
                &format!("{code:?}"),
                !matches!(code, v4::ConnectReturnCode::ServiceUnavailable),
            )),
        }),
        v4::Packet::PubAck(ack) => Incoming::Done {
            pkid: ack.pkid,
            published: Published::Accepted,
        },
        v4::Packet::PubRec(rec) => Incoming::Received {
            pkid: rec.pkid,
            refused: None,
        },
        v4::Packet::PubComp(comp) => Incoming::Done {
            pkid: comp.pkid,
            published: Published::Accepted,
        },
        v4::Packet::PingResp => Incoming::PingResp,
        v4::Packet::Disconnect => Incoming::Disconnect("the broker ended the connection".into()),
        _ => Incoming::Other,
    }
}

fn connection_refused(code: &str, for_good: bool) -> Published {
    Published::Refused {
        reason: format!(
            "the broker refused the connection: {code}{}",
            if for_good {
                " (check the subscription's sinkcredential)"
            } else {
                ""
            }
        ),
        for_good,
    }
}

pub(super) fn puback(reason: v5::PubAckReason) -> Published {
    match reason {
        v5::PubAckReason::Success | v5::PubAckReason::NoMatchingSubscribers => Published::Accepted,
        v5::PubAckReason::NotAuthorized
        | v5::PubAckReason::TopicNameInvalid
        | v5::PubAckReason::PayloadFormatInvalid => refusal(&format!("{reason:?}"), true),
        reason => refusal(&format!("{reason:?}"), false),
    }
}

fn refusal(reason: &str, for_good: bool) -> Published {
    Published::Refused {
        reason: format!("the broker refused the message: {reason}"),
        for_good,
    }
}
