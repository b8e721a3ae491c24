//! Access tokens (JWT, RFC 7519) of trusted issuers, as the OAuth NL GOV profile has
//! authorization servers issue them: the signature is checked against the issuer's JWKS
//! (fetched when first needed, fetched again for an unknown key id, at most once per
//! [`REFETCH_AFTER`] so that made-up key ids cannot hammer the issuer), then the issuer,
//! the audience, the expiry and not-before. Claims name the principal and give its roles.
//!
//! Accepted algorithms: RS256, PS256 and ES256 (never `none`, never a shared secret); the
//! keys are read and the signatures checked by `jsonwebtoken`, each key only for the one
//! family of algorithms it belongs to.
//!
//! A verified token is remembered by its SHA-256 until it expires (at most
//! [`MAX_VERIFIED`] of them; only verified tokens get in), so a client that sends the same
//! token with every request pays for the signature once: an ES256 check per request cut
//! ingest from 35k to 12k events/s (docs/benchmarks-log.md). A key removed from the issuer's JWKS
//! therefore keeps the tokens it signed valid until they expire, as with most resource
//! servers.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;
use sha2::Digest;

use super::{Principal, Role};

/// A JWKS is fetched again for an unknown key id only this long after the last fetch.
const REFETCH_AFTER: Duration = Duration::from_secs(10);
/// Longer tokens are refused unread.
const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// A JWKS larger than this is refused.
const MAX_JWKS_BYTES: usize = 256 * 1024;
/// Verified tokens remembered at most (expired ones are dropped first, then all).
const MAX_VERIFIED: usize = 10_000;

/// One trusted issuer of access tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerSettings {
    /// The `iss` its tokens carry.
    pub issuer: String,
    /// Where its public keys are (a JWKS document).
    pub jwks_url: String,
    /// The `aud` a token must carry (one of them) to be for this hub.
    pub audience: String,
    /// The claim that names the principal (`sub`, or `client_id` for client credentials).
    pub name_claim: String,
    /// Put before every name from this issuer, so that the principals of two issuers can
    /// never share a name (and so each other's subscriptions); empty by default.
    pub name_prefix: String,
    /// The claim with the roles: a space-separated string (`scope`) or an array of strings.
    pub roles_claim: String,
    /// Which claim value gives which role.
    pub roles: BTreeMap<String, Role>,
    /// The claim with the organisation's OIN, if the issuer sets one.
    pub oin_claim: Option<String>,
    /// How much clock difference `exp` and `nbf` allow.
    pub leeway: Duration,
}

impl IssuerSettings {
    /// An issuer with the usual claims: `sub` names the principal and `scope` holds
    /// `knooppunt:publisher`, `knooppunt:subscriber`, `knooppunt:admin`, `knooppunt:metrics`.
    pub fn new(issuer: &str, jwks_url: &str, audience: &str) -> IssuerSettings {
        IssuerSettings {
            issuer: issuer.into(),
            jwks_url: jwks_url.into(),
            audience: audience.into(),
            name_claim: "sub".into(),
            name_prefix: String::new(),
            roles_claim: "scope".into(),
            roles: Role::ALL
                .into_iter()
                .map(|role| (format!("knooppunt:{}", role.name()), role))
                .collect(),
            oin_claim: None,
            leeway: Duration::from_secs(60),
        }
    }
}

