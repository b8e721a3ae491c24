//! The configuration file (`config/knooppunt.toml`): serde structs with a doc comment per
//! field, defaults for every key, unknown keys refused. Every key of every section can be
//! overridden by an environment variable `KNOOPPUNT_<SECTION>_<KEY>` (upper case), e.g.
//! `KNOOPPUNT_SERVER_LISTEN=0.0.0.0:8080` or `KNOOPPUNT_INGEST_MAX_EVENT_BYTES=2097152`.

use std::collections::{BTreeSet, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use knooppunt_broker::{IngestOptions, MIN_EVENT_BYTES, Principal, Role};
use knooppunt_event::ProfileLevel;
use knooppunt_store::{ConfigDefaults, parse_iso8601_duration};
use serde::Deserialize;

/// The whole configuration; every section has defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Config {
    pub(crate) server: ServerConfig,
    /// Where the hub keeps its state: the embedded store, or a PostgreSQL database shared
    /// by several hubs.
    pub(crate) store: StoreConfig,
    /// How published events are accepted.
    pub(crate) ingest: IngestConfig,
    /// How published events are validated.
    pub(crate) validation: ValidationConfig,
    /// How events are delivered to subscribers.
    pub(crate) delivery: DeliveryConfig,
    /// How large and deep subscriptions' filters may be.
    pub(crate) filters: FiltersConfig,
    /// What the hub logs, and how.
    pub(crate) log: LogConfig,
    /// The audit trail.
    pub(crate) audit: AuditConfig,
    /// The Notificaties API 1.0 facade (`/api/v1`) for ZGW components.
    pub(crate) zgw: ZgwConfig,
    /// The web pages at `/console`.
    pub(crate) console: ConsoleConfig,
    /// The bounds on undelivered data.
    pub(crate) backlog: BacklogConfig,
    /// The parties that may call the API: they seed the store at start (where it lacks
    /// them); after that, admins manage principals at runtime (`knooppunt principals`).
    pub(crate) principals: Vec<PrincipalConfig>,
    /// `KNOOPPUNT_` variables of the environment that are not settings (a Kubernetes
    /// Service named `knooppunt` injects `KNOOPPUNT_SERVICE_HOST`, `KNOOPPUNT_PORT`, …):
    /// left alone, and logged once at debug when the hub starts.
    #[serde(skip)]
    pub(crate) ignored_variables: Vec<String>,
    /// Where the settings came from, for the start-up log: the file read, or that there was
    /// none (the defaults and the environment).
    #[serde(skip)]
    pub(crate) source: String,
    /// Authorization servers whose access tokens (JWTs, OAuth NL GOV) the hub accepts.
    pub(crate) issuers: Vec<IssuerConfig>,
}

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
    pub(crate) tls_client_crl: Vec<PathBuf>,
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

/// The store's backend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum StoreBackend {
    /// The embedded store in `server.data_dir` (one hub).
    #[default]
    Embedded,
    /// A PostgreSQL database at `store.url`, which several hubs can share.
    Postgres,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct StoreConfig {
    /// `embedded` (the default, in `server.data_dir`) or `postgres`.
    pub(crate) backend: StoreBackend,
    /// For `postgres`: `postgres://user:password@host:port/database`. The schema is created
    /// and migrated at start-up.
    pub(crate) url: Option<String>,
    /// For `postgres`: connections in this hub's pool (2 to 1000).
    pub(crate) pool_size: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            backend: StoreBackend::Embedded,
            url: None,
            pool_size: 16,
        }
    }
}

