//! One subscription's worker: it leases due deliveries, sends each ([`attempt`]), and records
//! the result before the delivery can be leased again; a 410 stops the worker and is
//! reported to the broker ([`Gone`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::time::{Duration, SystemTime};

use knooppunt_event::trace_context::TraceContext;
use knooppunt_store::{
    Attempt, Delivery, DeliveryChange, DeliveryConfig, Ordering, StoredEvent, Subscription, Verdict,
};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::connections::{Gate, Permit, SinkResult};
use crate::engine::{DeliveryOptions, Gone, Inner, LastDelivery, now_ms};
use crate::outcome::{Outcome, Response, classify, verdict};
use crate::sink;

/// What a worker derives from its subscription.
struct Settings {
    subscription: Arc<Subscription>,
    config: DeliveryConfig,
    ordered: bool,
    limit: usize,
    lease_ms: u64,
    spacing: Option<Duration>,
}

impl Settings {
    fn of(subscription: Arc<Subscription>, options: &DeliveryOptions) -> Settings {
        let max_in_flight = options.max_in_flight;
        let config = subscription.delivery_config();
        let ordered = config.ordering == Ordering::Ordered;
        Settings {
            config,
            ordered,
            limit: if ordered { 1 } else { max_in_flight.max(1) },
            // Long enough for the wait for a connection and the attempt (each at most the
            // timeout) and recording the result.
            lease_ms: (2 * config.timeout + options.lease_margin).as_millis() as u64,
            spacing: subscription
                .allowed_rate
                .filter(|rate| *rate > 0)
                .map(|rate| Duration::from_secs_f64(60.0 / f64::from(rate))),
            subscription,
        }
    }
}

/// A subscription's worker: lease, send, record, until stopped.
pub(crate) async fn run(
    inner: Arc<Inner>,
    mut current: watch::Receiver<Arc<Subscription>>,
    mut retired: watch::Receiver<bool>,
    wake: Arc<Notify>,
) {
    let mut settings = Settings::of(Arc::clone(&current.borrow_and_update()), &inner.options);
    let mut attempts = JoinSet::new();
    let mut next_start = tokio::time::Instant::now();
    let mut stop = inner.stop.subscribe();
    // Set by an attempt that got 410 Gone: take nothing more.
    let gone = Arc::new(AtomicBool::new(false));
    let id = settings.subscription.id.clone();
    let id = id.as_str();
    loop {
        if *stop.borrow() || *retired.borrow() || gone.load(AtomicOrdering::SeqCst) {
            break;
        }
        if current.has_changed().unwrap_or(false) {
            settings = Settings::of(Arc::clone(&current.borrow_and_update()), &inner.options);
        }
        let Settings {
            ref subscription,
            config,
            ordered,
            limit,
            lease_ms,
            spacing,
        } = settings;
        while attempts.try_join_next().is_some() {}
        let free = limit.saturating_sub(attempts.len());
        // The sink's health decides how much may be taken: all that is free, one probe, or
        // nothing until a pause ends.
        let gate = if free == 0 {
            None
        } else {
            Some(inner.connections.gate(&subscription.sink))
        };
        let (take, probe, paused_until) = match gate {
            None => (0, false, None),
            Some(Gate::Open) => (free, false, None),
            Some(Gate::Probe) => (1, true, None),
            Some(Gate::Paused(until)) => (0, false, Some(until)),
        };
        let leased = if take == 0 {
            Vec::new()
        } else {
            match inner
                .store
                .lease(id, now_ms(), lease_ms, take, ordered)
                .await
            {
                Ok(leased) => leased,
                Err(error) => {
                    tracing::warn!(subscription = id, %error, "Leasing deliveries failed.");
                    Vec::new()
                }
            }
        };
        if probe && leased.is_empty() {
            inner.connections.release_probe(&subscription.sink);
        }
        if leased.is_empty() {
            let idle = inner.options.idle_poll;
            // With every slot busy, only a finished attempt (or a stop) can change anything.
            let wait = if let Some(until) = paused_until {
                until.saturating_duration_since(tokio::time::Instant::now())
            } else if free == 0 {
                idle
            } else {
                match inner.store.next_due(id, ordered).await {
                    Ok(Some(due)) => Duration::from_millis(due.saturating_sub(now_ms())).min(idle),
                    _ => idle,
                }
            };
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => {}
                _ = retired.changed() => {}
                Some(_) = attempts.join_next(), if !attempts.is_empty() => {}
            }
            continue;
        }
        for delivery in leased {
            if let Some(spacing) = spacing {
                tokio::time::sleep_until(next_start).await;
                next_start = tokio::time::Instant::now() + spacing;
            }
            // The connection is waited for here, before the attempt's task exists: with
            // thousands of subscriptions due at once, only as many attempts as there are
            // connections hold a request in memory. The wait counts against the timeout.
            let started = std::time::Instant::now();
            let permit = tokio::select! {
                permit = inner.connections.acquire(&subscription.sink, config.timeout, subscription.client_certificate.as_ref()) => permit,
                // Its lease runs out and it is tried again (after a restart, at once).
                _ = stop.changed() => break,
                _ = retired.changed() => break,
            };
            let (inner, subscription) = (Arc::clone(&inner), Arc::clone(subscription));
            let gone = Arc::clone(&gone);
            attempts.spawn(async move {
                let connection = Connection {
                    permit,
                    started,
                    probe,
                };
                attempt(&inner, &subscription, config, delivery, &gone, connection).await;
            });
        }
    }
    // Stopping: let the attempts in flight finish and record their results.
    while attempts.join_next().await.is_some() {}
}

