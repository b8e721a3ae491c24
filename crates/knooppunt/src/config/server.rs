//! `[server]`: where and how the hub listens, and `[[issuers]]` of access tokens.

use super::*;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ServerConfig {
    /// The address and port the API listens on.
    pub(crate) listen: SocketAddr,
    /// The directory of the embedded store; created when missing.
    pub(crate) data_dir: PathBuf,
    /// The hub's name towards sinks: `WebHook-Request-Origin` on every delivery and
    /// handshake (sinks grant consent to this name).
    pub(crate) origin: String,
    /// The hub's base URL as sinks reach it, for the validation callback URL; when absent,
    /// the `Host` of the request that created the subscription.
    pub(crate) public_url: Option<String>,
    /// Connections served at once (1 to 100000); past it, the one idle for longest is
    /// closed to make room, or new ones wait to be accepted while all are busy.
    pub(crate) max_connections: usize,
    /// Connections served at once for one client IP address (1 to max_connections); past
    /// it, new ones of that address get 429. Behind a reverse proxy, set it to
    /// max_connections.
    pub(crate) max_connections_per_peer: usize,
    /// ISO 8601 duration: how long a request's headers (and a kept-alive connection's wait
    /// for the next request) may take.
    pub(crate) header_timeout: String,
    /// ISO 8601 duration: how long reading a request's body may take (408 after it).
    pub(crate) body_timeout: String,
    /// ISO 8601 duration: a connection without any traffic for this long is closed.
    pub(crate) idle_timeout: String,
    /// A second address serving `/metrics` without a token (and `/healthz`, `/readyz`),
    /// for a monitoring network; on `listen`, `/metrics` needs the `metrics` role.
    pub(crate) metrics_listen: Option<SocketAddr>,
    /// HTTPS: a PEM file with the hub's certificate chain (with `tls_key`).
    pub(crate) tls_certificate: Option<PathBuf>,
    /// HTTPS: a PEM file with the hub's private key.
    pub(crate) tls_key: Option<PathBuf>,
    /// HTTPS: a PEM file of the CAs whose client certificates identify principals (by the
    /// OIN in the subject's serialNumber), e.g. the PKIoverheid private services CAs.
    pub(crate) tls_client_ca: Option<PathBuf>,
    /// HTTPS with client certificates: files of certificate revocation lists (PEM or DER,
    /// such as PKIoverheid's), read again when they change; a revoked certificate
    /// identifies no one on connections made after that.
    #[serde(deserialize_with = "super::list_or_commas")]
    pub(crate) tls_client_crl: Vec<PathBuf>,
    /// Threads running the hub's tasks (1 to 1024); by default one for every CPU the hub
    /// may use.
    pub(crate) worker_threads: Option<usize>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("data"),
            origin: "knooppunt".into(),
            public_url: None,
            max_connections: 1024,
            max_connections_per_peer: 256,
            header_timeout: "PT10S".into(),
            body_timeout: "PT30S".into(),
            idle_timeout: "PT90S".into(),
            metrics_listen: None,
            tls_certificate: None,
            tls_key: None,
            tls_client_ca: None,
            tls_client_crl: Vec::new(),
            worker_threads: None,
        }
    }
}

/// An authorization server whose access tokens the hub accepts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IssuerConfig {
    /// The `iss` of its tokens.
    pub(crate) issuer: String,
    /// Its JWKS (public keys); https, or http on this machine only.
    pub(crate) jwks_url: String,
    /// The `aud` a token must have to be for this hub.
    pub(crate) audience: String,
    /// The claim naming the principal: `sub` (default), or `client_id`.
    #[serde(default)]
    pub(crate) name_claim: Option<String>,
    /// Put before every name from this issuer (e.g. `idp-a:`), so that two issuers'
    /// principals never share a name and each other's subscriptions.
    #[serde(default)]
    pub(crate) name_prefix: String,
    /// The claim with the roles: `scope` (default; space-separated) or an array claim.
    #[serde(default)]
    pub(crate) roles_claim: Option<String>,
    /// Claim values and the role each gives; default `knooppunt:publisher` →
    /// `publisher`, and likewise for `subscriber`, `admin` and `metrics`.
    #[serde(default)]
    pub(crate) roles: std::collections::BTreeMap<String, Role>,
    /// The claim with the organisation's OIN, if the issuer sets one: the principal then
    /// publishes only `urn:nld:oin:<OIN>:` sources.
    #[serde(default)]
    pub(crate) oin_claim: Option<String>,
}

impl ServerConfig {
    /// The threads running the hub's tasks, checked; `None`: the default.
    pub(crate) fn worker_threads(&self) -> anyhow::Result<Option<usize>> {
        self.worker_threads
            .map(|threads| within("server.worker_threads", threads, 1..=1024))
            .transpose()
    }

    /// The bounds on inbound connections, checked.
    pub(crate) fn limits(&self) -> anyhow::Result<knooppunt_broker::ServerLimits> {
        let max_connections = within("server.max_connections", self.max_connections, 1..=100_000)?;
        Ok(knooppunt_broker::ServerLimits {
            max_connections,
            max_connections_per_peer: within(
                "server.max_connections_per_peer",
                self.max_connections_per_peer,
                1..=max_connections,
            )?,
            header_timeout: duration("server.header_timeout", &self.header_timeout)?,
            body_timeout: duration("server.body_timeout", &self.body_timeout)?,
            idle_timeout: duration("server.idle_timeout", &self.idle_timeout)?,
        })
    }
}

impl ServerConfig {
    /// The HTTPS settings, when `tls_certificate` and `tls_key` are set.
    pub(crate) fn tls(&self) -> anyhow::Result<Option<knooppunt_broker::TlsSettings>> {
        let read = |key: &str, path: &Path| {
            std::fs::read(path).map_err(|error| {
                anyhow::anyhow!("server.{key}: cannot read {}: {error}", path.display())
            })
        };
        let (certificate, key) = match (&self.tls_certificate, &self.tls_key) {
            (Some(certificate), Some(key)) => {
                (read("tls_certificate", certificate)?, read("tls_key", key)?)
            }
            (None, None) if self.tls_client_ca.is_some() => {
                bail!(
                    "server.tls_client_ca: client certificates need HTTPS: set server.tls_certificate and server.tls_key"
                )
            }
            (None, None) => return Ok(None),
            _ => bail!("server.tls_certificate and server.tls_key: set both for HTTPS, or neither"),
        };
        let client_ca = match &self.tls_client_ca {
            Some(path) => Some(read("tls_client_ca", path)?),
            None => None,
        };
        if !self.tls_client_crl.is_empty() && client_ca.is_none() {
            bail!(
                "server.tls_client_crl: revocation lists need client certificates: set \
                 server.tls_client_ca"
            );
        }
        let settings =
            knooppunt_broker::TlsSettings::from_pem(&certificate, &key, client_ca.as_deref())
                .map_err(|why| anyhow::anyhow!("server.tls_*: {why}"))?;
        if self.tls_client_crl.is_empty() {
            return Ok(Some(settings));
        }
        settings
            .with_revocation_lists(self.tls_client_crl.clone())
            .map(Some)
            .map_err(|why| anyhow::anyhow!("server.tls_client_crl: {why}"))
    }
}
