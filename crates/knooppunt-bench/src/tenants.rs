//! The `tenants` workload: whether other principals' many costly filters make a
//! principal's events slow. Each of `noisy` principals has `costly` subscriptions whose
//! filter scans the whole subject (by default `subject LIKE '%y%z%'`, never matching); the
//! bench principal publishes events with a large subject, one at a time, to its own single
//! subscription. Measured in one run: without the noisy subscriptions; with them under the
//! default budgets (per principal, `filters.max_evaluation_cost_per_principal`, and per
//! event, `filters.max_evaluation_cost_per_event`); with the per-event budget off (the hub
//! before it had one, where the cost grew with the number of noisy principals); and with
//! both off.

use std::time::{Duration, Instant};

use knooppunt_broker::{Authentication, Principal, Role, hash_token};
use serde_json::json;

use crate::{BENCH_OIN, TOKEN, hub_options, hub_with_options, stop_hubs};

/// The token of noisy principal `n`.
fn noisy_token(n: usize) -> String {
    format!("bench-noisy-token-{n}")
}

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

/// The noise of one measurement: `principals` principals with `costly` subscriptions each.
#[derive(Debug, Clone, Copy)]
struct Noise<'a> {
    principals: usize,
    costly: usize,
    /// The CESQL of each costly subscription.
    filter: &'a str,
}

/// One measurement: a fresh hub, the `noise`, these budgets (per principal, per event).
async fn measure(
    noise: Noise<'_>,
    (per_principal, per_event): (u64, u64),
    events: usize,
    subject_bytes: usize,
) -> anyhow::Result<Vec<f64>> {
    let data = tempfile::tempdir()?;
    let mut options = hub_options();
    let noisy = |n: usize| Principal {
        name: format!("noisy-{n}"),
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
    let noisy = (0..noise.principals).map(|n| (hash_token(&noisy_token(n)), noisy(n)));
    options.authentication =
        Authentication::tokens(std::iter::once((hash_token(TOKEN), bench)).chain(noisy));
    options.eval_limits.max_units_per_tenant = per_principal;
    options.eval_limits.max_units_per_event = per_event;
    let own = json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP",
                     "types": ["nl.bench.tenants"]});
    let base = hub_with_options(data.path(), vec![own], options).await?;
    let client = reqwest::Client::new();
    for (n, _) in (0..noise.principals).flat_map(|n| (0..noise.costly).map(move |c| (n, c))) {
        let body = json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP",
                          "filters": [{"sql": noise.filter}]});
        let status = client
            .post(format!("{base}/v1/subscriptions"))
            .bearer_auth(noisy_token(n))
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
        "{name:<60} {:>9.1} ms {:>9.1} ms {:>9.1} ms",
        at(0.5),
        at(0.9),
        took[took.len() - 1]
    );
}

pub(crate) async fn run(
    (noisy, costly, filter): (usize, usize, &str),
    events: usize,
    subject_bytes: usize,
) -> anyhow::Result<()> {
    let defaults = hub_options().eval_limits;
    let budgets = (defaults.max_units_per_tenant, defaults.max_units_per_event);
    println!(
        "{events} events with a {subject_bytes}-byte subject to the publisher's own subscription, \
         one at a time; {noisy} other principals have {costly} subscriptions each with the \
         filter `{filter}`"
    );
    println!("{:<60} {:>12} {:>12} {:>12}", "", "p50", "p90", "max");
    let quiet = Noise {
        principals: 0,
        costly: 0,
        filter,
    };
    let noise = Noise {
        principals: noisy,
        costly,
        filter,
    };
    line(
        "alone",
        &measure(quiet, budgets, events, subject_bytes).await?,
    );
    line(
        &format!(
            "noisy, budgets {} per principal, {} per event",
            budgets.0, budgets.1
        ),
        &measure(noise, budgets, events, subject_bytes).await?,
    );
    line(
        &format!("noisy, budget {} per principal, none per event", budgets.0),
        &measure(noise, (budgets.0, 0), events, subject_bytes).await?,
    );
    line(
        "noisy, no budgets",
        &measure(noise, (0, 0), events, subject_bytes).await?,
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
    Ok(())
}
