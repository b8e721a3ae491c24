//! The matching index: finds the subscriptions an event matches without evaluating every
//! subscription's filters.
//!
//! Each subscription is filed under one *anchor*: a set of conditions on `type`, `source` or
//! `subject` (exact value, prefix or suffix), at least one of which holds for every event the
//! subscription matches. Anchors come from `source`, `types`, the exact/prefix/suffix dialects
//! reachable through `all` (and `any`, when every branch has one), and the conjunctions,
//! equalities, `IN` sets and `LIKE` patterns of CESQL expressions. An event collects the
//! subscriptions filed under its own type, source and subject (hash lookups, one per prefix
//! or suffix length in use) plus the *residue* of subscriptions without an anchor, and only
//! those candidates are evaluated in full.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::Hash;

use knooppunt_event::Event;

use crate::cesql::{BinaryOp, Expr, Value};
use crate::cost::{EvalLimits, Meter};
use crate::dialect::{Criteria, Filter};

/// The attributes the index files subscriptions under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Type = 0,
    Source = 1,
    Subject = 2,
}

impl Key {
    const ALL: [Key; 3] = [Key::Type, Key::Source, Key::Subject];

    fn from_name(name: &str) -> Option<Key> {
        match name {
            "type" => Some(Key::Type),
            "source" => Some(Key::Source),
            "subject" => Some(Key::Subject),
            _ => None,
        }
    }

