//! `/v1/approvals` and `/v1/eventtypes/{id}/approvals/{subscription}`: the data owners'
//! approvals over HTTP. Anyone sees the grants that concern them (an admin all, an owner
//! those of its entries, a subscriber those of its subscriptions); the rules of deciding are
//! `approvals.rs`'s.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_store::{CatalogEntry, Grant, GrantState};
use serde_json::{Value, json};

use super::JsonBody;
use super::audit::RequestAudit;
use super::auth::Caller;
use super::page::Page;
use super::problem::{ApiError, InvalidParam};
use crate::app::AppState;
use crate::approvals::{Refused, Selection};
use crate::audit::{Action, ActionName};

pub(crate) const ITEM_ALLOW: &str = "GET, PUT";

impl From<Refused> for ApiError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Store(error) => error.into(),
            Refused::NotFound(why) => ApiError::NotFound(why),
            Refused::Forbidden(why) => ApiError::Forbidden(why),
            Refused::Conflict(why) => ApiError::Conflict(why),
            Refused::Invalid(name, why) => ApiError::invalid(
                "the decision has problems; see invalidParams",
                vec![InvalidParam::new(name, why)],
            ),
        }
    }
}

/// A grant as a subscription shows it.
pub(crate) fn summary(entry: Option<&CatalogEntry>, grant: &Grant) -> Value {
    let mut body = json!({
        "eventtype": grant.entry,
        "state": grant.state.as_str(),
        "requested": utc_timestamp(grant.requested_at),
    });
    if let Some(entry) = entry {
        body["type"] = json!(entry.event_type);
        body["source"] = json!(entry.source_prefix);
        body["owner"] = json!(entry.owner);
    }
    if let Some(decision) = &grant.decision {
        body["decidedBy"] = json!(decision.by);
        body["decided"] = json!(utc_timestamp(decision.at));
        if let Some(reason) = &decision.reason {
            body["reason"] = json!(reason);
        }
    }
    body
}

/// A grant as the approvals API shows it.
fn resource(state: &AppState, grant: &Grant) -> Value {
    let mut body = summary(state.catalog.get(&grant.entry).as_deref(), grant);
    body["subscription"] = json!(grant.subscription);
    if let Some(subscription) = state.subscriptions.get(&grant.subscription) {
        body["subscriber"] = json!(subscription.owner);
    }
    body
}

/// `GET /v1/approvals`: the grants the caller may see, by event type and subscription;
/// `state`, `eventtype` and `subscription` choose.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Query(mut query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let mut problems = Vec::new();
    let mut selection = Selection::default();
    if let Some(name) = query.remove("state") {
        selection.state = GrantState::parse(&name);
        if selection.state.is_none() {
            problems.push(InvalidParam::new(
                "state",
                "must be `requested`, `granted`, `refused` or `revoked`",
            ));
        }
    }
    selection.entry = query.remove("eventtype");
    selection.subscription = query.remove("subscription");
    let Page {
        size: page_size,
        cursor,
    } = Page::read(&query, &mut problems);
    let cursor = match cursor.as_deref().map(|c| c.split_once(' ')) {
        None => None,
        Some(Some((entry, subscription))) => Some((entry.to_owned(), subscription.to_owned())),
        Some(None) => {
            problems.push(InvalidParam::new(
                "cursor",
                "is not a cursor of this list: use the link of the previous page",
            ));
            None
        }
    };
    if !problems.is_empty() {
        return Err(ApiError::invalid("the query is invalid", problems));
    }
    let (page, more) = state
        .approvals
        .page(&caller.0, &selection, cursor, page_size);
    let body: Vec<Value> = page.iter().map(|g| resource(&state, g)).collect();
    let next = page
        .last()
        .filter(|_| more)
        .map(|g| format!("{} {}", g.entry, g.subscription));
    let mut path = String::from("/approvals");
    let mut filters = Vec::new();
    if let Some(s) = selection.state {
        filters.push(format!("state={}", s.as_str()));
    }
    for (name, value) in [
        ("eventtype", &selection.entry),
        ("subscription", &selection.subscription),
    ] {
        if let Some(value) = value {
            filters.push(format!(
                "{name}={}",
                knooppunt_event::binding::percent::encode_component(value)
            ));
        }
    }
    if !filters.is_empty() {
        path = format!("{path}?{}", filters.join("&"));
    }
    Ok(super::page::answer(body, &path, page_size, next.as_deref()))
}

