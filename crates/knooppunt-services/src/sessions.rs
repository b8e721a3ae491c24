//! Console sessions: a browser signs in once with a credential the API accepts (a token of
//! a principal, or a client certificate) and then carries a random secret in a cookie.
//! The rules: a session ends at its lifetime, after its idle time, at sign-out, and as
//! soon as its principal is disabled, removed, or no longer holds the credential it signed
//! in with (a rotated token ends the sessions of the old one). Kept in the store, so every
//! hub sharing it knows a session and an ended one is ended everywhere.

use std::sync::Arc;
use std::time::Duration;

use knooppunt_store::{Session, Store, StoreError, now_ms};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::{Digest, Sha256};

use crate::identity::Principal;
use crate::principals::{Found, Principals};

/// How long sessions last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOptions {
    /// A session ends this long after sign-in, whatever happens.
    pub lifetime: Duration,
    /// A session ends once unused this long.
    pub idle: Duration,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            lifetime: Duration::from_secs(8 * 3600),
            idle: Duration::from_secs(30 * 60),
        }
    }
}

/// What a session was started with, and must still hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// The hex SHA-256 of a principal's token.
    Token(String),
    /// A client certificate with this OIN.
    Certificate(String),
    /// Authentication is switched off (a development hub).
    None,
}

impl Credential {
    fn encode(&self) -> String {
        match self {
            Credential::Token(hash) => format!("token:{hash}"),
            Credential::Certificate(oin) => format!("certificate:{oin}"),
            Credential::None => "none".into(),
        }
    }
}

/// A live session and who it is.
#[derive(Debug, Clone)]
pub struct Live {
    pub session: Session,
    pub principal: Arc<Principal>,
}

/// How a sign-in went.
#[derive(Debug)]
pub enum SignIn {
    /// The cookie's secret, and the session.
    Started(String, Live),
    Disabled(String),
    Unknown,
}

/// What the console's sign-ins and sign-outs put on the audit trail (decided here, not by
/// the console): a refused sign-in as a refusal with the address it came from and why, a
/// session started with when it ends, a session ended.
pub mod trail {
    use std::net::IpAddr;

    use crate::audit::{Action, ActionName, Audit, Context};
    use crate::identity::Principal;

    /// A sign-in from `peer` refused (`why`: the credential's fault, or too many failures
    /// from the address): a refusal, for nobody known signed in.
    pub fn refused(audit: &Audit, why: &str, peer: Option<IpAddr>) {
        let details = serde_json::json!({"detail": why, "peer": peer.map(|ip| ip.to_string())});
        let action = Action::new(ActionName::ConsoleSignin, "console".to_owned(), details);
        audit.refused(&Context::default(), action);
    }

    /// `principal` signed in; its session ends at `expires_at` (milliseconds since the Unix
    /// epoch).
    pub async fn signed_in(audit: &Audit, principal: &Principal, expires_at: u64) {
        let expires = knooppunt_event::timestamp::utc_timestamp(expires_at);
        let action = Action::new(
            ActionName::ConsoleSignin,
            format!("principal/{}", principal.name),
            serde_json::json!({"expires": expires}),
        );
        audit.record(&of(principal), action).await;
    }

    /// `principal` signed out (its session ended everywhere).
    pub async fn signed_out(audit: &Audit, principal: &Principal) {
        let action = Action::new(
            ActionName::ConsoleSignout,
            format!("principal/{}", principal.name),
            serde_json::json!({}),
        );
        audit.record(&of(principal), action).await;
    }

    fn of(principal: &Principal) -> Context {
        Context {
            actor: Some(principal.name.clone()),
            actor_oin: principal.oin.as_ref().map(|o| o.as_str().to_owned()),
            ..Context::default()
        }
    }
}

/// Failed sign-ins one address may make within [`THROTTLE_WINDOW_MS`]; past them its
/// sign-ins are refused until the window ends.
pub const MAX_FAILED_SIGN_INS: u32 = 5;
const THROTTLE_WINDOW_MS: u64 = 60_000;
/// Addresses remembered at once (a bound on memory whatever the number of addresses).
const THROTTLE_CAPACITY: usize = 10_000;

/// Failed console sign-ins per client address, so that tokens cannot be guessed at speed:
/// after [`MAX_FAILED_SIGN_INS`] failures within a minute, an address waits for the rest
/// of that minute; a success forgets its failures.
#[derive(Debug, Default)]
pub struct Throttle {
    failures: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, (u32, u64)>>,
}

