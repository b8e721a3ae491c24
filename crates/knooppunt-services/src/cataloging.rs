//! Describing event types in the catalog: the one sequence every surface runs (the `/v1`
//! API, the Notificaties facade registering a kanaal, and the console, which calls the
//! API). The catalog decides who may own and change an entry and what is valid; here each
//! change is also written on the audit trail and given to the approvals it affects, in
//! that order, so that no surface skips a step.

use std::sync::Arc;

use knooppunt_store::{CatalogEntry, GrantState};
use serde_json::json;

use crate::app::AppState;
use crate::approvals::{self, Decided};
use crate::audit::{Action, ActionName, Context};
use crate::catalog::{Draft, Refused};
use crate::identity::Principal;

/// Makes an entry of `draft` owned by `caller`: the catalog's checks, the store, an entry
/// on the audit trail (`action` names it from the entry, in the surface's vocabulary),
/// then the approval requests an approval-bound entry needs.
pub async fn create(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    draft: Draft,
    action: impl FnOnce(&CatalogEntry) -> Action,
) -> Result<Arc<CatalogEntry>, Refused> {
    let entry = state.catalog.create(caller, draft).await?;
    tracing::info!(entry = %entry.id, by = %caller.name, "Catalog entry created.");
    state.audit.record(context, action(&entry)).await;
    state.approvals.entry_saved(&entry).await;
    Ok(entry)
}

/// Replaces entry `id` with `draft` for `caller` (its owner or an admin), then as
/// [`create`]; `Ok(None)` when there is none.
pub async fn replace(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    (id, draft): (&str, Draft),
    action: impl FnOnce(&CatalogEntry) -> Action,
) -> Result<Option<Arc<CatalogEntry>>, Refused> {
    let Some(entry) = state.catalog.replace(caller, id, draft).await? else {
        return Ok(None);
    };
    tracing::info!(entry = %id, by = %caller.name, "Catalog entry replaced.");
    state.audit.record(context, action(&entry)).await;
    state.approvals.entry_saved(&entry).await;
    Ok(Some(entry))
}

/// Deletes entry `id` for `caller` (its owner or an admin): the audit trail (`action` is
/// given the owner the entry had), then its grants; `false` when there is none.
pub async fn delete(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    id: &str,
    action: impl FnOnce(Option<String>) -> Action,
) -> Result<bool, Refused> {
    let owner = state.catalog.get(id).map(|entry| entry.owner.clone());
    if !state.catalog.delete(caller, id).await? {
        return Ok(false);
    }
    tracing::info!(entry = %id, by = %caller.name, "Catalog entry deleted.");
    state.audit.record(context, action(owner)).await;
    state.approvals.entry_deleted(id).await;
    Ok(true)
}

/// `caller` (the entry's owner or an admin) decides on the grant of event type `entry` for
/// `subscription` under the approvals' rules (a revocation withdraws the queued deliveries
/// first), and the decision goes on the audit trail, concerning the owner and the
/// subscriber.
pub async fn decide(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    (entry, subscription): (&str, &str),
    (decision, reason): (GrantState, Option<String>),
) -> Result<Decided, approvals::Refused> {
    let decided = state
        .approvals
        .decide(caller, entry, subscription, decision, reason.clone())
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
    .concerning(decided.concerns.iter().cloned());
    state.audit.record(context, action).await;
    Ok(decided)
}
