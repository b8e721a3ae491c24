//! Bearer-token authentication against the principals of the configuration.
//!
//! Tokens are stored as SHA-256 hashes (hex). Tokens are long random strings, not passwords,
//! so a fast hash is the right tool: comparing hashes keeps the tokens themselves out of the
//! configuration and the process memory.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use axum::extract::FromRequestParts;
use http::header::AUTHORIZATION;
use http::request::Parts;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::problem::ApiError;
use crate::AppState;

/// What a principal may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Publishes events.
    Publisher,
    /// Manages its own subscriptions.
    Subscriber,
    /// Sees and manages every subscription.
    Admin,
    /// Reads `/metrics` (a Prometheus scraper).
    Metrics,
}

/// A party that calls the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub roles: BTreeSet<Role>,
    /// The `type` prefixes it may subscribe to; empty means any type.
    pub subscribe_type_prefixes: Vec<String>,
    /// The `source` prefixes it may publish; empty means any source.
    pub publish_source_prefixes: Vec<String>,
}

impl Principal {
    pub fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    pub fn is_admin(&self) -> bool {
        self.has(Role::Admin)
    }

    /// The principal that every request acts as when authentication is disabled.
    fn development() -> Principal {
        Principal {
            name: "development".into(),
            roles: [Role::Publisher, Role::Subscriber, Role::Admin].into(),
            subscribe_type_prefixes: Vec::new(),
            publish_source_prefixes: Vec::new(),
        }
    }
}

/// How requests are authenticated.
#[derive(Debug, Clone)]
pub enum Authentication {
    /// Bearer tokens, by the SHA-256 of the token.
    Tokens(HashMap<[u8; 32], Arc<Principal>>),
    /// Every request acts as an admin. Only for development; the binary warns loudly.
    Disabled,
}

impl Authentication {
    /// Token authentication for principals given with the hex SHA-256 of their tokens. A
    /// principal whose hash is not 64 hex digits can never authenticate (the configuration
    /// refuses such hashes before they get here).
    pub fn tokens(principals: impl IntoIterator<Item = (String, Principal)>) -> Self {
        Authentication::Tokens(
            principals
                .into_iter()
                .filter_map(|(hash, principal)| {
                    let mut digest = [0u8; 32];
                    match hex::decode_to_slice(hash.as_bytes(), &mut digest) {
                        Ok(()) => Some((digest, Arc::new(principal))),
                        Err(error) => {
                            tracing::warn!(principal = %principal.name, %error, "The token hash of a principal is not 64 hex digits; it cannot authenticate.");
                            None
                        }
                    }
                })
                .collect(),
        )
    }
}

/// The hex SHA-256 of a token, as the configuration stores it.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller(pub Arc<Principal>);

impl Caller {
    /// Fails with 403 unless the caller has `role` (admins have every role).
    pub(crate) fn require(&self, role: Role, action: &str) -> Result<(), ApiError> {
        if self.0.has(role) || self.0.is_admin() {
            return Ok(());
        }
        let role = format!("{role:?}").to_lowercase();
        Err(ApiError::Forbidden(format!(
            "principal `{}` may not {action}: that needs the `{role}` role",
            self.0.name
        )))
    }
}

impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let principals = match &state.authentication {
            Authentication::Disabled => return Ok(Caller(Arc::new(Principal::development()))),
            Authentication::Tokens(principals) => principals,
        };
        let Some(header) = parts.headers.get(AUTHORIZATION) else {
            return Err(ApiError::Unauthorized {
                detail: "send `Authorization: Bearer <token>` with a token of a configured \
                         principal"
                    .into(),
                invalid_token: false,
            });
        };
        let token = header
            .to_str()
            .ok()
            .and_then(|value| {
                let (scheme, token) = value.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|token| !token.is_empty())
            .ok_or_else(|| ApiError::Unauthorized {
                detail: "the Authorization header must be `Bearer <token>`".into(),
                invalid_token: true,
            })?;
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        match principals.get(&digest) {
            Some(principal) => Ok(Caller(Arc::clone(principal))),
            None => Err(ApiError::Unauthorized {
                detail: "the bearer token is not known to this hub".into(),
                invalid_token: true,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_known_by_their_hash_in_either_case() {
        let principal = |name: &str| Principal {
            name: name.into(),
            roles: [Role::Publisher].into(),
            subscribe_type_prefixes: Vec::new(),
            publish_source_prefixes: Vec::new(),
        };
        let Authentication::Tokens(known) = Authentication::tokens([
            (hash_token("lower").to_ascii_lowercase(), principal("a")),
            (hash_token("upper").to_ascii_uppercase(), principal("b")),
            ("not-a-hash".into(), principal("c")),
        ]) else {
            panic!("token authentication");
        };
        let find = |token: &str| {
            let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            known.get(&digest).map(|p| p.name.clone())
        };
        assert_eq!(find("lower").as_deref(), Some("a"));
        assert_eq!(find("upper").as_deref(), Some("b"));
        assert_eq!(find("not-a-hash"), None);
        assert_eq!(known.len(), 2, "an invalid hash is left out");
    }
}
