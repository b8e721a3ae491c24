//! Protocol bindings: how events travel in the messages of a transport protocol.
//!
//! The hub receives events over HTTP and delivers them to webhooks (HTTP) and to MQTT
//! brokers.

pub mod http;
pub mod mqtt;
pub mod percent;
