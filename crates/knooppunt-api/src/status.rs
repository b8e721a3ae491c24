//! How deliveries fare, for a subscription's owner and for the hub's administrators:
//! `GET /v1/subscriptions/{id}/status` (backlog, oldest age, breaker), `…/attempts` (the
//! latest attempts this hub made), `POST …/test` (a test event sent to the sink once), and
//! `GET /v1/status` (the hub's rates, backlog, open breakers and store).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_store::now_ms;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::auth::{Caller, Role};
use crate::document::{BAD_REQUEST, FORBIDDEN, NOT_FOUND, Operation, UNAUTHORIZED, path_parameter};
use crate::endpoints::Endpoints;
use crate::ids::SubscriptionId;
use crate::problem::ApiError;
use crate::request::RequestAudit;
use crate::subscription_body::AttemptOut;
use knooppunt_services::app::AppState;
use knooppunt_services::use_case;

/// How a subscription's deliveries fare.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SubscriptionStatus")]
pub struct SubscriptionStatusOut {
    pub subscription: String,
    #[schemars(extend("enum" = ["pending", "active", "disabled", "suspended"]))]
    pub state: Cow<'static, str>,
    /// Pending deliveries.
    pub backlog: u64,
    /// The pending deliveries' events' sizes, summed: what the backlog limit measures.
    pub backlog_bytes: u64,
    /// The operator's limit on a subscription's undelivered events; past it the oldest
    /// become dead letters (`shed-oldest`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog_limit: Option<BacklogLimitOut>,
    /// Deliveries this hub moved to dead letters because the subscription was past its
    /// backlog limit (since the hub started).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shed: Option<ShedOut>,
    /// Pending deliveries leased now (attempts in flight, or events locked by pull
    /// consumers).
    pub in_flight: u64,
    pub dead_letters: u64,
    /// When the oldest pending event was accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub oldest_pending_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_pending_age_seconds: Option<u64>,
    /// The sink's breaker (push subscriptions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempt: Option<AttemptOut>,
}

#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "BacklogLimit")]
pub struct BacklogLimitOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age_seconds: Option<u64>,
    #[schemars(extend("enum" = ["shed-oldest"]))]
    pub policy: Cow<'static, str>,
}

#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Shed")]
pub struct ShedOut {
    pub events: u64,
    #[schemars(extend("format" = "date-time"))]
    pub last_time: String,
    pub reason: String,
}

#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Breaker")]
pub struct BreakerOut {
    /// `open`: the sink is paused and probed with one delivery at a time.
    #[schemars(extend("enum" = ["closed", "open"]))]
    pub state: Cow<'static, str>,
    /// Failed attempts in a row.
    pub failures: u32,
    /// No request before then (the breaker's pause, or the sink's `Retry-After`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub paused_until: Option<String>,
}

/// `GET /v1/subscriptions/{id}/status`.
pub(crate) async fn subscription(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<SubscriptionId>,
) -> Result<Response, ApiError> {
    let subscription =
        state
            .subscriptions()
            .for_subscriber(&caller.0, &id, "read a subscription's status")?;
    let stats = state.queue_stats_of(&id).await?;
    let now = now_ms();
    let limits = state.backlog().options;
    let limited = limits.subscription_max_bytes > 0 || limits.subscription_max_age.is_some();
    let oldest = stats.as_ref().and_then(|s| s.oldest_accepted_at);
    let body = SubscriptionStatusOut {
        state: if state.subscriptions().suspension(&subscription).is_some() {
            "suspended".into()
        } else {
            subscription.state().as_str().into()
        },
        backlog: stats.as_ref().map_or(0, |s| s.pending),
        backlog_bytes: stats.as_ref().map_or(0, |s| s.pending_bytes),
        backlog_limit: limited.then(|| BacklogLimitOut {
            max_bytes: (limits.subscription_max_bytes > 0).then_some(limits.subscription_max_bytes),
            max_age_seconds: limits.subscription_max_age.map(|age| age.as_secs()),
            policy: "shed-oldest".into(),
        }),
        shed: state.backlog().shed_of(&id).map(|shed| ShedOut {
            events: shed.events,
            last_time: utc_timestamp(shed.last_at),
            reason: shed.last_reason,
        }),
        in_flight: stats.as_ref().map_or(0, |s| s.leased),
        dead_letters: stats.as_ref().map_or(0, |s| s.dead_letters),
        oldest_pending_time: oldest.map(utc_timestamp),
        oldest_pending_age_seconds: oldest.map(|oldest| now.saturating_sub(oldest) / 1000),
        breaker: (!subscription.is_pull()).then(|| {
            let health = state.deliverer().sink_health(&subscription.sink);
            BreakerOut {
                state: if health.open { "open" } else { "closed" }.into(),
                failures: health.failures,
                paused_until: health.paused_until.map(utc_timestamp),
            }
        }),
        last_attempt: state
            .deliverer()
            .last_delivery(&id)
            .as_ref()
            .map(AttemptOut::from),
        subscription: id.into_string(),
    };
    Ok(Json(body).into_response())
}

