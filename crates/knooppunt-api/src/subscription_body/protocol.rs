//! `protocol` and `protocolsettings`: the protocols the hub delivers over, and the settings
//! of each.

use super::*;

/// The protocols of the Subscriptions API this hub does not deliver over.
const OTHER_PROTOCOLS: [&str; 1] = ["KAFKA"];

/// The protocols the hub delivers over, for messages: "`HTTP`, `MQTT5` or `MQTT3`".
pub(super) fn spoken() -> String {
    Protocol::ALL
        .iter()
        .map(|p| format!("`{}`", p.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `protocol`: required, one the hub speaks.
pub(super) fn check_protocol(protocol: Field<String>, problems: &mut Problems) -> Option<Protocol> {
    let protocol = protocol.required("protocol", &spoken(), problems)?;
    if let Some(known) = Protocol::parse(&protocol) {
        return Some(known);
    }
    let other = protocol.as_str();
    match Protocol::ALL
        .iter()
        .find(|p| p.as_str().eq_ignore_ascii_case(other))
    {
        Some(p) => problems.add(
            "protocol",
            format!(
                "`{other}`: protocol names are case-sensitive; use `{}`",
                p.as_str()
            ),
        ),
        None if OTHER_PROTOCOLS.contains(&other) => problems.add(
            "protocol",
            format!("this hub delivers over {} only, not `{other}`", spoken()),
        ),
        None => problems.add(
            "protocol",
            format!("unknown protocol `{other}`; use {}", spoken()),
        ),
    }
    None
}

/// A push subscription's `protocolsettings`, those of its `protocol`.
pub(super) fn check_protocol_settings(
    protocol: Protocol,
    settings: Field<ProtocolSettingsIn>,
    problems: &mut Problems,
) -> Option<ProtocolSettings> {
    let sent = settings
        .optional(
            "protocolsettings",
            "an object with the protocol's settings",
            problems,
        )
        .unwrap_or_default();
    let before = problems.len();
    let members = [
        ("headers", sent.headers.is_sent()),
        ("method", sent.method.is_sent()),
        ("topicname", sent.topicname.is_sent()),
        ("qos", sent.qos.is_sent()),
        ("retain", sent.retain.is_sent()),
        ("expiry", sent.expiry.is_sent()),
        ("userproperties", sent.userproperties.is_sent()),
        ("subject", sent.subject.is_sent()),
        ("jetstream", sent.jetstream.is_sent()),
        ("address", sent.address.is_sent()),
        ("linkName", sent.link_name.is_sent()),
        ("sendersettlementmode", sent.sendersettlementmode.is_sent()),
        ("linkProperties", sent.link_properties.is_sent()),
    ];
    let own: &[&str] = match protocol {
        Protocol::Http => &["headers", "method"],
        Protocol::Mqtt5 => &["topicname", "qos", "retain", "expiry", "userproperties"],
        // Properties are MQTT 5's (the Subscriptions API: expiry and userproperties apply
        // to MQTT 5.0 only).
        Protocol::Mqtt3 => &["topicname", "qos", "retain"],
        Protocol::Nats => &["subject", "jetstream"],
        Protocol::Amqp => &[
            "address",
            "linkName",
            "sendersettlementmode",
            "linkProperties",
        ],
    };
    for (member, _) in members
        .iter()
        .filter(|(member, sent)| *sent && !own.contains(member))
    {
        problems.add(
            format!("protocolsettings.{member}"),
            format!("is not a setting of protocol `{}`", protocol.as_str()),
        );
    }
    let settings = match protocol {
        Protocol::Http => ProtocolSettings::Http(check_http_settings(sent, problems)),
        Protocol::Mqtt5 => ProtocolSettings::Mqtt(check_mqtt_settings(
            knooppunt_store::MqttVersion::V5,
            sent,
            problems,
        )?),
        Protocol::Mqtt3 => ProtocolSettings::Mqtt(check_mqtt_settings(
            knooppunt_store::MqttVersion::V3,
            sent,
            problems,
        )?),
        Protocol::Nats => ProtocolSettings::Nats(check_nats_settings(sent, problems)?),
        Protocol::Amqp => ProtocolSettings::Amqp(check_amqp_settings(sent, problems)),
    };
    (problems.len() == before).then_some(settings)
}

/// What a subscription to a broker cannot have: a mode its binding does not define, a
/// credential other than PLAIN (the broker's user name and password), a client
/// certificate (not yet presented to brokers).
pub(super) fn check_broker_subscription(
    protocol: Protocol,
    config: Option<&SubscriptionConfig>,
    credential: Option<&SinkCredential>,
    client_certificate: bool,
    problems: &mut Problems,
) {
    let mode = config.map(|config| config.settings().mode);
    if protocol == Protocol::Mqtt3 && mode != Some(knooppunt_store::DeliveryMode::Structured) {
        if mode.is_some() {
            problems.add(
                "config.mode",
                "an MQTT3 subscription is delivered in `structured` mode (MQTT 3.1.1 has no \
                 properties for binary mode: the MQTT binding, section 3)",
            );
        }
    } else if mode.is_some_and(|mode| {
        !matches!(
            mode,
            knooppunt_store::DeliveryMode::Structured | knooppunt_store::DeliveryMode::Binary
        )
    }) {
        problems.add(
            "config.mode",
            format!(
                "a {0} subscription is delivered in `structured` or `binary` mode (the {0} \
                 binding defines no other)",
                protocol.as_str()
            ),
        );
    }
    if credential.is_some_and(|c| !matches!(c, SinkCredential::Plain { .. })) {
        problems.add(
            "sinkcredential",
            format!(
                "a {} broker takes a PLAIN credential (its user name and password) only",
                protocol.as_str()
            ),
        );
    }
    if client_certificate {
        problems.add(
            "clientcertificate",
            format!(
                "is not presented to {} brokers: leave it out and use a PLAIN sinkcredential",
                protocol.as_str()
            ),
        );
    }
}

/// `AMQPSettings`: a target address (here or in the sink's path: checked with the sink), a
/// link name, the settlement mode and link properties.
pub(super) fn check_amqp_settings(
    sent: ProtocolSettingsIn,
    problems: &mut Problems,
) -> knooppunt_store::AmqpSettings {
    let address = sent
        .address
        .optional("protocolsettings.address", A_STRING, problems);
    if let Some(address) = &address
        && let Err(why) = knooppunt_delivery::check_amqp_address(address)
    {
        problems.add("protocolsettings.address", why);
    }
    let link_name = sent
        .link_name
        .optional("protocolsettings.linkName", A_STRING, problems);
    if link_name.as_ref().is_some_and(|name| {
        name.is_empty() || name.len() > 256 || name.chars().any(char::is_control)
    }) {
        problems.add(
            "protocolsettings.linkName",
            "must be 1 to 256 characters without control characters",
        );
    }
    let settled = match sent.sendersettlementmode.optional(
        "protocolsettings.sendersettlementmode",
        "`settled` or `unsettled`",
        problems,
    ) {
        None => false,
        Some(mode) if mode == "unsettled" => false,
        Some(mode) if mode == "settled" => true,
        Some(_) => {
            problems.add(
                "protocolsettings.sendersettlementmode",
                "must be `settled` (at most once) or `unsettled` (at least once)",
            );
            false
        }
    };
    knooppunt_store::AmqpSettings {
        address,
        link_name,
        settled,
        link_properties: check_strings(
            sent.link_properties,
            "protocolsettings.linkProperties",
            problems,
        ),
    }
}

/// `NATSSettings`: a subject without wildcards, and whether JetStream acknowledges.
pub(super) fn check_nats_settings(
    sent: ProtocolSettingsIn,
    problems: &mut Problems,
) -> Option<knooppunt_store::NatsSettings> {
    let subject = sent
        .subject
        .required("protocolsettings.subject", A_STRING, problems);
    if let Some(subject) = &subject
        && let Err(why) = knooppunt_delivery::check_nats_subject(subject)
    {
        problems.add("protocolsettings.subject", why);
    }
    let jetstream = sent
        .jetstream
        .optional("protocolsettings.jetstream", "true or false", problems)
        .unwrap_or(false);
    Some(knooppunt_store::NatsSettings {
        subject: subject?,
        jetstream,
    })
}

/// `MQTTSettings`: a topic without wildcards, QoS 0 to 2, an expiry in seconds, and
/// user properties.
pub(super) fn check_mqtt_settings(
    version: knooppunt_store::MqttVersion,
    sent: ProtocolSettingsIn,
    problems: &mut Problems,
) -> Option<MqttSettings> {
    let topic = sent
        .topicname
        .required("protocolsettings.topicname", A_STRING, problems);
    if let Some(topic) = &topic
        && let Err(why) = knooppunt_delivery::check_mqtt_topic(topic)
    {
        problems.add("protocolsettings.topicname", why);
    }
    let qos = match sent
        .qos
        .optional("protocolsettings.qos", "0, 1 or 2", problems)
    {
        None => 1,
        Some(qos @ 0..=2) => qos as u8,
        Some(_) => {
            problems.add("protocolsettings.qos", "must be 0, 1 or 2");
            1
        }
    };
    let retain = sent
        .retain
        .optional("protocolsettings.retain", "true or false", problems)
        .unwrap_or(false);
    let expiry =
        match sent
            .expiry
            .optional("protocolsettings.expiry", "a number of seconds", problems)
        {
            None => None,
            Some(seconds) if (1..=i64::from(u32::MAX)).contains(&seconds) => Some(seconds as u32),
            Some(_) => {
                problems.add(
                    "protocolsettings.expiry",
                    "must be a number of seconds from 1 to 4294967295",
                );
                None
            }
        };
    let user_properties = check_strings(
        sent.userproperties,
        "protocolsettings.userproperties",
        problems,
    );
    Some(MqttSettings {
        version,
        topic: topic?,
        qos,
        retain,
        expiry,
        user_properties,
    })
}

/// `HttpSettings`: headers the hub does not set itself, and a method.
pub(super) fn check_http_settings(
    sent: ProtocolSettingsIn,
    problems: &mut Problems,
) -> HttpSettings {
    let mut checked = HttpSettings {
        headers: check_strings(sent.headers, "protocolsettings.headers", problems),
        ..HttpSettings::default()
    };
    for (name, value) in &checked.headers {
        let path = format!("protocolsettings.headers.{name}");
        if HeaderName::try_from(name.as_str()).is_err() {
            problems.add(path, "is not a valid HTTP header name");
        } else if HeaderValue::try_from(value.as_str()).is_err() {
            problems.add(path, "is not a valid HTTP header value (printable ASCII)");
        } else if is_reserved_header(name) {
            problems.add(
                path,
                "is set by the hub itself and cannot be overridden (Content-Type, \
                 Authorization, ce-*, WebHook-*, Host, Content-Length)",
            );
        }
    }
    const METHODS: &str = "`POST`, `PUT` or `PATCH`";
    match sent
        .method
        .optional("protocolsettings.method", METHODS, problems)
    {
        Some(method) if matches!(method.as_str(), "POST" | "PUT" | "PATCH") => {
            checked.method = Some(method);
        }
        Some(_) => problems.add("protocolsettings.method", format!("must be {METHODS}")),
        None => {}
    }
    checked
}

pub(super) fn is_reserved_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.starts_with("ce-")
        || name.starts_with("webhook-")
        || matches!(
            name.as_str(),
            "content-type" | "authorization" | "host" | "content-length" | "transfer-encoding"
        )
}
