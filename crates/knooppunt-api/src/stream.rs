//! `GET /v1/subscriptions/{id}/events`: a subscription's retained events in acceptance
//! order after a cursor, for consumers that keep their own position. No locks: reading
//! changes nothing.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
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
use crate::input::{Body, Field, Params, Problems, whole_number};
use crate::problem::ApiError;
use knooppunt_services::app::AppState;
use schemars::JsonSchema;

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
    query: Result<Params<StreamQuery>, ApiError>,
) -> Result<Response, ApiError> {
    // A stranger learns nothing from the query's problems.
    state
        .subscriptions()
        .for_subscriber(&caller.0, &id, "read events")
        .map_err(ApiError::from)?;
    let Params((after, limit, wait)) = query?;
    let wait = wait.unwrap_or(Duration::ZERO).min(state.longest_wait());
    let page = state
        .history()
        .read(&id, after, limit, wait)
        .await
        .map_err(|why| why.about(&id, after))?;
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

/// The query of the event stream.
#[derive(Debug, Default, serde::Deserialize, JsonSchema)]
pub(crate) struct StreamQuery {
    /// The cursor (Knooppunt-Cursor of an earlier answer) to read on from; left out, the
    /// oldest retained event.
    #[serde(default)]
    after: Field<String>,
    /// How many events at most (1 to 1000, default 100).
    #[serde(default)]
    #[schemars(with = "u32", extend("format" = "int32", "minimum" = 1, "maximum" = 1000))]
    limit: Field<String>,
    /// ISO 8601 duration to wait when caught up (PT0S, the default, to PT60S).
    #[serde(default, rename = "maxWait")]
    #[schemars(example = &"PT30S")]
    max_wait: Field<String>,
}

impl Body for StreamQuery {
    const NAME: &'static str = "query";
    type Representation = ();
    /// The cursor, how many events at most, how long to wait (when asked).
    type Read = (Option<u64>, usize, Option<Duration>);

    fn read(self, problems: &mut Problems) -> Option<Self::Read> {
        let after = match self.after.given().map(String::as_str) {
            None | Some("") => None,
            Some(text) => match text.parse::<u64>() {
                Ok(after) => Some(after),
                Err(_) => {
                    problems.add(
                        "after",
                        "is not a cursor of this hub: use the Knooppunt-Cursor of an earlier \
                         answer, or leave it out to start at the oldest retained event",
                    );
                    None
                }
            },
        };
        let limit = whole_number(&self.limit, "limit", 1..=MAX_LIMIT, DEFAULT_LIMIT, problems);
        Some((
            after,
            limit,
            crate::pull::max_wait(&self.max_wait, problems),
        ))
    }
}

/// The event stream's operation.
pub(crate) fn describe(doc: &mut Endpoints) {
    let stream = Operation::new(
        "readEventStream",
        "pull",
        "Read a subscription's retained events after a cursor",
    )
    .query::<StreamQuery>()
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
    .header(
        "200",
        "Knooppunt-Cursor",
        header("The cursor to read on from."),
    )
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
        (
            "409",
            "The subscription is suspended (the detail says why).",
        ),
        UNAVAILABLE,
    ]);
    let id = json!([path_parameter(
        "id",
        "The id the hub assigned to the subscription."
    )]);
    doc.get("/subscriptions/{id}/events", self::read, &id, stream);
}
