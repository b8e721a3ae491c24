//! Dead letters: deliveries the hub gave up on, for the subscription's subscriber (or an
//! admin) to inspect, redeliver or remove. Who may, and what goes on the audit trail, are
//! decided here for every surface (the `/v1` API, and the console, which calls the API);
//! whether a redelivery may go at all (the subscription's state, the data owner's grant)
//! is the approvals' rule.

use std::sync::Arc;

use knooppunt_store::{DeadLetter, StoredEvent};
use serde_json::json;

use crate::app::AppState;
use crate::audit::{Action, ActionName, Context};
use crate::identity::Principal;
use crate::subscriptions::Redelivered;

pub use crate::refused::{Missing, Refused};

/// There is no such dead letter: `seq` of subscription `id`.
fn no_dead_letter(id: &str, seq: u64) -> Refused {
    Refused::NotFound(Missing::DeadLetter {
        subscription: id.to_owned(),
        seq,
    })
}

/// Whether `caller` may see subscription `id`'s dead letters: the subscription must exist
/// and be visible to it, a subscriber (or an admin).
pub fn check_access(state: &AppState, caller: &Principal, id: &str) -> Result<(), Refused> {
    state
        .subscriptions()
        .for_subscriber(caller, id, "read dead letters")
        .map(|_| ())
}

/// Subscription `id`'s dead letters after `after`, oldest first, at most `limit`.
pub async fn list(
    state: &AppState,
    caller: &Principal,
    id: &str,
    after: Option<u64>,
    limit: usize,
) -> Result<Vec<DeadLetter>, Refused> {
    check_access(state, caller, id)?;
    Ok(state.subscriptions().dead_letters(id, after, limit).await?)
}

/// Dead letter `seq` of subscription `id`, with its event as accepted (while retained).
pub async fn get(
    state: &AppState,
    caller: &Principal,
    id: &str,
    seq: u64,
) -> Result<(DeadLetter, Option<Arc<StoredEvent>>), Refused> {
    check_access(state, caller, id)?;
    state
        .subscriptions()
        .dead_letter(id, seq)
        .await?
        .ok_or_else(|| no_dead_letter(id, seq))
}

/// The audit entry of an action on dead letter `seq` of subscription `id`: it concerns the
/// subscription's subscriber.
fn action(state: &AppState, name: ActionName, (id, seq): (&str, u64)) -> Action {
    Action::new(
        name,
        format!("subscription/{id}/dead-letters/{seq}"),
        json!({"sequence": seq}),
    )
    .concerning(state.subscriptions().get(id).map(|s| s.owner.clone()))
}

/// Puts dead letter `seq` of subscription `id` back into its queue with fresh attempts.
pub async fn redeliver(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    id: &str,
    seq: u64,
) -> Result<(), Refused> {
    check_access(state, caller, id)?;
    match state.approvals().redeliver(id, seq).await? {
        Redelivered::Queued => {}
        Redelivered::NoSubscription => {
            return Err(Refused::NotFound(Missing::Subscription(id.to_owned())));
        }
        Redelivered::NoDeadLetter => return Err(no_dead_letter(id, seq)),
        Redelivered::Disabled => {
            return Err(Refused::Conflict(format!(
                "subscription `{id}` is disabled because its sink answered 410 Gone, so \
                 nothing would be delivered; give it a new sink with PUT first"
            )));
        }
    }
    tracing::info!(subscription = %id, seq, by = %caller.name, "Dead letter queued for redelivery.");
    let action = action(state, ActionName::DeadLetterRedeliver, (id, seq));
    state.audit().record(context, action).await;
    Ok(())
}

/// Removes dead letter `seq` of subscription `id`.
pub async fn delete(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    id: &str,
    seq: u64,
) -> Result<(), Refused> {
    check_access(state, caller, id)?;
    if !state.subscriptions().delete_dead_letter(id, seq).await? {
        return Err(no_dead_letter(id, seq));
    }
    tracing::info!(subscription = %id, seq, by = %caller.name, "Dead letter deleted.");
    let action = action(state, ActionName::DeadLetterDelete, (id, seq));
    state.audit().record(context, action).await;
    Ok(())
}
