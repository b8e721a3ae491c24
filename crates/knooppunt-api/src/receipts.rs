//! Delivery receipts over HTTP: `GET /v1/events/{sequence}/receipts` ("who received this
//! event": an admin or the owner of a catalog entry covering it sees every subscription,
//! anyone else only its own) and `GET /v1/subscriptions/{id}/receipts` ("what did I
//! receive", in the order they were delivered, in pages).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use knooppunt_event::format::json::Identity;
use knooppunt_event::timestamp::utc_timestamp;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use crate::auth::Caller;
use crate::document::{
    BAD_REQUEST, NOT_FOUND, Operation, UNAUTHORIZED, link_header, path_parameter,
};
use crate::endpoints::Endpoints;
use crate::ids::SubscriptionId;
use crate::input::Params;
use crate::page::{Page, PageIn};
use crate::problem::{ApiError, InvalidParam};
use knooppunt_services::app::AppState;

/// Who received an event: its receipts, with the event's `source`, `id` and `type` while
/// it is retained.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[schemars(rename = "EventReceipts")]
pub struct EventReceiptsOut {
    pub sequence: u64,
    #[serde(flatten)]
    pub event: Option<EventOut>,
    pub receipts: Vec<ReceiptOut>,
}

/// The `source`, `id` and `type` of a retained event.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
pub struct EventOut {
    /// While the event is retained.
    pub source: String,
    pub id: String,
    #[serde(rename = "type")]
    pub event_type: String,
}

/// One subscription's receipt of an event.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "DeliveryReceipt")]
pub struct ReceiptOut {
    pub subscription: String,
    /// The subscription's owner (also once the subscription is deleted).
    pub subscriber: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub delivered_time: String,
}

/// What a subscription took: an event, when, and what it was while it is retained.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SubscriptionReceipt")]
pub struct TakenOut {
    pub sequence: u64,
    #[schemars(extend("format" = "date-time"))]
    pub delivered_time: String,
    #[serde(flatten)]
    pub event: Option<EventOut>,
}

/// The `source`, `id` and `type` of a retained event.
fn identity(json: &str) -> Option<EventOut> {
    Identity::of_json(json).map(|e| EventOut {
        source: e.source,
        id: e.id,
        event_type: e.ty,
    })
}

fn sequence(text: &str) -> Result<u64, ApiError> {
    text.parse().map_err(|_| {
        ApiError::invalid(
            "the event is named by its sequence number",
            vec![InvalidParam::new(
                "sequence",
                "must be the `sequence` the hub gave the event when it accepted it",
            )],
        )
    })
}

/// `GET /v1/events/{sequence}/receipts`: 404 unless the caller may see who took the event
/// (`AppState::receipts_of_event` says who may).
pub(crate) async fn of_event(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(seq): Path<String>,
) -> Result<Response, ApiError> {
    let seq = sequence(&seq)?;
    let found = state
        .receipts_of_event(&caller.0, seq)
        .await?
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "there is no event {seq} whose receipts you may read: its publisher, the owner \
                 of its catalog entry, an admin and the subscribers that received it may"
            ))
        })?;
    let body = EventReceiptsOut {
        sequence: found.seq,
        event: found.identity.map(|(source, id, event_type)| EventOut {
            source,
            id,
            event_type,
        }),
        receipts: found
            .receipts
            .iter()
            .map(|(receipt, subscriber)| ReceiptOut {
                subscription: receipt.subscription.clone(),
                subscriber: subscriber.clone(),
                delivered_time: utc_timestamp(receipt.delivered_at),
            })
            .collect(),
    };
    Ok(Json(body).into_response())
}

/// `GET /v1/subscriptions/{id}/receipts`.
pub(crate) async fn of_subscription(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<SubscriptionId>,
    Params(Page { size, cursor }): Params<PageIn>,
) -> Result<Response, ApiError> {
    if cursor
        .as_deref()
        .is_some_and(|c| c.len() > 64 || !c.bytes().all(|b| b.is_ascii_hexdigit() || b == b'.'))
    {
        return Err(ApiError::invalid(
            "the query is invalid",
            vec![InvalidParam::new(
                "cursor",
                "is not a cursor of this list: use the link of the previous page",
            )],
        ));
    }
    let (receipts, next) = match state
        .receipts_of_subscription(&caller.0, &id, cursor.as_deref(), size)
        .await
    {
        Ok(Some(found)) => found,
        Ok(None) => {
            return Err(ApiError::NotFound(format!(
                "subscription `{id}` does not exist or is not yours"
            )));
        }
        Err(knooppunt_store::StoreError::Corrupt(_)) => {
            return Err(ApiError::invalid(
                "the query is invalid",
                vec![InvalidParam::new(
                    "cursor",
                    "is not a cursor of this list: use the link of the previous page",
                )],
            ));
        }
        Err(error) => return Err(error.into()),
    };
    let mut body = Vec::with_capacity(receipts.len());
    for receipt in &receipts {
        body.push(TakenOut {
            sequence: receipt.seq,
            delivered_time: utc_timestamp(receipt.delivered_at),
            event: state
                .event(receipt.seq)
                .await?
                .and_then(|e| identity(&e.json)),
        });
    }
    Ok(crate::page::answer(
        body,
        &format!("/subscriptions/{id}/receipts"),
        size,
        next.as_deref(),
    ))
}

/// The receipts' operations.
pub(crate) fn describe(doc: &mut Endpoints) {
    const TAG: &str = "audit";
    let of_event = Operation::new(
        "listEventReceipts",
        TAG,
        "Who received an event (by the `sequence` its publish answer gave): an admin, the owner \
         of a catalog entry covering it and the organisation in whose source space it is (its \
         publisher) see every subscription that took it and when; a subscriber that received \
         it only its own; anyone else gets 404, as for an event that does not exist.",
    )
    .answer(
        "200",
        "The event's receipts.",
        Some(doc.schema::<EventReceiptsOut>()),
    )
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        (
            "404",
            "No such event whose receipts the principal may read.",
        ),
    ]);
    let sequence = json!([{"name": "sequence", "in": "path", "required": true,
                           "description": "The sequence number the hub gave the event.",
                           "schema": {"type": "integer", "format": "int64"}}]);
    doc.get(
        "/events/{sequence}/receipts",
        self::of_event,
        &sequence,
        of_event,
    );
    let of_subscription = Operation::new(
        "listSubscriptionReceipts",
        TAG,
        "What a subscription received: the events its sink took (2xx), in the order they were \
         delivered.",
    )
    .query::<PageIn>()
    .answer(
        "200",
        "A page of receipts. A `Link` header with rel=\"next\" points to the next page.",
        Some(doc.list_of::<TakenOut>()),
    )
    .header("200", "Link", link_header())
    .refusals(&[BAD_REQUEST, UNAUTHORIZED, NOT_FOUND]);
    let id = json!([path_parameter("id", "The subscription's id.")]);
    doc.get(
        "/subscriptions/{id}/receipts",
        self::of_subscription,
        &id,
        of_subscription,
    );
}
