//! What evaluating a filter may cost. A filter's size and depth are limited when it is read
//! ([`crate::Limits`]), but what it costs depends on the event too: `LIKE` over a long
//! subject, `CONCAT` of an attribute with itself hundreds of times. Every evaluation runs
//! under a [`Meter`]: each node, each byte copied, compared or scanned costs a unit, and no
//! intermediate string may grow past `max_string_bytes`. A filter that runs out of units
//! does not match, and the meter says so. Nodes are counted where the dialects are
//! evaluated; inside a CESQL expression they are not (its nodes are bounded by `max_nodes`
//! when it is read, and charging each visit cost a fifth of the routing time).

/// The bounds of one evaluation: one subscription's criteria against one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvalLimits {
    /// The most units (bytes copied, compared, scanned or made; and a unit per dialect
    /// compared) one evaluation may spend.
    pub max_units: u64,
    /// The longest string an expression may make (`CONCAT`, `UPPER`, ...), in bytes.
    pub max_string_bytes: usize,
    /// The most units the subscriptions of one tenant (a principal) may spend together on
    /// one event (0: no such bound). Past it that tenant's other candidates are not
    /// evaluated for the event and do not match it, so that one tenant's many costly
    /// filters cannot make another tenant's events slow.
    pub max_units_per_tenant: u64,
    /// The most units all candidates together may spend on one event (0: no such bound),
    /// shared among the tenants with candidates: each gets at least an equal share (and
    /// never more than `max_units_per_tenant`), and what one leaves unused goes to the ones
    /// after it. So the cost of routing an event stays bounded however many tenants have
    /// costly filters for it.
    pub max_units_per_event: u64,
}

impl EvalLimits {
    /// Enough for every filter on an event of the hub's default size (1 MiB): a `LIKE` over
    /// a 1 MiB subject costs about 2 Mi units.
    pub const DEFAULT: EvalLimits = EvalLimits {
        max_units: 4_000_000,
        max_string_bytes: 1024 * 1024,
        max_units_per_tenant: 16_000_000,
        max_units_per_event: 32_000_000,
    };
}

impl Default for EvalLimits {
    fn default() -> Self {
        EvalLimits::DEFAULT
    }
}

/// Counts what an evaluation spends against its [`EvalLimits`].
#[derive(Debug, Clone)]
pub struct Meter {
    limits: EvalLimits,
    spent: u64,
    exceeded: bool,
}

impl Meter {
    pub fn new(limits: EvalLimits) -> Meter {
        Meter {
            limits,
            spent: 0,
            exceeded: false,
        }
    }

    /// Takes `units`; `false` (now and for every later charge) once the budget is spent.
    pub(crate) fn charge(&mut self, units: u64) -> bool {
        self.spent = self.spent.saturating_add(units);
        if self.spent > self.limits.max_units {
            self.exceeded = true;
        }
        !self.exceeded
    }

    /// Whether a string of `bytes` may be made.
    pub(crate) fn allows_string(&self, bytes: usize) -> bool {
        bytes <= self.limits.max_string_bytes
    }

    pub(crate) fn limits(&self) -> EvalLimits {
        self.limits
    }

    /// Units spent so far.
    pub fn spent(&self) -> u64 {
        self.spent
    }

    /// Whether the evaluation ran out of units: its result is "no match", whatever the
    /// filter would have said.
    pub fn exceeded(&self) -> bool {
        self.exceeded
    }
}
