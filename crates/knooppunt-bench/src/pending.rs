//! The `pending` workload: what a long outage costs the hub's memory. One pull subscription
//! that nobody pulls collects `events` pending deliveries (published in batches); the hub is
//! killed and started again on its store, and its resident memory after the restart is set
//! against that of the same hub started on a store with only the subscription. The
//! difference, divided by the pending deliveries, is the memory each costs (issue 41: at
//! most 120 bytes, so that a subscriber's day-long outage at national volume fits).

use std::time::{Duration, Instant};

use crate::TOKEN;
use crate::fanout::{hub_process, status_kib};

const TYPE: &str = "nl.bench.pending";

/// A batch of `count` small events numbered from `first`.
fn batch(first: u64, count: u64) -> String {
    let events: Vec<String> = (first..first + count)
        .map(|n| {
            format!(
                r#"{{"specversion":"1.0","id":"pending-{n}","source":"urn:nld:oin:00000001823288444000:systeem:bench","type":"{TYPE}","subject":"{n}","data":{{"n":{n}}}}}"#
            )
        })
        .collect();
    format!("[{}]", events.join(","))
}

/// The hub's resident memory once it has settled (the lowest of a few readings a little
/// apart, so that a passing allocation does not count), in KiB.
async fn settled_rss(pid: u32) -> u64 {
    let mut lowest = u64::MAX;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        lowest = lowest.min(status_kib(pid, "VmRSS").unwrap_or(u64::MAX));
    }
    lowest
}

/// How many deliveries the subscription holds, as the hub reports it.
async fn backlog(client: &reqwest::Client, base: &str, id: &str) -> anyhow::Result<u64> {
    let status: serde_json::Value = client
        .get(format!("{base}/v1/subscriptions/{id}/status"))
        .bearer_auth(TOKEN)
        .send()
        .await?
        .json()
        .await?;
    status["backlog"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("the status has no backlog: {status}"))
}

async fn pull_subscription(client: &reqwest::Client, base: &str) -> anyhow::Result<String> {
    let body = serde_json::json!({"protocol": "HTTP", "types": [TYPE],
                                  "config": {"delivery": "pull", "ordering": "unordered"}});
    let created: serde_json::Value = client
        .post(format!("{base}/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    created["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no id in {created}"))
}

pub(crate) async fn run(events: u64, batch_size: u64) -> anyhow::Result<()> {
    println!(
        "pending: {events} deliveries of one pull subscription nobody pulls, published in \
         batches of {batch_size}; the hub's resident memory after a restart, against the same \
         hub with only the subscription; {} cores; the hub runs in its own process",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let client = reqwest::Client::new();

    // The reference: a store with the subscription alone, after a restart.
    let empty = tempfile::tempdir()?;
    let (mut child, base) = hub_process(empty.path(), 5).await?;
    pull_subscription(&client, &base).await?;
    child.kill().await?;
    let (mut child, _) = hub_process(empty.path(), 5).await?;
    let empty_kib = settled_rss(child.id().expect("running")).await;
    child.kill().await?;

    let data = tempfile::tempdir()?;
    let (mut child, base) = hub_process(data.path(), 5).await?;
    let id = pull_subscription(&client, &base).await?;
    let started = Instant::now();
    let next = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut publishing = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (client, base, next) = (client.clone(), base.clone(), next.clone());
        publishing.spawn(async move {
            loop {
                let first = next.fetch_add(batch_size, std::sync::atomic::Ordering::Relaxed);
                if first >= events {
                    return anyhow::Ok(());
                }
                let count = batch_size.min(events - first);
                let status = client
                    .post(format!("{base}/v1/events"))
                    .bearer_auth(TOKEN)
                    .header("content-type", "application/cloudevents-batch+json")
                    .body(batch(first, count))
                    .send()
                    .await?
                    .status();
                anyhow::ensure!(status == 202, "publishing a batch answered {status}");
            }
        });
    }
    while let Some(published) = publishing.join_next().await {
        published??;
    }
    let publish_time = started.elapsed();
    let before_kib = settled_rss(child.id().expect("running")).await;
    child.kill().await?;

    let started = Instant::now();
    let (mut child, base) = hub_process(data.path(), 5).await?;
    let open_time = started.elapsed();
    let pid = child.id().expect("running");
    let after_kib = settled_rss(pid).await;
    let pending = backlog(&client, &base, &id).await?;
    anyhow::ensure!(
        pending == events,
        "the subscription holds {pending} deliveries after the restart, not {events}"
    );
    child.kill().await?;

    let per_delivery = (after_kib.saturating_sub(empty_kib) * 1024) as f64 / events as f64;
    println!(
        "published in {:.1} s; reopened and listening in {:.1} s",
        publish_time.as_secs_f64(),
        open_time.as_secs_f64()
    );
    println!(
        "resident: {:.0} MiB with only the subscription, {:.0} MiB before the restart, \
         {:.0} MiB after it with {pending} pending",
        empty_kib as f64 / 1024.0,
        before_kib as f64 / 1024.0,
        after_kib as f64 / 1024.0
    );
    println!("memory per pending delivery after the restart: {per_delivery:.0} bytes");
    Ok(())
}
