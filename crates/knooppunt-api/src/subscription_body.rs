//! Reading a subscription request body (Subscriptions API section 3.2.1) and writing the
//! resource representation. The body is one type, [`SubscriptionRequest`], read leniently
//! (see [`crate::input`]) and then checked under the hub's [`Rules`]; every problem is
//! collected before failing.

use std::collections::BTreeMap;

use http::{HeaderName, HeaderValue};
use knooppunt_delivery::LastDelivery;
use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_event::validate::syntax;
use knooppunt_filter::{Criteria, Filter};
use knooppunt_store::{
    ClientCertificate, ConfigDefaults, ConfigValues, HttpSettings, MqttSettings, Protocol,
    ProtocolSettings, Sink, SinkCredential, Status, Subscription, SubscriptionConfig, Transfer,
};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::borrow::Cow;

use crate::input::{Field, Problems, body_schema, unknown_members};
use crate::problem::InvalidParam;

mod out;
mod protocol;

pub use out::*;
use protocol::*;

/// A validated subscription request.
#[derive(Debug, Clone)]
pub(crate) struct SubscriptionInput {
    /// The `id` the body names, if any (a replacement's must be the path's).
    pub(crate) id: Option<String>,
    /// `None` only for a pull subscription that left it out (the hub names its receive URL).
    pub(crate) sink: Option<Sink>,
    /// The name people know it by (a Knooppunt extension of the resource).
    pub(crate) label: Option<String>,
    pub(crate) source: Option<String>,
    /// `None` when absent (any type); an empty list matches no type.
    pub(crate) types: Option<Vec<String>>,
    pub(crate) filters: Vec<Value>,
    pub(crate) criteria: Criteria,
    pub(crate) protocol_settings: ProtocolSettings,
    pub(crate) sink_credential: Option<SinkCredential>,
    pub(crate) client_certificate: Option<ClientCertificate>,
    pub(crate) config: SubscriptionConfig,
}

/// The longest label, in characters.
pub(crate) const MAX_LABEL: usize = 200;

/// Values of string members keyed by name (`config`, `protocolsettings.headers`).
pub type Strings = BTreeMap<String, Field<String>>;

/// What a client sends to make or replace a subscription (Subscriptions API section
/// 3.2.1). The read-only members of an answer may be sent back; they are ignored.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[schemars(rename = "SubscriptionRequest")]
pub struct SubscriptionRequest {
    /// Ignored on create; on a replacement it must equal the path's.
    #[serde(default)]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub id: Field<String>,
    /// A name people know the subscription by, shown before its id (a Knooppunt extension
    /// of the resource, which the Subscriptions API's extensible representation leaves room
    /// for); the hub does nothing else with it. No control characters.
    #[serde(default)]
    #[schemars(
        length(min = 1, max = MAX_LABEL),
        example = &"Verhuizingen voor Burgerzaken"
    )]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub label: Field<String>,
    /// Required for a push subscription; a pull subscription (`config.delivery` `pull`)
    /// leaves it out. Absolute https URL events are delivered to (the hub checks its
    /// certificate). A plain http URL is accepted only for a sink on the hub's own machine,
    /// or on a hub configured to allow it for testing. Its host must not be (or resolve to)
    /// a loopback, private, link-local or other reserved address unless the hub's operator
    /// allows that network; this is checked again on every connection. Query values and a
    /// password are write-only: they read as `********`, and a replacement that sends them
    /// back so keeps the stored ones.
    #[serde(default)]
    #[schemars(
        extend("format" = "uri"),
        example = &"https://gemeente.example.nl/events"
    )]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub sink: Field<String>,
    /// The delivery protocol: `HTTP` (webhooks), `MQTT5` or `MQTT3` (MQTT 5 or 3.1.1
    /// brokers), `NATS` (NATS servers, core or JetStream) or `AMQP` (AMQP 1.0 brokers).
    #[schemars(extend("enum" = ["HTTP", "MQTT5", "MQTT3", "NATS", "AMQP"]))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub protocol: Field<String>,
    /// Only events with exactly this `source`.
    #[serde(default)]
    #[schemars(extend("format" = "uri-reference"))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub source: Field<String>,
    /// Only events whose `type` is one of these. Left out: any type; an empty list: no type
    /// (kept as sent).
    #[serde(default)]
    #[schemars(inner(length(min = 1)))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub types: Field<Vec<Field<String>>>,
    /// Filters that must all match.
    #[serde(default)]
    #[schemars(with = "Vec<FilterIn>")]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub filters: Field<Vec<Value>>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub protocolsettings: Field<ProtocolSettingsIn>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub sinkcredential: Field<SinkCredentialIn>,
    #[serde(default)]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub clientcertificate: Field<ClientCertificateIn>,
    #[serde(default)]
    #[schemars(schema_with = "config_reference")]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub config: Field<Strings>,
}

