//! A bounded load generator: `connections` keep-alive HTTP/1.1 connections post for
//! `duration`, then stop. It speaks just enough HTTP (a request with `Content-Length`, a
//! response with `Content-Length` or none) to cost the servers' machine as little as possible,
//! like wrk; the `ingest` workload runs it in its own single-threaded process.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What one request carries; `body` is called with a unique number per request.
pub(crate) struct Request {
    /// Where to send it; several URLs separated by commas share the connections (several
    /// hubs behind one client, as behind a load balancer).
    pub(crate) url: String,
    pub(crate) content_type: &'static str,
    pub(crate) token: Option<String>,
    pub(crate) body: Arc<dyn Fn(u64) -> String + Send + Sync>,
    /// The status that counts as acknowledged.
    pub(crate) expect: u16,
    /// Requests per second over all connections, spaced evenly; `None`: each connection
    /// sends its next request as soon as the last is answered.
    pub(crate) rate: Option<f64>,
}

/// The outcome of a run.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) acknowledged: u64,
    pub(crate) failed: u64,
    pub(crate) elapsed: Duration,
    latencies: Vec<Duration>,
}

/// A report as the `load` subcommand prints it, for the parent process to read.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Summary {
    pub(crate) rate: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) acknowledged: u64,
    pub(crate) failed: u64,
    /// CPU (user + system) the server side of the bench used per acknowledged event, in
    /// microseconds: this process's own CPU while the load ran (the load generator is a
    /// child process of its own, not counted). Set by the caller.
    #[serde(default)]
    pub(crate) server_cpu_us: f64,
}

impl Report {
    pub(crate) fn summary(&self) -> Summary {
        Summary {
            rate: self.acknowledged as f64 / self.elapsed.as_secs_f64(),
            p50_ms: self.percentile(0.5).as_secs_f64() * 1000.0,
            p99_ms: self.percentile(0.99).as_secs_f64() * 1000.0,
            acknowledged: self.acknowledged,
            failed: self.failed,
            server_cpu_us: 0.0,
        }
    }

    fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let index = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[index]
    }
}

/// `http://host:port/path` → (`host:port`, `/path`).
fn split_url(url: &str) -> (String, String) {
    let rest = url
        .strip_prefix("http://")
        .expect("an http:// URL on loopback");
    match rest.find('/') {
        Some(at) => (rest[..at].to_owned(), rest[at..].to_owned()),
        None => (rest.to_owned(), "/".to_owned()),
    }
}

pub(crate) async fn run(request: Request, connections: usize, duration: Duration) -> Report {
    let request = Arc::new(request);
    let counter = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let targets: Vec<(String, String)> = request.url.split(',').map(split_url).collect();
    let started = Instant::now();
    let workers: Vec<_> = (0..connections)
        .map(|i| {
            let (request, counter, failed) = (request.clone(), counter.clone(), failed.clone());
            let (host, path) = targets[i % targets.len()].clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let Ok(mut stream) = TcpStream::connect(&host).await else {
                    failed.fetch_add(1, Ordering::Relaxed);
                    return latencies;
                };
                let _ = stream.set_nodelay(true);
                let authorization = request
                    .token
                    .as_ref()
                    .map(|token| format!("Authorization: Bearer {token}\r\n"))
                    .unwrap_or_default();
                let mut buffer = Vec::with_capacity(4096);
                while started.elapsed() < duration {
                    let n = counter.fetch_add(1, Ordering::Relaxed);
                    if let Some(rate) = request.rate {
                        // Request n goes at its own time, whatever the connection's last
                        // answer took (a late one goes at once: the schedule is not moved).
                        let at = started + Duration::from_secs_f64(n as f64 / rate);
                        if at >= started + duration {
                            break;
                        }
                        tokio::time::sleep_until(at.into()).await;
                    }
                    let body = (request.body)(n);
                    let message = format!(
                        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {}\r\n{authorization}\
                         Content-Length: {}\r\n\r\n{body}",
                        request.content_type,
                        body.len()
                    );
                    let sent = Instant::now();
                    let status = match exchange(&mut stream, message.as_bytes(), &mut buffer).await {
                        Some(status) => status,
                        None => {
                            failed.fetch_add(1, Ordering::Relaxed);
                            return latencies;
                        }
                    };
                    if status == request.expect {
                        latencies.push(sent.elapsed());
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
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

/// Sends one request and reads one response; returns its status.
async fn exchange(stream: &mut TcpStream, message: &[u8], buffer: &mut Vec<u8>) -> Option<u16> {
    stream.write_all(message).await.ok()?;
    buffer.clear();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = std::str::from_utf8(&buffer[..header_end]).ok()?;
    let status: u16 = head.split(' ').nth(1)?.parse().ok()?;
    let length: usize = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())
                .flatten()
        })
        .unwrap_or(0);
    while buffer.len() < header_end + length {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    Some(status)
}
