//! Outbound connections, bounded. Every request to a sink (delivery or handshake) first takes
//! a permit for its sink (scheme, host and port) and then one of the hub's, so that:
//! - at most `max_connections` requests are in flight across all sinks, and at most
//!   `max_per_sink` to one sink (a slow sink can tie up only its own share);
//! - idle connections are pooled per sink, at most `max_idle_per_sink` each, closed after
//!   `idle_timeout`, and kept for at most `max_idle_sinks` sinks: each sink has its own pool,
//!   and the least recently used pool with nothing in flight is dropped (closing its
//!   connections) when another sink needs one.
//!
//! - a subscription with a client certificate (mutual TLS) gets a client of its own per
//!   sink and certificate, at most `max_idle_sinks` of them (least recently used dropped),
//!   under the same permits.
//!
//! So the hub never holds more than `max_connections + 2 * max_idle_sinks *
//! max_idle_per_sink` outbound sockets ([`ConnectionLimits::max_sockets`]), whatever the
//! number of subscriptions. A waiting request counts against its attempt's timeout.

//!
//! Each sink also has a breaker (`breaker.rs`), shared by every subscription that delivers
//! to it; its state is kept with the sink's pool.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use rustls_pki_types::CertificateDer;

use crate::breaker::{Breaker, Gate, SinkHealth, SinkResult};
use crate::sink::address::{AddressRefused, GuardedResolver, SinkNetworks};
use knooppunt_store::ClientCertificate;
use rustls_pki_types::pem::PemObject;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bounds on outbound connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Requests in flight to all sinks together.
    pub max_connections: usize,
    /// Requests in flight to one sink (scheme, host and port).
    pub max_per_sink: usize,
    /// Idle connections kept per sink.
    pub max_idle_per_sink: usize,
    /// How long an idle connection is kept.
    pub idle_timeout: Duration,
    /// Sinks whose idle connections are kept at once.
    pub max_idle_sinks: usize,
    /// Failures in a row after which a sink's breaker opens.
    pub breaker_failures: u32,
    /// The longest pause between probes of a sink whose breaker is open.
    pub breaker_max_pause: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 512,
            max_per_sink: 32,
            max_idle_per_sink: 32,
            idle_timeout: Duration::from_secs(30),
            max_idle_sinks: 128,
            breaker_failures: 5,
            breaker_max_pause: Duration::from_secs(60),
        }
    }
}

impl ConnectionLimits {
    /// The most outbound sockets these limits allow: those in flight, and the idle ones of
    /// the sinks' pools and of as many clients with a client certificate.
    pub fn max_sockets(&self) -> usize {
        self.max_connections + 2 * self.max_idle_sinks * self.max_idle_per_sink
    }
}

/// One sink's pool, its share of the connections, and its breaker.
struct Pool {
    client: reqwest::Client,
    permits: Arc<Semaphore>,
    last_used: AtomicU64,
    breaker: Mutex<Breaker>,
}

/// The hub's outbound connections.
pub(crate) struct Connections {
    tls: rustls::ClientConfig,
    /// The CAs sinks' certificates are checked against (for clients with a certificate).
    roots: Arc<rustls::RootCertStore>,
    /// Clients that present a subscription's client certificate, by sink and certificate
    /// (the whole PEM texts: no two subscriptions' certificates can be confused), each with
    /// when it was last used; at most `max_idle_sinks` of them.
    identities: Mutex<HashMap<String, (reqwest::Client, u64)>>,
    /// Where requests may go; also the resolver of every pool's client.
    networks: Arc<SinkNetworks>,
    limits: ConnectionLimits,
    global: Arc<Semaphore>,
    pools: Mutex<HashMap<String, Arc<Pool>>>,
    /// Sink URLs parsed, with their pool keys: every attempt asks for its sink's gate, its
    /// permit and its report, and parsing the URL each time was 3–5% of a delivery's CPU.
    targets: Mutex<HashMap<String, Arc<Target>>>,
    clock: AtomicU64,
    /// Pauses sinks asked another hub for (a `Retry-After`, told through the store), by
    /// pool key: no request from here either before then. Only pauses not ended are kept.
    told: Mutex<HashMap<String, Instant>>,
}

