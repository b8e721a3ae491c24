//! The hub, wired: [`Hub::open`] opens the services (`knooppunt-services`: the use cases,
//! the application layer, the domain) over a store, and [`serve`] serves the surfaces over
//! them (the `/v1` API of `knooppunt-api`, with the Notificaties facade of
//! `knooppunt-facade` and the console of `knooppunt-console` mounted beside it) on the
//! transport (`knooppunt-server`: connection bounds, HTTPS). This crate holds no rule: it
//! only puts the crates together and names what the binary (`knooppunt`) configures.
//! `ARCHITECTURE.md` draws the crates; `tests/scenarios/architecture.rs` checks that each
//! imports only what is below it.

pub use knooppunt_identity as identity;
use knooppunt_server as server;
pub use knooppunt_services::ingest;
use knooppunt_services::{app, audit, backlog, history, sessions, subscriptions, telemetry};

use std::future::Future;
use std::sync::Arc;

use knooppunt_event::Event;
use knooppunt_store::Store;
use tokio::net::TcpListener;

use app::AppState;
pub use app::{Build, ConsoleTheme, HubError, HubOptions, catalog_problems};
pub use audit::parse_head as parse_audit_head;
pub use backlog::BacklogOptions;

pub use history::ReplayOptions;
pub use identity::tokens::IssuerSettings;
pub use identity::{Authentication, Oin, Principal, Role, hash_token, is_oin};
pub use ingest::{IngestOptions, MIN_EVENT_BYTES};
pub use knooppunt_filter::EvalLimits;
pub use sessions::SessionOptions;
pub use subscriptions::Quotas;
pub use telemetry::IngestCounters;

pub use knooppunt_delivery::{ConnectionLimits, DeliveryOptions, HubKeys, SinkNetworks, trace};
pub use server::{ServerLimits, TlsSettings};

use knooppunt_api as api;
pub use knooppunt_api::{API_VERSION, BASE_PATH};

/// The async runtime a hub is served on, with `worker_threads` threads for its tasks
/// (`None`: [`default_worker_threads`]).
pub fn runtime(worker_threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads.unwrap_or_else(default_worker_threads))
        .enable_all()
        .build()
}

/// One task thread for every CPU the process may use (its cgroup's quota counted), at least
/// one. One thread fewer was measured on 2 CPUs (docs/benchmarks-log.md, issue 61): ingest
/// 1.06x, delivery to one sink 0.83-0.93x; and with a single task thread one costly request
/// (a long filter evaluation) would hold up every other principal's.
pub fn default_worker_threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// How the hub is served: the bounds on inbound connections and HTTPS. Not a rule of the
/// services: the transport's alone.
#[derive(Clone, Debug, Default)]
pub struct Transport {
    /// The bounds on inbound connections.
    pub limits: ServerLimits,
    /// HTTPS for the API (and client certificates); plain HTTP when absent.
    pub tls: Option<TlsSettings>,
}

/// A running hub's state; cheap to clone.
#[derive(Clone)]
pub struct Hub {
    state: Arc<AppState>,
    transport: Arc<Transport>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

impl Hub {
    /// Loads the subscriptions from the store and builds the matching index; served over
    /// plain HTTP within the default connection limits.
    pub async fn open(store: Arc<dyn Store>, options: HubOptions) -> Result<Hub, HubError> {
        Hub::open_with(store, options, Transport::default()).await
    }

    /// [`Hub::open`], served with `transport`'s connection limits and HTTPS. A pull or a
    /// stream waits for events at most until 5 s before the server would close the silent
    /// connection.
    pub async fn open_with(
        store: Arc<dyn Store>,
        mut options: HubOptions,
        transport: Transport,
    ) -> Result<Hub, HubError> {
        let silent = transport.limits.idle_timeout;
        options.longest_wait = options
            .longest_wait
            .min(silent.saturating_sub(std::time::Duration::from_secs(5)));
        Ok(Hub {
            state: AppState::open(store, options).await?,
            transport: Arc::new(transport),
        })
    }

