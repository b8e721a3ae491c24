//! `mqtt`: delivery to an MQTT 5 broker (Debian's Mosquitto on loopback), next to the
//! broker's own client publishing to it directly (`mosquitto_pub -l`, the baseline), in the
//! same run. One subscriber (`mosquitto_sub`) counts the messages. The hub runs in a process
//! of its own (`hub-process`) with one unordered subscription publishing to the broker in
//! structured mode; this tree's load client publishes to it over HTTP (16 connections, 1 KiB
//! events) for `seconds`; the baseline then publishes as many messages of the same size.
//! Messages/s from the first publish to the last message counted, and the hub's CPU per
//! delivery.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use knooppunt_test_brokers::{Mosquitto, mosquitto_clients};

const TOPIC: &str = "knooppunt/bench";
const HUB: (&str, &str) = ("hub", "hub-secret");
const READER: (&str, &str) = ("reader", "reader-secret");

/// `mosquitto_sub` on the topic, counting what arrives.
struct Counter {
    child: std::process::Child,
    count: Arc<AtomicU64>,
}

impl Counter {
    fn start(broker: &Mosquitto, qos: u8) -> anyhow::Result<Counter> {
        // At most QoS 1 to the subscriber: Debian's mosquitto_sub (2.0.11) breaks off with
        // "a network protocol error" within a few dozen QoS 2 messages, whoever publishes
        // them (mosquitto_pub too). The publishers' QoS is what is measured.
        let mut child = Command::new("mosquitto_sub")
            .args(["-V", "5", "-h", "127.0.0.1", "-p", &broker.port.to_string()])
            .args(["-t", TOPIC, "-q", &qos.min(1).to_string(), "-F", "x"])
            .args(["-u", READER.0, "-P", READER.1])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let count = Arc::new(AtomicU64::new(0));
        let lines = BufReader::new(child.stdout.take().expect("piped"));
        let counted = Arc::clone(&count);
        std::thread::spawn(move || {
            for _ in lines.lines().map_while(Result::ok) {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
        // Subscribed well before anything is published.
        std::thread::sleep(Duration::from_millis(500));
        Ok(Counter { child, count })
    }

    /// Waits until `expected` messages arrived in all (at most a minute); when the last did.
    fn all_in(&self, expected: u64) -> anyhow::Result<Instant> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let now = self.count.load(Ordering::Relaxed);
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
}

impl Drop for Counter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn run(seconds: u64, qos: u8) -> anyhow::Result<()> {
    mosquitto_clients();
    let broker = Mosquitto::start(&[HUB, READER]);
    let counter = Counter::start(&broker, qos)?;
    let client = std::env::current_exe()?;
    let subscription = serde_json::json!({
        "sink": broker.url(), "protocol": "MQTT5",
        "protocolsettings": {"topicname": TOPIC, "qos": qos},
        "sinkcredential": {"credentialtype": "PLAIN", "identifier": HUB.0, "secret": HUB.1},
        "config": {"ordering": "unordered"}});
    let mut hub = crate::compare::Hub::start(&client, vec![subscription])?;
    let (stat, url) = (hub.stat.clone(), hub.events.clone());
    let (_, warm) = crate::compare::load(&client, &url, 2, 16, "202", None)?;
    counter.all_in(warm as u64)?;
    let before = counter.count.load(Ordering::Relaxed);
    let cpu_before = crate::proc_cpu(&stat, 14);
    let started = Instant::now();
    let (published, acknowledged) = crate::compare::load(&client, &url, seconds, 16, "202", None)?;
    let finished = counter.all_in(before + acknowledged as u64)?;
    let cpu = crate::proc_cpu(&stat, 14) - cpu_before;
    hub.stop();
    let hub_rate = acknowledged / finished.duration_since(started).as_secs_f64();

    // The baseline: the broker's own client, as many messages of the same size.
    let count = acknowledged as u64;
    let line = format!(
        r#"{{"specversion":"1.0","id":"bench","source":"/bench","type":"nl.bench.type0","data":"{}"}}"#,
        "x".repeat(940)
    );
    let before = counter.count.load(Ordering::Relaxed);
    let started = Instant::now();
    let mut publisher = Command::new("mosquitto_pub")
        .args(["-V", "5", "-h", "127.0.0.1", "-p", &broker.port.to_string()])
        .args(["-t", TOPIC, "-q", &qos.to_string(), "-l"])
        .args(["-u", HUB.0, "-P", HUB.1])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()?;
    {
        let mut stdin = std::io::BufWriter::new(publisher.stdin.take().expect("piped"));
        for _ in 0..count {
            writeln!(stdin, "{line}")?;
        }
    }
    let finished = counter.all_in(before + count)?;
    let _ = publisher.wait();
    let direct_rate = count as f64 / finished.duration_since(started).as_secs_f64();
    println!(
        "MQTT 5 to Mosquitto on loopback, QoS {qos}, one subscriber (mosquitto_sub), 1 KiB \
         events, {seconds} s of publishing to the hub (16 connections), then as many messages \
         from mosquitto_pub\n\
         hub published/s  {published:.0}\n\
         hub deliveries/s, first publish to last message  {hub_rate:.0}\n\
         hub CPU per delivery (µs)  {:.2}\n\
         mosquitto_pub -l messages/s  {direct_rate:.0}\n\
         hub / mosquitto_pub (%)  {:.0}",
        cpu * 1e6 / acknowledged.max(1.0),
        hub_rate * 100.0 / direct_rate.max(1.0),
    );
    Ok(())
}
