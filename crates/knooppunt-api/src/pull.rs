//! Pull delivery: `POST /v1/subscriptions/{id}/receive`, then `acknowledge`, `release`,
//! `reject` or `renew` the lock tokens it handed out. The subscription's owner (or an
//! administrator) pulls; a push subscription answers 409.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::header::CONTENT_TYPE;
use http::{HeaderName, HeaderValue};
use knooppunt_delivery::{MAX_RECEIVE, MAX_RELEASE_DELAY, MAX_WAIT, Settlement};
use knooppunt_store::parse_iso8601_duration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::JsonBody;
use crate::auth::Caller;
use crate::document::{
    BAD_REQUEST, Document, FORBIDDEN, NOT_FOUND, Operation, Refusal, UNAUTHORIZED, UNAVAILABLE,
    cloud_events, header, path_parameter,
};
use crate::endpoints::Endpoints;
use crate::ids::SubscriptionId;
use crate::input::{self, Body, Field, Params, Problems, duration_at_most, whole_number};
use crate::problem::ApiError;
use knooppunt_services::app::AppState;

/// The lock tokens of a `receive` answer, in the order of its events.
pub(crate) const LOCK_TOKENS: HeaderName = HeaderName::from_static("knooppunt-lock-tokens");
/// How many times each event of a `receive` answer was handed out, in the order of its events.
pub(crate) const DELIVERY_COUNTS: HeaderName = HeaderName::from_static("knooppunt-delivery-counts");

/// The replay that queued each event of a `receive` answer again (`-`: none), in the order
/// of its events; only when one did.
pub(crate) const REPLAYS: HeaderName = HeaderName::from_static("knooppunt-replays");

const DEFAULT_MAX_EVENTS: usize = 10;
const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// The longest `reason` of a `reject`.
const MAX_REASON: usize = 1000;

fn check_access(state: &AppState, caller: &Caller, id: &str) -> Result<(), ApiError> {
    state
        .subscriptions()
        .for_subscriber(&caller.0, id, "receive events")
        .map(|_| ())
        .map_err(ApiError::from)
}

/// `POST /v1/subscriptions/{id}/receive?maxEvents=&maxWait=`: up to `maxEvents` (1 to 100,
/// default 10) events as a CloudEvents JSON batch, each exactly as published, locked to the
/// caller; their lock tokens and delivery counts in headers, in the batch's order. Waits up
/// to `maxWait` (ISO 8601, at most PT60S, default PT30S) while none is due; then `[]`.
pub(crate) async fn receive(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<SubscriptionId>,
    query: Result<Params<ReceiveQuery>, ApiError>,
) -> Result<Response, ApiError> {
    // A stranger learns nothing from the query's problems.
    check_access(&state, &caller, &id)?;
    let Params((max, wait)) = query?;
    let wait = wait.unwrap_or(DEFAULT_WAIT).min(state.longest_wait());
    let received = state
        .subscriptions()
        .receive(&id, max, wait)
        .await
        .map_err(|why| why.about(&id))?;
    let mut response = batch(received.iter().map(|r| r.event.json.as_str()));
    if !received.is_empty() {
        let tokens: Vec<&str> = received.iter().map(|r| r.lock_token.as_str()).collect();
        let counts: Vec<String> = received
            .iter()
            .map(|r| r.delivery_count.to_string())
            .collect();
        let headers = response.headers_mut();
        headers.insert(
            LOCK_TOKENS,
            HeaderValue::try_from(tokens.join(", ")).expect("tokens are digits and dots"),
        );
        headers.insert(
            DELIVERY_COUNTS,
            HeaderValue::try_from(counts.join(", ")).expect("digits"),
        );
        if received.iter().any(|r| r.replay.is_some()) {
            let replays: Vec<&str> = received
                .iter()
                .map(|r| r.replay.as_deref().unwrap_or("-"))
                .collect();
            if let Ok(value) = HeaderValue::try_from(replays.join(", ")) {
                headers.insert(REPLAYS, value);
            }
        }
    }
    Ok(response)
}

