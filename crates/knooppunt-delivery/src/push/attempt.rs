//! One attempt: a connection, the request (with its credentials, signature and trace
//! context), and its verdict; and the test event sent outside the queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::time::{Duration, SystemTime};

use knooppunt_event::trace_context::TraceContext;
use knooppunt_store::{Delivery, DeliveryConfig, StoredEvent, Subscription};
use tracing::Instrument;

use super::give_back;
use super::recording::{Attempted, Recording};
use super::sending::Slot;
use crate::breaker::SinkResult;
use crate::outcome::{Outcome, Response, classify, in_mode};
use crate::sink;
use crate::sink::connections::Permit;
use crate::state::{Inner, LastDelivery};
use knooppunt_store::now_ms;

/// The connection an attempt may use (or why there was none), when it began waiting, and
/// whether it is its sink's breaker probe.
pub(super) struct Connection {
    pub(super) permit: Result<Permit, String>,
    pub(super) started: std::time::Instant,
    pub(super) probe: bool,
    /// The worker's sending slot, given back once the sink answered.
    pub(super) slot: Slot,
    /// The subscription's cuts and the generation the delivery was leased under: the
    /// attempt does not start once a cut came after its lease ([`crate::Deliverer::cut`]).
    pub(super) cut: Option<(Arc<crate::gate::Cut>, u64)>,
}

/// One attempt: send and classify, in a span of the event's trace when it carries one
/// (the distributed tracing extension), whose context the request passes on to the sink;
/// the result to record, if the attempt was made.
pub(super) async fn attempt(
    inner: &Arc<Inner>,
    subscription: &Subscription,
    config: DeliveryConfig,
    delivery: Delivery,
    gone: &AtomicBool,
    connection: Connection,
) -> Option<Recording> {
    let id = subscription.id.as_str();
    #[cfg(test)]
    super::tests::inject_fault(delivery.seq).await;
    let event = match inner.queue().event(delivery.seq).await {
        Ok(Some(event)) => event,
        Ok(None) => {
            tracing::error!(
                subscription = id,
                seq = delivery.seq,
                "A pending delivery's event is gone."
            );
            return None;
        }
        Err(error) => {
            tracing::warn!(subscription = id, seq = delivery.seq, %error, "Reading an event failed; the delivery will be tried again.");
            return None;
        }
    };
    // The attempt's parent: the publish that accepted the event here (when traces are
    // exported and it is recent), else the event's own context.
    let exported = crate::trace::enabled();
    let trace = exported
        .then(|| inner.traces().publish_of(delivery.seq))
        .flatten()
        .or_else(|| TraceContext::of_json(&event.json));
    // A CLIENT span (the OpenTelemetry HTTP conventions: the hub sends the request); its
    // `trace_id` and `span_id` in the log are those the sink's `traceparent` names.
    let span = tracing::debug_span!(
        "deliver",
        otel.kind = "client",
        subscription = id,
        seq = delivery.seq,
        attempt = delivery.attempts + 1,
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
        link = trace.as_ref().map(|t| t.parent_id.as_str()),
    );
    let trace = if exported {
        // The exported span is the hop's: the sink's spans become its children.
        if let Some(parent) = &trace {
            crate::trace::continue_from(&span, parent);
        }
        crate::trace::context_of(&span).and_then(|own| {
            let own_span = u64::from_str_radix(&own.parent_id, 16).ok()?;
            let tracestate = trace.and_then(|t| t.tracestate);
            Some((TraceContext { tracestate, ..own }, own_span))
        })
    } else {
        trace.map(|t| (t, fastrand::u64(1..)))
    };
    if let Some((context, span_id)) = &trace {
        span.record("trace_id", context.trace_id.as_str());
        span.record(
            "span_id",
            tracing::field::display(format_args!("{span_id:016x}")),
        );
    }
    send_and_judge(
        inner,
        subscription,
        config,
        gone,
        (delivery, event, trace),
        connection,
    )
    .instrument(span)
    .await
}

/// A delivery, its event, and the trace context of its hop.
type Attempting = (Delivery, Arc<StoredEvent>, Option<(TraceContext, u64)>);

/// Sends and judges the answer: the result to record, or `None` when a cut came first.
async fn send_and_judge(
    inner: &Arc<Inner>,
    subscription: &Subscription,
    config: DeliveryConfig,
    gone: &AtomicBool,
    (delivery, event, trace): Attempting,
    mut connection: Connection,
) -> Option<Recording> {
    let at = now_ms();
    let (started, probe) = (connection.started, connection.probe);
    let mut slot = std::mem::take(&mut connection.slot);
    let Some((response, outcome, sent)) = send(
        inner,
        subscription,
        config,
        (&event, delivery.replay.as_deref()),
        trace.as_ref(),
        connection,
    )
    .await
    else {
        // Cut before it started (a right was taken away): not an attempt; given back, it is
        // leased again unless it was withdrawn.
        slot.release();
        if probe {
            inner.connections().release_probe(&subscription.sink);
        }
        give_back(inner, &subscription.id, &[(delivery.seq, delivery.lease)]).await;
        return None;
    };
    // The sink answered: its next request need not wait for this result's sync.
    slot.release();
    if outcome == Outcome::Gone {
        gone.store(true, AtomicOrdering::SeqCst);
    }
    report_health(inner, subscription, &config, &outcome, sent, probe);
    let attempt = Attempted {
        at,
        started,
        delivery,
        accepted_at: event.accepted_at,
        bytes: event.size(),
        trace_id: trace.as_ref().map(|(t, _)| t.trace_id.as_str()),
    };
    Some(Recording::of(
        inner,
        subscription,
        &config,
        attempt,
        &response,
        &outcome,
    ))
}

