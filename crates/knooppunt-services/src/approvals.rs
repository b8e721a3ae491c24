//! Approval by the data owner: the one writer of grants. For every approval-required
//! catalog entry that a subscription's filters can match, the subscription carries a grant
//! (`requested`, `granted`, `refused`, `revoked`), and events of the entry are routed only
//! to subscriptions whose grant is `granted` ([`Approvals::keep_granted`], a hash look-up
//! per matched subscription of a gated event; nothing for other events). A request is made
//! when a subscription is created or replaced and when an entry becomes approval-required
//! or changes scope; whether the filters "can match" is the filter crate's conservative
//! [`Criteria::can_match`](knooppunt_filter::Criteria::can_match) (a CESQL or `not` filter
//! can match anything of its source and types, so it is asked about). Routing never depends
//! on a request having been made: no grant, no delivery.
//!
//! Only the entry's owner or an admin decides, never the subscription's own owner. A
//! revocation stops delivery at once: a publish of gated events holds a pass of
//! [`Approvals::gate`] from before it reads the grants until its deliveries are on disk; a
//! revocation changes the table, then waits until every pass taken before is given back,
//! so every delivery routed under the old grant is on disk before it withdraws the queued
//! ones of the entry (dead letters, "approval revoked"). A pass costs two atomic additions
//! (no lock: publishes never wait for each other or for a revocation). A hub that learns of
//! another hub's revocation withdraws the same way after it reloads.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, RwLock};

use knooppunt_event::format::json::Identity;
use knooppunt_filter::Scope;
use knooppunt_store::{
    ApprovalPolicy, CatalogEntry, Decision, Grant, GrantState, Store, StoreError, StoredEvent,
    Subscription, TypeMatch, now_ms,
};

use crate::audit::{Action, Audit, Context, HUB};
use crate::catalog::Catalog;
use crate::identity::Principal;
use crate::subscriptions::{Redelivered, Subscriptions};

/// The longest reason a decision may give, in characters.
pub const MAX_REASON: usize = 1000;

pub use crate::refused::{Missing, Refused};

/// A decision as made: the grant, whom it concerns (the entry's owner and the subscriber),
/// and how many queued deliveries a revocation withdrew.
pub struct Decided {
    pub grant: Arc<Grant>,
    pub concerns: Vec<String>,
    pub withdrawn: u64,
}

/// Which grants a list shows.
#[derive(Debug, Default, Clone)]
pub struct Selection {
    pub state: Option<GrantState>,
    pub entry: Option<String>,
    pub subscription: Option<String>,
}

#[derive(Default)]
struct Grants {
    /// By entry, then subscription.
    by_key: BTreeMap<(String, String), Arc<Grant>>,
    /// The granted subscriptions of each entry: what routing asks.
    granted: HashMap<String, HashSet<String>>,
    /// The entries each subscription has a grant of: what its representation shows.
    of_subscription: HashMap<String, BTreeSet<String>>,
}

impl Grants {
    fn build(list: Vec<Grant>) -> Grants {
        let mut grants = Grants::default();
        for grant in list {
            grants.put(Arc::new(grant));
        }
        grants
    }

    fn put(&mut self, grant: Arc<Grant>) {
        let key = (grant.entry.clone(), grant.subscription.clone());
        if grant.state == GrantState::Granted {
            self.granted
                .entry(grant.entry.clone())
                .or_default()
                .insert(grant.subscription.clone());
        } else {
            self.ungrant(&grant.entry, &grant.subscription);
        }
        self.of_subscription
            .entry(grant.subscription.clone())
            .or_default()
            .insert(grant.entry.clone());
        self.by_key.insert(key, grant);
    }

    fn remove(&mut self, entry: &str, subscription: &str) {
        self.by_key
            .remove(&(entry.to_owned(), subscription.to_owned()));
        self.ungrant(entry, subscription);
        if let Some(entries) = self.of_subscription.get_mut(subscription) {
            entries.remove(entry);
            if entries.is_empty() {
                self.of_subscription.remove(subscription);
            }
        }
    }

    fn ungrant(&mut self, entry: &str, subscription: &str) {
        if let Some(set) = self.granted.get_mut(entry) {
            set.remove(subscription);
            if set.is_empty() {
                self.granted.remove(entry);
            }
        }
    }

    fn get(&self, entry: &str, subscription: &str) -> Option<&Arc<Grant>> {
        self.by_key
            .get(&(entry.to_owned(), subscription.to_owned()))
    }

    fn is_granted(&self, entry: &str, subscription: &str) -> bool {
        self.granted
            .get(entry)
            .is_some_and(|set| set.contains(subscription))
    }
}