/// The query of a receive.
#[derive(Debug, Default, serde::Deserialize, JsonSchema)]
pub(crate) struct ReceiveQuery {
    /// How many events at most (1 to 100, default 10).
    #[serde(default, rename = "maxEvents")]
    #[schemars(with = "u32", extend("format" = "int32", "minimum" = 1, "maximum" = 100))]
    max_events: Field<String>,
    /// ISO 8601 duration to wait while no event is due (PT0S to PT60S, default PT30S; at
    /// most the server's idle_timeout less 5 s). Answers as soon as there are events.
    #[serde(default, rename = "maxWait")]
    #[schemars(example = &"PT30S")]
    max_wait: Field<String>,
}

impl Body for ReceiveQuery {
    const NAME: &'static str = "query";
    type Representation = ();
    /// How many events at most, and how long to wait (when asked).
    type Read = (usize, Option<Duration>);

    fn read(self, problems: &mut Problems) -> Option<Self::Read> {
        let max = whole_number(
            &self.max_events,
            "maxEvents",
            1..=MAX_RECEIVE,
            DEFAULT_MAX_EVENTS,
            problems,
        );
        Some((max, max_wait(&self.max_wait, problems)))
    }
}

/// `maxWait` of a query (ISO 8601, at most PT60S), if given; the caller shortens it to
/// the longest wait this hub allows.
pub(crate) fn max_wait(asked: &Field<String>, problems: &mut Problems) -> Option<Duration> {
    duration_at_most(asked, "maxWait", (MAX_WAIT, "PT60S"), problems)
}

