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

use super::auth::Caller;
use super::problem::{ApiError, InvalidParam};
use super::subscriptions::{not_found, unseen};
use crate::app::AppState;
use crate::history::HistoryRefused;

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
    Path(id): Path<String>,
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
    let wait = super::pull::max_wait(&state, &query, Duration::ZERO, &mut problems);
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
        super::BASE_PATH,
        page.next
    );
    let mut response = super::pull::batch(page.events.iter().map(|e| e.json.as_str()));
    let headers = response.headers_mut();
    headers.insert(CURSOR, HeaderValue::from(page.next));
    if let Ok(link) = HeaderValue::try_from(next) {
        headers.insert(LINK, link);
    }
    Ok(response)
}