/// The connection an attempt may use (or why there was none), when it began waiting, and
/// whether it is its sink's breaker probe.
struct Connection {
    permit: Result<Permit, String>,
    started: std::time::Instant,
    probe: bool,
}

/// One attempt: send, classify, record; in a span of the event's trace when it carries one
/// (the distributed tracing extension), whose context the request passes on to the sink.
async fn attempt(
    inner: &Arc<Inner>,
    subscription: &Subscription,
    config: DeliveryConfig,
    delivery: Delivery,
    gone: &AtomicBool,
    connection: Connection,
) {
    let id = subscription.id.as_str();
    let event = match inner.store.event(delivery.seq).await {
        Ok(Some(event)) => event,
        Ok(None) => {
            tracing::error!(
                subscription = id,
                seq = delivery.seq,
                "A pending delivery's event is gone."
            );
            return;
        }
        Err(error) => {
            tracing::warn!(subscription = id, seq = delivery.seq, %error, "Reading an event failed; the delivery will be tried again.");
            return;
        }
    };
    let trace = TraceContext::of_json(&event.json);
    let span_id = fastrand::u64(1..);
    let span = tracing::debug_span!(
        "deliver",
        subscription = id,
        seq = delivery.seq,
        attempt = delivery.attempts + 1,
        trace_id = trace.as_ref().map(|t| t.trace_id.as_str()),
        span_id = %format_args!("{span_id:016x}"),
        link = trace.as_ref().map(|t| t.parent_id.as_str()),
    );
    let trace = trace.map(|t| (t, span_id));
    send_and_record(
        inner,
        subscription,
        config,
        gone,
        (delivery, event, trace),
        connection,
    )
    .instrument(span)
    .await;
}

/// The hop's trace headers: the event's trace with the attempt's own span, and its state.
fn hop_headers(headers: &mut http::HeaderMap, trace: &(TraceContext, u64)) {
    let (context, span_id) = trace;
    if let Ok(value) = http::HeaderValue::try_from(context.child(*span_id)) {
        headers.insert("traceparent", value);
    }
    if let Some(Ok(value)) = context
        .tracestate
        .as_deref()
        .map(http::HeaderValue::try_from)
    {
        headers.insert("tracestate", value);
    }
}

/// The access token for a subscription with client credentials (and its credential, to
/// forget the token if the sink refuses it); `None` for other subscriptions.
async fn bearer_token(
    inner: &Inner,
    subscription: &Subscription,
    within: std::time::Duration,
) -> Result<Option<(crate::tokens::Credential, String)>, String> {
    let Some(knooppunt_store::SinkCredential::ClientCredentials {
        token_url,
        client_id,
        client_secret,
        scope,
    }) = &subscription.sink_credential
    else {
        return Ok(None);
    };
    let credential = crate::tokens::Credential {
        token_url: token_url.clone(),
        client_id: client_id.clone(),
        client_secret: client_secret.clone(),
        scope: scope.clone(),
    };
    let token = inner
        .tokens
        .token(
            &inner.connections,
            &credential,
            subscription.client_certificate.as_ref(),
            within,
        )
        .await?;
    Ok(Some((credential, token)))
}

/// A delivery, its event, and the trace context of its hop.
type Sending = (Delivery, Arc<StoredEvent>, Option<(TraceContext, u64)>);

