//! `/v1/approvals` and `/v1/eventtypes/{id}/approvals/{subscription}`: the data owners'
//! approvals over HTTP. Anyone sees the grants that concern them (an admin all, an owner
//! those of its entries, a subscriber those of its subscriptions); the rules of deciding are
//! `approvals.rs`'s.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_store::{CatalogEntry, Grant, GrantState};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use crate::auth::Caller;
use crate::document::{
    BAD_REQUEST, Operation, Refusal, UNAUTHORIZED, UNAVAILABLE, link_header, path_parameter,
};
use crate::endpoints::Endpoints;
use crate::ids::{EntryId, SubscriptionId};
use crate::input::{Body, Field, Input, Params, Problems};
use crate::page::{Page, PageIn};
use crate::problem::{ApiError, InvalidParam};
use crate::request::RequestAudit;
use knooppunt_services::app::AppState;
use knooppunt_services::approvals::Selection;
use knooppunt_services::use_case;

/// A grant as the approvals API shows it; as a subscription shows it, without
/// `subscription` and `subscriber` (it is theirs).
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    rename = "Approval",
    description = "A subscription's approval for an approval-required event type: only a \
                   `granted` one receives the event type's events."
)]
pub struct GrantOut {
    /// The catalog entry's id.
    pub eventtype: String,
    #[schemars(extend("enum" = ["requested", "granted", "refused", "revoked"]))]
    pub state: std::borrow::Cow<'static, str>,
    #[schemars(extend("format" = "date-time"))]
    pub requested: String,
    /// The entry's type (or type prefix).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// The entry's source prefix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The data owner: the principal that decides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Who decided (`knooppunt` for the owner's own subscription).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub decided: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// In the approvals API; not in a subscription's own list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription: Option<String>,
    /// The subscription's owner (in the approvals API).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscriber: Option<String>,
}

/// A grant as a subscription shows it.
pub(crate) fn summary(entry: Option<&CatalogEntry>, grant: &Grant) -> GrantOut {
    let decision = grant.decision.as_ref();
    GrantOut {
        eventtype: grant.entry.clone(),
        state: grant.state.as_str().into(),
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
            .subscriptions()
            .get(&grant.subscription)
            .map(|subscription| subscription.owner.clone()),
        ..summary(state.catalog().get(&grant.entry).as_deref(), grant)
    }
}

/// The query of the list of approvals: which, and the page.
#[derive(Debug, Default, serde::Deserialize, JsonSchema)]
pub(crate) struct ApprovalsQuery {
    /// Only approvals in this state.
    #[serde(default)]
    #[schemars(extend("enum" = ["requested", "granted", "refused", "revoked"]))]
    state: Field<String>,
    /// Only approvals of this catalog entry.
    #[serde(default)]
    eventtype: Field<String>,
    /// Only approvals of this subscription.
    #[serde(default)]
    subscription: Field<String>,
    #[serde(flatten)]
    page: PageIn,
}

impl Body for ApprovalsQuery {
    const NAME: &'static str = "query";
    type Representation = ();
    type Read = (Selection, Page);

    fn read(self, problems: &mut Problems) -> Option<Self::Read> {
        let mut selection = Selection::default();
        if let Some(name) = self.state.given() {
            selection.state = GrantState::parse(name);
            if selection.state.is_none() {
                problems.add(
                    "state",
                    "must be `requested`, `granted`, `refused` or `revoked`",
                );
            }
        }
        selection.entry = self.eventtype.given().cloned();
        selection.subscription = self.subscription.given().cloned();
        Some((selection, self.page.read(problems)))
    }
}

