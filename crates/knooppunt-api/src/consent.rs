//! The sink's consent (CloudEvents webhook spec section 4, NL GOV webhook guideline): the
//! callback URL a sink may call to consent later, and an administrator's record of consent
//! "by agreement". The `OPTIONS` handshake when a subscription is created or its sink
//! changes is `knooppunt_services::use_case::subscriptions`'s.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use crate::auth::Caller;
use crate::document::{
    BAD_REQUEST, NOT_FOUND, Operation, UNAUTHORIZED, path_parameter, subscription,
};
use crate::endpoints::Endpoints;
use crate::ids::{CallbackToken, SubscriptionId};
use crate::problem::ApiError;
use crate::request::RequestAudit;
use crate::subscriptions::resource;
use knooppunt_services::app::AppState;
use knooppunt_services::use_case;

/// `GET` or `POST /v1/subscriptions/{id}/validation/{token}`: the sink consents later. No
/// bearer token: the secret in the URL, sent only to the sink, is the credential.
pub(crate) async fn callback(
    State(state): State<Arc<AppState>>,
    audit: RequestAudit,
    Path((id, token)): Path<(SubscriptionId, CallbackToken)>,
) -> Result<Response, ApiError> {
    let updated =
        use_case::subscriptions::consent_by_callback(&state, &audit.anonymous(), &id, &token)
            .await?
            .ok_or_else(|| ApiError::NotFound("there is no such validation callback".into()))?;
    Ok(Json(ConsentOut {
        subscription: id.into_string(),
        state: updated.state().as_str(),
    })
    .into_response())
}

/// A sink's consent, recorded.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "Consent")]
struct ConsentOut {
    subscription: String,
    #[schemars(example = &"active")]
    state: &'static str,
}

/// `POST /v1/subscriptions/{id}/validation`: an administrator records the sink's consent,
/// agreed outside the hub, without a handshake.
pub(crate) async fn agreement(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<SubscriptionId>,
) -> Result<Response, ApiError> {
    let updated =
        use_case::subscriptions::consent_by_agreement(&state, &audit.of(&caller), &caller.0, &id)
            .await?;
    Ok(Json(resource(&state, &updated)).into_response())
}

/// The consent operations.
pub(crate) fn describe(doc: &mut Endpoints) {
    let agreement = Operation::new(
        "validateSubscriptionByAgreement",
        "subscriptions",
        "Record, as an administrator, that the sink consented outside the hub (NL GOV webhook \
         guideline): the subscription becomes active without a handshake.",
    )
    .answer("200", "The subscription, now active.", Some(subscription()))
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        ("403", "Only an administrator may record consent."),
        NOT_FOUND,
        (
            "409",
            "The subscription is disabled (its sink answered 410); give it a new sink.",
        ),
    ]);
    let id = json!([path_parameter(
        "id",
        "The id the hub assigned to the subscription."
    )]);
    doc.post(
        "/subscriptions/{id}/validation",
        self::agreement,
        &id,
        agreement,
    );
    let consent = doc.schema::<ConsentOut>();
    let callback = |id: &str| {
        Operation::new(
            id,
            "subscriptions",
            "The validation callback (CloudEvents webhook spec section 4.2): the URL the hub \
             sent the sink in WebHook-Request-Callback. Calling it (GET or POST) grants \
             consent. No bearer token: the secret in the URL is the credential.",
        )
        .public()
        .answer(
            "200",
            "Consent recorded; the subscription is active.",
            Some(consent.clone()),
        )
        .refusals(&[BAD_REQUEST, ("404", "No such subscription or token.")])
    };
    let token = json!([
        path_parameter("id", "The subscription's id."),
        path_parameter("token", "The secret the hub sent the sink.")
    ]);
    let path = "/subscriptions/{id}/validation/{token}";
    doc.get(path, self::callback, &token, callback("confirmValidation"));
    doc.post(
        path,
        self::callback,
        &token,
        callback("confirmValidationByPost"),
    );
}
