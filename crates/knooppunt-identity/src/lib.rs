//! Who calls the hub: principals and their roles, the hash of a bearer token, the OIN
//! check, the client certificate a connection presented, and access tokens of trusted
//! issuers (`tokens.rs`). The identity layer: it knows
//! nothing of HTTP handlers or the store, and everything above it (the API, the server, the
//! publish pipeline, the principals' writer) takes these types from here.

pub mod tokens;
pub mod zgw;

use std::collections::BTreeSet;

use serde::Deserialize;
use sha2::{Digest, Sha256};

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
    /// The OIN of the organisation it is: it publishes only `urn:nld:oin:<oin>:` sources,
    /// and a trusted client certificate with this OIN identifies it.
    pub oin: Option<Oin>,
}

impl Role {
    /// Every role, in order.
    pub const ALL: [Role; 4] = [
        Role::Publisher,
        Role::Subscriber,
        Role::Admin,
        Role::Metrics,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Role::Publisher => "publisher",
            Role::Subscriber => "subscriber",
            Role::Admin => "admin",
            Role::Metrics => "metrics",
        }
    }

    pub fn parse(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|role| role.name() == name)
    }
}

/// Why a principal may not publish a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceRefused {
    /// Outside its `publish_source_prefixes`.
    OutsidePrefixes,
    /// Outside its own organisation's space, `urn:nld:oin:<OIN>:` (this prefix).
    OutsideOwnSpace(String),
    /// In another organisation's source space (this OIN), which its prefixes do not name.
    OtherOrganisation(String),
    /// A source prefix that reaches into every organisation's source space (`urn:nld:oin:`
    /// or a shorter start of it, or fewer than 20 digits of an OIN).
    AllOrganisations,
    /// Neither an OIN nor source prefixes: no source space of its own to describe.
    NoOwnSpace,
}

/// Whether some source that starts with `prefix` lies in an organisation's source space
/// other than the one `prefix` already names: `prefix` is (in any case) a start of
/// `urn:nld:oin:` followed by fewer than 20 digits.
fn reaches_every_organisation(prefix: &str) -> bool {
    const SPACE: &str = "urn:nld:oin:";
    let split = prefix.len().min(SPACE.len());
    let (head, digits) = (prefix.get(..split), prefix.get(split..));
    let (Some(head), Some(digits)) = (head, digits) else {
        return false;
    };
    head.eq_ignore_ascii_case(&SPACE[..split])
        && (prefix.len() <= SPACE.len()
            || (digits.len() < 20 && digits.bytes().all(|b| b.is_ascii_digit())))
}

/// The OIN whose source space `source` is in: `urn:nld:oin:` (scheme and namespace in any
/// case, as URNs compare) followed by an OIN (20 digits, whatever follows them), if any.
pub fn oin_of_source(source: &str) -> Option<&str> {
    const SPACE: &str = "urn:nld:oin:";
    let head = source.get(..SPACE.len())?;
    if !head.eq_ignore_ascii_case(SPACE) {
        return None;
    }
    let oin = source[SPACE.len()..].get(..20)?;
    is_oin(oin).then_some(oin)
}

impl Principal {
    /// Whether it may publish `source`: an admin anything; others within their
    /// `publish_source_prefixes` (when they have any), within their organisation's space
    /// (when they have an OIN), and, with `reserve_oin_sources`, not in another
    /// organisation's space unless their prefixes name it (a supplier on its behalf).
    pub fn may_publish(
        &self,
        source: &str,
        reserve_oin_sources: bool,
    ) -> Result<(), SourceRefused> {
        if self.is_admin() {
            return Ok(());
        }
        let prefixes = &self.publish_source_prefixes;
        if !prefixes.is_empty() && !prefixes.iter().any(|p| source.starts_with(p.as_str())) {
            return Err(SourceRefused::OutsidePrefixes);
        }
        if let Some(oin) = &self.oin {
            let in_own = source
                .strip_prefix("urn:nld:oin:")
                .and_then(|rest| rest.strip_prefix(oin.as_str()))
                .is_some_and(|rest| rest.starts_with(':'));
            if !in_own {
                return Err(SourceRefused::OutsideOwnSpace(format!(
                    "urn:nld:oin:{oin}:"
                )));
            }
        }
        if reserve_oin_sources && let Some(oin) = oin_of_source(source) {
            let claimed = self.oin.as_ref().is_some_and(|own| own.as_str() == oin)
                || prefixes.iter().any(|p| oin_of_source(p) == Some(oin));
            if !claimed {
                return Err(SourceRefused::OtherOrganisation(oin.to_owned()));
            }
        }
        Ok(())
    }

