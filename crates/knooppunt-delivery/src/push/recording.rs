//! An attempt's result, recorded: in the store (before the delivery can be leased again),
//! in the subscription's latest attempts, and to the observer.

use std::time::Duration;

use knooppunt_store::{Attempt, Delivery, DeliveryChange, DeliveryConfig, Subscription, Verdict};
use tokio::sync::watch;

use crate::outcome::{Outcome, Response, verdict};
use crate::state::{Gone, Inner, LastDelivery};
use knooppunt_store::now_ms;

/// An attempt made: when, of which delivery, of an event accepted when and of what size,
/// in which trace.
pub(super) struct Attempted<'a> {
    pub(super) at: u64,
    pub(super) started: std::time::Instant,
    pub(super) delivery: Delivery,
    pub(super) accepted_at: u64,
    /// The event's JSON and extension types, in bytes (0 when not known).
    pub(super) bytes: u64,
    pub(super) trace_id: Option<&'a str>,
}

/// An attempt's result (the verdict: delivered, retry at, or dead letter), counted and
/// logged, made ready to be written: all an attempt holds while the log takes it. Writing
/// it hands a 410 to the broker.
pub(super) struct Recording {
    attempt: Attempt,
    /// Until when the delivery is leased: a result the store cannot take is offered again
    /// until then.
    leased_until: u64,
    /// Delivered or given up: counted as finished (with the event's size) once written.
    finished: Option<u64>,
    last: LastDelivery,
    /// The sink answered 410 Gone.
    gone: Option<Gone>,
}

impl Recording {
    pub(super) fn of(
        inner: &Inner,
        subscription: &Subscription,
        config: &DeliveryConfig,
        attempt: Attempted<'_>,
        response: &Response,
        outcome: &Outcome,
    ) -> Recording {
        let id = subscription.id.as_str();
        let Attempted {
            at,
            started,
            delivery,
            accepted_at,
            bytes,
            trace_id,
        } = attempt;
        let attempts = delivery.attempts + 1;
        let verdict = verdict(
            outcome,
            config,
            attempts,
            accepted_at,
            now_ms(),
            fastrand::f64(),
        );
        let (status, error) = match response {
            Response::Status { code, .. } if (200..300).contains(code) => (Some(*code), None),
            Response::Status { code, .. } => {
                (Some(*code), Some(format!("the sink answered {code}")))
            }
            Response::Timeout => (
                None,
                Some(format!(
                    "no answer within {} ms",
                    config.timeout.as_millis()
                )),
            ),
            Response::Failed(why) => (None, Some(why.clone())),
        };
        let label = verdict.name();
        let elapsed = started.elapsed();
        inner.observer().attempt(id, &verdict, status, elapsed);
        if let Verdict::DeadLetter { reason } = &verdict {
            inner.observer().dead_lettered(id, reason);
            tracing::info!(
                subscription = id,
                seq = delivery.seq,
                attempts,
                reason = %reason,
                trace_id,
                "A delivery was given up; the event is a dead letter of the subscription."
            );
        }
        tracing::debug!(
            subscription = id,
            seq = delivery.seq,
            attempts,
            status,
            outcome = label,
            "Delivery attempt."
        );
        let finished = !matches!(verdict, Verdict::Retry { .. });
        Recording {
            attempt: Attempt {
                subscription: id.to_owned(),
                seq: delivery.seq,
                lease: delivery.lease,
                at,
                status,
                error: error.clone(),
                verdict,
                receipt: inner.options().receipts,
            },
            leased_until: delivery.leased_until,
            finished: finished.then_some(bytes),
            last: LastDelivery {
                at,
                seq: delivery.seq,
                status,
                error,
                outcome: label,
                duration_ms: Some(elapsed.as_millis() as u64),
                answer: match response {
                    Response::Status { answer, .. } => answer.clone(),
                    _ => None,
                },
            },
            // The broker, the one writer of subscriptions, decides what the 410 means: it
            // disables the subscription unless its sink has changed meanwhile.
            gone: (*outcome == Outcome::Gone).then(|| Gone {
                subscription: id.to_owned(),
                sink: subscription.sink.to_string(),
            }),
        }
    }

    pub(super) async fn write(self, inner: &Inner) {
        let Recording {
            attempt,
            leased_until,
            finished,
            last,
            gone,
        } = self;
        let (id, seq) = (attempt.subscription.as_str(), attempt.seq);
        // Made again only when the store asks for it again (see `record_result`).
        let change = || DeliveryChange::Attempted(attempt.clone());
        if record_result(inner, (id, seq, leased_until), change).await
            && let Some(bytes) = finished
        {
            inner.observer().finished(bytes);
        }
        inner.remember_last(id, last);
        if let Some(gone) = gone {
            inner.report_gone(gone);
        }
    }
}

/// How often a result the store could not take is offered again.
const RECORD_RETRY: Duration = Duration::from_secs(1);

/// Records an attempt's result; whether it counted. A result lost in a crash of the machine
/// only means a redelivery, so it need not wait for its own sync. A store that takes no
/// writes now (a full disk, a database away) is asked again every [`RECORD_RETRY`] while
/// the delivery's lease lasts, so that the queue moves on as soon as the store does; once
/// the lease has run out the delivery is leased again and the lapsed lease counts as an
/// attempt, as after a crash. Never is a delivery left held.
async fn record_result(
    inner: &Inner,
    (id, seq, leased_until): (&str, u64, u64),
    change: impl Fn() -> DeliveryChange,
) -> bool {
    let mut stop: Option<watch::Receiver<bool>> = None;
    let mut told = false;
    loop {
        let error = match inner.queue().record_results(vec![change()]).await {
            Ok(()) => {
                if told {
                    tracing::info!(
                        subscription = id,
                        seq,
                        "A delivery attempt's result was recorded after all."
                    );
                }
                return true;
            }
            Err(error @ knooppunt_store::StoreError::StaleLease { .. }) => {
                // The attempt outlived its lease and the delivery was leased again; the new
                // holder's result counts (the sink may get the event twice: at least once).
                tracing::warn!(subscription = id, seq, %error, "A delivery attempt outlived its lease; its result was not recorded.");
                return false;
            }
            Err(error) => error,
        };
        let stop = stop.get_or_insert_with(|| inner.stopping());
        let left = leased_until.saturating_sub(now_ms());
        let retry_ms = RECORD_RETRY.as_millis() as u64;
        if left <= retry_ms || *stop.borrow() {
            tracing::error!(subscription = id, seq, %error, "Recording a delivery attempt failed; its lease runs out and the delivery is made again.");
            return false;
        }
        if !told {
            tracing::error!(subscription = id, seq, %error, "Recording a delivery attempt failed; it is recorded again every second while its lease lasts ({left} ms).");
            told = true;
        }
        tokio::select! {
            () = tokio::time::sleep(RECORD_RETRY) => {}
            _ = stop.changed() => {}
        }
    }
}
