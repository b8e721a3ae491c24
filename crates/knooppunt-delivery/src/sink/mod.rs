//! Requests to a subscriber's sink: deliveries in structured or binary mode, and the
//! `OPTIONS` validation handshake (CloudEvents webhook spec section 4).

pub(crate) mod address;
pub mod amqp;
pub(crate) mod broker;
pub(crate) mod connections;
pub(crate) mod credentials;
pub mod mqtt;
pub mod nats;
pub mod signing;

use std::time::Duration;

use base64::Engine;
use http::{HeaderMap, HeaderName, HeaderValue};
use knooppunt_event::binding::http::{HttpMessage, encode_binary};
use knooppunt_event::format::{cbor, json};
use knooppunt_store::{DeliveryMode, Protocol, SinkCredential, Subscription};

use crate::outcome::Response;
use crate::sink::address::AddressRefused;
use crate::sink::broker::Broker;

/// What the API and the logs show for a secret: a sink URL's query values and password, and
/// the values of a subscription's own headers. Secrets are write-only.
pub const REDACTED: &str = "********";

/// A sink URL for reading and logging: query values and any password replaced by
/// [`REDACTED`] (a token in the query is a common way to authenticate webhooks).
pub fn redact_sink(sink: &str) -> String {
    let Ok(mut url) = reqwest::Url::parse(sink) else {
        return sink.to_owned();
    };
    if url.password().is_some() {
        let _ = url.set_password(Some(REDACTED));
    }
    if url.query().is_some() {
        let pairs: Vec<(String, bool)> = url
            .query_pairs()
            .map(|(name, value)| (name.into_owned(), !value.is_empty()))
            .collect();
        let mut query = url.query_pairs_mut();
        query.clear();
        for (name, has_value) in pairs {
            query.append_pair(&name, if has_value { REDACTED } else { "" });
        }
    }
    url.into()
}

/// The header that names the hub in every request (webhook spec section 4.1.1).
pub const REQUEST_ORIGIN: HeaderName = HeaderName::from_static("webhook-request-origin");

/// The most bytes the headers of a binary-mode delivery's event (its `ce-` headers and
/// `Content-Type`, each counted as `name: value` and a line end) may take. An event whose
/// attributes take more (a very long `subject`, say) is delivered in structured mode: the
/// header limits of common servers (8 KiB a line or in all) would refuse it.
pub const BINARY_HEADER_LIMIT: usize = 8 * 1024;

fn header_bytes(headers: &HeaderMap) -> usize {
    headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum()
}

/// An event as the store keeps it (its JSON), read again; what is wrong when it cannot be
/// (an event an older version accepted and this one would refuse).
fn read_stored(json_text: &str) -> Result<knooppunt_event::ReceivedEvent, String> {
    json::decode_event(json_text.as_bytes())
        .map_err(|violations| format!("the stored event cannot be read again: {violations}"))
}

/// A message of `body` with this `Content-Type` alone.
fn typed(content_type: &'static str, body: Vec<u8>) -> HttpMessage {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    HttpMessage { headers, body }
}

