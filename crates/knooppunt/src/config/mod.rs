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

mod delivery;
mod env;
mod sections;
mod server;
mod store;
#[cfg(test)]
mod tests;

pub(crate) use delivery::*;
pub(crate) use env::*;
pub(crate) use sections::*;
pub(crate) use server::*;
pub(crate) use store::*;

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
    /// `KNOOPPUNT_` variables that name no section of the file (`KNOOPPUNT_DELIVRY_…`):
    /// left alone, and named at warn when the hub starts: most likely a misspelling.
    #[serde(skip)]
    pub(crate) unknown_variables: Vec<String>,
    /// Where the settings came from, for the start-up log: the file read, or that there was
    /// none (the defaults and the environment).
    #[serde(skip)]
    pub(crate) source: String,
    /// Authorization servers whose access tokens (JWTs, OAuth NL GOV) the hub accepts.
    pub(crate) issuers: Vec<IssuerConfig>,
}

/// The one rule of every list setting: a list, or one string of comma-separated items (as
/// an environment variable gives it: `KNOOPPUNT_SERVER_TLS_CLIENT_CRL=/a.crl,/b.crl`).
/// `config_tests::every_list_setting_takes_commas` keeps every list on it.
fn list_or_commas<'de, D: serde::Deserializer<'de>, T: From<String>>(
    deserializer: D,
) -> Result<Vec<T>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrCommas {
        List(Vec<String>),
        Commas(String),
    }
    let items = match ListOrCommas::deserialize(deserializer)? {
        ListOrCommas::List(list) => list,
        ListOrCommas::Commas(text) => text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect(),
    };
    Ok(items.into_iter().map(T::from).collect())
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
        let (mut ignored, mut unknown) = (Vec::new(), Vec::new());
        for (name, value) in environment {
            let Some(setting) = name.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            if CLIENT_VARIABLES.contains(&name.as_str()) {
                continue;
            }
            match override_setting(&mut table, &name, &setting.to_ascii_lowercase(), &value)? {
                Variable::Applied => {}
                Variable::ServiceLink => ignored.push(name),
                Variable::NoSection => unknown.push(name),
            }
        }
        let mut config: Config = table.try_into()?;
        config.validate()?;
        ignored.sort();
        unknown.sort();
        config.ignored_variables = ignored;
        config.unknown_variables = unknown;
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