/// `GET /v1/subscriptions/{id}/attempts`: the latest attempts of this hub, newest first.
pub(crate) async fn attempts(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<SubscriptionId>,
) -> Result<Response, ApiError> {
    state
        .subscriptions()
        .for_subscriber(&caller.0, &id, "read a subscription's attempts")?;
    let attempts: Vec<AttemptOut> = state
        .deliverer()
        .recent_attempts(&id)
        .iter()
        .map(AttemptOut::from)
        .collect();
    Ok(Json(attempts).into_response())
}

/// A test event sent: its id, and how the sink answered.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "TestDelivery")]
pub struct TestOut {
    /// The test event's id.
    pub id: String,
    #[schemars(extend("format" = "date-time"))]
    pub time: String,
    /// 0: a test event is not in the log.
    pub sequence: u64,
    #[schemars(extend("enum" = ["delivered", "failed"]))]
    pub outcome: Cow<'static, str>,
    /// What the sink answered, when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    /// How long the request took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// What went wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `POST /v1/subscriptions/{id}/test`: sends a test event to an active push subscription's
/// sink once, as its deliveries go, and answers how the sink responded.
pub(crate) async fn test(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
    Path(id): Path<SubscriptionId>,
) -> Result<Response, ApiError> {
    let sent =
        use_case::subscriptions::send_test(&state, &audit.of(&caller), &caller.0, &id).await?;
    let (event_id, sent) = (sent.event_id, sent.delivery);
    let body = TestOut {
        id: event_id,
        time: utc_timestamp(sent.at),
        sequence: sent.seq,
        outcome: if sent.error.is_none() {
            "delivered"
        } else {
            "failed"
        }
        .into(),
        status_code: sent.status,
        duration_ms: sent.duration_ms,
        error: sent.error.clone(),
    };
    Ok(Json(body).into_response())
}

/// The hub at a glance.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "HubStatus")]
pub struct HubStatusOut {
    /// The hub's release.
    #[schemars(example = &"0.1.0")]
    pub version: String,
    /// The commit it was built from (abbreviated), or `unknown`.
    #[schemars(example = &"7211de4a1b2c")]
    pub commit: String,
    pub events_accepted_per_second: f64,
    pub events_delivered_per_second: f64,
    pub backlog: u64,
    /// Undelivered bytes of all subscriptions.
    pub backlog_bytes: u64,
    /// The hub's limit on undelivered bytes; past it publishes get 503.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog_max_bytes: Option<u64>,
    /// false while publishes are refused: the backlog is past its limit, the disk has less
    /// room than its floor, or the store takes no writes (its disk full, its database
    /// away).
    pub accepting: bool,
    /// Why publishes are refused, when they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusing: Option<String>,
    pub dead_letters: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_pending_age_seconds: Option<u64>,
    /// Subscriptions by state.
    pub subscriptions: BTreeMap<Cow<'static, str>, u64>,
    pub principals: usize,
    /// Sinks (scheme, host, port) whose breaker is open.
    pub open_breakers: Vec<String>,
    /// Subscriptions whose delivery worker is stuck.
    pub stuck_workers: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreUsageOut>,
}

#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "StoreUsage")]
pub struct StoreUsageOut {
    pub bytes: u64,
    pub event_bytes: u64,
    /// Room left on the store's disk (embedded store).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_bytes: Option<u64>,
    pub retention_seconds: u64,
}

/// `GET /v1/status`: the hub at a glance, for administrators.
pub(crate) async fn hub(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ApiError> {
    caller.require(Role::Admin, "read the hub's status")?;
    let queues = state.queue_stats().await?;
    let now = now_ms();
    let (accepted, delivered) = state.telemetry().rates();
    let backlog: u64 = queues.iter().map(|q| q.pending).sum();
    let dead_letters: u64 = queues.iter().map(|q| q.dead_letters).sum();
    let oldest = queues.iter().filter_map(|q| q.oldest_accepted_at).min();
    let backlog_bytes: u64 = queues.iter().map(|q| q.pending_bytes).sum();
    let publishing = state.accepting_publishes().await;
    let store = match state.disk_usage().await {
        Ok(usage) => Some(StoreUsageOut {
            bytes: usage.total_bytes,
            event_bytes: usage.event_bytes,
            free_bytes: usage.free_bytes,
            retention_seconds: state.publishing().options.retention.as_secs(),
        }),
        Err(error) => {
            tracing::warn!(%error, "Reading the store's disk use failed.");
            None
        }
    };
    let body = HubStatusOut {
        version: state.build().version.clone(),
        commit: state.build().commit.clone(),
        events_accepted_per_second: (accepted * 10.0).round() / 10.0,
        events_delivered_per_second: (delivered * 10.0).round() / 10.0,
        backlog,
        backlog_bytes,
        backlog_max_bytes: (state.backlog().options.max_bytes > 0)
            .then_some(state.backlog().options.max_bytes),
        accepting: publishing.is_ok(),
        refusing: publishing.err(),
        dead_letters,
        oldest_pending_age_seconds: oldest.map(|oldest| now.saturating_sub(oldest) / 1000),
        subscriptions: state
            .subscriptions()
            .count_by_state()
            .into_iter()
            .map(|(state, count)| (state.into(), count))
            .collect(),
        principals: state.principals().count(),
        open_breakers: state.deliverer().open_sinks(),
        stuck_workers: state.deliverer().health().stuck,
        store,
    };
    Ok(Json(body).into_response())
}

/// The status operations.
pub(crate) fn describe(doc: &mut Endpoints) {
    const TAG: &str = "status";
    let id = json!([path_parameter(
        "id",
        "The id the hub assigned to the subscription."
    )]);
    let status = Operation::new(
        "getSubscriptionStatus",
        TAG,
        "How a subscription's deliveries fare: its backlog and oldest pending event, attempts \
         in flight, dead letters, its sink's breaker (as this hub sees it) and its last attempt.",
    )
    .answer(
        "200",
        "The status.",
        Some(doc.schema::<SubscriptionStatusOut>()),
    )
    .refusals(&[UNAUTHORIZED, FORBIDDEN, NOT_FOUND]);
    doc.get(
        "/subscriptions/{id}/status",
        self::subscription,
        &id,
        status,
    );
    let attempts = Operation::new(
        "listSubscriptionAttempts",
        TAG,
        "The latest delivery attempts (at most 50) this hub made for a subscription since it \
         started, newest first: time, status, duration and error of each. With several hubs, \
         each shows its own.",
    )
    .answer("200", "The attempts.", Some(doc.list_of::<AttemptOut>()))
    .refusals(&[UNAUTHORIZED, FORBIDDEN, NOT_FOUND]);
    doc.get(
        "/subscriptions/{id}/attempts",
        self::attempts,
        &id,
        attempts,
    );
    let test = Operation::new(
        "testSubscription",
        TAG,
        "Send a test event (type `nl.knooppunt.test`) to an active push subscription's sink \
         once, as its deliveries go (content mode, headers, credentials, signature), and \
         answer how the sink responded. Nothing is queued or retried.",
    )
    .answer(
        "200",
        "How the sink answered (a failure is a 200 too: the test ran).",
        Some(doc.schema::<TestOut>()),
    )
    .refusals(&[
        BAD_REQUEST,
        UNAUTHORIZED,
        FORBIDDEN,
        NOT_FOUND,
        (
            "409",
            "The subscription is not active, or is a pull subscription.",
        ),
    ]);
    doc.post("/subscriptions/{id}/test", self::test, &id, test);
    let hub = Operation::new(
        "getHubStatus",
        TAG,
        "The hub at a glance (administrators): events accepted and delivered per second over \
         the last minute (this hub), the backlog, open breakers, stuck workers and the store's \
         disk use.",
    )
    .answer("200", "The status.", Some(doc.schema::<HubStatusOut>()))
    .refusals(&[
        UNAUTHORIZED,
        ("403", "Only an administrator reads the hub's status."),
    ]);
    doc.get("/status", self::hub, &json!([]), hub);
}