    fn of(self, event: &Event) -> Option<&str> {
        match self {
            Key::Type => Some(event.ty()),
            Key::Source => Some(event.source()),
            Key::Subject => event.subject(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Shape {
    Exact,
    Prefix,
    Suffix,
}

/// One condition an anchor may be: `key` equals, starts with or ends with `value`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Condition {
    shape: Shape,
    key: Key,
    value: String,
}

/// A disjunction of conditions implied by a subscription's criteria.
type Anchor = Vec<Condition>;

/// How good an anchor is: fewer, more selective conditions first.
fn rank(anchor: &Anchor) -> (Shape, Key, usize, std::cmp::Reverse<usize>) {
    let worst = anchor
        .iter()
        .max_by_key(|c| (c.shape, c.key))
        .expect("anchors are never empty");
    let shortest = anchor.iter().map(|c| c.value.len()).min().unwrap_or(0);
    (
        worst.shape,
        worst.key,
        anchor.len(),
        std::cmp::Reverse(shortest),
    )
}

fn best(anchors: Vec<Anchor>) -> Option<Anchor> {
    anchors
        .into_iter()
        .filter(|anchor| !anchor.is_empty())
        .min_by_key(rank)
}

fn anchors_of(criteria: &Criteria) -> Vec<Anchor> {
    let mut anchors = Vec::new();
    if let Some(source) = &criteria.source {
        anchors.push(vec![Condition {
            shape: Shape::Exact,
            key: Key::Source,
            value: source.clone(),
        }]);
    }
    if let Some(types) = criteria.types.as_ref().filter(|types| !types.is_empty()) {
        anchors.push(
            types
                .iter()
                .map(|ty| Condition {
                    shape: Shape::Exact,
                    key: Key::Type,
                    value: ty.clone(),
                })
                .collect(),
        );
    }
    for filter in &criteria.filters {
        filter_anchors(filter, &mut anchors);
    }
    anchors
}

fn filter_anchors(filter: &Filter, out: &mut Vec<Anchor>) {
    let mut from_map = |shape, map: &std::collections::BTreeMap<String, String>| {
        for (name, value) in map {
            if let Some(key) = Key::from_name(name) {
                out.push(vec![Condition {
                    shape,
                    key,
                    value: value.clone(),
                }]);
            }
        }
    };
    match filter {
        Filter::Exact(map) => from_map(Shape::Exact, map),
        Filter::Prefix(map) => from_map(Shape::Prefix, map),
        Filter::Suffix(map) => from_map(Shape::Suffix, map),
        Filter::All(filters) => filters.iter().for_each(|f| filter_anchors(f, out)),
        Filter::Any(filters) => {
            let branches: Option<Vec<Anchor>> = filters
                .iter()
                .map(|f| {
                    let mut branch = Vec::new();
                    filter_anchors(f, &mut branch);
                    best(branch)
                })
                .collect();
            if let Some(branches) = branches {
                out.push(branches.into_iter().flatten().collect());
            }
        }
        Filter::Not(_) => {}
        Filter::Sql(expression) => sql_anchors(&expression.expr, out),
    }
}

/// Anchors of a CESQL expression that is `TRUE` without errors.
fn sql_anchors(expr: &Expr, out: &mut Vec<Anchor>) {
    let attribute_key = |expr: &Expr| match expr {
        Expr::Attribute(name) => Key::from_name(name),
        _ => None,
    };
    let string = |expr: &Expr| match expr {
        Expr::Literal(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    let condition = |shape, key, value| vec![Condition { shape, key, value }];
    match expr {
        Expr::Chain { first, rest } if rest.len() == 1 && rest[0].0 == BinaryOp::Equal => {
            let (left, right) = (first.as_ref(), &rest[0].1);
            let pair = attribute_key(left)
                .zip(string(right))
                .or_else(|| attribute_key(right).zip(string(left)));
            if let Some((key, value)) = pair {
                out.push(condition(Shape::Exact, key, value));
            }
        }
        Expr::Chain { first, rest } => {
            // A left-to-right fold: after `... AND e` every anchor so far still holds and
            // e's do too; after `... OR e` only the union of the best of each side does.
            let anchors_of = |expr| {
                let mut anchors = Vec::new();
                sql_anchors(expr, &mut anchors);
                anchors
            };
            let mut so_far = anchors_of(first);
            for (op, right) in rest {
                match op {
                    BinaryOp::And => so_far.extend(anchors_of(right)),
                    BinaryOp::Or => {
                        so_far = match (best(so_far), best(anchors_of(right))) {
                            (Some(mut left), Some(right)) => {
                                left.extend(right);
                                vec![left]
                            }
                            _ => Vec::new(),
                        };
                    }
                    _ => so_far.clear(),
                }
            }
            out.extend(so_far);
        }
        Expr::Like {
            value,
            pattern,
            negated: false,
        } => {
            if let Some(key) = attribute_key(value) {
                if let Some(exact) = pattern.as_exact() {
                    out.push(condition(Shape::Exact, key, exact));
                } else if let Some(prefix) = pattern.as_prefix() {
                    out.push(condition(Shape::Prefix, key, prefix));
                } else if let Some(suffix) = pattern.as_suffix() {
                    out.push(condition(Shape::Suffix, key, suffix));
                }
            }
        }
        Expr::In {
            value,
            set,
            negated: false,
        } => {
            let values: Option<Vec<String>> = set.iter().map(string).collect();
            if let (Some(key), Some(values)) = (attribute_key(value), values) {
                out.push(
                    values
                        .into_iter()
                        .map(|value| Condition {
                            shape: Shape::Exact,
                            key,
                            value,
                        })
                        .collect(),
                );
            }
        }
        _ => {}
    }
}

/// What evaluating one candidate costs a caller's allowance besides its meter's bytes (its
/// nodes, at most `max_nodes`, are not metered).
pub const CANDIDATE_UNITS: u64 = 64;

/// Which budget an evaluation ran out of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exceeded {
    /// Its own: [`EvalLimits::max_units`].
    Subscription,
    /// Its tenant's for the event: [`EvalLimits::max_units_per_tenant`].
    Tenant,
    /// Its tenant's share of the event's: [`EvalLimits::max_units_per_event`].
    Event,
}

/// The subscriptions an event was routed to by [`MatchIndex::matching_metered`].
#[derive(Debug, Clone)]
pub struct Routed<K> {
    pub matched: Vec<K>,
    /// Those whose filters ran out of a budget (their own, their tenant's, or their
    /// tenant's share of the event's), and which: they do not match.
    pub over_budget: Vec<(K, Exceeded)>,
    /// Candidates not evaluated (past the allowance), with a copy of their criteria and
    /// their tenant, in the order they are to be evaluated (each tenant's together).
    pub rest: Vec<(K, Criteria, u32)>,
    /// Units spent.
    pub spent: u64,
    /// What the event's candidates may still spend together, of
    /// [`EvalLimits::max_units_per_event`] (`u64::MAX`: no bound).
    event_left: u64,
    /// Tenants with candidates not evaluated yet, after the current one.
    tenants_after: u64,
    /// The tenant being evaluated, what it may still spend, and which bound set that.
    current: Option<(u32, u64, Exceeded)>,
}

impl<K> Routed<K> {
    fn new(limits: EvalLimits, tenants: u64) -> Routed<K> {
        let unbounded = |units: u64| if units == 0 { u64::MAX } else { units };
        Routed {
            matched: Vec::new(),
            over_budget: Vec::new(),
            rest: Vec::new(),
            spent: 0,
            event_left: unbounded(limits.max_units_per_event),
            tenants_after: tenants,
            current: None,
        }
    }

    /// What `tenant`, whose candidates are evaluated together, may still spend on the
    /// event, and which bound says so. On its first candidate it gets the lesser of its own
    /// bound and an equal share of what the event has left among the tenants still to come
    /// (itself included): never less than an equal share of the whole, since those before
    /// it took at most theirs.
    fn allowance(&mut self, tenant: u32, limits: EvalLimits) -> (u64, Exceeded) {
        match self.current {
            Some((current, left, bound)) if current == tenant => (left, bound),
            _ => {
                let share = self.event_left / self.tenants_after.max(1);
                self.tenants_after = self.tenants_after.saturating_sub(1);
                let own = match limits.max_units_per_tenant {
                    0 => u64::MAX,
                    units => units,
                };
                let allowance = if share < own {
                    (share, Exceeded::Event)
                } else {
                    (own, Exceeded::Tenant)
                };
                self.current = Some((tenant, allowance.0, allowance.1));
                allowance
            }
        }
    }

    /// Evaluates one candidate of `tenant` under its own meter, within what its tenant may
    /// still spend on this event.
    fn evaluate(
        &mut self,
        id: K,
        criteria: &Criteria,
        tenant: u32,
        event: &Event,
        limits: EvalLimits,
    ) {
        let (left, bound) = self.allowance(tenant, limits);
        if left == 0 {
            self.over_budget.push((id, bound));
            self.spent = self.spent.saturating_add(CANDIDATE_UNITS);
            return;
        }
        let mut own = limits;
        let binding = if left < own.max_units {
            own.max_units = left;
            bound
        } else {
            Exceeded::Subscription
        };
        let mut meter = Meter::new(own);
        if criteria.matches_metered(event, &mut meter) {
            self.matched.push(id);
        } else if meter.exceeded() {
            self.over_budget.push((id, binding));
        }
        let spent = meter.spent();
        if let Some((_, left, _)) = &mut self.current {
            *left = left.saturating_sub(spent);
        }
        self.event_left = self.event_left.saturating_sub(spent);
        self.spent = self.spent.saturating_add(CANDIDATE_UNITS + spent);
    }

    /// Evaluates the candidates left over, each under its own meter.
    pub fn evaluate_rest(&mut self, event: &Event, limits: EvalLimits) {
        for (id, criteria, tenant) in std::mem::take(&mut self.rest) {
            self.evaluate(id, &criteria, tenant, event, limits);
        }
    }
}

/// Orders candidates so that each tenant's are together, the tenants with fewer first (then
/// by tenant), each tenant's in the order they were found; how many tenants there are. One
/// tenant (most events) is left as it is.
fn by_tenant<A, B>(candidates: &mut [(A, B, u32)]) -> u64 {
    let Some(&(_, _, first)) = candidates.first() else {
        return 0;
    };
    if candidates.iter().all(|&(_, _, tenant)| tenant == first) {
        return 1;
    }
    let mut counts: HashMap<u32, usize> = HashMap::new();
    for &(_, _, tenant) in candidates.iter() {
        *counts.entry(tenant).or_default() += 1;
    }
    candidates.sort_by_key(|&(_, _, tenant)| (counts[&tenant], tenant));
    counts.len() as u64
}

/// Subscriptions filed by one shape of condition on one attribute.
#[derive(Debug)]
struct Table<K> {
    by_value: HashMap<String, Vec<K>>,
    /// The lengths of the prefixes or suffixes present, so lookups try only those.
    lengths: BTreeSet<usize>,
}

impl<K> Default for Table<K> {
    fn default() -> Self {
        Table {
            by_value: HashMap::new(),
            lengths: BTreeSet::new(),
        }
    }
}

impl<K: Clone + Eq> Table<K> {
    fn insert(&mut self, value: &str, id: K) {
        self.by_value.entry(value.to_owned()).or_default().push(id);
        self.lengths.insert(value.len());
    }

    fn remove(&mut self, value: &str, id: &K) {
        if let Some(ids) = self.by_value.get_mut(value) {
            ids.retain(|other| other != id);
            if ids.is_empty() {
                self.by_value.remove(value);
                if !self.by_value.keys().any(|v| v.len() == value.len()) {
                    self.lengths.remove(&value.len());
                }
            }
        }
    }
}

/// Subscriptions with their criteria, filed for fast matching. `K` identifies a subscription.
#[derive(Debug)]
pub struct MatchIndex<K> {
    /// Each subscription's criteria, where it is filed, and its tenant.
    entries: HashMap<K, (Criteria, Option<Anchor>, u32)>,
    tables: HashMap<(Shape, Key), Table<K>>,
    residue: HashSet<K>,
}

impl<K> Default for MatchIndex<K> {
    fn default() -> Self {
        MatchIndex {
            entries: HashMap::new(),
            tables: HashMap::new(),
            residue: HashSet::new(),
        }
    }
}

impl<K: Clone + Eq + Hash> MatchIndex<K> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The criteria filed under `id`.
    pub fn criteria<Q>(&self, id: &Q) -> Option<&Criteria>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.entries.get(id).map(|(criteria, _, _)| criteria)
    }

    /// How many subscriptions have no anchor and are evaluated for every event.
    pub fn residue_len(&self) -> usize {
        self.residue.len()
    }

    /// Adds a subscription, replacing any with the same id (all of one tenant).
    pub fn insert(&mut self, id: K, criteria: Criteria) {
        self.insert_for(id, criteria, 0);
    }

    /// Adds a subscription of `tenant` (whose subscriptions share
    /// [`EvalLimits::max_units_per_tenant`] per event), replacing any with the same id.
    pub fn insert_for(&mut self, id: K, criteria: Criteria, tenant: u32) {
        self.remove(&id);
        // `types: []` matches nothing: filed under no condition, it is never a candidate.
        let never = criteria.types.as_ref().is_some_and(Vec::is_empty);
        let anchor = if never {
            Some(Vec::new())
        } else {
            best(anchors_of(&criteria))
        };
        match &anchor {
            Some(anchor) => {
                for condition in anchor {
                    self.tables
                        .entry((condition.shape, condition.key))
                        .or_default()
                        .insert(&condition.value, id.clone());
                }
            }
            None => {
                self.residue.insert(id.clone());
            }
        }
        self.entries.insert(id, (criteria, anchor, tenant));
    }

    pub fn remove(&mut self, id: &K) -> Option<Criteria> {
        let (criteria, anchor, _) = self.entries.remove(id)?;
        match anchor {
            Some(anchor) => {
                for condition in anchor {
                    if let Some(table) = self.tables.get_mut(&(condition.shape, condition.key)) {
                        table.remove(&condition.value, id);
                    }
                }
            }
            None => {
                self.residue.remove(id);
            }
        }
        Some(criteria)
    }

    /// The ids of every subscription whose criteria match `event`, each once, each
    /// evaluated within the default [`EvalLimits`].
    pub fn matching(&self, event: &Event) -> Vec<K> {
        let routed = self.matching_metered(event, EvalLimits::DEFAULT, u64::MAX);
        routed.matched
    }

    /// Evaluates the candidates of `event`, each under a [`Meter`] of its own with `limits`,
    /// until they have cost `allowance` units (and [`CANDIDATE_UNITS`] each): the ones left
    /// then are handed back with a copy of their criteria, to evaluate elsewhere (such as a
    /// thread where it may take long) with [`Routed::evaluate_rest`].
    ///
    /// Each tenant's candidates are evaluated together, the tenants with fewer candidates
    /// first, so that the event's budget ([`EvalLimits::max_units_per_event`]) is shared
    /// fairly: what a tenant with few filters leaves goes to those with more.
    pub fn matching_metered(&self, event: &Event, limits: EvalLimits, allowance: u64) -> Routed<K> {
        let mut candidates: Vec<(&K, &Criteria, u32)> = Vec::new();
        self.visit_candidates(event, |id, criteria, tenant| {
            candidates.push((id, criteria, tenant));
        });
        let tenants = by_tenant(&mut candidates);
        let mut routed = Routed::new(limits, tenants);
        for (id, criteria, tenant) in candidates {
            if routed.spent >= allowance {
                routed.rest.push((id.clone(), criteria.clone(), tenant));
                continue;
            }
            routed.evaluate(id.clone(), criteria, tenant, event, limits);
        }
        routed
    }

    /// Calls `visit` once for each subscription `event` may match: the ones filed under the
    /// event's own values and the unanchored residue. Only their criteria can tell which
    /// match.
    fn visit_candidates<'a>(
        &'a self,
        event: &Event,
        mut visit: impl FnMut(&'a K, &'a Criteria, u32),
    ) {
        // Borrowed ids: each candidate is visited once, and no id is cloned here.
        let mut seen: HashSet<&'a K> = HashSet::new();
        let mut consider = |id: &'a K| {
            if seen.insert(id) {
                let (criteria, _, tenant) = &self.entries[id];
                visit(id, criteria, *tenant);
            }
        };
        for key in Key::ALL {
            let Some(value) = key.of(event) else {
                continue;
            };
            if let Some(table) = self.tables.get(&(Shape::Exact, key))
                && let Some(ids) = table.by_value.get(value)
            {
                ids.iter().for_each(&mut consider);
            }
            if let Some(table) = self.tables.get(&(Shape::Prefix, key)) {
                for &length in table.lengths.range(..=value.len()) {
                    if let Some(ids) = value.get(..length).and_then(|p| table.by_value.get(p)) {
                        ids.iter().for_each(&mut consider);
                    }
                }
            }
            if let Some(table) = self.tables.get(&(Shape::Suffix, key)) {
                for &length in table.lengths.range(..=value.len()) {
                    let start = value.len() - length;
                    if let Some(ids) = value.get(start..).and_then(|s| table.by_value.get(s)) {
                        ids.iter().for_each(&mut consider);
                    }
                }
            }
        }
        self.residue.iter().for_each(consider);
    }

    /// Evaluates every subscription: the reference the index must agree with.
    pub fn matching_by_scan(&self, event: &Event) -> Vec<K> {
        self.entries
            .iter()
            .filter(|(_, (criteria, _, _))| criteria.matches(event))
            .map(|(id, _)| id.clone())
            .collect()
    }
}
