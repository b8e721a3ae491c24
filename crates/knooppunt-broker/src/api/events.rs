//! `POST /v1/events`: publish events in structured, binary or batched mode. A 202 means every
//! event and each of its deliveries is on disk.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, State};
use axum::response::{IntoResponse, Response};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, StatusCode};
use knooppunt_event::binding::http::{self as binding, ContentMode, DecodeError, Message};
use knooppunt_event::trace_context::TraceContext;
use knooppunt_event::{ReceivedEvent, Violations};
use serde::Serialize;
use serde_json::{Value, json};
use tracing::Instrument;

use super::auth::{Caller, Role};
use super::problem::{ApiError, InvalidParam};
use crate::app::AppState;
use crate::ingest::{Receipt, Refused};
use crate::telemetry::Rejection;

/// The answer to a batch: the receipts without their warnings, and each warning once with
/// the positions of the events it concerns (a large batch of alike events would otherwise
/// repeat the same warning in every receipt).
#[derive(Debug, Serialize)]
struct Receipts {
    events: Vec<Receipt>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<Value>,
}

impl Receipts {
    fn of(mut receipts: Vec<Receipt>) -> Receipts {
        let mut warnings: Vec<(knooppunt_event::validate::Violation, Vec<usize>)> = Vec::new();
        let mut seen: std::collections::HashMap<(String, &'static str, String), usize> =
            std::collections::HashMap::new();
        for (index, receipt) in receipts.iter_mut().enumerate() {
            for warning in std::mem::take(&mut receipt.warnings) {
                let key = (
                    warning.attribute.clone(),
                    warning.rule.code(),
                    warning.detail.clone(),
                );
                match seen.get(&key) {
                    Some(&at) => warnings[at].1.push(index),
                    None => {
                        seen.insert(key, warnings.len());
                        warnings.push((warning, vec![index]));
                    }
                }
            }
        }
        let warnings = warnings
            .into_iter()
            .map(|(warning, events)| {
                let mut value = serde_json::to_value(&warning).expect("a violation serialises");
                value["events"] = json!(events);
                value
            })
            .collect();
        Receipts {
            events: receipts,
            warnings,
        }
    }
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
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    // The headers are taken from the request, not copied (the `HeaderMap` extractor
    // clones them); the body is read as the `Bytes` extractor reads it, under the route's
    // limit.
    let (mut parts, body) = request.into_parts();
    let headers = std::mem::take(&mut parts.headers);
    let body = Bytes::from_request(axum::extract::Request::from_parts(parts, body), &()).await;
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
    let options = &state.publishing.options;
    let body = body.map_err(|rejection| {
        let too_large = rejection.status() == StatusCode::PAYLOAD_TOO_LARGE;
        let why = if too_large {
            Rejection::TooLarge
        } else {
            Rejection::Unreadable
        };
        state.publishing.rejected(why, 1);
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
        state
            .publishing
            .rejected(Rejection::UnsupportedMediaType, 1);
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
        state.publishing.rejected(Rejection::TooLarge, 1);
        return Err(too_large(body.len() + ce_headers, "the event"));
    }

    let received: Vec<ReceivedEvent> = match binding::decode(&headers, &body) {
        Err(DecodeError::UnsupportedFormat(content_type)) => {
            state
                .publishing
                .rejected(Rejection::UnsupportedMediaType, 1);
            return Err(ApiError::UnsupportedMediaType(
                DecodeError::UnsupportedFormat(content_type).to_string(),
            ));
        }
        Err(DecodeError::Invalid(violations)) => {
            state.publishing.rejected(Rejection::Invalid, 1);
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
                            state.publishing.rejected(Rejection::TooLarge, 1);
                            return Err(too_large(size, &format!("event [{index}] of the batch")));
                        }
                        events.push(event);
                    }
                    Err(violations) => problems.push((Some(index), violations)),
                }
            }
            if !problems.is_empty() {
                state
                    .publishing
                    .rejected(Rejection::Invalid, problems.len() + events.len());
                return Err(invalid_events(problems));
            }
            events
        }
    };
    let batched = mode == ContentMode::Batched;
    let receipts = match state.publishing.accept(&caller.0, received, batched).await {
        Ok(receipts) => receipts,
        Err(Refused::Invalid(problems)) => return Err(invalid_events(problems)),
        Err(Refused::Forbidden(detail)) => return Err(ApiError::Forbidden(detail)),
        Err(Refused::Store(error)) => return Err(error.into()),
        Err(Refused::Full(full)) => {
            return Err(ApiError::Full {
                detail: full.detail,
                retry_after: full.retry_after,
            });
        }
    };
    let deprecated = receipts.iter().any(|receipt| receipt.deprecated_type);
    let body = if batched {
        serde_json::to_vec(&Receipts::of(receipts))
    } else {
        serde_json::to_vec(&receipts[0])
    }
    .expect("receipts serialise");
    let mut response = (
        StatusCode::ACCEPTED,
        [(CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body,
    )
        .into_response();
    if deprecated {
        // The catalog deprecates the type (RFC 9745 names the header; the receipt says which).
        response
            .headers_mut()
            .insert("deprecation", HeaderValue::from_static("true"));
    }
    Ok(response)
}
