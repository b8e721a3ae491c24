//! `/v1/subscriptions/{id}/dead-letters`: deliveries the hub gave up on, with the event and
//! what happened, for the subscription's owner or an administrator to inspect, redeliver or
//! remove.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_store::DeadLetter;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::auth::Caller;
use crate::document::{
    BAD_REQUEST, FORBIDDEN, NOT_FOUND, Operation, Refusal, UNAUTHORIZED, UNAVAILABLE, link_header,
    path_parameter,
};
use crate::endpoints::Endpoints;
use crate::ids::{DeadLetterId, SubscriptionId};
use crate::input::Params;
use crate::page::{Page, PageIn, Sequence};
use crate::problem::ApiError;
use crate::request::RequestAudit;
use knooppunt_services::app::AppState;
use knooppunt_services::use_case;

fn dead_letter_id(text: &str) -> Result<u64, ApiError> {
    text.parse()
        .map_err(|_| ApiError::NotFound(format!("there is no dead letter `{text}`")))
}

/// A dead letter as the API shows it; with the event itself (as accepted) in a read of
/// one dead letter.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    rename = "DeadLetter",
    description = "A delivery the hub gave up on, with what happened."
)]
pub struct DeadLetterOut {
    /// The dead letter's id (the event's sequence number).
    pub id: String,
    pub subscription: String,
    pub sequence: u64,
    #[schemars(example = "maxAttempts (30) exhausted")]
    pub reason: String,
    pub attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub first_attempt_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub last_attempt_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status_code: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub dead_letter_time: String,
    /// The event as accepted (when reading one dead letter).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<Map<String, Value>>")]
    pub event: Option<Value>,
}

/// A dead letter put back into its subscription's queue.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "Redelivery")]
struct RedeliveryOut {
    subscription: String,
    sequence: u64,
    #[schemars(extend("enum" = ["queued"]))]
    redelivery: &'static str,
}

fn representation(dead: &DeadLetter, event: Option<Value>) -> DeadLetterOut {
    DeadLetterOut {
        id: dead.seq.to_string(),
        subscription: dead.subscription.clone(),
        sequence: dead.seq,
        reason: dead.reason.clone(),
        attempts: dead.attempts,
        first_attempt_time: dead.first_attempt_at.map(utc_timestamp),
        last_attempt_time: dead.last_attempt_at.map(utc_timestamp),
        last_status_code: dead.last_status,
        last_error: dead.last_error.clone(),
        dead_letter_time: utc_timestamp(dead.dead_at),
        event,
    }
}

/// `GET /v1/subscriptions/{id}/dead-letters`, oldest first, paginated like the
/// subscriptions (`pageSize`, `cursor`, `Link: rel="next"`).
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<SubscriptionId>,
    page: Result<Params<PageIn<Sequence>>, ApiError>,
) -> Result<Response, ApiError> {
    // Who may is the service's rule: a stranger learns nothing from the query's problems.
    let Page {
        size: page_size,
        cursor,
    } = match page {
        Ok(Params(page)) => page,
        Err(problem) => {
            use_case::dead_letters::check_access(&state, &caller.0, &id)?;
            return Err(problem);
        }
    };
    let cursor = cursor.map(|Sequence(seq)| seq);
    let mut page =
        use_case::dead_letters::list(&state, &caller.0, &id, cursor, page_size + 1).await?;
    let more = page.len() > page_size;
    page.truncate(page_size);
    let body: Vec<DeadLetterOut> = page.iter().map(|d| representation(d, None)).collect();
    let next = page
        .last()
        .filter(|_| more)
        .map(|last| last.seq.to_string());
    let path = format!(
        "/subscriptions/{}/dead-letters",
        knooppunt_event::binding::percent::encode_component(&id)
    );
    Ok(crate::page::answer(body, &path, page_size, next.as_deref()))
}

/// `GET /v1/subscriptions/{id}/dead-letters/{deadLetterId}`: with the event as accepted.
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((id, dead_letter)): Path<(SubscriptionId, DeadLetterId)>,
) -> Result<Response, ApiError> {
    let seq = dead_letter_id(&dead_letter)?;
    let (dead, event) = use_case::dead_letters::get(&state, &caller.0, &id, seq).await?;
    let event = event.and_then(|stored| serde_json::from_str::<Value>(&stored.json).ok());
    Ok(Json(representation(&dead, event)).into_response())
}