/// The most sink URLs kept parsed; past it the memo starts over (a parse is cheap, the
/// memo only saves doing it several times for every delivery).
const MAX_TARGETS: usize = 4096;

/// A sink URL, parsed, and its pool key.
pub(crate) struct Target {
    pub(crate) url: reqwest::Url,
    key: String,
}

/// The right to send one request: a client of the sink's pool and both permits, held until
/// the response is read (dropping it frees them).
pub(crate) struct Permit {
    pub(crate) client: reqwest::Client,
    /// The sink URL, parsed (a request given it needs no parse of its own).
    pub(crate) target: Arc<Target>,
    _sink: OwnedSemaphorePermit,
    _global: OwnedSemaphorePermit,
}

/// The pool key of a URL: scheme, host and port.
fn sink_key(url: &reqwest::Url) -> String {
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.port_or_known_default().unwrap_or_default()
    )
}

/// The pool key of a URL (scheme, host and port), for messages and for telling other hubs.
pub(crate) fn sink_key_of(url: &str) -> String {
    reqwest::Url::parse(url).map_or_else(|_| url.to_owned(), |u| sink_key(&u))
}

/// The TLS settings of a client: the roots, and a client certificate if one is given.
fn client_tls(
    roots: &Arc<rustls::RootCertStore>,
    identity: Option<&ClientCertificate>,
) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("cannot set up TLS: {error}"))?
        .with_root_certificates(Arc::clone(roots));
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some(identity) => {
            let chain: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(identity.certificate.as_bytes())
                    .collect::<Result<_, _>>()
                    .map_err(|error| format!("the client certificate is not PEM: {error}"))?;
            if chain.is_empty() {
                return Err("the client certificate holds no PEM certificate".into());
            }
            let key =
                rustls_pki_types::PrivateKeyDer::from_pem_slice(identity.private_key.as_bytes())
                    .map_err(|error| {
                        format!("the private key is not a PEM private key: {error}")
                    })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|error| format!("the client certificate cannot be used: {error}"))?
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Whether a client certificate and key can be presented to sinks (PEM, a key that fits).
pub fn check_client_certificate(identity: &ClientCertificate) -> Result<(), String> {
    client_tls(&Arc::new(rustls::RootCertStore::empty()), Some(identity)).map(drop)
}

/// The CAs of every pool: the operating system's CA certificates plus `extra_pem`.
fn roots(extra_pem: &[u8]) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if !extra_pem.is_empty() {
        let extra: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(extra_pem)
            .collect::<Result<_, _>>()
            .map_err(|error| format!("the extra CA certificates are not PEM: {error}"))?;
        if extra.is_empty() {
            return Err("the extra CA certificates hold no certificate".into());
        }
        for certificate in extra {
            roots
                .add(certificate)
                .map_err(|error| format!("an extra CA certificate is not usable: {error}"))?;
        }
    }
    Ok(roots)
}

