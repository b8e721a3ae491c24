//! The one writer of subscriptions. Every change to a subscription goes through
//! [`Subscriptions`], under one lock, in one order: the store first (durably), then the
//! registry (what routing and the API read), then the subscription's delivery worker. So the
//! store and the registry never disagree, whoever changes what (an API call, a sink's
//! consent, a 410 reported by a worker), and a change that the store refused changed
//! nothing. Reads take the registry without that lock.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};

use knooppunt_delivery::{
    AddressRefused, Deliverer, Gone, Handshake, Received, Settlement, TokenProblem,
};
use knooppunt_event::Event;
use knooppunt_filter::{Criteria, EvalLimits, Filter, Limits, Routed};
use knooppunt_store::{
    Consent, DeadLetter, DeliveryChange, Disabled, SigningSecrets, SinkCredential, Status, Store,
    StoreError, StoredEvent, Subscription, SubscriptionState, Validation, now_ms,
};

use crate::identity::Principal;
use crate::registry::{self, Registry};

mod consent;
use consent::{new_signing_secret, new_validation_token};
mod dead_letters;
mod pull;

/// How much one principal may subscribe: what its filters cost every published event is
/// bounded by how many it has and how large they are together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quotas {
    /// The most subscriptions one principal (owner) may have.
    pub max_subscriptions: usize,
    /// The most bytes of filters (as JSON) one principal's subscriptions may have together.
    pub max_filter_bytes: usize,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            max_subscriptions: 1_000,
            max_filter_bytes: 1024 * 1024,
        }
    }
}

pub use crate::refused::QuotaExceeded;
use crate::refused::{Missing, Refused};

/// How often a subscription's filters ran out of their evaluation budget, since the hub
/// started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget {
    pub count: u64,
    /// Milliseconds since the Unix epoch.
    pub last_at: u64,
    /// Which budget the last one ran out of.
    pub last_exceeded: knooppunt_filter::Exceeded,
}

/// The subscriptions: their store, their registry and their workers, changed together.
pub struct Subscriptions {
    store: Arc<dyn Store>,
    registry: RwLock<Registry>,
    /// Serialises changes so that the store and the registry change in the same order.
    writes: tokio::sync::Mutex<()>,
    deliverer: Deliverer,
    limits: Limits,
    quotas: Quotas,
    /// Subscriptions whose filters ran out of budget on some event.
    over_budget: std::sync::Mutex<std::collections::HashMap<String, OverBudget>>,
    /// The principals an admin disabled: their subscriptions are suspended (kept, shown,
    /// but not routed to, delivered, received from or read) until they are enabled again.
    suspended_owners: RwLock<HashSet<String>>,
    /// Where the owners are told of trouble with their subscriptions.
    notices: crate::notices::Notices,
}

/// A subscription as replaced, and whether its sink must consent again.
#[derive(Debug)]
pub struct Replaced {
    pub subscription: Arc<Subscription>,
    pub needs_consent: bool,
}

/// What [`Subscriptions::consent_by_agreement`] found.
#[derive(Debug)]
pub enum Agreed {
    /// The subscription is active, by agreement.
    Recorded(Arc<Subscription>),
    /// The subscription is disabled: it needs a new sink (or usable filters) first.
    Disabled,
    NoSubscription,
}