/// A push subscription's delivery settings as a client sends them: `headers` and `method`
/// for `HTTP` (Subscriptions API 3.2.2.1); `topicname`, `qos`, `retain`, `expiry` and
/// `userproperties` for `MQTT5` and `MQTT3` (`MQTTSettings`); `subject` and `jetstream` for
/// `NATS` (`NATSSettings`); `address`, `linkName`, `sendersettlementmode` and
/// `linkProperties` for `AMQP` (`AMQPSettings`). A member of another protocol is refused.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(expecting = "an object with the protocol's settings")]
#[schemars(rename = "ProtocolSettings", extend("additionalProperties" = false))]
pub struct ProtocolSettingsIn {
    /// HTTP: headers added to every delivery. Their values are write-only: they read as
    /// `********`, and a replacement that sends `********` back keeps the stored value.
    #[serde(default)]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub headers: Field<Strings>,
    /// HTTP: the request method.
    #[serde(default)]
    #[schemars(extend("enum" = ["POST", "PUT", "PATCH"], "default" = "POST"))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub method: Field<String>,
    /// MQTT, required: the topic each event is published to (no wildcards).
    #[serde(default)]
    #[schemars(length(min = 1, max = 1024))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub topicname: Field<String>,
    /// MQTT: 1 (at least once, acknowledged by the broker; the default), 2 (exactly once)
    /// or 0 (at most once: the hub cannot know whether the broker took it).
    #[serde(default)]
    #[schemars(range(min = 0, max = 2), extend("default" = 1))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub qos: Field<i64>,
    /// MQTT: whether the broker keeps the last message of the topic for new subscribers.
    #[serde(default)]
    #[schemars(extend("default" = false))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub retain: Field<bool>,
    /// MQTT: the message expiry interval, in seconds.
    #[serde(default)]
    #[schemars(range(min = 1, max = 4294967295_i64))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub expiry: Field<i64>,
    /// MQTT: user properties added to every message, after the event's own attributes.
    #[serde(default)]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub userproperties: Field<Strings>,
    /// NATS, required: the subject each event is published to (no wildcards).
    #[serde(default)]
    #[schemars(length(min = 1, max = 1024))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub subject: Field<String>,
    /// NATS: whether each message waits for a JetStream stream's acknowledgement (at least
    /// once; a stream must take the subject). Without it, core NATS: at most once (the
    /// server took it; a subscriber not connected then never gets it).
    #[serde(default)]
    #[schemars(extend("default" = false))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub jetstream: Field<bool>,
    /// AMQP: the link's target address (RabbitMQ: `/amq/queue/<queue>`,
    /// `/exchange/<exchange>/<routing key>`); when absent, the sink URL's path.
    #[serde(default)]
    #[schemars(length(min = 1, max = 1024))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub address: Field<String>,
    /// AMQP: the sending link's name; a random one when absent.
    #[serde(default, rename = "linkName")]
    #[schemars(length(min = 1, max = 256))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub link_name: Field<String>,
    /// AMQP: `unsettled` (the default: at least once, each message settled by the broker
    /// with `accepted`) or `settled` (at most once).
    #[serde(default)]
    #[schemars(extend("enum" = ["settled", "unsettled"], "default" = "unsettled"))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub sendersettlementmode: Field<String>,
    /// AMQP: copied into the sending link's properties.
    #[serde(default, rename = "linkProperties")]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub link_properties: Field<Strings>,
}

