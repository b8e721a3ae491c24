//! The background tasks that keep the hub in step with the store, the other hubs and its
//! owners, and what the delivery workers report.

use super::*;

/// Waits for `next` unless the hub stops first; `None` when it stops. Also when it stopped
/// before this was called: a stop sent before a background task first ran is never
/// `changed` for it. The one loop skeleton of the background tasks below.
pub(super) async fn unless_stopped<T>(
    stop: &mut tokio::sync::watch::Receiver<bool>,
    next: impl std::future::Future<Output = T>,
) -> Option<T> {
    if *stop.borrow_and_update() {
        return None;
    }
    tokio::select! {
        _ = stop.changed() => None,
        value = next => Some(value),
    }
}

/// What the delivery workers report: counted by the telemetry, and dead letters told to
/// their subscriptions' owners.
pub(super) struct Observed {
    pub(super) telemetry: Arc<Telemetry>,
    pub(super) notices: crate::notices::Notices,
}

impl knooppunt_delivery::Observer for Observed {
    fn attempt(
        &self,
        subscription: &str,
        verdict: &knooppunt_store::Verdict,
        status: Option<u16>,
        elapsed: std::time::Duration,
    ) {
        self.telemetry
            .attempt(subscription, verdict, status, elapsed);
    }

    fn dead_lettered(&self, subscription: &str, reason: &str) {
        self.notices
            .dead_lettered(subscription, reason, knooppunt_store::now_ms());
    }

    fn breaker_opened(&self, subscription: &str, failures: u32) {
        self.notices
            .breaker_opened(subscription, failures, knooppunt_store::now_ms());
    }

    fn finished(&self, bytes: u64) {
        self.telemetry.finished(bytes);
    }

    fn received(&self, count: usize) {
        self.telemetry.received(count);
    }

    fn settled(&self, outcome: &'static str, count: usize) {
        self.telemetry.settled(outcome, count);
    }
}

/// Publishes the notices of trouble to the owners of the subscriptions they are about
/// ([`crate::notices`]): as events of the hub's own source, routed only to the owner's
/// subscriptions. A notice about a subscription deleted meanwhile goes nowhere.
pub(super) async fn tell_owners(
    state: Arc<AppState>,
    mut queue: tokio::sync::mpsc::Receiver<crate::notices::Notice>,
    hub: String,
) {
    let mut stop = state.running.stop.subscribe();
    loop {
        let Some(Some(notice)) = unless_stopped(&mut stop, queue.recv()).await else {
            return;
        };
        let Some(subscription) = state.subscriptions().get(&notice.subscription) else {
            continue;
        };
        let now = knooppunt_store::now_ms();
        let event = crate::notices::event(
            &notice,
            &hub,
            &subscription.owner,
            &uuid::Uuid::now_v7().to_string(),
            &knooppunt_event::timestamp::utc_timestamp(now),
        );
        if let Err(why) = state
            .publishing()
            .publish_notice(event, &subscription.owner)
            .await
        {
            tracing::warn!(subscription = %notice.subscription, kind = notice.kind, error = %why, "A notice to a subscription's owner could not be published.");
        }
    }
}

/// Hands the 410s the delivery workers report to the one writer of subscriptions.
pub(super) async fn follow_gone(
    state: Arc<AppState>,
    mut reports: tokio::sync::mpsc::UnboundedReceiver<knooppunt_delivery::Gone>,
) {
    let mut stop = state.running.stop.subscribe();
    loop {
        let Some(Some(gone)) = unless_stopped(&mut stop, reports.recv()).await else {
            return;
        };
        if state.subscriptions().gone(&gone).await {
            let owner = state
                .subscriptions()
                .get(&gone.subscription)
                .map(|s| s.owner.clone());
            let hub = crate::audit::Context {
                actor: Some(crate::audit::HUB.into()),
                ..crate::audit::Context::default()
            };
            let action = crate::audit::Action::new(
                crate::audit::ActionName::SubscriptionDisable,
                format!("subscription/{}", gone.subscription),
                serde_json::json!({"why": "the sink answered 410 Gone; its queue became dead letters"}),
            )
            .concerning(owner);
            state.audit().record(&hub, action).await;
        }
    }
}