/// Builds the request and sends it, when it can: the sink's answer, what it means, and
/// whether a request went out (only then does the outcome say anything about the sink);
/// `None` when a cut came after the delivery's lease, so that it did not start.
async fn send(
    inner: &Arc<Inner>,
    subscription: &Subscription,
    config: DeliveryConfig,
    (event, replay): (&StoredEvent, Option<&str>),
    trace: Option<&(TraceContext, u64)>,
    connection: Connection,
) -> Option<(Response, Outcome, bool)> {
    let Connection {
        permit,
        started,
        cut,
        ..
    } = connection;
    let sinks = inner.sinks();
    let hop = sink::Hop { replay, trace };
    let message = match sinks.message(subscription, config.mode, event, &hop) {
        Ok(message) => message,
        Err(why) => {
            return Some((
                Response::Failed(why.clone()),
                Outcome::Unsendable(why),
                false,
            ));
        }
    };
    let permit = match permit {
        Ok(permit) => permit,
        Err(why) => return Some(failed(why)),
    };
    let to = sink::To {
        subscription,
        permit: &permit,
        deadline: started + config.timeout,
        cut: cut.as_ref(),
    };
    let response = match sinks.deliver(to, message).await {
        sink::Sent::Cut => return None,
        sink::Sent::Unsent(why) => return Some(failed(why)),
        sink::Sent::Answered(response) => response,
    };
    drop(permit);
    let outcome = classify(
        &response,
        SystemTime::now(),
        inner.options().max_retry_after,
    );
    Some((response, in_mode(outcome, config.mode), true))
}

/// No request went out, for this reason.
fn failed(why: String) -> (Response, Outcome, bool) {
    let response = Response::Failed(why);
    // No answer: nothing to wait for.
    let outcome = classify(&response, SystemTime::now(), Duration::ZERO);
    (response, outcome, false)
}

/// Sends `event` to a subscription's sink once, as a delivery of it would go (content mode,
/// headers, credentials, signature, client certificate, the SSRF guard and connection
/// limits), without queueing or recording it: nothing is retried. Kept among the
/// subscription's recent attempts with outcome `test`.
pub(crate) async fn send_test(
    inner: &Arc<Inner>,
    subscription: &Subscription,
    event: StoredEvent,
) -> LastDelivery {
    let config = subscription.delivery_config();
    let started = std::time::Instant::now();
    let at = now_ms();
    let permit = inner
        .connections()
        .acquire(
            &subscription.sink,
            config.timeout,
            subscription.client_certificate.as_ref(),
        )
        .await;
    let connection = Connection {
        permit,
        started,
        probe: false,
        slot: Slot::default(),
        cut: None,
    };
    // Never cut (it is no delivery of the queue).
    let (response, _, _) = send(
        inner,
        subscription,
        config,
        (&event, None),
        None,
        connection,
    )
    .await
    .unwrap_or_else(|| failed("not sent".into()));
    let (status, error) = response.status_and_error(config.timeout);
    let answer = response.answer();
    let last = LastDelivery {
        at,
        seq: event.seq,
        status,
        error,
        outcome: "test",
        duration_ms: Some(started.elapsed().as_millis() as u64),
        answer,
    };
    inner.remember_last(&subscription.id, last.clone());
    last
}

/// Tells the sink's breaker what the attempt showed of the sink (nothing, when no request
/// went out: then a probe is only given back).
fn report_health(
    inner: &Inner,
    subscription: &Subscription,
    config: &DeliveryConfig,
    outcome: &Outcome,
    sent: bool,
    probe: bool,
) {
    let result = match (outcome, outcome.asked_pause(config)) {
        _ if !sent => {
            if probe {
                inner.connections().release_probe(&subscription.sink);
            }
            return;
        }
        (_, Some(pause)) => SinkResult::RetryAfter(pause),
        (Outcome::Retry { .. }, None) => SinkResult::Failed,
        (Outcome::Unsendable(_), _) => return,
        (Outcome::Delivered | Outcome::Rejected | Outcome::Refused(_) | Outcome::Gone, _) => {
            SinkResult::Healthy
        }
    };
    let sink = subscription.sink.as_str();
    if let Some(failures) = inner.connections().report(sink, result, fastrand::f64()) {
        inner.observer().breaker_opened(&subscription.id, failures);
    }
    if let SinkResult::RetryAfter(wait) = result {
        // The sink's pause holds for every hub sharing the store, not only this one
        // (http-webhook.md: the sender refrains from sending until then); written off the
        // attempt's path.
        let key = crate::sink::connections::sink_key_of(sink);
        let until_ms = now_ms() + wait.as_millis() as u64;
        let cluster = Arc::clone(inner.cluster());
        tokio::spawn(async move {
            if let Err(error) = cluster.pause_sink(&key, until_ms).await {
                tracing::warn!(sink = %key, %error, "Telling the other hubs of a sink's pause failed.");
            }
        });
    }
}