/// How the hub authenticates at the sink (Subscriptions API 3.2.3, and CLIENTCREDENTIALS).
/// Write-only: never returned. ACCESSTOKEN is sent as `Authorization: Bearer
/// <accesstoken>` until `accesstokenexpiresutc`; after it, nothing is sent and the events
/// become dead letters saying so. PLAIN is sent as HTTP Basic. REFRESHTOKEN is not
/// supported.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "credentialtype")]
#[schemars(rename = "SinkCredential")]
pub enum SinkCredentialIn {
    #[serde(rename = "ACCESSTOKEN")]
    #[schemars(title = "ACCESSTOKEN", extend("additionalProperties" = false, "writeOnly" = true))]
    AccessToken {
        #[schemars(length(min = 1))]
        #[serde(skip_serializing_if = "Field::is_absent")]
        accesstoken: Field<String>,
        /// `bearer` (any case): the token is sent as a bearer token (RFC 6750).
        #[schemars(regex(pattern = "^[Bb][Ee][Aa][Rr][Ee][Rr]$"))]
        #[serde(skip_serializing_if = "Field::is_absent")]
        accesstokentype: Field<String>,
        /// When the token expires; must be in the future.
        #[schemars(extend("format" = "date-time"))]
        #[serde(skip_serializing_if = "Field::is_absent")]
        accesstokenexpiresutc: Field<String>,
    },
    /// OAuth 2.0 client credentials (RFC 6749 section 4.4): the hub fetches an access token
    /// from `tokenurl` (HTTP Basic with the id and secret, presenting the subscription's
    /// client certificate if it has one), keeps it until shortly before it expires, fetches
    /// a new one when the sink answers 401, and sends it as `Authorization: Bearer`.
    /// `tokenurl` follows the rules of `sink` (https; the same address checks).
    #[serde(rename = "CLIENTCREDENTIALS")]
    #[schemars(
        title = "CLIENTCREDENTIALS",
        extend("additionalProperties" = false, "writeOnly" = true)
    )]
    ClientCredentials {
        #[schemars(extend("format" = "uri"))]
        #[serde(skip_serializing_if = "Field::is_absent")]
        tokenurl: Field<String>,
        #[schemars(length(min = 1))]
        #[serde(skip_serializing_if = "Field::is_absent")]
        clientid: Field<String>,
        #[schemars(length(min = 1))]
        #[serde(skip_serializing_if = "Field::is_absent")]
        clientsecret: Field<String>,
        /// Space-separated scopes to ask for.
        #[serde(default)]
        #[schemars(length(min = 1))]
        #[serde(skip_serializing_if = "Field::is_absent")]
        scope: Field<String>,
    },
    #[serde(rename = "PLAIN")]
    #[schemars(title = "PLAIN", extend("additionalProperties" = false, "writeOnly" = true))]
    Plain {
        #[schemars(length(min = 1))]
        #[serde(skip_serializing_if = "Field::is_absent")]
        identifier: Field<String>,
        #[schemars(length(min = 1))]
        #[serde(skip_serializing_if = "Field::is_absent")]
        secret: Field<String>,
    },
    /// Refresh tokens are not traded for access tokens here.
    #[serde(rename = "REFRESHTOKEN")]
    #[schemars(skip)]
    RefreshToken {},
    /// Any other credential type.
    #[serde(other)]
    #[schemars(skip)]
    Unknown,
}

/// The client certificate the hub presents to the sink (mutual TLS, e.g. PKIoverheid), in
/// the handshake, the deliveries and the token requests of CLIENTCREDENTIALS. Both PEM.
/// `privatekey` is write-only: it reads as `********`, and a replacement that sends
/// `********` back with the same certificate keeps it.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(expecting = "an object with `certificate` and `privatekey` (PEM)")]
#[schemars(rename = "ClientCertificate", extend("additionalProperties" = false))]
pub struct ClientCertificateIn {
    /// The certificate, then any intermediates (PEM).
    #[schemars(length(min = 1, max = 65536))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub certificate: Field<String>,
    /// Its private key (PEM, PKCS#8, PKCS#1 or SEC1).
    #[schemars(length(max = 65536))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub privatekey: Field<String>,
}

