//! HTTP sinks: deliveries as requests (with the subscription's headers, credentials,
//! Standard Webhooks signature and trace context), the excerpt of a refusing answer, and
//! the `OPTIONS` validation handshake (CloudEvents webhook spec section 4).

pub(crate) mod credentials;
mod message;
pub mod signing;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine;
use http::{HeaderMap, HeaderName, HeaderValue};
use knooppunt_event::binding::http::HttpMessage;
use knooppunt_store::{DeliveryMode, SinkCredential, StoredEvent, Subscription};

pub use message::{BINARY_HEADER_LIMIT, credential_problem, delivery_message};

use super::connections::Connections;
use super::{Handshake, Hop, REDACTED, Sent, Sink, To, redact_sink};
use crate::outcome::Response;
use crate::sink::address::AddressRefused;

/// The header that names the hub in every request (webhook spec section 4.1.1).
pub const REQUEST_ORIGIN: HeaderName = HeaderName::from_static("webhook-request-origin");

/// HTTP sinks: what every request needs of the hub (its connections, name and keys), and
/// the access tokens of subscriptions with client credentials.
pub(crate) struct Http {
    connections: Arc<Connections>,
    tokens: credentials::Tokens,
    /// The hub's name (`WebHook-Request-Origin`), as text and as a header value.
    origin: (String, HeaderValue),
    hub_keys: signing::HubKeys,
    /// The rate the hub asks for in the handshake (requests per minute).
    request_rate: u32,
}

/// One delivery's request: the event's message and its Standard Webhooks id (the same for
/// every attempt of the delivery).
pub(crate) struct Request {
    message: HttpMessage,
    webhook_id: String,
}

impl Http {
    pub(crate) fn new(
        connections: Arc<Connections>,
        origin: (String, HeaderValue),
        hub_keys: signing::HubKeys,
        request_rate: u32,
    ) -> Http {
        Http {
            connections,
            tokens: Default::default(),
            origin,
            hub_keys,
            request_rate,
        }
    }

    /// The access token for a subscription with client credentials (and its credential, to
    /// forget the token if the sink refuses it); `None` for other subscriptions.
    async fn bearer(
        &self,
        subscription: &Subscription,
        within: Duration,
    ) -> Result<Option<(credentials::Credential, String)>, String> {
        let Some(SinkCredential::ClientCredentials {
            token_url,
            client_id,
            client_secret,
            scope,
        }) = &subscription.sink_credential
        else {
            return Ok(None);
        };
        let credential = credentials::Credential {
            token_url: token_url.clone(),
            client_id: client_id.clone(),
            client_secret: client_secret.clone(),
            scope: scope.clone(),
        };
        let token = self
            .tokens
            .token(
                &self.connections,
                &credential,
                subscription.client_certificate.as_ref(),
                within,
            )
            .await?;
        Ok(Some((credential, token)))
    }

    /// POSTs `body` (JSON) with `headers` to `url` once, through the same guards as
    /// deliveries (the SSRF guard, the connection limits), within `within`: the status the
    /// receiver answered, or why there was none.
    pub(crate) async fn probe(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        within: Duration,
    ) -> Result<u16, String> {
        let started = tokio::time::Instant::now();
        let permit = self.connections.acquire(url, within, None).await?;
        let mut request = permit
            .client
            .post(url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(REQUEST_ORIGIN, &self.origin.1)
            .timeout(within.saturating_sub(started.elapsed()))
            .body(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        match request.send().await {
            Ok(response) => Ok(response.status().as_u16()),
            Err(error) if error.is_timeout() => {
                Err(format!("no answer within {} ms", within.as_millis()))
            }
            Err(error) => Err(format!("the request failed: {}", describe(&error))),
        }
    }
}

impl Sink for Http {
    type Message = Request;

    /// The event in the subscription's mode, with the hop's trace headers and a replay's
    /// header; never with a credential that may not be sent.
    fn message(
        &self,
        subscription: &Subscription,
        mode: DeliveryMode,
        event: &StoredEvent,
        hop: &Hop<'_>,
    ) -> Result<Request, String> {
        if let Some(why) = credential_problem(subscription, SystemTime::now()) {
            return Err(why);
        }
        let mut message = delivery_message(
            &event.json,
            event.extension_types.as_deref(),
            mode,
            event.accepted_at,
        )?;
        if let Some(trace) = hop.trace {
            message::hop_headers(&mut message.headers, trace);
        }
        // A replayed delivery names its replay (the event itself is unchanged).
        if let Some(value) = hop.replay.and_then(|r| HeaderValue::try_from(r).ok()) {
            message.headers.insert(crate::REPLAY_HEADER, value);
        }
        // One id per delivery (the same for its every attempt); a test event has no
        // sequence (0), and each is a delivery of its own.
        let webhook_id = if event.seq == 0 {
            format!("msg_test_{}", event.id)
        } else {
            format!("msg_{}_{}", event.seq, subscription.id)
        };
        Ok(Request {
            message,
            webhook_id,
        })
    }

    /// The access token first (fetched if needed), the signature last, just before the
    /// request goes out (its timestamp is the sending time's).
    async fn deliver(&self, to: To<'_>, request: Request) -> Sent {
        let Request {
            mut message,
            webhook_id,
        } = request;
        let bearer = match self.bearer(to.subscription, to.within()).await {
            Ok(bearer) => bearer,
            Err(why) => return Sent::Unsent(why),
        };
        signing::sign(
            to.subscription.signing.as_ref(),
            &self.hub_keys,
            &webhook_id,
            SystemTime::now(),
            &message.body,
            &mut message.headers,
        );
        if !to.begins() {
            return Sent::Cut;
        }
        let response = send(
            (&to.permit.client, &to.permit.target.url),
            to.subscription,
            &self.origin.1,
            message,
            to.within(),
            bearer.as_ref().map(|(_, token)| token.as_str()),
        )
        .await;
        // Refused: the next attempt gets a new token.
        if let (Response::Status { code: 401, .. }, Some((credential, _))) = (&response, &bearer) {
            self.tokens.forget(credential);
        }
        Sent::Answered(response)
    }

    /// The validation handshake, presenting the subscription's client certificate if it
    /// has one.
    async fn consent(
        &self,
        subscription: &Subscription,
        callback: &str,
        within: Duration,
    ) -> Handshake {
        let started = tokio::time::Instant::now();
        let sink = subscription.sink.as_str();
        let identity = subscription.client_certificate.as_ref();
        let permit = match self.connections.acquire(sink, within, identity).await {
            Ok(permit) => permit,
            Err(why) => return Handshake::Failed(why),
        };
        handshake(
            &permit.client,
            sink,
            &self.origin.0,
            self.request_rate,
            callback,
            within.saturating_sub(started.elapsed()),
        )
        .await
    }
}

/// The `Authorization` header for a sink credential (client credentials: the token
/// fetched for it, given to [`send`]).
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
async fn send(
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

/// Sends the `OPTIONS` validation request (webhook spec section 4.2) with the hub's origin,
/// the rate it intends (requests per minute) and the callback URL the sink may call later.
async fn handshake(
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
