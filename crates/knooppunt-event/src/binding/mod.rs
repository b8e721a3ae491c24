//! Protocol bindings: how events travel in the messages of a transport protocol.
//!
//! The hub receives events over HTTP and delivers them to webhooks (HTTP), to MQTT brokers
//! and to NATS servers.

pub mod http;
pub mod mqtt;
pub mod nats;
pub mod percent;
