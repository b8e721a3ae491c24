//! Making a subscription: the one sequence every surface runs (the `/v1` API, the
//! Notificaties facade, and the console, which calls the API). Permission, the sink's
//! address, the store (with its owner's quotas), the audit trail, the approvals it needs
//! and its sink's consent are decided here only; a surface turns its request into a [`New`]
//! and a [`Refused`] into its own problem shape, and repeats none of the steps.

use std::sync::Arc;

use knooppunt_filter::Criteria;
use knooppunt_store::{StoreError, Subscription};

use crate::app::AppState;
use crate::audit::{Action, Context};
use crate::identity::{Principal, Role};
use crate::lifecycle::{self, QuotaExceeded};

/// How a new subscription's sink agrees to receive.
pub(crate) enum Consent<'a> {
    /// Asked with the handshake (CloudEvents webhook spec, section 4); the sink may consent
    /// later at the hub's validation callback, `{callbacks}/{id}/validation/{token}`.
    Ask { callbacks: &'a str },
    /// Agreed by the surface's own check before (a ZGW abonnement's callback took the test
    /// notificatie): active at once.
    Agreed,
}

/// A subscription to make: built by the surface from its request, owned by the caller.
pub(crate) struct New<'a> {
    pub(crate) subscription: Subscription,
    pub(crate) criteria: Criteria,
    pub(crate) consent: Consent<'a>,
}

/// A subscription made: as stored (with the signing secret a push subscription gets, shown
/// once), and as it is after its sink's answer to the handshake.
pub(crate) struct Made {
    pub(crate) stored: Arc<Subscription>,
    pub(crate) now: Subscription,
}

/// Why no subscription was made (nothing was changed).
#[derive(Debug)]
pub(crate) enum Refused {
    /// The caller may not: its roles, or the types it asks for.
    Forbidden(String),
    /// An address the hub does not send to: the member (`sink`,
    /// `sinkcredential.tokenurl`) and why.
    Address(&'static str, String),
    Quota(QuotaExceeded),
    Store(StoreError),
}

impl From<StoreError> for Refused {
    fn from(error: StoreError) -> Self {
        Refused::Store(error)
    }
}

impl From<QuotaExceeded> for Refused {
    fn from(exceeded: QuotaExceeded) -> Self {
        Refused::Quota(exceeded)
    }
}

/// Whether `caller` may make subscriptions at all: checked first by a surface (before it
/// reads a body), and again by [`create`].
pub(crate) fn may_create(caller: &Principal) -> Result<(), Refused> {
    if caller.has(Role::Subscriber) || caller.is_admin() {
        return Ok(());
    }
    Err(Refused::Forbidden(format!(
        "principal `{}` may not create subscriptions: that needs the `subscriber` role",
        caller.name
    )))
}

/// The checks a new subscription passes before anything is stored or sent to its sink:
/// the caller's role and type prefixes, its owner's quotas, and the addresses of its sink
/// and token endpoint (a pull subscription's sink is the hub's own receive URL: nothing is
/// sent there).
pub(crate) async fn check(
    state: &AppState,
    caller: &Principal,
    subscription: &Subscription,
    criteria: &Criteria,
) -> Result<(), Refused> {
    may_create(caller)?;
    lifecycle::may_subscribe(caller, subscription.types.as_deref(), criteria)
        .map_err(Refused::Forbidden)?;
    state.subscriptions.check_quotas(subscription)?;
    if !subscription.is_pull() {
        state
            .subscriptions
            .check_addresses(
                subscription.sink.as_str(),
                subscription.sink_credential.as_ref(),
                None,
            )
            .await
            .map_err(|(member, why)| Refused::Address(member, why.to_string()))?;
    }
    Ok(())
}

/// Makes `new` for `caller`: [`check`], store (within the owner's quotas), an entry on the
/// audit trail (`action` names it from the stored subscription, in the surface's
/// vocabulary), the approval requests its event types need, then its sink's consent.
pub(crate) async fn create(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    new: New<'_>,
    action: impl FnOnce(&Subscription) -> Action,
) -> Result<Made, Refused> {
    let New {
        subscription,
        criteria,
        consent,
    } = new;
    check(state, caller, &subscription, &criteria).await?;
    let subscriptions = &state.subscriptions;
    let stored: Arc<Subscription> = match consent {
        Consent::Ask { .. } => {
            subscriptions
                .create::<Refused>(subscription, criteria)
                .await?
        }
        Consent::Agreed => {
            subscriptions
                .create_agreed::<Refused>(subscription, criteria)
                .await?
        }
    };
    let sink = knooppunt_delivery::redact_sink(&stored.sink);
    tracing::info!(subscription = %stored.id, owner = %stored.owner, %sink, "Subscription created.");
    state.audit.record(context, action(&stored)).await;
    state.approvals.subscription_saved(&stored).await;
    let now = Subscription::clone(&stored);
    let now = match (consent, now.validation_token.clone()) {
        (Consent::Ask { callbacks }, Some(token)) => {
            let callback = format!("{callbacks}/{}/validation/{token}", now.id);
            subscriptions.handshake(now, &callback).await?
        }
        _ => now,
    };
    Ok(Made { stored, now })
}
