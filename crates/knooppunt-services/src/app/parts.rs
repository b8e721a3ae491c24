//! [`AppState`]'s parts, grouped by what they are (the services, who may come in, the
//! settings the surfaces read, what the running hub keeps), each private: a surface reads
//! a part through its accessor and changes nothing but through a service.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use knooppunt_delivery::Deliverer;
use knooppunt_store::{ConfigDefaults, Store};

use super::{AppState, Build, ConsoleTheme};
use crate::approvals::Approvals;
use crate::audit::Audit;
use crate::backlog::Backlog;
use crate::catalog::Catalog;
use crate::history::History;
use crate::identity::{self, Authentication};
use crate::ingest::Pipeline;
use crate::principals::Principals;
use crate::sessions::Sessions;
use crate::subscriptions::Subscriptions;
use crate::telemetry::Telemetry;

/// The services: each the one writer of what it keeps.
pub(super) struct Services {
    pub(super) subscriptions: Arc<Subscriptions>,
    pub(super) publishing: Pipeline,
    pub(super) catalog: Arc<Catalog>,
    pub(super) approvals: Arc<Approvals>,
    pub(super) history: Arc<History>,
    pub(super) audit: Arc<Audit>,
    pub(super) backlog: Arc<Backlog>,
    pub(super) principals: Principals,
    pub(super) deliverer: Deliverer,
    pub(super) telemetry: Arc<Telemetry>,
    pub(super) sessions: Sessions,
}

/// Who may come in: how requests authenticate, the issuers trusted, the ZGW clients.
pub(super) struct Access {
    pub(super) authentication: Authentication,
    pub(super) issuers: identity::tokens::Issuers,
    pub(super) zgw: identity::zgw::ZgwOptions,
}

/// The operator's settings the surfaces and the background tasks read.
pub(super) struct Settings {
    pub(super) public_url: Option<String>,
    pub(super) subscription_defaults: ConfigDefaults,
    pub(super) allow_http_sinks: bool,
    pub(super) filter_limits: knooppunt_filter::Limits,
    pub(super) eval_limits: knooppunt_filter::EvalLimits,
    pub(super) signing_overlap: Duration,
    pub(super) longest_wait: Duration,
    pub(super) console_theme: ConsoleTheme,
    pub(super) audit_retention: Duration,
    pub(super) shutdown_grace: Duration,
    pub(super) resync_interval: Duration,
}

/// What the running hub keeps for itself.
pub(super) struct Running {
    pub(super) store: Arc<dyn Store>,
    /// Whether a backup is being taken (one at a time).
    pub(super) backing_up: AtomicBool,
    /// Set when the store tells of a subscription change made by another hub.
    pub(super) resync_now: tokio::sync::Notify,
    /// Tells the background tasks to stop.
    pub(super) stop: tokio::sync::watch::Sender<bool>,
    pub(super) background: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl AppState {
    /// The release and commit of this hub.
    pub fn build(&self) -> &Build {
        &self.build
    }

    /// The one writer of subscriptions, and the registry routing reads.
    pub fn subscriptions(&self) -> &Arc<Subscriptions> {
        &self.services.subscriptions
    }

    /// The publish pipeline, its options and counters.
    pub fn publishing(&self) -> &Pipeline {
        &self.services.publishing
    }

    /// The one writer of the event type catalog.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.services.catalog
    }

    /// The one writer of grants: the data owners' approvals.
    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.services.approvals
    }

    /// Subscriptions' retained events read again: the stream and replays.
    pub fn history(&self) -> &Arc<History> {
        &self.services.history
    }

    /// The audit trail's writer.
    pub fn audit(&self) -> &Arc<Audit> {
        &self.services.audit
    }

    /// The bounds on undelivered data, and what subscriptions shed.
    pub fn backlog(&self) -> &Arc<Backlog> {
        &self.services.backlog
    }

    /// The one writer of principals, and the table requests are authenticated against.
    pub fn principals(&self) -> &Principals {
        &self.services.principals
    }

    /// The delivery engine.
    pub fn deliverer(&self) -> &Deliverer {
        &self.services.deliverer
    }

    /// The hub's counters.
    pub fn telemetry(&self) -> &Arc<Telemetry> {
        &self.services.telemetry
    }

    /// The console's sessions.
    pub fn sessions(&self) -> &Sessions {
        &self.services.sessions
    }

    /// How requests authenticate.
    pub fn authentication(&self) -> &Authentication {
        &self.access.authentication
    }

    /// The trusted issuers of access tokens.
    pub fn issuers(&self) -> &identity::tokens::Issuers {
        &self.access.issuers
    }

    /// The ZGW facade's clients and token bounds.
    pub fn zgw(&self) -> &identity::zgw::ZgwOptions {
        &self.access.zgw
    }

    /// The URL the hub is reached at from outside, when the operator set one.
    pub fn public_url(&self) -> Option<&str> {
        self.settings.public_url.as_deref()
    }

    /// The operator's defaults of a subscription's `config`.
    pub fn subscription_defaults(&self) -> &ConfigDefaults {
        &self.settings.subscription_defaults
    }

    /// Whether sinks may be plain `http://`.
    pub fn allow_http_sinks(&self) -> bool {
        self.settings.allow_http_sinks
    }

    /// The bounds on a subscription's filters.
    pub fn filter_limits(&self) -> knooppunt_filter::Limits {
        self.settings.filter_limits
    }

    /// The budget of evaluating a filter.
    pub fn eval_limits(&self) -> knooppunt_filter::EvalLimits {
        self.settings.eval_limits
    }

    /// How long a rotated signing secret keeps signing beside the new one.
    pub fn signing_overlap(&self) -> Duration {
        self.settings.signing_overlap
    }

    /// How long a pull or a stream may wait for events.
    pub fn longest_wait(&self) -> Duration {
        self.settings.longest_wait
    }

    /// The console's look.
    pub fn console_theme(&self) -> &ConsoleTheme {
        &self.settings.console_theme
    }

    /// Whether a backup is being taken (one at a time).
    pub fn backing_up(&self) -> &AtomicBool {
        &self.running.backing_up
    }
}
