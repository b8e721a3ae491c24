//! Authentication: bearer tokens of the principals in the store, access tokens (JWTs) of
//! trusted issuers (`identity/tokens.rs`), and client certificates with an OIN (mTLS, `server/tls.rs`).
//!
//! Tokens are stored as SHA-256 hashes (hex). Tokens are long random strings, not passwords,
//! so a fast hash is the right tool: comparing hashes keeps the tokens themselves out of the
//! configuration and the process memory.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use http::header::AUTHORIZATION;
use http::request::Parts;
use sha2::{Digest, Sha256};

pub(crate) use crate::identity::ClientCertificate;
pub use crate::identity::{Authentication, Principal, Role, hash_token};
use crate::problem::ApiError;
use crate::request::RequestAudit;
use knooppunt_services::app::AppState;
use knooppunt_services::principals::Found;

/// A principal the console signed in, acting through the API in-process: the console's
/// pages call the API's own handlers with it (a request extension, which nothing from the
/// network can set), so they see and do exactly what the API lets that principal see and
/// do, on the same audit trail.
#[derive(Debug, Clone)]
pub struct Delegated(pub Arc<Principal>);

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Caller(pub Arc<Principal>);

impl Caller {
    /// Fails with 403 unless the caller has `role` (admins have every role).
    pub(crate) fn require(&self, role: Role, action: &str) -> Result<(), ApiError> {
        self.0.may(role, action).map_err(ApiError::Forbidden)
    }
}

/// The principal a credential named, or why it is refused.
fn admit(found: Found, credential: &str) -> Result<Caller, ApiError> {
    match found {
        Found::Active(principal) => Ok(Caller(principal)),
        Found::Disabled(name) => Err(ApiError::Forbidden(format!(
            "principal `{name}` is disabled; an administrator of the hub can enable it again"
        ))),
        Found::Unknown => Err(ApiError::Unauthorized {
            detail: format!("{credential} is not known to this hub"),
            invalid_token: true,
        }),
    }
}

/// The principal a client certificate names by its OIN: trusted at the handshake, not expired
/// since, with an OIN that a principal has.
pub fn by_certificate(
    state: &AppState,
    certificate: &ClientCertificate,
) -> Result<Caller, ApiError> {
    let refused = |detail: String| ApiError::Unauthorized {
        detail,
        invalid_token: false,
    };
    let subject = &certificate.subject;
    if let Err(reason) = &certificate.trusted {
        return Err(refused(format!(
            "the client certificate `{subject}` is not trusted ({reason}); use a certificate \
             issued under a CA this hub trusts (PKIoverheid), or send `Authorization: Bearer \
             <token>`"
        )));
    }
    let now = (knooppunt_store::now_ms() / 1000) as i64;
    if certificate
        .not_after
        .is_some_and(|not_after| now > not_after)
    {
        return Err(refused(format!(
            "the client certificate `{subject}` expired during this connection; use its \
             successor on a new connection"
        )));
    }
    let Some(oin) = &certificate.oin else {
        return Err(refused(format!(
            "the client certificate `{subject}` has no OIN in its subject's serialNumber; use a \
             PKIoverheid certificate, or send `Authorization: Bearer <token>`"
        )));
    };
    admit(
        state.principals().by_oin(oin.as_str()),
        &format!(
            "the client certificate is trusted, but OIN {oin} (no principal has it; an \
             administrator gives a principal this `oin`)"
        ),
    )
}

impl FromRequestParts<Arc<AppState>> for Caller {
    type Rejection = ApiError;

    /// Authenticates, and tells the request's audit context who it is.
    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let caller = authenticate(parts, state).await;
        if let (Ok(caller), Some(request)) = (&caller, parts.extensions.get::<RequestAudit>()) {
            request.identify(&caller.0);
        }
        caller
    }
}

async fn authenticate(parts: &mut Parts, state: &Arc<AppState>) -> Result<Caller, ApiError> {
    if let Some(Delegated(principal)) = parts.extensions.get::<Delegated>() {
        return Ok(Caller(Arc::clone(principal)));
    }
    {
        if let Authentication::Disabled = &state.authentication() {
            return Ok(Caller(Arc::new(Principal::development())));
        }
        let Some(header) = parts.headers.get(AUTHORIZATION) else {
            if let Some(certificate) = parts.extensions.get::<ClientCertificate>() {
                return by_certificate(state, certificate);
            }
            return Err(ApiError::Unauthorized {
                detail: "send `Authorization: Bearer <token>` with a token of a principal of \
                         this hub (or an access token of a trusted issuer)"
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
        if crate::identity::tokens::looks_like_jwt(token) && state.issuers().configured() {
            let principal = state.issuers().authenticate(token).await?;
            // A stored principal of the same name can disable it, and limit it: its type
            // and source prefixes apply, and its OIN when the token gives none.
            return match state.principals().by_name(&principal.name) {
                Found::Disabled(name) => admit(Found::Disabled(name), ""),
                Found::Active(stored) => {
                    let mut limited = Principal::clone(&principal);
                    limited
                        .subscribe_type_prefixes
                        .clone_from(&stored.subscribe_type_prefixes);
                    limited
                        .publish_source_prefixes
                        .clone_from(&stored.publish_source_prefixes);
                    match (&limited.oin, &stored.oin) {
                        (None, _) => limited.oin.clone_from(&stored.oin),
                        (Some(claimed), Some(own)) if claimed != own => {
                            return Err(ApiError::Forbidden(format!(
                                "the access token says OIN {claimed}, but principal `{}` is \
                                 OIN {own}; the issuer's `oin` claim must be the principal's",
                                stored.name
                            )));
                        }
                        _ => {}
                    }
                    Ok(Caller(Arc::new(limited)))
                }
                Found::Unknown => Ok(Caller(principal)),
            };
        }
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        admit(state.principals().by_token(&digest), "the bearer token")
    }
}

impl RequestAudit {
    /// The context of an action `caller` takes in this request.
    pub(crate) fn of(&self, caller: &Caller) -> knooppunt_services::audit::Context {
        self.of_principal(&caller.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_have_one_name_each() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.name()), Some(role));
        }
        assert_eq!(Role::parse("root"), None);
    }
}
