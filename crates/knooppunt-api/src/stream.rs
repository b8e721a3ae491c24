//! `GET /v1/subscriptions/{id}/events`: a subscription's retained events in acceptance
//! order after a cursor, for consumers that keep their own position. No locks: reading
//! changes nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use http::header::LINK;
use http::{HeaderName, HeaderValue};

use serde_json::json;

use crate::auth::Caller;
use crate::document::{
    BAD_REQUEST, FORBIDDEN, NOT_FOUND, Operation, UNAUTHORIZED, UNAVAILABLE, cloud_events, header,
    path_parameter,
};
use crate::endpoints::Endpoints;
use crate::ids::SubscriptionId;
use crate::problem::{ApiError, InvalidParam};
use crate::subscriptions::{not_found, unseen};
use knooppunt_services::app::AppState;
use knooppunt_services::history::HistoryRefused;

/// The position after the events of an answer, to read on from.
pub(crate) const CURSOR: HeaderName = HeaderName::from_static("knooppunt-cursor");

const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;

/// `?after=<cursor>&limit=<1..1000>&maxWait=<PT0S..PT60S>`: a CloudEvents JSON batch of the
/// subscription's events after the cursor (from the oldest retained without one), with the
/// cursor to read on from in `Knooppunt-Cursor` and a `Link: rel="next"`. A cursor whose
/// events are no longer all retained answers 410 with `oldestCursor`.
pub(crate) async fn read(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<SubscriptionId>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    state
        .subscriptions
        .for_subscriber(&caller.0, &id, "read events")
        .map_err(|why| unseen(why, &id))?;
    let mut problems = Vec::new();
    for name in query.keys() {
        if !["after", "limit", "maxWait"].contains(&name.as_str()) {
            problems.push(InvalidParam::new(
                name.as_str(),
                "unknown query parameter; the parameters are after, limit and maxWait",
            ));
        }
    }
    let after = match query.get("after").map(String::as_str) {
        None | Some("") => None,
        Some(text) => match text.parse::<u64>() {
            Ok(after) => Some(after),
            Err(_) => {
                problems.push(InvalidParam::new(
                    "after",
                    "is not a cursor of this hub: use the Knooppunt-Cursor of an earlier answer, or \
                     leave it out to start at the oldest retained event",
                ));
                None
            }
        },
    };
    let limit = match query.get("limit").map(|v| v.parse::<usize>()) {
        None => DEFAULT_LIMIT,
        Some(Ok(n)) if (1..=MAX_LIMIT).contains(&n) => n,
        Some(_) => {
            problems.push(InvalidParam::new(
                "limit",
                format!("must be a whole number from 1 to {MAX_LIMIT}"),
            ));
            1
        }
    };
    let wait = crate::pull::max_wait(&state, &query, Duration::ZERO, &mut problems);
    if !problems.is_empty() {
        return Err(ApiError::invalid("the query is invalid", problems));
    }
    let page = state
        .history
        .read(&id, after, limit, wait)
        .await
        .map_err(|why| match why {
            HistoryRefused::NoSubscription => not_found(&id),
            HistoryRefused::Expired { oldest } => ApiError::Gone {
                detail: format!(
                    "events after cursor {} are no longer all retained (the retention removed \
                     events up to {oldest}): you may have missed events; read on from \
                     oldestCursor, or ask for a replay of what you need",
                    after.unwrap_or(0)
                ),
                oldest_cursor: oldest.to_string(),
            },
            HistoryRefused::Suspended(why) => {
                ApiError::Conflict(format!("subscription `{id}` is suspended: {why}"))
            }
            HistoryRefused::Store(error) => error.into(),
        })?;
    let next = format!(
        "<{}/subscriptions/{id}/events?after={}&limit={limit}>; rel=\"next\"",
        crate::BASE_PATH,
        page.next
    );
    let mut response = crate::pull::batch(page.events.iter().map(|e| e.json.as_str()));
    let headers = response.headers_mut();
    headers.insert(CURSOR, HeaderValue::from(page.next));
    if let Ok(link) = HeaderValue::try_from(next) {
        headers.insert(LINK, link);
    }
    Ok(response)
}

/// The event stream's operation.
pub(crate) fn describe(doc: &mut Endpoints) {
    let stream = Operation::new(
        "readEventStream",
        "pull",
        "Read a subscription's retained events after a cursor",
    )
    .parameters(json!([
        {"name": "after", "in": "query", "required": false,
         "description": "The cursor (Knooppunt-Cursor of an earlier answer) to read on from; left out, \
                         the oldest retained event.",
         "schema": {"type": "string"}},
        {"name": "limit", "in": "query", "required": false,
         "description": format!("How many events at most (1 to {MAX_LIMIT}, default {DEFAULT_LIMIT})."),
         "schema": {"type": "integer", "format": "int32", "minimum": 1, "maximum": MAX_LIMIT}},
        {"name": "maxWait", "in": "query", "required": false,
         "description": "ISO 8601 duration to wait when caught up (PT0S, the default, to PT60S).",
         "schema": {"type": "string", "example": "PT30S"}}
    ]))
    .answer_as(
        "200",
        "The subscription's retained events after the cursor, in acceptance order, each \
         exactly as published, as a CloudEvents JSON batch: those its filters match and its \
         grants admit as they are now. Reading locks and changes nothing. One answer looks at \
         up to 5,000 events, so a page can be short or empty while more follow: read on from \
         Knooppunt-Cursor until a page is empty and the cursor stays where it was.",
        "application/cloudevents-batch+json",
        cloud_events(),
    )
    .header("200", "Knooppunt-Cursor", header("The cursor to read on from."))
    .header(
        "200",
        "Link",
        header("RFC 8288 link to the next page (rel=\"next\")."),
    )
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        FORBIDDEN,
        NOT_FOUND,
        (
            "410",
            "Events after the cursor are no longer all retained: events may have been missed. \
             `oldestCursor` is the oldest cursor from which nothing is missing.",
        ),
        ("409", "The subscription is suspended (the detail says why)."),
        UNAVAILABLE,
    ]);
    let id = json!([path_parameter(
        "id",
        "The id the hub assigned to the subscription."
    )]);
    doc.get("/subscriptions/{id}/events", self::read, &id, stream);
}