/// One filter expression of the CloudEvents Subscriptions API (section 3.2.4): an object
/// with exactly one member naming its dialect. `exact`, `prefix` and `suffix` map attribute
/// names to string values; `all` and `any` hold arrays of filters; `not` holds one filter;
/// `sql` holds a CESQL 1.0 expression. The filter crate reads it (within the hub's limits of
/// size and depth); this type describes it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(rename = "Filter", example = &serde_json::json!({"prefix": {"type": "nl.brp."}}))]
pub enum FilterIn {
    Exact(BTreeMap<String, String>),
    Prefix(BTreeMap<String, String>),
    Suffix(BTreeMap<String, String>),
    All(Vec<FilterIn>),
    Any(Vec<FilterIn>),
    Not(Box<FilterIn>),
    Sql(String),
}

/// What a hub accepts in a subscription beyond the Subscriptions API itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules<'a> {
    /// The `config` values for the keys a subscription leaves out.
    pub(crate) defaults: &'a ConfigDefaults,
    /// Whether `http://` sinks off this machine are allowed (HTTPS is required otherwise).
    pub(crate) allow_http_sinks: bool,
    /// How large and deep the filters may be.
    pub(crate) filter_limits: &'a knooppunt_filter::Limits,
}

/// Reads a subscription from a request body under the hub's `rules`; every problem is
/// collected.
pub(crate) fn read(body: &Value, rules: Rules<'_>) -> Result<SubscriptionInput, Vec<InvalidParam>> {
    let Some(object) = body.as_object() else {
        return Err(vec![InvalidParam::new(
            "",
            "the body must be a JSON object",
        )]);
    };
    let schema = body_schema::<SubscriptionRequest, SubscriptionOut>();
    let mut problems = Problems::default();
    unknown_members(&schema, object, "subscription", &mut problems);
    match SubscriptionRequest::deserialize(body) {
        Ok(request) => match request.check(rules, &mut problems) {
            Some(input) if problems.is_empty() => Ok(input),
            _ => Err(problems.into_vec()),
        },
        Err(error) => {
            problems.add("", error.to_string());
            Err(problems.into_vec())
        }
    }
}

impl SubscriptionRequest {
    /// The subscription this request asks for under the hub's `rules`, or `None` with every
    /// problem recorded.
    pub(crate) fn check(
        self,
        rules: Rules<'_>,
        problems: &mut Problems,
    ) -> Option<SubscriptionInput> {
        let id = self.id.optional("id", "a string", problems);
        // Read from the key itself too, so that a pull subscription with another bad key
        // is still read as one.
        let asks_pull = self
            .config
            .given()
            .and_then(|config| config.get(DELIVERY))
            .is_some_and(|delivery| delivery.given().is_some_and(|d| d == "pull"));
        let config = check_config(self.config, rules.defaults, problems);
        let pull = match &config {
            Some(config) => config.settings().transfer == Transfer::Pull,
            None => asks_pull,
        };
        let sink = if pull {
            if self.sinkcredential.is_sent() || self.clientcertificate.is_sent() {
                for (member, sent) in [
                    ("sinkcredential", self.sinkcredential.is_sent()),
                    ("clientcertificate", self.clientcertificate.is_sent()),
                ] {
                    if sent {
                        problems.add(
                            member,
                            "a pull subscription (config.delivery `pull`) has no sink to push \
                             to: leave it out",
                        );
                    }
                }
            }
            check_pull_sink(self.sink, problems)
        } else {
            check_sink_member(self.sink, rules, problems).map(Some)
        };
        let protocol = check_protocol(self.protocol, problems);
        let source = check_source(self.source, problems);
        let label = check_label(self.label, problems);
        let types = check_types(self.types, problems);
        let (filters, parsed) = check_filters(self.filters, rules, problems);
        let protocol_settings = protocol.and_then(|protocol| {
            check_protocol_settings(protocol, self.protocolsettings, problems)
        });
        if let (Some(protocol), Some(Some(sink))) = (protocol, &sink)
            && !sink.is_for(protocol)
        {
            problems.add(
                "sink",
                format!(
                    "is not a URL of protocol `{}` (a {} URL)",
                    protocol.as_str(),
                    protocol.schemes().join(" or ")
                ),
            );
        }
        if let (Some(Some(sink)), Some(ProtocolSettings::Amqp(settings))) =
            (&sink, &protocol_settings)
            && sink.is_for(Protocol::Amqp)
            && knooppunt_delivery::amqp_target_address(sink.as_str(), settings).is_none()
        {
            problems.add(
                "protocolsettings.address",
                "is required when the sink URL has no path naming the target: give the link's \
                 target address here or in the sink (amqps://host/amq/queue/<queue>)",
            );
        }
        if pull
            && protocol_settings
                .as_ref()
                .is_some_and(|s| *s != ProtocolSettings::default())
        {
            problems.add(
                "protocolsettings",
                "a pull subscription (config.delivery `pull`) sends no requests: leave out its \
                 headers and method",
            );
        }
        let sink_credential = if pull {
            None
        } else {
            check_sink_credential(self.sinkcredential, problems)
        };
        if let Some(SinkCredential::ClientCredentials { token_url, .. }) = &sink_credential
            && let Err(why) = knooppunt_delivery::check_http_url(token_url, rules.allow_http_sinks)
        {
            problems.add("sinkcredential.tokenurl", why);
        }
        let client_certificate = if pull {
            None
        } else {
            check_client_certificate(self.clientcertificate, problems)
        };
        if let Some(protocol) = protocol.filter(|p| *p != Protocol::Http) {
            check_broker_subscription(
                protocol,
                config.as_ref(),
                sink_credential.as_ref(),
                client_certificate.is_some(),
                problems,
            );
        }
        let (Some(sink), Some(protocol_settings), Some(config)) = (sink, protocol_settings, config)
        else {
            return None;
        };
        Some(SubscriptionInput {
            id,
            sink,
            criteria: Criteria {
                source: source.clone(),
                types: types.clone(),
                filters: parsed,
            },
            source,
            label,
            types,
            filters,
            protocol_settings,
            sink_credential,
            client_certificate,
            config,
        })
    }
}

