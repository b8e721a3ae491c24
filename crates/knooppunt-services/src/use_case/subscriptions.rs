//! Making, changing and deleting a subscription: the one sequence every surface runs (the `/v1` API, the
//! Notificaties facade, and the console, which calls the API). Permission, the sink's
//! address, the store (with its owner's quotas), the audit trail, the approvals it needs
//! and its sink's consent are decided here only; a surface turns its request into a [`New`]
//! and a [`Refused`] into its own problem shape, and repeats none of the steps.

use std::sync::Arc;

use knooppunt_filter::Criteria;
use knooppunt_store::{StoreError, Subscription};

use crate::app::AppState;
use serde_json::json;

use crate::audit::{Action, ActionName, Context};
use crate::identity::{Principal, Role};
use crate::subscriptions::{self, Agreed, QuotaExceeded, Rotation};

/// How a new subscription's sink agrees to receive.
pub enum Consent<'a> {
    /// Asked with the handshake (CloudEvents webhook spec, section 4); the sink may consent
    /// later at the hub's validation callback, `{callbacks}/{id}/validation/{token}`.
    Ask { callbacks: &'a str },
    /// Agreed by the surface's own check before (a ZGW abonnement's callback took the test
    /// notificatie): active at once.
    Agreed,
}

/// A subscription to make: built by the surface from its request, owned by the caller.
pub struct New<'a> {
    pub subscription: Subscription,
    pub criteria: Criteria,
    pub consent: Consent<'a>,
}

/// A subscription made: as stored (with the signing secret a push subscription gets, shown
/// once), and as it is after its sink's answer to the handshake.
pub struct Made {
    pub stored: Arc<Subscription>,
    pub now: Subscription,
}

pub use crate::refused::{Missing, Refused};

/// Whether `caller` may make subscriptions at all: checked first by a surface (before it
/// reads a body), and again by [`create`].
pub fn may_create(caller: &Principal) -> Result<(), Refused> {
    may_change(caller, "create subscriptions")
}

/// A new subscription that passed [`check`]: only [`create`] takes one, so the checks run
/// once however a surface orders its own steps (the facade tests the callback between).
pub struct Checked<'a>(New<'a>);

impl<'a> Checked<'a> {
    /// The change that replaces subscription `id` with what was checked (keeping when the
    /// subscription was first made), for [`replace`]: the addresses were checked already.
    /// A `Checked` is only ever made, replaced with, or dropped: no surface can take its
    /// subscription out unchecked.
    pub fn replacing<'b, E>(
        self,
        id: &'b str,
    ) -> Change<'b, impl FnOnce(&Subscription) -> Result<(Subscription, Criteria), E> + use<'b, E>>
    where
        'a: 'b,
    {
        let New {
            subscription,
            criteria,
            consent,
        } = self.0;
        Change {
            id,
            sink: None,
            credential: None,
            make: move |existing: &Subscription| {
                let mut subscription = subscription;
                subscription.created_at = existing.created_at;
                Ok((subscription, criteria))
            },
            consent,
        }
    }
}

/// The checks a new subscription passes before anything is stored or sent to its sink:
/// the caller's role and type prefixes, its owner's quotas, and the addresses of its sink
/// and token endpoint (a pull subscription's sink is the hub's own receive URL: nothing is
/// sent there).
pub async fn check<'a>(
    state: &AppState,
    caller: &Principal,
    new: New<'a>,
) -> Result<Checked<'a>, Refused> {
    dry_run(state, caller, &new).await?;
    Ok(Checked(new))
}

/// The checks of [`check`] without making anything: for a form that says, as it is
/// filled in, whether the hub would take it. A new form of an existing subscription keeps
/// its id, so the owner's quotas count it once, as [`replace`] does.
pub async fn dry_run(state: &AppState, caller: &Principal, new: &New<'_>) -> Result<(), Refused> {
    let New {
        subscription,
        criteria,
        ..
    } = new;
    may_create(caller)?;
    subscriptions::may_subscribe(caller, subscription.types.as_deref(), criteria)
        .map_err(Refused::Forbidden)?;
    state.subscriptions().check_quotas(subscription)?;
    if !subscription.is_pull() {
        state
            .subscriptions()
            .check_addresses(
                subscription.sink.as_str(),
                subscription.sink_credential.as_ref(),
                None,
            )
            .await
            .map_err(|(member, why)| Refused::Invalid(member, why.to_string()))?;
    }
    Ok(())
}

