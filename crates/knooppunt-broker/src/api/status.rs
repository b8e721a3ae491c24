//! How deliveries fare, for a subscription's owner and for the hub's administrators:
//! `GET /v1/subscriptions/{id}/status` (backlog, oldest age, breaker), `…/attempts` (the
//! latest attempts this hub made), `POST …/test` (a test event sent to the sink once), and
//! `GET /v1/status` (the hub's rates, backlog, open breakers and store).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use knooppunt_delivery::LastDelivery;
use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_store::{StoredEvent, Subscription, now_ms};
use serde_json::{Map, Value, json};

use super::auth::{Caller, Role};
use super::problem::ApiError;
use super::request::RequestAudit;
use super::subscriptions::{not_found, visible};
use crate::app::AppState;
use crate::audit::{Action, ActionName};

/// The subscription, if it is the caller's (or the caller an administrator).
fn owned(
    state: &AppState,
    caller: &Caller,
    id: &str,
    action: &str,
) -> Result<Arc<Subscription>, ApiError> {
    caller.require(Role::Subscriber, action)?;
    match state.subscriptions.get(id) {
        Some(subscription) if visible(caller, &subscription) => Ok(subscription),
        _ => Err(not_found(id)),
    }
}

/// An attempt as the API shows it.
pub(crate) fn attempt(last: &LastDelivery) -> Value {
    let mut object = Map::new();
    object.insert("time".into(), json!(utc_timestamp(last.at)));
    object.insert("sequence".into(), json!(last.seq));
    object.insert("outcome".into(), json!(last.outcome));
    if let Some(status) = last.status {
        object.insert("statusCode".into(), json!(status));
    }
    if let Some(duration) = last.duration_ms {
        object.insert("durationMs".into(), json!(duration));
    }
    if let Some(error) = &last.error {
        object.insert("error".into(), json!(error));
    }
    Value::Object(object)
}

/// `GET /v1/subscriptions/{id}/status`.
pub(crate) async fn subscription(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let subscription = owned(&state, &caller, &id, "read a subscription's status")?;
    let stats = state.queue_stats_of(&id).await?;
    let now = now_ms();
    let mut body = json!({
        "subscription": id,
        "state": if state.subscriptions.suspension(&subscription).is_some() {
            "suspended"
        } else {
            subscription.state().as_str()
        },
        "backlog": stats.as_ref().map_or(0, |s| s.pending),
        "backlogBytes": stats.as_ref().map_or(0, |s| s.pending_bytes),
        "inFlight": stats.as_ref().map_or(0, |s| s.leased),
        "deadLetters": stats.as_ref().map_or(0, |s| s.dead_letters),
    });
    let limits = state.backlog.options;
    let mut limit = Map::new();
    if limits.subscription_max_bytes > 0 {
        limit.insert("maxBytes".into(), json!(limits.subscription_max_bytes));
    }
    if let Some(age) = limits.subscription_max_age {
        limit.insert("maxAgeSeconds".into(), json!(age.as_secs()));
    }
    if !limit.is_empty() {
        limit.insert("policy".into(), json!("shed-oldest"));
        body["backlogLimit"] = Value::Object(limit);
    }
    if let Some(shed) = state.backlog.shed_of(&id) {
        body["shed"] = json!({
            "events": shed.events,
            "lastTime": utc_timestamp(shed.last_at),
            "reason": shed.last_reason,
        });
    }
    if let Some(oldest) = stats.as_ref().and_then(|s| s.oldest_accepted_at) {
        body["oldestPendingTime"] = json!(utc_timestamp(oldest));
        body["oldestPendingAgeSeconds"] = json!(now.saturating_sub(oldest) / 1000);
    }
    if !subscription.is_pull() {
        let health = state.deliverer.sink_health(&subscription.sink);
        let mut breaker = json!({
            "state": if health.open { "open" } else { "closed" },
            "failures": health.failures,
        });
        if let Some(until) = health.paused_until {
            breaker["pausedUntil"] = json!(utc_timestamp(until));
        }
        body["breaker"] = breaker;
    }
    if let Some(last) = state.deliverer.last_delivery(&id) {
        body["lastAttempt"] = attempt(&last);
    }
    Ok(Json(body).into_response())
}

/// `GET /v1/subscriptions/{id}/attempts`: the latest attempts of this hub, newest first.
pub(crate) async fn attempts(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    owned(&state, &caller, &id, "read a subscription's attempts")?;
    let attempts: Vec<Value> = state
        .deliverer
        .recent_attempts(&id)
        .iter()
        .map(attempt)
        .collect();
    Ok(Json(attempts).into_response())
}

