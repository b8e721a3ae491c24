//! The `tenants` workload: whether one principal's many costly filters make another
//! principal's events slow. A `noisy` principal has `costly` subscriptions whose filter
//! scans the whole subject (`subject LIKE '%y%z%'`, never matching); the bench principal
//! publishes events with a large subject, one at a time, to its own single subscription.
//! Measured three ways in one run: without the noisy subscriptions, with them under the
//! per-principal budget (`filters.max_evaluation_cost_per_principal`, the default), and
//! with them and that budget off (the hub before it had one).

use std::time::{Duration, Instant};

use knooppunt_broker::{Authentication, Principal, Role, hash_token};
use serde_json::json;

use crate::{BENCH_OIN, TOKEN, hub_options, hub_with_options, stop_hubs};

const NOISY_TOKEN: &str = "bench-noisy-token";

/// The publish latencies of `events` events with a subject of `subject_bytes`, in ms.
async fn publish_all(base: &str, events: usize, subject_bytes: usize) -> anyhow::Result<Vec<f64>> {
    let client = reqwest::Client::new();
    let subject = "x".repeat(subject_bytes);
    let mut took = Vec::with_capacity(events);
    for n in 0..events {
        let event = json!({"specversion": "1.0", "id": format!("tenants-{n}"),
                           "source": format!("urn:nld:oin:{BENCH_OIN}:systeem:bench"),
                           "type": "nl.bench.tenants", "subject": subject});
        let started = Instant::now();
        let status = client
            .post(format!("{base}/v1/events"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/cloudevents+json")
            .body(event.to_string())
            .send()
            .await?
            .status();
        took.push(started.elapsed().as_secs_f64() * 1000.0);
        anyhow::ensure!(status == 202, "a publish answered {status}");
    }
    took.sort_by(f64::total_cmp);
    Ok(took)
}

/// One measurement: a fresh hub, `costly` noisy subscriptions, this per-principal budget.
async fn measure(
    costly: usize,
    per_principal: u64,
    events: usize,
    subject_bytes: usize,
) -> anyhow::Result<Vec<f64>> {
    let data = tempfile::tempdir()?;
    let mut options = hub_options();
    let noisy = Principal {
        name: "noisy".into(),
        roles: [Role::Subscriber].into(),
        subscribe_type_prefixes: Vec::new(),
        publish_source_prefixes: Vec::new(),
        oin: None,
    };
    let bench = Principal {
        name: "bench".into(),
        roles: [Role::Publisher, Role::Subscriber, Role::Admin].into(),
        subscribe_type_prefixes: Vec::new(),
        publish_source_prefixes: Vec::new(),
        oin: None,
    };
    options.authentication =
        Authentication::tokens([(hash_token(TOKEN), bench), (hash_token(NOISY_TOKEN), noisy)]);
    options.eval_limits.max_units_per_tenant = per_principal;
    let own = json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP",
                     "types": ["nl.bench.tenants"]});
    let base = hub_with_options(data.path(), vec![own], options).await?;
    let client = reqwest::Client::new();
    for _ in 0..costly {
        let body = json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP",
                          "filters": [{"sql": "subject LIKE '%y%z%'"}]});
        let status = client
            .post(format!("{base}/v1/subscriptions"))
            .bearer_auth(NOISY_TOKEN)
            .json(&body)
            .send()
            .await?
            .status();
        anyhow::ensure!(
            status == 201,
            "creating a noisy subscription answered {status}"
        );
    }
    // One event first, not counted (caches, allocator).
    publish_all(&base, 1, subject_bytes).await?;
    let took = publish_all(&base, events, subject_bytes).await;
    stop_hubs().await;
    took
}

fn line(name: &str, took: &[f64]) {
    let at = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
    println!(
        "{name:<52} {:>9.1} ms {:>9.1} ms {:>9.1} ms",
        at(0.5),
        at(0.9),
        took[took.len() - 1]
    );
}

pub(crate) async fn run(costly: usize, events: usize, subject_bytes: usize) -> anyhow::Result<()> {
    let default = hub_options().eval_limits.max_units_per_tenant;
    println!(
        "{events} events with a {subject_bytes}-byte subject to the publisher's own subscription, \
         one at a time; another principal has {costly} subscriptions whose LIKE scans the subject"
    );
    println!("{:<52} {:>12} {:>12} {:>12}", "", "p50", "p90", "max");
    line("alone", &measure(0, default, events, subject_bytes).await?);
    line(
        &format!("with the noisy principal, budget {default}"),
        &measure(costly, default, events, subject_bytes).await?,
    );
    line(
        "with the noisy principal, no per-principal budget",
        &measure(costly, 0, events, subject_bytes).await?,
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    Ok(())
}