async fn send_and_record(
    inner: &Arc<Inner>,
    subscription: &Subscription,
    config: DeliveryConfig,
    gone: &AtomicBool,
    (delivery, event, trace): Sending,
    connection: Connection,
) {
    let id = subscription.id.as_str();
    let at = now_ms();
    let Connection {
        permit,
        started,
        probe,
    } = connection;
    // Whether a request went out: only then does the outcome say anything about the sink.
    let mut sent = false;
    let message = sink::credential_problem(subscription, SystemTime::now())
        .map_or_else(|| sink::delivery_message(&event.json, config.mode), Err);
    let (response, outcome) = match message {
        Ok(mut message) => {
            if let Some(trace) = &trace {
                hop_headers(&mut message.headers, trace);
            }
            let response = match permit {
                Ok(permit) => {
                    let timeout = config.timeout.saturating_sub(started.elapsed());
                    match bearer_token(inner, subscription, timeout).await {
                        Ok(bearer) => {
                            sent = true;
                            let client = &permit.client;
                            let response = sink::deliver(
                                client,
                                subscription,
                                &inner.origin,
                                message,
                                timeout.saturating_sub(started.elapsed()),
                                bearer.as_ref().map(|(_, token)| token.as_str()),
                            )
                            .await;
                            // Refused: the next attempt gets a new token.
                            if let (Response::Status { code: 401, .. }, Some((credential, _))) =
                                (&response, &bearer)
                            {
                                inner.tokens.forget(credential);
                            }
                            response
                        }
                        Err(why) => Response::Failed(why),
                    }
                }
                Err(why) => Response::Failed(why),
            };
            let outcome = classify(&response, SystemTime::now());
            (response, outcome)
        }
        Err(why) => (Response::Failed(why.clone()), Outcome::Unsendable(why)),
    };
    if outcome == Outcome::Gone {
        gone.store(true, AtomicOrdering::SeqCst);
    }
    // The sink's own wait, up to the hub's maximum.
    let outcome = match outcome {
        Outcome::Retry {
            not_before: Some(wait),
        } => Outcome::Retry {
            not_before: Some(wait.min(inner.options.max_retry_after)),
        },
        other => other,
    };
    let sink = &subscription.sink;
    match &outcome {
        _ if !sent => {
            if probe {
                inner.connections.release_probe(sink);
            }
        }
        Outcome::Retry {
            not_before: Some(wait),
        } => {
            let wait = (*wait).max(config.initial_backoff);
            let result = SinkResult::RetryAfter(wait);
            inner.connections.report(sink, result, fastrand::f64());
        }
        Outcome::Retry { not_before: None } => {
            inner
                .connections
                .report(sink, SinkResult::Failed, fastrand::f64());
        }
        Outcome::Unsendable(_) => {}
        Outcome::Delivered | Outcome::Rejected | Outcome::Gone => {
            inner
                .connections
                .report(sink, SinkResult::Healthy, fastrand::f64());
        }
    }
    let attempts = delivery.attempts + 1;
    let verdict = verdict(
        &outcome,
        &config,
        attempts,
        event.accepted_at,
        now_ms(),
        fastrand::f64(),
    );
    let (status, error) = match &response {
        Response::Status { code, .. } if (200..300).contains(code) => (Some(*code), None),
        Response::Status { code, .. } => (Some(*code), Some(format!("the sink answered {code}"))),
        Response::Timeout => (
            None,
            Some(format!(
                "no answer within {} ms",
                config.timeout.as_millis()
            )),
        ),
        Response::Failed(why) => (None, Some(why.clone())),
    };
    let label = match &verdict {
        Verdict::Delivered => "delivered",
        Verdict::Retry { .. } => "retry",
        Verdict::DeadLetter { .. } => "deadLetter",
    };
    inner.observer.attempt(label, status, started.elapsed());
    if let Verdict::DeadLetter { reason } = &verdict {
        tracing::info!(
            subscription = id,
            seq = delivery.seq,
            attempts,
            reason = %reason,
            trace_id = trace.as_ref().map(|(t, _)| t.trace_id.as_str()),
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
    let change = DeliveryChange::Attempted(Attempt {
        subscription: id.to_owned(),
        seq: delivery.seq,
        lease: delivery.lease,
        at,
        status,
        error: error.clone(),
        verdict,
    });
    match inner.store.record(vec![change]).await {
        Ok(()) => {}
        Err(error @ knooppunt_store::StoreError::StaleLease { .. }) => {
            // The attempt outlived its lease and the delivery was leased again; the new
            // holder's result counts (the sink may get the event twice: at least once).
            tracing::warn!(subscription = id, seq = delivery.seq, %error, "A delivery attempt outlived its lease; its result was not recorded.");
        }
        Err(error) => {
            tracing::error!(subscription = id, seq = delivery.seq, %error, "Recording a delivery attempt failed; the delivery will be tried again.");
        }
    }
    inner.last.lock().expect("last lock").insert(
        id.to_owned(),
        LastDelivery {
            at,
            seq: delivery.seq,
            status,
            error,
            outcome: label,
        },
    );
    if outcome == Outcome::Gone {
        // The broker, the one writer of subscriptions, decides what the 410 means: it
        // disables the subscription unless its sink has changed meanwhile.
        let _ = inner.gone.send(Gone {
            subscription: id.to_owned(),
            sink: subscription.sink.clone(),
        });
    }
}
