//! Accepted events and their pending deliveries: the records every backend keeps.

use serde::{Deserialize, Serialize};

/// An event to append, with the subscriptions it must reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub source: String,
    pub id: String,
    /// The event in the JSON format, exactly as it will be delivered in structured mode.
    pub json: String,
    pub subscriptions: Vec<String>,
}

/// What became of one appended event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Stored with this sequence number (acceptance order), with its deliveries.
    Accepted { seq: u64 },
    /// An event with the same `source` and `id` was accepted within the duplicate window;
    /// nothing was stored.
    Duplicate { seq: u64 },
}

/// An accepted event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredEvent {
    /// Acceptance order: later accepted, higher number.
    pub seq: u64,
    pub source: String,
    pub id: String,
    /// Milliseconds since the Unix epoch.
    pub accepted_at: u64,
    pub json: String,
    /// The subscriptions it was routed to when accepted.
    pub subscriptions: Vec<String>,
}

/// One pending delivery of one event to one subscription: what the workers need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub subscription: String,
    /// The event ([`StoredEvent::seq`]).
    pub seq: u64,
    /// Attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due (milliseconds since the Unix epoch).
    pub next_attempt_at: u64,
    pub first_attempt_at: Option<u64>,
    pub last_attempt_at: Option<u64>,
    /// The HTTP status of the last attempt, if it got one.
    pub last_status: Option<u16>,
    /// What went wrong last time.
    pub last_error: Option<String>,
}

impl Delivery {
    pub(crate) fn new(subscription: String, seq: u64, now: u64) -> Self {
        Delivery {
            subscription,
            seq,
            attempts: 0,
            next_attempt_at: now,
            first_attempt_at: None,
            last_attempt_at: None,
            last_status: None,
            last_error: None,
        }
    }
}

/// What a retention sweep removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Events past retention whose deliveries were all finished.
    pub events: u64,
    /// Duplicate-detection entries older than the window.
    pub dedupe_entries: u64,
}
