//! The sink's consent (CloudEvents webhook spec section 4, NL GOV webhook guideline): the
//! `OPTIONS` handshake when a subscription is created or its sink changes, the callback URL
//! a sink may call to consent later, and an administrator's record of consent "by
//! agreement".

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::HeaderMap;
use knooppunt_delivery::Handshake;
use knooppunt_store::{Subscription, SubscriptionState, Validation};
use serde_json::json;

use super::BASE_PATH;
use super::auth::{Caller, Role};
use super::problem::ApiError;
use super::subscriptions::{not_found, resource};
use crate::AppState;

/// Where the sink can reach the hub: the configured public URL, or the `Host` the client
/// used.
fn base_url(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &state.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// Asks the sink for consent and stores the answer; returns the subscription as it is now.
/// Called without holding the subscription lock: the sink may call the callback URL while
/// it answers.
pub(crate) async fn handshake(
    state: &AppState,
    subscription: Subscription,
    headers: &HeaderMap,
) -> Result<Subscription, ApiError> {
    let Some(token) = subscription.validation_token.clone() else {
        return Ok(subscription);
    };
    let callback = format!(
        "{}{BASE_PATH}/subscriptions/{}/validation/{token}",
        base_url(state, headers),
        subscription.id
    );
    let answer = state
        .deliverer
        .handshake(
            &subscription.sink,
            &callback,
            subscription.client_certificate.as_ref(),
        )
        .await;
    let id = subscription.id.clone();
    let changed = update(state, &id, |current| {
        if current.validation_token.as_deref() != Some(token.as_str()) {
            return false; // the sink changed meanwhile; its own handshake decides
        }
        match &answer {
            Handshake::Granted { allowed_rate } => {
                if current.state == SubscriptionState::Active {
                    return false; // the callback came first
                }
                current.state = SubscriptionState::Active;
                current.validated_by = Some(Validation::Handshake);
                current.allowed_rate = *allowed_rate;
                current.validation_problem = None;
            }
            Handshake::Refused(why) | Handshake::Failed(why) => {
                if current.state != SubscriptionState::Pending {
                    return false;
                }
                current.validation_problem = Some(format!(
                    "the sink did not consent to deliveries ({why}); it may call the callback \
                     URL sent in WebHook-Request-Callback, or an administrator may record consent \
                     by agreement"
                ));
            }
        }
        true
    })
    .await?;
    match &answer {
        Handshake::Granted { .. } => {
            tracing::info!(subscription = %id, "The sink granted the validation handshake.")
        }
        Handshake::Refused(why) | Handshake::Failed(why) => {
            tracing::info!(subscription = %id, reason = %why, "The sink did not grant the validation handshake; the subscription is pending.")
        }
    }
    Ok(changed.unwrap_or(subscription))
}

/// Changes a subscription through the one writer; `change` returns whether it changed
/// anything. Returns the subscription as it is now, `None` when it no longer exists.
async fn update(
    state: &AppState,
    id: &str,
    change: impl FnOnce(&mut Subscription) -> bool,
) -> Result<Option<Subscription>, ApiError> {
    let updated = state.subscriptions.update(id, change).await?;
    Ok(updated.map(|current| Subscription::clone(&current)))
}

/// `GET` or `POST /v1/subscriptions/{id}/validation/{token}`: the sink consents later. No
/// bearer token: the secret in the URL, sent only to the sink, is the credential.
pub(crate) async fn callback(
    State(state): State<Arc<AppState>>,
    Path((id, token)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let unknown = || ApiError::NotFound("there is no such validation callback".into());
    let matches = |subscription: &Subscription| {
        subscription
            .validation_token
            .as_deref()
            .is_some_and(|expected| constant_time_eq(expected.as_bytes(), token.as_bytes()))
    };
    let known = state
        .subscriptions
        .get(&id)
        .is_some_and(|subscription| matches(&subscription));
    if !known {
        return Err(unknown());
    }
    let updated = update(&state, &id, |current| {
        if !matches(current) || current.state != SubscriptionState::Pending {
            return false;
        }
        current.state = SubscriptionState::Active;
        current.validated_by = Some(Validation::Callback);
        current.validation_problem = None;
        true
    })
    .await?
    .ok_or_else(unknown)?;
    tracing::info!(subscription = %id, "The sink consented through the validation callback.");
    Ok(Json(json!({"subscription": id, "state": updated.state.as_str()})).into_response())
}

/// `POST /v1/subscriptions/{id}/validation`: an administrator records the sink's consent,
/// agreed outside the hub, without a handshake.
pub(crate) async fn agreement(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(Role::Admin, "record a sink's consent by agreement")?;
    let updated = update(&state, &id, |current| {
        if current.state == SubscriptionState::Disabled {
            return false;
        }
        current.state = SubscriptionState::Active;
        current.validated_by = Some(Validation::Agreement);
        current.validation_problem = None;
        true
    })
    .await?
    .ok_or_else(|| not_found(&id))?;
    if updated.state == SubscriptionState::Disabled {
        return Err(ApiError::Conflict(
            "the subscription is disabled because its sink answered 410 Gone; give it a new \
             sink with PUT"
                .into(),
        ));
    }
    tracing::info!(subscription = %id, by = %caller.0.name, "Consent recorded by agreement.");
    Ok(Json(resource(&state, &updated)).into_response())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
