//! Errors as `application/problem+json` (RFC 9457, ADR /core/error-handling): every error
//! response names what was wrong, and for invalid input lists every problem found.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::header::{ALLOW, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderValue, StatusCode};
use serde::Serialize;

pub(crate) const PROBLEM_JSON: &str = "application/problem+json";

/// One invalid part of a request: where (`name`, e.g. `sink` or `filters[0].exact`) and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct InvalidParam {
    #[schemars(example = &"sink")]
    pub name: String,
    #[schemars(example = &"is required: the absolute http(s) URL to deliver to")]
    pub reason: String,
}

impl InvalidParam {
    pub(crate) fn new(name: impl Into<String>, reason: impl Into<String>) -> Self {
        InvalidParam {
            name: name.into(),
            reason: reason.into(),
        }
    }
}

/// There is no subscription `id` the caller sees (whether it exists is not told).
pub(crate) fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("there is no subscription `{id}` visible to you"))
}

/// Everything an API handler can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{detail}")]
    InvalidInput {
        detail: String,
        invalid_params: Vec<InvalidParam>,
    },
    /// Events that break the specifications: every problem of every event, by position.
    #[error("{detail}")]
    InvalidEvents {
        detail: String,
        invalid_params: Vec<InvalidParam>,
        errors: serde_json::Value,
    },
    #[error("{detail}")]
    Unauthorized { detail: String, invalid_token: bool },
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with the resource's state.
    #[error("{0}")]
    Conflict(String),
    /// A bound on work running at once is reached: 429 with `Retry-After`.
    #[error("{0}")]
    TooMany(String),
    /// What was asked for is no longer kept; `oldest_cursor` is where the kept part starts.
    #[error("{detail}")]
    Gone {
        detail: String,
        oldest_cursor: String,
    },
    #[error("method not allowed")]
    MethodNotAllowed { allow: std::sync::Arc<str> },
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The request's body did not arrive in time.
    #[error("{0}")]
    RequestTimeout(String),
    /// The store takes no writes now; logged with its cause, answered 503 with `Retry-After`.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The hub holds all the undelivered data it may, or its disk is nearly full: 503 with
    /// `Retry-After` (seconds) and this detail.
    #[error("{detail}")]
    Full { detail: String, retry_after: u64 },
    /// Something the hub needs from elsewhere (an issuer's keys) cannot be had now: 503 with
    /// `Retry-After` and this detail, which names what is missing.
    #[error("{0}")]
    DependencyUnavailable(String),
    /// Logged with its cause; the client only learns that the hub failed.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Every problem code the API answers (`urn:knooppunt:problem:<code>`), besides the
/// `http-<status>` of an answer its HTTP layer made: the console has a text for each.
pub const CODES: &[&str] = &[
    "invalid-input",
    "invalid-event",
    "unauthorized",
    "forbidden",
    "not-found",
    "conflict",
    "gone",
    "too-many-requests",
    "method-not-allowed",
    "unsupported-media-type",
    "payload-too-large",
    "request-timeout",
    "unavailable",
    "backlog-full",
    "internal-error",
    "not-ready",
    "too-many-connections",
];

impl ApiError {
    /// The answer to a body that could not be read: 408 when it took too long, else 400.
    pub(crate) fn unreadable_body(rejection: &axum::extract::rejection::BytesRejection) -> Self {
        use std::error::Error;
        match rejection.source().and_then(crate::server::timed_out) {
            Some(timed_out) => ApiError::RequestTimeout(format!(
                "{timed_out}: send the whole body promptly after the headers"
            )),
            None => ApiError::invalid(format!("the body could not be read: {rejection}"), vec![]),
        }
    }

    pub(crate) fn invalid(detail: impl Into<String>, invalid_params: Vec<InvalidParam>) -> Self {
        ApiError::InvalidInput {
            detail: detail.into(),
            invalid_params,
        }
    }

    fn parts(&self) -> (StatusCode, &'static str, &'static str) {
        match self {
            ApiError::InvalidInput { .. } => {
                (StatusCode::BAD_REQUEST, "invalid-input", "Invalid input")
            }
            ApiError::InvalidEvents { .. } => (
                StatusCode::BAD_REQUEST,
                "invalid-event",
                "Invalid CloudEvent",
            ),
            ApiError::Unauthorized { .. } => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "Authentication required",
            ),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden", "Forbidden"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not-found", "Not found"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict", "Conflict"),
            ApiError::Gone { .. } => (StatusCode::GONE, "gone", "Gone"),
            ApiError::TooMany(_) => (
                StatusCode::TOO_MANY_REQUESTS,
                "too-many-requests",
                "Too many requests",
            ),
            ApiError::MethodNotAllowed { .. } => (
                StatusCode::METHOD_NOT_ALLOWED,
                "method-not-allowed",
                "Method not allowed",
            ),
            ApiError::UnsupportedMediaType(_) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                "Unsupported media type",
            ),
            ApiError::PayloadTooLarge(_) => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload-too-large",
                "Payload too large",
            ),
            ApiError::RequestTimeout(_) => (
                StatusCode::REQUEST_TIMEOUT,
                "request-timeout",
                "Request timeout",
            ),
            ApiError::Unavailable(_) | ApiError::DependencyUnavailable(_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "Service unavailable",
            ),
            ApiError::Full { .. } => (
                StatusCode::SERVICE_UNAVAILABLE,
                "backlog-full",
                "Backlog full",
            ),
            ApiError::Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal-error",
                "Internal server error",
            ),
        }
    }
}

