//! The `approvals` workload: what approval by the data owner costs when routing. Ingest
//! against a hub with a catalog of `entries` entries and `subscriptions` subscriptions
//! (every event matches one in a hundred of them), once with the entries of half the event
//! types approval-required (so half the subscriptions are approval-bound, all of them
//! granted, and every event routes to as many subscriptions as before) and once with those
//! entries made open again after the same setup, alternating, in the same run.

use serde_json::json;

use crate::{Shape, TOKEN, hub_options, hub_with_options, ingest_subscriptions, measure, print};

/// The catalog: an entry for each of the bench's 100 event types (the first `gated` of them
/// approval-required) and the rest for other types. With `reopen`, the approval-required
/// entries are made open again once their grants exist: the hub then holds the same grants
/// (and audit entries, and store writes behind it) as the approval-bound one, and only the
/// check when routing differs.
async fn describe(base: &str, entries: usize, gated: usize, reopen: bool) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    for i in 0..entries {
        let ty = if i < 100 {
            format!("nl.bench.type{i}")
        } else {
            format!("nl.other.type{i}")
        };
        let approval = if i < gated {
            "approval-required"
        } else {
            "open"
        };
        let body = json!({"source": format!("urn:nld:oin:{}:", crate::BENCH_OIN), "type": ty,
                          "description": "bench", "approval": approval});
        let answer = client
            .post(format!("{base}/v1/eventtypes"))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await?;
        let status = answer.status();
        anyhow::ensure!(status == 201, "creating a catalog entry answered {status}");
        if i < gated {
            let created: serde_json::Value = answer.json().await?;
            let id = created["id"].as_str().unwrap_or_default().to_owned();
            let mut open = body.clone();
            open["approval"] = json!("open");
            ids.push((id, open));
        }
    }
    if reopen {
        for (id, body) in ids {
            let status = client
                .put(format!("{base}/v1/eventtypes/{id}"))
                .bearer_auth(TOKEN)
                .json(&body)
                .send()
                .await?
                .status();
            anyhow::ensure!(status == 200, "reopening a catalog entry answered {status}");
        }
    }
    Ok(())
}

/// How many grants are `granted` (the bench principal owns the entries and the
/// subscriptions, so its requests are granted at once).
async fn granted(base: &str) -> anyhow::Result<usize> {
    let client = reqwest::Client::new();
    let mut url = format!("{base}/v1/approvals?state=granted&pageSize=1000");
    let mut count = 0;
    loop {
        let answer = client.get(&url).bearer_auth(TOKEN).send().await?;
        let next = answer
            .headers()
            .get("link")
            .and_then(|l| l.to_str().ok())
            .and_then(|l| l.strip_prefix('<'))
            .and_then(|l| l.split('>').next())
            .map(str::to_owned);
        let page: Vec<serde_json::Value> = answer.json().await?;
        count += page.len();
        match next {
            Some(path) => url = format!("{base}{path}"),
            None => return Ok(count),
        }
    }
}

pub(crate) async fn run(
    shape: Shape,
    warmup: u64,
    subscriptions: usize,
    entries: usize,
    rounds: usize,
) -> anyhow::Result<()> {
    println!(
        "approvals: {} connections, {}-byte events, {} s each after {warmup} s of warm-up, \
         {subscriptions} subscriptions, {entries} catalog entries, {rounds} rounds, {} cores",
        shape.connections,
        shape.event_bytes,
        shape.seconds,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<28} {:>12} {:>12} {:>12} {:>8} {:>6} {:>11}",
        "", "rate", "p50", "p99", "acked", "failed", "CPU/event"
    );
    let mut rates = [Vec::new(), Vec::new()];
    for _ in 0..rounds {
        for (i, reopen) in [true, false].into_iter().enumerate() {
            let data = tempfile::tempdir()?;
            // One principal owns them all: more than the default quota.
            let mut options = hub_options();
            options.quotas.max_subscriptions = subscriptions;
            let base =
                hub_with_options(data.path(), ingest_subscriptions(subscriptions), options).await?;
            describe(&base, entries, 50, reopen).await?;
            let grants = granted(&base).await?;
            let expected = subscriptions / 2;
            anyhow::ensure!(
                grants == expected,
                "{grants} subscriptions granted, {expected} expected"
            );
            let url = format!("{base}/v1/events");
            let summary = measure(shape, warmup, &url, Some(TOKEN), 202).await?;
            let name = if reopen {
                "all entries open".to_owned()
            } else {
                format!("{grants} approval-bound")
            };
            print(&name, &summary);
            rates[i].push(summary.rate);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let (open, bound) = (mean(&rates[0]), mean(&rates[1]));
    println!(
        "approval-bound / open: {:.1}% (means {open:.0}/s and {bound:.0}/s)",
        100.0 * bound / open.max(1.0)
    );
    Ok(())
}
