//! The subscriptions in memory, with the matching index built from them. The store is the
//! truth: the registry is loaded from it at start-up and changed only after the store has
//! durably accepted a change.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use knooppunt_event::Event;
use knooppunt_filter::{
    Criteria, EvalLimits, Filter, FilterError, Limits, MatchIndex, Routed, Scope,
};
use knooppunt_store::{Disabled, Status, Subscription, SubscriptionState};

/// Which subscriptions a listing shows.
#[derive(Debug, Default, Clone, Copy)]
pub struct Selection<'a> {
    /// Only this principal's.
    pub owner: Option<&'a str>,
    /// Only those in this state.
    pub state: Option<SubscriptionState>,
    /// Only those with this text (compared without case) in their id, owner, sink as a read
    /// shows it (its secrets `********`), label or one of their types.
    pub search: Option<&'a str>,
}

impl Selection<'_> {
    /// Whether `s` is selected; `search` is [`Selection::search`] in lower case (made once
    /// per listing, not per subscription). A search sees exactly what a read shows: the
    /// sink's write-only parts (query values, a password) are not searched, or a search
    /// would tell them a character at a time.
    fn selects(&self, s: &Subscription, search: Option<&str>) -> bool {
        self.owner.is_none_or(|owner| s.owner == owner)
            && self.state.is_none_or(|state| s.state() == state)
            && search.is_none_or(|search| {
                let sink = knooppunt_delivery::redact_sink(&s.sink);
                [s.id.as_str(), s.owner.as_str(), sink.as_str()]
                    .into_iter()
                    .chain(s.label.as_deref())
                    .chain(s.types.iter().flatten().map(String::as_str))
                    .any(|text| text.to_lowercase().contains(search))
            })
    }
}

#[derive(Debug, Default)]
pub struct Registry {
    /// Shared with the subscriptions' delivery workers: one copy each.
    subscriptions: BTreeMap<String, Arc<Subscription>>,
    index: MatchIndex<String>,
    /// Each owner's tenant number in the index (whose subscriptions share one evaluation
    /// budget per event); numbers are never reused.
    tenants: std::collections::HashMap<String, u32>,
}

/// The routing criteria of a stored subscription, its filters read within `limits`.
pub fn criteria(
    subscription: &Subscription,
    limits: &Limits,
) -> Result<Criteria, Vec<FilterError>> {
    Ok(Criteria {
        source: subscription.source.clone(),
        types: subscription.types().map(<[String]>::to_vec),
        filters: Filter::list_from_json(&subscription.filters, "filters", limits)?,
    })
}

