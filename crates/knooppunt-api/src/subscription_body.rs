//! Reading a subscription request body (Subscriptions API section 3.2.1) and writing the
//! resource representation. Reading collects every problem before failing.

use std::collections::BTreeMap;

use http::{HeaderName, HeaderValue};
use knooppunt_delivery::LastDelivery;
use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_event::validate::syntax;
use knooppunt_filter::{Criteria, Filter};
use knooppunt_store::{
    ClientCertificate, ConfigDefaults, HttpSettings, Protocol, Sink, SinkCredential, Status,
    Subscription, SubscriptionConfig, Transfer,
};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use serde_json::{Map, Value};
use std::borrow::Cow;

use crate::problem::InvalidParam;

mod out;

pub use out::*;

/// A validated subscription request.
#[derive(Debug, Clone)]
pub(crate) struct SubscriptionInput {
    /// `None` only for a pull subscription that left it out (the hub names its receive URL).
    pub(crate) sink: Option<Sink>,
    pub(crate) protocol: Protocol,
    /// The name people know it by (a Knooppunt extension of the resource).
    pub(crate) label: Option<String>,
    pub(crate) source: Option<String>,
    /// `None` when absent (any type); an empty list matches no type.
    pub(crate) types: Option<Vec<String>>,
    pub(crate) filters: Vec<Value>,
    pub(crate) criteria: Criteria,
    pub(crate) protocol_settings: HttpSettings,
    pub(crate) sink_credential: Option<SinkCredential>,
    pub(crate) client_certificate: Option<ClientCertificate>,
    pub(crate) config: SubscriptionConfig,
}

pub(crate) const MEMBERS: [&str; 11] = [
    "id",
    "label",
    "sink",
    "protocol",
    "source",
    "types",
    "filters",
    "protocolsettings",
    "sinkcredential",
    "clientcertificate",
    "config",
];

/// Read-only members a client may send back from a GET; they are ignored.
const READ_ONLY: [&str; 8] = [
    "owner",
    "backlog",
    "signingsecret",
    "state",
    "validatedBy",
    "validationProblem",
    "disabledReason",
    "lastDelivery",
];

const OTHER_PROTOCOLS: [&str; 5] = ["MQTT3", "MQTT5", "AMQP", "KAFKA", "NATS"];

struct Problems(Vec<InvalidParam>);

impl Problems {
    fn add(&mut self, name: impl Into<String>, reason: impl Into<String>) {
        self.0.push(InvalidParam::new(name, reason));
    }
}

fn string<'a>(
    object: &'a Map<String, Value>,
    name: &str,
    problems: &mut Problems,
) -> Option<&'a str> {
    match object.get(name) {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text),
        Some(_) => {
            problems.add(name, "must be a string");
            None
        }
    }
}