/// A public signing key of an issuer, with the one algorithm family it verifies: an RSA
/// key never checks an ES256 signature, nor an EC key an RS256 one (and no HMAC at all).
struct Key {
    rsa: bool,
    decoding: jsonwebtoken::DecodingKey,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("rsa", &self.rsa)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Issuer {
    settings: IssuerSettings,
    keys: Mutex<Keys>,
    /// One fetch at a time per issuer.
    fetching: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct Keys {
    by_id: HashMap<String, Arc<Key>>,
    /// The keys without a `kid`, for tokens without one.
    anonymous: Vec<Arc<Key>>,
    /// When the JWKS was last fetched for a key id it lacked (the first fetch does not
    /// count: it is not a sign of made-up key ids).
    refetched_at: Option<Instant>,
    fetched: bool,
}

/// A verified token's principal, and until when (Unix seconds) it holds.
type Verified = (Arc<Principal>, i64);

/// The trusted issuers of a hub.
#[derive(Debug)]
pub struct Issuers {
    issuers: Vec<Issuer>,
    client: reqwest::Client,
    /// Verified tokens by their SHA-256: the principal, and until when (Unix seconds, the
    /// expiry with the leeway) it holds.
    verified: Mutex<HashMap<[u8; 32], Verified>>,
}

/// `true` when `token` has the shape of a JWS compact serialisation.
pub fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ") && token.bytes().filter(|&b| b == b'.').count() == 2
}

/// Why an access token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefused {
    /// The token is not valid for this hub: what is wrong with it.
    #[error("{0}")]
    Invalid(String),
    /// The issuer's keys cannot be fetched now, so the token cannot be checked.
    #[error("{0}")]
    KeysUnavailable(String),
}

fn refused(detail: impl Into<String>) -> TokenRefused {
    TokenRefused::Invalid(detail.into())
}

fn decode_part(part: &str, what: &str) -> Result<Vec<u8>, TokenRefused> {
    URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| refused(format!("the access token's {what} is not base64url")))
}

fn decode_json(part: &str, what: &str) -> Result<Value, TokenRefused> {
    let bytes = decode_part(part, what)?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(value @ Value::Object(_)) => Ok(value),
        _ => Err(refused(format!(
            "the access token's {what} is not a JSON object"
        ))),
    }
}

fn now_seconds() -> i64 {
    (knooppunt_store::now_ms() / 1000) as i64
}

impl Issuers {
    pub fn new(settings: Vec<IssuerSettings>) -> Issuers {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("an HTTP client with default TLS");
        Issuers {
            issuers: settings
                .into_iter()
                .map(|settings| Issuer {
                    settings,
                    keys: Mutex::new(Keys::default()),
                    fetching: tokio::sync::Mutex::new(()),
                })
                .collect(),
            client,
            verified: Mutex::new(HashMap::new()),
        }
    }

    pub fn configured(&self) -> bool {
        !self.issuers.is_empty()
    }

