//! Why a use case did not do what was asked: one type for every use case (publishing,
//! subscriptions, the catalog, approvals, principals, dead letters, replays), which each surface
//! maps once to its own shape (problem+json for `/v1` and the console, `Fout` for the
//! Notificaties facade). Nothing was changed when a use case answers one.

use knooppunt_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The caller may not: its roles, or the types, sources or entries it may use; why.
    #[error("{0}")]
    Forbidden(String),
    /// There is no such thing that the caller may see.
    #[error("there is no {0}")]
    NotFound(Missing),
    /// It cannot be done to the thing as it is now: why, and what to do instead.
    #[error("{0}")]
    Conflict(String),
    /// A value breaks a rule: the member (as the API names it: `sink`,
    /// `sinkcredential.tokenurl`, `name`) and why.
    #[error("{0}: {1}")]
    Invalid(&'static str, String),
    /// The hub runs as much of this as it may now: try again later (why).
    #[error("{0}")]
    Busy(String),
    /// What was asked for is no longer kept (retention removed it): what to do, and the
    /// oldest position from which nothing is missing.
    #[error("{detail}")]
    Expired { detail: String, oldest: u64 },
    /// The owner's quota is used up.
    #[error(transparent)]
    Quota(#[from] QuotaExceeded),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Published events break the CloudEvents specification or the NL GOV profile: their
    /// problems, by position in a batch (none of them was accepted).
    #[error("the events break the CloudEvents specification or the NL GOV profile")]
    Events(Vec<(Option<usize>, knooppunt_event::Violations)>),
    /// The hub holds all the undelivered data it may (or its disk is nearly full): try
    /// again later.
    #[error("{}", .0.detail)]
    Full(Full),
}

/// What was not found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// A subscription (of this id) the caller may see.
    Subscription(String),
    /// A catalog entry.
    EventType(String),
    /// The approval of an event type (the entry's id) for a subscription.
    Approval { entry: String, subscription: String },
    /// A dead letter (its sequence number) of a subscription.
    DeadLetter { subscription: String, seq: u64 },
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::Subscription(id) => write!(f, "subscription `{id}` visible to you"),
            Missing::EventType(id) => write!(f, "event type (catalog entry) {id}"),
            Missing::Approval {
                entry,
                subscription,
            } => write!(
                f,
                "approval of event type {entry} for subscription {subscription}"
            ),
            Missing::DeadLetter { subscription, seq } => write!(
                f,
                "dead letter `{seq}` of subscription `{subscription}` (it may have been \
                 redelivered or deleted)"
            ),
        }
    }
}

/// A change refused because it would take a principal past its quotas: what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QuotaExceeded(pub String);

/// Why publishes are refused now: what is full, in words that say what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Full {
    pub detail: String,
    /// When to try again, in seconds.
    pub retry_after: u64,
}
