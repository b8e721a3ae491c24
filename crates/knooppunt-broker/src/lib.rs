//! The hub: the HTTP API (axum) on top of the store, the filters and (later) the delivery
//! workers, and the wiring between them.
//!
//! Start one with [`Hub::open`] and [`serve`]; the binary crate `knooppunt` does that from
//! the configuration file.

// The OpenAPI document is one large `json!` literal.
#![recursion_limit = "256"]

pub mod api;
pub mod identity;
pub mod ingest;
mod lifecycle;
mod principals;
mod registry;
mod server;
mod telemetry;

use std::future::Future;
use std::sync::Arc;

use knooppunt_event::Event;
use knooppunt_store::{ConfigDefaults, Store};
use tokio::net::TcpListener;

pub use identity::tokens::IssuerSettings;
pub use identity::{Authentication, Oin, Principal, Role, hash_token, is_oin};
pub use ingest::{IngestCounters, IngestOptions, MIN_EVENT_BYTES};
pub use knooppunt_filter::EvalLimits;
pub use lifecycle::Quotas;

use knooppunt_delivery::Deliverer;
pub use knooppunt_delivery::{ConnectionLimits, DeliveryOptions, SinkNetworks};
use lifecycle::Subscriptions;
pub use server::{ServerLimits, TlsSettings};

/// The major version in every path.
pub const BASE_PATH: &str = "/v1";
/// The full API version, sent as `API-Version` on every response and in the OpenAPI document.
pub const API_VERSION: &str = "1.0.0";

/// Everything a hub needs besides its store.
#[derive(Debug, Clone)]
pub struct HubOptions {
    pub authentication: Authentication,
    pub ingest: IngestOptions,
    pub delivery: DeliveryOptions,
    /// The hub's own base URL as sinks reach it (for the validation callback URL, e.g.
    /// `https://knooppunt.example.nl`); when absent, taken from each request's `Host`.
    pub public_url: Option<String>,
    /// How long shutting down waits for delivery attempts in flight.
    pub shutdown_grace: std::time::Duration,
    /// The `config` values a subscription gets for the keys it leaves out.
    pub subscription_defaults: ConfigDefaults,
    /// Accept `http://` sinks off this machine (HTTPS is required otherwise); for test
    /// environments without TLS.
    pub allow_http_sinks: bool,
    /// How large and deep subscriptions' filters may be.
    pub filter_limits: knooppunt_filter::Limits,
    /// What evaluating one subscription's filters against one event may cost.
    pub eval_limits: knooppunt_filter::EvalLimits,
    /// How many subscriptions, and how much filter, one principal may have.
    pub quotas: Quotas,
    /// The bounds on inbound connections.
    pub server: ServerLimits,
    /// HTTPS for the API (and client certificates); plain HTTP when absent.
    pub tls: Option<TlsSettings>,
    /// How often the hub asks the store whether another hub changed subscriptions (a store
    /// only this hub writes never says so).
    pub resync_interval: std::time::Duration,
}

impl HubOptions {
    /// Default ingest, delivery and shutdown settings with this authentication.
    pub fn new(authentication: Authentication) -> HubOptions {
        HubOptions {
            authentication,
            ingest: IngestOptions::default(),
            delivery: DeliveryOptions::default(),
            public_url: None,
            shutdown_grace: std::time::Duration::from_secs(10),
            subscription_defaults: ConfigDefaults::default(),
            allow_http_sinks: false,
            filter_limits: knooppunt_filter::Limits::DEFAULT,
            eval_limits: knooppunt_filter::EvalLimits::DEFAULT,
            quotas: Quotas::default(),
            server: ServerLimits::default(),
            tls: None,
            resync_interval: std::time::Duration::from_secs(1),
        }
    }
}

/// Shared by every request handler.
pub(crate) struct AppState {
    pub(crate) store: Arc<dyn Store>,
    /// The one writer of subscriptions, and the registry routing reads.
    pub(crate) subscriptions: Subscriptions,
    pub(crate) authentication: Authentication,
    /// The one writer of principals, and the table requests are authenticated against.
    pub(crate) principals: principals::Principals,
    /// The trusted issuers of access tokens.
    pub(crate) issuers: identity::tokens::Issuers,
    pub(crate) ingest: IngestOptions,
    pub(crate) counters: IngestCounters,
    pub(crate) deliverer: Deliverer,
    pub(crate) telemetry: Arc<telemetry::Telemetry>,
    pub(crate) public_url: Option<String>,
    pub(crate) subscription_defaults: ConfigDefaults,
    pub(crate) allow_http_sinks: bool,
    pub(crate) filter_limits: knooppunt_filter::Limits,
    pub(crate) eval_limits: knooppunt_filter::EvalLimits,
    /// Blocking threads that evaluate costly publishes' filters ([`ingest::ROUTING_THREADS`]).
    pub(crate) routing_slots: tokio::sync::Semaphore,
    pub(crate) server: ServerLimits,
    tls: Option<TlsSettings>,
    shutdown_grace: std::time::Duration,
    resync_interval: std::time::Duration,
    /// Set when the store tells of a subscription change made by another hub.
    resync_now: tokio::sync::Notify,
    /// Tells the background tasks to stop.
    stop: tokio::sync::watch::Sender<bool>,
    background: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// Why a hub could not start.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Store(#[from] knooppunt_store::StoreError),
    #[error("{0}")]
    Config(String),
}

