//! The hub: the HTTP API (axum) on top of the store, the filters and (later) the delivery
//! workers, and the wiring between them.
//!
//! Start one with [`Hub::open`] and [`serve`]; the binary crate `knooppunt` does that from
//! the configuration file.

pub mod api;
mod registry;

use std::future::Future;
use std::sync::{Arc, RwLock};

use knooppunt_event::Event;
use knooppunt_store::Store;
use tokio::net::TcpListener;

pub use api::auth::{Authentication, Principal, Role, hash_token};
pub use api::{API_VERSION, BASE_PATH};

use registry::Registry;

/// Everything a hub needs besides its store.
#[derive(Debug, Clone)]
pub struct HubOptions {
    pub authentication: Authentication,
}

/// Shared by every request handler.
pub(crate) struct AppState {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) registry: RwLock<Registry>,
    /// Serialises subscription changes so that the store and the registry change in the
    /// same order.
    pub(crate) subscription_writes: tokio::sync::Mutex<()>,
    pub(crate) authentication: Authentication,
}

/// Why a hub could not start.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Store(#[from] knooppunt_store::StoreError),
    #[error("{0}")]
    Corrupt(String),
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
        let registry = Registry::load(store.subscriptions().await?).map_err(HubError::Corrupt)?;
        tracing::info!(subscriptions = registry.len(), "Subscriptions loaded.");
        Ok(Hub {
            state: Arc::new(AppState {
                store,
                registry: RwLock::new(registry),
                subscription_writes: tokio::sync::Mutex::new(()),
                authentication: options.authentication,
            }),
        })
    }

    /// The HTTP API.
    pub fn router(&self) -> axum::Router {
        api::router(Arc::clone(&self.state))
    }

    /// The ids of the subscriptions an event would be routed to now.
    pub fn matching_subscriptions(&self, event: &Event) -> Vec<String> {
        self.state
            .registry
            .read()
            .expect("registry lock")
            .matching(event)
    }

    pub fn subscription_count(&self) -> usize {
        self.state.registry.read().expect("registry lock").len()
    }
}

/// Serves the hub's API on `listener` until `shutdown` completes, then finishes the requests
/// in flight.
pub async fn serve(
    listener: TcpListener,
    hub: Hub,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, hub.router())
        .with_graceful_shutdown(shutdown)
        .await
}
