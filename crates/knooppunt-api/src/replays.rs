//! `/v1/subscriptions/{id}/replays`: a window of a subscription's retained events queued for
//! it once more (push or pull), as a job with a state, progress and cancel.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::header::LOCATION;
use http::{HeaderValue, StatusCode};
use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_store::Replay;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use crate::BASE_PATH;
use crate::auth::Caller;
use crate::document::{
    BAD_REQUEST, FORBIDDEN, NOT_FOUND, Operation, Refusal, UNAUTHORIZED, UNAVAILABLE, header,
    path_parameter,
};
use crate::endpoints::Endpoints;
use crate::ids::{ReplayId, SubscriptionId};
use crate::input::{Body, Field, Input, Problems, Time};
use crate::problem::ApiError;
use crate::request::RequestAudit;
use knooppunt_services::app::AppState;

use knooppunt_services::use_case;

/// A replay: a window of a subscription's retained events queued for it again.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Replay")]
pub struct ReplayOut {
    pub id: String,
    pub subscription: String,
    #[schemars(extend("enum" = ["running", "completed", "cancelled", "failed"]))]
    pub state: std::borrow::Cow<'static, str>,
    #[schemars(extend("format" = "date-time"))]
    pub from: String,
    #[schemars(extend("format" = "date-time"))]
    pub until: String,
    /// Events of the window handed to the queue so far.
    pub events_queued: u64,
    /// When the last queued event was accepted.
    #[schemars(extend("format" = "date-time"))]
    pub last_event_time: Option<String>,
    pub requested_by: String,
    #[schemars(extend("format" = "date-time"))]
    pub created_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub finished_time: Option<String>,
    /// Why a failed replay failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl From<&Replay> for ReplayOut {
    fn from(replay: &Replay) -> Self {
        ReplayOut {
            id: replay.id.clone(),
            subscription: replay.subscription.clone(),
            state: replay.state.as_str().into(),
            from: utc_timestamp(replay.from_ms),
            until: utc_timestamp(replay.until_ms),
            events_queued: replay.queued,
            last_event_time: replay.last_event_at.map(utc_timestamp),
            requested_by: replay.requested_by.clone(),
            created_time: utc_timestamp(replay.created_at),
            finished_time: replay.finished_at.map(utc_timestamp),
            error: replay.error.clone(),
        }
    }
}

/// A replay as the API shows it, as JSON (the audit trail's details).
/// What a client sends to start a replay: the window of acceptance times.
#[derive(Debug, Default, serde::Deserialize, serde::Serialize, JsonSchema)]
#[schemars(rename = "ReplayRequest", extend("additionalProperties" = false))]
pub struct ReplayIn {
    /// The window's start: events accepted at or after it.
    #[schemars(with = "String", extend("format" = "date-time"))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub from: Field<Time>,
    /// The window's end (inclusive); default and at most: now.
    #[serde(default)]
    #[schemars(with = "String", extend("format" = "date-time"))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub until: Field<Time>,
}

const A_TIME: &str = "an RFC 3339 time such as 2026-11-20T08:00:00Z";

impl Body for ReplayIn {
    const NAME: &'static str = "replay";
    type Representation = ();
    /// The window: from, and until if given (milliseconds since the Unix epoch).
    type Read = (u64, Option<u64>);

    fn read(self, problems: &mut Problems) -> Option<Self::Read> {
        let from = self.from.required("from", A_TIME, problems);
        let until = self.until.optional("until", A_TIME, problems);
        Some((from?.0, until.map(|t| t.0)))
    }
}

/// `POST /v1/subscriptions/{id}/replays` with `from` (required) and `until` (default: now):
/// 202 with the job.
pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<SubscriptionId>,
    Input(window): Input<ReplayIn>,
) -> Result<Response, ApiError> {
    let replay = use_case::replays::start(
        &state,
        &audit.of(&caller),
        &caller.0,
        &id,
        window.0,
        window.1,
    )
    .await?;
    let location = HeaderValue::try_from(format!(
        "{BASE_PATH}/subscriptions/{id}/replays/{}",
        replay.id
    ))
    .expect("ids are header-safe");
    Ok((
        StatusCode::ACCEPTED,
        [(LOCATION, location)],
        Json(ReplayOut::from(&replay)),
    )
        .into_response())
}

