//! The smaller sections: `[audit]`, `[console]`, `[backlog]`, `[zgw]`, `[ingest]`,
//! `[filters]`, `[validation]` and `[[principals]]`.

use super::*;

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
pub(super) const MAX_THEME_BYTES: u64 = 1024 * 1024;

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
    #[serde(deserialize_with = "super::list_or_commas")]
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
    /// The sources it may publish CloudEvents with (`POST /api/v1/cloudevents`: Open Zaak's
    /// own configured source, say); empty or absent: its notificaties' own source only.
    #[serde(default)]
    pub(crate) publish_source_prefixes: Vec<String>,
    /// The types it may subscribe to; empty or absent: any.
    #[serde(default)]
    pub(crate) subscribe_type_prefixes: Vec<String>,
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
            for (n, prefix) in client.publish_source_prefixes.iter().enumerate() {
                if prefix.trim().is_empty() {
                    bail!("{at}.publish_source_prefixes[{n}]: must not be empty");
                }
                if let Some(oin) = &oin {
                    let space = format!("urn:nld:oin:{}:", oin.as_str());
                    if !prefix.starts_with(&space) {
                        bail!(
                            "{at}.publish_source_prefixes[{n}]: `{prefix}` is outside the \
                             client's OIN space `{space}`, where a client with an `oin` \
                             publishes only"
                        );
                    }
                }
            }
            if let Some(n) = client
                .subscribe_type_prefixes
                .iter()
                .position(|p| p.trim().is_empty())
            {
                bail!("{at}.subscribe_type_prefixes[{n}]: must not be empty");
            }
            // With limits of its own, the client acts as a principal of the file with them
            // (`zgw:<client_id>`, its scopes deciding its roles); without, as the default.
            let limited = !client.publish_source_prefixes.is_empty()
                || !client.subscribe_type_prefixes.is_empty();
            let principal = limited.then(|| Principal {
                name: format!("zgw:{}", client.client_id),
                roles: [Role::Publisher, Role::Subscriber].into_iter().collect(),
                subscribe_type_prefixes: client.subscribe_type_prefixes.clone(),
                publish_source_prefixes: client.publish_source_prefixes.clone(),
                oin: oin.clone(),
            });
            clients.push(ZgwClient {
                client_id: client.client_id.clone(),
                secret: client.secret.as_bytes().to_vec(),
                scopes: client.scopes.clone(),
                oin,
                principal,
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
