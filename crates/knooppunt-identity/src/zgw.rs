//! ZGW clients (groundwork for the Notificaties API facade, issue 24): the JWTs that ZGW
//! components send (Open Zaak's `notifications-api-common`, `gemma-zds-client`): signed
//! HS256 with a secret per client, claims `client_id`, `iat`, `iss`, `user_id` and
//! `user_representation`, no `exp`. HS256 is accepted here only, for these clients; the
//! age of a token is bounded by its `iat`.
//!
//! The secrets are needed in clear to verify, so the store keeps them sealed
//! ([`SecretKeys`]: AES-256-GCM under a key from the operator's configuration, bound to the
//! client id, with key ids so that keys can be rotated).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};

/// The scope that lets a ZGW client publish notificaties and register kanalen.
pub const PUBLISH: &str = "notificaties.publiceren";
/// The scope that lets a ZGW client subscribe (abonnementen).
pub const CONSUME: &str = "notificaties.consumeren";

/// A ZGW component the hub knows: its secret and its scopes.
#[derive(Clone, PartialEq, Eq)]
pub struct ZgwClient {
    pub client_id: String,
    /// The HS256 secret its tokens are signed with.
    pub secret: Vec<u8>,
    /// `notificaties.publiceren`, `notificaties.consumeren`.
    pub scopes: Vec<String>,
    /// Its organisation, if known: its notificaties are then published in that
    /// organisation's source space.
    pub oin: Option<super::Oin>,
    /// The stored principal it is, with that principal's rights, for a client set over the
    /// principals API; a client of the configuration file acts as `zgw:<client_id>`.
    pub principal: Option<super::Principal>,
}

impl std::fmt::Debug for ZgwClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZgwClient")
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .field("oin", &self.oin)
            .finish_non_exhaustive()
    }
}

impl ZgwClient {
    /// The `source` of the CloudEvents its notificaties become:
    /// `urn:nld:oin:<OIN>:systeem:<client_id>` for a client of a known organisation, else
    /// `urn:nld:zgw:<client_id>`.
    pub fn source(&self) -> String {
        match &self.oin {
            Some(oin) => format!("urn:nld:oin:{}:systeem:{}", oin.as_str(), self.client_id),
            None => format!("urn:nld:zgw:{}", self.client_id),
        }
    }

    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// The principal it acts as in the hub. A client of the configuration file is
    /// `zgw:<client_id>`, publishing its own source when it may publish, subscribing when it
    /// may consume. A client set on a stored principal acts with exactly that principal's
    /// rights (its OIN, type and source prefixes), less what its scopes do not allow: a
    /// role its scopes do not name, and, when the principal may publish any source, every
    /// source but the client's own.
    pub fn principal(&self) -> super::Principal {
        let scoped = |role: super::Role| match role {
            super::Role::Publisher => self.has_scope(PUBLISH),
            super::Role::Subscriber => self.has_scope(CONSUME),
            super::Role::Admin | super::Role::Metrics => false,
        };
        if let Some(stored) = &self.principal {
            let mut acting = stored.clone();
            acting.roles.retain(|role| scoped(*role));
            if acting.publish_source_prefixes.is_empty() {
                acting.publish_source_prefixes = vec![self.source()];
            }
            return acting;
        }
        super::Principal {
            name: format!("zgw:{}", self.client_id),
            roles: super::Role::ALL
                .into_iter()
                .filter(|r| scoped(*r))
                .collect(),
            subscribe_type_prefixes: Vec::new(),
            publish_source_prefixes: vec![self.source()],
            oin: self.oin.clone(),
        }
    }
}

/// The Notificaties API facade's settings.
#[derive(Debug, Clone)]
pub struct ZgwOptions {
    /// Whether `/api/v1` is served.
    pub enabled: bool,
    /// Clients of the configuration file (those set over the principals API are in the
    /// store).
    pub clients: Vec<ZgwClient>,
    /// The keys the store's client secrets are sealed with (the first seals); without
    /// them, clients cannot be set over the principals API.
    pub secret_keys: Option<std::sync::Arc<SecretKeys>>,
    /// The oldest token accepted (by its `iat`).
    pub max_token_age: Duration,
    /// How far in the future a token's `iat` may be (clocks differ).
    pub leeway: Duration,
}

