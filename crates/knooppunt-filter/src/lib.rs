//! Subscription filters and the index that routes events to subscriptions. No I/O.
//!
//! - [`Filter`] and [`Criteria`]: the filter dialects of the CloudEvents Subscriptions API
//!   (`exact`, `prefix`, `suffix`, `all`, `any`, `not`, `sql`) and a subscription's `source`
//!   and `types`.
//! - [`cesql`]: our own CESQL 1.0 parser and evaluator, checked against the TCK.
//! - [`MatchIndex`]: finds the matching subscriptions of an event while evaluating only a
//!   small set of candidates.
//! - [`Limits`]: how large and deep a subscription's filters may be; every recursive walk
//!   over a filter is bounded by them.
//! - [`EvalLimits`] and [`Meter`]: what one evaluation of a filter against an event may
//!   cost; past it the filter does not match.

pub mod cesql;
mod cost;
mod dialect;
mod index;
mod limits;
mod scope;

pub use cost::{EvalLimits, Meter};
pub use dialect::{Criteria, DIALECTS, Filter, FilterError};
pub use index::{CANDIDATE_UNITS, Exceeded, MatchIndex, Routed};
pub use limits::{InvalidLimit, Limits};
pub use scope::Scope;