const A_STRING: &str = "a string";

/// The `config` key that chooses push or pull delivery.
const DELIVERY: &str = "delivery";

/// `label`: text of 1 to [`MAX_LABEL`] characters without control characters, if given.
fn check_label(label: Field<String>, problems: &mut Problems) -> Option<String> {
    let label = label.optional("label", A_STRING, problems)?;
    let chars = label.chars().count();
    if label.trim().is_empty() || chars > MAX_LABEL {
        problems.add(
            "label",
            format!("must be text of 1 to {MAX_LABEL} characters"),
        );
        return None;
    }
    if label.chars().any(char::is_control) {
        problems.add(
            "label",
            "must not hold control characters (line breaks, tabs, …)",
        );
        return None;
    }
    Some(label)
}

/// `sink`: required, an http(s) URL the hub may deliver to.
fn check_sink_member(
    sink: Field<String>,
    rules: Rules<'_>,
    problems: &mut Problems,
) -> Option<Sink> {
    let sink = match sink {
        Field::Absent | Field::Null => {
            problems.add(
                "sink",
                "is required: the absolute http(s) URL to deliver to",
            );
            return None;
        }
        other => other.optional("sink", A_STRING, problems)?,
    };
    match knooppunt_delivery::check_sink_url(&sink, rules.allow_http_sinks)
        .and_then(|()| Sink::parse(&sink))
    {
        Ok(sink) => Some(sink),
        Err(why) => {
            problems.add("sink", why);
            None
        }
    }
}

/// A pull subscription's `sink`: the hub's receive URL, which the hub fills in; a client may
/// leave it out or send back what it read (checked against the subscription's own).
fn check_pull_sink(sink: Field<String>, problems: &mut Problems) -> Option<Option<Sink>> {
    match sink.optional("sink", A_STRING, problems) {
        None => Some(None),
        Some(sink) => match Sink::parse(&sink) {
            Ok(sink) => Some(Some(sink)),
            Err(why) => {
                problems.add("sink", why);
                None
            }
        },
    }
}

/// `source`: a non-empty URI-reference, if given.
fn check_source(source: Field<String>, problems: &mut Problems) -> Option<String> {
    let source = source.optional("source", A_STRING, problems)?;
    if source.is_empty() {
        problems.add("source", "must not be empty");
    } else if let Err(why) = syntax::uri_reference(&source) {
        problems.add("source", why);
    }
    Some(source)
}

