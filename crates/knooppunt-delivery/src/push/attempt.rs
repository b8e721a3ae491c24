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
    pub(super) cut: Option<(Arc<crate::state::Cut>, u64)>,
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

/// The hop's trace headers: the event's trace with the attempt's own span, and its state.
fn hop_headers(headers: &mut http::HeaderMap, trace: &(TraceContext, u64)) {
    // Names made once (a `&str` name is copied into a new header name on every insert).
    const TRACEPARENT: http::HeaderName = http::HeaderName::from_static("traceparent");
    const TRACESTATE: http::HeaderName = http::HeaderName::from_static("tracestate");
    let (context, span_id) = trace;
    if let Ok(value) = http::HeaderValue::try_from(context.child(*span_id)) {
        headers.insert(TRACEPARENT, value);
    }
    if let Some(Ok(value)) = context
        .tracestate
        .as_deref()
        .map(http::HeaderValue::try_from)
    {
        headers.insert(TRACESTATE, value);
    }
}

/// The access token for a subscription with client credentials (and its credential, to
/// forget the token if the sink refuses it); `None` for other subscriptions.
async fn bearer_token(
    inner: &Inner,
    subscription: &Subscription,
    within: std::time::Duration,
) -> Result<Option<(crate::sink::credentials::Credential, String)>, String> {
    let Some(knooppunt_store::SinkCredential::ClientCredentials {
        token_url,
        client_id,
        client_secret,
        scope,
    }) = &subscription.sink_credential
    else {
        return Ok(None);
    };
    let credential = crate::sink::credentials::Credential {
        token_url: token_url.clone(),
        client_id: client_id.clone(),
        client_secret: client_secret.clone(),
        scope: scope.clone(),
    };
    let token = inner
        .tokens()
        .token(
            inner.connections(),
            &credential,
            subscription.client_certificate.as_ref(),
            within,
        )
        .await?;
    Ok(Some((credential, token)))
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
    if let Some(message) = sink::Brokers::message(subscription, config.mode, event, replay) {
        let message = match message {
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
        let pass = cut.as_ref().map(|(cut, _)| cut.gate.enter());
        if let Some((cut, generation)) = &cut
            && cut.generation.load(AtomicOrdering::SeqCst) != *generation
        {
            return None;
        }
        let sending = inner.connections().brokers().publish(
            subscription,
            message,
            config.timeout.saturating_sub(started.elapsed()),
        );
        drop(pass);
        let response = sending.await;
        drop(permit);
        let outcome = classify(&response, SystemTime::now(), Duration::ZERO);
        return Some((response, outcome, true));
    }
    let message = sink::credential_problem(subscription, SystemTime::now()).map_or_else(
        || {
            sink::delivery_message(
                &event.json,
                event.extension_types.as_deref(),
                config.mode,
                event.accepted_at,
            )
        },
        Err,
    );
    let mut message = match message {
        Ok(message) => message,
        Err(why) => {
            return Some((
                Response::Failed(why.clone()),
                Outcome::Unsendable(why),
                false,
            ));
        }
    };
    if let Some(trace) = trace {
        hop_headers(&mut message.headers, trace);
    }
    // A replayed delivery names its replay (the event itself is unchanged).
    if let Some(value) = replay.and_then(|r| http::HeaderValue::try_from(r).ok()) {
        message.headers.insert(crate::REPLAY_HEADER, value);
    }
    let permit = match permit {
        Ok(permit) => permit,
        Err(why) => return Some(failed(why)),
    };
    let timeout = config.timeout.saturating_sub(started.elapsed());
    let bearer = match bearer_token(inner, subscription, timeout).await {
        Ok(bearer) => bearer,
        Err(why) => return Some(failed(why)),
    };
    // Signed last, just before it goes out (the timestamp is the sending time's).
    // One id per delivery (the same for its every attempt); a test event has no sequence
    // (0), and each is a delivery of its own.
    let webhook_id = if event.seq == 0 {
        format!("msg_test_{}", event.id)
    } else {
        format!("msg_{}_{}", event.seq, subscription.id)
    };
    crate::sink::signing::sign(
        subscription.signing.as_ref(),
        &inner.options().hub_keys,
        &webhook_id,
        SystemTime::now(),
        &message.body,
        &mut message.headers,
    );
    // The moment the attempt starts: under a pass of the subscription's cuts, and only if
    // no cut came since its lease (what was taken away is never started after the cut).
    let pass = cut.as_ref().map(|(cut, _)| cut.gate.enter());
    if let Some((cut, generation)) = &cut
        && cut.generation.load(AtomicOrdering::SeqCst) != *generation
    {
        return None;
    }
    let sending = sink::deliver(
        (&permit.client, &permit.target.url),
        subscription,
        inner.origin(),
        message,
        timeout.saturating_sub(started.elapsed()),
        bearer.as_ref().map(|(_, token)| token.as_str()),
    );
    drop(pass);
    let response = sending.await;
    // Refused: the next attempt gets a new token.
    if let (Response::Status { code: 401, .. }, Some((credential, _))) = (&response, &bearer) {
        inner.tokens().forget(credential);
    }
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
