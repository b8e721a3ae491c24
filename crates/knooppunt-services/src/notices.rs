//! Owners told of trouble: when one of its subscriptions is disabled, left pending by its
//! sink, gives events up as dead letters, opens its sink's breaker or passes its backlog
//! limit, the hub publishes a CloudEvent of its own about it (source
//! `urn:nld:knooppunt:<origin>`, types [`KINDS`], subject the subscription) that only the
//! subscription's owner receives, by subscribing to it like to any event (push or pull).
//! Nothing but the subscription's id, its state and why is in it.
//!
//! A subscription gets notices only when its types or filters name them (`nl.knooppunt.`):
//! one to every type does not get them unasked.
//!
//! The parts that see trouble (the writer of subscriptions, the delivery workers) only hand
//! a [`Notice`] to a bounded queue ([`Notices`]), never waiting: when it is full the notice
//! is dropped and counted. The application layer publishes them (`app.rs`): routed only to
//! the owner's subscriptions, appended like any event. Publishers may not use the hub's
//! source space, and a stream or replay shows a notice only to its recipient.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// The hub's own sources begin so; no publisher may use them.
pub const SOURCE_PREFIX: &str = "urn:nld:knooppunt:";

/// The extension attribute that names a notice's recipient (the subscription's owner).
pub const RECIPIENT: &str = "recipient";

/// The notices' types, by kind.
pub const KINDS: [&str; 5] = [
    "nl.knooppunt.subscription.disabled",
    "nl.knooppunt.subscription.pending",
    "nl.knooppunt.subscription.dead-lettered",
    "nl.knooppunt.subscription.breaker-opened",
    "nl.knooppunt.subscription.backlog-limit-reached",
];

/// At most one notice of a repeating kind (dead letters, an opened breaker, a backlog
/// limit) per subscription per this many milliseconds: the next says how many came since.
const SPACING_MS: u64 = 60_000;

/// How many notices wait to be published at most.
const QUEUE: usize = 1024;

/// Trouble with one subscription, to tell its owner.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub subscription: String,
    /// One of [`KINDS`].
    pub kind: &'static str,
    /// The event's data (besides the subscription's id).
    pub data: Value,
}

/// Per kind and subscription: when the last notice went (milliseconds since the Unix
/// epoch), and how much came since.
type Spacing = HashMap<(&'static str, String), (u64, u64)>;

/// Where notices are handed over; cheap to clone.
#[derive(Clone, Debug)]
pub struct Notices {
    sender: tokio::sync::mpsc::Sender<Notice>,
    /// Notices dropped because the queue was full.
    pub dropped: Arc<AtomicU64>,
    /// Per kind and subscription: when its last notice of that kind went, and how many
    /// times (or events) came since.
    spaced: Arc<Mutex<Spacing>>,
}

impl Notices {
    /// A queue of notices and its receiving end.
    pub fn channel() -> (Notices, tokio::sync::mpsc::Receiver<Notice>) {
        let (sender, receiver) = tokio::sync::mpsc::channel(QUEUE);
        (
            Notices {
                sender,
                dropped: Arc::default(),
                spaced: Arc::default(),
            },
            receiver,
        )
    }

    fn send(&self, notice: Notice) {
        if let Err(error) = self.sender.try_send(notice) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%error, "A notice to a subscription's owner was dropped: too many wait.");
        }
    }

    /// Subscription `id` is disabled, for `reason`.
    pub fn disabled(&self, id: &str, reason: &str) {
        self.send(Notice {
            subscription: id.to_owned(),
            kind: KINDS[0],
            data: json!({"state": "disabled", "reason": reason}),
        });
    }

    /// Subscription `id` is pending: its sink did not consent, for `reason`.
    pub fn pending(&self, id: &str, reason: &str) {
        self.send(Notice {
            subscription: id.to_owned(),
            kind: KINDS[1],
            data: json!({"state": "pending", "reason": reason}),
        });
    }

    /// Subscription `id` gave an event up as a dead letter, for `reason`: told at most once
    /// a minute per subscription, with how many since the last notice.
    pub fn dead_lettered(&self, id: &str, reason: &str, now_ms: u64) {
        if let Some(count) = self.spaced(KINDS[2], id, 1, now_ms) {
            self.send(Notice {
                subscription: id.to_owned(),
                kind: KINDS[2],
                data: json!({"deadLetters": count, "reason": reason}),
            });
        }
    }

    /// An attempt of subscription `id` opened its sink's breaker after `failures` failures
    /// in a row: deliveries to the sink pause, then go one at a time until one succeeds.
    /// Told at most once a minute per subscription, with how many times since.
    pub fn breaker_opened(&self, id: &str, failures: u32, now_ms: u64) {
        if let Some(count) = self.spaced(KINDS[3], id, 1, now_ms) {
            let reason = format!(
                "the sink failed {failures} times in a row: deliveries to it pause, then one \
                 at a time is tried until one succeeds"
            );
            self.send(Notice {
                subscription: id.to_owned(),
                kind: KINDS[3],
                data: json!({"state": "paused", "failures": failures, "opened": count,
                             "reason": reason}),
            });
        }
    }

    /// Subscription `id` passed its backlog limit and shed `events` of its oldest
    /// deliveries into dead letters, for `reason`. Told at most once a minute per
    /// subscription, with how many were shed since.
    pub fn backlog_limit_reached(&self, id: &str, events: u64, reason: &str, now_ms: u64) {
        if let Some(count) = self.spaced(KINDS[4], id, events, now_ms) {
            self.send(Notice {
                subscription: id.to_owned(),
                kind: KINDS[4],
                data: json!({"deadLetters": count, "reason": reason}),
            });
        }
    }

    /// Counts `add` for (`kind`, `id`): the total since the last notice when one may go
    /// now (at most one per [`SPACING_MS`]), else `None`.
    fn spaced(&self, kind: &'static str, id: &str, add: u64, now_ms: u64) -> Option<u64> {
        let mut spaced = self.spaced.lock().expect("notices lock");
        // Forgotten once a minute has passed for all: bounded by the active ones.
        if spaced.len() > 10_000 {
            spaced.retain(|_, (at, _)| now_ms.saturating_sub(*at) < SPACING_MS);
        }
        let (at, since) = spaced.entry((kind, id.to_owned())).or_insert((0, 0));
        *since += add;
        if now_ms.saturating_sub(*at) < SPACING_MS {
            return None;
        }
        let count = *since;
        (*at, *since) = (now_ms, 0);
        Some(count)
    }
}