/// `GET /v1/approvals`: the grants the caller may see, by event type and subscription;
/// `state`, `eventtype` and `subscription` choose.
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Params((
        selection,
        Page {
            size: page_size,
            cursor,
        },
    )): Params<ApprovalsQuery>,
) -> Result<Response, ApiError> {
    let cursor = match cursor.as_deref().map(|c| c.split_once(' ')) {
        None => None,
        Some(Some((entry, subscription))) => Some((entry.to_owned(), subscription.to_owned())),
        Some(None) => {
            return Err(ApiError::invalid(
                "the query is invalid",
                vec![InvalidParam::new(
                    "cursor",
                    "is not a cursor of this list: use the link of the previous page",
                )],
            ));
        }
    };
    let (page, more) = state
        .approvals()
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
    Ok(crate::page::answer(body, &path, page_size, next.as_deref()))
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
    Path((entry, subscription)): Path<(EntryId, SubscriptionId)>,
) -> Result<Response, ApiError> {
    match state.approvals().get(&entry, &subscription) {
        Some(grant) if state.approvals().visible_to(&caller.0, &grant) => {
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
    Path((entry, subscription)): Path<(EntryId, SubscriptionId)>,
    Input(decision): Input<DecisionIn>,
) -> Result<Response, ApiError> {
    let decided = use_case::catalog::decide(
        &state,
        &audit.of(&caller),
        &caller.0,
        &entry,
        &subscription,
        decision.0,
        decision.1,
    )
    .await?;
    Ok(Json(resource(&state, &decided.grant)).into_response())
}

/// What a data owner sends to decide on a grant (the approval's read-only members may be
/// sent back; they are ignored).
#[derive(Debug, Default, serde::Deserialize, serde::Serialize, JsonSchema)]
#[schemars(rename = "ApprovalDecision")]
pub struct DecisionIn {
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub state: Field<Decision>,
    /// Why; required to refuse or revoke. The subscriber sees it.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    #[serde(skip_serializing_if = "Field::is_absent")]
    pub reason: Field<String>,
}

/// An owner's decision: `granted` (from any other state), `refused` (a request), `revoked`
/// (a grant).
#[derive(Debug, Clone, Copy, serde::Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Granted,
    Refused,
    Revoked,
}

impl Body for DecisionIn {
    const NAME: &'static str = "decision";
    type Representation = GrantOut;
    type Read = (GrantState, Option<String>);

    fn read(self, problems: &mut Problems) -> Option<Self::Read> {
        const STATES: &str = "`granted`, `refused` or `revoked`";
        let state = self.state.required("state", STATES, problems);
        let reason = self.reason.optional("reason", "a string", problems);
        let state = match state? {
            Decision::Granted => GrantState::Granted,
            Decision::Refused => GrantState::Refused,
            Decision::Revoked => GrantState::Revoked,
        };
        Some((state, reason))
    }
}

/// The approvals' operations.
pub(crate) fn describe(doc: &mut Endpoints) {
    const TAG: &str = "approvals";
    const NO_GRANT: Refusal = (
        "404",
        "No approval of this event type for this subscription is visible to the principal.",
    );
    let list = Operation::new(
        "listApprovals",
        TAG,
        "List the approvals the principal may see: an admin all, a data owner those of its \
         event types, a subscriber those of its subscriptions; by event type, then \
         subscription.",
    )
    .query::<ApprovalsQuery>()
    .answer(
        "200",
        "A page of approvals. A `Link` header with rel=\"next\" points to the next page.",
        Some(doc.list_of::<GrantOut>()),
    )
    .header("200", "Link", link_header())
    .refusals(&[BAD_REQUEST, UNAUTHORIZED]);
    doc.get("/approvals", self::list, &json!([]), list);
    let approval = doc.schema::<GrantOut>();
    let one = json!([
        path_parameter("id", "The event type's (catalog entry's) id."),
        path_parameter("subscription", "The subscription's id.")
    ]);
    let read = Operation::new(
        "getApproval",
        TAG,
        "Read the approval of an event type for a subscription.",
    )
    .answer("200", "The approval.", Some(approval.clone()))
    .refusals(&[UNAUTHORIZED, NO_GRANT]);
    doc.get(
        "/eventtypes/{id}/approvals/{subscription}",
        self::get,
        &one,
        read,
    );
    let decide = Operation::new(
        "decideApproval",
        TAG,
        "Grant, refuse or revoke a subscription's approval (the event type's owner or an \
         admin; never the subscription's own owner). A revocation turns the queued deliveries \
         of the event type's events into dead letters (\"approval revoked\") before it answers.",
    )
    .body(doc.body_input::<DecisionIn>())
    .answer("200", "The approval as decided.", Some(approval))
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        (
            "403",
            "Not the event type's owner or an admin, or the subscription's own owner.",
        ),
        NO_GRANT,
        (
            "409",
            "The decision does not follow the approval's state (refuse a request, revoke a \
             grant).",
        ),
        ("415", "The body is not application/json."),
        UNAVAILABLE,
    ]);
    doc.put(
        "/eventtypes/{id}/approvals/{subscription}",
        self::decide,
        &one,
        decide,
    );
}
