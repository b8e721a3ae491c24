//! Replays: a window of a subscription's retained events queued for it once more, as a job.
//! Who may start, read and cancel one (a subscriber that sees the subscription), and what
//! goes on the audit trail, are decided here for every surface (the `/v1` API, and the
//! console, which calls the API).

use knooppunt_store::Replay;

use crate::app::AppState;
use crate::audit::{Action, ActionName, Context};
use crate::history::ReplayRefused;
use crate::identity::Principal;

pub use crate::refused::{Missing, Refused};

/// The owner of subscription `id` if `caller` may replay its events.
fn check_access(state: &AppState, caller: &Principal, id: &str) -> Result<String, Refused> {
    let subscription = state
        .subscriptions()
        .for_subscriber(caller, id, "replay events")?;
    Ok(subscription.owner.clone())
}

/// Starts a replay of subscription `id`'s events accepted from `from_ms` until `until_ms`
/// (now when absent), requested by `caller`, and writes it on the audit trail (the job as
/// [`on_the_trail`] keeps it; it concerns the subscription's owner).
pub async fn start(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    id: &str,
    from_ms: u64,
    until_ms: Option<u64>,
) -> Result<Replay, Refused> {
    let owner = check_access(state, caller, id)?;
    let replay = state
        .history()
        .start_replay(id, &caller.name, from_ms, until_ms)
        .await
        .map_err(|why| match why {
            ReplayRefused::NoSubscription => {
                Refused::NotFound(Missing::Subscription(id.to_owned()))
            }
            ReplayRefused::Window(why) => Refused::Invalid("from", why),
            why @ ReplayRefused::TooMany(_) => Refused::Busy(why.to_string()),
            why @ ReplayRefused::Suspended(_) => Refused::Conflict(why.to_string()),
            ReplayRefused::Store(error) => Refused::Store(error),
        })?;
    state
        .audit()
        .record(
            context,
            on_the_trail(ActionName::ReplayCreate, &replay, owner),
        )
        .await;
    Ok(replay)
}

/// Subscription `id`'s newest replays, newest first.
pub async fn list(state: &AppState, caller: &Principal, id: &str) -> Result<Vec<Replay>, Refused> {
    check_access(state, caller, id)?;
    Ok(state.history().replays(id).await?)
}

/// Replay `replay` of subscription `id`; `None` when it has none of that id.
pub async fn get(
    state: &AppState,
    caller: &Principal,
    id: &str,
    replay: &str,
) -> Result<Option<Replay>, Refused> {
    check_access(state, caller, id)?;
    Ok(state.history().replay(id, replay).await?)
}

/// Cancels replay `replay` of subscription `id` (or gives it as it ended, if it had), and
/// writes that on the audit trail; `None` when there is no such replay.
pub async fn cancel(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    id: &str,
    replay: &str,
) -> Result<Option<Replay>, Refused> {
    let owner = check_access(state, caller, id)?;
    let Some(cancelled) = state.history().cancel(id, replay).await? else {
        return Ok(None);
    };
    state
        .audit()
        .record(
            context,
            on_the_trail(ActionName::ReplayCancel, &cancelled, owner),
        )
        .await;
    Ok(Some(cancelled))
}

/// A replay's entry on the audit trail: the job (its window and progress, as RFC 3339
/// times), concerning the subscription's `owner`.
fn on_the_trail(name: ActionName, replay: &Replay, owner: String) -> Action {
    use knooppunt_event::timestamp::utc_timestamp;
    Action::new(
        name,
        format!("subscription/{}/replays/{}", replay.subscription, replay.id),
        serde_json::json!({
            "id": replay.id,
            "subscription": replay.subscription,
            "requestedBy": replay.requested_by,
            "from": utc_timestamp(replay.from_ms),
            "until": utc_timestamp(replay.until_ms),
            "state": replay.state.as_str(),
            "queued": replay.queued,
            "error": replay.error,
        }),
    )
    .concerning([owner])
}