/// The body and headers of one delivery: the stored JSON unchanged in structured mode, the
/// event in CBOR (with the extension types the store kept beside the JSON: URIs and
/// timestamps tagged, Binary as bytes, as they were published), or `ce-` headers and the
/// data in binary mode.
pub fn delivery_message(
    json_text: &str,
    extension_types: Option<&str>,
    mode: DeliveryMode,
    accepted_at: u64,
) -> Result<HttpMessage, String> {
    match mode {
        DeliveryMode::Structured => Ok(typed(json::MEDIA_TYPE, json_text.as_bytes().to_vec())),
        DeliveryMode::StructuredCbor => {
            let received = read_stored(json_text)?;
            let event = match extension_types {
                Some(types) => received.event.with_extension_types_text(types),
                None => received.event,
            };
            Ok(typed(cbor::MEDIA_TYPE, cbor::encode_event(&event)?))
        }
        DeliveryMode::Binary => {
            let received = read_stored(json_text)?;
            let message = encode_binary(&received.event);
            if header_bytes(&message.headers) > BINARY_HEADER_LIMIT {
                // Common servers refuse such headers (8 KiB is a usual cap): the event goes
                // in structured mode instead, as the HTTP binding lets a sender choose.
                return delivery_message(
                    json_text,
                    extension_types,
                    DeliveryMode::Structured,
                    accepted_at,
                );
            }
            Ok(message)
        }
        DeliveryMode::ZgwCloudEvent => {
            let received = read_stored(json_text)?;
            let event = &received.event;
            // A notificatie (or a CloudEvent of a kanaal's type) as Open Notificaties makes
            // it a CloudEvent; any other event as it was published.
            let body = match event
                .ty()
                .starts_with(knooppunt_event::notificatie::TYPE_PREFIX)
            {
                true => knooppunt_event::notificatie::Notificatie::from_event_or_why(
                    event,
                    Some(accepted_at),
                )
                .map(|n| {
                    n.open_notificaties_cloudevent(event.id(), event.source())
                        .to_string()
                })
                .unwrap_or_else(|_| json_text.to_owned()),
                false => json_text.to_owned(),
            };
            Ok(typed(json::MEDIA_TYPE, body.into_bytes()))
        }
        DeliveryMode::Notificatie => {
            let received = read_stored(json_text)?;
            let notificatie = knooppunt_event::notificatie::Notificatie::from_event_or_why(
                &received.event,
                Some(accepted_at),
            )?;
            Ok(typed(
                "application/json",
                notificatie.json().as_bytes().to_vec(),
            ))
        }
    }
}

/// The hub's connections to brokers, one set per protocol; HTTP subscriptions are not
/// theirs (`None`).
pub(crate) struct Brokers {
    mqtt: mqtt::Brokers,
    nats: nats::Servers,
    amqp: amqp::Brokers,
}

/// An event's message for a subscription's broker.
pub(crate) enum BrokerMessage {
    Mqtt(<mqtt::Brokers as Broker>::Message),
    Nats(<nats::Servers as Broker>::Message),
    Amqp(<amqp::Brokers as Broker>::Message),
}

impl Brokers {
    pub(crate) fn new(
        networks: &std::sync::Arc<address::SinkNetworks>,
        tls: &rustls::ClientConfig,
    ) -> Brokers {
        let mut tls = tls.clone();
        // Brokers do not speak HTTP: offer no application protocol.
        tls.alpn_protocols.clear();
        let tls = std::sync::Arc::new(tls);
        Brokers {
            mqtt: mqtt::Brokers::new(std::sync::Arc::clone(networks), std::sync::Arc::clone(&tls)),
            nats: nats::Servers::new(std::sync::Arc::clone(networks), std::sync::Arc::clone(&tls)),
            amqp: amqp::Brokers::new(std::sync::Arc::clone(networks), tls),
        }
    }

    /// The event's message for a broker subscription, or why it cannot be sent; `None` for
    /// an HTTP subscription.
    pub(crate) fn message(
        subscription: &Subscription,
        mode: DeliveryMode,
        event: &knooppunt_store::StoredEvent,
        replay: Option<&str>,
    ) -> Option<Result<BrokerMessage, String>> {
        Some(match subscription.protocol() {
            Protocol::Http => return None,
            Protocol::Mqtt5 | Protocol::Mqtt3 => {
                mqtt::Brokers::message(subscription, mode, event, replay).map(BrokerMessage::Mqtt)
            }
            Protocol::Nats => {
                nats::Servers::message(subscription, mode, event, replay).map(BrokerMessage::Nats)
            }
            Protocol::Amqp => {
                amqp::Brokers::message(subscription, mode, event, replay).map(BrokerMessage::Amqp)
            }
        })
    }