/// The invalid events of a refused publish: per event (`index` in the batch, none for a
/// single event) its violations.
#[derive(schemars::JsonSchema)]
#[schemars(rename = "InvalidEvent")]
#[allow(dead_code)]
pub(crate) struct InvalidEventSchema {
    index: Option<usize>,
    violations: Vec<knooppunt_services::ingest::ViolationSchema>,
}

/// The problem details body.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(description = "Problem details (RFC 9457).")]
pub(crate) struct Problem<'a> {
    /// A URN naming the kind of problem.
    #[serde(rename = "type")]
    #[schemars(example = &"urn:knooppunt:problem:invalid-input")]
    pub(crate) kind: String,
    #[schemars(example = &"Invalid input")]
    pub(crate) title: &'a str,
    #[schemars(example = 400)]
    pub(crate) status: u16,
    #[schemars(example = &"the subscription has 1 problem; see invalidParams")]
    pub(crate) detail: String,
    /// For invalid input: every problem found, by location.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub(crate) invalid_params: &'a [InvalidParam],
    /// For invalid events: per event (`index` in the batch, null for a single event) the
    /// violations, each with its rule and the section of the specification.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Vec<InvalidEventSchema>>")]
    pub(crate) errors: Option<serde_json::Value>,
    /// For 410 of the event stream: the oldest cursor from which nothing is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) oldest_cursor: Option<String>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, slug, title) = self.parts();
        let detail = match &self {
            ApiError::Unavailable(cause) => {
                tracing::warn!(%cause, "Request refused: the store takes no writes.");
                "the hub cannot store anything now; nothing of this request was kept: try again \
                 later, or at another hub"
                    .to_owned()
            }
            ApiError::Internal(cause) => {
                tracing::error!(%cause, "Request failed with an internal error.");
                "the hub could not complete the request; the operators can find the cause in \
                 its log"
                    .to_owned()
            }
            ApiError::MethodNotAllowed { allow } => {
                format!("this resource supports {allow}")
            }
            other => other.to_string(),
        };
        let (invalid_params, errors) = match &self {
            ApiError::InvalidInput { invalid_params, .. } => (invalid_params.as_slice(), None),
            ApiError::InvalidEvents {
                invalid_params,
                errors,
                ..
            } => (invalid_params.as_slice(), Some(errors.clone())),
            _ => (&[][..], None),
        };
        let body = Problem {
            kind: format!("urn:knooppunt:problem:{slug}"),
            title,
            status: status.as_u16(),
            detail,
            invalid_params,
            errors,
            oldest_cursor: match &self {
                ApiError::Gone { oldest_cursor, .. } => Some(oldest_cursor.clone()),
                _ => None,
            },
        };
        let refusal = Refusal(body.detail.clone());
        let mut response = (status, Json(body)).into_response();
        response.extensions_mut().insert(refusal);
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        match &self {
            ApiError::Unauthorized { invalid_token, .. } => {
                let challenge = if *invalid_token {
                    "Bearer realm=\"knooppunt\", error=\"invalid_token\""
                } else {
                    "Bearer realm=\"knooppunt\""
                };
                headers.insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
            }
            ApiError::MethodNotAllowed { allow } => {
                if let Ok(allow) = HeaderValue::from_str(allow) {
                    headers.insert(ALLOW, allow);
                }
            }
            ApiError::Unavailable(_) | ApiError::DependencyUnavailable(_) => {
                headers.insert(http::header::RETRY_AFTER, HeaderValue::from_static("5"));
            }
            ApiError::TooMany(_) => {
                headers.insert(http::header::RETRY_AFTER, HeaderValue::from_static("10"));
            }
            ApiError::Full { retry_after, .. } => {
                headers.insert(http::header::RETRY_AFTER, HeaderValue::from(*retry_after));
            }
            _ => {}
        }
        response
    }
}

/// What a problem answer said, for the audit trail of refused requests.
#[derive(Debug, Clone)]
pub(crate) struct Refusal(pub(crate) String);

