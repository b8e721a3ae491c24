//! `[delivery]`: outbound requests, retries, signing.

use super::*;

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
    /// CIDRs of reserved networks (loopback, private, link-local, ...) sinks may still be in.
    #[serde(deserialize_with = "super::list_or_commas")]
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
    pub(crate) fn hub_keys(&self) -> anyhow::Result<knooppunt_broker::HubKeys> {
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
