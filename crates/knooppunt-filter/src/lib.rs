//! Subscription filters and the index that routes events to subscriptions. No I/O.
//!
//! - [`Filter`] and [`Criteria`]: the filter dialects of the CloudEvents Subscriptions API
//!   (`exact`, `prefix`, `suffix`, `all`, `any`, `not`, `sql`) and a subscription's `source`
//!   and `types`.
//! - [`cesql`]: our own CESQL 1.0 parser and evaluator, checked against the TCK.
//! - [`MatchIndex`]: finds the matching subscriptions of an event while evaluating only a
//!   small set of candidates.

pub mod cesql;
mod dialect;
mod index;

pub use dialect::{Criteria, DIALECTS, Filter, FilterError};
pub use index::MatchIndex;
