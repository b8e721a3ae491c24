//! `/v1/subscriptions/{id}/replays`: a window of a subscription's retained events queued for
//! it once more (push or pull), as a job with a state, progress and cancel.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::header::LOCATION;
use http::{HeaderValue, StatusCode};
use knooppunt_event::timestamp::{epoch_millis, utc_timestamp};
use knooppunt_store::Replay;
use serde_json::{Map, Value, json};

use super::audit::RequestAudit;
use super::auth::{Caller, Role};
use super::problem::{ApiError, InvalidParam};
use super::subscriptions::{not_found, visible};
use super::{BASE_PATH, JsonBody};
use crate::app::AppState;
use crate::audit::{Action, ActionName};
use crate::history::ReplayRefused;

fn check_access(state: &AppState, caller: &Caller, id: &str) -> Result<String, ApiError> {
    caller.require(Role::Subscriber, "replay events")?;
    match state.subscriptions.get(id) {
        Some(subscription) if visible(caller, &subscription) => Ok(subscription.owner.clone()),
        _ => Err(not_found(id)),
    }
}

/// A replay as the API shows it.
pub(crate) fn representation(replay: &Replay) -> Value {
    let mut object = Map::new();
    object.insert("id".into(), json!(replay.id));
    object.insert("subscription".into(), json!(replay.subscription));
    object.insert("state".into(), json!(replay.state.as_str()));
    object.insert("from".into(), json!(utc_timestamp(replay.from_ms)));
    object.insert("until".into(), json!(utc_timestamp(replay.until_ms)));
    object.insert("eventsQueued".into(), json!(replay.queued));
    object.insert(
        "lastEventTime".into(),
        json!(replay.last_event_at.map(utc_timestamp)),
    );
    object.insert("requestedBy".into(), json!(replay.requested_by));
    object.insert(
        "createdTime".into(),
        json!(utc_timestamp(replay.created_at)),
    );
    if let Some(at) = replay.finished_at {
        object.insert("finishedTime".into(), json!(utc_timestamp(at)));
    }
    if let Some(error) = &replay.error {
        object.insert("error".into(), json!(error));
    }
    Value::Object(object)
}

fn time(body: &Value, name: &str, problems: &mut Vec<InvalidParam>) -> Option<u64> {
    match body.get(name) {
        None => None,
        Some(Value::String(text)) => epoch_millis(text).or_else(|| {
            problems.push(InvalidParam::new(
                name,
                "must be an RFC 3339 time such as 2026-11-20T08:00:00Z",
            ));
            None
        }),
        Some(_) => {
            problems.push(InvalidParam::new(
                name,
                "must be an RFC 3339 time (a string)",
            ));
            None
        }
    }
}

/// `POST /v1/subscriptions/{id}/replays` with `from` (required) and `until` (default: now):
/// 202 with the job.
pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let owner = check_access(&state, &caller, &id)?;
    let mut problems = Vec::new();
    match body.as_object() {
        Some(object) => {
            for name in object.keys() {
                if name != "from" && name != "until" {
                    problems.push(InvalidParam::new(
                        name.as_str(),
                        "unknown member; a replay has from and until",
                    ));
                }
            }
        }
        None => problems.push(InvalidParam::new("", "the body must be a JSON object")),
    }
    let from = time(&body, "from", &mut problems);
    let until = time(&body, "until", &mut problems);
    if from.is_none() && body.get("from").is_none() && body.is_object() {
        problems.push(InvalidParam::new(
            "from",
            "is required: the start of the window (RFC 3339)",
        ));
    }
    let Some(from) = from.filter(|_| problems.is_empty()) else {
        return Err(ApiError::invalid(
            "the replay has problems; see invalidParams",
            problems,
        ));
    };
    let replay = state
        .history
        .start_replay(&id, &caller.0.name, from, until)
        .await
        .map_err(|why| match why {
            ReplayRefused::NoSubscription => not_found(&id),
            ReplayRefused::Window(why) => ApiError::invalid(
                "the window is empty; see invalidParams",
                vec![InvalidParam::new("from", why)],
            ),
            ReplayRefused::TooMany(_) => ApiError::TooMany(why.to_string()),
            ReplayRefused::Suspended(_) => ApiError::Conflict(why.to_string()),
            ReplayRefused::Store(error) => error.into(),
        })?;
    let body = representation(&replay);
    let action = Action::new(
        ActionName::ReplayCreate,
        format!("subscription/{id}/replays/{}", replay.id),
        body.clone(),
    )
    .concerning([owner]);
    state.audit.record(&audit.of(&caller), action).await;
    let location = HeaderValue::try_from(format!(
        "{BASE_PATH}/subscriptions/{id}/replays/{}",
        replay.id
    ))
    .expect("ids are header-safe");
    Ok((StatusCode::ACCEPTED, [(LOCATION, location)], Json(body)).into_response())
}

/// `GET /v1/subscriptions/{id}/replays`: the newest 100, newest first.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    check_access(&state, &caller, &id)?;
    let replays = state.history.replays(&id).await?;
    let body: Vec<Value> = replays.iter().map(representation).collect();
    Ok(Json(body).into_response())
}

fn missing(id: &str, replay: &str) -> ApiError {
    ApiError::NotFound(format!("subscription `{id}` has no replay `{replay}`"))
}

/// `GET /v1/subscriptions/{id}/replays/{replay}`.
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((id, replay)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_access(&state, &caller, &id)?;
    match state.history.replay(&id, &replay).await? {
        Some(found) => Ok(Json(representation(&found)).into_response()),
        None => Err(missing(&id, &replay)),
    }
}

/// `POST /v1/subscriptions/{id}/replays/{replay}/cancel`: the job, cancelled (or as it
/// ended, if it had).
pub(crate) async fn cancel(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path((id, replay)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let owner = check_access(&state, &caller, &id)?;
    let Some(cancelled) = state.history.cancel(&id, &replay).await? else {
        return Err(missing(&id, &replay));
    };
    let body = representation(&cancelled);
    let action = Action::new(
        ActionName::ReplayCancel,
        format!("subscription/{id}/replays/{replay}"),
        body.clone(),
    )
    .concerning([owner]);
    state.audit.record(&audit.of(&caller), action).await;
    Ok(Json(body).into_response())
}
