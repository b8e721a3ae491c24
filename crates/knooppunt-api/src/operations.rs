//! Operations endpoints outside the versioned API: `/healthz` (the process answers),
//! `/readyz` (the store takes writes and the delivery workers run), for load balancers and
//! orchestrators, and `/metrics` (Prometheus). Health and readiness need no token; the
//! metrics name every subscription, so on the API's address they need the `metrics` role,
//! and without a token they are served only on `server.metrics_listen`. None shows event
//! data.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::CONTENT_TYPE;
use http::{HeaderValue, StatusCode};
use serde_json::json;

use crate::auth::{Caller, Role};
use crate::problem::{ApiError, PROBLEM_JSON};
use knooppunt_services::app::AppState;

/// `GET /healthz`: 200 while the process serves requests.
pub(crate) async fn healthz() -> Response {
    Json(json!({"status": "up"})).into_response()
}

/// `GET /readyz`: 200 when the store takes writes and the delivery workers run, none of
/// them stuck; 503 with the failing check otherwise.
pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let store = match state.store_check().await {
        Ok(()) => "ok".to_owned(),
        Err(error) => error.to_string(),
    };
    let stuck = state.deliverer().health().stuck;
    let delivery = if !state.deliverer().is_running() {
        "stopped".to_owned()
    } else if !stuck.is_empty() {
        let shown: Vec<&str> = stuck.iter().take(10).map(String::as_str).collect();
        format!(
            "{} stuck (a worker that has not turned, an attempt running, or a queue with \
             deliveries due that has not moved, for longer than a lease): {}{}",
            stuck.len(),
            shown.join(", "),
            if stuck.len() > shown.len() {
                ", ..."
            } else {
                ""
            }
        )
    } else {
        "running".to_owned()
    };
    // Reported, not failed: a hub that refuses publishes (its disk or backlog full) still
    // serves the API and drains its deliveries.
    let publishing = match state.accepting_publishes().await {
        Ok(()) => "accepting".to_owned(),
        Err(why) => format!("refused: {why}"),
    };
    let checks = json!({"store": store, "delivery": delivery, "publishing": publishing});
    if store == "ok" && delivery == "running" {
        return Json(json!({"status": "ready", "checks": checks})).into_response();
    }
    // A problem (RFC 9457) with the checks as an extension member.
    let body = json!({
        "type": "urn:knooppunt:problem:not-ready",
        "title": "Not ready",
        "status": 503,
        "detail": format!("the hub is not ready: store: {store}; delivery workers: {delivery}"),
        "checks": checks
    });
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON))],
        Json(body),
    )
        .into_response()
}

/// `GET /metrics` on the API's address: the Prometheus text exposition, for principals with
/// the `metrics` role (it names every subscription).
pub(crate) async fn metrics(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> Result<Response, ApiError> {
    caller.require(Role::Metrics, "read the metrics")?;
    Ok(exposition(&state).await)
}

/// `GET /metrics` on `server.metrics_listen`: no token, for an address only the monitoring
/// network reaches.
pub(crate) async fn open_metrics(State(state): State<Arc<AppState>>) -> Response {
    exposition(&state).await
}

async fn exposition(state: &AppState) -> Response {
    let queues = match state.queue_stats().await {
        Ok(queues) => queues,
        Err(error) => {
            tracing::warn!(%error, "Reading the queue statistics for /metrics failed.");
            Vec::new()
        }
    };
    let states = state.subscriptions().count_by_state();
    let owner_of = |id: &str| state.subscriptions().get(id).map(|s| s.owner.clone());
    let mut body = state.telemetry().render(
        &state.publishing().counters,
        &queues,
        &states,
        &owner_of,
        knooppunt_services::ingest::now_ms(),
    );
    knooppunt_services::telemetry::render_worker_health(&mut body, &state.deliverer().health());
    knooppunt_services::telemetry::render_breakers(&mut body, &state.deliverer().breakers());
    match state.disk_usage().await {
        Ok(usage) => knooppunt_services::telemetry::render_store(
            &mut body,
            &usage,
            state.publishing().options.retention,
        ),
        Err(error) => tracing::warn!(%error, "Reading the store's disk use for /metrics failed."),
    }
    state.audit().render(&mut body);
    knooppunt_services::telemetry::render_build(&mut body, state.build());
    (
        [(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        body,
    )
        .into_response()
}
