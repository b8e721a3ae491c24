//! Delivery of accepted events to subscribers' webhooks, following the CloudEvents webhook
//! spec and the NL GOV webhook guideline.
//!
//! - [`outcome`]: what an attempt's result means (one classification function) and the retry
//!   policy (exponential backoff with full jitter, `maxAttempts`, `ttl`, `Retry-After`);
//! - [`sink`]: the requests: deliveries in structured or binary mode with the subscription's
//!   headers and credentials, and the `OPTIONS` validation handshake;
//! - `breaker.rs`: a sink's breaker and the pauses it asked for;
//! - [`engine`]: [`Deliverer`], which runs one worker (`push/`) per active subscription;
//!   a worker leases due deliveries from the store and records every result there, so that a
//!   restart continues where it was; `share.rs`: several hubs on one store share each
//!   subscription's slots and granted rate;
//! - [`trace`]: the spans of a publish and its delivery attempts joined into one trace.

mod breaker;
pub mod engine;
mod gate;
pub mod outcome;
pub mod pull;
mod push;
mod share;
pub mod sink;
mod state;
mod supervise;
pub mod trace;

pub use breaker::SinkHealth;
pub use engine::{Deliverer, now_ms};
pub use gate::{Gate, Pass};
pub use outcome::SinkAnswer;
pub use pull::{MAX_RECEIVE, MAX_RELEASE_DELAY, MAX_WAIT, Received, Settlement, TokenProblem};
pub use sink::address::{AddressRefused, SinkNetworks, check_http_url, check_sink_url};
pub use sink::amqp::{check_address as check_amqp_address, target_address as amqp_target_address};
pub use sink::connections::{ConnectionLimits, check_client_certificate};
pub use sink::http::signing::{HubKeys, PublicKey};
pub use sink::mqtt::check_topic as check_mqtt_topic;
pub use sink::nats::check_subject as check_nats_subject;
pub use sink::{Handshake, REDACTED, redact_sink};
pub use state::{DeliveryOptions, Gone, LastDelivery, Observer, RECENT_ATTEMPTS, Unobserved};
pub use supervise::{CatchUnwind, WorkerHealth};

/// How long a hub sharing the store may stay silent before the others forget it.
pub const HUB_SILENT_FOR: std::time::Duration = share::SILENT_FOR;

/// The header naming the replay a delivery belongs to (`Knooppunt-Replay: <id>`).
pub const REPLAY_HEADER: http::HeaderName = http::HeaderName::from_static("knooppunt-replay");
