//! The stored subscription and its delivery settings.

use std::collections::BTreeMap;
use std::time::Duration;

pub use crate::protocol::{
    AmqpSettings, HttpSettings, MqttSettings, MqttVersion, NatsSettings, Protocol, ProtocolSettings,
};

/// A subscription as the hub keeps it: validated by the API before it is stored, its
/// `config` read once into typed settings ([`SubscriptionConfig`]). Backends keep it in
/// record formats of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// Assigned by the hub; time-ordered, so listing in id order is listing in creation order.
    pub id: String,
    /// The principal that owns it.
    pub owner: String,
    /// A name people know it by (the console shows it before the id); the hub does
    /// nothing else with it.
    pub label: Option<String>,
    /// Where events are delivered.
    pub sink: Sink,
    pub source: Option<String>,
    /// The `types` as sent: `None` when left out (any type), `Some(vec![])` when the
    /// subscriber sent an empty list, which matches no event type (subscriptions spec 3.2.1).
    pub types: Option<Vec<String>>,
    /// The filters exactly as submitted (already validated).
    pub filters: Vec<serde_json::Value>,
    /// The delivery protocol and its settings (`protocol` and `protocolsettings`).
    pub protocol_settings: ProtocolSettings,
    /// Kept to authenticate deliveries; never returned by the API.
    pub sink_credential: Option<SinkCredential>,
    /// The client certificate the hub presents to the sink (mutual TLS); its private key is
    /// never returned by the API.
    pub client_certificate: Option<ClientCertificate>,
    /// The `config` map with every default applied, and its typed settings.
    pub config: SubscriptionConfig,
    /// Milliseconds since the Unix epoch.
    pub created_at: u64,
    pub updated_at: u64,
    /// Where it is in its life: pending consent, active, or disabled (and why). Written by
    /// the hub's subscription lifecycle only.
    pub status: Status,
    /// The secret in the validation callback URL offered to the current sink (the
    /// credential of its consent by callback); never returned by the API.
    pub validation_token: Option<String>,
    /// The secrets deliveries are signed with (Standard Webhooks `v1`); `None` for a
    /// subscription from before the hub signed. Shown once, when made; never returned.
    pub signing: Option<SigningSecrets>,
}

/// A subscription's signing secrets (`whsec_` and the base64 of the key): the current one,
/// and the one it replaced while the overlap after a rotation lasts (deliveries then carry
/// both signatures, so a sink can switch without losing one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningSecrets {
    pub current: String,
    /// The previous secret and until when (milliseconds since the Unix epoch) it signs too.
    pub previous: Option<(String, u64)>,
}

impl SigningSecrets {
    /// The secrets that sign a delivery at `now` (milliseconds since the Unix epoch).
    pub fn valid_at(&self, now: u64) -> impl Iterator<Item = &str> {
        std::iter::once(self.current.as_str()).chain(
            self.previous
                .as_ref()
                .filter(|(_, until)| now < *until)
                .map(|(secret, _)| secret.as_str()),
        )
    }
}

impl Subscription {
    /// The delivery protocol.
    pub fn protocol(&self) -> Protocol {
        self.protocol_settings.protocol()
    }

    /// The state without its details.
    pub fn state(&self) -> SubscriptionState {
        self.status.state()
    }
}

/// A subscription's `config`: every key of [`CONFIG_KEYS`] with its value as text (as the
/// API shows it), and the typed settings read from them once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionConfig {
    values: BTreeMap<String, String>,
    settings: DeliveryConfig,
    /// Why a stored map could not be read (see [`SubscriptionConfig::stored`]).
    unreadable: Option<Vec<ConfigError>>,
}

impl Default for SubscriptionConfig {
    /// The defaults of [`CONFIG_KEYS`].
    fn default() -> Self {
        SubscriptionConfig::parse(&BTreeMap::new(), &ConfigDefaults::default())
            .expect("the defaults are valid")
    }
}

