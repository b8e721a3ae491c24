//! Delivery to message brokers (`mqtt`, `nats`, `amqp`), each next to the broker's own
//! client publishing to it directly (the baseline), in the same run. The hub runs in a
//! process of its own (`hub-process`) with one unordered subscription to the broker in
//! structured mode; this tree's load client publishes to it over HTTP (16 connections,
//! 1 KiB events) for `seconds`; the baseline then sends as many messages of the same size.
//! One subscriber counts both. Messages/s from the first publish to the last message
//! counted, and the hub's CPU per delivery.

pub(crate) mod amqp;
pub(crate) mod mqtt;
pub(crate) mod nats;

use std::time::{Duration, Instant};

/// The hub's login at the broker, and the subscriber's.
pub(crate) const HUB: (&str, &str) = ("hub", "hub-secret");
pub(crate) const READER: (&str, &str) = ("reader", "reader-secret");

/// The arguments every broker workload takes.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct Shape {
    /// How long the hub is published to.
    #[arg(long, default_value_t = 5)]
    pub(crate) seconds: u64,
}

/// Waits until `count` says `expected` messages arrived in all (at most a minute); when the
/// last did.
pub(crate) fn all_in(count: impl Fn() -> u64, expected: u64) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = count();
        if now >= expected {
            return Ok(Instant::now());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{now} of {expected} messages arrived in a minute"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The hub's half of a run: what it was published (events/s) and delivered (each second
/// from the first publish to the last message), and its CPU per delivery (µs).
pub(crate) struct HubRun {
    pub(crate) published: f64,
    pub(crate) acknowledged: u64,
    pub(crate) delivered: f64,
    pub(crate) cpu_per_delivery: f64,
}

/// Starts a hub with `subscription`, warms it for 2 s, then publishes to it for `seconds`
/// and waits for what `count` counts.
pub(crate) fn hub_run(
    subscription: serde_json::Value,
    seconds: u64,
    count: impl Fn() -> u64,
) -> anyhow::Result<HubRun> {
    let client = std::env::current_exe()?;
    let mut hub = crate::compare::Hub::start(&client, vec![subscription])?;
    let (stat, url) = (hub.stat.clone(), hub.events.clone());
    let (_, warm) = crate::compare::load(&client, &url, 2, 16, "202", None)?;
    all_in(&count, warm as u64)?;
    let before = count();
    let cpu_before = crate::proc_cpu(&stat, 14);
    let started = Instant::now();
    let (published, acknowledged) = crate::compare::load(&client, &url, seconds, 16, "202", None)?;
    let finished = all_in(&count, before + acknowledged as u64)?;
    let cpu = crate::proc_cpu(&stat, 14) - cpu_before;
    hub.stop();
    Ok(HubRun {
        published,
        acknowledged: acknowledged as u64,
        delivered: acknowledged / finished.duration_since(started).as_secs_f64(),
        cpu_per_delivery: cpu * 1e6 / acknowledged.max(1.0),
    })
}

/// Runs the baseline (`send`: the broker's own client sending `count` messages) and waits
/// for them: its messages/s.
pub(crate) fn baseline_rate(
    counted: impl Fn() -> u64,
    count: u64,
    send: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<f64> {
    let before = counted();
    let started = Instant::now();
    send()?;
    let finished = all_in(&counted, before + count)?;
    Ok(count as f64 / finished.duration_since(started).as_secs_f64())
}

/// Prints a run: `what` was measured, then the hub's figures beside `baseline`'s rate.
pub(crate) fn report(what: &str, seconds: u64, hub: &HubRun, baseline: &str, rate: f64) {
    println!(
        "{what}, 1 KiB events, {seconds} s of publishing to the hub (16 connections), then as \
         many messages from {baseline}\n\
         hub published/s  {:.0}\n\
         hub deliveries/s, first publish to last message  {:.0}\n\
         hub CPU per delivery (µs)  {:.2}\n\
         {baseline} messages/s  {rate:.0}\n\
         hub / {baseline} (%)  {:.0}",
        hub.published,
        hub.delivered,
        hub.cpu_per_delivery,
        hub.delivered * 100.0 / rate.max(1.0),
    );
}
