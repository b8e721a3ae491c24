//! What the hub does with published events before it answers: the settings and the counters.
//! The HTTP side is `api/events.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use knooppunt_event::ProfileLevel;

/// The spec's floor: intermediaries must forward events of 64 KiB or less.
pub const MIN_EVENT_BYTES: usize = 64 * 1024;

/// How published events are accepted.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// How strictly the NL GOV profile is applied.
    pub profile: ProfileLevel,
    /// The largest event accepted, in bytes on the wire (body, plus `ce-` headers in binary
    /// mode). At least [`MIN_EVENT_BYTES`].
    pub max_event_bytes: usize,
    /// The largest batch body accepted, in bytes.
    pub max_batch_bytes: usize,
    /// An event whose `source` + `id` was accepted this recently is acknowledged again but
    /// not routed twice.
    pub dedupe_window: Duration,
    /// How long events whose deliveries are all finished are kept (at least as long as the
    /// duplicate window: duplicate detection needs them).
    pub retention: Duration,
    /// How often the retention sweep runs.
    pub sweep_interval: Duration,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            profile: ProfileLevel::Warn,
            max_event_bytes: 1024 * 1024,
            max_batch_bytes: 10 * 1024 * 1024,
            dedupe_window: Duration::from_secs(24 * 3600),
            retention: Duration::from_secs(24 * 3600),
            sweep_interval: Duration::from_secs(60),
        }
    }
}

/// Counts of what happened to published events.
#[derive(Debug, Default)]
pub struct IngestCounters {
    /// Accepted and stored (duplicates excluded).
    pub accepted: AtomicU64,
    /// Accepted events that matched no subscription.
    pub unmatched: AtomicU64,
    /// Acknowledged again without routing.
    pub duplicates: AtomicU64,
    /// Deliveries created.
    pub deliveries: AtomicU64,
    /// Rejected events (invalid, too large, not allowed).
    pub rejected: AtomicU64,
}

impl IngestCounters {
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

pub(crate) use knooppunt_store::now_ms;
