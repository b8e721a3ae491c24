//! The `pull` workload: events published at full speed (the load generator in its own
//! process) to a hub with one subscription, delivered by push to a local sink, then received
//! and acknowledged by 1, 4 and 16 pull consumers, each on a fresh hub, in the same run; and
//! the latency of a waiting `receive` when the consumer is caught up (one event at a time),
//! next to push's for the same trickle.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::deliver::{self, Record, now_us};
use crate::{Shape, TOKEN};

#[derive(serde::Deserialize)]
struct Stamped {
    subject: Option<String>,
}

/// A pull subscription's consumer loop: receive up to 100, acknowledge them, until `stop`.
async fn consume(
    client: reqwest::Client,
    base: String,
    record: Arc<Record>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> anyhow::Result<()> {
    while !stop.load(Ordering::Relaxed) {
        let answer = client
            .post(format!("{base}/receive?maxEvents=100&maxWait=PT1S"))
            .bearer_auth(TOKEN)
            .send()
            .await?;
        anyhow::ensure!(
            answer.status() == 200,
            "receive answered {}",
            answer.status()
        );
        let tokens: Vec<String> = answer
            .headers()
            .get("knooppunt-lock-tokens")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(", ").map(str::to_owned).collect())
            .unwrap_or_default();
        let events: Vec<Stamped> = answer.json().await?;
        if tokens.is_empty() {
            continue;
        }
        let acked = client
            .post(format!("{base}/acknowledge"))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({"lockTokens": tokens}))
            .send()
            .await?;
        anyhow::ensure!(
            acked.status() == 200,
            "acknowledge answered {}",
            acked.status()
        );
        let now = now_us();
        let sent: Vec<u64> = events
            .iter()
            .filter_map(|e| e.subject.as_deref()?.parse().ok())
            .collect();
        record.count(
            sent.len() as u64,
            sent.iter().map(|s| now.saturating_sub(*s)),
        );
    }
    Ok(())
}

/// A hub with one pull subscription: the hub's URL and its subscription's.
async fn pull_hub(data: &std::path::Path) -> anyhow::Result<(String, String)> {
    let base = crate::hub_with(
        data,
        vec![serde_json::json!({"protocol": "HTTP",
                                "filters": [{"prefix": {"type": "nl.bench."}}],
                                "config": {"delivery": "pull", "ordering": "unordered"}})],
    )
    .await?;
    let list: serde_json::Value = reqwest::Client::new()
        .get(format!("{base}/v1/subscriptions"))
        .bearer_auth(TOKEN)
        .send()
        .await?
        .json()
        .await?;
    let id = list[0]["id"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("no subscription listed"))?;
    let subscription = format!("{base}/v1/subscriptions/{id}");
    Ok((base, subscription))
}

/// Load for `shape.seconds` while `consumers` receive and acknowledge; events/s
/// acknowledged in the window.
async fn measure_pull(shape: Shape, consumers: usize) -> anyhow::Result<f64> {
    let data = tempfile::tempdir()?;
    let (base, subscription) = pull_hub(data.path()).await?;
    let record = Arc::new(Record::default());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client = reqwest::Client::new();
    let tasks: Vec<_> = (0..consumers)
        .map(|_| {
            tokio::spawn(consume(
                client.clone(),
                subscription.clone(),
                Arc::clone(&record),
                Arc::clone(&stop),
            ))
        })
        .collect();
    record.start();
    let published = crate::load_child(
        shape,
        &format!("{base}/v1/events"),
        Some(TOKEN),
        202,
        true,
        None,
    )
    .await?;
    let in_window = record.delivered();
    deliver::drain(&record, published.acknowledged, Duration::from_secs(30)).await;
    record.stop();
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await??;
    }
    let (p50, p99) = record.percentiles();
    let name = format!(
        "pull, {consumers} consumer{}",
        if consumers == 1 { "" } else { "s" }
    );
    println!(
        "{name:<30} {:>9.0}/s {:>11.0}/s {:>7.2} ms {:>7.2} ms {:>9}",
        published.rate,
        in_window as f64 / shape.seconds as f64,
        p50,
        p99,
        published.acknowledged.saturating_sub(record.delivered())
    );
    Ok(in_window as f64 / shape.seconds as f64)
}