/// `types`: absent, any type; present, one of these (subscriptions spec 3.2.1), so an empty
/// list matches no event; it is kept as it was sent.
fn check_types(types: Field<Vec<Field<String>>>, problems: &mut Problems) -> Option<Vec<String>> {
    let sent = types.optional("types", "an array of event types", problems)?;
    let mut types = Vec::with_capacity(sent.len());
    for (i, ty) in sent.into_iter().enumerate() {
        let name = format!("types[{i}]");
        match ty {
            Field::Given(ty) if ty.is_empty() => problems.add(name, "must not be empty"),
            Field::Given(ty) => types.push(ty),
            _ => problems.add(name, "must be a string"),
        }
    }
    Some(types)
}

/// `filters`: as sent, and as read within the hub's filter limits.
fn check_filters(
    filters: Field<Vec<Value>>,
    rules: Rules<'_>,
    problems: &mut Problems,
) -> (Vec<Value>, Vec<Filter>) {
    let Some(values) = filters.optional("filters", "an array of filters", problems) else {
        return (Vec::new(), Vec::new());
    };
    match Filter::list_from_json(&values, "filters", rules.filter_limits) {
        Ok(list) => (values, list),
        Err(errors) => {
            for error in errors {
                problems.add(error.path, error.message);
            }
            (Vec::new(), Vec::new())
        }
    }
}

/// String values keyed by name, each problem named `{name}.{key}`.
fn check_strings(
    strings: Field<Strings>,
    name: &str,
    problems: &mut Problems,
) -> BTreeMap<String, String> {
    let Some(strings) = strings.optional(name, "an object of string values", problems) else {
        return BTreeMap::new();
    };
    let mut map = BTreeMap::new();
    for (key, value) in strings {
        match value {
            Field::Given(text) => {
                map.insert(key, text);
            }
            _ => problems.add(format!("{name}.{key}"), "must be a string"),
        }
    }
    map
}

/// `config`: the delivery settings, the hub's defaults for the keys left out.
fn check_config(
    config: Field<Strings>,
    defaults: &ConfigDefaults,
    problems: &mut Problems,
) -> Option<SubscriptionConfig> {
    let config = check_strings(config, "config", problems);
    match SubscriptionConfig::parse(&config, defaults) {
        Ok(config) => Some(config),
        Err(errors) => {
            for error in errors {
                problems.add(format!("config.{}", error.key), error.message);
            }
            None
        }
    }
}

/// `clientcertificate`: the certificate (chain) and private key the hub presents to the
/// sink, both PEM. A `privatekey` of `********` stands for the stored key (on a
/// replacement).
fn check_client_certificate(
    certificate: Field<ClientCertificateIn>,
    problems: &mut Problems,
) -> Option<ClientCertificate> {
    let sent = certificate.optional(
        "clientcertificate",
        "an object with `certificate` and `privatekey` (PEM)",
        problems,
    )?;
    let pem = |field: Field<String>, name: &str, problems: &mut Problems| match field {
        Field::Given(text) if !text.is_empty() && text.len() <= 64 * 1024 => Some(text),
        _ => {
            problems.add(
                format!("clientcertificate.{name}"),
                "is required: PEM text of at most 64 KiB",
            );
            None
        }
    };
    let certificate = pem(sent.certificate, "certificate", problems);
    let private_key = pem(sent.privatekey, "privatekey", problems);
    let identity = ClientCertificate {
        certificate: certificate?,
        private_key: private_key?,
    };
    if identity.private_key != knooppunt_delivery::REDACTED
        && let Err(why) = knooppunt_delivery::check_client_certificate(&identity)
    {
        problems.add("clientcertificate", why);
        return None;
    }
    Some(identity)
}