/// Makes `checked` (for the caller it was checked for): store (within the owner's quotas,
/// again under the writer's lock), an entry on the audit trail (the subscription as
/// [`on_the_trail`] keeps it), the approval requests its event types need, then its sink's
/// consent.
pub async fn create(
    state: &AppState,
    context: &Context,
    Checked(new): Checked<'_>,
) -> Result<Made, Refused> {
    let New {
        subscription,
        criteria,
        consent,
    } = new;
    let subscriptions = &state.subscriptions();
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
    let action = Action::new(
        ActionName::SubscriptionCreate,
        format!("subscription/{}", stored.id),
        json!({"after": on_the_trail(state, &stored)}),
    )
    .concerning([stored.owner.clone()]);
    state.audit().record(context, action).await;
    state.approvals().subscription_saved(&stored).await;
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

/// Whether `caller` may change or delete subscriptions at all (`doing`: what it asked, for
/// the refusal).
pub fn may_change(caller: &Principal, doing: &str) -> Result<(), Refused> {
    if caller.has(Role::Subscriber) || caller.is_admin() {
        return Ok(());
    }
    Err(Refused::Forbidden(format!(
        "principal `{}` may not {doing}: that needs the `subscriber` role",
        caller.name
    )))
}

/// A change of subscription `id`, as a surface asks for it.
pub struct Change<'a, F> {
    pub id: &'a str,
    /// The addresses the replacement sends to (none for a pull subscription), checked
    /// before anything is stored; the stored sink sent back as it reads (redacted) is kept
    /// without a check.
    pub sink: Option<&'a str>,
    pub credential: Option<&'a knooppunt_store::SinkCredential>,
    /// Makes the replacement of the current subscription (which the caller may see), or
    /// refuses.
    pub make: F,
    pub consent: Consent<'a>,
}

/// Replaces subscription `id` for `caller`, the same sequence for every surface: the role,
/// the addresses, then under the writer's lock the caller's sight of the current one, the
/// replacement the surface makes of it, its type prefixes and its owner's quotas; then
/// the approval requests, an entry on the audit trail (the replacement as
/// [`on_the_trail`] keeps it, and whether the sink changed), and the new sink's consent.
/// `Ok(None)`: there is none.
pub async fn replace<E, F>(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    change: Change<'_, F>,
) -> Result<Option<Subscription>, E>
where
    E: From<Refused> + From<StoreError> + From<QuotaExceeded>,
    F: FnOnce(&Subscription) -> Result<(Subscription, Criteria), E>,
{
    let Change {
        id,
        sink,
        credential,
        make,
        consent,
    } = change;
    may_change(caller, "change subscriptions")?;
    if let Some(sink) = sink {
        let stored = state
            .subscriptions()
            .get(id)
            .map(|existing| knooppunt_delivery::redact_sink(&existing.sink));
        state
            .subscriptions()
            .check_addresses(sink, credential, stored.as_deref())
            .await
            .map_err(|(member, why)| Refused::Invalid(member, why.to_string()))?;
    }
    let checked = |existing: &Subscription| {
        if !subscriptions::visible_to(caller, existing) {
            return Err(E::from(Refused::NotFound(Missing::Subscription(
                id.to_owned(),
            ))));
        }
        let (replacement, criteria) = make(existing)?;
        subscriptions::may_subscribe(caller, replacement.types.as_deref(), &criteria)
            .map_err(|why| E::from(Refused::Forbidden(why)))?;
        Ok((replacement, criteria))
    };
    let subscriptions = &state.subscriptions();
    let replaced = match consent {
        Consent::Ask { .. } => subscriptions.replace(id, checked).await?,
        Consent::Agreed => subscriptions.replace_agreed(id, checked).await?,
    };
    let Some(replaced) = replaced else {
        return Ok(None);
    };
    state
        .approvals()
        .subscription_saved(&replaced.subscription)
        .await;
    let sink_changed = replaced.needs_consent;
    tracing::info!(subscription = %id, by = %caller.name, sink_changed, "Subscription replaced.");
    let entry = Action::new(
        ActionName::SubscriptionReplace,
        format!("subscription/{id}"),
        json!({"after": on_the_trail(state, &replaced.subscription), "sinkChanged": sink_changed}),
    )
    .concerning([replaced.subscription.owner.clone()]);
    state.audit().record(context, entry).await;
    let now = Subscription::clone(&replaced.subscription);
    let now = match (consent, sink_changed, now.validation_token.clone()) {
        (Consent::Ask { callbacks }, true, Some(token)) => {
            let callback = format!("{callbacks}/{}/validation/{token}", now.id);
            subscriptions.handshake(now, &callback).await?
        }
        _ => now,
    };
    Ok(Some(now))
}