/// One event at a time, every `gap`: the time from its publish to its arrival (p50, p99 in
/// ms), by push to a sink and by a waiting pull consumer.
async fn trickle(events: usize, gap: Duration) -> anyhow::Result<((f64, f64), (f64, f64))> {
    let client = reqwest::Client::new();
    let publish = |base: String, n: usize| {
        let client = client.clone();
        async move {
            let event = serde_json::json!({"specversion": "1.0", "id": format!("t-{n}"),
                "source": "urn:nld:oin:00000001823288444000:bench", "type": "nl.bench.trickle",
                "subject": now_us().to_string()});
            let answer = client
                .post(format!("{base}/v1/events"))
                .bearer_auth(TOKEN)
                .header("content-type", "application/cloudevents+json")
                .body(event.to_string())
                .send()
                .await?;
            anyhow::ensure!(
                answer.status() == 202,
                "publish answered {}",
                answer.status()
            );
            anyhow::Ok(())
        }
    };
    // Push.
    let record = Arc::new(Record::default());
    let urls = deliver::sinks(1, &record).await?;
    let data = tempfile::tempdir()?;
    let base = crate::hub_with(data.path(), crate::deliver_subscriptions(&urls)).await?;
    record.start();
    for n in 0..events {
        publish(base.clone(), n).await?;
        tokio::time::sleep(gap).await;
    }
    deliver::drain(&record, events as u64, Duration::from_secs(10)).await;
    record.stop();
    let push = record.percentiles();
    // Pull: one consumer waiting in receive.
    let data = tempfile::tempdir()?;
    let (base, subscription) = pull_hub(data.path()).await?;
    let record = Arc::new(Record::default());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let consumer = tokio::spawn(consume(
        client.clone(),
        subscription,
        Arc::clone(&record),
        Arc::clone(&stop),
    ));
    record.start();
    tokio::time::sleep(Duration::from_millis(200)).await;
    for n in 0..events {
        publish(base.clone(), n).await?;
        tokio::time::sleep(gap).await;
    }
    deliver::drain(&record, events as u64, Duration::from_secs(10)).await;
    record.stop();
    stop.store(true, Ordering::Relaxed);
    consumer.await??;
    Ok((push, record.percentiles()))
}

pub(crate) async fn run(shape: Shape, trickle_events: usize) -> anyhow::Result<()> {
    println!(
        "pull: {} publishing connections, {}-byte events, {} s each, one subscription (unordered), \
         {} cores; the publisher runs in its own process, the consumers in this one",
        shape.connections,
        shape.event_bytes,
        shape.seconds,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<30} {:>11} {:>13} {:>10} {:>10} {:>9}",
        "", "published", "delivered", "p50", "p99", "backlog"
    );
    let record = Arc::new(Record::default());
    let urls = deliver::sinks(1, &record).await?;
    let data = tempfile::tempdir()?;
    let base = crate::hub_with(data.path(), crate::deliver_subscriptions(&urls)).await?;
    let (push, _) = crate::measure_delivery(
        "push, 1 sink",
        shape,
        1,
        (&format!("{base}/v1/events"), Some(TOKEN)),
        &record,
        Duration::from_secs(30),
        None,
    )
    .await?;
    for consumers in [1, 4, 16] {
        let pull = measure_pull(shape, consumers).await?;
        println!(
            "  acknowledged by {consumers:>2} pull consumer(s) / delivered by push: {:.0}%",
            100.0 * pull / push.max(1.0)
        );
    }
    let ((push50, push99), (pull50, pull99)) =
        trickle(trickle_events, Duration::from_millis(20)).await?;
    println!(
        "caught up, one event every 20 ms ({trickle_events} events), publish to arrival: push \
         p50 {push50:.2} ms p99 {push99:.2} ms; waiting receive p50 {pull50:.2} ms p99 {pull99:.2} ms"
    );
    Ok(())
}