impl Default for ZgwOptions {
    fn default() -> Self {
        ZgwOptions {
            enabled: true,
            clients: Vec::new(),
            secret_keys: None,
            max_token_age: Duration::from_secs(3600),
            leeway: Duration::from_secs(60),
        }
    }
}

/// What a valid ZGW token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZgwClaims {
    pub client_id: String,
    pub iss: Option<String>,
    /// Seconds since the Unix epoch.
    pub iat: u64,
    pub user_id: Option<String>,
    pub user_representation: Option<String>,
}

/// Why a ZGW token was refused; each says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZgwRefused {
    #[error("the token is not a JWT (three base64url parts with JSON): {0}")]
    Malformed(String),
    #[error("the token is signed {0}; ZGW client tokens must be signed HS256")]
    Algorithm(String),
    #[error("the token has no `client_id` claim naming the client")]
    NoClientId,
    #[error("no ZGW client `{0}` is configured")]
    UnknownClient(String),
    #[error("the token's signature does not match client `{0}`'s secret")]
    Signature(String),
    #[error("the token has no `iat` claim (when it was made, seconds since 1970)")]
    NoIssuedAt,
    #[error(
        "the token was made {0} s ago, longer than the {1} s a ZGW token is accepted: make a new one"
    )]
    TooOld(u64, u64),
    #[error("the token was made {0} s in the future: check the client's clock")]
    FromTheFuture(u64),
    #[error(
        "the token's header names critical extensions (`crit`), which the hub does not \
         understand, so it must refuse the token (RFC 7515, 4.1.11): leave `crit` out"
    )]
    Critical,
    #[error("the token expired (`exp`) {0} s ago: make a new one")]
    Expired(u64),
    #[error("the token is not valid before (`nbf`) {0} s from now: check the client's clock")]
    NotYetValid(u64),
    #[error("the token's `{0}` claim must be a number (seconds since 1970)")]
    BadTime(&'static str),
}

fn part(text: &str) -> Result<serde_json::Map<String, serde_json::Value>, ZgwRefused> {
    let bytes = URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .map_err(|e| ZgwRefused::Malformed(format!("base64url: {e}")))?;
    match serde_json::from_slice(&bytes) {
        Ok(serde_json::Value::Object(object)) => Ok(object),
        Ok(_) => Err(ZgwRefused::Malformed("a part is not a JSON object".into())),
        Err(e) => Err(ZgwRefused::Malformed(format!("JSON: {e}"))),
    }
}

/// Verifies a ZGW client token: HS256 under the secret `secret_of` gives for its
/// `client_id`, made (`iat`) at most `max_age` ago and at most `leeway` in the future, at
/// `now` (seconds since the Unix epoch).
pub fn verify(
    token: &str,
    secret_of: impl FnOnce(&str) -> Option<Vec<u8>>,
    now: u64,
    max_age: Duration,
    leeway: Duration,
) -> Result<ZgwClaims, ZgwRefused> {
    let mut parts = token.trim().split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ZgwRefused::Malformed("not three parts".into()));
    };
    let header_fields = part(header)?;
    if header_fields.contains_key("crit") {
        return Err(ZgwRefused::Critical);
    }
    let alg = header_fields
        .get("alg")
        .and_then(|a| a.as_str())
        .unwrap_or("no algorithm")
        .to_owned();
    if alg != "HS256" {
        return Err(ZgwRefused::Algorithm(alg));
    }
    let claims = part(payload)?;
    let text = |name: &str| claims.get(name).and_then(|v| v.as_str()).map(str::to_owned);
    let client_id = text("client_id")
        .filter(|c| !c.is_empty())
        .ok_or(ZgwRefused::NoClientId)?;
    let secret =
        secret_of(&client_id).ok_or_else(|| ZgwRefused::UnknownClient(client_id.clone()))?;
    let signature = URL_SAFE_NO_PAD
        .decode(signature.trim_end_matches('='))
        .map_err(|e| ZgwRefused::Malformed(format!("signature: {e}")))?;
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret);
    let signed = &token.trim()[..header.len() + 1 + payload.len()];
    ring::hmac::verify(&key, signed.as_bytes(), &signature)
        .map_err(|_| ZgwRefused::Signature(client_id.clone()))?;
    let iat = claims
        .get("iat")
        .and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)))
        .ok_or(ZgwRefused::NoIssuedAt)?;
    if iat > now.saturating_add(leeway.as_secs()) {
        return Err(ZgwRefused::FromTheFuture(iat - now));
    }
    let age = now.saturating_sub(iat);
    if age > max_age.as_secs() {
        return Err(ZgwRefused::TooOld(age, max_age.as_secs()));
    }
    // Optional, but binding when present (RFC 7519, 4.1.4 and 4.1.5), with the same leeway.
    let time = |name: &'static str| match claims.get(name) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .or_else(|| value.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .map(Some)
            .ok_or(ZgwRefused::BadTime(name)),
    };
    if let Some(exp) = time("exp")?
        && now >= exp.saturating_add(leeway.as_secs())
    {
        return Err(ZgwRefused::Expired(now - exp));
    }
    if let Some(nbf) = time("nbf")?
        && nbf > now.saturating_add(leeway.as_secs())
    {
        return Err(ZgwRefused::NotYetValid(nbf - now));
    }
    Ok(ZgwClaims {
        client_id,
        iss: text("iss"),
        iat,
        user_id: text("user_id"),
        user_representation: text("user_representation"),
    })
}

