//! Signed deliveries, as the Standard Webhooks specification says: `webhook-id` (the same
//! for every attempt of one delivery), `webhook-timestamp` (seconds) and
//! `webhook-signature`, signatures of `id.timestamp.body`: `v1,` an HMAC-SHA256 under each
//! of the subscription's secrets valid now, and `v1a,` an Ed25519 signature under each of
//! the hub's keys valid now (two of either during a rotation's overlap). The body is what
//! goes out, in every mode; the event itself is not touched.

use std::sync::Arc;
use std::time::SystemTime;

use base64::Engine;
use http::{HeaderMap, HeaderName, HeaderValue};
use knooppunt_store::SigningSecrets;
use ring::signature::{Ed25519KeyPair, KeyPair};

/// The hub's Ed25519 keys for `v1a` signatures: the current one and, during a rotation's
/// overlap, the previous one with the moment it stops signing.
#[derive(Clone, Default)]
pub struct HubKeys {
    keys: Vec<HubKey>,
}

#[derive(Clone)]
struct HubKey {
    pair: Arc<Ed25519KeyPair>,
    kid: String,
    until: Option<SystemTime>,
}

/// A public key of the hub, as receivers are told of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// The key's id: base64url of the first 12 bytes of its SHA-256.
    pub kid: String,
    /// The 32 bytes of the Ed25519 public key.
    pub key: Vec<u8>,
    /// Until when it signs (a previous key during a rotation); `None` for the current one.
    pub until: Option<SystemTime>,
}

impl std::fmt::Debug for HubKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.keys.iter().map(|k| &k.kid))
            .finish()
    }
}

impl HubKeys {
    /// No keys: deliveries carry `v1` signatures only.
    pub fn none() -> HubKeys {
        HubKeys::default()
    }

    /// The keys from PKCS#8 PEM texts (`-----BEGIN PRIVATE KEY-----`, as `openssl genpkey
    /// -algorithm ed25519` writes): the current one, and a previous one that signs beside it
    /// until the moment given.
    pub fn from_pem(
        current: &str,
        previous: Option<(&str, SystemTime)>,
    ) -> Result<HubKeys, String> {
        let mut keys = vec![HubKey::from_pem(current, None)?];
        if let Some((pem, until)) = previous {
            keys.push(HubKey::from_pem(pem, Some(until))?);
        }
        Ok(HubKeys { keys })
    }

    /// The public keys that sign at `now`, the current one first (a previous key past its
    /// time signs nothing and is no longer listed).
    pub fn public(&self, now: SystemTime) -> Vec<PublicKey> {
        self.valid_at(now)
            .map(|key| PublicKey {
                kid: key.kid.clone(),
                key: key.pair.public_key().as_ref().to_vec(),
                until: key.until,
            })
            .collect()
    }

    /// `content` signed with the current key (Ed25519): its `kid` and the signature;
    /// `None` without keys. What the hub vouches for besides deliveries (its audit trail's
    /// head) is signed this way.
    pub fn sign_current(&self, content: &[u8]) -> Option<(String, Vec<u8>)> {
        let key = self.keys.first()?;
        Some((key.kid.clone(), key.pair.sign(content).as_ref().to_vec()))
    }

    fn valid_at(&self, now: SystemTime) -> impl Iterator<Item = &HubKey> {
        self.keys
            .iter()
            .filter(move |key| key.until.is_none_or(|until| now < until))
    }
}

impl HubKey {
    fn from_pem(pem: &str, until: Option<SystemTime>) -> Result<HubKey, String> {
        let body: String = pem
            .lines()
            .map(str::trim)
            .skip_while(|line| *line != "-----BEGIN PRIVATE KEY-----")
            .skip(1)
            .take_while(|line| *line != "-----END PRIVATE KEY-----")
            .collect();
        if body.is_empty() {
            return Err(
                "no `-----BEGIN PRIVATE KEY-----` block (PKCS#8, as `openssl genpkey \
                 -algorithm ed25519` writes it)"
                    .into(),
            );
        }
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|error| format!("the key block is not base64: {error}"))?;
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der)
            .map_err(|error| format!("not an Ed25519 private key in PKCS#8: {error}"))?;
        let digest = ring::digest::digest(&ring::digest::SHA256, pair.public_key().as_ref());
        let kid = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest.as_ref()[..12]);
        Ok(HubKey {
            pair: Arc::new(pair),
            kid,
            until,
        })
    }
}