fn not_found(entry: &str, subscription: &str) -> ApiError {
    ApiError::NotFound(format!(
        "there is no approval of event type {entry} for subscription {subscription}"
    ))
}

/// `GET /v1/eventtypes/{id}/approvals/{subscription}`.
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((entry, subscription)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    match state.approvals.get(&entry, &subscription) {
        Some(grant) if state.approvals.visible_to(&caller.0, &grant) => {
            Ok(Json(resource(&state, &grant)).into_response())
        }
        _ => Err(not_found(&entry, &subscription)),
    }
}

/// `PUT /v1/eventtypes/{id}/approvals/{subscription}` with `{"state": …, "reason": …}`: the
/// owner's decision.
pub(crate) async fn decide(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path((entry, subscription)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let (decision, reason) = read_decision(&body)?;
    let decided = state
        .approvals
        .decide(&caller.0, &entry, &subscription, decision, reason.clone())
        .await?;
    let name = match decision {
        GrantState::Granted => ActionName::ApprovalGrant,
        GrantState::Refused => ActionName::ApprovalRefuse,
        _ => ActionName::ApprovalRevoke,
    };
    let action = Action::new(
        name,
        format!("approval/{entry}/{subscription}"),
        json!({"state": decision.as_str(), "reason": reason, "eventtype": entry,
               "subscription": subscription, "withdrawnDeliveries": decided.withdrawn}),
    )
    .concerning(decided.concerns);
    state.audit.record(&audit.of(&caller), action).await;
    Ok(Json(resource(&state, &decided.grant)).into_response())
}

/// The members a decision has; the grant's read-only members may be sent back.
const READ_ONLY: [&str; 10] = [
    "eventtype",
    "subscription",
    "subscriber",
    "type",
    "source",
    "owner",
    "requested",
    "decided",
    "decidedBy",
    "id",
];

fn read_decision(body: &Value) -> Result<(GrantState, Option<String>), ApiError> {
    let Some(object) = body.as_object() else {
        return Err(ApiError::invalid(
            "a decision is a JSON object",
            vec![InvalidParam::new(
                "body",
                "send {\"state\": \"granted\" | \"refused\" | \"revoked\", \"reason\": \"…\"}",
            )],
        ));
    };
    let mut problems = Vec::new();
    for key in object.keys() {
        if key != "state" && key != "reason" && !READ_ONLY.contains(&key.as_str()) {
            problems.push(InvalidParam::new(
                key.as_str(),
                "unknown member; a decision has `state` and `reason`",
            ));
        }
    }
    let state = match object.get("state") {
        Some(Value::String(name)) => match GrantState::parse(name) {
            Some(state) => Some(state),
            None => {
                problems.push(InvalidParam::new(
                    "state",
                    "must be `granted`, `refused` or `revoked`",
                ));
                None
            }
        },
        Some(_) => {
            problems.push(InvalidParam::new("state", "must be a string"));
            None
        }
        None => {
            problems.push(InvalidParam::new(
                "state",
                "is required: `granted`, `refused` or `revoked`",
            ));
            None
        }
    };
    let reason = match object.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => {
            problems.push(InvalidParam::new("reason", "must be a string"));
            None
        }
    };
    match state {
        Some(state) if problems.is_empty() => Ok((state, reason)),
        _ => Err(ApiError::invalid(
            "the decision has problems; see invalidParams",
            problems,
        )),
    }
}
