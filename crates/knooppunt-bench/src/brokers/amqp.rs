//! `amqp`: delivery to an AMQP 1.0 broker (Debian's RabbitMQ with its AMQP 1.0 plugin, on
//! loopback), next to Apache Qpid Proton publishing to it directly (the baseline), in the
//! same run. One receiver (Proton, a window of 1,000) on the queue counts the messages. The hub runs in a
//! process of its own with one unordered subscription sending to the queue, unsettled, in
//! structured mode; this tree's load client publishes to it over HTTP (16 connections,
//! 1 KiB events) for `seconds`; the baseline then sends as many messages of the same size.
//! Messages/s from the first publish to the last message received, and the hub's CPU per
//! delivery.

use std::time::{Duration, Instant};

use knooppunt_test_brokers::{AmqpCounter, RabbitMq, amqp_publish};

const HUB: (&str, &str) = ("hub", "hub-secret");
const READER: (&str, &str) = ("reader", "reader-secret");

/// Waits until `expected` messages were counted in all (at most a minute); when the last
/// was.
fn all_in(counter: &AmqpCounter, expected: u64) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = counter.count();
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

pub(crate) fn run(seconds: u64) -> anyhow::Result<()> {
    let broker = RabbitMq::start(&[HUB, READER]);
    let address = format!("/amq/queue/{}", RabbitMq::QUEUE);
    let counter = AmqpCounter::start(&broker, &address, READER);
    let client = std::env::current_exe()?;
    let subscription = serde_json::json!({
        "sink": format!("{}{address}", broker.url()), "protocol": "AMQP",
        "sinkcredential": {"credentialtype": "PLAIN", "identifier": HUB.0, "secret": HUB.1},
        "config": {"ordering": "unordered"}});
    let mut hub = crate::compare::Hub::start(&client, vec![subscription])?;
    let (stat, url) = (hub.stat.clone(), hub.events.clone());
    let (_, warm) = crate::compare::load(&client, &url, 2, 16, "202", None)?;
    all_in(&counter, warm as u64)?;
    let before = counter.count();
    let cpu_before = crate::proc_cpu(&stat, 14);
    let started = Instant::now();
    let (published, acknowledged) = crate::compare::load(&client, &url, seconds, 16, "202", None)?;
    let finished = all_in(&counter, before + acknowledged as u64)?;
    let cpu = crate::proc_cpu(&stat, 14) - cpu_before;
    hub.stop();
    let hub_rate = acknowledged / finished.duration_since(started).as_secs_f64();

    // The baseline: Qpid Proton, as many messages of the same size.
    let count = acknowledged as u64;
    let before = counter.count();
    let started = Instant::now();
    amqp_publish(&broker, HUB, &address, (count, 1024));
    let finished = all_in(&counter, before + count)?;
    let direct_rate = count as f64 / finished.duration_since(started).as_secs_f64();
    println!(
        "AMQP 1.0 to RabbitMQ on loopback, unsettled, one receiver (Qpid Proton), 1 KiB \
         events, {seconds} s of publishing to the hub (16 connections), then as many messages \
         from Qpid Proton\n\
         hub published/s  {published:.0}\n\
         hub deliveries/s, first publish to last message  {hub_rate:.0}\n\
         hub CPU per delivery (µs)  {:.2}\n\
         Qpid Proton messages/s  {direct_rate:.0}\n\
         hub / Qpid Proton (%)  {:.0}",
        cpu * 1e6 / acknowledged.max(1.0),
        hub_rate * 100.0 / direct_rate.max(1.0),
    );
    Ok(())
}
