//! `POST /v1/events`: publish events in structured, binary or batched mode. A 202 means every
//! event and each of its deliveries is on disk.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, State};
use axum::response::{IntoResponse, Response};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, StatusCode};
use knooppunt_event::ReceivedEvent;
use knooppunt_event::binding::http::{self as binding, ContentMode, DecodeError, Message};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use crate::auth::Caller;
use crate::document::{Operation, UNAUTHORIZED, cloud_events, header};
use crate::endpoints::Endpoints;
use crate::problem::{ApiError, invalid_events};
use knooppunt_services::app::AppState;
use knooppunt_services::ingest::{Receipt, ViolationSchema};
use knooppunt_services::telemetry::Rejection;

/// The answer to a batch: the receipts without their warnings, and each warning once with
/// the positions of the events it concerns (a large batch of alike events would otherwise
/// repeat the same warning in every receipt).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(
    rename = "BatchReceipts",
    description = "A batch: one receipt per event, in order (none for an empty batch).",
    deny_unknown_fields
)]
struct Receipts {
    /// One receipt per event, in the batch's order; in a batch their warnings are given once
    /// below.
    events: Vec<Receipt>,
    /// Each warning of the batch's events once, with the positions (from 0) of the events
    /// it concerns.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<BatchWarning>,
}

/// One warning, and the events of the batch it concerns.
#[derive(Debug, Serialize, JsonSchema)]
struct BatchWarning {
    #[serde(flatten)]
    #[schemars(with = "ViolationSchema")]
    warning: knooppunt_event::validate::Violation,
    /// The positions in the batch (from 0) of the events it concerns.
    events: Vec<usize>,
}

/// A CloudEvent in the JSON format (json-format.md), as a publisher sends it. Members
/// besides the ones listed are extension attributes: lower-case letters and digits, a
/// string, integer or boolean value. An optional attribute may be `null` (unset), as the
/// publisher sent it. The hub reads an event with `knooppunt-event` (which keeps it exactly
/// as sent: the hub never changes an event); this type describes it.
#[derive(Debug, serde::Deserialize, JsonSchema)]
#[schemars(rename = "CloudEvent")]
pub struct CloudEventIn {
    #[schemars(extend("enum" = ["1.0"]))]
    pub specversion: String,
    #[schemars(length(min = 1))]
    pub id: String,
    #[schemars(length(min = 1), extend("format" = "uri-reference"))]
    pub source: String,
    #[serde(rename = "type")]
    #[schemars(length(min = 1))]
    pub event_type: String,
    #[schemars(length(min = 1))]
    pub datacontenttype: Option<String>,
    #[schemars(extend("format" = "uri"))]
    pub dataschema: Option<String>,
    #[schemars(length(min = 1))]
    pub subject: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub time: Option<String>,
    /// The event data: any JSON value.
    pub data: Option<serde_json::Value>,
    /// Binary event data, base64-encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", extend("format" = "byte"))]
    pub data_base64: Option<String>,
    /// Extension attributes.
    #[serde(flatten)]
    pub extensions: std::collections::BTreeMap<String, ExtensionValue>,
}

/// An extension attribute's value in the JSON format: a string (or `null`, unset), an
/// integer or a boolean.
#[derive(Debug, serde::Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ExtensionValue {
    String(Option<String>),
    Integer(i64),
    Boolean(bool),
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
            .map(|(warning, events)| BatchWarning { warning, events })
            .collect();
        Receipts {
            events: receipts,
            warnings,
        }
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
    accept(state, caller, headers, body).await
}

