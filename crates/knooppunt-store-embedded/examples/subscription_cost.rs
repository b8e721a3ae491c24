//! What sled costs for what it holds (subscriptions): the time of a durable subscription
//! write, one at a time and 32 at once, the time to load them at open, and the resident
//! memory they add. For the decision in ARCHITECTURE.md on whether sled earns its place.
//!
//! `cargo run --release -p knooppunt-store-embedded --example subscription_cost [COUNT]`

#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::Instant;

use knooppunt_store::Records;
use knooppunt_store_conformance::subscription;
use knooppunt_store_embedded::EmbeddedStore;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let count: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let before = rss_kib();
        let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let opened = rss_kib();
        let started = Instant::now();
        for i in 0..200 {
            store.insert_subscription(&subscription(&format!("one-{i:05}"))).await.unwrap();
        }
        let one = started.elapsed() / 200;
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for worker in 0..32 {
            let store = Arc::clone(&store);
            tasks.spawn(async move {
                for i in (worker..count).step_by(32) {
                    store.insert_subscription(&subscription(&format!("many-{i:06}"))).await.unwrap();
                }
            });
        }
        while tasks.join_next().await.is_some() {}
        let many = started.elapsed();
        let filled = rss_kib();
        drop(store);
        let started = Instant::now();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let loaded = store.subscriptions().await.unwrap().len();
        let load = started.elapsed();
        println!(
            "sled: one durable subscription write {:.2} ms (one at a time); {count} writes from 32 \
             tasks in {:.2} s ({:.2} ms each); open + load {loaded} in {:.0} ms; RSS {} MiB at open, \
             +{} MiB for {count} subscriptions",
            one.as_secs_f64() * 1000.0,
            many.as_secs_f64(),
            many.as_secs_f64() * 1000.0 / count as f64,
            load.as_secs_f64() * 1000.0,
            opened.saturating_sub(before) / 1024,
            filled.saturating_sub(opened) / 1024,
        );
    });
}