/// A client token as ZGW components make it (gemma-zds-client, notifications-api-common):
/// HS256 with the client's `secret` over `client_id` (also the issuer), `iat` (seconds
/// since the Unix epoch) and the user claims, which name `user` for audit trails.
pub fn sign(client_id: &str, secret: &[u8], iat: u64, user: &str) -> String {
    let header = serde_json::json!({"alg": "HS256", "typ": "JWT", "client_identifier": client_id});
    let claims = serde_json::json!({"iss": client_id, "iat": iat, "client_id": client_id,
                                    "user_id": user, "user_representation": user});
    jwt(&header, &claims, secret)
}

/// A JWT of `header` and `claims`, signed HS256 with `secret` (whatever they hold).
pub fn jwt(header: &serde_json::Value, claims: &serde_json::Value, secret: &[u8]) -> String {
    let signing = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let tag = ring::hmac::sign(&key, signing.as_bytes());
    format!("{signing}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
}

/// The keys client secrets are sealed with: the first seals, every one opens (so a key can
/// be rotated: add the new one first, reseal, then drop the old).
pub struct SecretKeys {
    keys: Vec<(String, LessSafeKey)>,
    random: SystemRandom,
}

impl std::fmt::Debug for SecretKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("SecretKeys").field("ids", &ids).finish()
    }
}

/// Why a sealed secret cannot be opened, or a key not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("key `{0}` must be 32 bytes in base64 (e.g. `head -c 32 /dev/urandom | base64`)")]
    BadKey(String),
    #[error("key id `{0}` must be 1 to 32 letters, digits, `-` or `_`")]
    BadKeyId(String),
    #[error("no keys: configure at least one to seal client secrets with")]
    NoKeys,
    #[error("the secret was sealed with key `{0}`, which is not configured any more")]
    UnknownKey(String),
    #[error("the sealed secret is damaged, or belongs to another client")]
    Damaged,
}

const SEALED_PREFIX: &str = "aes256gcm";

impl SecretKeys {
    /// The keys as `(id, base64 of 32 bytes)`, the sealing one first.
    pub fn new<'a>(
        keys: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<SecretKeys, SealError> {
        let mut parsed = Vec::new();
        for (id, key) in keys {
            let good_id = (1..=32).contains(&id.len())
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !good_id {
                return Err(SealError::BadKeyId(id.to_owned()));
            }
            let bytes = STANDARD
                .decode(key.trim())
                .ok()
                .filter(|b| b.len() == 32)
                .ok_or_else(|| SealError::BadKey(id.to_owned()))?;
            let unbound = UnboundKey::new(&AES_256_GCM, &bytes)
                .map_err(|_| SealError::BadKey(id.to_owned()))?;
            parsed.push((id.to_owned(), LessSafeKey::new(unbound)));
        }
        if parsed.is_empty() {
            return Err(SealError::NoKeys);
        }
        Ok(SecretKeys {
            keys: parsed,
            random: SystemRandom::new(),
        })
    }

