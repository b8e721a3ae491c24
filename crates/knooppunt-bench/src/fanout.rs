//! The `fanout` workload: one event matched by many subscriptions (issue: fan-out must cost
//! each delivery the same whatever the fan-out). The hub runs in a child process of its own
//! (`hub-process`), so that its peak resident memory is measured alone; the sinks run here,
//! a few servers with one path per subscription.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::io::AsyncBufReadExt;

use crate::TOKEN;

/// Sinks that count deliveries and consent to every handshake.
async fn counting_sinks(count: usize, delivered: &Arc<AtomicU64>) -> anyhow::Result<Vec<String>> {
    let mut urls = Vec::with_capacity(count);
    for _ in 0..count {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        urls.push(format!("http://{}/", listener.local_addr()?));
        let delivered = Arc::clone(delivered);
        let router = axum::Router::new().fallback(move |method: Method| async move {
            if method == Method::OPTIONS {
                return crate::deliver::consent();
            }
            delivered.fetch_add(1, Ordering::Relaxed);
            Response::from(StatusCode::NO_CONTENT.into_response())
        });
        tokio::spawn(async move { axum::serve(listener, router).await });
    }
    Ok(urls)
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
pub(crate) fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Starts the hub in a child process on a fresh store; returns it with its base URL.
pub(crate) async fn hub_process(
    data: &std::path::Path,
    breaker_failures: u32,
) -> anyhow::Result<(tokio::process::Child, String)> {
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .args([
            "hub-process",
            "--breaker-failures",
            &breaker_failures.to_string(),
            "--data",
        ])
        .arg(data)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().expect("piped");
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let base = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await??
        .ok_or_else(|| anyhow::anyhow!("the hub process ended before it listened"))?;
    Ok((child, base))
}

pub(crate) async fn run(
    subscriptions: usize,
    sinks: usize,
    event_bytes: usize,
    limit: Duration,
) -> anyhow::Result<()> {
    println!(
        "fanout: one {event_bytes}-byte event to {subscriptions} subscriptions (ordered, the \
         default) on {sinks} loopback sinks, {} cores; the hub runs in its own process",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let delivered = Arc::new(AtomicU64::new(0));
    let urls = counting_sinks(sinks, &delivered).await?;
    let data = tempfile::tempdir()?;
    let (child, base) = hub_process(data.path(), 5).await?;
    let pid = child.id().expect("running");
    let client = reqwest::Client::new();

    let started = Instant::now();
    let mut creating = tokio::task::JoinSet::new();
    let next = Arc::new(AtomicU64::new(0));
    for _ in 0..32 {
        let (client, base, urls, next) = (
            client.clone(),
            base.clone(),
            urls.clone(),
            Arc::clone(&next),
        );
        creating.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= subscriptions {
                    return anyhow::Ok(());
                }
                let body = serde_json::json!({
                    "sink": format!("{}s{i}", urls[i % urls.len()]),
                    "protocol": "HTTP",
                    "types": ["nl.bench.fanout"],
                });
                crate::deliver::subscribe(&client, &base, &body).await?;
            }
        });
    }
    while let Some(created) = creating.join_next().await {
        created??;
    }
    let rss_before = status_kib(pid, "VmRSS").unwrap_or(0);
    println!(
        "{subscriptions} subscriptions created in {:.1} s; hub RSS {:.0} MiB",
        started.elapsed().as_secs_f64(),
        rss_before as f64 / 1024.0
    );
    // Resets the peak resident size (VmHWM) to the current one.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5")?;

    let filler = "x".repeat(event_bytes.saturating_sub(200));
    let event = format!(
        r#"{{"specversion":"1.0","id":"fanout-1","source":"urn:nld:oin:00000001823288444000:systeem:bench","type":"nl.bench.fanout","data":{{"filler":"{filler}"}}}}"#
    );
    let started = Instant::now();
    let response = client
        .post(format!("{base}/v1/events"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/cloudevents+json")
        .body(event)
        .send()
        .await?;
    anyhow::ensure!(
        response.status() == 202,
        "publishing answered {}",
        response.status()
    );
    let acknowledged = started.elapsed();
    let mut peak = 0;
    while (delivered.load(Ordering::Relaxed) as usize) < subscriptions && started.elapsed() < limit
    {
        peak = peak.max(status_kib(pid, "VmHWM").unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = started.elapsed();
    peak = peak.max(status_kib(pid, "VmHWM").unwrap_or(0));
    let count = delivered.load(Ordering::Relaxed);
    println!(
        "acknowledged in {:.1} ms; delivered {count} of {subscriptions} in {:.3} s ({:.0}/s); \
         hub peak RSS {:.0} MiB (+{:.0} MiB over the idle hub)",
        acknowledged.as_secs_f64() * 1000.0,
        elapsed.as_secs_f64(),
        count as f64 / elapsed.as_secs_f64(),
        peak as f64 / 1024.0,
        peak.saturating_sub(rss_before) as f64 / 1024.0,
    );
    drop(child);
    Ok(())
}