/// A running hub's state; cheap to clone.
#[derive(Clone)]
pub struct Hub {
    state: Arc<AppState>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl Hub {
    /// Loads the subscriptions from the store and builds the matching index.
    pub async fn open(store: Arc<dyn Store>, options: HubOptions) -> Result<Hub, HubError> {
        let telemetry = Arc::new(telemetry::Telemetry::default());
        let observer: Arc<dyn knooppunt_delivery::Observer> = telemetry.clone();
        let (deliverer, retirements) =
            Deliverer::new(Arc::clone(&store), options.delivery, observer)
                .map_err(HubError::Config)?;
        let subscriptions = Subscriptions::load(
            Arc::clone(&store),
            deliverer.clone(),
            options.filter_limits,
            options.quotas,
        )
        .await?;
        let principals = principals::Principals::load(Arc::clone(&store)).await?;
        let issuers = match &options.authentication {
            Authentication::Enabled { seeds, issuers } => {
                let now = knooppunt_store::now_ms();
                let seeds: Vec<_> = seeds
                    .iter()
                    .map(|(hash, principal)| principals::seed_record(hash, principal, now))
                    .collect();
                principals.seed(&seeds).await?;
                issuers.clone()
            }
            Authentication::Disabled => Vec::new(),
        };
        let (stop, _) = tokio::sync::watch::channel(false);
        let hub = Hub {
            state: Arc::new(AppState {
                store,
                subscriptions,
                authentication: options.authentication,
                principals,
                issuers: identity::tokens::Issuers::new(issuers),
                ingest: options.ingest,
                counters: IngestCounters::default(),
                deliverer,
                telemetry,
                public_url: options.public_url,
                subscription_defaults: options.subscription_defaults,
                allow_http_sinks: options.allow_http_sinks,
                filter_limits: options.filter_limits,
                eval_limits: options.eval_limits,
                routing_slots: tokio::sync::Semaphore::new(ingest::ROUTING_THREADS),
                server: options.server,
                tls: options.tls,
                shutdown_grace: options.shutdown_grace,
                resync_interval: options.resync_interval,
                resync_now: tokio::sync::Notify::new(),
                stop,
                background: std::sync::Mutex::new(Vec::new()),
            }),
        };
        // Another hub's changes, as soon as the store hears of them (a weak reference: the
        // store must not keep the hub alive).
        let state = Arc::downgrade(&hub.state);
        hub.state.store.watch(Arc::new(move |change| {
            let Some(state) = state.upgrade() else {
                return;
            };
            match change {
                knooppunt_store::StoreChange::Subscriptions => state.resync_now.notify_one(),
                knooppunt_store::StoreChange::Deliveries(Some(ids)) => state.deliverer.wake(&ids),
                knooppunt_store::StoreChange::Deliveries(None) => state.deliverer.wake_all(),
            }
        }));
        let sweeper = tokio::spawn(sweep_periodically(Arc::clone(&hub.state)));
        let retiring = tokio::spawn(follow_gone(Arc::clone(&hub.state), retirements));
        let resyncing = tokio::spawn(follow_other_hubs(Arc::clone(&hub.state)));
        hub.state
            .background
            .lock()
            .expect("background lock")
            .extend([sweeper, retiring, resyncing]);
        Ok(hub)
    }

    /// Counts of what happened to published events since start-up.
    pub fn counters(&self) -> &IngestCounters {
        &self.state.counters
    }

    /// Stops the delivery workers (waiting up to the shutdown grace for attempts in flight)
    /// and the background tasks, so that the store is released.
    pub async fn stop(&self) {
        self.state
            .deliverer
            .shutdown(self.state.shutdown_grace)
            .await;
        self.state.stop.send_replace(true);
        let tasks = std::mem::take(&mut *self.state.background.lock().expect("background lock"));
        for task in tasks {
            let _ = task.await;
        }
    }

    /// The HTTP API.
    pub fn router(&self) -> axum::Router {
        api::router(Arc::clone(&self.state))
    }

    /// The router of `server.metrics_listen`: `/metrics` without a token, `/healthz`,
    /// `/readyz`.
    pub fn metrics_router(&self) -> axum::Router {
        api::metrics_router(Arc::clone(&self.state))
    }

    /// The ids of the subscriptions an event would be routed to now.
    pub fn matching_subscriptions(&self, event: &Event) -> Vec<String> {
        let mut routed = self.state.subscriptions.route(
            std::iter::once(event),
            self.state.eval_limits,
            u64::MAX,
            |_| {},
        );
        routed.pop().map(|r| r.matched).unwrap_or_default()
    }

    /// The principals in the store (disabled ones included).
    pub fn principal_count(&self) -> usize {
        self.state.principals.count()
    }

    pub fn subscription_count(&self) -> usize {
        self.state.subscriptions.len()
    }
}

/// Serves the hub's API on `listener` until `shutdown` completes, then finishes the requests
/// in flight.
pub async fn serve(
    listener: TcpListener,
    hub: Hub,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = hub.state.server;
    let tls = hub.state.tls.clone();
    let served = server::run(listener, hub.router(), limits, tls, shutdown).await;
    hub.stop().await;
    served
}

/// Serves [`Hub::metrics_router`] on `listener` (within the hub's connection limits) until
/// `shutdown` completes.
pub async fn serve_metrics(
    listener: TcpListener,
    hub: Hub,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = hub.state.server;
    server::run(listener, hub.metrics_router(), limits, None, shutdown).await
}

/// Waits for `next` unless the hub stops first; `None` when it stops. Also when it stopped
/// before this was called: a stop sent before a background task first ran is never
/// `changed` for it. The one loop skeleton of the background tasks below.
async fn unless_stopped<T>(
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

/// Hands the 410s the delivery workers report to the one writer of subscriptions.
async fn follow_gone(
    state: Arc<AppState>,
    mut reports: tokio::sync::mpsc::UnboundedReceiver<knooppunt_delivery::Gone>,
) {
    let mut stop = state.stop.subscribe();
    loop {
        let Some(Some(gone)) = unless_stopped(&mut stop, reports.recv()).await else {
            return;
        };
        state.subscriptions.gone(&gone).await;
    }
}

/// Reloads the principals and subscriptions when another hub sharing the store changed them: when the
/// store tells of a change, and (the safety net) when the version it polls every
/// `resync_interval` changed.
async fn follow_other_hubs(state: Arc<AppState>) {
    let mut stop = state.stop.subscribe();
    let mut interval = tokio::time::interval(state.resync_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut known = state.store.subscriptions_version().await.ok();
    loop {
        let changed = async {
            tokio::select! {
                _ = interval.tick() => {}
                () = state.resync_now.notified() => {}
            }
        };
        if unless_stopped(&mut stop, changed).await.is_none() {
            return;
        }
        let version = match state.store.subscriptions_version().await {
            Ok(version) => version,
            Err(error) => {
                tracing::debug!(%error, "Reading the subscriptions' version failed; trying again.");
                continue;
            }
        };
        if known == Some(version) {
            continue;
        }
        if let Err(error) = state.principals.reload().await {
            tracing::warn!(%error, "Reloading the principals failed; trying again.");
            continue;
        }
        match state.subscriptions.resync().await {
            Ok(changed) => {
                known = Some(version);
                if changed > 0 {
                    tracing::info!(changed, "Subscriptions changed by another hub were loaded.");
                }
            }
            Err(error) => {
                tracing::warn!(%error, "Reloading the subscriptions failed; trying again.")
            }
        }
    }
}

/// Removes finished events past retention and old duplicate-detection entries, every
/// `sweep_interval`, until the hub stops.
async fn sweep_periodically(state: Arc<AppState>) {
    let mut stop = state.stop.subscribe();
    let mut interval = tokio::time::interval(state.ingest.sweep_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if unless_stopped(&mut stop, interval.tick()).await.is_none() {
            return;
        }
        let retention = state.ingest.retention.as_millis() as u64;
        let window = state.ingest.dedupe_window.as_millis() as u64;
        match state.store.sweep(ingest::now_ms(), retention, window).await {
            Ok(swept) if swept.events > 0 || swept.dedupe_entries > 0 => tracing::info!(
                events = swept.events,
                dedupe_entries = swept.dedupe_entries,
                "Retention sweep removed finished events."
            ),
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "Retention sweep failed; it will run again."),
        }
    }
}