/// `sinkcredential`: how the hub authenticates at the sink, by credential type.
fn check_sink_credential(
    credential: Field<SinkCredentialIn>,
    problems: &mut Problems,
) -> Option<SinkCredential> {
    const TYPES: &str = "`ACCESSTOKEN`, `CLIENTCREDENTIALS` or `PLAIN`";
    let credential = match credential {
        // An object that is no credential lacks a usable `credentialtype`: each type's
        // members are read leniently, so nothing else fails the read.
        Field::Wrong(Value::Object(_)) => {
            problems.add(
                "sinkcredential.credentialtype",
                format!("is required: {TYPES}"),
            );
            return None;
        }
        other => other.optional(
            "sinkcredential",
            "an object with a `credentialtype`",
            problems,
        )?,
    };
    let before = problems.len();
    let required = |field: Field<String>, name: &str, problems: &mut Problems| match field {
        Field::Given(value) if !value.is_empty() => Some(value),
        _ => {
            problems.add(
                format!("sinkcredential.{name}"),
                "is required and must be a non-empty string",
            );
            None
        }
    };
    let read = match credential {
        SinkCredentialIn::Plain { identifier, secret } => {
            let identifier = required(identifier, "identifier", problems);
            let secret = required(secret, "secret", problems);
            Some(SinkCredential::Plain {
                identifier: identifier?,
                secret: secret?,
            })
        }
        SinkCredentialIn::AccessToken {
            accesstoken,
            accesstokentype,
            accesstokenexpiresutc,
        } => {
            let accesstoken = required(accesstoken, "accesstoken", problems);
            let token_type = required(accesstokentype, "accesstokentype", problems);
            if let Some(token_type) = &token_type
                && !token_type.eq_ignore_ascii_case("bearer")
            {
                problems.add(
                    "sinkcredential.accesstokentype",
                    format!(
                        "`{token_type}`: the hub sends access tokens as `Authorization: Bearer` \
                         (RFC 6750), so the type must be `bearer`"
                    ),
                );
            }
            let expires = required(accesstokenexpiresutc, "accesstokenexpiresutc", problems);
            if let Some(expires) = &expires {
                match syntax::timestamp(expires) {
                    Err(why) => problems.add("sinkcredential.accesstokenexpiresutc", why),
                    Ok(())
                        if knooppunt_event::timestamp::epoch_millis(expires)
                            .is_some_and(|at| at <= knooppunt_store::now_ms()) =>
                    {
                        problems.add(
                            "sinkcredential.accesstokenexpiresutc",
                            format!("`{expires}` has passed: send a token that is still valid"),
                        )
                    }
                    Ok(()) => {}
                }
            }
            Some(SinkCredential::AccessToken {
                accesstoken: accesstoken?,
                accesstokentype: token_type,
                accesstokenexpiresutc: expires,
            })
        }
        SinkCredentialIn::ClientCredentials {
            tokenurl,
            clientid,
            clientsecret,
            scope,
        } => {
            let token_url = required(tokenurl, "tokenurl", problems);
            let client_id = required(clientid, "clientid", problems);
            let client_secret = required(clientsecret, "clientsecret", problems);
            let scope = match scope {
                Field::Absent | Field::Null => None,
                Field::Given(scope) if !scope.is_empty() => Some(scope),
                _ => {
                    problems.add(
                        "sinkcredential.scope",
                        "must be a non-empty string (space-separated scopes)",
                    );
                    None
                }
            };
            Some(SinkCredential::ClientCredentials {
                token_url: token_url?,
                client_id: client_id?,
                client_secret: client_secret?,
                scope,
            })
        }
        SinkCredentialIn::RefreshToken {} => {
            problems.add(
                "sinkcredential.credentialtype",
                "`REFRESHTOKEN` is not supported: this hub does not trade refresh tokens for \
                 access tokens; use `CLIENTCREDENTIALS` (the hub fetches and renews tokens \
                 itself), or send an `ACCESSTOKEN` (with `accesstokenexpiresutc`) and replace \
                 it before it expires, or use `PLAIN`",
            );
            None
        }
        SinkCredentialIn::Unknown => {
            problems.add(
                "sinkcredential.credentialtype",
                format!("unknown credential type; use {TYPES}"),
            );
            None
        }
    };
    if problems.len() > before {
        return None;
    }
    read
}

/// A reference to the `config` schema, which the document makes from the hub's defaults.
fn config_reference(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"$ref": "#/components/schemas/Config"})
}

/// A reference to the schema of `config` as the hub answers it.
fn stored_config_reference(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"$ref": "#/components/schemas/StoredConfig"})
}