    /// Counts of what happened to published events since start-up.
    pub fn counters(&self) -> &IngestCounters {
        &self.state.publishing().counters
    }

    /// Stops the delivery workers (waiting up to the shutdown grace for attempts in flight)
    /// and the background tasks, so that the store is released.
    pub async fn stop(&self) {
        self.state.stop().await;
    }

    /// The HTTP API and the console; a request whose handling panics is answered 500 (the
    /// API's own boundary catches its panics, `api::boundary`).
    pub fn router(&self) -> axum::Router {
        let facade = api::Mount {
            prefix: "/api/v1",
            router: if self.state.zgw().enabled {
                knooppunt_facade::router()
            } else {
                axum::Router::new()
            },
            too_large: knooppunt_facade::too_large,
        };
        api::router(Arc::clone(&self.state), vec![facade]).merge(
            knooppunt_console::router(Arc::clone(&self.state), self.transport.tls.is_some())
                .layer(axum::middleware::from_fn(api::answer_panics)),
        )
    }

    /// The OpenAPI document this hub serves at `/v1/openapi.json`.
    pub fn openapi_document(&self) -> serde_json::Value {
        api::openapi(self.state.subscription_defaults())
    }

    /// The router of `server.metrics_listen`: `/metrics` without a token, `/healthz`,
    /// `/readyz`.
    pub fn metrics_router(&self) -> axum::Router {
        api::metrics_router(Arc::clone(&self.state))
    }

    /// The ids of the subscriptions an event would be routed to now.
    pub fn matching_subscriptions(&self, event: &Event) -> Vec<String> {
        let mut routed = self.state.subscriptions().route(
            std::iter::once(event),
            self.state.eval_limits(),
            u64::MAX,
            |_| {},
        );
        routed.pop().map(|r| r.matched).unwrap_or_default()
    }

    /// The principals in the store (disabled ones included).
    pub fn principal_count(&self) -> usize {
        self.state.principals().count()
    }

    pub fn subscription_count(&self) -> usize {
        self.state.subscriptions().len()
    }
}

/// What the answers the server writes itself (hyper's errors, refused connections) say of
/// the API, as every answer does.
fn answer_headers() -> Arc<str> {
    let mut lines = String::new();
    for (name, value) in &knooppunt_api::STANDARD_HEADERS {
        let value = value.to_str().expect("the standard headers are ASCII");
        lines.push_str(&format!("{name}: {value}\r\n"));
    }
    lines.into()
}

/// The listen queue asked for: the kernel caps it at `net.core.somaxconn` (4096 on current
/// Linux). Under a flood of connections the accept loop drains it while the oldest
/// unfinished connections make room; a deeper queue means fewer dropped SYNs (each costs
/// its client a second's retransmission) while it does.
const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `address` with a listen queue of [`LISTEN_BACKLOG`] (tokio's own default
/// is 1024), address reuse on, as the hub's API and metrics listen.
pub fn listen(address: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    #[cfg(not(windows))]
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves the hub's API on `listener` until `shutdown` completes, then finishes the requests
/// in flight.
pub async fn serve(
    listener: TcpListener,
    hub: Hub,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = hub.router();
    serve_router(listener, hub, router, shutdown).await
}

/// [`serve`] with `router` in place of [`Hub::router`]: the hub's router with a layer
/// around it (the test harness checks every answer against the OpenAPI document so).
pub async fn serve_router(
    listener: TcpListener,
    hub: Hub,
    router: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = hub.transport.limits;
    let tls = hub.transport.tls.clone();
    // Long polls are answered as soon as the shutdown begins: the requests in flight that
    // the server waits for are then only the short ones.
    let deliverer = hub.state.deliverer().clone();
    let shutdown = async move {
        shutdown.await;
        deliverer.release_waiting();
    };
    let served = server::run(listener, router, limits, tls, answer_headers(), shutdown).await;
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
    let limits = hub.transport.limits;
    server::run(
        listener,
        hub.metrics_router(),
        limits,
        None,
        answer_headers(),
        shutdown,
    )
    .await
}
