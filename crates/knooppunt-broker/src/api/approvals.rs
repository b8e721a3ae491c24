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
use serde::Serialize;

use super::auth::Caller;
use super::input::{Body, Input, Members};
use super::page::Page;
use super::problem::{ApiError, InvalidParam};
use super::request::RequestAudit;
use crate::app::AppState;
use crate::approvals::{Refused, Selection};
use crate::cataloging;

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

/// A grant as the approvals API shows it; as a subscription shows it, without
/// `subscription` and `subscriber` (it is theirs).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GrantOut {
    eventtype: String,
    state: &'static str,
    requested: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    event_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decided_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    decided: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subscription: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subscriber: Option<String>,
}

/// A grant as a subscription shows it.
pub(crate) fn summary(entry: Option<&CatalogEntry>, grant: &Grant) -> GrantOut {
    let decision = grant.decision.as_ref();
    GrantOut {
        eventtype: grant.entry.clone(),
        state: grant.state.as_str(),
        requested: utc_timestamp(grant.requested_at),
        event_type: entry.map(|e| e.event_type.clone()),
        source: entry.map(|e| e.source_prefix.clone()),
        owner: entry.map(|e| e.owner.clone()),
        decided_by: decision.map(|d| d.by.clone()),
        decided: decision.map(|d| utc_timestamp(d.at)),
        reason: decision.and_then(|d| d.reason.clone()),
        subscription: None,
        subscriber: None,
    }
}

/// A grant as the approvals API shows it.
fn resource(state: &AppState, grant: &Grant) -> GrantOut {
    GrantOut {
        subscription: Some(grant.subscription.clone()),
        subscriber: state
            .subscriptions
            .get(&grant.subscription)
            .map(|subscription| subscription.owner.clone()),
        ..summary(state.catalog.get(&grant.entry).as_deref(), grant)
    }
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
    let body: Vec<GrantOut> = page.iter().map(|g| resource(&state, g)).collect();
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
    Input(decision): Input<DecisionIn>,
) -> Result<Response, ApiError> {
    let decided = cataloging::decide(
        &state,
        &audit.of(&caller),
        &caller.0,
        (&entry, &subscription),
        (decision.state, decision.reason),
    )
    .await?;
    Ok(Json(resource(&state, &decided.grant)).into_response())
}

/// What a data owner sends to decide on a grant.
#[derive(Debug)]
pub(crate) struct DecisionIn {
    state: GrantState,
    reason: Option<String>,
}

impl Body for DecisionIn {
    const NAME: &'static str = "decision";
    const MEMBERS: &'static [&'static str] = &["state", "reason"];
    /// The grant's read-only members may be sent back.
    const READ_ONLY: &'static [&'static str] = &[
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

    fn read(members: &mut Members<'_>) -> Option<Self> {
        const STATES: &str = "`granted`, `refused` or `revoked`";
        let state = members
            .required::<String>("state", STATES)
            .and_then(|name| match GrantState::parse(&name) {
                Some(state) => Some(state),
                None => {
                    members.problem("state", format!("must be {STATES}"));
                    None
                }
            });
        let reason = members.optional::<String>("reason", "a string");
        Some(DecisionIn {
            state: state?,
            reason,
        })
    }
}