/// Why a pull operation was refused.
#[derive(Debug, thiserror::Error)]
pub enum PullRefused {
    #[error("there is no such subscription")]
    NoSubscription,
    #[error(
        "this is a push subscription: the hub sends its events to its sink; create one with \
         config.delivery `pull` to receive events"
    )]
    Push,
    #[error("the subscription is disabled: {0}")]
    Disabled(String),
    #[error("the subscription is suspended: {0}")]
    Suspended(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl PullRefused {
    /// The refusal of a pull of subscription `id`, as every surface answers it.
    pub fn about(self, id: &str) -> Refused {
        match self {
            PullRefused::NoSubscription => Refused::NotFound(Missing::Subscription(id.to_owned())),
            PullRefused::Store(error) => Refused::Store(error),
            other => Refused::Conflict(format!("subscription `{id}`: {other}")),
        }
    }
}

/// Why a signing secret was not rotated.
#[derive(Debug, thiserror::Error)]
pub enum Rotation {
    /// The secret before the current one still signs until then (milliseconds since the
    /// Unix epoch), as the last rotation said.
    #[error("the secret before the current one signs until {0}")]
    InOverlap(u64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What [`Subscriptions::redeliver`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Redelivered {
    Queued,
    /// The subscription is disabled (its sink answered 410): nothing would be delivered.
    Disabled,
    /// There is no such subscription (any more).
    NoSubscription,
    /// The subscription has no such dead letter.
    NoDeadLetter,
}

impl Subscriptions {
    /// Deliveries of subscription `id` were withdrawn: its worker gives back what it leased
    /// ahead ([`Deliverer::recall`]).
    pub fn recall(&self, id: &str) {
        self.deliverer.recall(id);
    }

    /// Loads the stored subscriptions and starts their workers. One whose filters or
    /// `config` this hub cannot use is disabled, saying why, in the store too.
    /// Loads the subscriptions; those of `suspended_owners` (disabled principals) are
    /// suspended from the start.
    pub async fn load(
        store: Arc<dyn Store>,
        deliverer: Deliverer,
        limits: Limits,
        quotas: Quotas,
        suspended_owners: HashSet<String>,
        notices: crate::notices::Notices,
    ) -> Result<Subscriptions, StoreError> {
        let (mut registry, refused) = Registry::load(store.subscriptions().await?, &limits);
        let suspended: Vec<Subscription> = registry
            .all()
            .filter(|s| suspended_owners.contains(&s.owner))
            .map(|s| Subscription::clone(s))
            .collect();
        for subscription in suspended {
            registry.put_unrouted(subscription);
        }
        for subscription in &refused {
            store.update_subscription(subscription).await?;
            if let Status::Disabled(why) = &subscription.status {
                notices.disabled(&subscription.id, why.reason());
            }
            tracing::warn!(
                subscription = %subscription.id,
                owner = %subscription.owner,
                reason = match &subscription.status {
                Status::Disabled(why) => why.reason(),
                _ => "",
            },
                "Subscription disabled: this hub cannot use its stored filters or config."
            );
        }
        for subscription in registry.all() {
            if !suspended_owners.contains(&subscription.owner) {
                deliverer.sync(subscription);
            }
        }
        tracing::info!(subscriptions = registry.len(), "Subscriptions loaded.");
        Ok(Subscriptions {
            store,
            registry: RwLock::new(registry),
            writes: tokio::sync::Mutex::new(()),
            deliverer,
            limits,
            quotas,
            over_budget: Default::default(),
            suspended_owners: RwLock::new(suspended_owners),
            notices,
        })
    }

    /// Why subscription `subscription` is suspended, if it is: its owner is disabled.
    pub fn suspension(&self, subscription: &Subscription) -> Option<String> {
        self.suspended_owners
            .read()
            .expect("suspended lock")
            .contains(&subscription.owner)
            .then(|| {
                format!(
                    "its owner, principal `{}`, is disabled: nothing is routed to it, delivered, \
                     received or read until an admin enables the principal again",
                    subscription.owner
                )
            })
    }

    /// The disabled principals are now `owners`: the subscriptions of those newly disabled
    /// are suspended at once (no longer routed to; their workers stop, their long polls
    /// end), those of principals enabled again resume. Returns how many changed.
    pub async fn suspend_owners(&self, owners: HashSet<String>) -> usize {
        let _writer = self.writes.lock().await;
        let before = std::mem::replace(
            &mut *self.suspended_owners.write().expect("suspended lock"),
            owners.clone(),
        );
        let changed: Vec<Arc<Subscription>> = self
            .read()
            .all()
            .filter(|s| before.contains(&s.owner) != owners.contains(&s.owner))
            .cloned()
            .collect();
        for subscription in &changed {
            self.file(Subscription::clone(subscription));
            if owners.contains(&subscription.owner) {
                // Nothing of it starts from now on (pushed or pulled).
                self.deliverer.cut(&subscription.id).await;
            }
        }
        if !changed.is_empty() {
            tracing::info!(
                changed = changed.len(),
                suspended = owners.len(),
                "Subscriptions suspended or resumed: a principal was disabled or enabled."
            );
        }
        changed.len()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.registry.read().expect("registry lock")
    }

    pub fn get(&self, id: &str) -> Option<Arc<Subscription>> {
        self.read().get(id).cloned()
    }

    /// Subscription `id` if `principal` may `action` on it ("replay events"): a subscriber
    /// (or an admin) that sees it. The one rule of every read and act on a subscription's
    /// events (pull, the event stream, replays, dead letters).
    pub fn for_subscriber(
        &self,
        principal: &Principal,
        id: &str,
        action: &str,
    ) -> Result<Arc<Subscription>, Refused> {
        principal
            .may(crate::identity::Role::Subscriber, action)
            .map_err(Refused::Forbidden)?;
        self.get(id)
            .filter(|subscription| visible_to(principal, subscription))
            .ok_or_else(|| Refused::NotFound(Missing::Subscription(id.to_owned())))
    }

    /// The principal whose subscription `id` is, or was before it was deleted.
    pub async fn owner_of(&self, id: &str) -> Result<Option<String>, StoreError> {
        if let Some(subscription) = self.get(id) {
            return Ok(Some(subscription.owner.clone()));
        }
        self.store.former_owner(id).await
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Subscription `id` with its routing criteria (its filters read again).
    pub fn with_criteria(&self, id: &str) -> Option<(Arc<Subscription>, Criteria)> {
        let subscription = self.get(id)?;
        let criteria = registry::criteria(&subscription, &self.limits).ok()?;
        Some((subscription, criteria))
    }

    /// Up to `size` subscriptions after `cursor` in id order, of `owner` if given, and whether
    /// there are more.
    pub fn page(
        &self,
        selection: &crate::registry::Selection<'_>,
        cursor: Option<&str>,
        size: usize,
    ) -> (Vec<Arc<Subscription>>, bool) {
        self.read().page(selection, cursor, size)
    }

    /// The routed (not disabled) subscriptions that can match some event of `scope`.
    /// The subscriptions of principal `owner`.
    pub fn owned_by(&self, owner: &str) -> Vec<Arc<Subscription>> {
        self.read()
            .all()
            .filter(|s| s.owner == owner)
            .cloned()
            .collect()
    }

    pub fn in_scope(&self, scope: &knooppunt_filter::Scope<'_>) -> Vec<Arc<Subscription>> {
        self.read().in_scope(scope)
    }

    /// Whether routed subscription `id` can match some event of `scope`.
    pub fn can_match(&self, id: &str, scope: &knooppunt_filter::Scope<'_>) -> bool {
        self.read().can_match(id, scope)
    }

    /// How many subscriptions are in each state.
    pub fn count_by_state(&self) -> std::collections::BTreeMap<&'static str, u64> {
        let mut states = std::collections::BTreeMap::new();
        for subscription in self.read().all() {
            *states.entry(subscription.state().as_str()).or_insert(0) += 1;
        }
        states
    }

    /// Routes each event in one look at the registry: its candidates are evaluated here
    /// until they have cost `allowance` units together; what is left is handed back, with a
    /// copy of its criteria, to evaluate off the caller's thread (`ingest::route`).
    /// `observe` is told how long each event took.
    pub fn route<'a>(
        &self,
        events: impl Iterator<Item = &'a Event>,
        limits: EvalLimits,
        allowance: u64,
        mut observe: impl FnMut(std::time::Duration),
    ) -> Vec<Routed<String>> {
        let registry = self.read();
        let mut left = allowance;
        events
            .map(|event| {
                let started = std::time::Instant::now();
                let routed = registry.route(event, limits, left);
                left = left.saturating_sub(routed.spent);
                observe(started.elapsed());
                routed
            })
            .collect()
    }

    /// Notes that these subscriptions' filters ran out of an evaluation budget (which) at
    /// `at`.
    pub fn note_over_budget(&self, ids: &[(String, knooppunt_filter::Exceeded)], at: u64) {
        let registry = self.read();
        let mut over = self.over_budget.lock().expect("over-budget lock");
        for (id, exceeded) in ids {
            // Only subscriptions that still exist: the map stays as small as the registry.
            if registry.get(id).is_some() {
                let entry = over.entry(id.clone()).or_insert(OverBudget {
                    count: 0,
                    last_at: at,
                    last_exceeded: *exceeded,
                });
                entry.count += 1;
                entry.last_at = at;
                entry.last_exceeded = *exceeded;
            }
        }
    }

    /// How often subscription `id`'s filters ran out of budget, if ever.
    pub fn over_budget(&self, id: &str) -> Option<OverBudget> {
        self.over_budget
            .lock()
            .expect("over-budget lock")
            .get(id)
            .copied()
    }

    /// Whether `subscription` (new, or replacing the one of its id) keeps its owner within
    /// the quotas; what to do when not. Checked again under the writer's lock as it is
    /// stored.
    pub fn check_quotas(&self, subscription: &Subscription) -> Result<(), QuotaExceeded> {
        let bytes = |s: &Subscription| {
            s.filters
                .iter()
                .map(|filter| filter.to_string().len())
                .sum::<usize>()
        };
        let registry = self.read();
        let others: Vec<&Arc<Subscription>> = registry
            .all()
            .filter(|s| s.owner == subscription.owner && s.id != subscription.id)
            .collect();
        let Quotas {
            max_subscriptions,
            max_filter_bytes,
        } = self.quotas;
        if others.len() + 1 > max_subscriptions {
            return Err(QuotaExceeded(format!(
                "principal `{}` has {} subscriptions, the most one principal may have (quota \
                 filters.max_subscriptions_per_principal); delete one it no longer needs first",
                subscription.owner,
                others.len()
            )));
        }
        let total = others.iter().map(|s| bytes(s)).sum::<usize>() + bytes(subscription);
        if total > max_filter_bytes {
            return Err(QuotaExceeded(format!(
                "principal `{}` would have {total} bytes of filters in its subscriptions, more \
                 than the {max_filter_bytes} one principal may have (quota \
                 filters.max_filter_bytes_per_principal); use smaller filters (IN lists, \
                 `types`, prefixes) or delete subscriptions it no longer needs",
                subscription.owner
            )));
        }
        Ok(())
    }

    /// Puts a changed subscription into the registry and its worker; the store has it.
    fn file(&self, subscription: Subscription) -> Arc<Subscription> {
        if self
            .suspended_owners
            .read()
            .expect("suspended lock")
            .contains(&subscription.owner)
        {
            let id = subscription.id.clone();
            let shared = self
                .registry
                .write()
                .expect("registry lock")
                .put_unrouted(subscription);
            self.deliverer.remove(&id);
            return shared;
        }
        let criteria = registry::criteria(&subscription, &self.limits);
        let mut registry = self.registry.write().expect("registry lock");
        let shared = match criteria {
            Ok(criteria) => registry.put(subscription, criteria),
            // Stored filters this hub cannot read only come from start-up, which disabled
            // the subscription; keep it visible, unrouted.
            Err(errors) => {
                let mut disabled = subscription;
                if disabled.state() != SubscriptionState::Disabled {
                    let why = errors.iter().map(ToString::to_string).collect::<Vec<_>>();
                    disabled.status = Status::Disabled(Disabled::Unusable(format!(
                        "this hub cannot use the stored filters ({}); replace the \
                         subscription with filters within its limits",
                        why.join("; ")
                    )));
                }
                registry.put_unrouted(disabled)
            }
        };
        drop(registry);
        self.deliverer.sync(&shared);
        shared
    }

    /// Stores a new subscription (its criteria already checked), then routes to it.
    /// Refused, changing nothing, when it takes its owner past the [`Quotas`].
    pub async fn create<E: From<StoreError> + From<QuotaExceeded>>(
        &self,
        subscription: Subscription,
        criteria: Criteria,
    ) -> Result<Arc<Subscription>, E> {
        self.create_with(subscription, criteria, false).await
    }

    /// Stores a new subscription whose sink agreed already, by its protocol's own check
    /// (a ZGW abonnement's callback took the test notificatie): active at once.
    pub async fn create_agreed<E: From<StoreError> + From<QuotaExceeded>>(
        &self,
        subscription: Subscription,
        criteria: Criteria,
    ) -> Result<Arc<Subscription>, E> {
        self.create_with(subscription, criteria, true).await
    }

    async fn create_with<E: From<StoreError> + From<QuotaExceeded>>(
        &self,
        mut subscription: Subscription,
        criteria: Criteria,
        agreed: bool,
    ) -> Result<Arc<Subscription>, E> {
        // Every new push subscription waits for its sink's consent (a pull subscription's
        // consumer calls the hub: there is no one to ask), and has a secret its deliveries
        // are signed with.
        if agreed {
            subscription.status = Status::Active(Consent {
                by: Some(Validation::Agreement),
                allowed_rate: None,
            });
            subscription.validation_token = None;
        } else if subscription.is_pull() {
            subscription.status = Status::Active(Consent::default());
            subscription.validation_token = None;
        } else {
            subscription.status = Status::Pending { problem: None };
            subscription.validation_token = Some(new_validation_token());
        }
        subscription.signing = Some(SigningSecrets {
            current: new_signing_secret(),
            previous: None,
        });
        let _writer = self.writes.lock().await;
        self.check_quotas(&subscription)?;
        self.store.insert_subscription(&subscription).await?;
        let shared = self
            .registry
            .write()
            .expect("registry lock")
            .put(subscription, criteria);
        self.deliverer.sync(&shared);
        Ok(shared)
    }

    /// Replaces subscription `id` with what `change` makes of the current one, unless it
    /// refuses (its error is returned and nothing changes) or the replacement takes its owner
    /// past the [`Quotas`]. `Ok(None)` when there is none.
    ///
    /// The same sink keeps its consent (or its refusal, or its 410): the replacement gets
    /// the existing subscription's state and consent. A new sink, or a subscription
    /// disabled for its stored filters, needs consent again (`needs_consent`: the caller
    /// runs the handshake).
    pub async fn replace<E: From<StoreError> + From<QuotaExceeded>>(
        &self,
        id: &str,
        change: impl FnOnce(&Subscription) -> Result<(Subscription, Criteria), E>,
    ) -> Result<Option<Replaced>, E> {
        self.replace_with(id, change, false).await
    }

    /// Replaces subscription `id` whose (new) sink agreed already, by its protocol's own
    /// check (a ZGW abonnement's callback took the test notificatie): active at once.
    pub async fn replace_agreed<E: From<StoreError> + From<QuotaExceeded>>(
        &self,
        id: &str,
        change: impl FnOnce(&Subscription) -> Result<(Subscription, Criteria), E>,
    ) -> Result<Option<Replaced>, E> {
        self.replace_with(id, change, true).await
    }

    async fn replace_with<E: From<StoreError> + From<QuotaExceeded>>(
        &self,
        id: &str,
        change: impl FnOnce(&Subscription) -> Result<(Subscription, Criteria), E>,
        agreed: bool,
    ) -> Result<Option<Replaced>, E> {
        let _writer = self.writes.lock().await;
        let Some(existing) = self.get(id) else {
            return Ok(None);
        };
        let (mut replacement, criteria) = change(&existing)?;
        debug_assert_eq!(replacement.id, id);
        // The signing secrets are the hub's, changed only by a rotation.
        replacement.signing.clone_from(&existing.signing);
        let needs_consent = !agreed
            && !replacement.is_pull()
            && (replacement.sink != existing.sink
                || existing.is_pull()
                || matches!(existing.status, Status::Disabled(Disabled::Unusable(_))));
        if agreed {
            replacement.status = Status::Active(Consent {
                by: Some(Validation::Agreement),
                allowed_rate: None,
            });
            replacement.validation_token = None;
        } else if replacement.is_pull() {
            replacement.status = Status::Active(Consent::default());
            replacement.validation_token = None;
        } else if needs_consent {
            replacement.status = Status::Pending { problem: None };
            replacement.validation_token = Some(new_validation_token());
        } else {
            replacement.status = existing.status.clone();
            replacement
                .validation_token
                .clone_from(&existing.validation_token);
        }
        self.check_quotas(&replacement)?;
        if !self.store.update_subscription(&replacement).await? {
            return Ok(None);
        }
        let shared = self
            .registry
            .write()
            .expect("registry lock")
            .put(replacement, criteria);
        self.deliverer.sync(&shared);
        Ok(Some(Replaced {
            subscription: shared,
            needs_consent,
        }))
    }

    /// Changes the current subscription `id` in place; `change` says whether it changed
    /// anything (if not, nothing is written). Returns the subscription as it is now.
    pub async fn update(
        &self,
        id: &str,
        change: impl FnOnce(&mut Subscription) -> bool,
    ) -> Result<Option<Arc<Subscription>>, StoreError> {
        let _writer = self.writes.lock().await;
        let Some(current) = self.get(id) else {
            return Ok(None);
        };
        let mut changed = Subscription::clone(&current);
        if !change(&mut changed) {
            return Ok(Some(current));
        }
        changed.updated_at = now_ms();
        if !self.store.update_subscription(&changed).await? {
            return Ok(None);
        }
        let same_criteria = changed.source == current.source
            && changed.types == current.types
            && changed.filters == current.filters;
        if same_criteria && current.state() != SubscriptionState::Disabled {
            // A change of status (consent): the index keeps the criteria it has.
            let shared = self
                .registry
                .write()
                .expect("registry lock")
                .refresh(changed);
            self.deliverer.sync(&shared);
            return Ok(Some(shared));
        }
        Ok(Some(self.file(changed)))
    }

    /// Deletes subscription `id`, with its queue and dead letters, if `allowed` says so of
    /// it. Returns what was deleted; `None` when there is none (or it is not allowed).
    pub async fn delete(
        &self,
        id: &str,
        allowed: impl FnOnce(&Subscription) -> bool,
    ) -> Result<Option<Subscription>, StoreError> {
        let _writer = self.writes.lock().await;
        if !self.get(id).is_some_and(|existing| allowed(&existing)) {
            return Ok(None);
        }
        let Some(deleted) = self.store.delete_subscription(id).await? else {
            return Ok(None);
        };
        self.registry.write().expect("registry lock").remove(id);
        self.over_budget
            .lock()
            .expect("over-budget lock")
            .remove(id);
        self.deliverer.remove(id);
        Ok(Some(deleted))
    }

    /// Brings the registry and the workers up to the store's subscriptions, which another
    /// hub sharing the store changed; returns how many changed here.
    pub async fn resync(&self) -> Result<usize, StoreError> {
        let _writer = self.writes.lock().await;
        let stored = self.store.subscriptions().await?;
        let ids: std::collections::HashSet<String> = stored.iter().map(|s| s.id.clone()).collect();
        let mut changed = 0;
        for subscription in stored {
            if self
                .get(&subscription.id)
                .is_none_or(|current| *current != subscription)
            {
                self.file(subscription);
                changed += 1;
            }
        }
        let gone: Vec<String> = self
            .read()
            .all()
            .filter(|s| !ids.contains(&s.id))
            .map(|s| s.id.clone())
            .collect();
        for id in gone {
            self.registry.write().expect("registry lock").remove(&id);
            self.deliverer.remove(&id);
            changed += 1;
        }
        Ok(changed)
    }

    /// Acts on a 410 a worker reported: a subscription whose sink is still the one that
    /// answered is disabled (in the store, then its queue retired to dead letters, then the
    /// registry); one given another sink meanwhile keeps it, and its worker starts again.
    /// Returns whether it disabled the subscription.
    pub async fn gone(&self, gone: &Gone) -> bool {
        let _writer = self.writes.lock().await;
        let Some(current) = self.get(&gone.subscription) else {
            return false; // deleted meanwhile
        };
        if current.sink != gone.sink || current.state() == SubscriptionState::Disabled {
            // Replaced with another sink (or already disabled): the 410 is the old sink's.
            self.deliverer.restart(&current);
            return false;
        }
        match self.disable_gone(&current).await {
            Ok(()) => true,
            Err(error) => {
                tracing::error!(subscription = %gone.subscription, %error, "Disabling a subscription after 410 failed; its worker starts again.");
                self.deliverer.restart(&current);
                false
            }
        }
    }

    async fn disable_gone(&self, current: &Subscription) -> Result<(), StoreError> {
        let mut disabled = current.clone();
        disabled.status = Status::Disabled(Disabled::Gone);
        disabled.updated_at = now_ms();
        self.store.update_subscription(&disabled).await?;
        let retire = DeliveryChange::Retire {
            subscription: disabled.id.clone(),
            at: now_ms(),
            reason: "the sink answered 410 Gone: the subscription is disabled".into(),
        };
        self.store.record(vec![retire]).await?;
        let id = disabled.id.clone();
        let sink = knooppunt_delivery::redact_sink(&disabled.sink);
        self.file(disabled);
        self.deliverer.remove(&id);
        tracing::warn!(subscription = %id, %sink, "The sink answered 410 Gone; the subscription is disabled and its pending deliveries are dead letters.");
        self.notices.disabled(
            &id,
            "the sink answered 410 Gone: the subscription is disabled and its pending \
             deliveries are dead letters; replace the subscription with a sink that takes them",
        );
        Ok(())
    }
}

/// A principal limited to some type prefixes must constrain `type` to them, through `types`
/// or an `exact` or `prefix` filter on `type`.
pub fn may_subscribe(
    principal: &Principal,
    types: Option<&[String]>,
    criteria: &Criteria,
) -> Result<(), String> {
    let prefixes = &principal.subscribe_type_prefixes;
    if prefixes.is_empty() || principal.is_admin() {
        return Ok(());
    }
    let allowed = |ty: &str| {
        prefixes
            .iter()
            .any(|prefix| ty.starts_with(prefix.as_str()))
    };
    let listed = prefixes.join("`, `");
    if let Some(types) = types.filter(|types| !types.is_empty()) {
        return match types.iter().find(|ty| !allowed(ty)) {
            None => Ok(()),
            Some(ty) => Err(format!(
                "principal `{}` may not subscribe to type `{ty}`: allowed type prefixes are `{listed}`",
                principal.name
            )),
        };
    }
    fn constrained(filters: &[Filter], allowed: &dyn Fn(&str) -> bool) -> bool {
        filters.iter().any(|filter| match filter {
            Filter::Exact(map) | Filter::Prefix(map) => map.get("type").is_some_and(|t| allowed(t)),
            Filter::All(inner) => constrained(inner, allowed),
            // Every branch must hold: an event matches through one of them.
            Filter::Any(inner) => {
                !inner.is_empty()
                    && inner
                        .iter()
                        .all(|branch| constrained(std::slice::from_ref(branch), allowed))
            }
            _ => false,
        })
    }
    if constrained(&criteria.filters, &allowed) {
        return Ok(());
    }
    Err(format!(
        "principal `{}` may only subscribe to types starting with `{listed}`: set `types`, or an \
         `exact` or `prefix` filter on `type`, within those",
        principal.name
    ))
}

/// Whether `principal` sees (and may change) `subscription`: its owner, or an admin.
pub fn visible_to(principal: &Principal, subscription: &Subscription) -> bool {
    principal.is_admin() || subscription.owner == principal.name
}

impl std::fmt::Debug for Subscriptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriptions").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
