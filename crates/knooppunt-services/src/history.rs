//! A subscription's retained events, read again: the resumable stream (a consumer keeps its
//! own position, an opaque cursor) and replays (a window of them queued once more).
//!
//! Which events are a subscription's is decided now, not when they were accepted: the
//! retained events in acceptance order ([`EventLog::events_after`]) that its filters match and
//! its grants admit as they are now. A position older than what the retention sweep kept
//! ([`EventLog::swept_through`]) is refused with the oldest one still complete, so a consumer
//! knows it missed events.

use crate::refused::{Missing, Refused};
use std::sync::Arc;
use std::time::Duration;

use knooppunt_delivery::Deliverer;
use knooppunt_event::format::json::decode_event;
use knooppunt_filter::{Criteria, EvalLimits, Meter};
use knooppunt_store::{Replay, ReplayState, Store, StoreError, StoredEvent, Subscription};

use crate::approvals::Approvals;
use crate::subscriptions::Subscriptions;

/// The most events one read looks at (matching or not) before it answers with what it
/// found and the position it reached.
const SCAN: usize = 5_000;
/// Events read from the store at a time.
const CHUNK: usize = 500;

/// A page of the stream: the matching events and the position after them.
#[derive(Debug)]
pub struct Page {
    pub events: Vec<Arc<StoredEvent>>,
    /// Where to continue: the last event looked at (not necessarily one returned).
    pub next: u64,
}

/// Why a read was refused.
#[derive(Debug, thiserror::Error)]
pub enum HistoryRefused {
    #[error("there is no such subscription")]
    NoSubscription,
    /// Events after the position were removed by retention; `oldest` is the oldest position
    /// from which nothing is missing.
    #[error("events after this position are no longer retained")]
    Expired { oldest: u64 },
    /// Its owner is disabled (why).
    #[error("the subscription is suspended: {0}")]
    Suspended(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl HistoryRefused {
    /// The refusal of a read of subscription `id`'s events after cursor `after`, as every
    /// surface answers it.
    pub fn about(self, id: &str, after: Option<u64>) -> Refused {
        match self {
            HistoryRefused::NoSubscription => {
                Refused::NotFound(Missing::Subscription(id.to_owned()))
            }
            HistoryRefused::Expired { oldest } => Refused::Expired {
                detail: format!(
                    "events after cursor {} are no longer all retained (the retention removed \
                     events up to {oldest}): you may have missed events; read on from \
                     oldestCursor, or ask for a replay of what you need",
                    after.unwrap_or(0)
                ),
                oldest,
            },
            HistoryRefused::Suspended(why) => {
                Refused::Conflict(format!("subscription `{id}` is suspended: {why}"))
            }
            HistoryRefused::Store(error) => Refused::Store(error),
        }
    }
}

/// Reads subscriptions' retained events.
pub struct History {
    store: Arc<dyn Store>,
    subscriptions: Arc<Subscriptions>,
    approvals: Arc<Approvals>,
    deliverer: Deliverer,
    eval_limits: EvalLimits,
    idle_poll: Duration,
    replay: ReplayOptions,
    runners: Runners,
    /// Held by a replay's step while it queues, and by a cancel.
    steps: tokio::sync::Mutex<()>,
    /// True once the hub stops.
    stop: tokio::sync::watch::Receiver<bool>,
    /// Chunks of events being looked at (decoded and filtered) at once, by all readers
    /// together: half the cores, so that readers of streams can never take the CPU the
    /// publishers and deliveries need.
    scans: tokio::sync::Semaphore,
}

impl History {
    pub fn new(
        store: Arc<dyn Store>,
        subscriptions: Arc<Subscriptions>,
        approvals: Arc<Approvals>,
        deliverer: Deliverer,
        eval_limits: EvalLimits,
        replay: ReplayOptions,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> History {
        let idle_poll = deliverer.options().idle_poll;
        History {
            store,
            subscriptions,
            approvals,
            deliverer,
            eval_limits,
            idle_poll,
            replay,
            runners: Runners::default(),
            steps: tokio::sync::Mutex::new(()),
            stop,
            scans: tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1)),
            ),
        }
    }

