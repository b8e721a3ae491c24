//! The `outage` workload: one sink goes down while another stays healthy (issue: a dead
//! sink must not be hammered, nor slow others). Events for both are published at a steady
//! rate through two phases of the same run: both sinks up, then one answering 503. Reported
//! per phase: the healthy sink's publish-to-delivery p50/p99 and the attempts per second
//! that reached the other one. The hub runs in its own process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;

use crate::TOKEN;
use crate::deliver::{self, Record, now_us};

/// A sink that is up or down (503), counting the deliveries that reach it.
struct Switch {
    down: AtomicBool,
    attempts: AtomicU64,
}

async fn switched_sink(switch: &Arc<Switch>) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let switch = Arc::clone(switch);
    let router = axum::Router::new().fallback(move |method: Method| async move {
        if method == Method::OPTIONS {
            return deliver::consent();
        }
        switch.attempts.fetch_add(1, Ordering::Relaxed);
        if switch.down.load(Ordering::Relaxed) {
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        } else {
            StatusCode::NO_CONTENT.into_response()
        }
    });
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(url)
}

/// Publishes one event of each type every `interval` for `seconds`.
async fn publish_steadily(
    client: &reqwest::Client,
    base: &str,
    interval: Duration,
    seconds: u64,
    next_id: &AtomicU64,
) -> anyhow::Result<()> {
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut tick = tokio::time::interval(interval);
    while Instant::now() < end {
        tick.tick().await;
        for ty in ["nl.bench.healthy", "nl.bench.outage"] {
            let n = next_id.fetch_add(1, Ordering::Relaxed);
            let event = format!(
                r#"{{"specversion":"1.0","id":"outage-{n}","source":"urn:nld:oin:00000001823288444000:systeem:bench","type":"{ty}","subject":"{}"}}"#,
                now_us()
            );
            let status = client
                .post(format!("{base}/v1/events"))
                .bearer_auth(TOKEN)
                .header("content-type", "application/cloudevents+json")
                .body(event)
                .send()
                .await?
                .status();
            anyhow::ensure!(status == 202, "publishing answered {status}");
        }
    }
    Ok(())
}

/// One run; `breaker_failures` of `u32::MAX` disables the hub's breaker.
pub(crate) async fn run(seconds: u64, rate: u64, breaker_failures: u32) -> anyhow::Result<()> {
    let breaker = if breaker_failures == u32::MAX {
        "breaker disabled".to_owned()
    } else {
        format!("breaker after {breaker_failures} failures")
    };
    println!(
        "outage ({breaker}): {rate} events/s to each of two unordered subscriptions (default \
         retry policy), {seconds} s with both sinks up, then {seconds} s with one answering \
         503; {} cores; the hub runs in its own process",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let record = Arc::new(Record::default());
    let healthy = deliver::sinks(1, &record).await?.remove(0);
    let switch = Arc::new(Switch {
        down: AtomicBool::new(false),
        attempts: AtomicU64::new(0),
    });
    let outage = switched_sink(&switch).await?;
    let data = tempfile::tempdir()?;
    let (child, base) = crate::fanout::hub_process(data.path(), breaker_failures).await?;
    let client = reqwest::Client::new();
    for (sink, ty) in [(&healthy, "nl.bench.healthy"), (&outage, "nl.bench.outage")] {
        let body = serde_json::json!({"sink": sink, "protocol": "HTTP", "types": [ty],
                                      "config": {"ordering": "unordered"}});
        deliver::subscribe(&client, &base, &body).await?;
    }
    println!(
        "{:<26} {:>10} {:>10} {:>14}",
        "", "p50", "p99", "attempts at B"
    );
    let interval = Duration::from_micros(1_000_000 / rate.max(1));
    let next_id = AtomicU64::new(0);
    for (phase, down) in [("both sinks up", false), ("sink B answers 503", true)] {
        switch.down.store(down, Ordering::SeqCst);
        let before = switch.attempts.load(Ordering::SeqCst);
        record.start();
        publish_steadily(&client, &base, interval, seconds, &next_id).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        record.stop();
        let attempts = switch.attempts.load(Ordering::SeqCst) - before;
        let (p50, p99) = record.percentiles();
        println!(
            "{phase:<26} {p50:>7.2} ms {p99:>7.2} ms {:>10.1}/s",
            attempts as f64 / seconds as f64
        );
    }
    drop(child);
    Ok(())
}