impl SubscriptionConfig {
    /// Reads a submitted `config` map, reporting every bad key; the keys it leaves out get
    /// `defaults`.
    pub fn parse(
        map: &BTreeMap<String, String>,
        defaults: &ConfigDefaults,
    ) -> Result<SubscriptionConfig, Vec<ConfigError>> {
        let (settings, values) = DeliveryConfig::try_from_map_with(map, defaults)?;
        Ok(SubscriptionConfig {
            values,
            settings,
            unreadable: None,
        })
    }

    /// Reads a map a backend kept. One this version cannot read (written by another
    /// version, or edited) is kept as it is, with the standard defaults as settings and the
    /// problems in [`SubscriptionConfig::unreadable`]: the hub disables such a subscription
    /// when it loads it, saying why, so the defaults are never used for deliveries.
    pub fn stored(map: BTreeMap<String, String>) -> SubscriptionConfig {
        match DeliveryConfig::try_from_map(&map) {
            Ok((settings, values)) => SubscriptionConfig {
                values,
                settings,
                unreadable: None,
            },
            Err(errors) => SubscriptionConfig {
                values: map,
                settings: SubscriptionConfig::default().settings,
                unreadable: Some(errors),
            },
        }
    }

    /// Every key with its value, as text.
    pub fn values(&self) -> &BTreeMap<String, String> {
        &self.values
    }

    /// The typed delivery settings.
    pub fn settings(&self) -> DeliveryConfig {
        self.settings
    }

    /// What this hub could not read in a stored map, if anything.
    pub fn unreadable(&self) -> Option<&[ConfigError]> {
        self.unreadable.as_deref()
    }
}

/// The URL a subscription's events go to: absolute, `http` or `https`, with a host, and no
/// whitespace or control characters. Checked once where it enters (the API's stricter
/// rules come first; a backend checks what it reads), so every holder can take it as such.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sink(String);