    /// Up to `limit` of subscription `id`'s events after position `after` (from the oldest
    /// retained when `None`), waiting up to `wait` when there are none yet.
    pub async fn read(
        &self,
        id: &str,
        after: Option<u64>,
        limit: usize,
        wait: Duration,
    ) -> Result<Page, HistoryRefused> {
        let (subscription, criteria) = self
            .subscriptions
            .with_criteria(id)
            .ok_or(HistoryRefused::NoSubscription)?;
        if let Some(why) = self.subscriptions.suspension(&subscription) {
            return Err(HistoryRefused::Suspended(why));
        }
        let swept = self.store.swept_through().await?;
        let after = match after {
            Some(after) if after < swept => return Err(HistoryRefused::Expired { oldest: swept }),
            Some(after) => after,
            None => swept,
        };
        let deadline = tokio::time::Instant::now() + wait;
        let wake = self.deliverer.watch(id);
        let mut closing = self.deliverer.closing();
        loop {
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let page = self.scan(&subscription, &criteria, after, limit).await?;
            if !page.events.is_empty() || page.next != after {
                return Ok(page);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(page);
            }
            // A stopping hub answers what it has rather than keep a shutdown waiting.
            if *closing.borrow_and_update() {
                return Ok(page);
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline.min(now + self.idle_poll)) => {}
                _ = closing.changed() => return Ok(page),
            }
        }
    }

    /// Looks at up to [`SCAN`] events after `after`, keeping those of the subscription.
    async fn scan(
        &self,
        subscription: &Subscription,
        criteria: &Criteria,
        after: u64,
        limit: usize,
    ) -> Result<Page, StoreError> {
        let mut page = Page {
            events: Vec::new(),
            next: after,
        };
        let mut looked = 0;
        while looked < SCAN && page.events.len() < limit {
            let _scanning = self.scans.acquire().await.expect("never closed");
            let chunk = self.store.events_after(page.next, CHUNK).await?;
            let Some(last) = chunk.last() else { break };
            let last = last.seq;
            for event in chunk {
                looked += 1;
                page.next = event.seq;
                if self.is_for(subscription, criteria, &event) {
                    page.events.push(event);
                    if page.events.len() == limit {
                        return Ok(page);
                    }
                }
            }
            debug_assert_eq!(page.next, last);
            tokio::task::yield_now().await;
        }
        Ok(page)
    }

    /// Whether `event` is one the subscription receives now: its filters match and its
    /// grants admit it.
    pub fn is_for(
        &self,
        subscription: &Subscription,
        criteria: &Criteria,
        event: &StoredEvent,
    ) -> bool {
        let Ok(received) = decode_event(event.json.as_bytes()) else {
            return false;
        };
        let decoded = match &event.extension_types {
            Some(types) => received.event.with_extension_types_text(types),
            None => received.event,
        };
        // A notice only to its recipient, and only when the subscription asks for them
        // (the recipient is looked up for notices alone).
        let notice_seen = !decoded.source().starts_with(crate::notices::SOURCE_PREFIX) || {
            let recipient = match decoded.extension(crate::notices::RECIPIENT) {
                Some(knooppunt_event::AttributeValue::String(name)) => Some(name.as_str()),
                _ => None,
            };
            crate::notices::may_see(decoded.source(), recipient, &subscription.owner)
                && crate::notices::asks_for_notices(subscription)
        };
        notice_seen
            && criteria.matches_metered(&decoded, &mut Meter::new(self.eval_limits))
            && self
                .approvals
                .admits(&subscription.id, decoded.source(), decoded.ty())
    }
}

/// How replays run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayOptions {
    /// The most replays one hub runs at once.
    pub max_running: usize,
    /// Events one replay queues per second at most, so that a large window does not flood
    /// its subscriber (nor the store) at once.
    pub rate: u32,
    /// A replay whose runner has not changed it for this long is taken over (its hub
    /// stopped); runners change theirs at every step, at least once a second.
    pub takeover: Duration,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            max_running: 4,
            rate: 5_000,
            takeover: Duration::from_secs(30),
        }
    }
}
/// Replays kept per subscription in a listing (the newest).
pub const LISTED: usize = 100;

