//! Accepted events and their pending deliveries: the records every backend keeps.

/// An event to append, with the subscriptions it must reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub source: String,
    pub id: String,
    /// The event in the JSON format, exactly as it will be delivered in structured mode.
    pub json: String,
    /// The types of extensions the JSON form cannot carry (a URI, Timestamp or Binary
    /// extension published in CBOR), as `Event::extension_types_text` writes them; kept
    /// beside the JSON so that a CBOR delivery gives back what was published.
    pub extension_types: Option<String>,
    pub subscriptions: Vec<String>,
}

/// An event's size as backlogs count it ([`QueueStats::pending_bytes`]): its JSON, with
/// the types of extensions kept beside it.
pub fn event_size(json: &str, extension_types: Option<&str>) -> u64 {
    (json.len() + extension_types.map_or(0, str::len)) as u64
}

impl NewEvent {
    /// Its size ([`event_size`]).
    pub fn size(&self) -> u64 {
        event_size(&self.json, self.extension_types.as_deref())
    }
}

/// What became of one appended event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appended {
    /// Stored with this sequence number (acceptance order), with its deliveries.
    Accepted { seq: u64 },
    /// An event with the same `source` and `id` was accepted within the duplicate window;
    /// nothing was stored.
    Duplicate { seq: u64 },
}

/// An accepted event. It never changes, so one copy serves all its deliveries: reading it
/// costs the same whatever the number of subscriptions it was routed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// Acceptance order: later accepted, higher number.
    pub seq: u64,
    pub source: String,
    pub id: String,
    /// Milliseconds since the Unix epoch.
    pub accepted_at: u64,
    pub json: String,
    /// As [`NewEvent::extension_types`].
    pub extension_types: Option<String>,
}

impl StoredEvent {
    /// Its size ([`event_size`]).
    pub fn size(&self) -> u64 {
        event_size(&self.json, self.extension_types.as_deref())
    }
}

/// One pending delivery of one event to one subscription: what the workers need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub subscription: String,
    /// The event ([`StoredEvent::seq`]).
    pub seq: u64,
    /// Attempts made so far.
    pub attempts: u32,
    /// When the next attempt is due (milliseconds since the Unix epoch).
    pub next_attempt_at: u64,
    pub first_attempt_at: Option<u64>,
    pub last_attempt_at: Option<u64>,
    /// The HTTP status of the last attempt, if it got one.
    pub last_status: Option<u16>,
    /// What went wrong last time.
    pub last_error: Option<String>,
    /// Leased to a delivery worker until then (milliseconds since the Unix epoch); 0 when
    /// not leased. A lease that runs out (a worker that died) frees the delivery again.
    pub leased_until: u64,
    /// The token of the lease held, 0 when not leased: a result must carry it
    /// ([`Attempt::lease`]). Every lease gets a new one, so a worker whose lease ran out
    /// and was given to another cannot record over the new holder's result.
    pub lease: u64,
    /// The replay that queued it ([`DeliveryChange::Requeue`]), named in its requests.
    pub replay: Option<String>,
}

impl Delivery {
    pub fn new(subscription: String, seq: u64, now: u64) -> Self {
        Delivery {
            subscription,
            seq,
            attempts: 0,
            next_attempt_at: now,
            first_attempt_at: None,
            last_attempt_at: None,
            last_status: None,
            last_error: None,
            leased_until: 0,
            lease: 0,
            replay: None,
        }
    }
}

/// What a retention sweep removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Events past retention whose deliveries were all finished.
    pub events: u64,
    /// Duplicate-detection entries older than the window.
    pub dedupe_entries: u64,
}

/// What the hub decided after one delivery attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The sink took the event: the delivery is finished.
    Delivered,
    /// Try again, no earlier than `next_attempt_at`.
    Retry { next_attempt_at: u64 },
    /// Give up: the delivery becomes a dead letter, for this reason.
    DeadLetter { reason: String },
}

impl Verdict {
    /// Its name in metrics, logs and a subscription's last deliveries: `delivered`,
    /// `retry` or `deadLetter`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Delivered => "delivered",
            Verdict::Retry { .. } => "retry",
            Verdict::DeadLetter { .. } => "deadLetter",
        }
    }
}

