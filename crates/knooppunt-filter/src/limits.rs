//! How large and how deeply nested a subscription's filters may be. Filters come from
//! subscribers, so every walk over them (parsing, evaluation, indexing, dropping) must be
//! bounded: these limits are checked while a filter is read, before anything recurses into it.

use std::fmt;

/// The bounds on a subscription's filters. Every value is at least 1 and at most the
/// matching field of [`Limits::CEILING`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The deepest nesting: of `all`/`any`/`not` dialects, and, inside a CESQL expression,
    /// of operators, function calls and parentheses. A chain of operators of one precedence
    /// level (`a OR b OR c ...`) counts as one level.
    pub max_depth: usize,
    /// The most nodes in all filters of one subscription together: each dialect, and each
    /// literal, attribute, operator and function call of a CESQL expression.
    pub max_nodes: usize,
    /// The longest CESQL expression, in characters.
    pub max_sql_length: usize,
}

impl Limits {
    /// What the hub allows unless configured otherwise.
    pub const DEFAULT: Limits = Limits {
        max_depth: 32,
        max_nodes: 1_000,
        max_sql_length: 4_096,
    };

    /// The largest values an operator may configure: evaluation recurses to `max_depth`,
    /// which must stay far inside a thread's stack.
    pub const CEILING: Limits = Limits {
        max_depth: 128,
        max_nodes: 10_000,
        max_sql_length: 65_536,
    };

    /// Checks that every value is within `1..=CEILING`, naming the first that is not.
    pub fn try_new(
        max_depth: usize,
        max_nodes: usize,
        max_sql_length: usize,
    ) -> Result<Limits, InvalidLimit> {
        let check = |name: &'static str, value: usize, ceiling: usize| {
            if (1..=ceiling).contains(&value) {
                Ok(value)
            } else {
                Err(InvalidLimit {
                    name,
                    value,
                    ceiling,
                })
            }
        };
        Ok(Limits {
            max_depth: check("max_depth", max_depth, Limits::CEILING.max_depth)?,
            max_nodes: check("max_nodes", max_nodes, Limits::CEILING.max_nodes)?,
            max_sql_length: check(
                "max_sql_length",
                max_sql_length,
                Limits::CEILING.max_sql_length,
            )?,
        })
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// A limit configured outside `1..=ceiling`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} must be from 1 to {ceiling}, not {value}")]
pub struct InvalidLimit {
    pub name: &'static str,
    pub value: usize,
    pub ceiling: usize,
}

/// Counts the nodes of a subscription's filters while they are read, against [`Limits`].
#[derive(Debug)]
pub(crate) struct Budget {
    pub(crate) limits: Limits,
    nodes: usize,
}

impl Budget {
    pub(crate) fn new(limits: Limits) -> Budget {
        Budget { limits, nodes: 0 }
    }

    /// Takes one node; `Err` once the subscription has more than `max_nodes`.
    pub(crate) fn take(&mut self) -> Result<(), Exceeded> {
        self.nodes += 1;
        if self.nodes > self.limits.max_nodes {
            Err(Exceeded::Nodes(self.limits.max_nodes))
        } else {
            Ok(())
        }
    }

    /// Whether the node limit was passed.
    pub(crate) fn exhausted(&self) -> bool {
        self.nodes > self.limits.max_nodes
    }

    /// `Err` when `depth` is past `max_depth`.
    pub(crate) fn enter(&self, depth: usize) -> Result<(), Exceeded> {
        if depth > self.limits.max_depth {
            Err(Exceeded::Depth(self.limits.max_depth))
        } else {
            Ok(())
        }
    }
}

/// Which limit a filter broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exceeded {
    Depth(usize),
    Nodes(usize),
    Length(usize),
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exceeded::Depth(max) => write!(
                f,
                "nested more than {max} levels deep (limit max_depth; parentheses, operators, \
                 function calls and all/any/not count, a chain like `a OR b OR c` is one level)"
            ),
            Exceeded::Nodes(max) => write!(
                f,
                "the subscription's filters have more than {max} parts (limit max_nodes; use \
                 IN (...) or the `types` property instead of long OR chains)"
            ),
            Exceeded::Length(max) => write!(
                f,
                "the expression is longer than {max} characters (limit max_sql_length)"
            ),
        }
    }
}
