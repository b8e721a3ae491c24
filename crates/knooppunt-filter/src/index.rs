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
use std::sync::Arc;

use knooppunt_event::Event;

use crate::cesql::{BinaryOp, Expr, Value};
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
    entries: HashMap<K, (Arc<Criteria>, Option<Anchor>)>,
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

    /// How many subscriptions have no anchor and are evaluated for every event.
    pub fn residue_len(&self) -> usize {
        self.residue.len()
    }

    /// Adds a subscription, replacing any with the same id.
    pub fn insert(&mut self, id: K, criteria: Criteria) {
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
        self.entries.insert(id, (Arc::new(criteria), anchor));
    }

    pub fn remove(&mut self, id: &K) -> Option<Arc<Criteria>> {
        let (criteria, anchor) = self.entries.remove(id)?;
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
        self.candidates(event)
            .into_iter()
            .filter(|(_, criteria)| criteria.matches(event))
            .map(|(id, _)| id)
            .collect()
    }

    /// The subscriptions `event` may match, each once, with their criteria: the ones filed
    /// under the event's own values and the unanchored residue. Only the criteria can tell
    /// which match; they are shared, so the caller can evaluate them (metered, see
    /// [`Criteria::matches_metered`]) after letting go of the index.
    pub fn candidates<'a>(&'a self, event: &Event) -> Vec<(K, Arc<Criteria>)> {
        // Borrowed ids: each candidate's id is cloned once, for the answer.
        let mut seen: HashSet<&'a K> = HashSet::new();
        let mut found = Vec::new();
        let mut consider = |id: &'a K| {
            if seen.insert(id) {
                let (criteria, _) = &self.entries[id];
                found.push((id.clone(), Arc::clone(criteria)));
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
        found
    }

    /// Evaluates every subscription: the reference the index must agree with.
    pub fn matching_by_scan(&self, event: &Event) -> Vec<K> {
        self.entries
            .iter()
            .filter(|(_, (criteria, _))| criteria.matches(event))
            .map(|(id, _)| id.clone())
            .collect()
    }
}