impl Registry {
    /// Builds the registry from the stored subscriptions. A subscription whose filters or
    /// `config` this hub refuses (beyond its limits, or unreadable by this version) is not
    /// routed to: it is returned disabled, with the reason, for the caller to store.
    pub fn load(
        subscriptions: Vec<Subscription>,
        limits: &Limits,
    ) -> (Registry, Vec<Subscription>) {
        let mut registry = Registry::default();
        let mut refused = Vec::new();
        for mut subscription in subscriptions {
            let config = subscription.config.unreadable();
            let problem = match (criteria(&subscription, limits), config) {
                (Ok(criteria), None) => {
                    registry.put(subscription, criteria);
                    continue;
                }
                (Err(errors), _) => format!(
                    "disabled at start-up: the filters break this hub's limits or cannot be read \
                     ({}); replace the subscription with filters within the limits",
                    errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                (Ok(_), Some(errors)) => format!(
                    "disabled at start-up: this hub cannot read the stored config ({}); replace \
                     the subscription with a valid config",
                    errors
                        .iter()
                        .map(|e| format!("config.{}: {}", e.key, e.message))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            };
            subscription.status = Status::Disabled(Disabled::Unusable(problem));
            refused.push(subscription.clone());
            registry.put_unrouted(subscription);
        }
        (registry, refused)
    }

    /// Files a subscription; returns the shared copy.
    pub fn put(&mut self, subscription: Subscription, criteria: Criteria) -> Arc<Subscription> {
        let subscription = Arc::new(subscription);
        // A disabled subscription is never routed to, so it is not in the index at all.
        if subscription.state() == SubscriptionState::Disabled {
            self.index.remove(&subscription.id);
        } else {
            let next = self.tenants.len() as u32;
            let tenant = *self
                .tenants
                .entry(subscription.owner.clone())
                .or_insert(next);
            self.index
                .insert_for(subscription.id.clone(), criteria, tenant);
        }
        self.subscriptions
            .insert(subscription.id.clone(), Arc::clone(&subscription));
        subscription
    }

    /// Puts a subscription whose criteria (source, types, filters) did not change and that
    /// was routed before: its index entry stays as it is (removed if it is now disabled), so
    /// nothing is parsed again.
    pub fn refresh(&mut self, subscription: Subscription) -> Arc<Subscription> {
        if subscription.state() == SubscriptionState::Disabled {
            self.index.remove(&subscription.id);
        }
        let subscription = Arc::new(subscription);
        self.subscriptions
            .insert(subscription.id.clone(), Arc::clone(&subscription));
        subscription
    }

    /// Keeps a disabled subscription visible without filing it in the index.
    pub fn put_unrouted(&mut self, subscription: Subscription) -> Arc<Subscription> {
        self.index.remove(&subscription.id);
        let subscription = Arc::new(subscription);
        self.subscriptions
            .insert(subscription.id.clone(), Arc::clone(&subscription));
        subscription
    }

    pub fn remove(&mut self, id: &str) {
        self.index.remove(&id.to_owned());
        self.subscriptions.remove(id);
    }

    pub fn get(&self, id: &str) -> Option<&Arc<Subscription>> {
        self.subscriptions.get(id)
    }

    pub fn len(&self) -> usize {
        self.subscriptions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.subscriptions.is_empty()
    }

    /// Up to `size` subscriptions after `cursor` in id order, of `owner` if given, and whether
    /// there are more.
    pub fn page(
        &self,
        selection: &Selection<'_>,
        cursor: Option<&str>,
        size: usize,
    ) -> (Vec<Arc<Subscription>>, bool) {
        let start = cursor.map_or(Bound::Unbounded, |c| Bound::Excluded(c.to_owned()));
        let search = selection.search.map(str::to_lowercase);
        let mut visible = self
            .subscriptions
            .range((start, Bound::Unbounded))
            .map(|(_, s)| s)
            .filter(|s| selection.selects(s, search.as_deref()));
        let page: Vec<Arc<Subscription>> = visible.by_ref().take(size).cloned().collect();
        let more = visible.next().is_some();
        (page, more)
    }

    /// The subscriptions `event` is routed to: those it matches, evaluated within `limits`
    /// until they cost `allowance` (the rest come back to evaluate elsewhere). Disabled ones
    /// are not in the index; pending ones queue their events until the sink consents.
    pub fn route(&self, event: &Event, limits: EvalLimits, allowance: u64) -> Routed<String> {
        self.index.matching_metered(event, limits, allowance)
    }

    /// The routed (not disabled) subscriptions that can match some event of `scope`.
    pub fn in_scope(&self, scope: &Scope<'_>) -> Vec<Arc<Subscription>> {
        self.subscriptions
            .values()
            .filter(|s| {
                self.index
                    .criteria(s.id.as_str())
                    .is_some_and(|c| c.can_match(scope))
            })
            .cloned()
            .collect()
    }

    /// Whether routed subscription `id` can match some event of `scope`.
    pub fn can_match(&self, id: &str, scope: &Scope<'_>) -> bool {
        self.index.criteria(id).is_some_and(|c| c.can_match(scope))
    }

    /// Every subscription.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Subscription>> {
        self.subscriptions.values()
    }
}
