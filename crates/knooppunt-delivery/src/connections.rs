//! Outbound connections, bounded. Every request to a sink (delivery or handshake) first takes
//! a permit for its sink (scheme, host and port) and then one of the hub's, so that:
//! - at most `max_connections` requests are in flight across all sinks, and at most
//!   `max_per_sink` to one sink (a slow sink can tie up only its own share);
//! - idle connections are pooled per sink, at most `max_idle_per_sink` each, closed after
//!   `idle_timeout`, and kept for at most `max_idle_sinks` sinks: each sink has its own pool,
//!   and the least recently used pool with nothing in flight is dropped (closing its
//!   connections) when another sink needs one.
//!
//! So the hub never holds more than `max_connections + max_idle_sinks * max_idle_per_sink`
//! outbound sockets ([`ConnectionLimits::max_sockets`]), whatever the number of
//! subscriptions. A waiting request counts against its attempt's timeout.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls_pki_types::CertificateDer;
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
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 512,
            max_per_sink: 32,
            max_idle_per_sink: 8,
            idle_timeout: Duration::from_secs(30),
            max_idle_sinks: 256,
        }
    }
}

impl ConnectionLimits {
    /// The most outbound sockets these limits allow.
    pub fn max_sockets(&self) -> usize {
        self.max_connections + self.max_idle_sinks * self.max_idle_per_sink
    }
}

/// One sink's pool and its share of the connections.
struct Pool {
    client: reqwest::Client,
    permits: Arc<Semaphore>,
    last_used: AtomicU64,
}

/// The hub's outbound connections.
pub(crate) struct Connections {
    tls: rustls::ClientConfig,
    limits: ConnectionLimits,
    global: Arc<Semaphore>,
    pools: Mutex<HashMap<String, Arc<Pool>>>,
    clock: AtomicU64,
}

/// The right to send one request: a client of the sink's pool and both permits, held until
/// the response is read (dropping it frees them).
pub(crate) struct Permit {
    pub(crate) client: reqwest::Client,
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

/// The TLS settings of every pool: the operating system's CA certificates plus `extra_pem`.
fn tls_config(extra_pem: &[u8]) -> Result<rustls::ClientConfig, String> {
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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("cannot set up TLS: {error}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

impl Connections {
    pub(crate) fn new(
        limits: ConnectionLimits,
        extra_root_certificates: &[u8],
    ) -> Result<Connections, String> {
        let positive = [
            ("max_connections", limits.max_connections),
            ("max_per_sink", limits.max_per_sink),
            ("max_idle_sinks", limits.max_idle_sinks),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err(format!("the connection limit {name} must be at least 1"));
        }
        let connections = Connections {
            tls: tls_config(extra_root_certificates)?,
            limits,
            global: Arc::new(Semaphore::new(limits.max_connections)),
            pools: Mutex::new(HashMap::new()),
            clock: AtomicU64::new(0),
        };
        // Fails now, not at the first delivery, if the client cannot be built.
        connections.client()?;
        Ok(connections)
    }

    fn client(&self) -> Result<reqwest::Client, String> {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .use_preconfigured_tls(self.tls.clone())
            .pool_max_idle_per_host(self.limits.max_idle_per_sink)
            .pool_idle_timeout(self.limits.idle_timeout)
            .build()
            .map_err(|error| format!("cannot build the HTTP client: {error}"))
    }

    /// The sink's pool, made (and the least recently used idle one dropped) if needed.
    fn pool(&self, key: String) -> Result<Arc<Pool>, String> {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut pools = self.pools.lock().expect("pools lock");
        if let Some(pool) = pools.get(&key) {
            pool.last_used.store(now, Ordering::Relaxed);
            return Ok(Arc::clone(pool));
        }
        if pools.len() >= self.limits.max_idle_sinks {
            let idle = |pool: &Pool| pool.permits.available_permits() == self.limits.max_per_sink;
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
        });
        pools.insert(key, Arc::clone(&pool));
        Ok(pool)
    }

    /// Waits up to `within` for the permits to send a request to `url`.
    pub(crate) async fn acquire(&self, url: &str, within: Duration) -> Result<Permit, String> {
        let parsed = reqwest::Url::parse(url)
            .map_err(|error| format!("the sink URL is invalid: {error}"))?;
        let pool = self.pool(sink_key(&parsed))?;
        let wait = async {
            let sink = Arc::clone(&pool.permits).acquire_owned().await;
            let global = Arc::clone(&self.global).acquire_owned().await;
            (sink, global)
        };
        match tokio::time::timeout(within, wait).await {
            Ok((Ok(sink), Ok(global))) => Ok(Permit {
                client: pool.client.clone(),
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
        }
    }

    const SHORT: Duration = Duration::from_millis(50);

    #[tokio::test]
    async fn per_sink_and_global_limits_hold() {
        let connections = Connections::new(limits(), &[]).unwrap();
        let a1 = connections.acquire("http://a.test/x", SHORT).await.unwrap();
        let _a2 = connections.acquire("http://a.test/y", SHORT).await.unwrap();
        let refused = connections.acquire("http://a.test:80/z", SHORT).await;
        assert!(refused.err().unwrap().contains("2 per sink"));
        let _b1 = connections.acquire("http://b.test/", SHORT).await.unwrap();
        let refused = connections.acquire("http://b.test/", SHORT).await;
        assert!(
            refused.err().unwrap().contains("3 in all"),
            "the global limit"
        );
        drop(a1);
        assert!(connections.acquire("http://b.test/", SHORT).await.is_ok());
    }

    #[tokio::test]
    async fn idle_pools_are_bounded_and_busy_ones_kept() {
        let connections = Connections::new(limits(), &[]).unwrap();
        let busy = connections.acquire("http://a.test/", SHORT).await.unwrap();
        drop(connections.acquire("http://b.test/", SHORT).await.unwrap());
        drop(connections.acquire("http://c.test/", SHORT).await.unwrap());
        assert_eq!(connections.pools(), 2, "b's idle pool made way for c");
        let again = connections.acquire("http://a.test/", SHORT).await;
        assert!(again.is_ok(), "a kept its pool while busy");
        drop(busy);
        assert_eq!(
            connections.limits.max_sockets(),
            3 + 2,
            "in flight plus idle"
        );
    }
}