    /// The principal an access token names, once everything about it is checked.
    pub async fn authenticate(&self, token: &str) -> Result<Arc<Principal>, TokenRefused> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(refused(format!(
                "the access token is longer than {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let digest: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
        if let Some((principal, until)) = self.verified.lock().expect("verified lock").get(&digest)
            && now_seconds() < *until
        {
            return Ok(Arc::clone(principal));
        }
        let (principal, until) = self.verify(token).await?;
        let principal = Arc::new(principal);
        let mut verified = self.verified.lock().expect("verified lock");
        if verified.len() >= MAX_VERIFIED {
            let now = now_seconds();
            verified.retain(|_, (_, until)| now < *until);
            if verified.len() >= MAX_VERIFIED {
                verified.clear();
            }
        }
        verified.insert(digest, (Arc::clone(&principal), until));
        Ok(principal)
    }

    /// Checks everything about a token; its principal and until when it holds.
    async fn verify(&self, token: &str) -> Result<(Principal, i64), TokenRefused> {
        let mut parts = token.split('.');
        let (Some(head), Some(body), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(refused(
                "the access token is not a signed JWT (three parts)",
            ));
        };
        let header = decode_json(head, "header")?;
        let claims = decode_json(body, "payload")?;
        decode_part(signature, "signature")?;
        let iss = claims.get("iss").and_then(Value::as_str).unwrap_or("");
        let Some(issuer) = self.issuers.iter().find(|i| i.settings.issuer == iss) else {
            return Err(refused(format!(
                "the access token's issuer `{iss}` is not trusted by this hub"
            )));
        };
        // A signed access token (JWS) has no use for these: `crit` names extensions this hub
        // does not understand (RFC 7515 section 4.1.11: the token is then invalid), `enc`
        // and `zip` belong to encrypted tokens (JWE).
        for member in ["crit", "enc", "zip"] {
            if header.get(member).is_some() {
                return Err(refused(format!(
                    "the access token's header has `{member}`, which this hub does not \
                     support; send a plain signed JWT (JWS)"
                )));
            }
        }
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
        if !matches!(alg, "RS256" | "PS256" | "ES256") {
            return Err(refused(format!(
                "the access token is signed with `{alg}`; this hub accepts RS256, PS256 and ES256"
            )));
        }
        let kid = header.get("kid").and_then(Value::as_str);
        let key = self.key(issuer, kid).await?;
        let message = &token.as_bytes()[..head.len() + 1 + body.len()];
        if !verify(&key, alg, message, signature) {
            return Err(refused(
                "the access token's signature does not verify with the issuer's key",
            ));
        }
        let until = check_claims(&issuer.settings, &claims)?;
        Ok((principal(&issuer.settings, &claims)?, until))
    }

    /// The issuer's key `kid`, fetching the JWKS when it is not known (yet).
    async fn key(&self, issuer: &Issuer, kid: Option<&str>) -> Result<Arc<Key>, TokenRefused> {
        let find = |keys: &Keys| match kid {
            Some(kid) => keys.by_id.get(kid).cloned(),
            None => match keys.anonymous.as_slice() {
                [only] => Some(Arc::clone(only)),
                _ => None,
            },
        };
        if let Some(key) = find(&issuer.keys.lock().expect("keys lock")) {
            return Ok(key);
        }
        let _fetching = issuer.fetching.lock().await;
        let recent = {
            let keys = issuer.keys.lock().expect("keys lock");
            if let Some(key) = find(&keys) {
                return Ok(key);
            }
            keys.refetched_at
                .is_some_and(|at| at.elapsed() < REFETCH_AFTER)
        };
        if !recent {
            let fetched = self.fetch(&issuer.settings).await;
            let mut keys = issuer.keys.lock().expect("keys lock");
            let refetched_at = keys.fetched.then(Instant::now);
            match fetched {
                Ok(fresh) => {
                    *keys = Keys {
                        refetched_at,
                        ..fresh
                    }
                }
                Err(error) => {
                    keys.refetched_at = Some(Instant::now());
                    tracing::warn!(issuer = %issuer.settings.issuer, %error, "Fetching the issuer's JWKS failed.");
                    return Err(TokenRefused::KeysUnavailable(format!(
                        "the keys of issuer `{}` could not be fetched, so the access token \
                         cannot be checked now; nothing of this request was done: try again \
                         later (the operators find the cause in the hub's log)",
                        issuer.settings.issuer
                    )));
                }
            }
            if let Some(key) = find(&keys) {
                return Ok(key);
            }
        }
        Err(refused(match kid {
            Some(kid) => format!(
                "the access token's key id `{kid}` is not among the keys of issuer `{}`",
                issuer.settings.issuer
            ),
            None => format!(
                "the access token has no key id, and issuer `{}` has not exactly one key",
                issuer.settings.issuer
            ),
        }))
    }

    async fn fetch(&self, settings: &IssuerSettings) -> Result<Keys, String> {
        let mut response = self
            .client
            .get(&settings.jwks_url)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!(
                "{} answered {}",
                settings.jwks_url,
                response.status()
            ));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_JWKS_BYTES {
                return Err(format!("the JWKS is larger than {MAX_JWKS_BYTES} bytes"));
            }
        }
        let jwks: Value = serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))?;
        let mut keys = Keys {
            fetched: true,
            ..Keys::default()
        };
        for jwk in jwks
            .get("keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(key) = parse_jwk(jwk) else {
                continue;
            };
            let key = Arc::new(key);
            match jwk.get("kid").and_then(Value::as_str) {
                Some(kid) => {
                    keys.by_id.insert(kid.to_owned(), key);
                }
                None => keys.anonymous.push(key),
            }
        }
        Ok(keys)
    }
}