/// `config` as a subscription holds it: every key with its value, as the hub answers it. A
/// subscription disabled because this hub cannot read its stored config (written by
/// another release) shows the values as stored, so they are not constrained here.
pub(crate) fn stored_config_schema(defaults: &ConfigDefaults) -> Value {
    let mut schema = config_schema(defaults);
    schema["description"] = "Delivery settings, every value a string, each default filled in \
        (see `Config` for what each key takes). A subscription disabled because this hub \
        cannot read its stored config shows it as stored; `disabledReason` names the key."
        .into();
    schema["additionalProperties"] = serde_json::json!({"type": "string"});
    if let Some(properties) = schema["properties"].as_object_mut() {
        for property in properties.values_mut() {
            if let Some(property) = property.as_object_mut() {
                property.remove("enum");
                property.remove("pattern");
            }
        }
    }
    schema
}

/// The `config` keys, with this hub's defaults.
pub(crate) fn config_schema(defaults: &ConfigDefaults) -> Value {
    let properties: Map<String, Value> = knooppunt_store::CONFIG_KEYS
        .iter()
        .map(|key| {
            let mut schema = serde_json::json!({"type": "string", "default": defaults.get(key.name), "description": key.description});
            match key.values {
                ConfigValues::OneOf(words) => schema["enum"] = serde_json::json!(words),
                ConfigValues::WholeNumber(..) => schema["pattern"] = "^[0-9]+$".into(),
                ConfigValues::Duration => {
                    schema["pattern"] = ConfigValues::DURATION_PATTERN.into();
                }
            }
            (key.name.to_owned(), schema)
        })
        .collect();
    serde_json::json!({
        "type": "object",
        "description": "Delivery settings, every value a string. Unknown keys and bad values are refused \
                        with 400 naming the key; on read every default is filled in.",
        "additionalProperties": false,
        "properties": properties
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema of one `config` key, as the document gives it.
    fn key_schema(name: &str) -> Value {
        config_schema(&ConfigDefaults::default())["properties"][name].clone()
    }

    #[test]
    fn the_config_schema_takes_what_the_hub_takes() {
        for key in knooppunt_store::CONFIG_KEYS {
            let schema = key_schema(key.name);
            let validator = jsonschema::validator_for(&schema).expect("a valid schema");
            let samples: Vec<String> = match key.values {
                ConfigValues::OneOf(words) => {
                    assert_eq!(schema["enum"], serde_json::json!(words));
                    words.iter().map(|w| (*w).to_owned()).collect()
                }
                ConfigValues::WholeNumber(fewest, most) => {
                    vec![fewest.to_string(), most.to_string()]
                }
                ConfigValues::Duration => vec![key.default.to_owned()],
            };
            for sample in samples {
                let map = BTreeMap::from([(key.name.to_owned(), sample.clone())]);
                assert!(
                    knooppunt_store::DeliveryConfig::try_from_map(&map).is_ok(),
                    "{}: {sample}",
                    key.name
                );
                assert!(validator.is_valid(&Value::String(sample)));
            }
            assert!(!validator.is_valid(&"nonsense".into()), "{}", key.name);
        }
    }

    #[test]
    fn the_duration_pattern_agrees_with_the_reader() {
        let validator = jsonschema::validator_for(&key_schema("ttl")).expect("a valid schema");
        for (text, valid) in [
            ("PT10S", true),
            ("PT1H30M", true),
            ("P1DT12H", true),
            ("P2W", true),
            ("P1W2D", true),
            ("PT0.5S", true),
            ("PT1,5S", true),
            ("P", false),
            ("PT", false),
            ("P1DT", false),
            ("PT1.5M", false),
            ("P1M", false),
            ("P1Y", false),
            ("PT1M1H", false),
            ("PT5", false),
            ("10S", false),
            ("pt10s", false),
        ] {
            assert_eq!(
                knooppunt_store::parse_iso8601_duration(text).is_ok(),
                valid,
                "the reader on {text}"
            );
            assert_eq!(
                validator.is_valid(&Value::String(text.to_owned())),
                valid,
                "the pattern on {text}"
            );
        }
    }
}