/// `GET /v1/subscriptions/{id}/replays`: the newest 100, newest first.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<SubscriptionId>,
) -> Result<Response, ApiError> {
    let replays = use_case::replays::list(&state, &caller.0, &id).await?;
    let body: Vec<ReplayOut> = replays.iter().map(ReplayOut::from).collect();
    Ok(Json(body).into_response())
}

fn missing(id: &str, replay: &str) -> ApiError {
    ApiError::NotFound(format!("subscription `{id}` has no replay `{replay}`"))
}

/// `GET /v1/subscriptions/{id}/replays/{replay}`.
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((id, replay)): Path<(SubscriptionId, ReplayId)>,
) -> Result<Response, ApiError> {
    match use_case::replays::get(&state, &caller.0, &id, &replay).await? {
        Some(found) => Ok(Json(ReplayOut::from(&found)).into_response()),
        None => Err(missing(&id, &replay)),
    }
}

/// `POST /v1/subscriptions/{id}/replays/{replay}/cancel`: the job, cancelled (or as it
/// ended, if it had).
pub(crate) async fn cancel(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path((id, replay)): Path<(SubscriptionId, ReplayId)>,
) -> Result<Response, ApiError> {
    let cancelled =
        use_case::replays::cancel(&state, &audit.of(&caller), &caller.0, &id, &replay).await?;
    match cancelled {
        Some(cancelled) => Ok(Json(ReplayOut::from(&cancelled)).into_response()),
        None => Err(missing(&id, &replay)),
    }
}

/// The replays' operations.
pub(crate) fn describe(doc: &mut Endpoints) {
    let replay = doc.schema::<ReplayOut>();
    let subscription = json!([path_parameter("id", "The subscription's id.")]);
    let one = json!([
        path_parameter("id", "The subscription's id."),
        path_parameter("replay", "The replay's id.")
    ]);
    const NO_REPLAY: Refusal = ("404", "No such subscription or replay.");
    let create = Operation::new(
        "createReplay",
        "pull",
        "Replay a window of a subscription's retained events",
    )
    .body(doc.body_input::<ReplayIn>())
    .answer(
        "202",
        "The replay runs: the retained events accepted in the window that the subscription's \
         filters match and its grants admit now are queued for it again (one already pending \
         is not queued twice), push or pull. Each replayed delivery carries \
         `Knooppunt-Replay: <id>` (pull: `Knooppunt-Replays`); the events are unchanged. \
         Events older than the retention are gone and not replayed.",
        Some(replay.clone()),
    )
    .header("202", "Location", header("The replay."))
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        FORBIDDEN,
        NOT_FOUND,
        (
            "429",
            "The hub runs its most replays at once (delivery.max_replays): try again after \
             Retry-After.",
        ),
        UNAVAILABLE,
    ]);
    let list = Operation::new(
        "listReplays",
        "pull",
        "List a subscription's replays, newest first (at most 100)",
    )
    .answer("200", "The replays.", Some(doc.list_of::<ReplayOut>()))
    .refusals(&[UNAUTHORIZED, FORBIDDEN, NOT_FOUND, UNAVAILABLE]);
    doc.get(
        "/subscriptions/{id}/replays",
        self::list,
        &subscription,
        list,
    );
    doc.post(
        "/subscriptions/{id}/replays",
        self::create,
        &subscription,
        create,
    );
    let get = Operation::new("getReplay", "pull", "Read a replay: its state and progress")
        .answer("200", "The replay.", Some(replay.clone()))
        .refusals(&[UNAUTHORIZED, FORBIDDEN, NO_REPLAY, UNAVAILABLE]);
    doc.get("/subscriptions/{id}/replays/{replay}", self::get, &one, get);
    let cancel = Operation::new("cancelReplay", "pull", "Cancel a running replay")
        .answer(
            "200",
            "The replay, cancelled: on the hub running it nothing more is queued once this \
             answers (another hub's runner stops at its next step); one that had ended, as it \
             ended.",
            Some(replay),
        )
        .refusals(&[BAD_REQUEST, UNAUTHORIZED, FORBIDDEN, NO_REPLAY, UNAVAILABLE]);
    doc.post(
        "/subscriptions/{id}/replays/{replay}/cancel",
        self::cancel,
        &one,
        cancel,
    );
}