/// `POST .../{deadLetterId}/redeliver`: back into the queue with fresh attempts.
pub(crate) async fn redeliver(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path((id, dead_letter)): Path<(SubscriptionId, DeadLetterId)>,
) -> Result<Response, ApiError> {
    let seq = dead_letter_id(&dead_letter)?;
    use_case::dead_letters::redeliver(&state, &audit.of(&caller), &caller.0, &id, seq).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(RedeliveryOut {
            subscription: id.into_string(),
            sequence: seq,
            redelivery: "queued",
        }),
    )
        .into_response())
}

/// `DELETE .../{deadLetterId}`.
pub(crate) async fn delete(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path((id, dead_letter)): Path<(SubscriptionId, DeadLetterId)>,
) -> Result<Response, ApiError> {
    let seq = dead_letter_id(&dead_letter)?;
    use_case::dead_letters::delete(&state, &audit.of(&caller), &caller.0, &id, seq).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The dead letters' operations.
pub(crate) fn describe(doc: &mut Endpoints) {
    const TAG: &str = "dead letters";
    const NO_DEAD_LETTER: Refusal = (
        "404",
        "No such dead letter (or subscription) is visible to the principal.",
    );
    let dead_letter = doc.schema::<DeadLetterOut>();
    let subscription = json!([path_parameter(
        "id",
        "The id the hub assigned to the subscription."
    )]);
    let one = json!([
        path_parameter("id", "The id the hub assigned to the subscription."),
        path_parameter(
            "deadLetterId",
            "The dead letter's id (the event's sequence number)."
        )
    ]);
    let list = Operation::new(
        "listDeadLetters",
        TAG,
        "List a subscription's dead letters, oldest first (owner or admin).",
    )
    .query::<PageIn<Sequence>>()
    .answer(
        "200",
        "A page of dead letters. A `Link` header with rel=\"next\" points to the next page.",
        Some(doc.list_of::<DeadLetterOut>()),
    )
    .header("200", "Link", link_header())
    .refusals(&[BAD_REQUEST, UNAUTHORIZED, FORBIDDEN, NOT_FOUND]);
    doc.get(
        "/subscriptions/{id}/dead-letters",
        self::list,
        &subscription,
        list,
    );
    let read = Operation::new(
        "getDeadLetter",
        TAG,
        "Read a dead letter with its event as it was accepted.",
    )
    .answer("200", "The dead letter and its event.", Some(dead_letter))
    .refusals(&[BAD_REQUEST, UNAUTHORIZED, FORBIDDEN, NO_DEAD_LETTER]);
    doc.get(
        "/subscriptions/{id}/dead-letters/{deadLetterId}",
        self::get,
        &one,
        read,
    );
    let delete = Operation::new("deleteDeadLetter", TAG, "Remove a dead letter for good.")
        .answer("204", "Deleted.", None)
        .refusals(&[
            BAD_REQUEST,
            UNAUTHORIZED,
            FORBIDDEN,
            NO_DEAD_LETTER,
            UNAVAILABLE,
        ]);
    doc.delete(
        "/subscriptions/{id}/dead-letters/{deadLetterId}",
        self::delete,
        &one,
        delete,
    );
    let redeliver = Operation::new(
        "redeliverDeadLetter",
        TAG,
        "Put a dead letter back into its subscription's queue with fresh attempts.",
    )
    .answer(
        "202",
        "Queued for delivery.",
        Some(doc.schema::<RedeliveryOut>()),
    )
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        FORBIDDEN,
        NO_DEAD_LETTER,
        (
            "409",
            "The subscription is disabled (its sink answered 410); give it a new sink first.",
        ),
        UNAVAILABLE,
    ]);
    doc.post(
        "/subscriptions/{id}/dead-letters/{deadLetterId}/redeliver",
        self::redeliver,
        &one,
        redeliver,
    );
}
