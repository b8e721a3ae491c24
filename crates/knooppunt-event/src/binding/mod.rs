//! Protocol bindings: how events travel in the messages of a transport protocol.
//!
//! The hub speaks HTTP only: it receives events over HTTP and delivers them to webhooks.

pub mod http;
pub mod percent;
