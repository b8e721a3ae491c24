//! What the API answers for a subscription: its representation, read-only members
//! included, with secrets write-only.

use super::*;

/// A subscription as the API shows it (Subscriptions API section 3.2.1, with the hub's
/// read-only members): secrets are write-only (a sink's query values and password, header
/// values, a client certificate's key read as `********`).
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    rename = "Subscription",
    description = "A subscription (CloudEvents Subscriptions API section 3.2.1) as the hub shows it."
)]
pub struct SubscriptionOut {
    /// Assigned by the hub.
    #[schemars(example = &"0193a5b2-7c1d-7e3f-8a9b-0c1d2e3f4a5b")]
    pub id: String,
    /// The principal that created the subscription.
    pub owner: String,
    /// The name people know it by (a Knooppunt extension of the resource).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Where events are delivered (query values and a password read as `********`); for a
    /// pull subscription the hub's receive URL of the subscription.
    #[schemars(extend("format" = "uri"), example = &"https://gemeente.example.nl/events")]
    pub sink: String,
    /// The delivery protocol: `HTTP` (webhooks), `MQTT5` or `MQTT3` (MQTT 5 or 3.1.1
    /// brokers), `NATS` (NATS servers) or `AMQP` (AMQP 1.0 brokers).
    #[schemars(extend("enum" = ["HTTP", "MQTT5", "MQTT3", "NATS", "AMQP"]))]
    pub protocol: Cow<'static, str>,
    /// Only events with exactly this `source`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "uri-reference"))]
    pub source: Option<String>,
    /// Only events whose `type` is one of these. Left out: any type; an empty list: no type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub types: Option<Vec<String>>,
    /// Filters that must all match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<FilterIn>")]
    pub filters: Vec<Value>,
    /// None for a pull subscription: it sends no requests.
    #[serde(rename = "protocolsettings", skip_serializing_if = "Option::is_none")]
    pub protocol_settings: Option<ProtocolSettingsOut>,
    #[serde(rename = "clientcertificate", skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<ClientCertificateOut>,
    #[schemars(schema_with = "stored_config_reference")]
    pub config: BTreeMap<String, String>,
    /// `active`: deliveries flow. `pending`: the sink has not consented yet (validation
    /// handshake); matching events are queued, not delivered. `disabled`: the sink answered
    /// 410 Gone (nothing is delivered or queued, what was pending became dead letters), or
    /// the stored filters break the hub's limits (see disabledReason). `suspended`: its
    /// owner principal is disabled: nothing is routed to it, delivered, received or read
    /// until an admin enables the principal again (see suspendedReason).
    #[schemars(extend("enum" = ["active", "pending", "disabled", "suspended"]))]
    pub state: Cow<'static, str>,
    /// While pending: why the handshake did not make it active.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation_problem: Option<String>,
    /// While active: how the sink's consent was established.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["handshake", "callback", "agreement"]))]
    pub validated_by: Option<Cow<'static, str>>,
    /// While disabled: why. The sink answered 410 Gone (replace the subscription with
    /// another sink), or its stored filters break the hub's filter limits (replacing it
    /// with filters within the limits brings it back, through the validation handshake).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// While suspended: why (its owner principal is disabled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspended_reason: Option<String>,
    /// The last delivery attempt since the hub started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_delivery: Option<AttemptOut>,
    /// Pending deliveries now (in the answers to reading, creating and replacing it);
    /// `GET /subscriptions/{id}/status` says more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog: Option<u64>,
    /// Present when the subscription's filters ran out of an evaluation budget on some
    /// event since the hub started: that event was not routed to it. `lastExceededBudget`
    /// says which: its own (simplify the filters: fewer string functions over large
    /// attributes, prefixes instead of LIKE; or ask the operator about
    /// filters.max_evaluation_cost), its principal's (its owner's filters together cost too
    /// much for one event: filters.max_evaluation_cost_per_principal), or its principal's
    /// share of the event's (many principals' filters were costly for that event:
    /// filters.max_evaluation_cost_per_event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_budget: Option<FilterBudgetOut>,
    /// Its approvals for approval-required event types its filters can match: it receives
    /// their events only when `granted`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<crate::approvals::GrantOut>,
    /// The secret deliveries are signed with (Standard Webhooks `v1`: HMAC-SHA256 over
    /// `webhook-id.webhook-timestamp.body`), in the answer that creates the subscription
    /// only; rotate it with POST /subscriptions/{id}/signing-secret.
    #[serde(rename = "signingsecret", skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "^whsec_"))]
    pub signing_secret: Option<String>,
    /// While the secret before the current one still signs (after a rotation): until when
    /// (RFC 3339). A new rotation is refused until then (409).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub signing_overlap_until: Option<String>,
}

