//! The `deliver` workload: events published to a hub with N subscriptions, each delivered to
//! its own sink, next to a plain HTTP forwarding hop (receive, POST to the N sinks, answer)
//! measured in the same run. Each event's `subject` carries its send time (microseconds since
//! the Unix epoch, from the load generator's clock), so the sinks measure publish-to-delivery
//! latency.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

/// What the sinks saw.
#[derive(Debug, Default)]
pub(crate) struct Record {
    measuring: AtomicBool,
    delivered: AtomicU64,
    latencies_us: std::sync::Mutex<Vec<u64>>,
}

impl Record {
    pub(crate) fn start(&self) {
        self.delivered.store(0, Ordering::SeqCst);
        self.latencies_us.lock().expect("latencies").clear();
        self.measuring.store(true, Ordering::SeqCst);
    }

    pub(crate) fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::SeqCst)
    }

    /// Counts `n` deliveries with these latencies (microseconds), while measuring.
    pub(crate) fn count(&self, n: u64, latencies_us: impl Iterator<Item = u64>) {
        if !self.measuring.load(Ordering::Relaxed) {
            return;
        }
        self.delivered.fetch_add(n, Ordering::Relaxed);
        self.latencies_us
            .lock()
            .expect("latencies")
            .extend(latencies_us);
    }

    pub(crate) fn stop(&self) {
        self.measuring.store(false, Ordering::SeqCst);
    }

    /// p50 and p99 in milliseconds.
    pub(crate) fn percentiles(&self) -> (f64, f64) {
        let mut latencies = self.latencies_us.lock().expect("latencies").clone();
        if latencies.is_empty() {
            return (0.0, 0.0);
        }
        latencies.sort_unstable();
        let at = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize];
        (at(0.5) as f64 / 1000.0, at(0.99) as f64 / 1000.0)
    }
}

pub(crate) fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

#[derive(serde::Deserialize)]
struct Stamped<'a> {
    #[serde(borrow)]
    subject: Option<&'a str>,
}

/// The answer of every bench sink to the validation handshake: consent to anyone.
pub(crate) fn consent() -> Response {
    let mut response = StatusCode::OK.into_response();
    response
        .headers_mut()
        .insert("webhook-allowed-origin", HeaderValue::from_static("*"));
    response
}

/// Creates a subscription through the API of the hub at `base`.
pub(crate) async fn subscribe(
    client: &reqwest::Client,
    base: &str,
    body: &serde_json::Value,
) -> anyhow::Result<()> {
    let response = client
        .post(format!("{base}/v1/subscriptions"))
        .bearer_auth(crate::TOKEN)
        .json(body)
        .send()
        .await?;
    anyhow::ensure!(
        response.status() == 201,
        "creating a subscription answered {}",
        response.status()
    );
    Ok(())
}

async fn sink(State(record): State<Arc<Record>>, method: Method, body: Bytes) -> Response {
    if method == Method::OPTIONS {
        return consent();
    }
    let now = now_us();
    if record.measuring.load(Ordering::Relaxed) {
        record.delivered.fetch_add(1, Ordering::Relaxed);
        let sent = serde_json::from_slice::<Stamped<'_>>(&body)
            .ok()
            .and_then(|s| s.subject?.parse::<u64>().ok());
        if let Some(sent) = sent {
            record
                .latencies_us
                .lock()
                .expect("latencies")
                .push(now.saturating_sub(sent));
        }
    }
    StatusCode::NO_CONTENT.into_response()
}

/// Starts `count` sinks sharing one record; returns their URLs.
pub(crate) async fn sinks(count: usize, record: &Arc<Record>) -> anyhow::Result<Vec<String>> {
    let mut urls = Vec::with_capacity(count);
    for _ in 0..count {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        urls.push(format!("http://{}/", listener.local_addr()?));
        let router = axum::Router::new()
            .fallback(sink)
            .with_state(Arc::clone(record));
        tokio::spawn(async move { axum::serve(listener, router).await });
    }
    Ok(urls)
}

struct Forwarder {
    client: reqwest::Client,
    sinks: Vec<String>,
}

async fn forward(State(forwarder): State<Arc<Forwarder>>, body: Bytes) -> StatusCode {
    let mut sends = tokio::task::JoinSet::new();
    for sink in &forwarder.sinks {
        let request = forwarder
            .client
            .post(sink)
            .header("content-type", "application/cloudevents+json")
            .body(body.clone());
        sends.spawn(async move { request.send().await.map(|r| r.status().is_success()) });
    }
    let mut all = true;
    while let Some(sent) = sends.join_next().await {
        all &= matches!(sent, Ok(Ok(true)));
    }
    if all {
        StatusCode::ACCEPTED
    } else {
        StatusCode::BAD_GATEWAY
    }
}

/// The baseline: a plain forwarding hop that POSTs each request to every sink and answers
/// 202 once they all answered. Nothing is stored, nothing retried.
pub(crate) async fn forwarder(sinks: Vec<String>) -> anyhow::Result<String> {
    let state = Arc::new(Forwarder {
        client: reqwest::Client::new(),
        sinks,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let router = axum::Router::new()
        .route("/", axum::routing::post(forward))
        .with_state(state);
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(url)
}

/// Waits until `expected` deliveries arrived or `limit` passed.
pub(crate) async fn drain(record: &Record, expected: u64, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while record.delivered() < expected && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn counting_sink(State(count): State<Arc<AtomicU64>>, method: Method, _: Bytes) -> Response {
    if method == Method::OPTIONS {
        return consent();
    }
    count.fetch_add(1, Ordering::Relaxed);
    StatusCode::NO_CONTENT.into_response()
}

/// `sink-process`: `count` sinks that count every delivery, and a control address, printed
/// first, whose `GET /` answers the deliveries so far and `GET /sinks` the sinks' URLs, one
/// per line. Serves until killed.
pub(crate) async fn sink_process(count: usize) -> anyhow::Result<()> {
    let delivered = Arc::new(AtomicU64::new(0));
    let mut urls = Vec::with_capacity(count);
    for _ in 0..count {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        urls.push(format!("http://{}/", listener.local_addr()?));
        let router = axum::Router::new()
            .fallback(counting_sink)
            .with_state(Arc::clone(&delivered));
        tokio::spawn(async move { axum::serve(listener, router).await });
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("sinks counted at http://{}/", listener.local_addr()?);
    let urls = urls.join("\n");
    let router = axum::Router::new()
        .route(
            "/",
            axum::routing::get(move || async move { delivered.load(Ordering::SeqCst).to_string() }),
        )
        .route("/sinks", axum::routing::get(move || async move { urls }));
    axum::serve(listener, router).await?;
    Ok(())
}