/// Store errors by kind: an unavailable store is 503 (try again), a conflict 409, anything
/// else (a failed or corrupt backend) 500.
impl From<crate::identity::tokens::TokenRefused> for ApiError {
    fn from(error: crate::identity::tokens::TokenRefused) -> Self {
        use crate::identity::tokens::TokenRefused;
        match error {
            TokenRefused::Invalid(detail) => ApiError::Unauthorized {
                detail,
                invalid_token: true,
            },
            TokenRefused::KeysUnavailable(detail) => ApiError::DependencyUnavailable(detail),
        }
    }
}

/// A use case's refusal, as a problem: the one place the services' refusals become the
/// API's (and the console's) answers.
impl From<knooppunt_services::refused::Refused> for ApiError {
    fn from(refused: knooppunt_services::refused::Refused) -> Self {
        use knooppunt_services::refused::Refused;
        match refused {
            Refused::Forbidden(why) => ApiError::Forbidden(why),
            Refused::NotFound(missing) => ApiError::NotFound(format!("there is no {missing}")),
            Refused::Conflict(why) => ApiError::Conflict(why),
            Refused::Invalid(member, why) => ApiError::invalid(
                format!("`{member}` cannot be used: {why}"),
                vec![InvalidParam::new(member, why)],
            ),
            Refused::Busy(why) => ApiError::TooMany(why),
            Refused::Expired { detail, oldest } => ApiError::Gone {
                detail,
                oldest_cursor: oldest.to_string(),
            },
            Refused::Events(problems) => invalid_events(problems),
            Refused::Full(full) => ApiError::Full {
                detail: full.detail,
                retry_after: full.retry_after,
            },
            Refused::Quota(exceeded) => exceeded.into(),
            Refused::Store(error) => error.into(),
        }
    }
}

impl From<knooppunt_services::subscriptions::QuotaExceeded> for ApiError {
    fn from(error: knooppunt_services::subscriptions::QuotaExceeded) -> Self {
        ApiError::Forbidden(error.0)
    }
}

impl From<knooppunt_store::StoreError> for ApiError {
    fn from(error: knooppunt_store::StoreError) -> Self {
        use knooppunt_store::StoreError;
        match error {
            StoreError::Unavailable(_) => ApiError::Unavailable(error.to_string()),
            StoreError::Conflict(_)
            | StoreError::NameTaken(_)
            | StoreError::StaleLease { .. }
            | StoreError::Unsupported(_) => ApiError::Conflict(error.to_string()),
            StoreError::Backend(_) | StoreError::Corrupt(_) => {
                ApiError::Internal(error.to_string())
            }
        }
    }
}

/// Every problem of the invalid events, by position (`None` for a single event).
pub(crate) fn invalid_events(
    problems: Vec<(Option<usize>, knooppunt_event::Violations)>,
) -> ApiError {
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
        errors.push(serde_json::json!({"index": index, "violations": violations}));
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

#[cfg(test)]
mod codes {
    use super::{ApiError, CODES};

    /// One of each kind: a kind added to `ApiError` must be added here (the match has no
    /// wildcard) and its code to [`CODES`].
    fn every_kind() -> Vec<ApiError> {
        let text = || "x".to_owned();
        let all = vec![
            ApiError::invalid(text(), vec![]),
            ApiError::InvalidEvents {
                detail: text(),
                invalid_params: vec![],
                errors: serde_json::Value::Null,
            },
            ApiError::Unauthorized {
                detail: text(),
                invalid_token: false,
            },
            ApiError::Forbidden(text()),
            ApiError::NotFound(text()),
            ApiError::Conflict(text()),
            ApiError::TooMany(text()),
            ApiError::Gone {
                detail: text(),
                oldest_cursor: text(),
            },
            ApiError::MethodNotAllowed {
                allow: "GET".into(),
            },
            ApiError::UnsupportedMediaType(text()),
            ApiError::PayloadTooLarge(text()),
            ApiError::RequestTimeout(text()),
            ApiError::Unavailable(text()),
            ApiError::Full {
                detail: text(),
                retry_after: 1,
            },
            ApiError::DependencyUnavailable(text()),
            ApiError::Internal(text()),
        ];
        for error in &all {
            match error {
                ApiError::InvalidInput { .. }
                | ApiError::InvalidEvents { .. }
                | ApiError::Unauthorized { .. }
                | ApiError::Forbidden(_)
                | ApiError::NotFound(_)
                | ApiError::Conflict(_)
                | ApiError::TooMany(_)
                | ApiError::Gone { .. }
                | ApiError::MethodNotAllowed { .. }
                | ApiError::UnsupportedMediaType(_)
                | ApiError::PayloadTooLarge(_)
                | ApiError::RequestTimeout(_)
                | ApiError::Unavailable(_)
                | ApiError::Full { .. }
                | ApiError::DependencyUnavailable(_)
                | ApiError::Internal(_) => {}
            }
        }
        all
    }

    #[test]
    fn every_code_the_api_answers_is_listed() {
        for error in every_kind() {
            let (_, code, _) = error.parts();
            assert!(CODES.contains(&code), "{code} is not in problem::CODES");
        }
    }
}
