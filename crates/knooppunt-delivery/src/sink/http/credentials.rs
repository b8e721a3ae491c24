//! Access tokens for sinks whose subscription has OAuth 2.0 client credentials (RFC 6749
//! section 4.4): fetched from the token endpoint when first needed (HTTP Basic with the
//! client id and secret, over the same guarded connections as deliveries and with the
//! subscription's client certificate, as NL GOV token endpoints often ask for mutual TLS),
//! kept until shortly before they expire, fetched again then or when a sink answers 401.
//! One fetch at a time per credential: a thousand deliveries due at once ask once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use knooppunt_store::ClientCertificate;
use serde_json::Value;
use tokio::time::Instant;

use crate::sink::connections::Connections;

/// A token is used until this long before it expires (at most half its lifetime).
const MARGIN: Duration = Duration::from_secs(30);
/// Lifetime of a token whose answer has no `expires_in`.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// A token endpoint's answer larger than this is refused.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Cached tokens kept at most (expired ones are dropped first).
const MAX_CACHED: usize = 10_000;

/// What identifies a credential: every part of it (a changed secret is another credential).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Credential {
    pub(crate) token_url: String,
    pub(crate) client_id: String,
    pub(crate) client_secret: String,
    pub(crate) scope: Option<String>,
}

#[derive(Default)]
pub(crate) struct Tokens {
    cached: Mutex<HashMap<Credential, (String, Instant)>>,
    fetching: Mutex<HashMap<Credential, Arc<tokio::sync::Mutex<()>>>>,
}

impl Tokens {
    fn cached(&self, credential: &Credential) -> Option<String> {
        let cached = self.cached.lock().expect("tokens lock");
        let (token, until) = cached.get(credential)?;
        (*until > Instant::now()).then(|| token.clone())
    }

    /// Forgets the credential's token (the sink refused it).
    pub(crate) fn forget(&self, credential: &Credential) {
        self.cached.lock().expect("tokens lock").remove(credential);
    }

    /// A valid token for the credential, fetched if needed within `within`.
    pub(crate) async fn token(
        &self,
        connections: &Connections,
        credential: &Credential,
        identity: Option<&ClientCertificate>,
        within: Duration,
    ) -> Result<String, String> {
        if let Some(token) = self.cached(credential) {
            return Ok(token);
        }
        let lock = Arc::clone(
            self.fetching
                .lock()
                .expect("fetching lock")
                .entry(credential.clone())
                .or_default(),
        );
        let _fetching = lock.lock().await;
        if let Some(token) = self.cached(credential) {
            return Ok(token);
        }
        let fetched = tokio::time::timeout(within, fetch(connections, credential, identity))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "the token endpoint {} did not answer within {} ms",
                    crate::sink::redact_sink(&credential.token_url),
                    within.as_millis()
                ))
            });
        self.fetching
            .lock()
            .expect("fetching lock")
            .remove(credential);
        let (token, lifetime) = fetched?;
        let keep = lifetime.saturating_sub(MARGIN.min(lifetime / 2));
        let mut cached = self.cached.lock().expect("tokens lock");
        if cached.len() >= MAX_CACHED {
            let now = Instant::now();
            cached.retain(|_, (_, until)| *until > now);
            if cached.len() >= MAX_CACHED {
                cached.clear();
            }
        }
        cached.insert(credential.clone(), (token.clone(), Instant::now() + keep));
        Ok(token)
    }
}

/// One token request; the token and how long it lives.
async fn fetch(
    connections: &Connections,
    credential: &Credential,
    identity: Option<&ClientCertificate>,
) -> Result<(String, Duration), String> {
    // Said in errors (which subscribers read in lastDelivery and dead letters) with its
    // password and query values hidden, as sinks are.
    let url = &crate::sink::redact_sink(&credential.token_url);
    let parsed = reqwest::Url::parse(&credential.token_url)
        .map_err(|error| format!("the token URL is invalid: {error}"))?;
    let client = connections.client_for(&parsed, identity)?;
    // RFC 6749 section 2.3.1: the id and secret form-encoded, then HTTP Basic.
    let encode =
        |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
    let basic = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        encode(&credential.client_id),
        encode(&credential.client_secret)
    ));
    let form = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials");
        if let Some(scope) = &credential.scope {
            form.append_pair("scope", scope);
        }
        form.finish()
    };
    let mut response = client
        .post(parsed)
        .header(http::header::AUTHORIZATION, format!("Basic {basic}"))
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(http::header::ACCEPT, "application/json")
        .body(form)
        .send()
        .await
        .map_err(|error| {
            let why = super::describe(&error);
            format!("the token endpoint {url} could not be reached: {why}")
        })?;
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|error| {
        let why = super::describe(&error);
        format!("reading the token endpoint's answer failed: {why}")
    })? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_ANSWER_BYTES {
            return Err(format!(
                "the token endpoint {url} answered more than {MAX_ANSWER_BYTES} bytes"
            ));
        }
    }
    let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if !status.is_success() {
        let error = answer["error"].as_str().unwrap_or("no error code");
        let description = answer["error_description"].as_str().unwrap_or("");
        return Err(format!(
            "the token endpoint {url} answered {status} ({error}{}{description}): check the \
             subscription's client id, secret and scope",
            if description.is_empty() { "" } else { ": " }
        ));
    }
    let Some(token) = answer["access_token"].as_str().filter(|t| !t.is_empty()) else {
        return Err(format!(
            "the token endpoint {url} answered without an `access_token`"
        ));
    };
    if let Some(kind) = answer["token_type"].as_str()
        && !kind.eq_ignore_ascii_case("bearer")
    {
        return Err(format!(
            "the token endpoint {url} issued a `{kind}` token; the hub sends bearer tokens only"
        ));
    }
    let lifetime = answer["expires_in"]
        .as_u64()
        .map_or(DEFAULT_LIFETIME, Duration::from_secs);
    Ok((token.to_owned(), lifetime))
}