/// The type of the events [`test`] sends.
pub(crate) const TEST_TYPE: &str = "nl.knooppunt.test";

/// `POST /v1/subscriptions/{id}/test`: sends a test event to an active push subscription's
/// sink once, as its deliveries go, and answers how the sink responded.
pub(crate) async fn test(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let subscription = owned(&state, &caller, &id, "send test events")?;
    if subscription.is_pull() {
        return Err(ApiError::Conflict(format!(
            "subscription `{id}` is a pull subscription: it has no endpoint to send a test \
             event to; receive from it instead"
        )));
    }
    if subscription.state().as_str() != "active" {
        return Err(ApiError::Conflict(format!(
            "subscription `{id}` is {}: test events go only to a sink that consented (an \
             active subscription)",
            subscription.state().as_str()
        )));
    }
    let now = now_ms();
    let event_id = uuid::Uuid::now_v7().to_string();
    let event = json!({
        "specversion": "1.0",
        "id": event_id,
        "source": "urn:knooppunt:hub",
        "type": TEST_TYPE,
        "subject": id,
        "time": utc_timestamp(now),
        "datacontenttype": "application/json",
        "data": {
            "message": "Testbericht van Knooppunt: uw endpoint is bereikbaar. / A test event from Knooppunt: your endpoint is reachable.",
            "requestedBy": caller.0.name,
        }
    });
    let stored = StoredEvent {
        seq: 0,
        source: "urn:knooppunt:hub".into(),
        id: event_id.clone(),
        accepted_at: now,
        json: event.to_string(),
        extension_types: None,
    };
    let sent = state.deliverer.send_test(&subscription, stored).await;
    let mut body = attempt(&sent);
    body["id"] = json!(event_id);
    body["outcome"] = json!(if sent.error.is_none() {
        "delivered"
    } else {
        "failed"
    });
    let action = Action::new(
        ActionName::SubscriptionTest,
        format!("subscription/{id}"),
        json!({"event": event_id, "statusCode": sent.status, "error": sent.error}),
    );
    state.audit.record(&audit.of(&caller), action).await;
    Ok(Json(body).into_response())
}

/// `GET /v1/status`: the hub at a glance, for administrators.
pub(crate) async fn hub(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ApiError> {
    caller.require(Role::Admin, "read the hub's status")?;
    let queues = state.queue_stats().await?;
    let now = now_ms();
    let (accepted, delivered) = state.telemetry.rates();
    let backlog: u64 = queues.iter().map(|q| q.pending).sum();
    let dead_letters: u64 = queues.iter().map(|q| q.dead_letters).sum();
    let oldest = queues.iter().filter_map(|q| q.oldest_accepted_at).min();
    let backlog_bytes: u64 = queues.iter().map(|q| q.pending_bytes).sum();
    let publishing = state.publishing().await;
    let mut body = json!({
        "eventsAcceptedPerSecond": (accepted * 10.0).round() / 10.0,
        "eventsDeliveredPerSecond": (delivered * 10.0).round() / 10.0,
        "backlog": backlog,
        "backlogBytes": backlog_bytes,
        "accepting": publishing.is_ok(),
        "deadLetters": dead_letters,
        "subscriptions": state.subscriptions.count_by_state(),
        "principals": state.principals.count(),
        "openBreakers": state.deliverer.open_sinks(),
        "stuckWorkers": state.deliverer.health().stuck,
    });
    if let Err(why) = publishing {
        body["refusing"] = json!(why);
    }
    if state.backlog.options.max_bytes > 0 {
        body["backlogMaxBytes"] = json!(state.backlog.options.max_bytes);
    }
    if let Some(oldest) = oldest {
        body["oldestPendingAgeSeconds"] = json!(now.saturating_sub(oldest) / 1000);
    }
    match state.disk_usage().await {
        Ok(usage) => {
            body["store"] = json!({
                "bytes": usage.total_bytes,
                "eventBytes": usage.event_bytes,
                "retentionSeconds": state.publishing.options.retention.as_secs(),
            });
            if let Some(free) = usage.free_bytes {
                body["store"]["freeBytes"] = json!(free);
            }
        }
        Err(error) => tracing::warn!(%error, "Reading the store's disk use failed."),
    }
    Ok(Json(body).into_response())
}