    /// Publishes the message to the subscription's broker, waiting up to `within`.
    pub(crate) async fn publish(
        &self,
        subscription: &Subscription,
        message: BrokerMessage,
        within: Duration,
    ) -> Response {
        match message {
            BrokerMessage::Mqtt(m) => self.mqtt.publish(subscription, m, within).await,
            BrokerMessage::Nats(m) => self.nats.publish(subscription, m, within).await,
            BrokerMessage::Amqp(m) => self.amqp.publish(subscription, m, within).await,
        }
        .into()
    }

    /// Whether a broker subscription's broker takes its connection and credentials (its
    /// consent); `None` for an HTTP subscription.
    pub(crate) async fn check(
        &self,
        subscription: &Subscription,
        within: Duration,
    ) -> Option<Result<(), String>> {
        Some(match subscription.protocol() {
            Protocol::Http => return None,
            Protocol::Mqtt5 | Protocol::Mqtt3 => self.mqtt.check(subscription, within).await,
            Protocol::Nats => self.nats.check(subscription, within).await,
            Protocol::Amqp => self.amqp.check(subscription, within).await,
        })
    }
}

/// Why a subscription's credential cannot be sent now: an access token past its
/// `accesstokenexpiresutc` is never sent (the events become dead letters saying so, until
/// the subscription is replaced with a new token).
pub fn credential_problem(
    subscription: &Subscription,
    now: std::time::SystemTime,
) -> Option<String> {
    let Some(SinkCredential::AccessToken {
        accesstokenexpiresutc: Some(expires),
        ..
    }) = &subscription.sink_credential
    else {
        return None;
    };
    let now_ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let expired = knooppunt_event::timestamp::epoch_millis(expires).is_none_or(|at| at <= now_ms);
    expired.then(|| {
        format!(
            "the subscription's access token expired at {expires}: it was not sent; replace the \
             subscription's sinkcredential with a valid token, then redeliver"
        )
    })
}

/// The `Authorization` header for a sink credential (client credentials: the token
/// fetched for it, given to [`deliver`]).
fn authorization(credential: &SinkCredential) -> Option<HeaderValue> {
    let value = match credential {
        SinkCredential::ClientCredentials { .. } => return None,
        SinkCredential::Plain { identifier, secret } => format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{identifier}:{secret}"))
        ),
        // The API accepts the `bearer` type only (RFC 6750), whatever its case.
        SinkCredential::AccessToken { accesstoken, .. } => format!("Bearer {accesstoken}"),
    };
    HeaderValue::try_from(value).ok()
}

