//! Measures the CPU cost of publishing through the router, without the network: 64 tasks
//! publish 1 KiB events concurrently (so that group commit works as under load) on one
//! runtime thread; the CPU time of that thread (the HTTP handler) and of the store's
//! committer thread are read from `/proc` and reported per event.
//!
//! `cargo run --release -p knooppunt-broker --example route_cost [-- EVENTS]`

#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::body::Body;
use http::Request;
use knooppunt_broker::{Authentication, Hub, HubOptions};
use knooppunt_store_embedded::EmbeddedStore;
use tower::ServiceExt;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PUBLISHERS: u64 = 64;

/// CPU time (user + system) per thread name of this process, in seconds; the main thread
/// is called `main`.
fn cpu_by_thread() -> Vec<(String, f64)> {
    let ticks = 100.0; // USER_HZ on Linux
    let mut threads = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return threads;
    };
    let main = std::process::id().to_string();
    for task in tasks.flatten() {
        let path = task.path();
        let name = if task.file_name().to_str() == Some(main.as_str()) {
            "main".to_owned()
        } else {
            std::fs::read_to_string(path.join("comm")).unwrap_or_default()
        };
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        // The fields after the parenthesised name: utime and stime are the 12th and 13th.
        let Some(fields) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
            continue;
        };
        let numbers: Vec<f64> = fields
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0.0))
            .collect();
        if numbers.len() > 12 {
            threads.push((name.trim().to_owned(), (numbers[11] + numbers[12]) / ticks));
        }
    }
    threads
}

fn main() {
    let events: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(300_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let mut options = HubOptions::new(Authentication::Disabled);
        options.delivery.sink_networks =
            knooppunt_broker::SinkNetworks::parse(&["127.0.0.0/8".into()]).expect("a CIDR");
        let hub = Hub::open(Arc::new(store), options).await.unwrap();
        let router = hub.router();
        let subscription = r#"{"sink": "http://127.0.0.1:9/", "protocol": "HTTP",
                               "types": ["nl.bench.type1"]}"#;
        let created = router
            .clone()
            .oneshot(
                Request::post("/v1/subscriptions")
                    .header("content-type", "application/json")
                    .body(Body::from(subscription))
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(created.status(), 201);

        let filler: Arc<str> = "x".repeat(830).into();
        let run = |count: u64| {
            let next = Arc::new(AtomicU64::new(0));
            let tasks: Vec<_> = (0..PUBLISHERS)
                .map(|_| {
                    let (router, next, filler) =
                        (router.clone(), Arc::clone(&next), Arc::clone(&filler));
                    tokio::spawn(async move {
                        loop {
                            let n = next.fetch_add(1, Ordering::Relaxed);
                            if n >= count {
                                break;
                            }
                            publish(&router, n, &filler).await;
                        }
                    })
                })
                .collect();
            async move {
                for task in tasks {
                    task.await.unwrap();
                }
            }
        };
        // Warm up caches, the allocator and the indexes.
        run(events / 10).await;

        let before = cpu_by_thread();
        let started = Instant::now();
        run(events).await;
        let wall = started.elapsed();
        let after = cpu_by_thread();
        let spent = |name: &str| {
            let sum = |threads: &[(String, f64)]| {
                threads
                    .iter()
                    .filter(|(n, _)| n.starts_with(name))
                    .map(|(_, s)| s)
                    .sum::<f64>()
            };
            (sum(&after) - sum(&before)) * 1e6 / events as f64
        };
        let handler = spent("main");
        let committer = spent("knooppunt-store");
        println!(
            "{events} events, {PUBLISHERS} concurrent: {:.0} events/s; CPU per event: handler \
             {handler:.1} µs, committer {committer:.1} µs, total {:.1} µs",
            events as f64 / wall.as_secs_f64(),
            handler + committer
        );
    });
}

async fn publish(router: &axum::Router, n: u64, filler: &str) {
    let body = format!(
        r#"{{"specversion":"1.0","id":"r-{n}","source":"urn:nld:oin:00000001823288444000:systeem:bench","type":"nl.bench.type1","subject":"{n}","data":{{"filler":"{filler}"}}}}"#
    );
    let request = Request::post("/v1/events")
        .header("content-type", "application/cloudevents+json")
        .body(Body::from(body))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 202);
    axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
}
