//! `nats`: delivery to a NATS server (Debian's nats-server on loopback, JetStream on),
//! core NATS or JetStream (a stream taking the subject), next to nats-py, NATS's own
//! client (with `--jetstream`, 256 publishes awaiting their acknowledgement at a time).
//! One core subscriber (nats-py) counts.

use knooppunt_test_brokers::{Counter, NatsServer, nats_make_stream, nats_publish};

use super::{HUB, READER, Shape};

const SUBJECT: &str = "knooppunt.bench";

/// `nats`'s arguments.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    shape: Shape,
    /// JetStream (at least once, each message acknowledged by a stream) instead of core
    /// NATS.
    #[arg(long)]
    jetstream: bool,
}

pub(crate) fn run(Args { shape, jetstream }: Args) -> anyhow::Result<()> {
    let server = NatsServer::start(&[HUB, READER]);
    if jetstream {
        nats_make_stream(&server, READER, "BENCH", SUBJECT);
    }
    let counter = Counter::nats(&server, SUBJECT, READER);
    let subscription = serde_json::json!({
        "sink": server.url(), "protocol": "NATS",
        "protocolsettings": {"subject": SUBJECT, "jetstream": jetstream},
        "sinkcredential": {"credentialtype": "PLAIN", "identifier": HUB.0, "secret": HUB.1},
        "config": {"ordering": "unordered"}});
    let hub = super::hub_run(subscription, shape.seconds, || counter.count())?;
    let rate = super::baseline_rate(
        || counter.count(),
        hub.acknowledged,
        || {
            nats_publish(&server, HUB, SUBJECT, (hub.acknowledged, 1024), jetstream);
            Ok(())
        },
    )?;
    let kind = if jetstream { "JetStream" } else { "core NATS" };
    super::report(
        &format!("NATS to nats-server on loopback, {kind}, one subscriber (nats-py)"),
        shape.seconds,
        &hub,
        "nats-py",
        rate,
    );
    Ok(())
}