/// Why a replay could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReplayRefused {
    #[error("there is no such subscription")]
    NoSubscription,
    #[error("{0}")]
    Window(String),
    #[error(
        "this hub runs {0} replays already, its most (delivery.max_replays): try again when one \
         has finished"
    )]
    TooMany(usize),
    /// Its owner is disabled (why).
    #[error("the subscription is suspended: {0}")]
    Suspended(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The replays this hub runs: a cancel flag each.
#[derive(Debug, Default)]
pub struct Runners {
    running:
        std::sync::Mutex<std::collections::HashMap<String, Arc<std::sync::atomic::AtomicBool>>>,
}

impl Runners {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::HashMap<String, Arc<std::sync::atomic::AtomicBool>>,
    > {
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Ends the runner's entry however it stops (a panic included).
struct Running<'a> {
    runners: &'a Runners,
    id: String,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.runners.lock().remove(&self.id);
    }
}

impl History {
    /// Starts replaying subscription `id`'s retained events accepted from `from_ms` to
    /// `until_ms` (now when `None`, and never later than now): a job this hub runs.
    pub async fn start_replay(
        self: &Arc<Self>,
        id: &str,
        requested_by: &str,
        from_ms: u64,
        until_ms: Option<u64>,
    ) -> Result<Replay, ReplayRefused> {
        let subscription = self
            .subscriptions
            .get(id)
            .ok_or(ReplayRefused::NoSubscription)?;
        if let Some(why) = self.subscriptions.suspension(&subscription) {
            return Err(ReplayRefused::Suspended(why));
        }
        let now = knooppunt_store::now_ms();
        let until_ms = until_ms.unwrap_or(now).min(now);
        if from_ms > until_ms {
            return Err(ReplayRefused::Window(
                "`from` is after `until` (or in the future): the window is empty".into(),
            ));
        }
        // A place among the runners is reserved first (the bound holds), and given back if
        // the job cannot be stored.
        let replay_id = uuid::Uuid::now_v7().to_string();
        let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        {
            let mut running = self.runners.lock();
            if running.len() >= self.replay.max_running {
                return Err(ReplayRefused::TooMany(running.len()));
            }
            running.insert(replay_id.clone(), Arc::clone(&cancelled));
        }
        let stored = async {
            let replay = Replay {
                id: replay_id.clone(),
                subscription: id.to_owned(),
                requested_by: requested_by.to_owned(),
                from_ms,
                until_ms,
                state: ReplayState::Running,
                position: self.store.seq_before(from_ms).await?,
                queued: 0,
                last_event_at: None,
                created_at: now,
                updated_at: now,
                finished_at: None,
                error: None,
            };
            if !self.store.put_replay(&replay, None).await? {
                return Err(StoreError::Conflict(replay_id.clone()));
            }
            Ok(replay)
        }
        .await;
        let replay = match stored {
            Ok(replay) => replay,
            Err(error) => {
                self.runners.lock().remove(&replay_id);
                return Err(error.into());
            }
        };
        tokio::spawn(Arc::clone(self).run(replay.clone(), cancelled));
        // The job runs whatever becomes of this; the next start prunes again.
        if let Err(error) = self.prune(id).await {
            tracing::warn!(subscription = id, %error, "Removing a subscription's oldest replays failed.");
        }
        Ok(replay)
    }

    /// Keeps at most [`LISTED`] replays of a subscription: the oldest finished ones go.
    async fn prune(&self, id: &str) -> Result<(), StoreError> {
        let replays: Vec<Replay> = self
            .store
            .replays()
            .await?
            .into_iter()
            .filter(|r| r.subscription == id)
            .collect();
        let excess = replays.len().saturating_sub(LISTED);
        for old in replays
            .iter()
            .filter(|r| r.state != ReplayState::Running)
            .take(excess)
        {
            self.store.delete_replay(&old.id).await?;
        }
        Ok(())
    }

    /// Removes the jobs of subscriptions that no longer exist, and finished ones that ended
    /// before `before_ms`; how many.
    pub async fn sweep(&self, before_ms: u64) -> Result<u64, StoreError> {
        let mut removed = 0;
        for replay in self.store.replays().await? {
            let gone = self.subscriptions.get(&replay.subscription).is_none();
            let old = replay.finished_at.is_some_and(|at| at < before_ms);
            if (gone || old)
                && !self.runners.lock().contains_key(&replay.id)
                && self.store.delete_replay(&replay.id).await?
            {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Subscription `id`'s replays, newest first (at most [`LISTED`]).
    pub async fn replays(&self, id: &str) -> Result<Vec<Replay>, StoreError> {
        let mut replays: Vec<Replay> = self
            .store
            .replays()
            .await?
            .into_iter()
            .filter(|r| r.subscription == id)
            .collect();
        replays.reverse();
        replays.truncate(LISTED);
        Ok(replays)
    }

    pub async fn replay(&self, id: &str, replay: &str) -> Result<Option<Replay>, StoreError> {
        Ok(self
            .store
            .replays()
            .await?
            .into_iter()
            .find(|r| r.subscription == id && r.id == replay))
    }

    /// Cancels a running replay: on this hub nothing more is queued once this returns; a
    /// replay another hub runs stops at its next step. A finished one is returned as it is.
    pub async fn cancel(&self, id: &str, replay: &str) -> Result<Option<Replay>, StoreError> {
        if let Some(flag) = self.runners.lock().get(replay) {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        // The runner holds this while it queues a step, so none is under way after it.
        let _step = self.steps.lock().await;
        loop {
            let Some(current) = self.replay(id, replay).await? else {
                return Ok(None);
            };
            if current.state != ReplayState::Running {
                return Ok(Some(current));
            }
            let now = knooppunt_store::now_ms();
            let cancelled = Replay {
                state: ReplayState::Cancelled,
                finished_at: Some(now),
                updated_at: now.max(current.updated_at + 1),
                ..current.clone()
            };
            if self
                .store
                .put_replay(&cancelled, Some(current.updated_at))
                .await?
            {
                return Ok(Some(cancelled));
            }
        }
    }

    /// Runs a replay, a step at a time, until it has looked at its whole window, is
    /// cancelled, or another hub changed it (took it over).
    async fn run(
        self: Arc<Self>,
        mut replay: Replay,
        cancelled: Arc<std::sync::atomic::AtomicBool>,
    ) {
        let _running = Running {
            runners: &self.runners,
            id: replay.id.clone(),
        };
        let mut stop = self.stop.clone();
        tracing::info!(replay = %replay.id, subscription = %replay.subscription, "A replay runs.");
        loop {
            if *stop.borrow_and_update() {
                return; // another hub, or this one after its restart, takes it over
            }
            match self.step(&replay, &cancelled).await {
                Ok(Some(next)) => {
                    let done = next.state != ReplayState::Running;
                    replay = next;
                    if done {
                        tracing::info!(replay = %replay.id, queued = replay.queued, state = replay.state.as_str(), "A replay ended.");
                        return;
                    }
                }
                Ok(None) => return, // cancelled or taken over
                Err(error) => {
                    tracing::warn!(replay = %replay.id, %error, "A replay step failed; it is tried again.");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = stop.changed() => return,
                    }
                }
            }
            tokio::task::yield_now().await;
        }
    }

    /// One step: the next events of the window queued, the progress stored. `None` when the
    /// replay is no longer this runner's to change.
    async fn step(
        &self,
        replay: &Replay,
        cancelled: &std::sync::atomic::AtomicBool,
    ) -> Result<Option<Replay>, StoreError> {
        let now = knooppunt_store::now_ms();
        let mut next = Replay {
            updated_at: now.max(replay.updated_at + 1),
            ..replay.clone()
        };
        let Some((subscription, criteria)) = self.subscriptions.with_criteria(&replay.subscription)
        else {
            next.state = ReplayState::Failed;
            next.error = Some("the subscription was deleted".into());
            next.finished_at = Some(now);
            return self.save(replay, next).await;
        };
        let size = CHUNK.min(self.replay.rate.max(1) as usize);
        let scanning = self.scans.acquire().await.expect("never closed");
        let chunk = self.store.events_after(replay.position, size).await?;
        // Acceptance times are only nearly in number order: a minute past the window ends it.
        let mut done = chunk.is_empty();
        let mut seqs = Vec::new();
        for event in &chunk {
            if event.accepted_at > replay.until_ms.saturating_add(60_000) {
                done = true;
                break;
            }
            next.position = event.seq;
            if (replay.from_ms..=replay.until_ms).contains(&event.accepted_at)
                && self.is_for(&subscription, &criteria, event)
            {
                seqs.push(event.seq);
                next.last_event_at = Some(event.accepted_at);
            }
        }
        drop(scanning);
        if done {
            next.state = ReplayState::Completed;
            next.finished_at = Some(now);
        }
        next.queued += seqs.len() as u64;
        let queued = seqs.len();
        {
            let _step = self.steps.lock().await;
            if cancelled.load(std::sync::atomic::Ordering::SeqCst) {
                return Ok(None);
            }
            // Queued before the progress is stored: a runner that dies in between leaves
            // the step to be done again by the one that takes over (an event already
            // pending is not queued twice; one delivered meanwhile comes again: at least
            // once), never skipped.
            if !seqs.is_empty() {
                self.store
                    .record(vec![knooppunt_store::DeliveryChange::Requeue {
                        subscription: replay.subscription.clone(),
                        seqs,
                        at: now,
                        replay: replay.id.clone(),
                    }])
                    .await?;
                self.deliverer.wake([&replay.subscription]);
            }
            let Some(saved) = self.save(replay, next).await? else {
                // Cancelled or taken over by another hub meanwhile.
                return Ok(None);
            };
            next = saved;
        }
        // At most `rate` events a second.
        if queued > 0 && next.state == ReplayState::Running {
            let pause = Duration::from_secs_f64(queued as f64 / f64::from(self.replay.rate.max(1)));
            tokio::time::sleep(pause).await;
        }
        Ok(Some(next))
    }

    async fn save(&self, current: &Replay, next: Replay) -> Result<Option<Replay>, StoreError> {
        Ok(self
            .store
            .put_replay(&next, Some(current.updated_at))
            .await?
            .then_some(next))
    }

    /// Takes over running replays whose runner stopped (its hub died or was restarted),
    /// now and every third of the takeover time, until the hub stops.
    pub async fn take_over(self: Arc<Self>) {
        let mut stop = self.stop.clone();
        loop {
            if let Err(error) = self.take_over_once().await {
                tracing::warn!(%error, "Looking for replays to take over failed; trying again.");
            }
            let poll = (self.replay.takeover / 3)
                .clamp(Duration::from_millis(100), Duration::from_secs(10));
            tokio::select! {
                () = tokio::time::sleep(poll) => {}
                _ = stop.changed() => return,
            }
        }
    }

    async fn take_over_once(self: &Arc<Self>) -> Result<(), StoreError> {
        let now = knooppunt_store::now_ms();
        for replay in self.store.replays().await? {
            let stale = replay.state == ReplayState::Running
                && now.saturating_sub(replay.updated_at) >= self.replay.takeover.as_millis() as u64;
            if !stale || self.runners.lock().contains_key(&replay.id) {
                continue;
            }
            let claimed = Replay {
                updated_at: now.max(replay.updated_at + 1),
                ..replay.clone()
            };
            if !self
                .store
                .put_replay(&claimed, Some(replay.updated_at))
                .await?
            {
                continue; // another hub took it
            }
            let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
            self.runners
                .lock()
                .insert(claimed.id.clone(), Arc::clone(&cancelled));
            tracing::info!(replay = %claimed.id, "A replay whose runner stopped is taken over.");
            tokio::spawn(Arc::clone(self).run(claimed, cancelled));
        }
        Ok(())
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").finish_non_exhaustive()
    }
}
