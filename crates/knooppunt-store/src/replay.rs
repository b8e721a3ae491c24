//! Replays: a window of a subscription's retained events queued for it once more, as a job
//! whose state every hub sharing the store sees.

use serde::{Deserialize, Serialize};

/// Where a replay is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ReplayState {
    Running,
    /// Every retained event of the window was looked at.
    Completed,
    /// Stopped on request.
    Cancelled,
    /// Stopped by an error (`error` says which).
    Failed,
}

impl ReplayState {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayState::Running => "running",
            ReplayState::Completed => "completed",
            ReplayState::Cancelled => "cancelled",
            ReplayState::Failed => "failed",
        }
    }
}

/// One replay job. Kept as JSON, the same on every backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Replay {
    pub id: String,
    pub subscription: String,
    /// The principal that asked for it.
    pub requested_by: String,
    /// The window: events accepted from `from_ms` up to and including `until_ms`
    /// (milliseconds since the Unix epoch).
    pub from_ms: u64,
    pub until_ms: u64,
    pub state: ReplayState,
    /// The last event looked at (acceptance order); the job goes on after it.
    pub position: u64,
    /// Events of the window queued so far.
    pub queued: u64,
    /// When the last queued event was accepted.
    pub last_event_at: Option<u64>,
    pub created_at: u64,
    /// Changed with every step: a job whose runner stopped (its hub died) is taken over
    /// once this is old, and every change is made only on the version read
    /// ([`crate::Records::put_replay`]).
    pub updated_at: u64,
    pub finished_at: Option<u64>,
    pub error: Option<String>,
}