/// How a push subscription's deliveries are sent: for HTTP their method and header names, for
/// MQTT the topic and message settings, for NATS the subject, for AMQP the link.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[schemars(rename = "DeliverySettings")]
#[serde(untagged)]
pub enum ProtocolSettingsOut {
    /// HTTP (`HttpSettings`).
    Http {
        /// The headers added to every delivery; their values read as `********`.
        headers: BTreeMap<String, Cow<'static, str>>,
        #[schemars(extend("enum" = ["POST", "PUT", "PATCH"]))]
        method: String,
    },
    /// MQTT (`MQTTSettings`).
    Mqtt {
        topicname: String,
        #[schemars(range(min = 0, max = 2))]
        qos: u8,
        retain: bool,
        /// The message expiry interval in seconds, if one is set.
        #[serde(skip_serializing_if = "Option::is_none")]
        expiry: Option<u32>,
        userproperties: BTreeMap<String, String>,
    },
    /// NATS (`NATSSettings`).
    Nats {
        subject: String,
        /// Whether a JetStream stream acknowledges each message (at least once); core NATS
        /// (at most once) otherwise.
        jetstream: bool,
    },
    /// AMQP (`AMQPSettings`).
    Amqp {
        /// The target address, when set (else the sink URL's path).
        #[serde(skip_serializing_if = "Option::is_none")]
        address: Option<String>,
        #[serde(rename = "linkName", skip_serializing_if = "Option::is_none")]
        link_name: Option<String>,
        #[schemars(extend("enum" = ["settled", "unsettled"]))]
        sendersettlementmode: String,
        #[serde(rename = "linkProperties")]
        link_properties: BTreeMap<String, String>,
    },
}

/// A client certificate without its private key.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[schemars(rename = "PresentedCertificate")]
pub struct ClientCertificateOut {
    /// The certificate, then any intermediates (PEM).
    pub certificate: String,
    /// Always `********`: the key is write-only.
    pub privatekey: Cow<'static, str>,
}

/// A delivery attempt as the API shows it.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Attempt")]
pub struct AttemptOut {
    #[schemars(extend("format" = "date-time"))]
    pub time: String,
    /// The event's sequence number (0 for a test event).
    pub sequence: u64,
    /// `test`: a test delivery (`POST …/test`).
    #[schemars(extend("enum" = ["delivered", "retry", "deadLetter", "test"]))]
    pub outcome: Cow<'static, str>,
    /// What the sink answered, when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    /// How long the request took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// What went wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the sink said when it refused (the newest such attempt of the subscription
    /// only): a few of its headers and the start of its body, with the secrets the hub sent
    /// it blanked out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<SinkAnswerOut>,
}

/// The start of a sink's refusing answer.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SinkAnswer")]
pub struct SinkAnswerOut {
    /// `Content-Type`, `Retry-After`, `WWW-Authenticate` and `Location`, when it sent them.
    pub headers: BTreeMap<String, String>,
    /// The first 1,024 bytes of its body as text (control characters escaped).
    #[schemars(length(max = 8192))]
    pub body: String,
    /// Whether its body went on past that.
    pub body_truncated: bool,
}

impl From<&LastDelivery> for AttemptOut {
    fn from(last: &LastDelivery) -> Self {
        AttemptOut {
            time: utc_timestamp(last.at),
            sequence: last.seq,
            outcome: last.outcome.into(),
            status_code: last.status,
            duration_ms: last.duration_ms,
            error: last.error.clone(),
            answer: last.answer.as_ref().map(|answer| SinkAnswerOut {
                headers: answer.headers.iter().cloned().collect(),
                body: answer.body.clone(),
                body_truncated: answer.truncated,
            }),
        }
    }
}