impl Sink {
    /// `text` as a sink, or why it is not one.
    pub fn parse(text: &str) -> Result<Sink, String> {
        let scheme_end = text
            .find("://")
            .ok_or_else(|| format!("`{text}` is not an absolute URL"))?;
        let scheme = &text[..scheme_end];
        if Protocol::of_scheme(scheme).is_none() {
            return Err(format!(
                "`{text}` is not an http(s), mqtt(s), nats, tls or amqp(s) URL (the schemes \
                 the hub delivers to)"
            ));
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("`{text}` has whitespace or control characters"));
        }
        let rest = &text[scheme_end + 3..];
        let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
        let host = authority.rsplit('@').next().unwrap_or_default();
        if host.is_empty() || host.starts_with(':') {
            return Err(format!("`{text}` has no host"));
        }
        Ok(Sink(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether its scheme is one of `protocol`'s.
    pub fn is_for(&self, protocol: Protocol) -> bool {
        let scheme = self.0[..self.0.find("://").unwrap_or_default()].to_ascii_lowercase();
        protocol.schemes().contains(&scheme.as_str())
    }

    /// The protocol its scheme names (MQTT 5 for `mqtt(s)://`, which MQTT 3.1.1 shares):
    /// what a subscription that names no protocol delivers over.
    pub fn protocol(&self) -> Protocol {
        Protocol::ALL
            .into_iter()
            .find(|p| self.is_for(*p))
            .unwrap_or_default()
    }
}

impl std::ops::Deref for Sink {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for Sink {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Sink {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Sink {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

/// Where a subscription is in its life, with what belongs to that state and nothing else
/// (NL GOV webhook guideline: a sink must consent before it receives anything).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Waiting for the sink's consent: matching events are queued, not delivered.
    Pending {
        /// Why the last handshake did not make it active, once one was tried.
        problem: Option<String>,
    },
    /// The sink consented: deliveries flow.
    Active(Consent),
    /// Nothing is delivered or queued any more; what was pending became dead letters.
    Disabled(Disabled),
}

impl Default for Status {
    /// Active without a recorded consent: a subscription from before the hub asked sinks.
    fn default() -> Self {
        Status::Active(Consent::default())
    }
}

/// How a sink consented.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Consent {
    /// How it was established; `None` for subscriptions from before the hub asked sinks.
    pub by: Option<Validation>,
    /// The delivery rate the sink allowed in the handshake (`WebHook-Allowed-Rate`,
    /// requests per minute), if it set one.
    pub allowed_rate: Option<u32>,
}

/// Why a subscription is disabled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disabled {
    /// The sink answered 410 Gone. A replacement with another sink asks that one.
    Gone,
    /// This hub cannot use the stored filters or `config` (why): it stays disabled until it
    /// is replaced.
    Unusable(String),
}

impl Disabled {
    /// What the API says of it.
    pub fn reason(&self) -> &str {
        match self {
            Disabled::Gone => {
                "the sink answered 410 Gone: nothing is delivered any more and what was \
                 pending became dead letters; replace the subscription with another sink"
            }
            Disabled::Unusable(why) => why,
        }
    }
}

impl Status {
    /// The state without its details.
    pub fn state(&self) -> SubscriptionState {
        match self {
            Status::Pending { .. } => SubscriptionState::Pending,
            Status::Active(_) => SubscriptionState::Active,
            Status::Disabled(_) => SubscriptionState::Disabled,
        }
    }

    /// The columns a backend keeps a status in. The two directions are one mapping, so
    /// every backend reads what any wrote: a disabled subscription without a reason was
    /// disabled by a 410.
    pub fn columns(&self) -> StatusColumns {
        let mut columns = StatusColumns {
            state: self.state(),
            validated_by: None,
            allowed_rate: None,
            validation_problem: None,
            disabled_reason: None,
        };
        match self {
            Status::Pending { problem } => columns.validation_problem.clone_from(problem),
            Status::Active(consent) => {
                columns.validated_by = consent.by;
                columns.allowed_rate = consent.allowed_rate;
            }
            Status::Disabled(Disabled::Gone) => {}
            Status::Disabled(Disabled::Unusable(why)) => {
                columns.disabled_reason = Some(why.clone())
            }
        }
        columns
    }

    /// The status kept in `columns` (what does not belong to its state is ignored).
    pub fn from_columns(columns: StatusColumns) -> Status {
        match columns.state {
            SubscriptionState::Pending => Status::Pending {
                problem: columns.validation_problem,
            },
            SubscriptionState::Active => Status::Active(Consent {
                by: columns.validated_by,
                allowed_rate: columns.allowed_rate,
            }),
            SubscriptionState::Disabled => Status::Disabled(match columns.disabled_reason {
                None => Disabled::Gone,
                Some(why) => Disabled::Unusable(why),
            }),
        }
    }
}

/// A [`Status`] as loose columns, for backends that keep it so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusColumns {
    pub state: SubscriptionState,
    pub validated_by: Option<Validation>,
    pub allowed_rate: Option<u32>,
    pub validation_problem: Option<String>,
    pub disabled_reason: Option<String>,
}

/// A subscription's state without its details: whether its sink receives deliveries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SubscriptionState {
    /// The sink consented: deliveries flow.
    #[default]
    Active,
    /// Waiting for the sink's consent: matching events are queued, not delivered.
    Pending,
    /// Nothing is delivered or queued any more.
    Disabled,
}

impl SubscriptionState {
    pub fn as_str(self) -> &'static str {
        match self {
            SubscriptionState::Active => "active",
            SubscriptionState::Pending => "pending",
            SubscriptionState::Disabled => "disabled",
        }
    }
}

/// How a sink's consent was established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validation {
    /// The sink granted the `OPTIONS` handshake.
    Handshake,
    /// The sink called the validation callback URL.
    Callback,
    /// An administrator recorded consent agreed outside the hub (NL GOV webhook guideline).
    Agreement,
}