impl Connections {
    pub(crate) fn new(
        limits: ConnectionLimits,
        extra_root_certificates: &[u8],
        networks: SinkNetworks,
    ) -> Result<Connections, String> {
        let positive = [
            ("max_connections", limits.max_connections),
            ("max_per_sink", limits.max_per_sink),
            ("max_idle_sinks", limits.max_idle_sinks),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("the connection limit {name} must be at least 1"));
        }
        let roots = Arc::new(roots(extra_root_certificates)?);
        let tls = client_tls(&roots, None)?;
        let networks = Arc::new(networks);
        let connections = Connections {
            tls,
            roots,
            identities: Mutex::new(HashMap::new()),
            networks,
            limits,
            global: Arc::new(Semaphore::new(limits.max_connections)),
            pools: Mutex::new(HashMap::new()),
            targets: Mutex::new(HashMap::new()),
            clock: AtomicU64::new(0),
            told: Mutex::new(HashMap::new()),
        };
        // Fails now, not at the first delivery, if the client cannot be built.
        connections.client()?;
        Ok(connections)
    }

    /// Where connections may go (the brokers' connections ask it too).
    pub(crate) fn networks(&self) -> &Arc<SinkNetworks> {
        &self.networks
    }

    /// The TLS settings of every connection: the hub's trust store.
    pub(crate) fn tls(&self) -> &rustls::ClientConfig {
        &self.tls
    }

    fn client(&self) -> Result<reqwest::Client, String> {
        self.client_with(self.tls.clone())
    }

    fn client_with(&self, tls: rustls::ClientConfig) -> Result<reqwest::Client, String> {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .use_preconfigured_tls(tls)
            .dns_resolver(Arc::new(GuardedResolver(Arc::clone(&self.networks))))
            .pool_max_idle_per_host(self.limits.max_idle_per_sink)
            .pool_idle_timeout(self.limits.idle_timeout)
            .build()
            .map_err(|error| format!("cannot build the HTTP client: {error}"))
    }

    /// The sink's pool, made (and the least recently used idle one dropped) if needed.
    fn pool(&self, key: &str) -> Result<Arc<Pool>, String> {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut pools = self.pools.lock().expect("pools lock");
        if let Some(pool) = pools.get(key) {
            pool.last_used.store(now, Ordering::Relaxed);
            return Ok(Arc::clone(pool));
        }
        if pools.len() >= self.limits.max_idle_sinks {
            // A pool in use, or with a health worth remembering, is kept.
            let idle = |pool: &Pool| {
                pool.permits.available_permits() == self.limits.max_per_sink
                    && pool.breaker.lock().expect("breaker lock").is_clear()
            };
            let oldest = pools
                .iter()
                .filter(|(_, pool)| idle(pool))
                .min_by_key(|(_, pool)| pool.last_used.load(Ordering::Relaxed))
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                pools.remove(&oldest);
            }
        }
        let pool = Arc::new(Pool {
            client: self.client()?,
            permits: Arc::new(Semaphore::new(self.limits.max_per_sink)),
            last_used: AtomicU64::new(now),
            breaker: Mutex::new(Breaker::default()),
        });
        pools.insert(key.to_owned(), Arc::clone(&pool));
        Ok(pool)
    }

    /// The sink URL `url`, parsed, with its pool key.
    fn target(&self, url: &str) -> Result<Arc<Target>, url::ParseError> {
        if let Some(target) = self.targets.lock().expect("targets lock").get(url) {
            return Ok(Arc::clone(target));
        }
        let parsed = reqwest::Url::parse(url)?;
        let target = Arc::new(Target {
            key: sink_key(&parsed),
            url: parsed,
        });
        let mut targets = self.targets.lock().expect("targets lock");
        if targets.len() >= MAX_TARGETS {
            targets.clear();
        }
        targets.insert(url.to_owned(), Arc::clone(&target));
        Ok(target)
    }

    /// The sink's pool, made if needed (to remember a failure).
    fn pool_of(&self, url: &str) -> Option<Arc<Pool>> {
        let target = self.target(url).ok()?;
        self.pool(&target.key).ok()
    }

    /// The sink's pool if it has one: a sink without one has a clear health, and asking
    /// must not build a client (idle workers ask every poll).
    fn existing_pool(&self, url: &str) -> Option<Arc<Pool>> {
        let target = self.target(url).ok()?;
        self.pools
            .lock()
            .expect("pools lock")
            .get(&target.key)
            .cloned()
    }

    /// A sink asked another hub (or this one, told back) for a pause: `key` is its pool
    /// key ([`sink_key_of`]).
    pub(crate) fn pause_told(&self, key: &str, until: Instant) {
        let now = Instant::now();
        if until <= now {
            return;
        }
        let mut told = self.told.lock().expect("told lock");
        // Bounded by the sinks paused now.
        told.retain(|_, until| *until > now);
        let kept = told.entry(key.to_owned()).or_insert(until);
        *kept = (*kept).max(until);
    }

    /// Until when the sink with pool key `key` asked another hub for a pause, if it has not
    /// ended.
    fn told_until(&self, key: &str, now: Instant) -> Option<Instant> {
        let told = self.told.lock().expect("told lock");
        told.get(key).copied().filter(|until| *until > now)
    }

    /// Whether a request may go to the sink of `url` now.
    pub(crate) fn gate(&self, url: &str) -> Gate {
        let Ok(target) = self.target(url) else {
            return Gate::Open;
        };
        let now = Instant::now();
        if let Some(until) = self.told_until(&target.key, now) {
            return Gate::Paused(until);
        }
        let Some(pool) = self
            .pools
            .lock()
            .expect("pools lock")
            .get(&target.key)
            .cloned()
        else {
            return Gate::Open;
        };
        pool.breaker.lock().expect("breaker lock").gate(now)
    }

    /// The breaker of the sink of `url`.
    pub(crate) fn health_of(&self, url: &str) -> SinkHealth {
        let now = Instant::now();
        let told = self
            .target(url)
            .ok()
            .and_then(|target| self.told_until(&target.key, now));
        match self.existing_pool(url) {
            Some(pool) => pool.breaker.lock().expect("breaker lock").seen(told, now),
            None => Breaker::default().seen(told, now),
        }
    }

    /// Every sink this hub has connections to, with whether its breaker is open, in order.
    pub(crate) fn breakers(&self) -> Vec<(String, bool)> {
        let mut breakers: Vec<(String, bool)> = self
            .pools
            .lock()
            .expect("pools lock")
            .iter()
            .map(|(key, pool)| {
                let open = pool.breaker.lock().expect("breaker lock").is_open();
                (key.clone(), open)
            })
            .collect();
        breakers.sort();
        breakers
    }

    /// The sinks whose breaker is open, in order.
    pub(crate) fn open_sinks(&self) -> Vec<String> {
        let mut open: Vec<String> = self
            .pools
            .lock()
            .expect("pools lock")
            .iter()
            .filter(|(_, pool)| pool.breaker.lock().expect("breaker lock").is_open())
            .map(|(key, _)| key.clone())
            .collect();
        open.sort();
        open
    }

    /// A probe that was granted but not sent.
    pub(crate) fn release_probe(&self, url: &str) {
        if let Some(pool) = self.existing_pool(url) {
            pool.breaker.lock().expect("breaker lock").release_probe();
        }
    }

    /// Records what an attempt showed of its sink's health; `random` (uniform in [0, 1))
    /// jitters the breaker's pause. Returns the failures in a row when this report opened
    /// the sink's breaker.
    pub(crate) fn report(&self, url: &str, result: SinkResult, random: f64) -> Option<u32> {
        let pool = match result {
            SinkResult::Healthy => self.existing_pool(url),
            SinkResult::Failed | SinkResult::RetryAfter(_) => self.pool_of(url),
        };
        let pool = pool?;
        let limits = (self.limits.breaker_failures, self.limits.breaker_max_pause);
        let opened = pool
            .breaker
            .lock()
            .expect("breaker lock")
            .report(result, limits, random);
        if let Some(failures) = opened {
            tracing::warn!(sink = %sink_key_of(url), failures, "A sink keeps failing: its deliveries pause, and it is probed with one at a time.");
        }
        opened
    }

    /// A client for `url` presenting `identity`, made (and the least recently used one
    /// dropped past `max_idle_sinks`) if needed; the pool's own client without one.
    pub(crate) fn client_for(
        &self,
        url: &reqwest::Url,
        identity: Option<&ClientCertificate>,
    ) -> Result<reqwest::Client, String> {
        // Literal addresses never reach the resolver, which checks names.
        if self.networks.refuses_literal(url) {
            return Err(AddressRefused.to_string());
        }
        let Some(identity) = identity else {
            return Ok(self.pool(&sink_key(url))?.client.clone());
        };
        let key = format!(
            "{}\n{}\n{}",
            sink_key(url),
            identity.certificate,
            identity.private_key
        );
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut identities = self.identities.lock().expect("identities lock");
        if let Some((client, last_used)) = identities.get_mut(&key) {
            *last_used = now;
            return Ok(client.clone());
        }
        if identities.len() >= self.limits.max_idle_sinks {
            let oldest = identities
                .iter()
                .min_by_key(|(_, (_, last_used))| *last_used)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                identities.remove(&oldest);
            }
        }
        let client = self.client_with(client_tls(&self.roots, Some(identity))?)?;
        identities.insert(key, (client.clone(), now));
        Ok(client)
    }

    /// Waits up to `within` for the permits to send a request to `url`, with a client that
    /// presents `identity` if given.
    pub(crate) async fn acquire(
        &self,
        url: &str,
        within: Duration,
        identity: Option<&ClientCertificate>,
    ) -> Result<Permit, String> {
        let target = self
            .target(url)
            .map_err(|error| format!("the sink URL is invalid: {error}"))?;
        if self.networks.refuses_literal(&target.url) {
            return Err(AddressRefused.to_string());
        }
        let pool = self.pool(&target.key)?;
        let client = match identity {
            None => pool.client.clone(),
            Some(_) => self.client_for(&target.url, identity)?,
        };
        let wait = async {
            let sink = Arc::clone(&pool.permits).acquire_owned().await;
            let global = Arc::clone(&self.global).acquire_owned().await;
            (sink, global)
        };
        match tokio::time::timeout(within, wait).await {
            Ok((Ok(sink), Ok(global))) => Ok(Permit {
                client,
                target,
                _sink: sink,
                _global: global,
            }),
            Ok(_) => Err("the hub is shutting down".into()),
            Err(_) => Err(format!(
                "no connection was free within {} ms: the hub's limits ({} per sink, {} in \
                 all) are in use",
                within.as_millis(),
                self.limits.max_per_sink,
                self.limits.max_connections
            )),
        }
    }

    #[cfg(test)]
    fn pools(&self) -> usize {
        self.pools.lock().expect("pools lock").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            max_connections: 3,
            max_per_sink: 2,
            max_idle_per_sink: 1,
            idle_timeout: Duration::from_secs(1),
            max_idle_sinks: 2,
            breaker_failures: 3,
            breaker_max_pause: Duration::from_secs(4),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_breaker_opens_probes_one_at_a_time_and_closes_on_success() {
        let connections = Connections::new(limits(), &[], SinkNetworks::default()).unwrap();
        let url = "http://dead.test/hook";
        for _ in 0..2 {
            connections.report(url, SinkResult::Failed, 1.0);
            assert_eq!(connections.gate(url), Gate::Open, "below the threshold");
        }
        connections.report(url, SinkResult::Failed, 1.0);
        let Gate::Paused(until) = connections.gate(url) else {
            panic!("open after 3 failures");
        };
        assert_eq!(until - Instant::now(), Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(connections.gate(url), Gate::Probe);
        assert!(
            matches!(connections.gate(url), Gate::Paused(_)),
            "one probe at a time"
        );
        connections.report(url, SinkResult::Failed, 1.0);
        let Gate::Paused(mut until) = connections.gate(url) else {
            panic!("a failed probe pauses again");
        };
        assert_eq!(until - Instant::now(), Duration::from_secs(2), "doubled");
        for expected in [4, 4] {
            tokio::time::advance(until - Instant::now()).await;
            assert_eq!(connections.gate(url), Gate::Probe);
            connections.report(url, SinkResult::Failed, 1.0);
            let Gate::Paused(next) = connections.gate(url) else {
                panic!("paused");
            };
            assert_eq!(
                next - Instant::now(),
                Duration::from_secs(expected),
                "capped"
            );
            until = next;
        }
        tokio::time::advance(Duration::from_secs(4)).await;
        assert_eq!(connections.gate(url), Gate::Probe);
        connections.report(url, SinkResult::Healthy, 1.0);
        assert_eq!(connections.gate(url), Gate::Open, "closed by a success");
        assert_eq!(connections.gate("http://other.test/"), Gate::Open);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_pauses_the_sink_and_an_unsent_probe_is_released() {
        let connections = Connections::new(limits(), &[], SinkNetworks::default()).unwrap();
        let url = "http://busy.test/a";
        connections.report(url, SinkResult::RetryAfter(Duration::from_secs(30)), 0.0);
        let Gate::Paused(until) = connections.gate("http://busy.test/b") else {
            panic!("the whole sink pauses");
        };
        assert_eq!(until - Instant::now(), Duration::from_secs(30));
        connections.report("http://busy.test/b", SinkResult::Healthy, 0.0);
        assert_eq!(
            connections.gate(url),
            Gate::Paused(until),
            "another request's success does not end the pause the sink asked for"
        );
        for _ in 0..3 {
            connections.report(url, SinkResult::Failed, 0.0);
        }
        tokio::time::advance(Duration::from_secs(31)).await;
        assert_eq!(connections.gate(url), Gate::Probe);
        connections.release_probe(url);
        assert_eq!(
            connections.gate(url),
            Gate::Probe,
            "released, so granted again"
        );
    }

    const SHORT: Duration = Duration::from_millis(50);

    #[tokio::test]
    async fn per_sink_and_global_limits_hold() {
        let connections = Connections::new(limits(), &[], SinkNetworks::default()).unwrap();
        let a1 = connections
            .acquire("http://a.test/x", SHORT, None)
            .await
            .unwrap();
        let _a2 = connections
            .acquire("http://a.test/y", SHORT, None)
            .await
            .unwrap();
        let refused = connections.acquire("http://a.test:80/z", SHORT, None).await;
        assert!(refused.err().unwrap().contains("2 per sink"));
        let _b1 = connections
            .acquire("http://b.test/", SHORT, None)
            .await
            .unwrap();
        let refused = connections.acquire("http://b.test/", SHORT, None).await;
        assert!(
            refused.err().unwrap().contains("3 in all"),
            "the global limit"
        );
        drop(a1);
        assert!(
            connections
                .acquire("http://b.test/", SHORT, None)
                .await
                .is_ok()
        );
    }

    /// A certificate and key made for the test (PEM).
    fn identity(name: &str) -> ClientCertificate {
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = rcgen::CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        ClientCertificate {
            certificate: certificate.pem(),
            private_key: key.serialize_pem(),
        }
    }

    #[tokio::test]
    async fn clients_with_a_certificate_are_bounded_and_checked() {
        let connections = Connections::new(limits(), &[], SinkNetworks::default()).unwrap();
        let url = reqwest::Url::parse("https://a.test/").unwrap();
        let (one, two, three) = (identity("one"), identity("two"), identity("three"));
        for identity in [&one, &two, &one, &three] {
            connections.client_for(&url, Some(identity)).unwrap();
        }
        let kept = connections.identities.lock().unwrap().len();
        assert_eq!(
            kept,
            limits().max_idle_sinks,
            "at most max_idle_sinks clients"
        );
        let refused = reqwest::Url::parse("https://169.254.169.254/token").unwrap();
        assert!(connections.client_for(&refused, None).is_err());
        assert!(connections.client_for(&refused, Some(&one)).is_err());
        let mut broken = one.clone();
        broken.private_key = two.private_key.clone();
        let mismatch = check_client_certificate(&broken).unwrap_err();
        assert!(mismatch.contains("cannot be used"), "{mismatch}");
        assert!(check_client_certificate(&one).is_ok());
        let garbage = ClientCertificate {
            certificate: "not pem".into(),
            private_key: one.private_key.clone(),
        };
        assert!(check_client_certificate(&garbage).is_err());
    }

    #[test]
    fn parsed_sink_urls_are_shared_and_bounded() {
        let connections = Connections::new(limits(), &[], SinkNetworks::default()).unwrap();
        let one = connections.target("http://a.test/x?t=1").unwrap();
        let again = connections.target("http://a.test/x?t=1").unwrap();
        assert!(Arc::ptr_eq(&one, &again), "parsed once");
        assert_eq!(one.key, "http://a.test:80");
        assert_eq!(one.url.as_str(), "http://a.test/x?t=1");
        assert!(connections.target("not a url").is_err());
        for n in 0..MAX_TARGETS + 10 {
            connections.target(&format!("http://a.test/{n}")).unwrap();
        }
        let kept = connections.targets.lock().unwrap().len();
        assert!(kept <= MAX_TARGETS, "{kept} kept");
    }

    #[tokio::test]
    async fn idle_pools_are_bounded_and_busy_ones_kept() {
        let connections = Connections::new(limits(), &[], SinkNetworks::default()).unwrap();
        let busy = connections
            .acquire("http://a.test/", SHORT, None)
            .await
            .unwrap();
        drop(
            connections
                .acquire("http://b.test/", SHORT, None)
                .await
                .unwrap(),
        );
        drop(
            connections
                .acquire("http://c.test/", SHORT, None)
                .await
                .unwrap(),
        );
        assert_eq!(connections.pools(), 2, "b's idle pool made way for c");
        let again = connections.acquire("http://a.test/", SHORT, None).await;
        assert!(again.is_ok(), "a kept its pool while busy");
        drop(busy);
        assert_eq!(
            connections.limits.max_sockets(),
            3 + 2 * 2,
            "in flight, plus idle in the sinks' pools and the clients with a certificate"
        );
    }
}
