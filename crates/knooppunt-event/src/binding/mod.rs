//! Protocol bindings: how events travel in the messages of a transport protocol.
//!
//! The hub receives events over HTTP and delivers them to webhooks (HTTP), to MQTT and
//! AMQP 1.0 brokers and to NATS servers.

pub mod amqp;
pub mod http;
pub mod mqtt;
pub mod nats;
pub mod percent;