/// Deletes subscription `id` for `caller` (one it may see): an entry on the audit trail
/// (what went, as [`on_the_trail`] keeps it), `view` of it as it was (with its
/// approvals), then its approvals. `Ok(None)`: there is none.
pub async fn delete<T>(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    id: &str,
    view: impl FnOnce(&Subscription) -> T,
) -> Result<Option<T>, Refused> {
    may_change(caller, "delete subscriptions")?;
    let Some(deleted) = state
        .subscriptions()
        .delete(id, |existing| subscriptions::visible_to(caller, existing))
        .await?
    else {
        return Ok(None);
    };
    tracing::info!(subscription = %id, by = %caller.name, "Subscription deleted.");
    let action = Action::new(
        ActionName::SubscriptionDelete,
        format!("subscription/{id}"),
        json!({"before": on_the_trail(state, &deleted)}),
    )
    .concerning([deleted.owner.clone()]);
    state.audit().record(context, action).await;
    let view = view(&deleted);
    state.approvals().subscription_deleted(id).await;
    Ok(Some(view))
}

/// A subscription as the audit trail keeps it, alike for every surface: what it receives
/// and where it sends, never a secret. The sink's password and query values are redacted
/// (a webhook URL often carries a key), headers keep their names only, and a credential
/// or certificate is named, not shown; the validation token and signing secrets are left
/// out. An abonnement's kanalen are added, as the facade shows them.
pub fn on_the_trail(state: &AppState, subscription: &Subscription) -> serde_json::Value {
    use knooppunt_store::SinkCredential;
    let settings = match &subscription.protocol_settings {
        knooppunt_store::ProtocolSettings::Http(http) => {
            let headers: serde_json::Map<String, serde_json::Value> = http
                .headers
                .keys()
                .map(|name| (name.clone(), "********".into()))
                .collect();
            json!({"method": http.method, "headers": headers})
        }
        knooppunt_store::ProtocolSettings::Mqtt(mqtt) => json!({
            "topicname": mqtt.topic, "qos": mqtt.qos, "retain": mqtt.retain,
            "expiry": mqtt.expiry, "userproperties": mqtt.user_properties,
        }),
        knooppunt_store::ProtocolSettings::Nats(nats) => json!({
            "subject": nats.subject, "jetstream": nats.jetstream,
        }),
        knooppunt_store::ProtocolSettings::Amqp(amqp) => json!({
            "address": amqp.address, "linkName": amqp.link_name, "settled": amqp.settled,
            "linkProperties": amqp.link_properties,
        }),
    };
    let credential = subscription
        .sink_credential
        .as_ref()
        .map(|credential| match credential {
            SinkCredential::Plain { .. } => "PLAIN",
            SinkCredential::AccessToken { .. } => "ACCESSTOKEN",
            SinkCredential::ClientCredentials { .. } => "CLIENTCREDENTIALS",
        });
    let kanalen = crate::zgw::abonnement_of(state.catalog(), subscription).map(|abonnement| {
        abonnement
            .kanalen
            .into_iter()
            .map(|(naam, filters)| json!({"naam": naam, "filters": filters}))
            .collect::<Vec<_>>()
    });
    let mut view = json!({
        "id": subscription.id,
        "owner": subscription.owner,
        "label": subscription.label,
        "sink": knooppunt_delivery::redact_sink(&subscription.sink),
        "protocol": subscription.protocol().as_str(),
        "protocolsettings": settings,
        "source": subscription.source,
        "types": subscription.types,
        "filters": subscription.filters,
        "config": subscription.config.values(),
        "credentialtype": credential,
        "clientCertificate": subscription.client_certificate.is_some(),
        "state": subscription.state().as_str(),
    });
    if let Some(kanalen) = kanalen {
        view["kanalen"] = kanalen.into();
    }
    view
}

