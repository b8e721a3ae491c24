//! The hub's durable state behind one trait, [`Store`], so that the embedded default
//! ([`SledStore`]) and a shared database can serve the same hub.
//!
//! **Durability invariant:** a write method returns `Ok` only when the change is on disk.
//!
//! This crate holds the subscriptions; the event and delivery queues join it with the ingest
//! work, as operations that make sense for every backend (atomic append of an event with its
//! deliveries, leasing due deliveries, ack, retry, dead letter).

mod sled_store;
mod subscription;

use std::future::Future;
use std::pin::Pin;

pub use sled_store::SledStore;
pub use subscription::{
    CONFIG_KEYS, ConfigError, ConfigKey, DeliveryConfig, DeliveryMode, HttpSettings, Ordering,
    SinkCredential, Subscription, parse_iso8601_duration,
};

/// A boxed future, so that [`Store`] can be used as `dyn Store`.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the store failed: {0}")]
    Backend(String),
    #[error("a stored record is corrupt: {0}")]
    Corrupt(String),
    #[error("a subscription with id `{0}` already exists")]
    Conflict(String),
}

/// The operations the hub needs from its durable state.
pub trait Store: Send + Sync + 'static {
    /// Stores a new subscription; fails with [`StoreError::Conflict`] if the id is taken.
    fn insert_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, ()>;

    /// Replaces a subscription; `false` when there is none with that id (nothing is written).
    fn update_subscription<'a>(&'a self, subscription: &'a Subscription) -> StoreFuture<'a, bool>;

    /// Removes a subscription and returns it.
    fn delete_subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>>;

    fn subscription<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<Subscription>>;

    /// Every subscription, in id order (which is creation order).
    fn subscriptions(&self) -> StoreFuture<'_, Vec<Subscription>>;
}