fn string_map(value: &Value, name: &str, problems: &mut Problems) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    match value {
        Value::Null => {}
        Value::Object(object) => {
            for (key, value) in object {
                match value.as_str() {
                    Some(text) => {
                        map.insert(key.clone(), text.to_owned());
                    }
                    None => problems.add(format!("{name}.{key}"), "must be a string"),
                }
            }
        }
        _ => problems.add(name, "must be an object of string values"),
    }
    map
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
    let mut problems = Problems(Vec::new());
    let Some(object) = body.as_object() else {
        return Err(vec![InvalidParam::new(
            "",
            "the body must be a JSON object",
        )]);
    };
    check_members(object, &mut problems);
    let config = read_config(object, rules.defaults, &mut problems);
    // Read from the member itself, so that a pull subscription with another bad key is
    // still read as one.
    let pull = match &config {
        Some(config) => config.settings().transfer == Transfer::Pull,
        None => object
            .get("config")
            .and_then(|c| c.get("delivery"))
            .is_some_and(|d| d == "pull"),
    };
    let sink = if pull {
        read_pull_sink(object, &mut problems)
    } else {
        read_sink(object, &rules, &mut problems).map(Some)
    };
    let protocol = read_protocol(object, &mut problems);
    let source = read_source(object, &mut problems);
    let label = read_label(object, &mut problems);
    let types = read_types(object, &mut problems);
    let (filters, parsed) = read_filters(object, &rules, &mut problems);
    let protocol_settings = read_protocol_settings(object.get("protocolsettings"), &mut problems);
    if pull && protocol_settings != HttpSettings::default() {
        problems.add(
            "protocolsettings",
            "a pull subscription (config.delivery `pull`) sends no requests: leave out its headers and method",
        );
    }
    let sink_credential = read_sink_credential(object.get("sinkcredential"), &mut problems);
    if let Some(SinkCredential::ClientCredentials { token_url, .. }) = &sink_credential
        && let Err(why) = check_sink(token_url, rules.allow_http_sinks)
    {
        problems.add("sinkcredential.tokenurl", why);
    }
    let client_certificate =
        read_client_certificate(object.get("clientcertificate"), &mut problems);
    let (Some(sink), Some(protocol), Some(config), true) =
        (sink, protocol, config, problems.0.is_empty())
    else {
        return Err(problems.0);
    };
    Ok(SubscriptionInput {
        sink,
        protocol,
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

/// The longest label, in characters.
pub(crate) const MAX_LABEL: usize = 200;

/// `label`: text of 1 to [`MAX_LABEL`] characters without control characters, if given.
fn read_label(object: &Map<String, Value>, problems: &mut Problems) -> Option<String> {
    let label = string(object, "label", problems)?;
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
    Some(label.to_owned())
}

/// Every member is one of a subscription's (read-only ones are ignored), and none is `null`.
fn check_members(object: &Map<String, Value>, problems: &mut Problems) {
    for (name, value) in object {
        if value.is_null() && MEMBERS.contains(&name.as_str()) {
            problems.add(
                name.as_str(),
                "`null` is not a value of this member: leave the member out instead",
            );
            continue;
        }
        if !MEMBERS.contains(&name.as_str()) && !READ_ONLY.contains(&name.as_str()) {
            problems.add(
                name.as_str(),
                format!(
                    "unknown member; a subscription has {}",
                    MEMBERS[1..].join(", ")
                ),
            );
        }
    }
}

/// `sink`: required, an http(s) URL the hub may deliver to.
fn read_sink(
    object: &Map<String, Value>,
    rules: &Rules<'_>,
    problems: &mut Problems,
) -> Option<Sink> {
    let sink = string(object, "sink", problems);
    match sink {
        None if !object.contains_key("sink") || object["sink"].is_null() => problems.add(
            "sink",
            "is required: the absolute http(s) URL to deliver to",
        ),
        None => {}
        Some(sink) => {
            match check_sink(sink, rules.allow_http_sinks).and_then(|()| Sink::parse(sink)) {
                Ok(sink) => return Some(sink),
                Err(why) => problems.add("sink", why),
            }
        }
    }
    None
}

/// A pull subscription's `sink`: the hub's receive URL, which the hub fills in; a client may
/// leave it out or send back what it read (checked against the subscription's own). What
/// belongs to pushing (credentials, a client certificate, headers) has no use.
fn read_pull_sink(object: &Map<String, Value>, problems: &mut Problems) -> Option<Option<Sink>> {
    for member in ["sinkcredential", "clientcertificate"] {
        if object.contains_key(member) {
            problems.add(
                member,
                "a pull subscription (config.delivery `pull`) has no sink to push to: leave it out",
            );
        }
    }
    match string(object, "sink", problems) {
        None => Some(None),
        Some(sink) => match Sink::parse(sink) {
            Ok(sink) => Some(Some(sink)),
            Err(why) => {
                problems.add("sink", why);
                None
            }
        },
    }
}

/// `protocol`: required, `HTTP`.
fn read_protocol(object: &Map<String, Value>, problems: &mut Problems) -> Option<Protocol> {
    let protocol = string(object, "protocol", problems);
    match protocol {
        Some("HTTP") => return Some(Protocol::Http),
        Some(other) if other.eq_ignore_ascii_case("http") => problems.add(
            "protocol",
            format!("`{other}`: protocol names are case-sensitive; use `HTTP`"),
        ),
        Some(other) if OTHER_PROTOCOLS.contains(&other) => problems.add(
            "protocol",
            format!("this hub delivers over `HTTP` only, not `{other}`"),
        ),
        Some(other) => problems.add(
            "protocol",
            format!("unknown protocol `{other}`; use `HTTP`"),
        ),
        None if object.get("protocol").is_none_or(Value::is_null) => {
            problems.add("protocol", "is required; use `HTTP`")
        }
        None => {}
    }
    None
}

/// `source`: a non-empty URI-reference, if given.
fn read_source(object: &Map<String, Value>, problems: &mut Problems) -> Option<String> {
    let source = string(object, "source", problems).map(str::to_owned);
    if let Some(source) = &source {
        if source.is_empty() {
            problems.add("source", "must not be empty");
        } else if let Err(why) = syntax::uri_reference(source) {
            problems.add("source", why);
        }
    }
    source
}

/// `types`: absent, any type; present, one of these (subscriptions spec 3.2.1), so an empty
/// list matches no event; it is kept as it was sent.
fn read_types(object: &Map<String, Value>, problems: &mut Problems) -> Option<Vec<String>> {
    match object.get("types") {
        None | Some(Value::Null) => None,
        Some(Value::Array(values)) => {
            let mut types = Vec::new();
            for (i, value) in values.iter().enumerate() {
                match value.as_str() {
                    Some("") => problems.add(format!("types[{i}]"), "must not be empty"),
                    Some(ty) => types.push(ty.to_owned()),
                    None => problems.add(format!("types[{i}]"), "must be a string"),
                }
            }
            Some(types)
        }
        Some(_) => {
            problems.add("types", "must be an array of event types");
            None
        }
    }
}

/// `filters`: as sent, and as read within the hub's filter limits.
fn read_filters(
    object: &Map<String, Value>,
    rules: &Rules<'_>,
    problems: &mut Problems,
) -> (Vec<Value>, Vec<Filter>) {
    match object.get("filters") {
        None | Some(Value::Null) => {}
        Some(Value::Array(values)) => {
            match Filter::list_from_json(values, "filters", rules.filter_limits) {
                Ok(list) => return (values.clone(), list),
                Err(errors) => {
                    for error in errors {
                        problems.add(error.path, error.message);
                    }
                }
            }
        }
        Some(_) => problems.add("filters", "must be an array of filters"),
    }
    (Vec::new(), Vec::new())
}

/// `config`: the delivery settings, the hub's defaults for the keys left out.
fn read_config(
    object: &Map<String, Value>,
    defaults: &ConfigDefaults,
    problems: &mut Problems,
) -> Option<SubscriptionConfig> {
    let config = string_map(
        object.get("config").unwrap_or(&Value::Null),
        "config",
        problems,
    );
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

/// `clientcertificate`: the certificate (chain) and private key the hub presents to the sink,
/// both PEM. A `privatekey` of `********` stands for the stored key (on a replacement).
fn read_client_certificate(
    value: Option<&Value>,
    problems: &mut Problems,
) -> Option<ClientCertificate> {
    let object = match value {
        None | Some(Value::Null) => return None,
        Some(Value::Object(object)) => object,
        Some(_) => {
            problems.add(
                "clientcertificate",
                "must be an object with `certificate` and `privatekey` (PEM)",
            );
            return None;
        }
    };
    for name in object.keys() {
        if name != "certificate" && name != "privatekey" {
            problems.add(
                format!("clientcertificate.{name}"),
                "unknown member; a client certificate has certificate and privatekey",
            );
        }
    }
    let text = |name: &str, problems: &mut Problems| match object.get(name) {
        Some(Value::String(text)) if !text.is_empty() && text.len() <= 64 * 1024 => {
            Some(text.clone())
        }
        _ => {
            problems.add(
                format!("clientcertificate.{name}"),
                "is required: PEM text of at most 64 KiB",
            );
            None
        }
    };
    let identity = ClientCertificate {
        certificate: text("certificate", problems)?,
        private_key: text("privatekey", problems)?,
    };
    if identity.private_key != knooppunt_delivery::REDACTED
        && let Err(why) = knooppunt_delivery::check_client_certificate(&identity)
    {
        problems.add("clientcertificate", why);
        return None;
    }
    Some(identity)
}

/// An absolute `https` URL with a host (http-webhook.md §2: "HTTPS MUST be used for the
/// connection"); `http` only for a sink on this machine, or where the hub allows it.
pub fn check_sink(sink: &str, allow_http: bool) -> Result<(), String> {
    let uri: http::Uri = sink
        .parse()
        .map_err(|error| format!("`{sink}` is not a URL: {error}"))?;
    let host = uri.host().unwrap_or_default();
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => {
            return Err(format!("`{sink}` must be an absolute https:// URL"));
        }
    }
    if host.is_empty() {
        return Err(format!("`{sink}` has no host"));
    }
    if host.starts_with('[') && host.contains('%') {
        return Err(format!(
            "`{sink}` names an IPv6 zone (`%25...`): a sink is reached by a global address or a \
             host name, never through one of the hub's own interfaces"
        ));
    }
    if uri.scheme_str() == Some("http") && !allow_http && !is_loopback(host) {
        return Err(format!(
            "`{sink}` must use https://: webhooks are delivered over HTTPS (http-webhook.md, \
             NL GOV Webhook guideline); plain http:// is accepted only for a sink on the hub's \
             own machine, or on a hub configured with delivery.allow_http_sinks"
        ));
    }
    Ok(())
}

/// `localhost`, 127.0.0.0/8 or `::1`.
fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

fn read_protocol_settings(value: Option<&Value>, problems: &mut Problems) -> HttpSettings {
    let mut settings = HttpSettings::default();
    let object = match value {
        None | Some(Value::Null) => return settings,
        Some(Value::Object(object)) => object,
        Some(_) => {
            problems.add(
                "protocolsettings",
                "must be an object with `headers` and `method`",
            );
            return settings;
        }
    };
    for key in object.keys() {
        if key != "headers" && key != "method" {
            problems.add(
                format!("protocolsettings.{key}"),
                "unknown HTTP setting; use `headers` or `method`",
            );
        }
    }
    if let Some(headers) = object.get("headers") {
        settings.headers = string_map(headers, "protocolsettings.headers", problems);
        for (name, value) in &settings.headers {
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
    }
    match object.get("method") {
        None | Some(Value::Null) => {}
        Some(Value::String(method)) if matches!(method.as_str(), "POST" | "PUT" | "PATCH") => {
            settings.method = Some(method.clone());
        }
        Some(_) => problems.add(
            "protocolsettings.method",
            "must be `POST`, `PUT` or `PATCH`",
        ),
    }
    settings
}

fn is_reserved_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.starts_with("ce-")
        || name.starts_with("webhook-")
        || matches!(
            name.as_str(),
            "content-type" | "authorization" | "host" | "content-length" | "transfer-encoding"
        )
}

/// The members each credential type has (subscriptions spec 3.2.3).
const PLAIN_MEMBERS: [&str; 3] = ["credentialtype", "identifier", "secret"];
const CLIENTCREDENTIALS_MEMBERS: [&str; 5] = [
    "credentialtype",
    "tokenurl",
    "clientid",
    "clientsecret",
    "scope",
];
const ACCESSTOKEN_MEMBERS: [&str; 4] = [
    "credentialtype",
    "accesstoken",
    "accesstokenexpiresutc",
    "accesstokentype",
];

fn read_sink_credential(value: Option<&Value>, problems: &mut Problems) -> Option<SinkCredential> {
    let object = match value {
        None | Some(Value::Null) => return None,
        Some(Value::Object(object)) => object,
        Some(_) => {
            problems.add(
                "sinkcredential",
                "must be an object with a `credentialtype`",
            );
            return None;
        }
    };
    let before = problems.0.len();
    let credential = CredentialMembers { object };
    let read = match object.get("credentialtype").and_then(Value::as_str) {
        Some("PLAIN") => credential.plain(problems),
        Some("ACCESSTOKEN") => credential.access_token(problems),
        Some("CLIENTCREDENTIALS") => credential.client_credentials(problems),
        Some("REFRESHTOKEN") => {
            problems.add(
                "sinkcredential.credentialtype",
                "`REFRESHTOKEN` is not supported: this hub does not trade refresh tokens for \
                 access tokens; use `CLIENTCREDENTIALS` (the hub fetches and renews tokens \
                 itself), or send an `ACCESSTOKEN` (with `accesstokenexpiresutc`) and replace \
                 it before it expires, or use `PLAIN`",
            );
            None
        }
        Some(other) => {
            problems.add(
                "sinkcredential.credentialtype",
                format!(
                    "unknown credential type `{other}`; use `ACCESSTOKEN`, `CLIENTCREDENTIALS` \
                     or `PLAIN`"
                ),
            );
            None
        }
        None => {
            problems.add(
                "sinkcredential.credentialtype",
                "is required: `ACCESSTOKEN`, `CLIENTCREDENTIALS` or `PLAIN`",
            );
            None
        }
    };
    if problems.0.len() > before {
        return None;
    }
    read
}

/// The members of a `sinkcredential` object, read by credential type.
struct CredentialMembers<'a> {
    object: &'a Map<String, Value>,
}

impl CredentialMembers<'_> {
    fn required(&self, name: &str, problems: &mut Problems) -> Option<String> {
        match self.object.get(name) {
            Some(Value::String(value)) if !value.is_empty() => Some(value.to_owned()),
            _ => {
                problems.add(
                    format!("sinkcredential.{name}"),
                    "is required and must be a non-empty string",
                );
                None
            }
        }
    }

    /// Only these members (`credentialtype` among them).
    fn only(&self, allowed: &[&str], problems: &mut Problems) {
        for name in self.object.keys() {
            if !allowed.contains(&name.as_str()) {
                problems.add(
                    format!("sinkcredential.{name}"),
                    format!(
                        "unknown member for this credential type; it has {}",
                        allowed.join(", ")
                    ),
                );
            }
        }
    }

    fn plain(&self, problems: &mut Problems) -> Option<SinkCredential> {
        self.only(&PLAIN_MEMBERS, problems);
        let identifier = self.required("identifier", problems);
        let secret = self.required("secret", problems);
        Some(SinkCredential::Plain {
            identifier: identifier?,
            secret: secret?,
        })
    }

    fn access_token(&self, problems: &mut Problems) -> Option<SinkCredential> {
        self.only(&ACCESSTOKEN_MEMBERS, problems);
        let accesstoken = self.required("accesstoken", problems);
        let token_type = self.required("accesstokentype", problems);
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
        let expires = self.required("accesstokenexpiresutc", problems);
        if let Some(expires) = &expires {
            match syntax::timestamp(expires) {
                Err(why) => problems.add("sinkcredential.accesstokenexpiresutc", why),
                Ok(()) if expires_at_ms(expires).is_some_and(|at| at <= now_ms()) => problems.add(
                    "sinkcredential.accesstokenexpiresutc",
                    format!("`{expires}` has passed: send a token that is still valid"),
                ),
                Ok(()) => {}
            }
        }
        Some(SinkCredential::AccessToken {
            accesstoken: accesstoken?,
            accesstokentype: token_type,
            accesstokenexpiresutc: expires,
        })
    }

    fn client_credentials(&self, problems: &mut Problems) -> Option<SinkCredential> {
        self.only(&CLIENTCREDENTIALS_MEMBERS, problems);
        let token_url = self.required("tokenurl", problems);
        let client_id = self.required("clientid", problems);
        let client_secret = self.required("clientsecret", problems);
        let scope = match self.object.get("scope") {
            None | Some(Value::Null) => None,
            Some(Value::String(scope)) if !scope.is_empty() => Some(scope.clone()),
            Some(_) => {
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
}

/// Milliseconds since the Unix epoch of an RFC 3339 timestamp.
fn expires_at_ms(timestamp: &str) -> Option<u64> {
    knooppunt_event::timestamp::epoch_millis(timestamp)
}

use knooppunt_store::now_ms;

/// A reference to the `config` schema, which the document makes from the hub's defaults.
fn config_reference(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"$ref": "#/components/schemas/Config"})
}

/// The `config` keys, with this hub's defaults.
pub(crate) fn config_schema(defaults: &ConfigDefaults) -> Value {
    let properties: Map<String, Value> = knooppunt_store::CONFIG_KEYS
        .iter()
        .map(|key| {
            (
                key.name.to_owned(),
                serde_json::json!({"type": "string", "default": defaults.get(key.name), "description": key.description}),
            )
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

/// One filter expression (Subscriptions API section 3.2.4).
pub(crate) struct FilterSchema;

impl JsonSchema for FilterSchema {
    fn schema_name() -> Cow<'static, str> {
        "Filter".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": format!(
                "One filter expression of the CloudEvents Subscriptions API: an object with \
                 exactly one member naming its dialect ({}). `exact`, `prefix` and `suffix` map \
                 attribute names to string values; `all` and `any` hold arrays of filters; `not` \
                 holds one filter; `sql` holds a CESQL 1.0 expression.",
                knooppunt_filter::DIALECTS.join(", ")
            ),
            "minProperties": 1,
            "maxProperties": 1,
            "additionalProperties": true,
            "example": {"prefix": {"type": "nl.brp."}}
        })
    }
}