/// A signing key of a JWKS, read by `jsonwebtoken`; `None` for keys for encryption, of
/// other types than RSA and EC P-256, or that do not parse.
fn parse_jwk(jwk: &Value) -> Option<Key> {
    if jwk
        .get("use")
        .and_then(Value::as_str)
        .is_some_and(|u| u != "sig")
    {
        return None;
    }
    let parsed: jsonwebtoken::jwk::Jwk = serde_json::from_value(jwk.clone()).ok()?;
    let rsa = match &parsed.algorithm {
        jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => true,
        jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(ec) => {
            let point = |v: &str| URL_SAFE_NO_PAD.decode(v).ok().filter(|b| b.len() == 32);
            if ec.curve != jsonwebtoken::jwk::EllipticCurve::P256
                || point(&ec.x).is_none()
                || point(&ec.y).is_none()
            {
                return None;
            }
            false
        }
        _ => return None,
    };
    let decoding = jsonwebtoken::DecodingKey::from_jwk(&parsed).ok()?;
    Some(Key { rsa, decoding })
}

/// Checks `signature` (base64url, as in the token) over `message` with `key` for `alg`
/// (one of RS256, PS256, ES256, checked before), through `jsonwebtoken`.
fn verify(key: &Key, alg: &str, message: &[u8], signature: &str) -> bool {
    let algorithm = match (key.rsa, alg) {
        (true, "RS256") => jsonwebtoken::Algorithm::RS256,
        (true, "PS256") => jsonwebtoken::Algorithm::PS256,
        (false, "ES256") => jsonwebtoken::Algorithm::ES256,
        _ => return false,
    };
    jsonwebtoken::crypto::verify(signature, message, &key.decoding, algorithm).unwrap_or(false)
}

/// Checks `exp`, `nbf` and `aud`; returns until when (Unix seconds) the token holds.
fn check_claims(settings: &IssuerSettings, claims: &Value) -> Result<i64, TokenRefused> {
    let now = now_seconds();
    let leeway = settings.leeway.as_secs() as i64;
    let Some(exp) = claims.get("exp").and_then(Value::as_i64) else {
        return Err(refused("the access token has no `exp` (expiry)"));
    };
    if exp + leeway <= now {
        return Err(refused(format!(
            "the access token expired {} s ago; get a new one from the issuer",
            now - exp
        )));
    }
    // A NumericDate may have a fraction (RFC 7519 section 2); anything else is no date.
    match claims.get("nbf") {
        None => {}
        Some(Value::Number(nbf)) => {
            let nbf = nbf.as_f64().unwrap_or(f64::INFINITY);
            if nbf - leeway as f64 > now as f64 {
                return Err(refused("the access token is not valid yet (`nbf`)"));
            }
        }
        Some(_) => {
            return Err(refused(
                "the access token's `nbf` must be a NumericDate (seconds since 1970)",
            ));
        }
    }
    let audience = &settings.audience;
    let for_us = match claims.get("aud") {
        Some(Value::String(aud)) => aud == audience,
        Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(audience)),
        _ => false,
    };
    if !for_us {
        return Err(refused(format!(
            "the access token is not for this hub: its `aud` must be `{audience}`"
        )));
    }
    Ok(exp.saturating_add(leeway))
}

fn principal(settings: &IssuerSettings, claims: &Value) -> Result<Principal, TokenRefused> {
    let name = claims
        .get(&settings.name_claim)
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .ok_or_else(|| {
            refused(format!(
                "the access token has no `{}` claim to name the principal",
                settings.name_claim
            ))
        })?;
    let values: Vec<&str> = match claims.get(&settings.roles_claim) {
        Some(Value::String(scope)) => scope.split_whitespace().collect(),
        Some(Value::Array(values)) => values.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut principal = Principal::new(
        format!("{}{name}", settings.name_prefix),
        values
            .iter()
            .filter_map(|v| settings.roles.get(*v).copied()),
    );
    if let Some(claim) = &settings.oin_claim
        && let Some(value) = claims.get(claim)
    {
        // The claim names an organisation whose sources the principal may publish: it must
        // be exactly an OIN, as everywhere else.
        match value.as_str().and_then(super::Oin::parse) {
            Some(oin) => principal.oin = Some(oin),
            None => {
                return Err(refused(format!(
                    "the access token's `{claim}` claim must be an OIN (20 digits), not {value}"
                )));
            }
        }
    }
    Ok(principal)
}
