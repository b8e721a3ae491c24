//! The sink's consent (CloudEvents webhook spec section 4, NL GOV webhook guideline): the
//! callback URL a sink may call to consent later, and an administrator's record of consent
//! "by agreement". The `OPTIONS` handshake when a subscription is created or its sink
//! changes is `crate::subscribing`'s.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::auth::{Caller, Role};
use super::problem::ApiError;
use super::request::RequestAudit;
use super::subscriptions::{not_found, resource};
use crate::app::AppState;
use crate::audit::{Action, ActionName};
use crate::subscriptions::Agreed;

/// `GET` or `POST /v1/subscriptions/{id}/validation/{token}`: the sink consents later. No
/// bearer token: the secret in the URL, sent only to the sink, is the credential.
pub(crate) async fn callback(
    State(state): State<Arc<AppState>>,
    audit: RequestAudit,
    Path((id, token)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let updated = state
        .subscriptions
        .consent_by_callback(&id, &token)
        .await?
        .ok_or_else(|| ApiError::NotFound("there is no such validation callback".into()))?;
    // The sink acted, not a principal: the entry names none.
    let action = Action::new(
        ActionName::SubscriptionConsent,
        format!("subscription/{id}"),
        json!({"by": "the sink, through the validation callback", "state": updated.state().as_str()}),
    )
    .concerning([updated.owner.clone()]);
    state.audit.record(&audit.anonymous(), action).await;
    Ok(Json(json!({"subscription": id, "state": updated.state().as_str()})).into_response())
}

/// `POST /v1/subscriptions/{id}/validation`: an administrator records the sink's consent,
/// agreed outside the hub, without a handshake.
pub(crate) async fn agreement(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(Role::Admin, "record a sink's consent by agreement")?;
    let updated = match state.subscriptions.consent_by_agreement(&id).await? {
        Agreed::Recorded(subscription) => subscription,
        Agreed::NoSubscription => return Err(not_found(&id)),
        Agreed::Disabled => {
            return Err(ApiError::Conflict(
                "the subscription is disabled (its sink answered 410 Gone, or this hub cannot \
                 use its stored filters); give it a new sink or filters with PUT"
                    .into(),
            ));
        }
    };
    tracing::info!(subscription = %id, by = %caller.0.name, "Consent recorded by agreement.");
    let action = Action::new(
        ActionName::SubscriptionConsent,
        format!("subscription/{id}"),
        json!({"by": "agreement, recorded by an administrator"}),
    )
    .concerning([updated.owner.clone()]);
    state.audit.record(&audit.of(&caller), action).await;
    Ok(Json(resource(&state, &updated)).into_response())
}