    /// Whether it may describe (in the catalog) every event whose source starts with
    /// `prefix`: the prefix lies inside a space it may publish, its own `urn:nld:oin:<OIN>:`
    /// and one of its `publish_source_prefixes`, compared as prefixes (every source the
    /// prefix covers must be one it may publish), so a wider prefix is refused. Only an admin
    /// describes wider spaces, or any space when it has none of its own.
    pub fn may_describe(
        &self,
        prefix: &str,
        reserve_oin_sources: bool,
    ) -> Result<(), SourceRefused> {
        if self.is_admin() {
            return Ok(());
        }
        if reserve_oin_sources {
            if reaches_every_organisation(prefix) {
                return Err(SourceRefused::AllOrganisations);
            }
            // Every source the prefix covers is in the same space as the prefix.
            self.may_publish(prefix, true)?;
        }
        let prefixes = &self.publish_source_prefixes;
        if prefixes.is_empty() && self.oin.is_none() {
            return Err(SourceRefused::NoOwnSpace);
        }
        if !prefixes.is_empty() && !prefixes.iter().any(|p| prefix.starts_with(p.as_str())) {
            return Err(SourceRefused::OutsidePrefixes);
        }
        if let Some(oin) = &self.oin {
            let own = format!("urn:nld:oin:{oin}:");
            if !prefix.starts_with(&own) {
                return Err(SourceRefused::OutsideOwnSpace(own));
            }
        }
        Ok(())
    }

    /// A principal with these roles and no other limits.
    pub fn new(name: impl Into<String>, roles: impl IntoIterator<Item = Role>) -> Principal {
        Principal {
            name: name.into(),
            roles: roles.into_iter().collect(),
            subscribe_type_prefixes: Vec::new(),
            publish_source_prefixes: Vec::new(),
            oin: None,
        }
    }

    pub fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    pub fn is_admin(&self) -> bool {
        self.has(Role::Admin)
    }

    /// Whether the principal may do `action` (such as "replay events"), which needs `role`
    /// (an admin may do everything): `Err` says why not, for the caller to read.
    pub fn may(&self, role: Role, action: &str) -> Result<(), String> {
        if self.has(role) || self.is_admin() {
            return Ok(());
        }
        let role = format!("{role:?}").to_lowercase();
        Err(format!(
            "principal `{}` may not {action}: that needs the `{role}` role",
            self.name
        ))
    }

    /// The principal that every request acts as when authentication is disabled.
    pub fn development() -> Principal {
        Principal::new(
            "development",
            [Role::Publisher, Role::Subscriber, Role::Admin],
        )
    }
}

/// How requests are authenticated.
#[derive(Debug, Clone)]
pub enum Authentication {
    /// The principals in the store, seeded at start with these (the hex SHA-256 of a
    /// token, and its principal) where the store lacks them; and access tokens (JWTs) of
    /// these issuers.
    Enabled {
        seeds: Vec<(String, Principal)>,
        issuers: Vec<tokens::IssuerSettings>,
    },
    /// Every request acts as an admin. Only for development; the binary warns loudly.
    Disabled,
}

impl Authentication {
    /// Bearer tokens of principals given with the hex SHA-256 of their tokens (they seed the
    /// store). A hash that is not 64 hex digits can never authenticate (the configuration
    /// refuses such hashes before they get here).
    pub fn tokens(principals: impl IntoIterator<Item = (String, Principal)>) -> Self {
        Authentication::Enabled {
            seeds: principals.into_iter().collect(),
            issuers: Vec::new(),
        }
    }

    /// Also accepts access tokens (JWTs) of these issuers.
    pub fn with_issuers(self, issuers: Vec<tokens::IssuerSettings>) -> Self {
        match self {
            Authentication::Enabled { seeds, .. } => Authentication::Enabled { seeds, issuers },
            Authentication::Disabled => Authentication::Disabled,
        }
    }
}

/// The hex SHA-256 of a token, as the configuration stores it.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// An OIN (Organisatie-identificatienummer): exactly 20 ASCII digits, checked once where it
/// enters the hub (configuration, certificate, token claim, stored principal), so that a
/// value of this type is always one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Oin(String);

impl Oin {
    /// `text` as an OIN, if it is one.
    pub fn parse(text: &str) -> Option<Oin> {
        is_oin(text).then(|| Oin(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Oin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `text` is an OIN (Organisatie-identificatienummer): exactly 20 ASCII digits. The
/// one check for OINs from the configuration, the API, client certificates and access
/// tokens.
pub fn is_oin(text: &str) -> bool {
    text.len() == 20 && text.bytes().all(|b| b.is_ascii_digit())
}

/// The client certificate a connection presented, checked against the trusted CAs (set
/// by the server on every request of that connection).
#[derive(Debug, Clone)]
pub struct ClientCertificate {
    /// The OIN in the subject's serialNumber, when it has one.
    pub oin: Option<Oin>,
    /// The subject, for messages.
    pub subject: String,
    /// Whether it chains to a trusted CA, and why not (checked at the handshake).
    pub trusted: Result<(), String>,
    /// When it expires (Unix seconds): checked on every request, since a kept-alive
    /// connection can outlive it.
    pub not_after: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::is_oin;

    #[test]
    fn an_oin_value_is_always_one() {
        assert_eq!(
            super::Oin::parse("00000001823288444000").map(|o| o.to_string()),
            Some("00000001823288444000".to_owned())
        );
        assert_eq!(super::Oin::parse("00000001823288444000:evil"), None);
    }

    #[test]
    fn an_oin_is_twenty_digits() {
        assert!(is_oin("00000001823288444000"));
        for not in [
            "",
            "0000000182328844400",
            "000000018232884440000",
            "0000000182328844400x",
            "00000001823288444000:evil",
            "٠٠٠٠٠٠٠١٨٢٣٢٨٨٤٤٤٠٠٠",
        ] {
            assert!(!is_oin(not), "{not}");
        }
    }
}
