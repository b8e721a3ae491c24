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
/// on the audit trail (the entry as [`on_the_trail`] keeps it), then the approval requests
/// an approval-bound entry needs.
pub async fn create(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    draft: Draft,
) -> Result<Arc<CatalogEntry>, Refused> {
    let entry = state.catalog().create(caller, draft).await?;
    tracing::info!(entry = %entry.id, by = %caller.name, "Catalog entry created.");
    let action = Action::new(
        ActionName::EventtypeCreate,
        format!("eventtype/{}", entry.id),
        json!({"after": on_the_trail(&entry)}),
    );
    state.audit().record(context, action).await;
    state.approvals().entry_saved(&entry).await;
    Ok(entry)
}

/// Replaces entry `id` with `draft` for `caller` (its owner or an admin), then as
/// [`create`]; `Ok(None)` when there is none.
pub async fn replace(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    id: &str,
    draft: Draft,
) -> Result<Option<Arc<CatalogEntry>>, Refused> {
    let Some(entry) = state.catalog().replace(caller, id, draft).await? else {
        return Ok(None);
    };
    tracing::info!(entry = %id, by = %caller.name, "Catalog entry replaced.");
    let action = Action::new(
        ActionName::EventtypeReplace,
        format!("eventtype/{id}"),
        json!({"after": on_the_trail(&entry)}),
    )
    .concerning([entry.owner.clone()]);
    state.audit().record(context, action).await;
    state.approvals().entry_saved(&entry).await;
    Ok(Some(entry))
}

/// Deletes entry `id` for `caller` (its owner or an admin): the audit trail (what went, as
/// [`on_the_trail`] keeps it, concerning its owner), then its grants; `false` when there
/// is none.
pub async fn delete(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    id: &str,
) -> Result<bool, Refused> {
    let before = state.catalog().get(id);
    if !state.catalog().delete(caller, id).await? {
        return Ok(false);
    }
    tracing::info!(entry = %id, by = %caller.name, "Catalog entry deleted.");
    let action = Action::new(
        ActionName::EventtypeDelete,
        format!("eventtype/{id}"),
        json!({"before": before.as_deref().map(on_the_trail)}),
    )
    .concerning(before.map(|entry| entry.owner.clone()));
    state.audit().record(context, action).await;
    state.approvals().entry_deleted(id).await;
    Ok(true)
}

/// A catalog entry as the audit trail keeps it, alike for every surface (it holds no
/// secret): what it covers and how, and the kanaal it is, if it is one.
pub fn on_the_trail(entry: &CatalogEntry) -> serde_json::Value {
    let mut view = json!({
        "id": entry.id,
        "owner": entry.owner,
        "source": entry.source_prefix,
        "type": entry.event_type,
        "typeMatch": entry.type_match.as_str(),
        "description": entry.description,
        "documentation": entry.documentation,
        "dataschema": entry.dataschema,
        "schema": entry.schema.is_some(),
        "schemaCheck": entry.schema_check.as_str(),
        "deprecated": entry.deprecated,
        "approval": entry.approval.as_str(),
        "kenmerken": entry.kenmerken,
    });
    if let Some(kanaal) = crate::zgw::Kanaal::of(entry) {
        view["kanaal"] = json!({"naam": kanaal.naam, "filters": kanaal.filters});
    }
    view
}

/// `caller` (the entry's owner or an admin) decides on the grant of event type `entry` for
/// `subscription` under the approvals' rules (a revocation withdraws the queued deliveries
/// first), and the decision goes on the audit trail, concerning the owner and the
/// subscriber.
pub async fn decide(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    entry: &str,
    subscription: &str,
    decision: GrantState,
    reason: Option<String>,
) -> Result<Decided, approvals::Refused> {
    let decided = state
        .approvals()
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
    state.audit().record(context, action).await;
    Ok(decided)
}
