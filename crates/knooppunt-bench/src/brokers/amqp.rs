//! `amqp`: delivery to an AMQP 1.0 broker (Debian's RabbitMQ with its AMQP 1.0 plugin, on
//! loopback), unsettled, to a queue, next to Apache Qpid Proton sending to it directly.
//! One Proton receiver (a window of 1,000) on the queue counts.

use knooppunt_test_brokers::{Counter, RabbitMq, amqp_publish};

use super::{HUB, READER, Shape};

pub(crate) fn run(shape: Shape) -> anyhow::Result<()> {
    let broker = RabbitMq::start(&[HUB, READER]);
    let address = format!("/amq/queue/{}", RabbitMq::QUEUE);
    let counter = Counter::amqp(&broker, &address, READER);
    let subscription = serde_json::json!({
        "sink": format!("{}{address}", broker.url()), "protocol": "AMQP",
        "sinkcredential": {"credentialtype": "PLAIN", "identifier": HUB.0, "secret": HUB.1},
        "config": {"ordering": "unordered"}});
    let hub = super::hub_run(subscription, shape.seconds, || counter.count())?;
    let rate = super::baseline_rate(
        || counter.count(),
        hub.acknowledged,
        || {
            amqp_publish(&broker, HUB, &address, (hub.acknowledged, 1024));
            Ok(())
        },
    )?;
    super::report(
        "AMQP 1.0 to RabbitMQ on loopback, unsettled, one receiver (Qpid Proton)",
        shape.seconds,
        &hub,
        "Qpid Proton",
        rate,
    );
    Ok(())
}