impl Throttle {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<std::net::IpAddr, (u32, u64)>> {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Err(seconds)`: `ip` must wait that long before it may try again.
    pub fn check(&self, ip: std::net::IpAddr, now: u64) -> Result<(), u64> {
        match self.lock().get(&ip) {
            Some((count, since))
                if *count >= MAX_FAILED_SIGN_INS && now < since + THROTTLE_WINDOW_MS =>
            {
                Err((since + THROTTLE_WINDOW_MS - now).div_ceil(1000))
            }
            _ => Ok(()),
        }
    }

    /// A sign-in from `ip` failed.
    pub fn failed(&self, ip: std::net::IpAddr, now: u64) {
        let mut failures = self.lock();
        if failures.len() >= THROTTLE_CAPACITY && !failures.contains_key(&ip) {
            failures.retain(|_, (_, since)| now < *since + THROTTLE_WINDOW_MS);
            if failures.len() >= THROTTLE_CAPACITY {
                // Still full: forget one, so a flood of addresses cannot grow this.
                if let Some(any) = failures.keys().next().copied() {
                    failures.remove(&any);
                }
            }
        }
        let entry = failures.entry(ip).or_insert((0, now));
        if now >= entry.1 + THROTTLE_WINDOW_MS {
            *entry = (0, now);
        }
        entry.0 += 1;
    }

    /// A sign-in from `ip` succeeded: its failures are forgotten.
    pub fn succeeded(&self, ip: std::net::IpAddr) {
        self.lock().remove(&ip);
    }
}

/// How often at most a session's `last_seen_at` is written.
const TOUCH_EVERY_MS: u64 = 60_000;

/// The sessions of the console.
pub struct Sessions {
    store: Arc<dyn Store>,
    options: SessionOptions,
    /// Failed sign-ins per address.
    pub throttle: Throttle,
    random: SystemRandom,
}

/// 32 random bytes as 43 URL-safe characters.
fn random_secret(random: &SystemRandom) -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    random.fill(&mut bytes).expect("the system's random source");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn id_of(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

impl Sessions {
    pub fn new(store: Arc<dyn Store>, options: SessionOptions) -> Sessions {
        Sessions {
            store,
            options,
            throttle: Throttle::default(),
            random: SystemRandom::new(),
        }
    }

    pub fn options(&self) -> SessionOptions {
        self.options
    }

    /// A random value for a form before sign-in (the CSRF token of the sign-in form).
    pub fn nonce(&self) -> String {
        random_secret(&self.random)
    }

    /// Signs in with a principal's bearer token (access tokens of issuers are for the API:
    /// they expire on their own terms, which a session would outlive).
    pub async fn with_token(
        &self,
        token: &str,
        principals: &Principals,
    ) -> Result<SignIn, StoreError> {
        let digest: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
        match principals.by_token(&digest) {
            Found::Active(principal) => {
                let credential = Credential::Token(hex::encode(digest));
                let (secret, session) = self.start(&principal.name, credential).await?;
                Ok(SignIn::Started(secret, Live { session, principal }))
            }
            Found::Disabled(name) => Ok(SignIn::Disabled(name)),
            Found::Unknown => Ok(SignIn::Unknown),
        }
    }

    /// Starts a session for a principal the caller authenticated otherwise (a client
    /// certificate, or none on a development hub).
    pub async fn with_principal(
        &self,
        principal: Arc<Principal>,
        credential: Credential,
    ) -> Result<(String, Live), StoreError> {
        let (secret, session) = self.start(&principal.name, credential).await?;
        Ok((secret, Live { session, principal }))
    }

    /// Starts a session for `principal`; the secret for the browser's cookie.
    async fn start(
        &self,
        principal: &str,
        credential: Credential,
    ) -> Result<(String, Session), StoreError> {
        let secret = random_secret(&self.random);
        let now = now_ms();
        let session = Session {
            id: id_of(&secret),
            principal: principal.to_owned(),
            credential: credential.encode(),
            csrf: random_secret(&self.random),
            created_at: now,
            expires_at: now + self.options.lifetime.as_millis() as u64,
            last_seen_at: now,
        };
        self.store.put_session(&session).await?;
        Ok((secret, session))
    }

    /// The live session of a cookie's secret, with its principal as it is now; `None` when
    /// there is none, or it ended (and then it is removed).
    pub async fn find(
        &self,
        secret: &str,
        principals: &Principals,
        development: bool,
    ) -> Result<Option<Live>, StoreError> {
        let id = id_of(secret);
        let Some(mut session) = self.store.session(&id).await? else {
            return Ok(None);
        };
        let now = now_ms();
        let idle = self.options.idle.as_millis() as u64;
        let principal = holder(&session, principals, development);
        let over = session.expires_at <= now || session.last_seen_at + idle <= now;
        let Some(principal) = principal.filter(|_| !over) else {
            self.store.delete_session(&id).await?;
            return Ok(None);
        };
        if now >= session.last_seen_at + TOUCH_EVERY_MS {
            session.last_seen_at = now;
            self.store.put_session(&session).await?;
        }
        Ok(Some(Live { session, principal }))
    }

    /// Ends the session of a cookie's secret.
    pub async fn end(&self, secret: &str) -> Result<bool, StoreError> {
        self.store.delete_session(&id_of(secret)).await
    }

    /// Removes ended sessions; how many.
    pub async fn sweep(&self) -> Result<u64, StoreError> {
        let now = now_ms();
        self.store
            .sweep_sessions(
                now,
                now.saturating_sub(self.options.idle.as_millis() as u64),
            )
            .await
    }
}

/// The principal a session belongs to, if it still holds the session's credential.
fn holder(session: &Session, principals: &Principals, development: bool) -> Option<Arc<Principal>> {
    if session.credential == "none" {
        return development.then(|| Arc::new(Principal::development()));
    }
    let Found::Active(principal) = principals.by_name(&session.principal) else {
        return None;
    };
    let holds = match session.credential.split_once(':') {
        Some(("token", hash)) => principals
            .get(&session.principal)
            .and_then(|stored| stored.token_sha256)
            .is_some_and(|stored| stored.eq_ignore_ascii_case(hash)),
        Some(("certificate", oin)) => principal.oin.as_ref().is_some_and(|o| o.as_str() == oin),
        _ => false,
    };
    holds.then_some(principal)
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}