/// The type of the events [`send_test`] sends.
pub const TEST_TYPE: &str = "nl.knooppunt.test";

/// A test event sent by [`send_test`]: its id, and how the sink answered.
#[derive(Debug)]
pub struct TestSent {
    pub event_id: String,
    pub delivery: knooppunt_delivery::LastDelivery,
}

/// Sends a test event to subscription `id`'s sink once, as its deliveries go, for `caller`
/// (a subscriber that sees it), if it is an active push subscription; the attempt goes on
/// the audit trail (the event's id and how the sink answered).
pub async fn send_test(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    id: &str,
) -> Result<TestSent, Refused> {
    let subscription = state
        .subscriptions()
        .for_subscriber(caller, id, "send test events")?;
    if subscription.is_pull() {
        return Err(Refused::Conflict(format!(
            "subscription `{id}` is a pull subscription: it has no endpoint to send a test \
             event to; receive from it instead"
        )));
    }
    if subscription.state().as_str() != "active" {
        return Err(Refused::Conflict(format!(
            "subscription `{id}` is {}: test events go only to a sink that consented (an \
             active subscription)",
            subscription.state().as_str()
        )));
    }
    let now = knooppunt_store::now_ms();
    let event_id = uuid::Uuid::now_v7().to_string();
    let event = json!({
        "specversion": "1.0",
        "id": event_id,
        "source": "urn:knooppunt:hub",
        "type": TEST_TYPE,
        "subject": id,
        "time": knooppunt_event::timestamp::utc_timestamp(now),
        "datacontenttype": "application/json",
        "data": {
            "message": "Testbericht van Knooppunt: uw endpoint is bereikbaar. / A test event from Knooppunt: your endpoint is reachable.",
            "requestedBy": caller.name,
        }
    });
    let stored = knooppunt_store::StoredEvent {
        seq: 0,
        source: "urn:knooppunt:hub".into(),
        id: event_id.clone(),
        accepted_at: now,
        json: event.to_string(),
        extension_types: None,
    };
    let delivery = state.deliverer().send_test(&subscription, stored).await;
    let action = Action::new(
        ActionName::SubscriptionTest,
        format!("subscription/{id}"),
        json!({"event": event_id, "statusCode": delivery.status, "error": delivery.error}),
    )
    .concerning([subscription.owner.clone()]);
    state.audit().record(context, action).await;
    Ok(TestSent { event_id, delivery })
}

/// Whose subscriptions a list by `caller` shows: the owner it `asked` for, or (left out) its
/// own, every owner's for an administrator. Only an administrator lists another principal's.
pub fn list_scope<'a>(
    caller: &'a Principal,
    asked: Option<&'a str>,
) -> Result<Option<&'a str>, Refused> {
    if !caller.has(Role::Subscriber) && !caller.is_admin() {
        return Err(Refused::Forbidden(format!(
            "principal `{}` may not list subscriptions: that needs the `subscriber` role",
            caller.name
        )));
    }
    match asked {
        Some(owner) if !caller.is_admin() && owner != caller.name => {
            Err(Refused::Forbidden(format!(
                "only an administrator lists another principal's subscriptions; leave out \
                 owner (or give owner={}) for your own",
                caller.name
            )))
        }
        Some(owner) => Ok(Some(owner)),
        None => Ok((!caller.is_admin()).then_some(caller.name.as_str())),
    }
}