impl Validation {
    pub fn as_str(self) -> &'static str {
        match self {
            Validation::Handshake => "handshake",
            Validation::Callback => "callback",
            Validation::Agreement => "agreement",
        }
    }
}

/// How the hub authenticates itself at the sink (Subscriptions API section 3.2.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkCredential {
    /// Sent as HTTP Basic authentication.
    Plain { identifier: String, secret: String },
    /// Sent as `Authorization: <accesstokentype> <accesstoken>` (Bearer by default).
    AccessToken {
        accesstoken: String,
        accesstokentype: Option<String>,
        accesstokenexpiresutc: Option<String>,
    },
    /// OAuth 2.0 client credentials (RFC 6749 section 4.4): the hub gets an access token
    /// from `token_url` (authenticating with HTTP Basic), keeps it until it expires and
    /// sends it as `Authorization: Bearer`.
    ClientCredentials {
        token_url: String,
        client_id: String,
        client_secret: String,
        scope: Option<String>,
    },
}

/// A client certificate chain and its private key, both PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificate {
    pub certificate: String,
    pub private_key: String,
}

/// Whether deliveries carry the event in structured or binary content mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryMode {
    Structured,
    Binary,
    /// Structured mode in the CBOR event format (`application/cloudevents+cbor`).
    StructuredCbor,
    /// The event as a ZGW notificatie (`application/json`): the notificatie it carries, or
    /// one built from its attributes (VNG Notificaties API; an abonnement's callbacks).
    Notificatie,
    /// An abonnement that receives CloudEvents (Open Notificaties' `sendCloudevents`):
    /// structured mode (`application/cloudevents+json`), a notificatie as the CloudEvent Open
    /// Notificaties makes of it.
    ZgwCloudEvent,
}

/// Whether a subscription receives its events one at a time, in acceptance order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ordering {
    Ordered,
    Unordered,
}

/// How a subscription's events reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// The hub sends each event to the subscription's sink (a webhook).
    Push,
    /// The consumer fetches events from the hub (receive, then acknowledge, release or
    /// reject each under a lock); the subscription has no sink of its own.
    Pull,
}

/// The delivery settings of a subscription, read from its `config` map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryConfig {
    pub transfer: Transfer,
    /// How long a pull consumer holds a received event before it is handed out again.
    pub lock_duration: Duration,
    pub mode: DeliveryMode,
    pub ordering: Ordering,
    pub max_attempts: u32,
    pub ttl: Duration,
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    pub timeout: Duration,
}

/// One documented `config` key: its name, default and meaning.
#[derive(Debug, Clone, Copy)]
pub struct ConfigKey {
    pub name: &'static str,
    pub default: &'static str,
    pub description: &'static str,
    /// What it takes: the reader and the API's schema both go by this.
    pub values: ConfigValues,
}

/// The values a `config` key takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigValues {
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// A whole number from the first to the second.
    WholeNumber(u32, u32),
    /// An ISO 8601 duration ([`parse_iso8601_duration`]) longer than zero.
    Duration,
}

impl ConfigValues {
    /// What a duration looks like, as a regular expression (ECMA-262, as JSON Schema's
    /// `pattern`): weeks, days, then after `T` hours, minutes and seconds, each at most
    /// once and largest first, only seconds with a fraction. The length limits (zero, ten
    /// years, a key's own) are in the key's description.
    pub const DURATION_PATTERN: &'static str =
        r"^P(?!$)(\d+W)?(\d+D)?(T(?!$)(\d+H)?(\d+M)?(\d+([.,]\d+)?S)?)?$";
}

