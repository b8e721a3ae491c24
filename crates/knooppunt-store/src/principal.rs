//! The parties that call the hub's API, as stored: every hub sharing a store sees the same
//! ones, and an admin changes them at runtime (the configuration file only seeds them).

/// A principal's ZGW client identity, as stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredZgwClient {
    pub client_id: String,
    /// The HS256 secret its tokens are signed with, sealed under a key of the hub's
    /// configuration (`aes256gcm.<key id>.<…>`).
    pub sealed_secret: String,
    pub scopes: Vec<String>,
}

/// A replaced bearer token still accepted for a while.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PreviousToken {
    /// Its hex SHA-256.
    pub sha256: String,
    /// Until when it is accepted (milliseconds since the Unix epoch).
    pub until: u64,
}

/// A principal as stored. The broker gives the roles their meaning; the store keeps them as
/// names so that a newer hub's role is not lost by an older one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPrincipal {
    /// Unique; how tokens, certificates and subscriptions' owners refer to it.
    pub name: String,
    pub roles: Vec<String>,
    /// The hex SHA-256 of its bearer token, if it has one (the token itself is never stored).
    pub token_sha256: Option<String>,
    /// The token it had before its newest one, still accepted until a time (a rotation with
    /// an overlap, so that its clients can move to the new token without a gap).
    pub previous_token: Option<PreviousToken>,
    /// The `type` prefixes it may subscribe to; empty means any type.
    pub subscribe_type_prefixes: Vec<String>,
    /// The `source` prefixes it may publish; empty means any source.
    pub publish_source_prefixes: Vec<String>,
    /// The OIN of the organisation it is (from its PKIoverheid certificate): a client
    /// certificate with this OIN identifies it, and it publishes only
    /// `urn:nld:oin:<oin>:` sources.
    pub oin: Option<String>,
    /// Refused on every request while set.
    pub disabled: bool,
    /// Where it came from: `api` or `configuration`.
    pub origin: String,
    /// It is also a ZGW client of the Notificaties API facade, with this client id, secret
    /// (sealed: the store never holds it in clear) and scopes.
    pub zgw: Option<StoredZgwClient>,
    pub created_at: u64,
    pub updated_at: u64,
}