/// How often the subscription's filters ran out of their evaluation budget.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "FilterBudget")]
pub struct FilterBudgetOut {
    /// How many evaluations ran out of budget.
    pub(crate) exceeded: u64,
    #[schemars(extend("format" = "date-time"))]
    pub(crate) last_exceeded_time: String,
    /// Which budget the last one ran out of: `subscription` (its own,
    /// filters.max_evaluation_cost), `principal` (its owner's subscriptions together on one
    /// event, filters.max_evaluation_cost_per_principal) or `event` (its owner's share of
    /// what all candidates of one event may cost, filters.max_evaluation_cost_per_event).
    #[schemars(extend("enum" = ["subscription", "principal", "event"]))]
    pub(crate) last_exceeded_budget: String,
}

impl FilterBudgetOut {
    /// The name of budget `exceeded`, as `lastExceededBudget` gives it.
    pub(crate) fn budget_name(exceeded: knooppunt_filter::Exceeded) -> &'static str {
        match exceeded {
            knooppunt_filter::Exceeded::Subscription => "subscription",
            knooppunt_filter::Exceeded::Tenant => "principal",
            knooppunt_filter::Exceeded::Event => "event",
        }
    }
}

/// A subscription as the API shows it, with its last delivery; the service's read-only
/// members (suspension, filter budget, approvals) are added by the caller.
pub(crate) fn representation(
    subscription: &Subscription,
    last: Option<LastDelivery>,
) -> SubscriptionOut {
    let settings = &subscription.protocol_settings;
    let (mut validation_problem, mut validated_by, mut disabled_reason) = (None, None, None);
    match &subscription.status {
        Status::Pending { problem } => validation_problem = problem.clone(),
        Status::Active(consent) => validated_by = consent.by.map(|by| by.as_str().into()),
        Status::Disabled(why) => disabled_reason = Some(why.reason().to_owned()),
    }
    SubscriptionOut {
        id: subscription.id.clone(),
        owner: subscription.owner.clone(),
        label: subscription.label.clone(),
        sink: knooppunt_delivery::redact_sink(&subscription.sink),
        protocol: subscription.protocol().as_str().into(),
        source: subscription.source.clone(),
        types: subscription.types().map(<[String]>::to_vec),
        filters: subscription.filters.clone(),
        protocol_settings: (!subscription.is_pull()).then(|| match settings {
            ProtocolSettings::Http(http) => ProtocolSettingsOut::Http {
                headers: http
                    .headers
                    .keys()
                    .map(|name| (name.clone(), knooppunt_delivery::REDACTED.into()))
                    .collect(),
                method: http.method.as_deref().unwrap_or("POST").to_owned(),
            },
            ProtocolSettings::Mqtt(mqtt) => ProtocolSettingsOut::Mqtt {
                topicname: mqtt.topic.clone(),
                qos: mqtt.qos,
                retain: mqtt.retain,
                expiry: mqtt.expiry,
                userproperties: mqtt.user_properties.clone(),
            },
            ProtocolSettings::Nats(nats) => ProtocolSettingsOut::Nats {
                subject: nats.subject.clone(),
                jetstream: nats.jetstream,
            },
            ProtocolSettings::Amqp(amqp) => ProtocolSettingsOut::Amqp {
                address: amqp.address.clone(),
                link_name: amqp.link_name.clone(),
                sendersettlementmode: if amqp.settled { "settled" } else { "unsettled" }.into(),
                link_properties: amqp.link_properties.clone(),
            },
        }),
        client_certificate: subscription.client_certificate.as_ref().map(|identity| {
            ClientCertificateOut {
                certificate: identity.certificate.clone(),
                privatekey: knooppunt_delivery::REDACTED.into(),
            }
        }),
        config: subscription.config.values().clone(),
        state: subscription.state().as_str().into(),
        validation_problem,
        validated_by,
        disabled_reason,
        suspended_reason: None,
        last_delivery: last.as_ref().map(AttemptOut::from),
        backlog: None,
        filter_budget: None,
        approvals: Vec::new(),
        signing_secret: None,
        signing_overlap_until: subscription
            .signing
            .as_ref()
            .and_then(|signing| signing.previous.as_ref())
            .map(|(_, until)| *until)
            .filter(|until| *until > knooppunt_store::now_ms())
            .map(knooppunt_event::timestamp::utc_timestamp),
    }
}