/// `a`, `b` or `c`, each in backticks.
fn or_list(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [one] => format!("`{one}`"),
        [rest @ .., last] => format!(
            "{} or `{last}`",
            rest.iter()
                .map(|w| format!("`{w}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Every key a subscription's `config` may hold, with its default. The API documentation is
/// generated from this table.
pub const CONFIG_KEYS: [ConfigKey; 9] = [
    ConfigKey {
        name: "delivery",
        default: "push",
        description: "`push`: the hub sends events to the `sink` (a webhook, after its consent). `pull`: \
                      the consumer receives events from the hub (`POST .../receive`) and acknowledges, \
                      releases or rejects each under a lock; leave `sink` out (the hub fills in its receive \
                      URL), no handshake. For consumers that can only call out.",
        values: ConfigValues::OneOf(&["push", "pull"]),
    },
    ConfigKey {
        name: "lockDuration",
        default: "PT60S",
        description: "Pull only: ISO 8601 duration (PT1S to PT10M) a received event stays locked to its \
                      consumer; unsettled by then, it is handed out again and the hand-over counts as an \
                      attempt. A consumer can renew its locks.",
        values: ConfigValues::Duration,
    },
    ConfigKey {
        name: "mode",
        default: "structured",
        description: "Content mode of deliveries: `structured` (the event as application/cloudevents+json, \
                      the publisher's JSON unchanged), `binary` (ce- headers and the data as the body; an event whose \
                      headers would pass 8 KiB goes structured instead), `cbor` \
                      (structured mode in the CBOR event format, application/cloudevents+cbor) or `notificatie` \
                      (the event as a ZGW notificatie, application/json: what a Notificaties API callback takes).",
        values: ConfigValues::OneOf(&[
            "structured",
            "binary",
            "cbor",
            "notificatie",
            "zgw-cloudevent",
        ]),
    },
    ConfigKey {
        name: "ordering",
        default: "ordered",
        description: "`ordered`: one delivery in flight, events in acceptance order; a failing event holds \
                      back later ones for this subscription only. `unordered`: several deliveries at once.",
        values: ConfigValues::OneOf(&["ordered", "unordered"]),
    },
    ConfigKey {
        name: "maxAttempts",
        default: "30",
        description: "How many delivery attempts an event gets (1 to 1000) before it becomes a dead letter.",
        values: ConfigValues::WholeNumber(1, 1000),
    },
    ConfigKey {
        name: "ttl",
        default: "PT24H",
        description: "ISO 8601 duration after acceptance when an undelivered event becomes a dead letter.",
        values: ConfigValues::Duration,
    },
    ConfigKey {
        name: "initialBackoff",
        default: "PT1S",
        description: "ISO 8601 duration: the first retry delay; later ones grow exponentially, with full jitter.",
        values: ConfigValues::Duration,
    },
    ConfigKey {
        name: "maxBackoff",
        default: "PT1H",
        description: "ISO 8601 duration: the longest retry delay (at least initialBackoff).",
        values: ConfigValues::Duration,
    },
    ConfigKey {
        name: "timeout",
        default: "PT10S",
        description: "ISO 8601 duration: how long one delivery attempt may take (at most PT5M).",
        values: ConfigValues::Duration,
    },
];

/// The value each `config` key gets when a subscription leaves it out: the defaults of
/// [`CONFIG_KEYS`], or the hub's own where its operator configured them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigDefaults {
    values: BTreeMap<String, String>,
}

impl Default for ConfigDefaults {
    fn default() -> Self {
        ConfigDefaults {
            values: CONFIG_KEYS
                .iter()
                .map(|key| (key.name.to_owned(), key.default.to_owned()))
                .collect(),
        }
    }
}

impl ConfigDefaults {
    /// The defaults of [`CONFIG_KEYS`] with `overrides` (key, value) applied; every key and
    /// value is checked as a subscription's would be.
    pub fn try_new<K: Into<String>>(
        overrides: impl IntoIterator<Item = (K, String)>,
    ) -> Result<ConfigDefaults, Vec<ConfigError>> {
        let overrides: BTreeMap<String, String> = overrides
            .into_iter()
            .map(|(key, value)| (key.into(), value))
            .collect();
        let (_, values) =
            DeliveryConfig::try_from_map_with(&overrides, &ConfigDefaults::default())?;
        Ok(ConfigDefaults { values })
    }

    /// The default of a key of [`CONFIG_KEYS`].
    pub fn get(&self, key: &str) -> &str {
        self.values.get(key).map_or("", String::as_str)
    }
}

/// A `config` problem, naming the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config.{key}: {message}")]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl Subscription {
    /// The `types` as the subscriber sent them: `None` when absent (any type), an empty
    /// list when it sent one (no type).
    pub fn types(&self) -> Option<&[String]> {
        self.types.as_deref()
    }

    /// The typed delivery settings.
    pub fn delivery_config(&self) -> DeliveryConfig {
        self.config.settings()
    }

    /// Whether the consumer fetches the events ([`Transfer::Pull`]) instead of the hub
    /// sending them to the sink.
    pub fn is_pull(&self) -> bool {
        self.config.settings().transfer == Transfer::Pull
    }
}

impl DeliveryConfig {
    /// Validates a submitted `config` map, reporting every bad key, and returns the map with
    /// every default of [`CONFIG_KEYS`] applied next to the typed settings.
    pub fn try_from_map(
        map: &BTreeMap<String, String>,
    ) -> Result<(DeliveryConfig, BTreeMap<String, String>), Vec<ConfigError>> {
        DeliveryConfig::try_from_map_with(map, &ConfigDefaults::default())
    }

    /// Like [`DeliveryConfig::try_from_map`], with these defaults for the keys left out.
    pub fn try_from_map_with(
        map: &BTreeMap<String, String>,
        defaults: &ConfigDefaults,
    ) -> Result<(DeliveryConfig, BTreeMap<String, String>), Vec<ConfigError>> {
        let mut errors = Vec::new();
        for key in map.keys() {
            if !CONFIG_KEYS.iter().any(|known| known.name == key) {
                let known: Vec<_> = CONFIG_KEYS.iter().map(|k| k.name).collect();
                errors.push(ConfigError {
                    key: key.clone(),
                    message: format!("unknown key; the keys are {}", known.join(", ")),
                });
            }
        }
        let mut effective = BTreeMap::new();
        for key in CONFIG_KEYS {
            let value = map
                .get(key.name)
                .map_or_else(|| defaults.get(key.name), String::as_str);
            effective.insert(key.name.to_owned(), value.to_owned());
        }
        let mut error = |key: &str, message: String| {
            errors.push(ConfigError {
                key: key.to_owned(),
                message,
            })
        };
        let get = |key: &str| effective[key].as_str();
        let values = |name: &str| {
            CONFIG_KEYS
                .iter()
                .find(|key| key.name == name)
                .map(|key| key.values)
        };
        // A word of the key's list ([`ConfigValues::OneOf`]), or "" after recording why not.
        let mut word = |name: &str| match values(name) {
            Some(ConfigValues::OneOf(words)) if words.contains(&get(name)) => get(name),
            Some(ConfigValues::OneOf(words)) => {
                error(name, format!("`{}` is not {}", get(name), or_list(words)));
                ""
            }
            _ => unreachable!("`{name}` takes words"),
        };
        let transfer = match word("delivery") {
            "pull" => Transfer::Pull,
            _ => Transfer::Push,
        };
        let mode = match word("mode") {
            "binary" => DeliveryMode::Binary,
            "cbor" => DeliveryMode::StructuredCbor,
            "notificatie" => DeliveryMode::Notificatie,
            "zgw-cloudevent" => DeliveryMode::ZgwCloudEvent,
            _ => DeliveryMode::Structured,
        };
        let ordering = match word("ordering") {
            "unordered" => Ordering::Unordered,
            _ => Ordering::Ordered,
        };
        let Some(ConfigValues::WholeNumber(fewest, most)) = values("maxAttempts") else {
            unreachable!("`maxAttempts` takes a whole number")
        };
        let max_attempts = match get("maxAttempts").parse::<u32>() {
            Ok(n) if (fewest..=most).contains(&n) => n,
            _ => {
                let value = get("maxAttempts");
                error(
                    "maxAttempts",
                    format!("`{value}` is not a whole number from {fewest} to {most}"),
                );
                1
            }
        };
        let mut duration = |key: &str| match parse_iso8601_duration(get(key)) {
            Ok(duration) if !duration.is_zero() => duration,
            Ok(_) => {
                error(key, "must be longer than zero".into());
                Duration::from_secs(1)
            }
            Err(why) => {
                error(key, why);
                Duration::from_secs(1)
            }
        };
        let ttl = duration("ttl");
        let initial_backoff = duration("initialBackoff");
        let max_backoff = duration("maxBackoff");
        let timeout = duration("timeout");
        let lock_duration = duration("lockDuration");
        if max_backoff < initial_backoff {
            error(
                "maxBackoff",
                format!(
                    "`{}` is shorter than initialBackoff `{}`",
                    get("maxBackoff"),
                    get("initialBackoff")
                ),
            );
        }
        if timeout > Duration::from_secs(300) {
            error(
                "timeout",
                format!("`{}` is longer than PT5M", get("timeout")),
            );
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(600)).contains(&lock_duration) {
            error(
                "lockDuration",
                format!("`{}` is not from PT1S to PT10M", get("lockDuration")),
            );
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let config = DeliveryConfig {
            transfer,
            lock_duration,
            mode,
            ordering,
            max_attempts,
            ttl,
            initial_backoff,
            max_backoff,
            timeout,
        };
        Ok((config, effective))
    }
}

/// Parses an ISO 8601 duration of weeks, days, hours, minutes and (fractional) seconds, such
/// as `PT10S`, `PT1H30M`, `P1DT12H` or `P2W`. Years and months are refused: their length
/// varies.
pub fn parse_iso8601_duration(text: &str) -> Result<Duration, String> {
    let invalid = |why: &str| {
        Err(format!(
            "`{text}` is not an ISO 8601 duration ({why}); write e.g. PT30S, PT5M, PT1H or P1D"
        ))
    };
    let Some(rest) = text.strip_prefix('P') else {
        return invalid("it must start with `P`");
    };
    if rest.is_empty() || rest == "T" || rest.ends_with('T') {
        return invalid("it has no amount");
    }
    let mut seconds = 0f64;
    let mut in_time = false;
    let mut number = String::new();
    let mut last_unit_rank = 0;
    for c in rest.chars() {
        match c {
            'T' if !in_time && number.is_empty() => in_time = true,
            '0'..='9' | '.' | ',' => number.push(if c == ',' { '.' } else { c }),
            unit => {
                let (factor, rank) = match (in_time, unit) {
                    (false, 'W') => (604_800.0, 1),
                    (false, 'D') => (86_400.0, 2),
                    (true, 'H') => (3_600.0, 3),
                    (true, 'M') => (60.0, 4),
                    (true, 'S') => (1.0, 5),
                    (false, 'Y' | 'M') => return invalid("years and months have no fixed length"),
                    _ => return invalid("it has an unknown unit or a misplaced `T`"),
                };
                if rank <= last_unit_rank {
                    return invalid("units must appear once, largest first");
                }
                last_unit_rank = rank;
                let Ok(amount) = number.parse::<f64>() else {
                    return invalid("a unit has no number before it");
                };
                if unit != 'S' && number.contains('.') {
                    return invalid("only seconds may have a fraction");
                }
                seconds += amount * factor;
                number.clear();
            }
        }
    }
    if !number.is_empty() {
        return invalid("a number has no unit after it");
    }
    if seconds > 10.0 * 365.0 * 86_400.0 {
        return invalid("it is longer than ten years");
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_iso8601_duration("PT10S"), Ok(Duration::from_secs(10)));
        assert_eq!(
            parse_iso8601_duration("PT1H30M"),
            Ok(Duration::from_secs(5400))
        );
        assert_eq!(
            parse_iso8601_duration("P1DT12H"),
            Ok(Duration::from_secs(129_600))
        );
        assert_eq!(
            parse_iso8601_duration("P2W"),
            Ok(Duration::from_secs(1_209_600))
        );
        assert_eq!(
            parse_iso8601_duration("PT0.5S"),
            Ok(Duration::from_millis(500))
        );
        assert_eq!(
            parse_iso8601_duration("PT0,25S"),
            Ok(Duration::from_millis(250))
        );
        for bad in [
            "10s", "P", "PT", "P1Y", "P1M", "PT1.5M", "PT5", "PT1S1M", "P1DT", "PTS", "PT1X",
        ] {
            assert!(parse_iso8601_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_hub_can_set_its_own_defaults_and_they_are_checked() {
        let defaults = ConfigDefaults::try_new([
            ("maxAttempts", "5".to_owned()),
            ("mode", "binary".to_owned()),
        ])
        .unwrap();
        let asked: BTreeMap<String, String> = [("mode".to_owned(), "structured".to_owned())].into();
        let (config, effective) = DeliveryConfig::try_from_map_with(&asked, &defaults).unwrap();
        assert_eq!(config.max_attempts, 5, "the hub's default");
        assert_eq!(
            config.mode,
            DeliveryMode::Structured,
            "the subscription's own value"
        );
        assert_eq!(effective["maxAttempts"], "5");
        assert_eq!(effective["ttl"], "PT24H", "the standard default");

        let errors = ConfigDefaults::try_new([
            ("maxAttempts", "0".to_owned()),
            ("initialBackoff", "PT2H".to_owned()),
            ("colour", "blue".to_owned()),
        ])
        .unwrap_err();
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["colour", "maxAttempts", "maxBackoff"]);
    }

    #[test]
    fn defaults_are_applied_and_every_bad_key_reported() {
        let (config, effective) = DeliveryConfig::try_from_map(&BTreeMap::new()).unwrap();
        assert_eq!(config.max_attempts, 30);
        assert_eq!(config.ttl, Duration::from_secs(86_400));
        assert_eq!(config.mode, DeliveryMode::Structured);
        assert_eq!(config.ordering, Ordering::Ordered);
        assert_eq!(effective.len(), CONFIG_KEYS.len());
        assert_eq!(effective["timeout"], "PT10S");

        let bad: BTreeMap<String, String> = [
            ("mode", "carrier-pigeon"),
            ("maxAttempts", "0"),
            ("ttl", "1 day"),
            ("initialBackoff", "PT1M"),
            ("maxBackoff", "PT10S"),
            ("timeout", "PT10M"),
            ("colour", "blue"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let errors = DeliveryConfig::try_from_map(&bad).unwrap_err();
        let mut keys: Vec<_> = errors.iter().map(|e| e.key.as_str()).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "colour",
                "maxAttempts",
                "maxBackoff",
                "mode",
                "timeout",
                "ttl"
            ]
        );
        assert!(
            errors
                .iter()
                .any(|e| e.to_string().starts_with("config.mode: `carrier-pigeon`"))
        );
    }
}

#[cfg(test)]
mod sink_tests {
    use super::Sink;

    #[test]
    fn a_sink_is_an_absolute_http_url_with_a_host() {
        for good in [
            "https://gemeente.example.nl/events",
            "http://127.0.0.1:9000/events?x=1",
            "HTTPS://user:pw@[::1]:8443",
        ] {
            assert_eq!(Sink::parse(good).unwrap().as_str(), good);
        }
        for bad in [
            "gemeente.example.nl/events",
            "ftp://example.nl/",
            "https:///path",
            "https://:443/",
            "https://example.nl/a b",
            "https://user@/x",
        ] {
            assert!(Sink::parse(bad).is_err(), "{bad}");
        }
    }
}