pub struct Approvals {
    store: Arc<dyn Store>,
    catalog: Arc<Catalog>,
    subscriptions: Arc<Subscriptions>,
    audit: Arc<Audit>,
    grants: RwLock<Grants>,
    writes: tokio::sync::Mutex<()>,
    /// Passes held by publishes of gated events from routing until their deliveries are on
    /// disk; a change that takes a grant away waits for the passes taken before it.
    pub gate: knooppunt_delivery::Gate,
}

/// The scope of an entry's events, as the filter crate asks it.
pub fn scope_of(entry: &CatalogEntry) -> Scope<'_> {
    Scope {
        source_prefix: &entry.source_prefix,
        event_type: &entry.event_type,
        type_is_prefix: entry.type_match == TypeMatch::Prefix,
    }
}

impl Approvals {
    pub async fn load(
        store: Arc<dyn Store>,
        catalog: Arc<Catalog>,
        subscriptions: Arc<Subscriptions>,
        audit: Arc<Audit>,
    ) -> Result<Approvals, StoreError> {
        let grants = Grants::build(store.grants().await?);
        Ok(Approvals {
            store,
            catalog,
            subscriptions,
            audit,
            grants: RwLock::new(grants),
            writes: tokio::sync::Mutex::new(()),
            gate: knooppunt_delivery::Gate::default(),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Grants> {
        self.grants.read().expect("grants lock")
    }

    /// Reads the grants again (another hub changed them); the queued deliveries of grants
    /// that are no longer granted are withdrawn.
    pub async fn reload(&self) -> Result<(), StoreError> {
        let _writer = self.writes.lock().await;
        let loaded = Grants::build(self.store.grants().await?);
        let taken_away: Vec<(String, String)> = {
            let mut grants = self.grants.write().expect("grants lock");
            let taken = grants
                .granted
                .iter()
                .flat_map(|(entry, set)| set.iter().map(move |s| (entry.clone(), s.clone())))
                .filter(|(entry, subscription)| !loaded.is_granted(entry, subscription))
                .collect();
            *grants = loaded;
            taken
        };
        if !taken_away.is_empty() {
            self.gate.wait_for_earlier_passes().await;
        }
        for (entry, subscription) in taken_away {
            let reason = self
                .read()
                .get(&entry, &subscription)
                .map(|g| revocation_reason(&entry, g.decision.as_ref()))
                .unwrap_or_else(|| revocation_reason(&entry, None));
            self.withdraw(&entry, &subscription, &reason).await?;
            // As on the hub that decided: nothing taken before starts from now on.
            self.subscriptions.cut(&subscription).await;
        }
        Ok(())
    }

    /// Keeps, of the subscriptions each event was routed to, those holding a grant for
    /// every approval-required entry that covers it (`gated`; most events have none).
    pub fn keep_granted<'a>(
        &self,
        routed: impl Iterator<Item = (&'a [Arc<CatalogEntry>], &'a mut Vec<String>)>,
    ) {
        let grants = self.read();
        for (gated, subscriptions) in routed {
            if gated.is_empty() {
                continue;
            }
            subscriptions.retain(|s| gated.iter().all(|entry| grants.is_granted(&entry.id, s)));
        }
    }

    /// Whether `subscription` may receive an event of `source` and `event_type` now: it
    /// holds a grant for every approval-required entry that covers it.
    pub fn admits(&self, subscription: &str, source: &str, event_type: &str) -> bool {
        let covered = self.catalog.look_up(std::iter::once((source, event_type)));
        let Some(Some(covered)) = covered.first() else {
            return true;
        };
        let grants = self.read();
        covered
            .gated
            .iter()
            .all(|entry| grants.is_granted(&entry.id, subscription))
    }

    pub fn get(&self, entry: &str, subscription: &str) -> Option<Arc<Grant>> {
        self.read().get(entry, subscription).cloned()
    }

    /// The grants of a subscription, by entry.
    pub fn of_subscription(&self, id: &str) -> Vec<Arc<Grant>> {
        let grants = self.read();
        grants
            .of_subscription
            .get(id)
            .into_iter()
            .flatten()
            .filter_map(|entry| grants.get(entry, id).cloned())
            .collect()
    }

    /// Whether `principal` may see `grant`: an admin, the entry's owner, or the
    /// subscription's owner.
    pub fn visible_to(&self, principal: &Principal, grant: &Grant) -> bool {
        principal.is_admin()
            || self
                .catalog
                .get(&grant.entry)
                .is_some_and(|e| e.owner == principal.name)
            || self
                .subscriptions
                .get(&grant.subscription)
                .is_some_and(|s| s.owner == principal.name)
    }

    /// Up to `size` grants `principal` may see, chosen by `selection`, after `cursor` (an
    /// entry and a subscription), and whether there are more.
    pub fn page(
        &self,
        principal: &Principal,
        selection: &Selection,
        cursor: Option<(String, String)>,
        size: usize,
    ) -> (Vec<Arc<Grant>>, bool) {
        let grants = self.read();
        let start = match cursor {
            Some(key) => std::ops::Bound::Excluded(key),
            None => std::ops::Bound::Unbounded,
        };
        let mut chosen = grants
            .by_key
            .range((start, std::ops::Bound::Unbounded))
            .map(|(_, g)| g)
            .filter(|g| {
                selection.state.is_none_or(|s| g.state == s)
                    && selection.entry.as_ref().is_none_or(|e| &g.entry == e)
                    && selection
                        .subscription
                        .as_ref()
                        .is_none_or(|s| &g.subscription == s)
            })
            .filter(|g| self.visible_to(principal, g));
        let page: Vec<Arc<Grant>> = chosen.by_ref().take(size).cloned().collect();
        let more = chosen.next().is_some();
        (page, more)
    }

    /// Requests a grant of every approval-required entry that `subscription` (created or
    /// replaced) can now match, where it has none.
    pub async fn subscription_saved(&self, subscription: &Subscription) {
        let entries: Vec<Arc<CatalogEntry>> = self
            .catalog
            .gated()
            .into_iter()
            .filter(|e| self.subscriptions.can_match(&subscription.id, &scope_of(e)))
            .collect();
        for entry in entries {
            self.request(&entry, subscription).await;
        }
    }

    /// Requests a grant for every subscription that can match the events of `entry` (created
    /// or replaced), where it has none.
    pub async fn entry_saved(&self, entry: &CatalogEntry) {
        if entry.approval != ApprovalPolicy::ApprovalRequired {
            return;
        }
        for subscription in self.subscriptions.in_scope(&scope_of(entry)) {
            self.request(entry, &subscription).await;
        }
    }

    /// A request, unless there is a grant already; granted at once when the subscription is
    /// the entry owner's own. A failure is logged: routing needs no request (no grant, no
    /// delivery), and the next change of either asks again.
    async fn request(&self, entry: &CatalogEntry, subscription: &Subscription) {
        let _writer = self.writes.lock().await;
        if self.get(&entry.id, &subscription.id).is_some() {
            return;
        }
        let now = now_ms();
        let own = subscription.owner == entry.owner;
        let grant = Grant {
            entry: entry.id.clone(),
            subscription: subscription.id.clone(),
            state: if own {
                GrantState::Granted
            } else {
                GrantState::Requested
            },
            requested_at: now,
            decision: own.then(|| Decision {
                by: HUB.into(),
                at: now,
                reason: Some("the data owner's own subscription".into()),
            }),
        };
        match self.store.put_grant(&grant).await {
            Ok(()) => {
                tracing::info!(
                    entry = %entry.id, subscription = %subscription.id,
                    state = grant.state.as_str(), "Approval requested."
                );
                let state = grant.state;
                self.grants
                    .write()
                    .expect("grants lock")
                    .put(Arc::new(grant));
                let hub = Context {
                    actor: Some(HUB.into()),
                    ..Context::default()
                };
                let action = Action::new(
                    crate::audit::ActionName::ApprovalRequest,
                    format!("approval/{}/{}", entry.id, subscription.id),
                    serde_json::json!({"state": state.as_str(), "eventtype": entry.id,
                                       "subscription": subscription.id}),
                )
                .concerning([entry.owner.clone(), subscription.owner.clone()]);
                self.audit.record(&hub, action).await;
            }
            Err(error) => tracing::warn!(
                entry = %entry.id, subscription = %subscription.id, %error,
                "Storing an approval request failed; the next change of the subscription or \
                 entry asks again."
            ),
        }
    }

    /// Forgets the grants of a deleted subscription.
    pub async fn subscription_deleted(&self, id: &str) {
        let keys: Vec<(String, String)> = self
            .of_subscription(id)
            .iter()
            .map(|g| (g.entry.clone(), g.subscription.clone()))
            .collect();
        self.forget(keys).await;
    }

    /// Forgets the grants of a deleted entry.
    pub async fn entry_deleted(&self, id: &str) {
        let keys: Vec<(String, String)> = self
            .read()
            .by_key
            .keys()
            .filter(|(entry, _)| entry == id)
            .cloned()
            .collect();
        self.forget(keys).await;
    }

    async fn forget(&self, keys: Vec<(String, String)>) {
        let _writer = self.writes.lock().await;
        for (entry, subscription) in keys {
            match self.store.delete_grant(&entry, &subscription).await {
                Ok(_) => self
                    .grants
                    .write()
                    .expect("grants lock")
                    .remove(&entry, &subscription),
                Err(error) => tracing::warn!(
                    %entry, %subscription, %error, "Removing a grant failed; it stays listed."
                ),
            }
        }
    }

    /// `principal` decides on the grant of `entry` for `subscription`: `granted` (from any
    /// other state), `refused` (a request) or `revoked` (a grant), with a reason (required
    /// for refusing and revoking). A revocation withdraws the queued deliveries of the
    /// entry's events before it returns.
    pub async fn decide(
        &self,
        principal: &Principal,
        entry_id: &str,
        subscription_id: &str,
        state: GrantState,
        reason: Option<String>,
    ) -> Result<Decided, Refused> {
        let _writer = self.writes.lock().await;
        let not_found = || {
            Refused::NotFound(Missing::Approval {
                entry: entry_id.to_owned(),
                subscription: subscription_id.to_owned(),
            })
        };
        // The catalog is public, so who owns the entry is no secret: a principal that may not
        // decide learns that before whether the subscription has a grant.
        let entry = self
            .catalog
            .get(entry_id)
            .ok_or_else(|| Refused::NotFound(Missing::EventType(entry_id.to_owned())))?;
        if !principal.is_admin() && principal.name != entry.owner {
            return Err(Refused::Forbidden(format!(
                "event type {entry_id} is owned by `{}`: only its owner or an admin decides who \
                 receives its events",
                entry.owner
            )));
        }
        let existing = self.get(entry_id, subscription_id).ok_or_else(not_found)?;
        let subscriber = self
            .subscriptions
            .get(subscription_id)
            .map(|s| s.owner.clone());
        if subscriber.as_deref() == Some(principal.name.as_str()) {
            return Err(Refused::Forbidden(format!(
                "subscription {subscription_id} is principal `{}`'s own: a subscriber cannot \
                 decide on its own approval",
                principal.name
            )));
        }
        let reason = check_reason(state, reason)?;
        let allowed = match state {
            GrantState::Granted => existing.state != GrantState::Granted,
            GrantState::Refused => existing.state == GrantState::Requested,
            GrantState::Revoked => existing.state == GrantState::Granted,
            GrantState::Requested => {
                return Err(Refused::Invalid(
                    "state",
                    "must be `granted`, `refused` or `revoked`; a request is the hub's".into(),
                ));
            }
        };
        if !allowed {
            return Err(Refused::Conflict(format!(
                "the approval is `{}`, and `{}` does not follow it: grant a request or a \
                 refused or revoked approval, refuse a request, revoke a grant",
                existing.state.as_str(),
                state.as_str()
            )));
        }
        let mut grant = Grant {
            entry: existing.entry.clone(),
            subscription: existing.subscription.clone(),
            state,
            requested_at: existing.requested_at,
            decision: Some(Decision {
                by: principal.name.clone(),
                at: now_ms(),
                reason,
            }),
        };
        let mut withdrawn = 0;
        if state == GrantState::Revoked {
            // Linearizable: routing stops, what was routed under the grant is on disk and
            // withdrawn, then the subscription is cut; the moment of the cut is the decision's
            // time: after it no attempt of the entry's events starts on this hub (those that
            // started before may still arrive).
            let taken = |grants: &std::sync::RwLock<Grants>, grant: Arc<Grant>| {
                grants.write().expect("grants lock").put(grant);
            };
            taken(&self.grants, Arc::new(grant.clone()));
            self.gate.wait_for_earlier_passes().await;
            let reason = revocation_reason(entry_id, grant.decision.as_ref());
            let cut = async {
                let withdrawn = self.withdraw(entry_id, subscription_id, &reason).await?;
                let at = self.subscriptions.cut(subscription_id).await;
                if let Some(decision) = &mut grant.decision {
                    decision.at = at;
                }
                self.store.put_grant(&grant).await?;
                // Every other hub cuts it when it applies the change: the decision's time is
                // when all of them did (on one hub, the cut's).
                let behind = self.subscriptions.wait_for_other_hubs().await?;
                let all_cut = now_ms();
                if let Some(decision) = grant.decision.as_mut().filter(|d| d.at < all_cut)
                    && behind.is_empty()
                    && self.store.subscriptions_version().await? > 0
                {
                    decision.at = all_cut;
                    self.store.put_grant(&grant).await?;
                }
                Ok::<u64, StoreError>(withdrawn)
            };
            match cut.await {
                Ok(count) => withdrawn = count,
                Err(error) => {
                    // Not recorded: the grant stands as it was (what was withdrawn stays a
                    // dead letter, which its subscriber may redeliver).
                    taken(&self.grants, Arc::clone(&existing));
                    return Err(error.into());
                }
            }
        } else {
            self.store.put_grant(&grant).await?;
        }
        let grant = Arc::new(grant);
        self.grants
            .write()
            .expect("grants lock")
            .put(Arc::clone(&grant));
        tracing::info!(
            entry = entry_id, subscription = subscription_id, by = %principal.name,
            state = state.as_str(), "Approval decided."
        );
        Ok(Decided {
            grant,
            concerns: [Some(entry.owner.clone()), subscriber]
                .into_iter()
                .flatten()
                .collect(),
            withdrawn,
        })
    }

    /// Puts dead letter `seq` of subscription `id` back into its queue, unless its event is
    /// of an approval-required entry the subscription holds no grant for (a revoked one, say):
    /// the subscriber cannot undo a revocation by redelivering. Under the routing lock, so no
    /// revocation comes between the check and the queueing.
    pub async fn redeliver(&self, id: &str, seq: u64) -> Result<Redelivered, Refused> {
        let _pass = self.gate.enter();
        if let Some((_, Some(event))) = self.subscriptions.dead_letter(id, seq).await?
            && let Some(identity) = Identity::of_json(&event.json)
        {
            let covered = self.catalog.look_up(std::iter::once((
                event.source.as_str(),
                identity.ty.as_str(),
            )));
            let grants = self.read();
            let missing = covered
                .iter()
                .flatten()
                .flat_map(|c| &c.gated)
                .find(|entry| !grants.is_granted(&entry.id, id));
            if let Some(entry) = missing {
                let state = grants
                    .get(&entry.id, id)
                    .map_or("not requested", |g| g.state.as_str());
                return Err(Refused::Forbidden(format!(
                    "the event is of event type {} (`{}`), whose owner `{}` approves who receives \
                     it, and this subscription's approval is {state}: ask the owner to grant it \
                     first",
                    entry.id, entry.event_type, entry.owner
                )));
            }
        }
        Ok(self.subscriptions.redeliver(id, seq).await?)
    }

    /// Turns the queued deliveries of the entry's events to the subscription into dead
    /// letters.
    async fn withdraw(
        &self,
        entry: &str,
        subscription: &str,
        reason: &str,
    ) -> Result<u64, StoreError> {
        let Some(entry) = self.catalog.get(entry) else {
            return Ok(0);
        };
        let covered = move |event: &StoredEvent| {
            Identity::of_json(&event.json).is_some_and(|e| entry.covers(&event.source, &e.ty))
        };
        let withdrawn = self
            .store
            .withdraw(subscription, &covered, now_ms(), reason)
            .await?;
        if withdrawn > 0 {
            self.subscriptions.recall(subscription);
            tracing::info!(
                subscription,
                withdrawn,
                "Queued deliveries withdrawn: approval revoked."
            );
        }
        Ok(withdrawn)
    }
}

/// The dead letters' reason after a revocation.
fn revocation_reason(entry: &str, decision: Option<&Decision>) -> String {
    match decision {
        Some(Decision {
            by,
            reason: Some(why),
            ..
        }) => {
            format!("approval revoked: `{by}` revoked the approval of event type {entry} ({why})")
        }
        Some(Decision { by, .. }) => {
            format!("approval revoked: `{by}` revoked the approval of event type {entry}")
        }
        None => format!("approval revoked: event type {entry} is no longer approved"),
    }
}

/// A decision's reason: required to refuse or revoke, at most [`MAX_REASON`] characters.
fn check_reason(state: GrantState, reason: Option<String>) -> Result<Option<String>, Refused> {
    let reason = reason.filter(|r| !r.trim().is_empty());
    match &reason {
        None if matches!(state, GrantState::Refused | GrantState::Revoked) => {
            Err(Refused::Invalid(
                "reason",
                format!(
                    "is required to make an approval `{}`: say why, for the subscriber",
                    state.as_str()
                ),
            ))
        }
        Some(text) if text.chars().count() > MAX_REASON => Err(Refused::Invalid(
            "reason",
            format!("may have at most {MAX_REASON} characters"),
        )),
        _ => Ok(reason),
    }
}

impl std::fmt::Debug for Decided {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decided").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals").finish_non_exhaustive()
    }
}
