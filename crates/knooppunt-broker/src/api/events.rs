//! `POST /v1/events`: publish events in structured, binary or batched mode. A 202 means every
//! event and each of its deliveries is on disk.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, StatusCode};
use knooppunt_event::binding::http::{self as binding, ContentMode, DecodeError, Message};
use knooppunt_event::trace_context::TraceContext;
use knooppunt_event::{ReceivedEvent, Severity, Violation, Violations, validate};
use knooppunt_store::{Appended, NewEvent};
use serde::Serialize;
use serde_json::json;
use tracing::Instrument;

use super::auth::{Caller, Role};
use super::problem::{ApiError, InvalidParam};
use crate::AppState;
use crate::ingest::{IngestCounters, now_ms};
use crate::telemetry::Rejection;

/// What the hub says about one published event.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Receipt {
    id: String,
    source: String,
    /// The hub's acceptance sequence number (the original's, for a duplicate).
    sequence: u64,
    /// An event with this `source` and `id` was accepted before, within the duplicate window;
    /// it was acknowledged again but not routed again.
    duplicate: bool,
    /// How many subscriptions it was routed to.
    matched_subscriptions: usize,
    /// SHOULD-level findings (and, at profile level `warn`, the profile's MUSTs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<Violation>,
}

/// The answer to a batch.
#[derive(Debug, Serialize)]
struct Receipts<'a> {
    events: &'a [Receipt],
}

fn rejected(state: &AppState, why: Rejection, count: usize) {
    IngestCounters::add(&state.counters.rejected, count as u64);
    state.telemetry.rejected(why, count);
}

/// Every problem of the invalid events, by position (`None` for a single event).
fn invalid_events(problems: Vec<(Option<usize>, Violations)>) -> ApiError {
    let mut params = Vec::new();
    let mut errors = Vec::new();
    for (index, violations) in &problems {
        let prefix = index.map(|i| format!("[{i}]")).unwrap_or_default();
        for violation in violations {
            let name = match (&prefix, violation.attribute.is_empty()) {
                (p, true) if p.is_empty() => "event".to_owned(),
                (p, true) => p.clone(),
                (p, false) if p.is_empty() => violation.attribute.clone(),
                (p, false) => format!("{p}.{}", violation.attribute),
            };
            params.push(InvalidParam::new(name, violation.detail.clone()));
        }
        errors.push(json!({"index": index, "violations": violations}));
    }
    let detail = match problems.as_slice() {
        [(None, violations)] => format!(
            "the event is not a valid CloudEvent: {} problem{}; see invalidParams",
            violations.as_slice().len(),
            if violations.as_slice().len() == 1 {
                ""
            } else {
                "s"
            }
        ),
        _ => format!(
            "{} event{} of the batch {} invalid, so none was accepted; see invalidParams",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" },
            if problems.len() == 1 { "is" } else { "are" }
        ),
    };
    ApiError::InvalidEvents {
        detail,
        invalid_params: params,
        errors: serde_json::Value::Array(errors),
    }
}

pub(crate) async fn publish(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    // The request's own trace context (the publisher's HTTP hop), when it sends one; each
    // event's is logged with the event.
    let span = tracing::debug_span!(
        "publish",
        principal = %caller.0.name,
        http_trace_id = tracing::field::Empty,
        http_parent_id = tracing::field::Empty,
    );
    if !span.is_disabled()
        && let Some(context) = headers
            .get("traceparent")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| TraceContext::parse(value, None))
    {
        span.record("http_trace_id", context.trace_id.as_str());
        span.record("http_parent_id", context.parent_id.as_str());
    }
    accept(state, caller, headers, body).instrument(span).await
}

