//! A bounded load generator: `connections` clients post for `duration`, then stop.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What one request carries; `body` is called with a unique number per request.
pub(crate) struct Request {
    pub(crate) url: String,
    pub(crate) content_type: &'static str,
    pub(crate) token: Option<String>,
    pub(crate) body: Arc<dyn Fn(u64) -> String + Send + Sync>,
    /// The status that counts as acknowledged.
    pub(crate) expect: u16,
}

/// The outcome of a run.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) acknowledged: u64,
    pub(crate) failed: u64,
    pub(crate) elapsed: Duration,
    latencies: Vec<Duration>,
}

impl Report {
    pub(crate) fn per_second(&self) -> f64 {
        self.acknowledged as f64 / self.elapsed.as_secs_f64()
    }

    pub(crate) fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let index = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[index]
    }
}

pub(crate) async fn run(request: Request, connections: usize, duration: Duration) -> Report {
    let request = Arc::new(request);
    let counter = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(connections)
        .build()
        .expect("a client");
    // Parsed once: the client should cost as little as possible next to the servers measured.
    let url = reqwest::Url::parse(&request.url).expect("a valid URL");
    let started = Instant::now();
    let workers: Vec<_> = (0..connections)
        .map(|_| {
            let (request, counter, failed, client) = (
                request.clone(),
                counter.clone(),
                failed.clone(),
                client.clone(),
            );
            let url = url.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while started.elapsed() < duration {
                    let n = counter.fetch_add(1, Ordering::Relaxed);
                    let mut builder = client
                        .post(url.clone())
                        .header("content-type", request.content_type)
                        .body((request.body)(n));
                    if let Some(token) = &request.token {
                        builder = builder.bearer_auth(token);
                    }
                    let sent = Instant::now();
                    match builder.send().await {
                        Ok(response) if response.status().as_u16() == request.expect => {
                            let _ = response.bytes().await;
                            latencies.push(sent.elapsed());
                        }
                        _ => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await.expect("a load worker"));
    }
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    Report {
        acknowledged: latencies.len() as u64,
        failed: failed.load(Ordering::Relaxed),
        elapsed,
        latencies,
    }
}