async fn accept(
    state: Arc<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    // Asked before the body is read; the pipeline asks again (one rule, in the pipeline).
    state
        .publishing()
        .may_publish(&caller.0, 1)
        .map_err(ApiError::Forbidden)?;
    let options = &state.publishing().options;
    let body = body.map_err(|rejection| {
        let too_large = rejection.status() == StatusCode::PAYLOAD_TOO_LARGE;
        let why = if too_large {
            Rejection::TooLarge
        } else {
            Rejection::Unreadable
        };
        state.publishing().rejected(why, 1);
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
            .publishing()
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
        state.publishing().rejected(Rejection::TooLarge, 1);
        return Err(too_large(body.len() + ce_headers, "the event"));
    }

    let received: Vec<ReceivedEvent> = match binding::decode(&headers, &body) {
        Err(DecodeError::UnsupportedFormat(content_type)) => {
            state
                .publishing()
                .rejected(Rejection::UnsupportedMediaType, 1);
            return Err(ApiError::UnsupportedMediaType(
                DecodeError::UnsupportedFormat(content_type).to_string(),
            ));
        }
        Err(DecodeError::Invalid(violations)) => {
            state.publishing().rejected(Rejection::Invalid, 1);
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
                            state.publishing().rejected(Rejection::TooLarge, 1);
                            return Err(too_large(size, &format!("event [{index}] of the batch")));
                        }
                        events.push(event);
                    }
                    Err(violations) => problems.push((Some(index), violations)),
                }
            }
            if !problems.is_empty() {
                state
                    .publishing()
                    .rejected(Rejection::Invalid, problems.len() + events.len());
                return Err(invalid_events(problems));
            }
            events
        }
    };
    let batched = mode == ContentMode::Batched;
    let receipts = match state
        .publishing()
        .accept(
            &caller.0,
            received,
            batched,
            crate::request::hop_trace(&headers),
        )
        .await
    {
        Ok(receipts) => receipts,
        Err(refused) => return Err(refused.into()),
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

/// The publish operation.
pub(crate) fn describe(doc: &mut Endpoints) {
    // The `ce-` headers of binary mode (http-protocol-binding.md 3.1.3): each attribute's
    // canonical string, percent-encoded. Their constraints hold in binary mode only (a
    // structured or batched request's `ce-` headers are not the event), so the schema
    // carries none and the description says them.
    let header_parameter = |name: &str, description: &str, required_in_binary: bool| {
        let description = if required_in_binary {
            format!(
                "Binary mode: {description} (non-empty, percent-encoded; required in binary \
                 mode). Not read in structured or batched mode."
            )
        } else {
            format!(
                "Binary mode: {description} (non-empty, percent-encoded). Any other \
                 `ce-<name>` header is an extension attribute. Not read in structured or \
                 batched mode."
            )
        };
        json!({"name": name, "in": "header", "required": false, "description": description,
               "schema": {"type": "string"}})
    };
    let event = doc.input::<CloudEventIn>();
    let receipt = doc.schema::<Receipt>();
    let batch = doc.schema::<Receipts>();
    let mut publish = Operation::new(
        "publishEvents",
        "events",
        "Publish events. 202 means every event and each of its deliveries is on disk.",
    )
    .parameters(json!([
        header_parameter("ce-specversion", "`1.0`", true),
        header_parameter("ce-id", "the event's `id`", true),
        header_parameter("ce-source", "the event's `source`", true),
        header_parameter("ce-type", "the event's `type`", true),
        header_parameter("ce-subject", "the event's `subject`", false),
        header_parameter("ce-time", "the event's `time`", false),
        header_parameter("ce-dataschema", "the event's `dataschema`", false)
    ]))
    .answer(
        "202",
        "Accepted and durably stored (for a batch: all of it).",
        Some(json!({"oneOf": [receipt, batch]})),
    )
    .header(
        "202",
        "Deprecation",
        header(
            "`true` when the catalog deprecates the type of an event (RFC 9745); the receipt \
             says which.",
        ),
    )
    .refusals(&[
        (
            "400",
            "An event is invalid; every problem of every event is listed, and nothing was \
             accepted.",
        ),
        UNAUTHORIZED,
        (
            "403",
            "The principal lacks the publisher role or publishes outside its source prefixes.",
        ),
        (
            "413",
            "An event (or the batch) is larger than the hub accepts.",
        ),
        (
            "415",
            "The content type is not a CloudEvents format or binary mode.",
        ),
        (
            "503",
            "Nothing was accepted: the hub holds all the undelivered data its operator allows, \
             or its disk has less room than it keeps free for deliveries to drain (type \
             `urn:knooppunt:problem:backlog-full`, the detail says which); or the store takes \
             no writes now. Try again after Retry-After.",
        ),
    ]);
    publish = publish.request_body(json!({
        "required": true,
        "description": "One event in structured mode (JSON or CBOR), a batch, or binary mode (the data as \
                        the body with `ce-` headers carrying the attributes, percent-encoded).",
        "content": {
            "application/cloudevents+json": {"schema": event},
            "application/cloudevents+cbor": {"schema": {"type": "string", "format": "binary",
                "description": "A CloudEvent in the CBOR event format: a map of attribute names to values \
                                (URIs tagged 32, timestamps tagged 0), the data as a byte string or a native value."}},
            "application/cloudevents-batch+json": {"schema": cloud_events()},
            "*/*": {"schema": {"type": "string", "format": "binary", "description": "Binary mode: the event data."}}
        }
    }));
    // The limit wraps the handler itself: a layer on the method router would wrap it in a
    // route of its own (a boxed service and future more per event).
    let limited = axum::handler::Handler::layer(
        self::publish,
        axum::extract::DefaultBodyLimit::max(doc.body_limit),
    );
    doc.route(
        "/events",
        "post",
        axum::routing::post(limited),
        &json!([]),
        publish,
    );
}