async fn accept(
    state: Arc<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    caller.require(Role::Publisher, "publish events")?;
    let options = &state.ingest;
    let body = body.map_err(|rejection| {
        let too_large = rejection.status() == StatusCode::PAYLOAD_TOO_LARGE;
        let why = if too_large {
            Rejection::TooLarge
        } else {
            Rejection::Unreadable
        };
        rejected(&state, why, 1);
        if too_large {
            ApiError::PayloadTooLarge(format!(
                "the body is larger than this hub accepts ({} bytes for a batch, {} for one event)",
                options.max_batch_bytes, options.max_event_bytes
            ))
        } else {
            ApiError::unreadable_body(&rejection)
        }
    })?;

    let mode = ContentMode::detect(headers.get(CONTENT_TYPE));
    let ce_headers: usize = headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("ce-"))
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if mode == ContentMode::Binary && ce_headers == 0 {
        rejected(&state, Rejection::UnsupportedMediaType, 1);
        let content_type = headers.get(CONTENT_TYPE).map_or("none".into(), |v| {
            String::from_utf8_lossy(v.as_bytes()).into_owned()
        });
        return Err(ApiError::UnsupportedMediaType(format!(
            "content type `{content_type}` without `ce-` headers is not a CloudEvent: send \
             `application/cloudevents+json`, `application/cloudevents-batch+json`, or binary \
             mode with `ce-specversion`, `ce-id`, `ce-source` and `ce-type` headers"
        )));
    }
    let too_large = |size: usize, what: &str| {
        ApiError::PayloadTooLarge(format!(
            "{what} is {size} bytes; this hub accepts events up to {} bytes",
            options.max_event_bytes
        ))
    };
    if mode != ContentMode::Batched && body.len() + ce_headers > options.max_event_bytes {
        rejected(&state, Rejection::TooLarge, 1);
        return Err(too_large(body.len() + ce_headers, "the event"));
    }

    let received: Vec<ReceivedEvent> = match binding::decode(&headers, &body) {
        Err(DecodeError::UnsupportedFormat(content_type)) => {
            rejected(&state, Rejection::UnsupportedMediaType, 1);
            return Err(ApiError::UnsupportedMediaType(
                DecodeError::UnsupportedFormat(content_type).to_string(),
            ));
        }
        Err(DecodeError::Invalid(violations)) => {
            rejected(&state, Rejection::Invalid, 1);
            return Err(invalid_events(vec![(None, violations)]));
        }
        Ok(Message::Single(event)) => vec![*event],
        Ok(Message::Batch(results)) => {
            let mut events = Vec::with_capacity(results.len());
            let mut problems = Vec::new();
            for (index, result) in results.into_iter().enumerate() {
                match result {
                    Ok(event) => {
                        let size = event.json.as_deref().map_or(0, str::len);
                        if size > options.max_event_bytes {
                            rejected(&state, Rejection::TooLarge, 1);
                            return Err(too_large(size, &format!("event [{index}] of the batch")));
                        }
                        events.push(event);
                    }
                    Err(violations) => problems.push((Some(index), violations)),
                }
            }
            if !problems.is_empty() {
                rejected(&state, Rejection::Invalid, problems.len() + events.len());
                return Err(invalid_events(problems));
            }
            events
        }
    };
    let batched = mode == ContentMode::Batched;
    let position = |index: usize| batched.then_some(index);

    let mut warnings = Vec::with_capacity(received.len());
    let mut problems = Vec::new();
    for (index, event) in received.iter().enumerate() {
        match validate::check(&event.event, options.profile) {
            Ok(found) => warnings.push(found),
            Err(violations) => problems.push((position(index), violations)),
        }
    }
    if !problems.is_empty() {
        rejected(&state, Rejection::Invalid, received.len());
        return Err(invalid_events(problems));
    }

    let allowed = &caller.0.publish_source_prefixes;
    let outside = |e: &&ReceivedEvent| {
        !allowed
            .iter()
            .any(|prefix| e.event.source().starts_with(prefix.as_str()))
    };
    if !allowed.is_empty()
        && !caller.0.is_admin()
        && let Some(event) = received.iter().find(outside)
    {
        rejected(&state, Rejection::Forbidden, received.len());
        return Err(ApiError::Forbidden(format!(
            "principal `{}` may publish only sources starting with `{}`; event `{}` has source \
             `{}`",
            caller.0.name,
            allowed.join("`, `"),
            event.event.id(),
            event.event.source()
        )));
    }

    // Each event's trace context, for the log (only read when debug logging is on).
    let traces: Vec<Option<TraceContext>> = if tracing::enabled!(tracing::Level::DEBUG) {
        received
            .iter()
            .map(|r| TraceContext::of_event(&r.event))
            .collect()
    } else {
        Vec::new()
    };
    let new_events: Vec<NewEvent> = {
        let registry = state.registry.read().expect("registry lock");
        received
            .into_iter()
            .map(|received| {
                let started = std::time::Instant::now();
                let subscriptions = registry.matching(&received.event);
                state
                    .telemetry
                    .routing_seconds
                    .observe(started.elapsed().as_secs_f64());
                NewEvent {
                    source: received.event.source().to_owned(),
                    id: received.event.id().to_owned(),
                    json: received.into_json(),
                    subscriptions,
                }
            })
            .collect()
    };
    let window = options.dedupe_window.as_millis() as u64;
    // What the receipts need; the events themselves move into the store.
    let receipted: Vec<(String, String, usize)> = new_events
        .iter()
        .map(|e| (e.id.clone(), e.source.clone(), e.subscriptions.len()))
        .collect();
    let routed: Vec<String> = new_events
        .iter()
        .flat_map(|e| e.subscriptions.iter().cloned())
        .collect();
    let outcomes = state
        .store
        .append_events(new_events, now_ms(), window)
        .await?;
    state.deliverer.wake(&routed);

    let counters = &state.counters;
    let receipts: Vec<Receipt> = receipted
        .into_iter()
        .zip(outcomes)
        .zip(warnings)
        .enumerate()
        .map(|(index, (((id, source, routed), outcome), warnings))| {
            let (duplicate, sequence) = match outcome {
                Appended::Accepted { seq } => (false, seq),
                Appended::Duplicate { seq } => (true, seq),
            };
            let matched = if duplicate { 0 } else { routed };
            if duplicate {
                IngestCounters::add(&counters.duplicates, 1);
            } else {
                IngestCounters::add(&counters.accepted, 1);
                IngestCounters::add(&counters.deliveries, matched as u64);
                state.telemetry.matches.observe(matched as f64);
                if matched == 0 {
                    IngestCounters::add(&counters.unmatched, 1);
                }
            }
            let trace = traces.get(index).and_then(Option::as_ref);
            tracing::debug!(
                %source, %id, sequence, duplicate, matched,
                trace_id = trace.map(|t| t.trace_id.as_str()),
                link = trace.map(|t| t.parent_id.as_str()),
                "Event accepted."
            );
            Receipt {
                id,
                source,
                sequence,
                duplicate,
                matched_subscriptions: matched,
                warnings: warnings
                    .into_iter()
                    .filter(|w| w.severity == Severity::Warning)
                    .collect(),
            }
        })
        .collect();
    let body = if batched {
        serde_json::to_vec(&Receipts { events: &receipts })
    } else {
        serde_json::to_vec(&receipts[0])
    }
    .expect("receipts serialise");
    Ok((
        StatusCode::ACCEPTED,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response())
}