/// The notice as a CloudEvent in the JSON format, from `hub` (the origin) to `recipient`.
pub fn event(notice: &Notice, hub: &str, recipient: &str, id: &str, time: &str) -> String {
    let mut data = notice.data.clone();
    data["subscription"] = json!(notice.subscription);
    json!({
        "specversion": "1.0",
        "id": id,
        "source": format!("{SOURCE_PREFIX}{hub}"),
        "type": notice.kind,
        "subject": notice.subscription,
        "time": time,
        "datacontenttype": "application/json",
        RECIPIENT: recipient,
        "data": data,
    })
    .to_string()
}

/// Whether `subscription` asks for the hub's notices by name: its `types`, or one of its
/// filters, name a type starting with `nl.knooppunt.`. A subscription to every type does
/// not get them unasked.
pub fn asks_for_notices(subscription: &knooppunt_store::Subscription) -> bool {
    const NOTICE_TYPES: &str = "nl.knooppunt.";
    subscription
        .types()
        .is_some_and(|types| types.iter().any(|t| t.starts_with(NOTICE_TYPES)))
        || subscription
            .filters
            .iter()
            .any(|filter| filter.to_string().contains(NOTICE_TYPES))
}

/// Whether an event of `source`, with `recipient` as its recipient attribute, may be shown
/// to a subscription of `owner`: any event but a notice, and a notice only to its recipient.
pub fn may_see(source: &str, recipient: Option<&str>, owner: &str) -> bool {
    !source.starts_with(SOURCE_PREFIX) || recipient == Some(owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_letter_notices_are_spaced_per_subscription() {
        let (notices, mut received) = Notices::channel();
        notices.dead_lettered("a", "400", 1_000_000);
        notices.dead_lettered("a", "400", 1_000_100);
        notices.dead_lettered("a", "400", 1_000_200);
        notices.dead_lettered("b", "400", 1_000_200);
        notices.dead_lettered("a", "410", 1_061_000);
        let mut told = Vec::new();
        while let Ok(notice) = received.try_recv() {
            told.push((notice.subscription, notice.data["deadLetters"].clone()));
        }
        assert_eq!(
            told,
            [
                ("a".into(), json!(1)),
                ("b".into(), json!(1)),
                ("a".into(), json!(3))
            ]
        );
    }

    #[test]
    fn repeating_notices_are_spaced_per_kind_and_subscription() {
        let (notices, mut received) = Notices::channel();
        notices.breaker_opened("a", 5, 1_000_000);
        notices.backlog_limit_reached("a", 30, "shed", 1_000_000);
        notices.breaker_opened("a", 5, 1_000_500);
        notices.backlog_limit_reached("a", 12, "shed", 1_000_500);
        notices.dead_lettered("a", "400", 1_000_500);
        notices.backlog_limit_reached("a", 8, "shed", 1_070_000);
        let mut told = Vec::new();
        while let Ok(notice) = received.try_recv() {
            told.push((notice.kind, notice.data));
        }
        let kinds: Vec<&str> = told.iter().map(|(kind, _)| *kind).collect();
        assert_eq!(kinds, [KINDS[3], KINDS[4], KINDS[2], KINDS[4]]);
        assert_eq!(told[0].1["failures"], 5);
        assert_eq!(told[1].1["deadLetters"], 30);
        assert_eq!(
            told[3].1["deadLetters"], 20,
            "the shed since the last notice"
        );
    }

    #[test]
    fn a_notice_is_seen_by_its_recipient_alone() {
        assert!(may_see("urn:nld:oin:1:x", None, "kvk"));
        assert!(may_see("urn:nld:knooppunt:hub", Some("kvk"), "kvk"));
        assert!(!may_see("urn:nld:knooppunt:hub", Some("kvk"), "gemeente"));
        assert!(!may_see("urn:nld:knooppunt:hub", None, "gemeente"));
    }
}