/// Adds the Standard Webhooks headers to a delivery of `body` sent at `now`, when there is
/// anything to sign with.
pub fn sign(
    secrets: Option<&SigningSecrets>,
    keys: &HubKeys,
    webhook_id: &str,
    now: SystemTime,
    body: &[u8],
    headers: &mut HeaderMap,
) {
    let since_epoch = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let timestamp = since_epoch.as_secs().to_string();
    // The signed content is `id.timestamp.body`: fed to each HMAC in pieces, so the body
    // (up to the event size limit) is not copied for it; Ed25519 signs one slice, so only
    // a hub key makes the joined copy.
    let head = format!("{webhook_id}.{timestamp}.");
    let engine = &base64::engine::general_purpose::STANDARD;
    let symmetric = secrets
        .into_iter()
        .flat_map(|secrets| secrets.valid_at(since_epoch.as_millis() as u64))
        .filter_map(|secret| engine.decode(secret.strip_prefix("whsec_")?).ok())
        .map(|key| {
            let mut hmac =
                ring::hmac::Context::with_key(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key));
            hmac.update(head.as_bytes());
            hmac.update(body);
            format!("v1,{}", engine.encode(hmac.sign()))
        });
    let mut joined = None;
    let asymmetric = keys.valid_at(now).map(|key| {
        let signed = joined.get_or_insert_with(|| [head.as_bytes(), body].concat());
        format!("v1a,{}", engine.encode(key.pair.sign(signed)))
    });
    let signatures: Vec<String> = symmetric.chain(asymmetric).collect();
    if signatures.is_empty() {
        return;
    }
    // Names made once (a `&str` name is copied into a new header name on every insert).
    const ID: HeaderName = HeaderName::from_static("webhook-id");
    const TIMESTAMP: HeaderName = HeaderName::from_static("webhook-timestamp");
    const SIGNATURE: HeaderName = HeaderName::from_static("webhook-signature");
    for (name, value) in [
        (ID, webhook_id.to_owned()),
        (TIMESTAMP, timestamp),
        (SIGNATURE, signatures.join(" ")),
    ] {
        if let Ok(value) = HeaderValue::try_from(value) {
            headers.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use base64::Engine;
    use http::HeaderMap;
    use knooppunt_store::SigningSecrets;
    use ring::signature::{ED25519, UnparsedPublicKey};

    use super::{HubKeys, sign};

    fn secrets(previous: Option<(String, u64)>) -> SigningSecrets {
        SigningSecrets {
            current: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            previous,
        }
    }

    /// A new Ed25519 key as PKCS#8 PEM.
    fn pem() -> String {
        let der = ring::signature::Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new())
            .unwrap();
        let body = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
        format!("-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n")
    }

    /// The test vector of the Standard Webhooks libraries, and both signatures during a
    /// rotation's overlap (only the current one after it).
    #[test]
    fn deliveries_are_signed_as_standard_webhooks_says() {
        let at = UNIX_EPOCH + Duration::from_secs(1_614_265_330);
        let body = br#"{"test": 2432232314}"#;
        let none = HubKeys::none();
        let mut headers = HeaderMap::new();
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        sign(Some(&secrets(None)), &none, id, at, body, &mut headers);
        assert_eq!(headers["webhook-id"], id);
        assert_eq!(headers["webhook-timestamp"], "1614265330");
        assert_eq!(
            headers["webhook-signature"],
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );

        let until = 1_614_265_330_000 + 1;
        let rotating = secrets(Some(("whsec_b2xkLXNlY3JldC1rZXk=".into(), until)));
        let count = |at| {
            let mut headers = HeaderMap::new();
            sign(Some(&rotating), &none, "msg_1", at, body, &mut headers);
            headers["webhook-signature"]
                .to_str()
                .unwrap()
                .split(' ')
                .count()
        };
        assert_eq!(count(at), 2, "both during the overlap");
        assert_eq!(
            count(at + Duration::from_secs(1)),
            1,
            "the current one after it"
        );

        let mut headers = HeaderMap::new();
        sign(None, &none, "msg_1", at, body, &mut headers);
        assert!(headers.is_empty(), "nothing to sign with, no headers");
    }

    /// `v1a`: an Ed25519 signature of the same content per hub key valid now, verifiable
    /// with the public keys the hub tells of.
    #[test]
    fn the_hub_keys_sign_v1a() {
        let at = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let keys = HubKeys::from_pem(&pem(), Some((&pem(), at + Duration::from_secs(60)))).unwrap();
        let public = keys.public(at);
        assert_eq!(public.len(), 2);
        assert_eq!(
            keys.public(at + Duration::from_secs(60)).len(),
            1,
            "a previous key past its time is no longer listed"
        );
        assert!(public[0].until.is_none() && public[1].until.is_some());
        assert_ne!(public[0].kid, public[1].kid);
        let body = b"{}";
        let signed = |at| {
            let mut headers = HeaderMap::new();
            sign(None, &keys, "msg_9", at, body, &mut headers);
            let timestamp = headers["webhook-timestamp"].to_str().unwrap().to_owned();
            let content = format!("msg_9.{timestamp}.{{}}");
            let signatures: Vec<Vec<u8>> = headers["webhook-signature"]
                .to_str()
                .unwrap()
                .split(' ')
                .map(|s| {
                    let encoded = s.strip_prefix("v1a,").expect("v1a only");
                    base64::engine::general_purpose::STANDARD
                        .decode(encoded)
                        .unwrap()
                })
                .collect();
            (content, signatures)
        };
        let (content, signatures) = signed(at);
        assert_eq!(signatures.len(), 2);
        for (signature, key) in signatures.iter().zip(&public) {
            UnparsedPublicKey::new(&ED25519, &key.key)
                .verify(content.as_bytes(), signature)
                .expect("verifies with the key the hub tells of");
        }
        assert_eq!(signed(at + Duration::from_secs(61)).1.len(), 1);
        assert!(HubKeys::from_pem("not a key", None).is_err());
    }
}
