//! The hub's services, below every surface (the `/v1` API, the Notificaties facade and the
//! console in `knooppunt-broker`): the use cases each surface runs (`use_case`:
//! subscriptions, catalog, replays, dead letters, principals), the application layer (`app`:
//! `AppState`, the services it reaches, the store private to them), the domain (`ingest`,
//! `subscriptions`, `principals`, `catalog`, `approvals`, `history`, `audit`, `zgw`), the
//! registry and the metrics. Nothing here knows HTTP: a rule lives here once, and every
//! surface calls it. Each module imports only what is below it
//! (`tests/scenarios/architecture.rs` checks it).

pub mod app;
pub mod approvals;
pub mod audit;
pub mod backlog;
pub mod catalog;
pub mod history;
pub use knooppunt_identity as identity;
pub mod ingest;
pub mod notices;
pub mod principals;
pub mod refused;
pub mod registry;
pub mod sequences;
pub mod sessions;
pub mod subscriptions;
pub mod telemetry;
pub mod use_case;
pub mod zgw;