/// What a client sends to make or replace a subscription: the members [`read`] takes
/// ([`MEMBERS`]).
pub(crate) struct SubscriptionRequest;

impl JsonSchema for SubscriptionRequest {
    fn schema_name() -> Cow<'static, str> {
        "SubscriptionRequest".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "A subscription as a client sends it (Subscriptions API section 3.2.1). The read-only \
                            members of an answer may be sent back; they are ignored.",
            "required": ["protocol"],
            "properties": {
                "id": {"type": "string", "description": "Ignored on create; on a replacement it must equal the path's."},
                "sink": {"type": "string", "format": "uri", "example": "https://gemeente.example.nl/events",
                         "description": "Required for a push subscription; a pull subscription (`config.delivery` `pull`) \
                                         leaves it out. Absolute https URL events are delivered to (the hub checks its \
                                         certificate). A plain http URL is accepted only for a sink on the hub's own \
                                         machine, or on a hub configured to allow it for testing. Its host must not be (or \
                                         resolve to) a loopback, private, link-local or other reserved address unless the \
                                         hub's operator allows that network; this is checked again on every connection. \
                                         Query values and a password are write-only: they read as `********`, and a \
                                         replacement that sends them back so keeps the stored ones."},
                "protocol": {"type": "string", "enum": ["HTTP"], "description": "The delivery protocol; only HTTP is delivered."},
                "label": {"type": "string", "minLength": 1, "maxLength": MAX_LABEL,
                          "example": "Verhuizingen voor Burgerzaken",
                          "description": "A name people know the subscription by, shown before its id (a Knooppunt \
                                          extension of the resource, which the Subscriptions API's extensible \
                                          representation leaves room for); the hub does nothing else with it. No \
                                          control characters."},
                "source": {"type": "string", "format": "uri-reference", "description": "Only events with exactly this `source`."},
                "types": {"type": "array", "items": {"type": "string", "minLength": 1},
                          "description": "Only events whose `type` is one of these. Left out: any type; an empty list: no \
                                          type (kept as sent)."},
                "filters": {"type": "array", "items": generator.subschema_for::<FilterSchema>(),
                            "description": "Filters that must all match."},
                "protocolsettings": generator.subschema_for::<HttpSettingsIn>(),
                "sinkcredential": generator.subschema_for::<SinkCredentialIn>(),
                "clientcertificate": generator.subschema_for::<ClientCertificateIn>(),
                "config": {"$ref": "#/components/schemas/Config"}
            }
        })
    }
}