impl StoreConfig {
    /// The PostgreSQL settings, when the backend is `postgres`.
    pub(crate) fn postgres(&self) -> anyhow::Result<Option<knooppunt_store_postgres::PgOptions>> {
        if self.backend != StoreBackend::Postgres {
            return Ok(None);
        }
        let Some(url) = self.url.as_deref().filter(|u| !u.trim().is_empty()) else {
            bail!(
                "store.url: the postgres backend needs a URL, e.g. \
                 postgres://knooppunt:secret@db.example.nl:5432/knooppunt (or set KNOOPPUNT_STORE_URL)"
            );
        };
        if !(2..=1000).contains(&self.pool_size) {
            bail!("store.pool_size: must be from 2 to 1000");
        }
        let mut options = knooppunt_store_postgres::PgOptions::new(url);
        options.pool_size = self.pool_size;
        Ok(Some(options))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct LogConfig {
    /// The level (`error`, `warn`, `info`, `debug`, `trace`), or a filter such as
    /// `info,knooppunt_delivery=debug`.
    pub(crate) level: String,
    /// `pretty` (for people) or `json` (one object per line, for log collectors).
    pub(crate) format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            format: LogFormat::Pretty,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogFormat {
    Pretty,
    Json,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct DeliveryConfig {
    /// Deliveries in flight at once per unordered subscription (ordered ones have one).
    pub(crate) max_in_flight: usize,
    /// The most replays one hub runs at once (1 to 64).
    pub(crate) max_replays: usize,
    /// Events one replay queues per second at most (1 to 1000000).
    pub(crate) replay_rate: u32,
    /// ISO 8601 duration: a replay whose hub stopped is taken over by another after this.
    pub(crate) replay_takeover: String,
    /// ISO 8601 duration: how long shutting down waits for delivery attempts in flight.
    pub(crate) shutdown_grace: String,
    /// ISO 8601 duration: how long a subscription's previous signing secret keeps
    /// signing after a rotation.
    pub(crate) signing_overlap: String,
    /// The hub's Ed25519 key (PKCS#8 PEM) for `v1a` signatures; without it, deliveries
    /// carry the subscriptions' `v1` signatures only.
    pub(crate) signing_key_file: Option<PathBuf>,
    /// The key it replaced, which signs too until `previous_signing_key_until`.
    pub(crate) previous_signing_key_file: Option<PathBuf>,
    /// RFC 3339: until when the previous key signs.
    pub(crate) previous_signing_key_until: Option<String>,
    /// A PEM file of CA certificates to trust for `https` sinks, next to the system's.
    pub(crate) ca_file: Option<PathBuf>,
    /// Accept `http://` sinks off this machine (only for test environments without TLS).
    pub(crate) allow_http_sinks: bool,
    /// Requests in flight to all sinks together (1 to 100000).
    pub(crate) max_connections: usize,
    /// Requests in flight to one sink (scheme, host and port); 1 to 10000.
    pub(crate) max_connections_per_sink: usize,
    /// Idle connections kept per sink (0 to 1000).
    pub(crate) max_idle_per_sink: usize,
    /// Sinks whose idle connections are kept at once (1 to 100000).
    pub(crate) max_idle_sinks: usize,
    /// ISO 8601 duration: how long an idle connection to a sink is kept.
    pub(crate) idle_timeout: String,
    /// Failures in a row after which a sink's breaker opens (1 to 1000).
    pub(crate) breaker_failures: u32,
    /// ISO 8601 duration: the longest pause between probes of a failing sink.
    pub(crate) breaker_max_pause: String,
    /// ISO 8601 duration: the longest `Retry-After` honoured as given.
    pub(crate) max_retry_after: String,
    /// ISO 8601 duration: a delivery's lease lasts twice its subscription's `timeout` plus
    /// this. With several hubs on one database, a killed hub's deliveries are taken over by
    /// another once their leases run out.
    pub(crate) lease_margin: String,
    /// CIDRs of reserved networks (loopback, private, link-local, ...) sinks may still be in;
    /// in the environment also a comma-separated list.
    #[serde(deserialize_with = "list_or_commas")]
    pub(crate) allow_sink_networks: Vec<String>,
    /// The default delivery policy: what a subscription's `config` gets for a key it leaves
    /// out (`mode`).
    pub(crate) default_mode: String,
    /// Default `ordering`.
    pub(crate) default_ordering: String,
    /// Default `maxAttempts`.
    pub(crate) default_max_attempts: u32,
    /// Default `ttl` (ISO 8601 duration).
    pub(crate) default_ttl: String,
    /// Default `initialBackoff` (ISO 8601 duration).
    pub(crate) default_initial_backoff: String,
    /// Default `maxBackoff` (ISO 8601 duration).
    pub(crate) default_max_backoff: String,
    /// Default `timeout` (ISO 8601 duration).
    pub(crate) default_timeout: String,
}

impl DeliveryConfig {
    /// The hub's signing keys from `signing_key_file` (and the previous one).
    fn hub_keys(&self) -> anyhow::Result<knooppunt_broker::HubKeys> {
        let read = |key: &str, path: &PathBuf| {
            std::fs::read_to_string(path).map_err(|error| {
                anyhow::anyhow!("delivery.{key}: cannot read {}: {error}", path.display())
            })
        };
        let Some(path) = &self.signing_key_file else {
            if self.previous_signing_key_file.is_some() {
                bail!("delivery.previous_signing_key_file: needs delivery.signing_key_file");
            }
            return Ok(knooppunt_broker::HubKeys::none());
        };
        let current = read("signing_key_file", path)?;
        let previous = match (
            &self.previous_signing_key_file,
            &self.previous_signing_key_until,
        ) {
            (None, None) => None,
            (Some(path), Some(until)) => {
                let ms = knooppunt_event::timestamp::epoch_millis(until).ok_or_else(|| {
                    anyhow::anyhow!(
                        "delivery.previous_signing_key_until: `{until}` is not an RFC 3339 time"
                    )
                })?;
                let until = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
                Some((read("previous_signing_key_file", path)?, until))
            }
            _ => bail!(
                "delivery.previous_signing_key_file and previous_signing_key_until: give both \
                 (the key a rotation replaced, and until when it signs), or neither"
            ),
        };
        knooppunt_broker::HubKeys::from_pem(
            &current,
            previous.as_ref().map(|(pem, until)| (pem.as_str(), *until)),
        )
        .map_err(|why| anyhow::anyhow!("delivery.signing_key_file: {why}"))
    }
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        let standard = ConfigDefaults::default();
        DeliveryConfig {
            max_in_flight: 16,
            max_replays: 4,
            replay_rate: 5_000,
            replay_takeover: "PT30S".into(),
            shutdown_grace: "PT10S".into(),
            signing_overlap: "PT24H".into(),
            signing_key_file: None,
            previous_signing_key_file: None,
            previous_signing_key_until: None,
            ca_file: None,
            allow_http_sinks: false,
            max_connections: 512,
            max_connections_per_sink: 32,
            max_idle_per_sink: 32,
            max_idle_sinks: 128,
            idle_timeout: "PT30S".into(),
            breaker_failures: 5,
            breaker_max_pause: "PT60S".into(),
            max_retry_after: "PT24H".into(),
            lease_margin: "PT30S".into(),
            allow_sink_networks: Vec::new(),
            default_mode: standard.get("mode").into(),
            default_ordering: standard.get("ordering").into(),
            default_max_attempts: standard.get("maxAttempts").parse().expect("a number"),
            default_ttl: standard.get("ttl").into(),
            default_initial_backoff: standard.get("initialBackoff").into(),
            default_max_backoff: standard.get("maxBackoff").into(),
            default_timeout: standard.get("timeout").into(),
        }
    }
}

/// A list of strings, or one string of comma-separated items (as an environment variable
/// gives it).
fn list_or_commas<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrCommas {
        List(Vec<String>),
        Commas(String),
    }
    Ok(match ListOrCommas::deserialize(deserializer)? {
        ListOrCommas::List(list) => list,
        ListOrCommas::Commas(text) => text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

/// `value` when it is within `range`, else an error naming `key`.
fn within(
    key: &str,
    value: usize,
    range: std::ops::RangeInclusive<usize>,
) -> anyhow::Result<usize> {
    if range.contains(&value) {
        Ok(value)
    } else {
        bail!(
            "{key}: {value} is outside {} to {}",
            range.start(),
            range.end()
        )
    }
}

fn duration(key: &str, text: &str) -> anyhow::Result<std::time::Duration> {
    let duration = parse_iso8601_duration(text).map_err(|why| anyhow::anyhow!("{key}: {why}"))?;
    if duration.is_zero() {
        bail!("{key}: must be longer than zero");
    }
    Ok(duration)
}

impl ServerConfig {
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

impl DeliveryConfig {
    /// The bounds on outbound connections, checked.
    pub(crate) fn connection_limits(&self) -> anyhow::Result<knooppunt_broker::ConnectionLimits> {
        Ok(knooppunt_broker::ConnectionLimits {
            max_connections: within(
                "delivery.max_connections",
                self.max_connections,
                1..=100_000,
            )?,
            max_per_sink: within(
                "delivery.max_connections_per_sink",
                self.max_connections_per_sink,
                1..=10_000,
            )?,
            max_idle_per_sink: within(
                "delivery.max_idle_per_sink",
                self.max_idle_per_sink,
                0..=1000,
            )?,
            max_idle_sinks: within("delivery.max_idle_sinks", self.max_idle_sinks, 1..=100_000)?,
            idle_timeout: duration("delivery.idle_timeout", &self.idle_timeout)?,
            breaker_failures: within(
                "delivery.breaker_failures",
                self.breaker_failures as usize,
                1..=1000,
            )? as u32,
            breaker_max_pause: duration("delivery.breaker_max_pause", &self.breaker_max_pause)?,
        })
    }

    /// The default delivery policy for subscriptions, checked; a problem names the key of
    /// this file.
    pub(crate) fn subscription_defaults(&self) -> anyhow::Result<ConfigDefaults> {
        let max_attempts = self.default_max_attempts.to_string();
        // (the API's key, this file's key, the value)
        let keys: [(&str, &str, &str); 7] = [
            ("mode", "default_mode", &self.default_mode),
            ("ordering", "default_ordering", &self.default_ordering),
            ("maxAttempts", "default_max_attempts", &max_attempts),
            ("ttl", "default_ttl", &self.default_ttl),
            (
                "initialBackoff",
                "default_initial_backoff",
                &self.default_initial_backoff,
            ),
            (
                "maxBackoff",
                "default_max_backoff",
                &self.default_max_backoff,
            ),
            ("timeout", "default_timeout", &self.default_timeout),
        ];
        let overrides = keys
            .iter()
            .map(|(api, _, value)| (*api, (*value).to_owned()));
        ConfigDefaults::try_new(overrides).map_err(|errors| {
            let named: Vec<String> = errors
                .iter()
                .map(|error| {
                    let file_key = keys
                        .iter()
                        .find(|(api, _, _)| *api == error.key)
                        .map_or(error.key.as_str(), |(_, key, _)| *key);
                    format!("delivery.{file_key}: {}", error.message)
                })
                .collect();
            anyhow::anyhow!("{}", named.join("; "))
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct AuditConfig {
    /// ISO 8601 duration: how long audit entries (and delivery receipts) are kept (the
    /// newest entry always is).
    pub(crate) retention: String,
    /// Whether every delivered event leaves a receipt ("who received what").
    pub(crate) receipts: bool,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            retention: "P365D".into(),
            receipts: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ConsoleConfig {
    /// ISO 8601 duration: a console session ends this long after sign-in.
    pub(crate) session_lifetime: String,
    /// ISO 8601 duration: a console session ends once unused this long.
    pub(crate) session_idle: String,
    /// A style sheet of an NL Design System theme's design tokens (a file), applied over
    /// the built-in, neutral theme. Empty: none.
    pub(crate) theme_css: String,
    /// The class that theme's tokens are scoped to (e.g. `rijkshuisstijl-theme`). Empty:
    /// the style sheet applies as it is.
    pub(crate) theme_class: String,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            session_lifetime: "PT8H".into(),
            session_idle: "PT30M".into(),
            theme_css: String::new(),
            theme_class: String::new(),
        }
    }
}

/// The largest theme style sheet the console takes.
const MAX_THEME_BYTES: u64 = 1024 * 1024;

impl ConsoleConfig {
    pub(crate) fn options(&self) -> anyhow::Result<knooppunt_broker::SessionOptions> {
        let lifetime = parse_iso8601_duration(&self.session_lifetime)
            .map_err(|why| anyhow::anyhow!("console.session_lifetime: {why}"))?;
        let idle = parse_iso8601_duration(&self.session_idle)
            .map_err(|why| anyhow::anyhow!("console.session_idle: {why}"))?;
        if lifetime.is_zero() || idle.is_zero() {
            anyhow::bail!(
                "console.session_lifetime and console.session_idle must be longer than zero"
            );
        }
        Ok(knooppunt_broker::SessionOptions { lifetime, idle })
    }

    /// The console's theme, its style sheet read (at most 1 MiB of UTF-8).
    pub(crate) fn theme(&self) -> anyhow::Result<knooppunt_broker::ConsoleTheme> {
        let class = self.theme_class.trim();
        let class_name = class.starts_with(|c: char| c.is_ascii_alphabetic())
            && class
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !class.is_empty() && !class_name {
            anyhow::bail!(
                "console.theme_class: `{class}` is not a class name (letters, digits, `-` and `_`, starting with a letter)"
            );
        }
        if self.theme_css.trim().is_empty() {
            if !class.is_empty() {
                anyhow::bail!(
                    "console.theme_class is set without console.theme_css: name the theme's style sheet too"
                );
            }
            return Ok(knooppunt_broker::ConsoleTheme::default());
        }
        let path = std::path::Path::new(self.theme_css.trim());
        let size = std::fs::metadata(path)
            .map_err(|why| anyhow::anyhow!("console.theme_css: {}: {why}", path.display()))?
            .len();
        if size > MAX_THEME_BYTES {
            anyhow::bail!(
                "console.theme_css: {} has {size} bytes, more than the 1 MiB the console takes",
                path.display()
            );
        }
        let css = std::fs::read_to_string(path).map_err(|why| {
            anyhow::anyhow!("console.theme_css: {} (UTF-8 text): {why}", path.display())
        })?;
        Ok(knooppunt_broker::ConsoleTheme {
            css: Some(css.into()),
            class: (!class.is_empty()).then(|| class.to_owned()),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct BacklogConfig {
    /// Undelivered bytes of all subscriptions together; past it publishes get 503 (0: no
    /// limit).
    pub(crate) max_bytes: u64,
    /// Publishes get 503 while the data directory's disk has less room than this (embedded
    /// store; 0: no floor).
    pub(crate) min_free_bytes: u64,
    /// Undelivered bytes of one subscription; past it its oldest deliveries become dead
    /// letters (0: no limit).
    pub(crate) subscription_max_bytes: u64,
    /// ISO 8601 duration: undelivered events older than this become dead letters (absent:
    /// only each subscription's `ttl`).
    pub(crate) subscription_max_age: Option<String>,
    /// ISO 8601 duration: how often the backlog is measured.
    pub(crate) check_interval: String,
    /// ISO 8601 duration: how long a dead letter (and its event) is kept.
    pub(crate) dead_letter_retention: String,
}

impl Default for BacklogConfig {
    fn default() -> Self {
        let defaults = knooppunt_broker::BacklogOptions::default();
        BacklogConfig {
            max_bytes: defaults.max_bytes,
            min_free_bytes: defaults.min_free_bytes,
            subscription_max_bytes: defaults.subscription_max_bytes,
            subscription_max_age: None,
            check_interval: "PT5S".into(),
            dead_letter_retention: "P7D".into(),
        }
    }
}

impl BacklogConfig {
    pub(crate) fn options(&self) -> anyhow::Result<knooppunt_broker::BacklogOptions> {
        let check_interval = duration("backlog.check_interval", &self.check_interval)?;
        if check_interval < std::time::Duration::from_millis(100)
            || check_interval > std::time::Duration::from_secs(300)
        {
            bail!("backlog.check_interval: must be from PT0.1S to PT5M");
        }
        let subscription_max_age = match &self.subscription_max_age {
            None => None,
            Some(age) => {
                let age = duration("backlog.subscription_max_age", age)?;
                if age < std::time::Duration::from_secs(1) {
                    bail!("backlog.subscription_max_age: must be at least PT1S (or left out)");
                }
                Some(age)
            }
        };
        let dead_letter_retention =
            duration("backlog.dead_letter_retention", &self.dead_letter_retention)?;
        if dead_letter_retention < std::time::Duration::from_secs(1) {
            bail!(
                "backlog.dead_letter_retention: must be at least PT1S; dead letters are kept \
                 this long so that subscribers can redeliver them"
            );
        }
        if self.max_bytes > 0 && self.subscription_max_bytes > self.max_bytes {
            bail!(
                "backlog.subscription_max_bytes ({}) is larger than backlog.max_bytes ({}): one \
                 stalled subscription could then stop every publisher; make it smaller",
                self.subscription_max_bytes,
                self.max_bytes
            );
        }
        Ok(knooppunt_broker::BacklogOptions {
            max_bytes: self.max_bytes,
            min_free_bytes: self.min_free_bytes,
            subscription_max_bytes: self.subscription_max_bytes,
            subscription_max_age,
            check_interval,
            dead_letter_retention,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ZgwConfig {
    /// Whether `/api/v1` (the Notificaties API 1.0) is served.
    pub(crate) enabled: bool,
    /// ISO 8601 duration: the oldest ZGW client token accepted (by its `iat`).
    pub(crate) max_token_age: String,
    /// The ZGW components that may call it.
    pub(crate) clients: Vec<ZgwClientConfig>,
    /// The keys (`<id>:<base64 of 32 bytes>`) the secrets of ZGW clients set over the
    /// principals API are sealed with in the store; the first seals, all open. Rotate by
    /// putting a new key first: at start every secret is sealed again under it.
    pub(crate) secret_keys: Vec<String>,
}

impl Default for ZgwConfig {
    fn default() -> Self {
        ZgwConfig {
            enabled: true,
            max_token_age: "PT1H".into(),
            clients: Vec::new(),
            secret_keys: Vec::new(),
        }
    }
}

/// One ZGW component: the `client_id` and secret its JWTs are signed with, and its scopes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ZgwClientConfig {
    pub(crate) client_id: String,
    /// The HS256 secret (at least 16 characters).
    pub(crate) secret: String,
    /// `notificaties.publiceren` and/or `notificaties.consumeren`.
    pub(crate) scopes: Vec<String>,
    /// Its organisation's OIN: its notificaties are then published in that source space.
    #[serde(default)]
    pub(crate) oin: Option<String>,
}

impl ZgwConfig {
    /// The facade's settings, every client checked.
    pub(crate) fn options(&self) -> anyhow::Result<knooppunt_broker::identity::zgw::ZgwOptions> {
        use knooppunt_broker::identity::zgw::{CONSUME, PUBLISH, ZgwClient, ZgwOptions};
        let max_token_age = parse_iso8601_duration(&self.max_token_age)
            .map_err(|why| anyhow::anyhow!("zgw.max_token_age: {why}"))?;
        let mut seen = HashSet::new();
        let mut clients = Vec::new();
        for (n, client) in self.clients.iter().enumerate() {
            let at = format!("zgw.clients[{n}]");
            if client.client_id.trim().is_empty() || !seen.insert(client.client_id.clone()) {
                bail!("{at}.client_id: must be given, and once");
            }
            if client.secret.chars().count() < 16 {
                bail!("{at}.secret: must be at least 16 characters");
            }
            if let Some(scope) = client
                .scopes
                .iter()
                .find(|s| s.as_str() != PUBLISH && s.as_str() != CONSUME)
            {
                bail!("{at}.scopes: `{scope}` is not `{PUBLISH}` or `{CONSUME}`");
            }
            let oin = match &client.oin {
                None => None,
                Some(text) => Some(knooppunt_broker::Oin::parse(text).ok_or_else(|| {
                    anyhow::anyhow!("{at}.oin: `{text}` is not an OIN (20 digits)")
                })?),
            };
            clients.push(ZgwClient {
                client_id: client.client_id.clone(),
                secret: client.secret.as_bytes().to_vec(),
                scopes: client.scopes.clone(),
                oin,
                principal: None,
            });
        }
        let secret_keys = if self.secret_keys.is_empty() {
            None
        } else {
            let mut pairs = Vec::new();
            for (n, text) in self.secret_keys.iter().enumerate() {
                let (id, key) = text.split_once(':').ok_or_else(|| {
                    anyhow::anyhow!("zgw.secret_keys[{n}]: write it as <id>:<base64 of 32 bytes>")
                })?;
                pairs.push((id, key));
            }
            Some(std::sync::Arc::new(
                knooppunt_broker::identity::zgw::SecretKeys::new(pairs)
                    .map_err(|why| anyhow::anyhow!("zgw.secret_keys: {why}"))?,
            ))
        };
        Ok(ZgwOptions {
            enabled: self.enabled,
            clients,
            secret_keys,
            max_token_age,
            ..ZgwOptions::default()
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct IngestConfig {
    /// The largest event accepted, in bytes on the wire; at least 65536.
    pub(crate) max_event_bytes: usize,
    /// The largest batch body accepted, in bytes.
    pub(crate) max_batch_bytes: usize,
    /// ISO 8601 duration: a repeated `source` + `id` within it is acknowledged, not routed.
    pub(crate) dedupe_window: String,
    /// ISO 8601 duration: how long events whose deliveries are all finished are kept.
    pub(crate) retention: String,
    /// ISO 8601 duration: how often the retention sweep runs.
    pub(crate) sweep_interval: String,
    /// Whether `urn:nld:oin:<OIN>:` sources are reserved for the principal with that OIN
    /// and those whose `publish_source_prefixes` name it.
    pub(crate) reserve_oin_sources: bool,
    /// Whether only events a catalog entry covers are accepted.
    pub(crate) catalog_required: bool,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            max_event_bytes: 1024 * 1024,
            max_batch_bytes: 10 * 1024 * 1024,
            dedupe_window: "PT24H".into(),
            retention: "P7D".into(),
            sweep_interval: "PT60S".into(),
            reserve_oin_sources: true,
            catalog_required: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct FiltersConfig {
    /// The deepest nesting of all/any/not, and of a CESQL expression (1 to 128).
    pub(crate) max_depth: usize,
    /// The most parts in one subscription's filters together (1 to 10000).
    pub(crate) max_nodes: usize,
    /// The longest CESQL expression, in characters (1 to 65536).
    pub(crate) max_sql_length: usize,
    /// What evaluating one subscription's filters against one event may cost, in units
    /// (bytes copied, compared, scanned or made); past it the event is not
    /// routed to that subscription.
    pub(crate) max_evaluation_cost: u64,
    /// What evaluating all the subscriptions of one principal against one event may cost
    /// together, in the same units; past it that principal's other subscriptions are not
    /// routed the event (0: no such bound).
    pub(crate) max_evaluation_cost_per_principal: u64,
    /// What evaluating all the candidates of one event may cost together, shared among
    /// their principals (each gets at least an equal share, and what one leaves goes to the
    /// others); past a principal's share its other subscriptions are not routed the event
    /// (0: no such bound).
    pub(crate) max_evaluation_cost_per_event: u64,
    /// The longest string a filter may make while it is evaluated (CONCAT, UPPER, ...).
    pub(crate) max_string_bytes: usize,
    /// The most subscriptions one principal may have.
    pub(crate) max_subscriptions_per_principal: usize,
    /// The most bytes of filters (as JSON) one principal's subscriptions may have together.
    pub(crate) max_filter_bytes_per_principal: usize,
}

impl Default for FiltersConfig {
    fn default() -> Self {
        let limits = knooppunt_filter::Limits::DEFAULT;
        let evaluation = knooppunt_filter::EvalLimits::DEFAULT;
        let quotas = knooppunt_broker::Quotas::default();
        FiltersConfig {
            max_depth: limits.max_depth,
            max_nodes: limits.max_nodes,
            max_sql_length: limits.max_sql_length,
            max_evaluation_cost: evaluation.max_units,
            max_evaluation_cost_per_principal: evaluation.max_units_per_tenant,
            max_evaluation_cost_per_event: evaluation.max_units_per_event,
            max_string_bytes: evaluation.max_string_bytes,
            max_subscriptions_per_principal: quotas.max_subscriptions,
            max_filter_bytes_per_principal: quotas.max_filter_bytes,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ValidationConfig {
    /// How strictly the NL GOV profile is applied: `off`, `warn` or `enforce`.
    pub(crate) profile: ProfileLevel,
}

/// A party that may call the API, identified by the SHA-256 of its bearer token.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PrincipalConfig {
    /// A name for logs and ownership, unique in the file.
    pub(crate) name: String,
    /// Hex SHA-256 of the token (`knooppunt hash-token`).
    pub(crate) token_sha256: String,
    /// `publisher`, `subscriber` and/or `admin`.
    pub(crate) roles: BTreeSet<Role>,
    /// Type prefixes it may subscribe to; empty or absent: any.
    #[serde(default)]
    pub(crate) subscribe_type_prefixes: Vec<String>,
    /// Source prefixes it may publish; empty or absent: any.
    #[serde(default)]
    pub(crate) publish_source_prefixes: Vec<String>,
    /// The OIN (20 digits) of its organisation: it publishes only `urn:nld:oin:<OIN>:`
    /// sources, and a trusted client certificate with this OIN identifies it.
    #[serde(default)]
    pub(crate) oin: Option<String>,
}

/// The environment variables of the client commands; the hub's configuration leaves them
/// alone (every other `KNOOPPUNT_` variable is a configuration key).
pub(crate) const CLIENT_VARIABLES: [&str; 4] = [
    "KNOOPPUNT_URL",
    "KNOOPPUNT_TOKEN",
    "KNOOPPUNT_CA_FILE",
    "KNOOPPUNT_IDENTITY_FILE",
];

/// Environment variables that override configuration keys start with this.
pub(crate) const ENV_PREFIX: &str = "KNOOPPUNT_";

/// The sections an environment variable can reach: every one of the file but
/// `principals`, a list (file only).
const ENV_SECTIONS: [&str; 11] = [
    "server",
    "store",
    "ingest",
    "validation",
    "delivery",
    "filters",
    "log",
    "audit",
    "zgw",
    "console",
    "backlog",
];

/// Whether `setting` (a variable's name without `KNOOPPUNT_`, lower case) has the shape of
/// the variables Kubernetes makes for a Service (named `knooppunt`, or `knooppunt-<x>`):
/// `[<x>_]service_host`, `[<x>_]service_port[_<name>]`, `[<x>_]port[_<n>_<proto>[_…]]`.
fn is_service_link(setting: &str) -> bool {
    let words: Vec<&str> = setting.split('_').collect();
    words
        .windows(2)
        .any(|pair| pair[0] == "service" && (pair[1] == "host" || pair[1] == "port"))
        || words.iter().enumerate().any(|(i, word)| {
            *word == "port"
                && (i + 1 == words.len()
                    || (words.get(i + 1).is_some_and(|n| n.parse::<u16>().is_ok())
                        && words
                            .get(i + 2)
                            .is_some_and(|p| ["tcp", "udp", "sctp"].contains(p))))
        })
}

/// Applies `KNOOPPUNT_<SECTION>_<KEY>=value` to the parsed file. The value is read as a TOML
/// value when it is one (`2097152`, `true`) and as a string otherwise. `Ok(false)` when the
/// variable is not of a setting's form (no section of the file, or a Kubernetes Service's
/// link): it is left alone. A key a section does not have stops start-up, naming it.
fn override_setting(
    table: &mut toml::Table,
    name: &str,
    setting: &str,
    value: &str,
) -> anyhow::Result<bool> {
    let Some((section, key)) = ENV_SECTIONS.iter().find_map(|section| {
        let key = setting.strip_prefix(section)?.strip_prefix('_')?;
        Some((*section, key))
    }) else {
        return Ok(false);
    };
    if is_service_link(setting) {
        return Ok(false);
    }
    let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .filter(|v| !v.is_table())
        .unwrap_or_else(|| toml::Value::String(value.to_owned()));
    let section = table
        .entry(section)
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let Some(section) = section.as_table_mut() else {
        bail!("{name}: `{setting}` is not in a table of the configuration file");
    };
    section.insert(key.to_owned(), parsed);
    Ok(true)
}

/// A log level or filter each of whose parts names a level: `warn`, or
/// `info,knooppunt_delivery=debug`. A bare word that is not a level (`warning`) would be
/// read as a module to log everything of, silencing the rest: it is refused instead.
fn check_log_level(level: &str) -> anyhow::Result<()> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    for part in level.split(',').map(str::trim) {
        let named = part.rsplit_once('=').map_or(part, |(_, level)| level);
        if !LEVELS.contains(&named.to_ascii_lowercase().as_str()) {
            bail!(
                "log.level: `{part}` is not a level; use one of {} (or a filter such as \
                 `info,knooppunt_delivery=debug`)",
                LEVELS.join(", ")
            );
        }
    }
    Ok(())
}

/// Reads a PEM file of CA certificates; it must hold at least one.
pub(crate) fn read_ca_file(path: &Path) -> Result<Vec<u8>, String> {
    let pem =
        std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    match reqwest::Certificate::from_pem_bundle(&pem) {
        Ok(certificates) if !certificates.is_empty() => Ok(pem),
        Ok(_) => Err(format!("{} holds no PEM certificate", path.display())),
        Err(error) => Err(format!(
            "{} is not a PEM certificate bundle: {error}",
            path.display()
        )),
    }
}

impl ServerConfig {
    /// The HTTPS settings, when `tls_certificate` and `tls_key` are set.
    fn tls(&self) -> anyhow::Result<Option<knooppunt_broker::TlsSettings>> {
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

impl Config {
    /// Reads the file at `path`; a missing file at the default path means the defaults.
    pub(crate) fn load(path: &Path, explicit: bool) -> anyhow::Result<Config> {
        let (text, origin) = match std::fs::read_to_string(path) {
            Ok(text) => (
                text,
                format!(
                    "{} (or a {ENV_PREFIX}* environment variable)",
                    path.display()
                ),
            ),
            // The defaults, with the environment's overrides applied all the same.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound && !explicit => (
                String::new(),
                format!(
                    "a {ENV_PREFIX}* environment variable (there is no {})",
                    path.display()
                ),
            ),
            Err(error) => {
                return Err(error).with_context(|| format!("cannot read {}", path.display()));
            }
        };
        let source = if text.is_empty() && !path.exists() {
            format!("none ({} does not exist): the defaults", path.display())
        } else {
            path.display().to_string()
        };
        let mut config = Config::parse_with(&text, std::env::vars())
            .with_context(|| format!("invalid configuration in {origin}"))?;
        config.source = source;
        Ok(config)
    }

    #[cfg(test)]
    pub(crate) fn parse(text: &str) -> anyhow::Result<Config> {
        Config::parse_with(text, std::iter::empty())
    }

    /// Parses the file's text with `KNOOPPUNT_<SECTION>_<KEY>` overrides from `environment`
    /// (name, value) applied on top.
    pub(crate) fn parse_with(
        text: &str,
        environment: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Config> {
        let mut table: toml::Table = toml::from_str(text)?;
        let mut ignored = Vec::new();
        for (name, value) in environment {
            let Some(setting) = name.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            if CLIENT_VARIABLES.contains(&name.as_str()) {
                continue;
            }
            if !override_setting(&mut table, &name, &setting.to_ascii_lowercase(), &value)? {
                ignored.push(name);
            }
        }
        let mut config: Config = table.try_into()?;
        config.validate()?;
        ignored.sort();
        config.ignored_variables = ignored;
        Ok(config)
    }

    /// How the hub is served: connection limits and HTTPS, checked.
    pub(crate) fn transport(&self) -> anyhow::Result<knooppunt_broker::Transport> {
        Ok(knooppunt_broker::Transport {
            limits: self.server.limits()?,
            tls: self.server.tls()?,
        })
    }

    /// The hub's options but authentication.
    pub(crate) fn hub_options(
        &self,
        authentication: knooppunt_broker::Authentication,
    ) -> anyhow::Result<knooppunt_broker::HubOptions> {
        let mut options = knooppunt_broker::HubOptions::new(authentication);
        options.ingest = self.ingest_options()?;
        let origin = &self.server.origin;
        if origin.trim().is_empty() || !origin.bytes().all(|b| b.is_ascii_graphic()) {
            bail!(
                "server.origin: must be a non-empty name of printable ASCII, e.g. `knooppunt.example.nl`"
            );
        }
        options.delivery.origin = self.server.origin.clone();
        if let Some(url) = &self.server.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            bail!("server.public_url: `{url}` must start with http:// or https://");
        }
        options.public_url = self.server.public_url.clone();
        if !(1..=1024).contains(&self.delivery.max_in_flight) {
            bail!("delivery.max_in_flight: must be from 1 to 1024");
        }
        options.delivery.max_in_flight = self.delivery.max_in_flight;
        options.shutdown_grace = parse_iso8601_duration(&self.delivery.shutdown_grace)
            .map_err(|why| anyhow::anyhow!("delivery.shutdown_grace: {why}"))?;
        options.signing_overlap = parse_iso8601_duration(&self.delivery.signing_overlap)
            .map_err(|why| anyhow::anyhow!("delivery.signing_overlap: {why}"))?;
        if !(1..=64).contains(&self.delivery.max_replays) {
            bail!("delivery.max_replays: must be from 1 to 64");
        }
        if !(1..=1_000_000).contains(&self.delivery.replay_rate) {
            bail!("delivery.replay_rate: must be from 1 to 1000000 events a second");
        }
        let takeover = parse_iso8601_duration(&self.delivery.replay_takeover)
            .map_err(|why| anyhow::anyhow!("delivery.replay_takeover: {why}"))?;
        if takeover < std::time::Duration::from_secs(1) {
            bail!("delivery.replay_takeover: must be at least PT1S");
        }
        options.replays = knooppunt_broker::ReplayOptions {
            max_running: self.delivery.max_replays,
            rate: self.delivery.replay_rate,
            takeover,
        };
        options.audit_retention = parse_iso8601_duration(&self.audit.retention)
            .map_err(|why| anyhow::anyhow!("audit.retention: {why}"))?;
        options.delivery.receipts = self.audit.receipts;
        options.zgw = self.zgw.options()?;
        options.sessions = self.console.options()?;
        options.console_theme = self.console.theme()?;
        options.backlog = self.backlog.options()?;
        options.delivery.hub_keys = self.delivery.hub_keys()?;
        options.subscription_defaults = self.delivery.subscription_defaults()?;
        options.allow_http_sinks = self.delivery.allow_http_sinks;
        options.delivery.connections = self.delivery.connection_limits()?;
        options.delivery.sink_networks =
            knooppunt_broker::SinkNetworks::parse(&self.delivery.allow_sink_networks)
                .map_err(|why| anyhow::anyhow!("delivery.allow_sink_networks: {why}"))?;
        options.delivery.max_retry_after =
            duration("delivery.max_retry_after", &self.delivery.max_retry_after)?;
        options.delivery.lease_margin =
            duration("delivery.lease_margin", &self.delivery.lease_margin)?;
        if options.delivery.lease_margin < std::time::Duration::from_secs(1) {
            bail!("delivery.lease_margin: must be at least PT1S");
        }
        let filters = &self.filters;
        options.filter_limits = knooppunt_filter::Limits::try_new(
            filters.max_depth,
            filters.max_nodes,
            filters.max_sql_length,
        )
        .map_err(|why| anyhow::anyhow!("filters.{why}"))?;
        let at_least = |name: &str, value: u64, least: u64| {
            if value < least {
                bail!("filters.{name}: must be at least {least}, not {value}");
            }
            Ok(())
        };
        at_least("max_evaluation_cost", filters.max_evaluation_cost, 1_000)?;
        at_least("max_string_bytes", filters.max_string_bytes as u64, 1_024)?;
        at_least(
            "max_subscriptions_per_principal",
            filters.max_subscriptions_per_principal as u64,
            1,
        )?;
        at_least(
            "max_filter_bytes_per_principal",
            filters.max_filter_bytes_per_principal as u64,
            1_024,
        )?;
        let per_principal = filters.max_evaluation_cost_per_principal;
        if per_principal != 0 && per_principal < filters.max_evaluation_cost {
            bail!(
                "filters.max_evaluation_cost_per_principal ({per_principal}) must be 0 (no \
                 bound) or at least filters.max_evaluation_cost ({}): one subscription's \
                 evaluation must fit in its principal's",
                filters.max_evaluation_cost
            );
        }
        let per_event = filters.max_evaluation_cost_per_event;
        if per_event != 0 && per_event < filters.max_evaluation_cost {
            bail!(
                "filters.max_evaluation_cost_per_event ({per_event}) must be 0 (no bound) or at \
                 least filters.max_evaluation_cost ({}): one subscription's evaluation must fit \
                 in an event's",
                filters.max_evaluation_cost
            );
        }
        options.eval_limits = knooppunt_filter::EvalLimits {
            max_units: filters.max_evaluation_cost,
            max_string_bytes: filters.max_string_bytes,
            max_units_per_tenant: per_principal,
            max_units_per_event: per_event,
        };
        options.quotas = knooppunt_broker::Quotas {
            max_subscriptions: filters.max_subscriptions_per_principal,
            max_filter_bytes: filters.max_filter_bytes_per_principal,
        };
        if let Some(path) = &self.delivery.ca_file {
            options.delivery.extra_root_certificates =
                read_ca_file(path).map_err(|why| anyhow::anyhow!("delivery.ca_file: {why}"))?;
        }
        Ok(options)
    }

    /// The access-token issuers, checked.
    pub(crate) fn issuers(&self) -> anyhow::Result<Vec<knooppunt_broker::IssuerSettings>> {
        let mut issuers = Vec::new();
        for (i, config) in self.issuers.iter().enumerate() {
            let key = format!("issuers[{i}]");
            if config.issuer.trim().is_empty() {
                bail!(
                    "{key}.issuer: the `iss` of the issuer's tokens, e.g. `https://auth.example.nl/realms/overheid`"
                );
            }
            if config.audience.trim().is_empty() {
                bail!("{key}.audience: the `aud` tokens for this hub carry");
            }
            let url = reqwest::Url::parse(&config.jwks_url).map_err(|error| {
                anyhow::anyhow!("{key}.jwks_url: `{}`: {error}", config.jwks_url)
            })?;
            let local = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
            if url.scheme() != "https" && !(url.scheme() == "http" && local) {
                bail!("{key}.jwks_url: must be https:// (http:// only on this machine)");
            }
            let mut settings = knooppunt_broker::IssuerSettings::new(
                &config.issuer,
                &config.jwks_url,
                &config.audience,
            );
            if let Some(claim) = &config.name_claim {
                settings.name_claim = claim.clone();
            }
            settings.name_prefix = config.name_prefix.clone();
            if let Some(claim) = &config.roles_claim {
                settings.roles_claim = claim.clone();
            }
            if !config.roles.is_empty() {
                settings.roles = config.roles.clone();
            }
            settings.oin_claim = config.oin_claim.clone();
            issuers.push(settings);
        }
        Ok(issuers)
    }

    /// The ingest settings for the hub.
    pub(crate) fn ingest_options(&self) -> anyhow::Result<IngestOptions> {
        let ingest = &self.ingest;
        if ingest.max_event_bytes < MIN_EVENT_BYTES {
            bail!(
                "ingest.max_event_bytes: {} is below {MIN_EVENT_BYTES}; CloudEvents \
                 intermediaries must forward events of 64 KiB",
                ingest.max_event_bytes
            );
        }
        if ingest.max_batch_bytes < ingest.max_event_bytes {
            bail!("ingest.max_batch_bytes: must be at least ingest.max_event_bytes");
        }
        let duration = |key: &str, text: &str| {
            parse_iso8601_duration(text).map_err(|why| anyhow::anyhow!("ingest.{key}: {why}"))
        };
        Ok(IngestOptions {
            profile: self.validation.profile,
            max_event_bytes: ingest.max_event_bytes,
            max_batch_bytes: ingest.max_batch_bytes,
            dedupe_window: duration("dedupe_window", &ingest.dedupe_window)?,
            retention: duration("retention", &ingest.retention)?,
            sweep_interval: match duration("sweep_interval", &ingest.sweep_interval)? {
                zero if zero.is_zero() => bail!("ingest.sweep_interval: must be longer than zero"),
                interval => interval,
            },
            reserve_oin_sources: ingest.reserve_oin_sources,
            catalog_required: ingest.catalog_required,
        })
    }

    fn validate(&self) -> anyhow::Result<()> {
        check_log_level(&self.log.level)?;
        self.hub_options(knooppunt_broker::Authentication::Disabled)?;
        self.transport()?;
        self.issuers()?;
        self.store.postgres()?;
        let mut names = HashSet::new();
        let mut hashes = HashSet::new();
        let mut oins = HashSet::new();
        for (i, principal) in self.principals.iter().enumerate() {
            let key = format!("principals[{i}]");
            if principal.name.trim().is_empty() {
                bail!("{key}.name: must not be empty");
            }
            if !names.insert(&principal.name) {
                bail!(
                    "{key}.name: `{}` is used by another principal",
                    principal.name
                );
            }
            let hash = &principal.token_sha256;
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                bail!(
                    "{key}.token_sha256: must be 64 hex digits (run `knooppunt hash-token` on the \
                     token)"
                );
            }
            if !hashes.insert(hash.to_ascii_lowercase()) {
                bail!("{key}.token_sha256: the same token is configured twice");
            }
            if principal.roles.is_empty() {
                bail!(
                    "{key}.roles: give at least one of `publisher`, `subscriber`, `admin`, \
                     `metrics`"
                );
            }
            if let Some(oin) = &principal.oin {
                if knooppunt_broker::Oin::parse(oin).is_none() {
                    bail!("{key}.oin: an OIN is 20 digits, not `{oin}`");
                }
                if !oins.insert(oin) {
                    bail!("{key}.oin: {oin} is another principal's; one OIN names one principal");
                }
            }
        }
        Ok(())
    }

    /// The principals with their token hashes, for the hub.
    pub(crate) fn principals(&self) -> Vec<(String, Principal)> {
        self.principals
            .iter()
            .map(|p| {
                (
                    p.token_sha256.clone(),
                    Principal {
                        name: p.name.clone(),
                        roles: p.roles.clone(),
                        subscribe_type_prefixes: p.subscribe_type_prefixes.clone(),
                        publish_source_prefixes: p.publish_source_prefixes.clone(),
                        oin: p.oin.as_deref().and_then(knooppunt_broker::Oin::parse),
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zgw_clients_are_read_and_checked() {
        let good = "[[zgw.clients]]\nclient_id = \"open-zaak\"\nsecret = \"0123456789abcdef\"\n\
                    scopes = [\"notificaties.publiceren\"]\noin = \"00000001823288444000\"\n";
        let config: Config = toml::from_str(good).unwrap();
        let options = config.zgw.options().unwrap();
        assert!(options.enabled);
        assert_eq!(options.clients[0].client_id, "open-zaak");
        assert_eq!(
            options.clients[0].source(),
            "urn:nld:oin:00000001823288444000:systeem:open-zaak"
        );
        for (bad, says) in [
            (
                good.replace("0123456789abcdef", "short"),
                "zgw.clients[0].secret",
            ),
            (
                good.replace("notificaties.publiceren", "zaken.lezen"),
                "zgw.clients[0].scopes",
            ),
            (
                good.replace("00000001823288444000", "123"),
                "zgw.clients[0].oin",
            ),
        ] {
            let config: Config = toml::from_str(&bad).unwrap();
            let error = config.zgw.options().unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        }
    }

    /// The event's filter budget: 0 (none) or at least one subscription's, said so when not.
    #[test]
    fn the_events_filter_budget_is_read_and_checked() {
        let options = |text: &str| {
            Config::parse(&format!("[filters]\n{text}"))
                .and_then(|config| config.hub_options(knooppunt_broker::Authentication::Disabled))
        };
        let limits = |text: &str| options(text).unwrap().eval_limits;
        assert_eq!(limits("").max_units_per_event, 32_000_000);
        assert_eq!(
            limits("max_evaluation_cost_per_event = 50000000").max_units_per_event,
            50_000_000
        );
        assert_eq!(
            limits("max_evaluation_cost_per_event = 0").max_units_per_event,
            0
        );
        let error = options("max_evaluation_cost_per_event = 10")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("filters.max_evaluation_cost_per_event (10) must be 0"),
            "{error}"
        );
    }

    #[test]
    fn the_shipped_file_holds_the_defaults() {
        let shipped = include_str!("../../../config/knooppunt.toml");
        assert_eq!(Config::parse(shipped).unwrap(), Config::default());
    }

    /// The hub's signing key from a file as `openssl genpkey -algorithm ed25519` writes it,
    /// a previous key with its end, and what is wrong with each kind of mistake.
    #[test]
    fn signing_keys_are_read_from_openssl_files() {
        let dir = tempfile::tempdir().unwrap();
        let key = |name: &str| {
            let path = dir.path().join(name);
            let status = std::process::Command::new("openssl")
                .args(["genpkey", "-algorithm", "ed25519", "-out"])
                .arg(&path)
                .status()
                .expect("openssl");
            assert!(status.success());
            path.display().to_string()
        };
        let (current, previous) = (key("current.pem"), key("previous.pem"));
        let options = |extra: &str| {
            Config::parse(&format!(
                "[delivery]\nsigning_key_file = \"{current}\"\n{extra}"
            ))
            .and_then(|config| config.hub_options(knooppunt_broker::Authentication::Disabled))
        };
        let one = options("").unwrap();
        assert_eq!(
            one.delivery
                .hub_keys
                .public(std::time::SystemTime::now())
                .len(),
            1
        );
        let two = options(&format!(
            "previous_signing_key_file = \"{previous}\"\n\
             previous_signing_key_until = \"2030-01-01T00:00:00Z\"\n"
        ))
        .unwrap();
        assert_eq!(
            two.delivery
                .hub_keys
                .public(std::time::SystemTime::now())
                .len(),
            2
        );
        let half = options(&format!("previous_signing_key_file = \"{previous}\"\n")).unwrap_err();
        assert!(half.to_string().contains("give both"), "{half}");
        std::fs::write(dir.path().join("bad.pem"), "not a key").unwrap();
        let bad = Config::parse(&format!(
            "[delivery]\nsigning_key_file = \"{}\"\n",
            dir.path().join("bad.pem").display()
        ))
        .and_then(|config| config.hub_options(knooppunt_broker::Authentication::Disabled))
        .unwrap_err();
        assert!(
            bad.to_string().contains("delivery.signing_key_file"),
            "{bad}"
        );
    }

    #[test]
    fn principals() {
        let config = Config::parse(&format!(
            "[[principals]]\nname = \"gemeente\"\ntoken_sha256 = \"{}\"\nroles = [\"subscriber\"]\n\
             subscribe_type_prefixes = [\"nl.brp.\"]\n",
            "ab".repeat(32)
        ))
        .unwrap();
        let principals = config.principals();
        assert_eq!(principals[0].1.name, "gemeente");
        assert!(principals[0].1.has(Role::Subscriber));
        assert_eq!(principals[0].1.subscribe_type_prefixes, ["nl.brp."]);
    }

    #[test]
    fn issuers_and_https_settings_are_checked() {
        let issuer = |url: &str, extra: &str| {
            Config::parse(&format!(
                "[[issuers]]\nissuer = \"https://auth.example.nl\"\njwks_url = \"{url}\"\n\
                 audience = \"knooppunt\"\n{extra}"
            ))
        };
        let config = issuer(
            "https://auth.example.nl/jwks",
            "name_claim = \"client_id\"\noin_claim = \"oin\"\n[issuers.roles]\n\"events.publish\" = \"publisher\"\n",
        )
        .unwrap();
        let settings = &config.issuers().unwrap()[0];
        assert_eq!(settings.name_claim, "client_id");
        assert_eq!(settings.roles["events.publish"], Role::Publisher);
        assert_eq!(settings.roles.len(), 1);
        assert_eq!(settings.oin_claim.as_deref(), Some("oin"));
        assert!(
            issuer("http://127.0.0.1:9000/jwks", "").is_ok(),
            "http on this machine"
        );
        let remote = issuer("http://auth.example.nl/jwks", "").unwrap_err();
        assert!(
            format!("{remote:#}").contains("issuers[0].jwks_url"),
            "{remote:#}"
        );
        let role = issuer("https://a/j", "[issuers.roles]\n\"x\" = \"root\"\n").unwrap_err();
        assert!(format!("{role:#}").contains("root"), "{role:#}");

        let half = Config::parse("[server]\ntls_certificate = \"/nonexistent.pem\"\n").unwrap_err();
        assert!(format!("{half:#}").contains("set both"), "{half:#}");
        let client_only = Config::parse("[server]\ntls_client_ca = \"/ca.pem\"\n").unwrap_err();
        assert!(
            format!("{client_only:#}").contains("need HTTPS"),
            "{client_only:#}"
        );
        let missing = Config::parse(
            "[server]\ntls_certificate = \"/nonexistent.pem\"\ntls_key = \"/nonexistent.key\"\n",
        )
        .unwrap_err();
        assert!(
            format!("{missing:#}").contains("server.tls_certificate: cannot read"),
            "{missing:#}"
        );
        let oin = Config::parse(&format!(
            "[[principals]]\nname = \"a\"\ntoken_sha256 = \"{}\"\nroles = [\"publisher\"]\noin = \"12\"\n",
            "ab".repeat(32)
        ))
        .unwrap_err();
        assert!(format!("{oin:#}").contains("principals[0].oin"), "{oin:#}");
        let twice = Config::parse(&format!(
            "[[principals]]\nname = \"a\"\ntoken_sha256 = \"{}\"\nroles = [\"publisher\"]\n\
             oin = \"00000001003214345000\"\n[[principals]]\nname = \"b\"\n\
             token_sha256 = \"{}\"\nroles = [\"publisher\"]\noin = \"00000001003214345000\"\n",
            "ab".repeat(32),
            "cd".repeat(32)
        ))
        .unwrap_err();
        assert!(
            format!("{twice:#}").contains("principals[1].oin"),
            "{twice:#}"
        );
    }

    #[test]
    fn delivery_settings_reach_the_hub_and_their_errors_name_the_key() {
        let config = Config::parse(
            "[server]\norigin = \"knooppunt.example.nl\"\npublic_url = \"https://hub.example.nl\"\n\
             [delivery]\nmax_in_flight = 4\nshutdown_grace = \"PT3S\"\ndefault_max_attempts = 5\n\
             default_ordering = \"unordered\"\n",
        )
        .unwrap();
        let options = config
            .hub_options(knooppunt_broker::Authentication::Disabled)
            .unwrap();
        assert_eq!(options.delivery.origin, "knooppunt.example.nl");
        assert_eq!(options.delivery.max_in_flight, 4);
        assert_eq!(
            options.public_url.as_deref(),
            Some("https://hub.example.nl")
        );
        assert_eq!(options.shutdown_grace, std::time::Duration::from_secs(3));
        let defaults = &options.subscription_defaults;
        assert_eq!(defaults.get("maxAttempts"), "5");
        assert_eq!(defaults.get("ordering"), "unordered");
        assert_eq!(
            defaults.get("ttl"),
            "PT24H",
            "unset keys keep the standard default"
        );
        let cases = [
            ("[server]\norigin = \"\"\n", "server.origin"),
            ("[server]\norigin = \"two words\"\n", "server.origin"),
            (
                "[server]\npublic_url = \"hub.example.nl\"\n",
                "server.public_url",
            ),
            ("[delivery]\nmax_in_flight = 0\n", "delivery.max_in_flight"),
            (
                "[delivery]\nshutdown_grace = \"10s\"\n",
                "delivery.shutdown_grace",
            ),
            (
                "[delivery]\ndefault_mode = \"fax\"\n",
                "delivery.default_mode",
            ),
            (
                "[delivery]\ndefault_max_attempts = 0\n",
                "delivery.default_max_attempts",
            ),
            (
                "[delivery]\ndefault_initial_backoff = \"PT2H\"\n",
                "delivery.default_max_backoff",
            ),
            (
                "[delivery]\ndefault_timeout = \"PT10M\"\n",
                "delivery.default_timeout",
            ),
        ];
        for (text, key) in cases {
            let error = Config::parse(text).unwrap_err();
            assert!(format!("{error:#}").contains(key), "{text}: {error:#}");
        }
    }

    #[test]
    fn a_ca_file_for_sinks_is_read_and_checked() {
        let ca = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/tls/ca.pem"
        );
        let config = Config::parse(&format!("[delivery]\nca_file = \"{ca}\"\n")).unwrap();
        let options = config
            .hub_options(knooppunt_broker::Authentication::Disabled)
            .unwrap();
        assert_eq!(
            options.delivery.extra_root_certificates,
            std::fs::read(ca).unwrap()
        );
        let not_pem = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        for path in [not_pem, "/nonexistent/ca.pem"] {
            let error = Config::parse(&format!("[delivery]\nca_file = \"{path}\"\n")).unwrap_err();
            assert!(
                format!("{error:#}").contains("delivery.ca_file"),
                "{error:#}"
            );
        }
    }

    #[test]
    fn environment_variables_override_the_file() {
        let file = "[server]\nlisten = \"127.0.0.1:8080\"\n[ingest]\nretention = \"PT1H\"\n";
        let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let config = Config::parse_with(
            file,
            env(&[
                ("KNOOPPUNT_SERVER_LISTEN", "0.0.0.0:9000"),
                ("KNOOPPUNT_SERVER_ORIGIN", "knooppunt.example.nl"),
                ("KNOOPPUNT_INGEST_MAX_EVENT_BYTES", "2097152"),
                ("KNOOPPUNT_VALIDATION_PROFILE", "enforce"),
                ("KNOOPPUNT_DELIVERY_MAX_IN_FLIGHT", "4"),
                ("KNOOPPUNT_LOG_FORMAT", "json"),
                ("PATH", "/usr/bin"),
                // The client commands' variables are not configuration keys.
                ("KNOOPPUNT_URL", "http://hub.example.nl"),
                ("KNOOPPUNT_TOKEN", "secret"),
                ("KNOOPPUNT_CA_FILE", "/nowhere.pem"),
            ]),
        )
        .unwrap();
        assert_eq!(config.server.listen.to_string(), "0.0.0.0:9000");
        assert_eq!(config.server.origin, "knooppunt.example.nl");
        assert_eq!(config.ingest.max_event_bytes, 2_097_152);
        assert_eq!(
            config.ingest.retention, "PT1H",
            "untouched keys keep the file's value"
        );
        assert_eq!(config.validation.profile, ProfileLevel::Enforce);
        assert_eq!(config.delivery.max_in_flight, 4);
        assert_eq!(config.log.format, LogFormat::Json);

        for (name, value, named) in [
            ("KNOOPPUNT_SERVER_LISTN", "x", "listn"),
            ("KNOOPPUNT_SERVER_LISTEN", "nowhere", "listen"),
            ("KNOOPPUNT_INGEST_MAX_EVENT_BYTE", "5", "max_event_byte"),
            (
                "KNOOPPUNT_INGEST_MAX_EVENT_BYTES",
                "many",
                "max_event_bytes",
            ),
        ] {
            let error = Config::parse_with(file, env(&[(name, value)])).unwrap_err();
            assert!(format!("{error:#}").contains(named), "{name}: {error:#}");
        }
    }

    /// The variables a Kubernetes Service named `knooppunt` (or `knooppunt-store`) puts in
    /// every pod of its namespace are left alone, as is any variable of no section; every
    /// section of the file can be set; a misspelt key of a section still stops start-up.
    #[test]
    fn kubernetes_service_variables_are_left_alone() {
        let env = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<Vec<_>>()
        };
        let injected = [
            ("KNOOPPUNT_SERVICE_HOST", "10.0.0.12"),
            ("KNOOPPUNT_SERVICE_PORT", "8080"),
            ("KNOOPPUNT_SERVICE_PORT_HTTP", "8080"),
            ("KNOOPPUNT_PORT", "tcp://10.0.0.12:8080"),
            ("KNOOPPUNT_PORT_8080_TCP", "tcp://10.0.0.12:8080"),
            ("KNOOPPUNT_PORT_8080_TCP_PROTO", "tcp"),
            ("KNOOPPUNT_PORT_8080_TCP_PORT", "8080"),
            ("KNOOPPUNT_PORT_8080_TCP_ADDR", "10.0.0.12"),
            ("KNOOPPUNT_STORE_SERVICE_HOST", "10.0.0.13"),
            ("KNOOPPUNT_STORE_PORT_5432_TCP", "tcp://10.0.0.13:5432"),
            ("KNOOPPUNT_SERVR_LISTEN", "x"),
        ];
        let mut all = env(&injected);
        all.extend(env(&[
            ("KNOOPPUNT_AUDIT_RETENTION", "P30D"),
            ("KNOOPPUNT_CONSOLE_SESSION_IDLE", "PT10M"),
            ("KNOOPPUNT_SERVER_LISTEN", "0.0.0.0:9000"),
        ]));
        let config = Config::parse_with("", all).unwrap();
        assert_eq!(config.ignored_variables.len(), injected.len());
        assert!(
            config
                .ignored_variables
                .contains(&"KNOOPPUNT_SERVICE_HOST".to_owned())
        );
        assert_eq!(
            config,
            Config::parse_with(
                "[audit]\nretention = \"P30D\"\n[console]\nsession_idle = \"PT10M\"\n[server]\nlisten = \"0.0.0.0:9000\"\n",
                std::iter::empty()
            )
            .map(|mut c| {
                c.ignored_variables = config.ignored_variables.clone();
                c
            })
            .unwrap(),
            "[audit] and [console] are set from the environment"
        );
        let error = Config::parse_with("", env(&[("KNOOPPUNT_ZGW_ENABLD", "true")])).unwrap_err();
        assert!(format!("{error:#}").contains("enabld"), "{error:#}");
    }

    /// The console's theme: its style sheet read from its file, its class checked; what
    /// cannot be used stops start-up, naming the setting.
    #[test]
    fn the_console_theme_is_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let css = dir.path().join("theme.css");
        std::fs::write(
            &css,
            ".gemeente-theme { --utrecht-document-color: #123456; }",
        )
        .unwrap();
        let theme = |toml: String| Config::parse(&toml).and_then(|c| c.console.theme());
        let read = theme(format!(
            "[console]\ntheme_css = \"{}\"\ntheme_class = \"gemeente-theme\"\n",
            css.display()
        ))
        .unwrap();
        assert!(read.css.as_deref().unwrap().contains("#123456"));
        assert_eq!(read.class.as_deref(), Some("gemeente-theme"));
        assert_eq!(
            theme(String::new()).unwrap(),
            knooppunt_broker::ConsoleTheme::default()
        );
        for (toml, says) in [
            (
                format!(
                    "[console]\ntheme_css = \"{}\"\ntheme_class = \"a b\"\n",
                    css.display()
                ),
                "console.theme_class",
            ),
            (
                "[console]\ntheme_class = \"x\"\n".to_owned(),
                "without console.theme_css",
            ),
            (
                "[console]\ntheme_css = \"/nergens/theme.css\"\n".to_owned(),
                "/nergens/theme.css",
            ),
        ] {
            let error = format!("{:#}", theme(toml).unwrap_err());
            assert!(error.contains(says), "{error}");
        }
    }

    /// A log level that is not one (`warning`) would silence every log line: it stops
    /// start-up; levels and filters of levels are taken.
    #[test]
    fn a_log_level_that_is_not_one_is_refused() {
        for level in ["warning", "info,knooppunt_delivery=verbose", "debugg"] {
            let error = Config::parse(&format!("[log]\nlevel = \"{level}\"\n")).unwrap_err();
            assert!(
                format!("{error:#}").contains("is not a level"),
                "{level}: {error:#}"
            );
        }
        for level in ["warn", "INFO", "info,knooppunt_delivery=debug", "off"] {
            Config::parse(&format!("[log]\nlevel = \"{level}\"\n")).unwrap();
        }
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("[validation]\nprofile = \"strict\"\n", "profile"),
            ("[validation]\nprofiel = \"warn\"\n", "profiel"),
            ("[server]\nlisten = \"nowhere\"\n", "listen"),
            (
                "[[principals]]\nname = \"a\"\ntoken_sha256 = \"abc\"\nroles = [\"admin\"]\n",
                "principals[0].token_sha256",
            ),
            (
                "[[principals]]\nname = \"a\"\ntoken_sha256 = \"abc\"\nroles = [\"root\"]\n",
                "root",
            ),
        ];
        for (text, key) in cases {
            let message = format!("{:#}", Config::parse(text).unwrap_err());
            assert!(message.contains(key), "{text}: {message}");
        }
        let twice = format!(
            "[[principals]]\nname = \"a\"\ntoken_sha256 = \"{h}\"\nroles = [\"admin\"]\n\
             [[principals]]\nname = \"a\"\ntoken_sha256 = \"{h}\"\nroles = [\"admin\"]\n",
            h = "ab".repeat(32)
        );
        assert!(format!("{:#}", Config::parse(&twice).unwrap_err()).contains("principals[1].name"));
    }
}
