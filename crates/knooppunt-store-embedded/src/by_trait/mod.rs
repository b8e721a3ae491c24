//! The store's traits, one file each, implemented on [`EmbeddedStore`] with the state and
//! helpers of the crate's root.

use super::*;

mod audit_log;
mod cluster;
mod delivery_queue;
mod event_log;
mod records;