/// Sends one delivery to `sink` (the subscription's sink URL, parsed once for all its
/// deliveries) and reports how it ended; `bearer` is the access token fetched for the
/// subscription's client credentials.
pub async fn deliver(
    (client, sink): (&reqwest::Client, &reqwest::Url),
    subscription: &Subscription,
    origin: &HeaderValue,
    message: HttpMessage,
    timeout: Duration,
    bearer: Option<&str>,
) -> Response {
    let settings = subscription.protocol_settings.http();
    let method = settings
        .and_then(|s| s.method.as_deref())
        .and_then(|m| reqwest::Method::from_bytes(m.as_bytes()).ok())
        .unwrap_or(reqwest::Method::POST);
    let mut headers = HeaderMap::new();
    for (name, value) in settings.iter().flat_map(|s| &s.headers) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            headers.insert(name, value);
        }
    }
    if let Some(value) = subscription
        .sink_credential
        .as_ref()
        .and_then(authorization)
    {
        headers.insert(http::header::AUTHORIZATION, value);
    }
    if let Some(Ok(value)) = bearer.map(|token| HeaderValue::try_from(format!("Bearer {token}"))) {
        headers.insert(http::header::AUTHORIZATION, value);
    }
    headers.extend(message.headers);
    headers.insert(REQUEST_ORIGIN, origin.clone());
    if message.body.is_empty() {
        // A POST without a body still says so (hyper would send neither Content-Length nor
        // Transfer-Encoding): an event without data in binary mode.
        headers.insert(http::header::CONTENT_LENGTH, HeaderValue::from_static("0"));
    }
    let request = client
        .request(method, sink.clone())
        .headers(headers)
        .body(message.body)
        .timeout(timeout);
    match request.send().await {
        Ok(response) => {
            let retry_after = response
                .headers()
                .get(http::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let code = response.status().as_u16();
            // Why it refused, for its owner: read only then, and only so far (no clock is
            // read for a delivery that succeeded).
            let answer = if (200..300).contains(&code) {
                None
            } else {
                let within = timeout.min(EXCERPT_WITHIN);
                Some(Box::new(
                    excerpt(response, within, &secrets(subscription, bearer)).await,
                ))
            };
            Response::Status {
                code,
                retry_after,
                answer,
            }
        }
        Err(error) if error.is_timeout() => Response::Timeout,
        Err(error) => {
            // The URL may hold a token: it stays out of the error and the log.
            let error = error.without_url();
            let sink = redact_sink(&subscription.sink);
            tracing::debug!(%sink, error = %error_chain(&error), "A delivery request failed.");
            Response::Failed(describe(&error))
        }
    }
}

/// What the hub sent a subscription's sink that must not come back in an excerpt of its
/// answer: header values, the credential's secrets, the access token.
fn secrets(subscription: &Subscription, bearer: Option<&str>) -> Vec<String> {
    let mut secrets: Vec<String> = subscription
        .protocol_settings
        .http()
        .iter()
        .flat_map(|s| s.headers.values().cloned())
        .collect();
    match &subscription.sink_credential {
        Some(SinkCredential::Plain { secret, .. }) => secrets.push(secret.clone()),
        Some(SinkCredential::AccessToken { accesstoken, .. }) => secrets.push(accesstoken.clone()),
        Some(SinkCredential::ClientCredentials { client_secret, .. }) => {
            secrets.push(client_secret.clone())
        }
        None => {}
    }
    secrets.extend(bearer.map(str::to_owned));
    // Too short to blank out without blanking ordinary words.
    secrets.retain(|secret| secret.len() >= 6);
    secrets
}

/// How long the body of a refusing answer is read at most.
const EXCERPT_WITHIN: Duration = Duration::from_secs(2);

/// The start of a refusing answer ([`SinkAnswer`]): the kept headers, and the body's first
/// bytes read within `within` (the rest is not read: the connection is closed).
async fn excerpt(
    mut response: reqwest::Response,
    within: Duration,
    secrets: &[String],
) -> crate::outcome::SinkAnswer {
    use crate::outcome::SinkAnswer;
    let clean = |text: &str| {
        let mut text: String = text
            .chars()
            .flat_map(|c| match c {
                '\n' | '\t' => vec![c],
                c if c.is_control() => c.escape_default().collect(),
                c => vec![c],
            })
            .collect();
        for secret in secrets {
            text = text.replace(secret.as_str(), REDACTED);
        }
        text
    };
    let headers = SinkAnswer::HEADERS
        .iter()
        .filter_map(|name| {
            let value = response.headers().get(*name)?.to_str().ok()?;
            let value: String = value.chars().take(200).collect();
            Some(((*name).to_owned(), clean(&value)))
        })
        .collect();
    let mut body = Vec::new();
    let mut truncated = false;
    let reading = async {
        while let Ok(Some(chunk)) = response.chunk().await {
            let room = SinkAnswer::MAX_BODY - body.len();
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if chunk.len() > room {
                truncated = true;
                break;
            }
        }
    };
    if tokio::time::timeout(within, reading).await.is_err() {
        truncated = true;
    }
    SinkAnswer {
        headers,
        body: clean(&String::from_utf8_lossy(&body)),
        truncated,
    }
}