/// One finished delivery attempt, as the store records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub subscription: String,
    /// The event ([`StoredEvent::seq`]).
    pub seq: u64,
    /// The token of the lease the attempt was made under ([`Delivery::lease`]).
    pub lease: u64,
    /// When the attempt was made (milliseconds since the Unix epoch).
    pub at: u64,
    /// The sink's HTTP status, if it answered.
    pub status: Option<u16>,
    /// What went wrong, if anything did.
    pub error: Option<String>,
    pub verdict: Verdict,
    /// Whether a delivered attempt leaves a [`Receipt`] (the operator may switch receipts
    /// off).
    pub receipt: bool,
}

/// A delivery the hub gave up on, with the history that led there. Its event is kept as long
/// as the dead letter is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub subscription: String,
    /// The event ([`StoredEvent::seq`]); also the dead letter's id within its subscription.
    pub seq: u64,
    pub attempts: u32,
    pub first_attempt_at: Option<u64>,
    pub last_attempt_at: Option<u64>,
    pub last_status: Option<u16>,
    pub last_error: Option<String>,
    /// Why the hub gave up.
    pub reason: String,
    /// When it became a dead letter.
    pub dead_at: u64,
}

impl DeadLetter {
    pub fn from_delivery(delivery: Delivery, reason: String, dead_at: u64) -> Self {
        DeadLetter {
            subscription: delivery.subscription,
            seq: delivery.seq,
            attempts: delivery.attempts,
            first_attempt_at: delivery.first_attempt_at,
            last_attempt_at: delivery.last_attempt_at,
            last_status: delivery.last_status,
            last_error: delivery.last_error,
            reason,
            dead_at,
        }
    }
}

/// A change to the delivery state, recorded durably; every backend applies them in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryChange {
    /// The result of an attempt.
    Attempted(Attempt),
    /// A dead letter goes back into its subscription's queue with fresh attempts.
    Redeliver {
        subscription: String,
        seq: u64,
        at: u64,
    },
    /// A dead letter is removed.
    DeleteDeadLetter { subscription: String, seq: u64 },
    /// The subscription's sink is gone (HTTP 410): every pending delivery becomes a dead
    /// letter.
    Retire {
        subscription: String,
        at: u64,
        reason: String,
    },
    /// These retained events are queued for the subscription again (a replay): a fresh
    /// delivery of each that has none pending, carrying the replay's id.
    Requeue {
        subscription: String,
        seqs: Vec<u64>,
        at: u64,
        replay: String,
    },
    /// These pending deliveries of the subscription (leased ones too) become dead letters,
    /// for this reason; the others stay as they are. An attempt under way still ends: if
    /// its sink took the event, the dead letter becomes a delivery with a receipt
    /// ([`DeliveryQueue::record`](crate::DeliveryQueue::record)).
    Withdraw {
        subscription: String,
        seqs: Vec<u64>,
        at: u64,
        reason: String,
    },
    /// Leases now held outside the hub (a pull consumer's locks), as `(seq, lease, until)`,
    /// kept so that they count after a crash: a lease that ran out counts as an attempt
    /// when its delivery is leased again, and no lease token is ever handed out twice. A
    /// backend whose leases are durable already changes nothing; a lease that is no longer
    /// the delivery's, or no delivery, is passed over.
    Leased {
        subscription: String,
        leases: Vec<(u64, u64, u64)>,
    },
}

/// A delivery its subscriber took (2xx): which event, to which subscription, when. Kept
/// for the audit trail's "who received this event" and "what did I receive".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The event ([`StoredEvent::seq`]).
    pub seq: u64,
    pub subscription: String,
    /// Milliseconds since the Unix epoch.
    pub delivered_at: u64,
}

/// The size of one subscription's queue, for metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueStats {
    pub subscription: String,
    /// Pending deliveries.
    pub pending: u64,
    /// The sizes of the pending deliveries' events (their JSON, with the types of
    /// extensions kept beside it), summed: an event pending for two subscriptions counts
    /// in each. What a backlog limit measures.
    pub pending_bytes: u64,
    /// When the oldest pending delivery's event was accepted.
    pub oldest_accepted_at: Option<u64>,
    pub dead_letters: u64,
    /// Pending deliveries leased now: attempts in flight (push), or events locked by
    /// consumers (pull).
    pub leased: u64,
}
