//! The protocols a subscription's events are delivered over, each with its settings
//! (Subscriptions API `protocol` and `protocolsettings`).

use std::collections::BTreeMap;

/// How events are delivered (Subscriptions API `protocol`): the ones the hub speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    #[default]
    Http,
    /// MQTT 5 (`MQTT5`: the MQTT binding's binary and structured modes).
    Mqtt5,
    /// MQTT 3.1.1 (`MQTT3`: the binding's structured mode only; no properties).
    Mqtt3,
    /// NATS (`NATS`): core NATS, or JetStream when the settings say so.
    Nats,
    /// AMQP 1.0 (`AMQP`).
    Amqp,
}

impl Protocol {
    /// Every protocol the hub speaks.
    pub const ALL: [Protocol; 5] = [
        Protocol::Http,
        Protocol::Mqtt5,
        Protocol::Mqtt3,
        Protocol::Nats,
        Protocol::Amqp,
    ];

    /// The name the Subscriptions API gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Http => "HTTP",
            Protocol::Mqtt5 => "MQTT5",
            Protocol::Mqtt3 => "MQTT3",
            Protocol::Nats => "NATS",
            Protocol::Amqp => "AMQP",
        }
    }

    /// The protocol of this name, if the hub speaks it.
    pub fn parse(name: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// The sink URL schemes of the protocol, plain first.
    pub fn schemes(self) -> [&'static str; 2] {
        match self {
            Protocol::Http => ["http", "https"],
            Protocol::Mqtt5 | Protocol::Mqtt3 => ["mqtt", "mqtts"],
            Protocol::Nats => ["nats", "tls"],
            Protocol::Amqp => ["amqp", "amqps"],
        }
    }

    /// A protocol whose sinks have this URL scheme (any case): MQTT 5 for an MQTT URL.
    pub fn of_scheme(scheme: &str) -> Option<Protocol> {
        let scheme = scheme.to_ascii_lowercase();
        Protocol::ALL
            .into_iter()
            .find(|p| p.schemes().contains(&scheme.as_str()))
    }
}

/// A subscription's protocol with its `protocolsettings`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolSettings {
    Http(HttpSettings),
    Mqtt(MqttSettings),
    Nats(NatsSettings),
    Amqp(AmqpSettings),
}

impl Default for ProtocolSettings {
    fn default() -> Self {
        ProtocolSettings::Http(HttpSettings::default())
    }
}

impl ProtocolSettings {
    pub fn protocol(&self) -> Protocol {
        match self {
            ProtocolSettings::Http(_) => Protocol::Http,
            ProtocolSettings::Mqtt(MqttSettings {
                version: MqttVersion::V5,
                ..
            }) => Protocol::Mqtt5,
            ProtocolSettings::Mqtt(MqttSettings {
                version: MqttVersion::V3,
                ..
            }) => Protocol::Mqtt3,
            ProtocolSettings::Nats(_) => Protocol::Nats,
            ProtocolSettings::Amqp(_) => Protocol::Amqp,
        }
    }

    /// A broker's settings as both backends keep them (one JSON object); `None` for HTTP,
    /// whose settings have columns of their own.
    pub fn broker_record(&self) -> Option<serde_json::Value> {
        match self {
            ProtocolSettings::Http(_) => None,
            ProtocolSettings::Mqtt(m) => Some(serde_json::json!({
                "topic": m.topic, "qos": m.qos, "retain": m.retain, "expiry": m.expiry,
                "user_properties": m.user_properties,
            })),
            ProtocolSettings::Nats(n) => Some(serde_json::json!({
                "subject": n.subject, "jetstream": n.jetstream,
            })),
            ProtocolSettings::Amqp(a) => Some(serde_json::json!({
                "address": a.address, "link_name": a.link_name, "settled": a.settled,
                "link_properties": a.link_properties,
            })),
        }
    }