/// What went wrong with a request, in words that give away nothing of the network (no
/// addresses, ports or system errors: a subscriber must not learn the hub's surroundings by
/// trying sinks). The full error is logged for the operator.
pub(crate) fn describe(error: &reqwest::Error) -> String {
    let chain = error_chain(error);
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<AddressRefused>() {
            return refused.to_string();
        }
        source = cause.source();
    }
    let lower = chain.to_lowercase();
    if error.is_timeout() && error.is_connect() {
        "connect: the sink's host did not take the connection in time".into()
    } else if error.is_timeout() {
        "answer: the sink did not answer in time".into()
    } else if lower.contains("dns error") || lower.contains("failed to lookup address") {
        "DNS: the sink's host name could not be resolved".into()
    } else if lower.contains("certificate") {
        "TLS: the sink's certificate could not be verified against the CA certificates the \
         hub trusts (the system's and delivery.ca_file)"
            .into()
    } else if error.is_connect()
        && [
            "tls",
            "handshake",
            "corrupt message",
            "alert",
            "peer is incompatible",
        ]
        .iter()
        .any(|sign| lower.contains(sign))
    {
        "TLS: the handshake with the sink failed (does it speak HTTPS on that port?)".into()
    } else if error.is_connect() {
        "connect: the hub could not connect to the sink (refused or unreachable)".into()
    } else {
        "answer: the exchange with the sink broke off before it answered".into()
    }
}

/// An error with its causes, for the operator's log.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// What the sink answered to the validation handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handshake {
    /// `WebHook-Allowed-Origin` is our origin or `*`; with the rate it allowed, if any
    /// (requests per minute; `*` means no limit).
    Granted { allowed_rate: Option<u32> },
    /// The sink answered, but did not grant.
    Refused(String),
    /// No usable answer.
    Failed(String),
}

/// Sends the `OPTIONS` validation request (webhook spec section 4.2) with the hub's origin,
/// the rate it intends (requests per minute) and the callback URL the sink may call later.
pub async fn handshake(
    client: &reqwest::Client,
    sink: &str,
    origin: &str,
    rate: u32,
    callback: &str,
    timeout: Duration,
) -> Handshake {
    let request = client
        .request(reqwest::Method::OPTIONS, sink)
        .header(REQUEST_ORIGIN, origin)
        .header("webhook-request-rate", rate.to_string())
        .header("webhook-request-callback", callback)
        .timeout(timeout);
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => {
            let error = error.without_url();
            let sink = redact_sink(sink);
            tracing::info!(%sink, error = %error_chain(&error), "A validation handshake failed.");
            return Handshake::Failed(describe(&error));
        }
    };
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .map(str::to_owned)
    };
    let allowed = header("webhook-allowed-origin");
    let granted = response.status().is_success()
        && allowed
            .as_deref()
            .is_some_and(|allowed| allowed == "*" || allowed == origin);
    if !granted {
        return Handshake::Refused(format!(
            "the sink answered {} with WebHook-Allowed-Origin {}",
            response.status().as_u16(),
            allowed
                .as_deref()
                .map_or("absent".to_owned(), |a| format!("`{a}`"))
        ));
    }
    let allowed_rate = header("webhook-allowed-rate").and_then(|rate| rate.parse().ok());
    Handshake::Granted { allowed_rate }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_and_passwords_are_redacted() {
        assert_eq!(
            redact_sink("https://sink.example/hook?token=s3cret&tenant=kvk&flag"),
            "https://sink.example/hook?token=********&tenant=********&flag="
        );
        assert_eq!(
            redact_sink("https://user:pw@sink.example/hook"),
            "https://user:********@sink.example/hook"
        );
        assert_eq!(
            redact_sink("https://sink.example/hook"),
            "https://sink.example/hook"
        );
    }
}
