//! A sink's breaker, shared by every subscription that delivers to it (kept with the sink's
//! pool, `sink/connections.rs`):
//! - a `Retry-After` (429 or 503) pauses the sink until then (http-webhook.md: no further
//!   requests until the indicated time);
//! - after `breaker_failures` failures in a row (no answer, a timeout, 5xx, 429 without
//!   `Retry-After`, ...) the breaker opens: the sink is paused, then probed with one delivery
//!   at a time; each failed probe doubles the pause (with jitter, up to `breaker_max_pause`),
//!   the first success closes the breaker. So a dead sink gets a few requests a minute
//!   instead of every queued delivery, and the workers of other sinks never wait for it.
//!
//! What an answer says of its sink ([`SinkResult`]) is decided with its outcome, in
//! `outcome.rs`.

use std::time::Duration;

use tokio::time::Instant;

/// The first pause of an opened breaker.
const BREAKER_FIRST_PAUSE: Duration = Duration::from_secs(1);

/// Whether a worker may send to a sink now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Send as usual.
    Open,
    /// The breaker is open and this caller may send one probe; it must report its result,
    /// or release the probe when it sends nothing.
    Probe,
    /// Nothing before then.
    Paused(Instant),
}

/// What an attempt showed of its sink's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SinkResult {
    /// The sink answered as a working sink does (2xx, or a refusal of this event).
    Healthy,
    /// No answer, a timeout, or an answer that asks to try again.
    Failed,
    /// The sink asked to wait this long (`Retry-After`).
    RetryAfter(Duration),
}

/// A sink's breaker as this hub sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkHealth {
    /// The breaker is open: the sink is paused and probed with one delivery at a time.
    pub open: bool,
    /// Failed attempts in a row.
    pub failures: u32,
    /// No request before then (milliseconds since the Unix epoch): the breaker's pause or
    /// the sink's own `Retry-After`.
    pub paused_until: Option<u64>,
}

/// One sink's breaker and any pause it asked for.
#[derive(Debug, Default)]
pub(crate) struct Breaker {
    failures: u32,
    /// The breaker's pause: no request before then.
    paused_until: Option<Instant>,
    /// The sink's own `Retry-After`: no request before then, whatever other answers say.
    asked_until: Option<Instant>,
    /// The breaker is open: after the pause, one probe at a time.
    open: bool,
    probing: bool,
    pause: Duration,
}

impl Breaker {
    /// Nothing worth remembering: no failures, no pause.
    pub(crate) fn is_clear(&self) -> bool {
        self.failures == 0
            && !self.open
            && self.paused_until.is_none()
            && self.asked_until.is_none()
    }

    pub(crate) fn is_open(&self) -> bool {
        self.open
    }

    /// Whether a request may go now; a caller given [`Gate::Probe`] holds the probe.
    pub(crate) fn gate(&mut self, now: Instant) -> Gate {
        if let Some(until) = self.paused_until.max(self.asked_until)
            && until > now
        {
            return Gate::Paused(until);
        }
        self.paused_until = None;
        self.asked_until = None;
        if !self.open {
            return Gate::Open;
        }
        if self.probing {
            // Another worker's probe is on its way: look again shortly.
            return Gate::Paused(now + BREAKER_FIRST_PAUSE.min(self.pause));
        }
        self.probing = true;
        Gate::Probe
    }

    /// A probe that was granted but not sent.
    pub(crate) fn release_probe(&mut self) {
        self.probing = false;
    }

    /// The breaker as the API shows it, with a pause the sink asked another hub for.
    pub(crate) fn seen(&self, told: Option<Instant>, now: Instant) -> SinkHealth {
        SinkHealth {
            open: self.open,
            failures: self.failures,
            paused_until: self
                .paused_until
                .max(self.asked_until)
                .max(told)
                .filter(|until| *until > now)
                .map(|until| knooppunt_store::now_ms() + (until - now).as_millis() as u64),
        }
    }

    /// Records what an attempt showed; `(threshold, longest)` are the failures in a row
    /// that open the breaker and its longest pause; `random` (uniform in [0, 1)) jitters
    /// the pause. Returns the failures in a row when this report opened the breaker.
    pub(crate) fn report(
        &mut self,
        result: SinkResult,
        (threshold, longest): (u32, Duration),
        random: f64,
    ) -> Option<u32> {
        self.probing = false;
        let now = Instant::now();
        match result {
            SinkResult::Healthy => {
                // A working answer closes the breaker; a pause the sink asked for stays.
                *self = Breaker {
                    asked_until: self.asked_until,
                    ..Breaker::default()
                };
                None
            }
            SinkResult::RetryAfter(wait) => {
                self.asked_until = self.asked_until.max(Some(now + wait));
                None
            }
            SinkResult::Failed => {
                self.failures = self.failures.saturating_add(1);
                let (pause, opened) = if self.open {
                    ((self.pause * 2).min(longest), None)
                } else if self.failures >= threshold {
                    self.open = true;
                    (BREAKER_FIRST_PAUSE.min(longest), Some(self.failures))
                } else {
                    return None;
                };
                self.pause = pause;
                // Between half the pause and the pause, so probes of many sinks spread out.
                let jittered = pause.mul_f64(0.5 + 0.5 * random.clamp(0.0, 1.0));
                self.paused_until = Some(now + jittered);
                opened
            }
        }
    }
}