/// Reloads the principals and subscriptions when another hub sharing the store changed them: when the
/// store tells of a change, and (the safety net) when the version it polls every
/// `resync_interval` changed.
pub(super) async fn follow_other_hubs(state: Arc<AppState>) {
    let mut stop = state.running.stop.subscribe();
    let mut interval = tokio::time::interval(state.settings.resync_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut known = state.running.store.subscriptions_version().await.ok();
    // What this hub loaded at its start is applied.
    if let Some(version) = known {
        let _ = state
            .running
            .store
            .hub_applied(state.deliverer().hub_id(), version)
            .await;
    }
    loop {
        let changed = async {
            tokio::select! {
                _ = interval.tick() => {}
                () = state.running.resync_now.notified() => {}
            }
        };
        if unless_stopped(&mut stop, changed).await.is_none() {
            return;
        }
        let version = match state.running.store.subscriptions_version().await {
            Ok(version) => version,
            Err(error) => {
                tracing::debug!(%error, "Reading the subscriptions' version failed; trying again.");
                continue;
            }
        };
        if known == Some(version) {
            continue;
        }
        if let Err(error) = state.catalog().reload().await {
            tracing::warn!(%error, "Reloading the catalog failed; trying again.");
            continue;
        }
        if let Err(error) = state.approvals().reload().await {
            tracing::warn!(%error, "Reloading the approvals failed; trying again.");
            continue;
        }
        if let Err(error) = state.principals().reload().await {
            tracing::warn!(%error, "Reloading the principals failed; trying again.");
            continue;
        }
        // Another hub disabled or enabled a principal: its subscriptions follow here too.
        state
            .subscriptions()
            .suspend_owners(state.principals().disabled())
            .await;
        match state.subscriptions().resync().await {
            Ok(changed) => {
                known = Some(version);
                if changed > 0 {
                    tracing::info!(changed, "Subscriptions changed by another hub were loaded.");
                }
                // Told, so that a hub taking a right away knows this one cut it.
                if let Err(error) = state
                    .running
                    .store
                    .hub_applied(state.deliverer().hub_id(), version)
                    .await
                {
                    tracing::debug!(%error, "Saying how far this hub applied changes failed.");
                }
            }
            Err(error) => {
                tracing::warn!(%error, "Reloading the subscriptions failed; trying again.")
            }
        }
    }
}

/// Measures the backlog and sheds what is past a subscription's limit, every
/// `check_interval`, until the hub stops (`backlog.rs`).
pub(super) async fn guard_backlog(state: Arc<AppState>) {
    let mut stop = state.running.stop.subscribe();
    let mut interval = tokio::time::interval(state.backlog().options.check_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while unless_stopped(&mut stop, interval.tick()).await.is_some() {
        if let Err(error) = state.backlog().check(knooppunt_store::now_ms()).await {
            tracing::warn!(%error, "Measuring the backlog failed; it is measured again shortly.");
        }
    }
}

/// Samples the counters every few seconds, for the rates the console shows.
pub(super) async fn sample_rates(state: Arc<AppState>) {
    let mut stop = state.running.stop.subscribe();
    let mut interval = tokio::time::interval(std::time::Duration::from_secs(5));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while unless_stopped(&mut stop, interval.tick()).await.is_some() {
        state
            .telemetry()
            .sample(&state.publishing().counters, knooppunt_store::now_ms());
    }
}

/// Removes dead letters past their retention, finished events past retention and old
/// duplicate-detection entries, every `sweep_interval`, until the hub stops.
pub(super) async fn sweep_periodically(state: Arc<AppState>) {
    let mut stop = state.running.stop.subscribe();
    let mut interval = tokio::time::interval(state.publishing().options.sweep_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if unless_stopped(&mut stop, interval.tick()).await.is_none() {
            return;
        }
        // Dead letters first: the events they held can go in the same sweep.
        if let Err(error) = state
            .backlog()
            .sweep_dead_letters(knooppunt_store::now_ms())
            .await
        {
            tracing::warn!(%error, "The dead-letter retention sweep failed; it will run again.");
        }
        let retention = state.publishing().options.retention.as_millis() as u64;
        let window = state.publishing().options.dedupe_window.as_millis() as u64;
        match state
            .running
            .store
            .sweep(knooppunt_store::now_ms(), retention, window)
            .await
        {
            Ok(swept) if swept.events > 0 || swept.dedupe_entries > 0 => tracing::info!(
                events = swept.events,
                dedupe_entries = swept.dedupe_entries,
                "Retention sweep removed finished events."
            ),
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "Retention sweep failed; it will run again."),
        }
        // Replay jobs are kept as long as events are.
        let finished_before = knooppunt_store::now_ms().saturating_sub(retention);
        match state.history().sweep(finished_before).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "Finished replays past retention removed."),
            Err(error) => tracing::warn!(%error, "The replay sweep failed; it will run again."),
        }
        match state.sessions().sweep().await {
            Ok(0) => {}
            Ok(ended) => tracing::debug!(ended, "Ended console sessions removed."),
            Err(error) => tracing::warn!(%error, "The session sweep failed; it will run again."),
        }
        let before = knooppunt_store::now_ms()
            .saturating_sub(state.settings.audit_retention.as_millis() as u64);
        match state
            .audit()
            .retain(state.running.store.as_ref(), before)
            .await
        {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "Audit entries past retention removed."),
            Err(error) => {
                tracing::warn!(%error, "The audit retention sweep failed; it will run again.")
            }
        }
    }
}