/// A push subscription's HTTP settings as a client sends them.
struct HttpSettingsIn;

impl JsonSchema for HttpSettingsIn {
    fn schema_name() -> Cow<'static, str> {
        "HttpSettings".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "HTTP delivery settings.",
            "additionalProperties": false,
            "properties": {
                "headers": {"type": "object", "additionalProperties": {"type": "string"},
                            "description": "Headers added to every delivery. Their values are write-only: they read as \
                                            `********`, and a replacement that sends `********` back keeps the stored value."},
                "method": {"type": "string", "enum": ["POST", "PUT", "PATCH"], "default": "POST"}
            }
        })
    }
}

/// How the hub authenticates at the sink, as a client sends it (never shown).
struct SinkCredentialIn;

impl JsonSchema for SinkCredentialIn {
    fn schema_name() -> Cow<'static, str> {
        "SinkCredential".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "How the hub authenticates at the sink (Subscriptions API 3.2.3, and CLIENTCREDENTIALS). \
                            Write-only: never returned. ACCESSTOKEN is sent as `Authorization: Bearer <accesstoken>` \
                            until `accesstokenexpiresutc`; after it, nothing is sent and the events become dead letters \
                            saying so. PLAIN is sent as HTTP Basic. REFRESHTOKEN is not supported.",
            "oneOf": [
                {
                    "type": "object",
                    "title": "ACCESSTOKEN",
                    "writeOnly": true,
                    "additionalProperties": false,
                    "required": ["credentialtype", "accesstoken", "accesstokentype", "accesstokenexpiresutc"],
                    "properties": {
                        "credentialtype": {"type": "string", "enum": ["ACCESSTOKEN"]},
                        "accesstoken": {"type": "string", "minLength": 1},
                        "accesstokentype": {"type": "string", "pattern": "^[Bb][Ee][Aa][Rr][Ee][Rr]$",
                                            "description": "`bearer` (any case): the token is sent as a bearer token (RFC 6750)."},
                        "accesstokenexpiresutc": {"type": "string", "format": "date-time",
                                                  "description": "When the token expires; must be in the future."}
                    }
                },
                {
                    "type": "object",
                    "title": "CLIENTCREDENTIALS",
                    "writeOnly": true,
                    "additionalProperties": false,
                    "description": "OAuth 2.0 client credentials (RFC 6749 section 4.4): the hub fetches an access token \
                                    from `tokenurl` (HTTP Basic with the id and secret, presenting the subscription's \
                                    client certificate if it has one), keeps it until shortly before it expires, fetches a \
                                    new one when the sink answers 401, and sends it as `Authorization: Bearer`. `tokenurl` \
                                    follows the rules of `sink` (https; the same address checks).",
                    "required": ["credentialtype", "tokenurl", "clientid", "clientsecret"],
                    "properties": {
                        "credentialtype": {"type": "string", "enum": ["CLIENTCREDENTIALS"]},
                        "tokenurl": {"type": "string", "format": "uri"},
                        "clientid": {"type": "string", "minLength": 1},
                        "clientsecret": {"type": "string", "minLength": 1},
                        "scope": {"type": "string", "minLength": 1, "description": "Space-separated scopes to ask for."}
                    }
                },
                {
                    "type": "object",
                    "title": "PLAIN",
                    "writeOnly": true,
                    "additionalProperties": false,
                    "required": ["credentialtype", "identifier", "secret"],
                    "properties": {
                        "credentialtype": {"type": "string", "enum": ["PLAIN"]},
                        "identifier": {"type": "string", "minLength": 1},
                        "secret": {"type": "string", "minLength": 1}
                    }
                }
            ]
        })
    }
}

/// The client certificate the hub presents to the sink, as a client sends it.
struct ClientCertificateIn;

impl JsonSchema for ClientCertificateIn {
    fn schema_name() -> Cow<'static, str> {
        "ClientCertificate".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "The client certificate the hub presents to the sink (mutual TLS, e.g. PKIoverheid), in \
                            the handshake, the deliveries and the token requests of CLIENTCREDENTIALS. Both PEM. \
                            `privatekey` is write-only: it reads as `********`, and a replacement that sends \
                            `********` back with the same certificate keeps it.",
            "additionalProperties": false,
            "required": ["certificate", "privatekey"],
            "properties": {
                "certificate": {"type": "string", "description": "The certificate, then any intermediates (PEM).",
                                "minLength": 1, "maxLength": 65536},
                "privatekey": {"type": "string", "description": "Its private key (PEM, PKCS#8, PKCS#1 or SEC1).",
                               "maxLength": 65536}
            }
        })
    }
}