/// A CloudEvents JSON batch of events kept as JSON text, each exactly as it is.
pub(crate) fn batch<'a>(events: impl Iterator<Item = &'a str> + Clone) -> Response {
    let mut body = String::with_capacity(events.clone().map(|e| e.len() + 1).sum::<usize>() + 2);
    body.push('[');
    for (n, event) in events.enumerate() {
        if n > 0 {
            body.push(',');
        }
        body.push_str(event);
    }
    body.push(']');
    (
        [(
            CONTENT_TYPE,
            HeaderValue::from_static("application/cloudevents-batch+json; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}

/// The lock tokens of a settling request: 1 to [`MAX_RECEIVE`] of them.
type LockTokens = Field<Vec<Field<String>>>;

/// What acknowledges or renews the locks of received events.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "LockTokens", extend("additionalProperties" = false))]
pub struct LockTokensIn {
    /// Lock tokens from Knooppunt-Lock-Tokens of receive answers.
    #[schemars(length(min = 1, max = MAX_RECEIVE))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub lock_tokens: LockTokens,
}

/// What releases received events for another consumer, after a delay.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Release", extend("additionalProperties" = false))]
pub struct ReleaseIn {
    /// Lock tokens from Knooppunt-Lock-Tokens of receive answers.
    #[schemars(length(min = 1, max = MAX_RECEIVE))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub lock_tokens: LockTokens,
    /// ISO 8601 duration, PT0S (default) to PT1H.
    #[serde(default)]
    #[schemars(example = &"PT10S")]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub delay: Field<String>,
}

/// What rejects received events: they become dead letters.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Reject", extend("additionalProperties" = false))]
pub struct RejectIn {
    /// Lock tokens from Knooppunt-Lock-Tokens of receive answers.
    #[schemars(length(min = 1, max = MAX_RECEIVE))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub lock_tokens: LockTokens,
    /// Why; kept with the dead letters.
    #[schemars(length(min = 1, max = MAX_REASON))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub reason: Field<String>,
}

/// The `lockTokens` of a settling request: 1 to 100 strings.
fn lock_tokens(tokens: LockTokens, problems: &mut Problems) -> Vec<String> {
    let Some(tokens) = tokens.required(
        "lockTokens",
        "the lock tokens (header Knooppunt-Lock-Tokens of a receive answer)",
        problems,
    ) else {
        return Vec::new();
    };
    if !(1..=MAX_RECEIVE).contains(&tokens.len()) {
        problems.add(
            "lockTokens",
            format!("must hold 1 to {MAX_RECEIVE} lock tokens"),
        );
        return Vec::new();
    }
    let mut out = Vec::with_capacity(tokens.len());
    for (n, token) in tokens.into_iter().enumerate() {
        match token {
            Field::Given(text) => out.push(text),
            _ => problems.add(
                format!("lockTokens[{n}]"),
                "must be a string: a lock token from a receive answer",
            ),
        }
    }
    out
}

/// Which operation a settling request is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Settling {
    Acknowledge,
    Release,
    Reject,
    Renew,
}

impl Settling {
    /// The schema of its body.
    fn schema(self, doc: &mut Document) -> Value {
        match self {
            Settling::Acknowledge | Settling::Renew => doc.input::<LockTokensIn>(),
            Settling::Release => doc.input::<ReleaseIn>(),
            Settling::Reject => doc.input::<RejectIn>(),
        }
    }
}

/// What a settling request did with each lock token.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "Settlements")]
struct SettledOut {
    succeeded: Vec<String>,
    failed: Vec<UnsettledOut>,
}

/// A lock token that was not settled, and why.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Unsettled")]
struct UnsettledOut {
    lock_token: String,
    #[schemars(extend("enum" = ["malformed", "expired", "unknown"]))]
    error: &'static str,
    detail: &'static str,
}

/// The settlement a request asks for, and its lock tokens.
fn read_settlement(
    operation: Settling,
    body: &Value,
    problems: &mut Problems,
) -> Option<(Settlement, Vec<String>)> {
    Some(match operation {
        Settling::Acknowledge | Settling::Renew => {
            let read: LockTokensIn = input::typed(body, "request", problems)?;
            let settlement = match operation {
                Settling::Renew => Settlement::Renew,
                _ => Settlement::Acknowledge,
            };
            (settlement, lock_tokens(read.lock_tokens, problems))
        }
        Settling::Release => {
            let read: ReleaseIn = input::typed(body, "request", problems)?;
            let what = "an ISO 8601 duration such as PT10S";
            let delay = match read.delay.optional("delay", what, problems) {
                None => Duration::ZERO,
                Some(text) => match parse_iso8601_duration(&text) {
                    Ok(delay) if delay <= MAX_RELEASE_DELAY => delay,
                    Ok(_) => {
                        problems.add("delay", "must be at most PT1H");
                        Duration::ZERO
                    }
                    Err(why) => {
                        problems.add("delay", why);
                        Duration::ZERO
                    }
                },
            };
            (
                Settlement::Release { delay },
                lock_tokens(read.lock_tokens, problems),
            )
        }
        Settling::Reject => {
            let read: RejectIn = input::typed(body, "request", problems)?;
            let reason = match read.reason {
                Field::Given(text)
                    if !text.trim().is_empty() && text.chars().count() <= MAX_REASON =>
                {
                    text
                }
                _ => {
                    problems.add(
                        "reason",
                        format!(
                            "is required: why the events cannot be processed (1 to {MAX_REASON} \
                             characters); the dead letters keep it"
                        ),
                    );
                    String::new()
                }
            };
            (
                Settlement::Reject { reason },
                lock_tokens(read.lock_tokens, problems),
            )
        }
    })
}

/// `POST /v1/subscriptions/{id}/{acknowledge|release|reject|renew}` with `lockTokens`: 200
/// with the tokens that `succeeded` and those that `failed`, each with why (`malformed`,
/// `expired`, `unknown`).
pub(crate) async fn settle(
    operation: Settling,
    state: Arc<AppState>,
    caller: Caller,
    id: SubscriptionId,
    body: Value,
) -> Result<Response, ApiError> {
    check_access(&state, &caller, &id)?;
    let mut problems = Problems::default();
    let read = read_settlement(operation, &body, &mut problems);
    let (Some((settlement, tokens)), true) = (read, problems.is_empty()) else {
        return Err(ApiError::invalid(
            "the request has problems; see invalidParams",
            problems.into_vec(),
        ));
    };
    let results = state
        .subscriptions()
        .settle(&id, &tokens, &settlement)
        .await
        .map_err(|why| why.about(&id))?;
    let mut succeeded = Vec::new();
    let mut failed = Vec::new();
    for (token, result) in tokens.iter().zip(results) {
        match result {
            Ok(()) => succeeded.push(token.clone()),
            Err(problem) => failed.push(UnsettledOut {
                lock_token: token.clone(),
                error: problem.as_str(),
                detail: problem.detail(),
            }),
        }
    }
    Ok(Json(SettledOut { succeeded, failed }).into_response())
}

macro_rules! settle_handler {
    ($name:ident, $operation:expr) => {
        pub(crate) async fn $name(
            State(state): State<Arc<AppState>>,
            caller: Caller,
            Path(id): Path<SubscriptionId>,
            JsonBody(body): JsonBody,
        ) -> Result<Response, ApiError> {
            settle($operation, state, caller, id, body).await
        }
    };
}

settle_handler!(acknowledge, Settling::Acknowledge);
settle_handler!(release, Settling::Release);
settle_handler!(reject, Settling::Reject);
settle_handler!(renew, Settling::Renew);

/// The pull operations: receive, and settle what was received.
pub(crate) fn describe(doc: &mut Endpoints) {
    const TAG: &str = "pull";
    const CONFLICT: Refusal = (
        "409",
        "The subscription is a push subscription (its events go to its sink), or disabled.",
    );
    let refusals = [
        BAD_REQUEST,
        UNAUTHORIZED,
        FORBIDDEN,
        NOT_FOUND,
        CONFLICT,
        UNAVAILABLE,
    ];
    let id = json!([path_parameter(
        "id",
        "The id the hub assigned to the subscription."
    )]);
    let list_header = |description: &str| {
        let mut header = header(description);
        header["example"] = json!("1207.88, 1208.89");
        header
    };
    let receive = Operation::new(
        "receiveEvents",
        TAG,
        "Receive events of a pull subscription",
    )
    .description(
        "A pull subscription is one created with `config.delivery` `pull`: it has no sink \
             of its own (the hub fills in this receive URL as `sink`) and needs no handshake. \
             Its owner (or an administrator) receives here.",
    )
    .query::<ReceiveQuery>()
    .answer_as(
        "200",
        "Up to maxEvents due events in acceptance order (an ordered subscription: its \
             oldest alone, and only once the one before was settled), each exactly as \
             published, as a CloudEvents JSON batch; `[]` when none came within maxWait. Each \
             is locked to the caller for the subscription's lockDuration: settle it with its \
             lock token before then, or it is handed out again (that counts as an attempt; \
             past maxAttempts or ttl the event becomes a dead letter).",
        "application/cloudevents-batch+json",
        cloud_events(),
    )
    .header(
        "200",
        "Knooppunt-Lock-Tokens",
        list_header(
            "The lock token of each event, in the batch's order, separated by `, `. Absent \
                 when the batch is empty.",
        ),
    )
    .header(
        "200",
        "Knooppunt-Delivery-Counts",
        list_header(
            "How many times each event was handed out (this time included), in the batch's \
                 order.",
        ),
    )
    .refusals(&refusals);
    doc.post("/subscriptions/{id}/receive", self::receive, &id, receive);
    let settled = doc.schema::<SettledOut>();
    for (settling, operation_id, path, summary, description) in [
        (
            Settling::Acknowledge,
            "acknowledgeEvents",
            "/subscriptions/{id}/acknowledge",
            "Acknowledge received events",
            "The events were processed: they are delivered (and leave a receipt).",
        ),
        (
            Settling::Release,
            "releaseEvents",
            "/subscriptions/{id}/release",
            "Release received events",
            "Give the events back: they are handed out again after `delay`.",
        ),
        (
            Settling::Reject,
            "rejectEvents",
            "/subscriptions/{id}/reject",
            "Reject received events",
            "The events cannot be processed: they become dead letters with this reason.",
        ),
        (
            Settling::Renew,
            "renewLocks",
            "/subscriptions/{id}/renew",
            "Renew the locks of received events",
            "The consumer needs longer: each lock lasts another lockDuration from now.",
        ),
    ] {
        let operation = Operation::new(operation_id, TAG, summary)
            .description(description)
            .body(settling.schema(doc))
            .answer(
                "200",
                "Per lock token whether it was settled. A token fails as `malformed` (not a \
                 lock token), `expired` (its lock ran out and the event was handed out again: \
                 it comes again under a new token) or `unknown` (no pending event under it: \
                 settled already).",
                Some(settled.clone()),
            )
            .refusals(&refusals);
        match settling {
            Settling::Acknowledge => doc.post(path, self::acknowledge, &id, operation),
            Settling::Release => doc.post(path, self::release, &id, operation),
            Settling::Reject => doc.post(path, self::reject, &id, operation),
            Settling::Renew => doc.post(path, self::renew, &id, operation),
        }
    }
}