    /// Seals `secret` of client `client_id` under the first key:
    /// `aes256gcm.<key id>.<base64 of nonce and ciphertext>`.
    pub fn seal(&self, client_id: &str, secret: &[u8]) -> String {
        let (id, key) = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .expect("the system's random source works");
        let mut sealed = secret.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(client_id.as_bytes()),
            &mut sealed,
        )
        .expect("a secret of any length seals");
        let mut bytes = nonce.to_vec();
        bytes.extend(sealed);
        format!("{SEALED_PREFIX}.{id}.{}", STANDARD.encode(bytes))
    }

    /// Opens a secret [`SecretKeys::seal`] sealed for `client_id`.
    pub fn open(&self, client_id: &str, sealed: &str) -> Result<Vec<u8>, SealError> {
        let mut parts = sealed.splitn(3, '.');
        let (Some(SEALED_PREFIX), Some(id), Some(body)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(SealError::Damaged);
        };
        let key = self
            .keys
            .iter()
            .find(|(k, _)| k == id)
            .map(|(_, key)| key)
            .ok_or_else(|| SealError::UnknownKey(id.to_owned()))?;
        let bytes = STANDARD.decode(body).map_err(|_| SealError::Damaged)?;
        if bytes.len() < NONCE_LEN {
            return Err(SealError::Damaged);
        }
        let (nonce, ciphertext) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Damaged)?;
        let mut buffer = ciphertext.to_vec();
        let plain = key
            .open_in_place(nonce, Aad::from(client_id.as_bytes()), &mut buffer)
            .map_err(|_| SealError::Damaged)?;
        Ok(plain.to_vec())
    }

    /// Whether a sealed secret should be sealed again (it is not under the first key).
    pub fn needs_reseal(&self, sealed: &str) -> bool {
        sealed.split('.').nth(1) != Some(self.keys[0].0.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"open-zaak-secret";
    const NOW: u64 = 1_800_000_000;
    const HOUR: Duration = Duration::from_secs(3600);
    const LEEWAY: Duration = Duration::from_secs(60);

    #[test]
    fn a_signed_token_verifies() {
        let signed = sign("importer", SECRET, NOW, "knooppunt import");
        let claims = verify(&signed, |_| Some(SECRET.to_vec()), NOW, HOUR, LEEWAY).unwrap();
        assert_eq!(claims.client_id, "importer");
        assert_eq!(claims.user_id.as_deref(), Some("knooppunt import"));
        let wrong = verify(&signed, |_| Some(b"another".to_vec()), NOW, HOUR, LEEWAY);
        assert!(matches!(wrong, Err(ZgwRefused::Signature(_))));
    }

    fn zds(iat: u64) -> String {
        jwt(
            &serde_json::json!({"alg": "HS256", "typ": "JWT", "client_identifier": "open-zaak"}),
            &serde_json::json!({"iss": "open-zaak", "iat": iat, "client_id": "open-zaak",
                               "user_id": "u1", "user_representation": "Ambtenaar"}),
            SECRET,
        )
    }

    fn secret_of(client: &str) -> Option<Vec<u8>> {
        (client == "open-zaak").then(|| SECRET.to_vec())
    }

    #[test]
    fn a_zgw_client_token_is_verified() {
        let claims = verify(&zds(NOW - 10), secret_of, NOW, HOUR, LEEWAY).unwrap();
        assert_eq!(claims.client_id, "open-zaak");
        assert_eq!(claims.iss.as_deref(), Some("open-zaak"));
        assert_eq!(claims.user_representation.as_deref(), Some("Ambtenaar"));
        // The same through the jsonwebtoken crate (another implementation's signing).
        let other = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            &serde_json::json!({"client_id": "open-zaak", "iat": NOW}),
            &jsonwebtoken::EncodingKey::from_secret(SECRET),
        )
        .unwrap();
        assert!(verify(&other, secret_of, NOW, HOUR, LEEWAY).is_ok());
    }

    #[test]
    fn every_bad_token_is_refused_saying_why() {
        let refused = |token: &str| verify(token, secret_of, NOW, HOUR, LEEWAY).unwrap_err();
        assert_eq!(refused(&zds(NOW - 3601)), ZgwRefused::TooOld(3601, 3600));
        assert_eq!(refused(&zds(NOW + 120)), ZgwRefused::FromTheFuture(120));
        assert!(
            verify(&zds(NOW + 30), secret_of, NOW, HOUR, LEEWAY).is_ok(),
            "within leeway"
        );
        let wrong = jwt(
            &serde_json::json!({"alg": "HS256"}),
            &serde_json::json!({"client_id": "open-zaak", "iat": NOW}),
            b"another secret",
        );
        assert_eq!(refused(&wrong), ZgwRefused::Signature("open-zaak".into()));
        let anonymous = jwt(
            &serde_json::json!({"alg": "HS256"}),
            &serde_json::json!({"iss": "x", "iat": NOW}),
            SECRET,
        );
        assert_eq!(refused(&anonymous), ZgwRefused::NoClientId);
        let stranger = jwt(
            &serde_json::json!({"alg": "HS256"}),
            &serde_json::json!({"client_id": "someone", "iat": NOW}),
            SECRET,
        );
        assert_eq!(
            refused(&stranger),
            ZgwRefused::UnknownClient("someone".into())
        );
        let undated = jwt(
            &serde_json::json!({"alg": "HS256"}),
            &serde_json::json!({"client_id": "open-zaak"}),
            SECRET,
        );
        assert_eq!(refused(&undated), ZgwRefused::NoIssuedAt);
        // `none` and other algorithms never pass, whatever the signature.
        let mut unsigned = zds(NOW);
        unsigned = unsigned.replacen(
            unsigned.split('.').next().unwrap(),
            &URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            1,
        );
        assert_eq!(refused(&unsigned), ZgwRefused::Algorithm("none".into()));
        for alg in ["HS512", "RS256"] {
            let other = jwt(
                &serde_json::json!({"alg": alg}),
                &serde_json::json!({"client_id": "open-zaak", "iat": NOW}),
                SECRET,
            );
            assert_eq!(refused(&other), ZgwRefused::Algorithm(alg.into()));
        }
        // A tampered payload breaks the signature.
        let genuine = zds(NOW);
        let mut pieces: Vec<&str> = genuine.split('.').collect();
        let forged_claims = URL_SAFE_NO_PAD.encode(
            serde_json::json!({"client_id": "open-zaak", "iat": NOW, "user_id": "admin"})
                .to_string(),
        );
        pieces[1] = &forged_claims;
        assert_eq!(
            refused(&pieces.join(".")),
            ZgwRefused::Signature("open-zaak".into())
        );
        for garbage in ["", "a.b", "a.b.c.d", "!!.!!.!!"] {
            assert!(
                matches!(refused(garbage), ZgwRefused::Malformed(_)),
                "{garbage}"
            );
        }
    }

    fn key(byte: u8) -> String {
        STANDARD.encode([byte; 32])
    }

    #[test]
    fn secrets_are_sealed_per_client_and_keys_rotate() {
        let (one, two) = (key(1), key(2));
        let old = SecretKeys::new([("k1", one.as_str())]).unwrap();
        let sealed = old.seal("open-zaak", SECRET);
        assert!(sealed.starts_with("aes256gcm.k1."));
        assert!(!sealed.contains("open-zaak-secret"));
        assert_ne!(
            sealed,
            old.seal("open-zaak", SECRET),
            "a new nonce each time"
        );
        assert_eq!(old.open("open-zaak", &sealed).unwrap(), SECRET);
        assert_eq!(
            old.open("another-client", &sealed),
            Err(SealError::Damaged),
            "bound to its client"
        );
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert_eq!(old.open("open-zaak", &tampered), Err(SealError::Damaged));
        // Rotation: the new key seals, the old still opens until it is dropped.
        let rotated = SecretKeys::new([("k2", two.as_str()), ("k1", one.as_str())]).unwrap();
        assert!(rotated.needs_reseal(&sealed));
        let resealed = rotated.seal("open-zaak", &rotated.open("open-zaak", &sealed).unwrap());
        assert!(!rotated.needs_reseal(&resealed));
        let new = SecretKeys::new([("k2", two.as_str())]).unwrap();
        assert_eq!(new.open("open-zaak", &resealed).unwrap(), SECRET);
        assert_eq!(
            new.open("open-zaak", &sealed),
            Err(SealError::UnknownKey("k1".into()))
        );
        assert_eq!(
            SecretKeys::new([("k", "c2hvcnQ=")]).unwrap_err(),
            SealError::BadKey("k".into())
        );
        assert_eq!(
            SecretKeys::new([("bad id!", one.as_str())]).unwrap_err(),
            SealError::BadKeyId("bad id!".into())
        );
        assert_eq!(
            SecretKeys::new(std::iter::empty::<(&str, &str)>()).unwrap_err(),
            SealError::NoKeys
        );
    }
}
