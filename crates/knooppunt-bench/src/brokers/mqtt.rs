//! `mqtt`: delivery to an MQTT 5 broker (Debian's Mosquitto on loopback), next to
//! `mosquitto_pub -l`. One subscriber (`mosquitto_sub`) counts.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use knooppunt_test_brokers::{Mosquitto, mosquitto_clients};

use super::{HUB, READER, Shape};

const TOPIC: &str = "knooppunt/bench";

/// `mqtt`'s arguments.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    shape: Shape,
    /// The subscription's (and the baseline's) QoS.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(0..=2))]
    qos: u8,
}

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

    fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn run(Args { shape, qos }: Args) -> anyhow::Result<()> {
    mosquitto_clients();
    let broker = Mosquitto::start(&[HUB, READER]);
    let counter = Counter::start(&broker, qos)?;
    let subscription = serde_json::json!({
        "sink": broker.url(), "protocol": "MQTT5",
        "protocolsettings": {"topicname": TOPIC, "qos": qos},
        "sinkcredential": {"credentialtype": "PLAIN", "identifier": HUB.0, "secret": HUB.1},
        "config": {"ordering": "unordered"}});
    let hub = super::hub_run(subscription, shape.seconds, || counter.count())?;
    let line = format!(
        r#"{{"specversion":"1.0","id":"bench","source":"/bench","type":"nl.bench.type0","data":"{}"}}"#,
        "x".repeat(940)
    );
    let mut publisher = None;
    let rate = super::baseline_rate(
        || counter.count(),
        hub.acknowledged,
        || {
            let mut child = Command::new("mosquitto_pub")
                .args(["-V", "5", "-h", "127.0.0.1", "-p", &broker.port.to_string()])
                .args(["-t", TOPIC, "-q", &qos.to_string(), "-l"])
                .args(["-u", HUB.0, "-P", HUB.1])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()?;
            let mut stdin = std::io::BufWriter::new(child.stdin.take().expect("piped"));
            for _ in 0..hub.acknowledged {
                writeln!(stdin, "{line}")?;
            }
            publisher = Some(child);
            Ok(())
        },
    )?;
    if let Some(mut publisher) = publisher {
        let _ = publisher.wait();
    }
    super::report(
        &format!("MQTT 5 to Mosquitto on loopback, QoS {qos}, one subscriber (mosquitto_sub)"),
        shape.seconds,
        &hub,
        "mosquitto_pub",
        rate,
    );
    Ok(())
}