    /// The settings of `protocol` as a backend kept them: the HTTP settings, or the
    /// broker's record ([`ProtocolSettings::broker_record`]); what is wrong otherwise.
    pub fn from_record(
        protocol: Protocol,
        http: HttpSettings,
        broker: Option<&serde_json::Value>,
    ) -> Result<ProtocolSettings, String> {
        use serde_json::Value;
        let wrong = || {
            format!(
                "the settings are not those of protocol `{}`",
                protocol.as_str()
            )
        };
        let text = |record: &Value, key: &str| {
            record
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(wrong)
        };
        Ok(match (protocol, broker) {
            (Protocol::Http, None) => ProtocolSettings::Http(http),
            (Protocol::Mqtt5 | Protocol::Mqtt3, Some(m)) => ProtocolSettings::Mqtt(MqttSettings {
                version: if protocol == Protocol::Mqtt3 {
                    MqttVersion::V3
                } else {
                    MqttVersion::V5
                },
                topic: text(m, "topic")?,
                qos: m.get("qos").and_then(Value::as_u64).unwrap_or(1) as u8,
                retain: m.get("retain").and_then(Value::as_bool).unwrap_or(false),
                expiry: m.get("expiry").and_then(Value::as_u64).map(|e| e as u32),
                user_properties: m
                    .get("user_properties")
                    .cloned()
                    .map(serde_json::from_value)
                    .transpose()
                    .map_err(|_| wrong())?
                    .unwrap_or_default(),
            }),
            (Protocol::Amqp, Some(a)) => ProtocolSettings::Amqp(AmqpSettings {
                address: a.get("address").and_then(Value::as_str).map(str::to_owned),
                link_name: a
                    .get("link_name")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                settled: a.get("settled").and_then(Value::as_bool).unwrap_or(false),
                link_properties: a
                    .get("link_properties")
                    .cloned()
                    .map(serde_json::from_value)
                    .transpose()
                    .map_err(|_| wrong())?
                    .unwrap_or_default(),
            }),
            (Protocol::Nats, Some(n)) => ProtocolSettings::Nats(NatsSettings {
                subject: text(n, "subject")?,
                jetstream: n.get("jetstream").and_then(Value::as_bool).unwrap_or(false),
            }),
            _ => return Err(wrong()),
        })
    }

    /// The HTTP settings, for an HTTP subscription.
    pub fn http(&self) -> Option<&HttpSettings> {
        match self {
            ProtocolSettings::Http(settings) => Some(settings),
            _ => None,
        }
    }
}

/// `protocolsettings` for HTTP (Subscriptions API section 3.2.2.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpSettings {
    /// Headers copied into every delivery request.
    pub headers: BTreeMap<String, String>,
    /// The HTTP method; POST when absent.
    pub method: Option<String>,
}

/// The MQTT protocol version a subscription's broker is spoken to in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MqttVersion {
    /// 3.1.1.
    V3,
    V5,
}

/// `protocolsettings` for MQTT (Subscriptions API `MQTTSettings`): where and how each
/// event is published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttSettings {
    /// `MQTT5` or `MQTT3` (3.1.1).
    pub version: MqttVersion,
    /// The topic every event is published to (`topicname`).
    pub topic: String,
    /// 0 (at most once), 1 (at least once, the default) or 2 (exactly once).
    pub qos: u8,
    pub retain: bool,
    /// The message expiry interval in seconds (`expiry`), if any.
    pub expiry: Option<u32>,
    /// User properties added to every message (`userproperties`), after the event's own.
    pub user_properties: BTreeMap<String, String>,
}

/// `protocolsettings` for NATS (Subscriptions API `NATSSettings`, and the hub's `jetstream`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsSettings {
    /// The subject every event is published to.
    pub subject: String,
    /// Whether each message waits for a JetStream stream's acknowledgement (at least once);
    /// core NATS otherwise (at most once: the server took it, whoever listens).
    pub jetstream: bool,
}

/// `protocolsettings` for AMQP 1.0 (Subscriptions API `AMQPSettings`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmqpSettings {
    /// The link's target address (`address`); when absent, the sink URL's path.
    pub address: Option<String>,
    /// The link's name (`linkName`); a random one when absent.
    pub link_name: Option<String>,
    /// `sendersettlementmode` `settled` (at most once) rather than `unsettled` (at least
    /// once, the default).
    pub settled: bool,
    /// Copied into the sending link's properties (`linkProperties`).
    pub link_properties: BTreeMap<String, String>,
}
