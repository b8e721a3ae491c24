//! The use cases every surface runs (the `/v1` API, the Notificaties facade, the console):
//! for each change, the one sequence of checks, the store, its entry on the audit trail
//! and what follows from it, so that no surface skips a step or decides on its own. A
//! surface turns a request into one of these calls and the answer (or [`Refused`]) back.
//!
//! [`Refused`]: crate::refused::Refused

pub mod catalog;
pub mod dead_letters;
pub mod principals;
pub mod replays;
pub mod subscriptions;
