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
        let (status, error) = response.status_and_error(config.timeout);
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
                answer: response.answer(),
            },
            // The broker, the one writer of subscriptions, decides what the 410 means: it
            // disables the subscription unless its sink has changed meanwhile.
            gone: (*outcome == Outcome::Gone).then(|| Gone {
                subscription: id.to_owned(),
                sink: subscription.sink.to_string(),
            }),
        }
    }

    /// Whether the delivery is done with: delivered or given up (not to be tried again).
    pub(super) fn finishes(&self) -> bool {
        self.finished.is_some()
    }

    /// Writes the result; whether it counted (see [`record_result`]).
    pub(super) async fn write(self, inner: &Inner) -> bool {
        let (id, seq) = (self.attempt.subscription.as_str(), self.attempt.seq);
        // Made again only when the store asks for it again (see `record_result`).
        let change = || DeliveryChange::Attempted(self.attempt.clone());
        let counted = record_result(inner, (id, seq, self.leased_until), change).await;
        self.written(inner, counted);
        counted
    }

    /// What follows a result's write: counted as finished (if it `counted`), the latest
    /// attempt remembered, a 410 handed to the broker.
    fn written(self, inner: &Inner, counted: bool) {
        let Recording {
            attempt,
            finished,
            last,
            gone,
            ..
        } = self;
        if counted && let Some(bytes) = finished {
            inner.observer().finished(bytes);
        }
        inner.remember_last(&attempt.subscription, last);
        if let Some(gone) = gone {
            inner.report_gone(gone);
        }
    }

    /// Writes `group`, results of one subscription in the order they were made, in one go
    /// (one write, one lock of the queue); if the store refuses the group (one lease ran
    /// out), each on its own, in order. Whether every one counted.
    async fn write_group(mut group: Vec<Recording>, inner: &Inner) -> bool {
        if group.len() == 1 {
            return group.remove(0).write(inner).await;
        }
        let changes = group
            .iter()
            .map(|recording| DeliveryChange::Attempted(recording.attempt.clone()))
            .collect();
        if inner.queue().record_results(changes).await.is_ok() {
            for recording in group {
                recording.written(inner, true);
            }
            return true;
        }
        let mut all = true;
        for recording in group {
            all &= recording.write(inner).await;
        }
        all
    }
}

/// Writes the results of an ordered subscription's deliveries in the order they were
/// made, while the next ones are sent: each write takes every result that arrived while
/// the last one went on. In order, so that the log never holds a later result without the
/// earlier ones: after a crash, what was not recorded is sent again from the first of
/// them on, in order. The writer is a task of its own from the second result on; a window
/// of one writes its result itself.
pub(super) struct InOrder {
    inner: std::sync::Arc<Inner>,
    writer: Option<(
        tokio::sync::mpsc::UnboundedSender<Recording>,
        tokio::task::JoinHandle<()>,
    )>,
    /// A result did not count (the store refused it, or its lease ran out): send no more.
    failed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl InOrder {
    pub(super) fn new(inner: std::sync::Arc<Inner>) -> InOrder {
        InOrder {
            inner,
            writer: None,
            failed: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        }
    }

    /// Hands over a result; `last`: no other follows it.
    pub(super) async fn push(&mut self, recording: Recording, last: bool) {
        if last && self.writer.is_none() {
            if !recording.write(&self.inner).await {
                self.fail();
            }
            return;
        }
        let (results, _) = self.writer.get_or_insert_with(|| {
            let (results, mut arriving) = tokio::sync::mpsc::unbounded_channel::<Recording>();
            let (inner, failed) = (
                std::sync::Arc::clone(&self.inner),
                std::sync::Arc::clone(&self.failed),
            );
            let writer = tokio::spawn(async move {
                while let Some(first) = arriving.recv().await {
                    let mut group = vec![first];
                    while let Ok(next) = arriving.try_recv() {
                        group.push(next);
                    }
                    if !Recording::write_group(group, &inner).await {
                        failed.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            });
            (results, writer)
        });
        // The writer ends only once the sender is dropped, or when it panicked.
        if results.send(recording).is_err() {
            self.fail();
        }
    }

    fn fail(&self) {
        self.failed.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a result did not count.
    pub(super) fn failed(&self) -> bool {
        self.failed.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Until every result handed over is written.
    pub(super) async fn finish(self) {
        let Some((results, writer)) = self.writer else {
            return;
        };
        drop(results);
        if let Err(error) = writer.await
            && error.is_panic()
        {
            tracing::error!(panic = ?error, "Recording delivery attempts failed inside the hub; their leases run out and the deliveries are made again.");
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