/// The sink of subscription `id` consents later, through the validation callback with
/// `token` (no principal: the secret in the URL, sent only to the sink, is the credential).
/// `Ok(None)`: there is no such callback.
pub async fn consent_by_callback(
    state: &AppState,
    context: &Context,
    id: &str,
    token: &str,
) -> Result<Option<Arc<Subscription>>, Refused> {
    let Some(updated) = state.subscriptions().consent_by_callback(id, token).await? else {
        return Ok(None);
    };
    // The sink acted, not a principal: the entry names none.
    let action = Action::new(
        ActionName::SubscriptionConsent,
        format!("subscription/{id}"),
        json!({"by": "the sink, through the validation callback", "state": updated.state().as_str()}),
    )
    .concerning([updated.owner.clone()]);
    state.audit().record(context, action).await;
    Ok(Some(updated))
}

/// An administrator records the consent of subscription `id`'s sink, agreed outside the
/// hub, without a handshake.
pub async fn consent_by_agreement(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    id: &str,
) -> Result<Arc<Subscription>, Refused> {
    if !caller.is_admin() {
        return Err(Refused::Forbidden(format!(
            "principal `{}` may not record a sink's consent by agreement: that needs the `admin` role",
            caller.name
        )));
    }
    let updated = match state.subscriptions().consent_by_agreement(id).await? {
        Agreed::Recorded(subscription) => subscription,
        Agreed::NoSubscription => {
            return Err(Refused::NotFound(Missing::Subscription(id.to_owned())));
        }
        Agreed::Disabled => {
            return Err(Refused::Conflict(
                "the subscription is disabled (its sink answered 410 Gone, or this hub cannot \
                 use its stored filters); give it a new sink or filters with PUT"
                    .into(),
            ));
        }
    };
    tracing::info!(subscription = %id, by = %caller.name, "Consent recorded by agreement.");
    let action = Action::new(
        ActionName::SubscriptionConsent,
        format!("subscription/{id}"),
        json!({"by": "agreement, recorded by an administrator"}),
    )
    .concerning([updated.owner.clone()]);
    state.audit().record(context, action).await;
    Ok(updated)
}

/// A new signing secret of subscription `id` (one `caller` may see): the subscription as it
/// is now, the secret (shown once, never recorded) and until when the previous one keeps
/// signing (milliseconds since the Unix epoch).
pub async fn rotate_signing_secret(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    id: &str,
) -> Result<(Arc<Subscription>, String, Option<u64>), Refused> {
    if !caller.has(Role::Subscriber) && !caller.is_admin() {
        return Err(Refused::Forbidden(format!(
            "principal `{}` may not rotate a subscription's signing secret: that needs the \
             `subscriber` role",
            caller.name
        )));
    }
    if !state
        .subscriptions()
        .get(id)
        .is_some_and(|subscription| subscriptions::visible_to(caller, &subscription))
    {
        return Err(Refused::NotFound(Missing::Subscription(id.to_owned())));
    }
    let (subscription, secret) = match state
        .subscriptions()
        .rotate_signing_secret(id, state.signing_overlap())
        .await
    {
        Ok(Some(rotated)) => rotated,
        Ok(None) => return Err(Refused::NotFound(Missing::Subscription(id.to_owned()))),
        Err(Rotation::InOverlap(until)) => {
            return Err(Refused::Conflict(format!(
                "the secret before the current one still signs until {} (the overlap the last \
                 rotation announced): rotate again after that, so that no secret stops \
                 signing earlier than its rotation said",
                knooppunt_event::timestamp::utc_timestamp(until)
            )));
        }
        Err(Rotation::Store(error)) => return Err(error.into()),
    };
    let until = subscription
        .signing
        .as_ref()
        .and_then(|signing| signing.previous.as_ref())
        .map(|(_, until)| *until);
    tracing::info!(subscription = %id, by = %caller.name, "Signing secret rotated.");
    let action = Action::new(
        ActionName::SubscriptionSigningSecretRotate,
        format!("subscription/{id}"),
        json!({"note": "a new signing secret (never recorded); the previous one signs during the overlap"}),
    );
    state.audit().record(context, action).await;
    Ok((subscription, secret, until))
}

impl std::fmt::Debug for Consent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consent").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for New<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("New").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Made {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Made").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Checked<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checked").finish_non_exhaustive()
    }
}

impl<F> std::fmt::Debug for Change<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Change")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
