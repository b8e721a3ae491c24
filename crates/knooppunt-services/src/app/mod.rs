//! The application layer: the hub's services as the HTTP API reaches them (the publish
//! pipeline, the one writer of subscriptions, the one writer of principals, the token
//! issuers, the delivery workers, the metrics), built from the options, and the background
//! tasks that keep them in step with the store. The store itself is private here: handlers
//! reach it only through these services.

use std::sync::Arc;

use knooppunt_delivery::Deliverer;
use knooppunt_store::{
    AuditEntry, AuditRange, ConfigDefaults, QueueStats, Receipt, Store, StoreError, StoredPrincipal,
};

use crate::approvals::Approvals;
use crate::audit::Audit;
use crate::backlog::{Backlog, BacklogOptions};
use crate::catalog::Catalog;
use crate::history::History;
use crate::identity::{self, Authentication, Principal};
use crate::ingest::{self, IngestOptions, Pipeline};
use crate::principals::{self, Principals};
use crate::sessions::Sessions;
use crate::subscriptions::{Quotas, Subscriptions};
use crate::telemetry::Telemetry;
use knooppunt_delivery::DeliveryOptions;

pub use crate::telemetry::Build;

mod audit_reads;
mod parts;
mod tasks;

pub use audit_reads::*;
use parts::{Access, Running, Services, Settings};
use tasks::*;

/// Everything a hub needs besides its store.
#[derive(Debug, Clone)]
pub struct HubOptions {
    /// What the hub says it is (`/v1/status`, `knooppunt_build_info`).
    pub build: Build,
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
    /// How long a pull or a stream may wait for events: below the time the server lets a
    /// connection be silent (the broker derives it from the server's idle timeout).
    pub longest_wait: std::time::Duration,
    /// How often the hub asks the store whether another hub changed subscriptions (a store
    /// only this hub writes never says so).
    pub resync_interval: std::time::Duration,
    /// How long a subscription's previous signing secret keeps signing after a rotation.
    pub signing_overlap: std::time::Duration,
    /// How long audit entries are kept.
    pub audit_retention: std::time::Duration,
    /// Where the hub keeps its checkpoint of the audit trail's head (the newest entry's
    /// number and hash), compared with the store at start-up: a start that finds entries
    /// removed from the trail's end is refused. `None`: no checkpoint (the log and
    /// `/v1/audit/head` still anchor the head).
    pub audit_checkpoint: Option<std::path::PathBuf>,
    /// How replays run: at most how many per hub, how fast, when another hub takes one over.
    pub replays: crate::history::ReplayOptions,
    /// The Notificaties API 1.0 facade for ZGW components.
    pub zgw: identity::zgw::ZgwOptions,
    /// How long console sessions last.
    pub sessions: crate::sessions::SessionOptions,
    /// The console's look.
    pub console_theme: ConsoleTheme,
    /// The bounds on undelivered data.
    pub backlog: BacklogOptions,
}

/// The console's look: an NL Design System theme its operator sets (the built-in one,
/// neutral, when none is).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsoleTheme {
    /// A style sheet of the theme's design tokens, served after the built-in theme's.
    pub css: Option<Arc<str>>,
    /// The class the theme's tokens are scoped to (`rijkshuisstijl-theme`, say), set on the
    /// pages' root and body.
    pub class: Option<String>,
}

impl HubOptions {
    /// Default ingest, delivery and shutdown settings with this authentication.
    pub fn new(authentication: Authentication) -> HubOptions {
        HubOptions {
            build: Build::default(),
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
            resync_interval: std::time::Duration::from_secs(1),
            signing_overlap: std::time::Duration::from_secs(24 * 3600),
            longest_wait: knooppunt_delivery::MAX_WAIT,
            audit_retention: std::time::Duration::from_secs(365 * 24 * 3600),
            audit_checkpoint: None,
            replays: crate::history::ReplayOptions::default(),
            zgw: identity::zgw::ZgwOptions::default(),
            sessions: crate::sessions::SessionOptions::default(),
            console_theme: ConsoleTheme::default(),
            backlog: BacklogOptions::default(),
        }
    }
}

/// Shared by every request handler: the services, and the settings the API reads. Its
/// parts are private and grouped (`parts.rs`); a surface reads each through its accessor.
pub struct AppState {
    /// The release and commit of this hub.
    build: Build,
    services: Services,
    access: Access,
    settings: Settings,
    running: Running,
}

/// Why a hub could not start.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(transparent)]
    Store(#[from] knooppunt_store::StoreError),
    #[error("{0}")]
    Config(String),
}

impl AppState {
    /// Loads the subscriptions and principals from the store, builds the matching index and
    /// starts the delivery workers and the background tasks.
    pub async fn open(
        store: Arc<dyn Store>,
        options: HubOptions,
    ) -> Result<Arc<AppState>, HubError> {
        let telemetry = Arc::new(Telemetry::default());
        let (notices, notice_queue) = crate::notices::Notices::channel();
        let hub_name = options.delivery.origin.clone();
        let observer: Arc<dyn knooppunt_delivery::Observer> = Arc::new(Observed {
            telemetry: Arc::clone(&telemetry),
            notices: notices.clone(),
        });
        let (deliverer, retirements) =
            Deliverer::new(Arc::clone(&store), options.delivery, observer)
                .map_err(HubError::Config)?;
        // Before any worker starts: with other hubs on the store, each takes its share.
        deliverer.share_work().await;
        // Principals first: the subscriptions of disabled ones start suspended.
        let principals = Principals::load(Arc::clone(&store)).await?;
        let subscriptions = Arc::new(
            Subscriptions::load(
                Arc::clone(&store),
                deliverer.clone(),
                options.filter_limits,
                options.quotas,
                principals.disabled(),
                notices.clone(),
            )
            .await?,
        );
        let catalog =
            Arc::new(Catalog::load(Arc::clone(&store), options.ingest.reserve_oin_sources).await?);
        let (stop, _) = tokio::sync::watch::channel(false);
        let head = crate::audit::Head::open(store.as_ref(), options.audit_checkpoint.clone())
            .await
            .map_err(|refused| HubError::Config(refused.to_string()))?;
        let (audit, audit_writer) = Audit::new(Arc::clone(&store), head, stop.subscribe());
        let audit = Arc::new(audit);
        let audit_writer = tokio::spawn(audit_writer);
        let approvals = Arc::new(
            Approvals::load(
                Arc::clone(&store),
                Arc::clone(&catalog),
                Arc::clone(&subscriptions),
                Arc::clone(&audit),
            )
            .await?,
        );
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
        if let Some(keys) = &options.zgw.secret_keys {
            let resealed = principals.reseal_zgw_secrets(keys).await?;
            if resealed > 0 {
                tracing::info!(
                    resealed,
                    "ZGW client secrets sealed again under the current key."
                );
            }
        }
        subscriptions.suspend_owners(principals.disabled()).await;
        let backlog = Arc::new(Backlog::new(
            options.backlog,
            Arc::clone(&store),
            Arc::clone(&audit),
            Arc::clone(&telemetry),
            deliverer.clone(),
            notices.clone(),
        ));
        // A volume smaller than the floor refuses every publish: say so now, not at the
        // first refusal.
        let floor = backlog.options.min_free_bytes;
        if let Ok(knooppunt_store::DiskUsage {
            free_bytes: Some(free),
            ..
        }) = store.disk_usage().await
            && floor > 0
            && free < floor
        {
            tracing::warn!(
                free_bytes = free,
                min_free_bytes = floor,
                "The store's disk has less room than [backlog] min_free_bytes keeps free: every \
                 publish is refused (503) until more is free. Give the store a larger volume, \
                 or lower backlog.min_free_bytes (0: no floor); /readyz reports it."
            );
        }
        let publishing = Pipeline::new(
            options.ingest,
            ingest::Services {
                store: Arc::clone(&store),
                subscriptions: Arc::clone(&subscriptions),
                catalog: Arc::clone(&catalog),
                approvals: Arc::clone(&approvals),
                deliverer: deliverer.clone(),
                telemetry: Arc::clone(&telemetry),
                backlog: Arc::clone(&backlog),
            },
            options.eval_limits,
        );
        let history = Arc::new(History::new(
            Arc::clone(&store),
            Arc::clone(&subscriptions),
            Arc::clone(&approvals),
            deliverer.clone(),
            options.eval_limits,
            options.replays,
            stop.subscribe(),
        ));
        let state = Arc::new(AppState {
            build: options.build,
            services: Services {
                subscriptions,
                publishing,
                catalog,
                approvals,
                history,
                audit,
                backlog,
                principals,
                deliverer,
                telemetry,
                sessions: Sessions::new(Arc::clone(&store), options.sessions),
            },
            access: Access {
                authentication: options.authentication,
                issuers: identity::tokens::Issuers::new(issuers),
                zgw: options.zgw,
            },
            settings: Settings {
                public_url: options.public_url,
                subscription_defaults: options.subscription_defaults,
                allow_http_sinks: options.allow_http_sinks,
                filter_limits: options.filter_limits,
                eval_limits: options.eval_limits,
                signing_overlap: options.signing_overlap,
                longest_wait: options.longest_wait,
                console_theme: options.console_theme,
                audit_retention: options.audit_retention,
                shutdown_grace: options.shutdown_grace,
                resync_interval: options.resync_interval,
            },
            running: Running {
                store,
                backing_up: std::sync::atomic::AtomicBool::new(false),
                resync_now: tokio::sync::Notify::new(),
                stop,
                background: std::sync::Mutex::new(Vec::new()),
            },
        });
        // Another hub's changes, as soon as the store hears of them (a weak reference: the
        // store must not keep the hub alive).
        let weak = Arc::downgrade(&state);
        state.running.store.watch(Arc::new(move |change| {
            let Some(state) = weak.upgrade() else {
                return;
            };
            match change {
                knooppunt_store::StoreChange::Subscriptions => {
                    state.running.resync_now.notify_one()
                }
                knooppunt_store::StoreChange::Deliveries(Some(ids)) => state.deliverer().wake(&ids),
                knooppunt_store::StoreChange::Deliveries(None) => state.deliverer().wake_all(),
                knooppunt_store::StoreChange::Withdrawn(Some(ids)) => {
                    for id in &ids {
                        state.deliverer().recall(id);
                    }
                }
                knooppunt_store::StoreChange::Withdrawn(None) => state.deliverer().recall_all(),
                knooppunt_store::StoreChange::SinkPaused { sink, until_ms } => {
                    state.deliverer().sink_paused(&sink, until_ms);
                }
            }
        }));
        for why in catalog_out_of_bounds(state.catalog(), state.principals(), state.zgw()) {
            tracing::warn!(
                "{why}. The entry still holds back and checks its events: an admin deletes or \
                 narrows it (`knooppunt check --store` lists these)."
            );
        }
        let sweeper = tokio::spawn(sweep_periodically(Arc::clone(&state)));
        let retiring = tokio::spawn(follow_gone(Arc::clone(&state), retirements));
        let resyncing = tokio::spawn(follow_other_hubs(Arc::clone(&state)));
        let replaying = tokio::spawn(Arc::clone(state.history()).take_over());
        let sampling = tokio::spawn(sample_rates(Arc::clone(&state)));
        let guarding = tokio::spawn(guard_backlog(Arc::clone(&state)));
        let telling = tokio::spawn(tell_owners(Arc::clone(&state), notice_queue, hub_name));
        state
            .running
            .background
            .lock()
            .expect("background lock")
            .extend([
                telling,
                sampling,
                guarding,
                sweeper,
                retiring,
                resyncing,
                replaying,
                audit_writer,
            ]);
        Ok(state)
    }

    /// Stops the delivery workers (waiting up to the shutdown grace for attempts in flight)
    /// and the background tasks, so that the store is released.
    pub async fn stop(&self) {
        self.deliverer()
            .shutdown(self.settings.shutdown_grace)
            .await;
        self.running.stop.send_replace(true);
        let tasks = std::mem::take(&mut *self.running.background.lock().expect("background lock"));
        for task in tasks {
            let _ = task.await;
        }
    }

    /// Changes a principal on behalf of admin `actor`: disabling it suspends its
    /// subscriptions at once, on this hub before the answer and on the others when they
    /// hear of it; enabling it again resumes them. `false` when there is none.
    pub async fn update_principal(
        &self,
        actor: &str,
        record: &StoredPrincipal,
    ) -> Result<bool, principals::Refused> {
        let result = self.principals().update(actor, record).await;
        self.subscriptions()
            .suspend_owners(self.principals().disabled())
            .await;
        if record.disabled && matches!(result, Ok(true)) {
            // The other hubs suspend them too before this answers.
            self.subscriptions().wait_for_other_hubs().await?;
        }
        result
    }

    /// Deletes a principal on behalf of admin `actor`, and with it its subscriptions and
    /// what was queued for them (each deletion on the audit trail, in `audit`'s context):
    /// they are suspended first, so nothing is sent while this runs. `None` when there is
    /// no such principal; else the ids of the subscriptions deleted.
    pub async fn delete_principal(
        &self,
        actor: &str,
        name: &str,
        audit: &crate::audit::Context,
    ) -> Result<Option<Vec<String>>, principals::Refused> {
        if self.principals().get(name).is_none() {
            return Ok(None);
        }
        let mut suspended = self.principals().disabled();
        suspended.insert(name.to_owned());
        self.subscriptions().suspend_owners(suspended).await;
        let mut deleted = Vec::new();
        let outcome = async {
            // Before the principal (a failure leaves it there to delete again), and once more
            // after it, for one the principal made meanwhile.
            deleted.extend(self.delete_subscriptions_of(name, audit).await?);
            let found = self.principals().delete(actor, name).await?;
            deleted.extend(self.delete_subscriptions_of(name, audit).await?);
            Ok::<bool, principals::Refused>(found)
        }
        .await;
        self.subscriptions()
            .suspend_owners(self.principals().disabled())
            .await;
        let found = outcome?;
        if found {
            // The other hubs drop them too before this answers.
            self.subscriptions().wait_for_other_hubs().await?;
        }
        Ok(found.then_some(deleted))
    }

    async fn delete_subscriptions_of(
        &self,
        owner: &str,
        audit: &crate::audit::Context,
    ) -> Result<Vec<String>, StoreError> {
        let ids: Vec<String> = self
            .subscriptions()
            .owned_by(owner)
            .iter()
            .map(|s| s.id.clone())
            .collect();
        let mut deleted = Vec::new();
        for id in ids {
            if self.subscriptions().delete(&id, |_| true).await?.is_none() {
                continue;
            }
            self.approvals().subscription_deleted(&id).await;
            tracing::info!(subscription = %id, %owner, "Subscription deleted with its principal.");
            let action = crate::audit::Action::new(
                crate::audit::ActionName::SubscriptionDelete,
                format!("subscription/{id}"),
                serde_json::json!({"reason": format!(
                    "its owner, principal `{owner}`, was deleted; what was queued for it was \
                     removed with it"
                )}),
            )
            .concerning([owner.to_owned()]);
            self.audit().record(audit, action).await;
            deleted.push(id);
        }
        Ok(deleted)
    }

    /// Whether the store takes writes now (for `/readyz`).
    pub async fn store_check(&self) -> Result<(), StoreError> {
        self.running.store.check().await
    }

    /// Whether publishes are accepted now, and if not why: the backlog guard (disk floor,
    /// backlog limit) and the store itself (a log that cannot be written to) both refuse.
    pub async fn accepting_publishes(&self) -> Result<(), String> {
        self.backlog().admit().map_err(|full| full.detail)?;
        self.running.store.check().await.map_err(|error| {
            format!("the store takes no writes now: {error}; nothing of a publish is kept: try again later")
        })
    }

    /// An accepted event, while it is retained.
    pub async fn event(
        &self,
        seq: u64,
    ) -> Result<Option<Arc<knooppunt_store::StoredEvent>>, StoreError> {
        self.running.store.event(seq).await
    }

    /// Who took event `seq` and when, as `principal` may see it; `None` when there is no
    /// such event or it may see nothing of it. An admin, the owner of a catalog entry that
    /// covers it, and the organisation in whose source space it is (its publisher) see every
    /// receipt; a subscriber that received it sees its own; anyone else learns nothing, not
    /// even whether the event exists. Each receipt with its subscriber, if known.
    pub async fn receipts_of_event(
        &self,
        principal: &Principal,
        seq: u64,
    ) -> Result<Option<EventReceipts>, StoreError> {
        // Past retention the event is gone and its receipts stay: then only an admin and the
        // receipts' own subscribers see them.
        let event = self.running.store.event(seq).await?;
        let identity = event
            .as_ref()
            .and_then(|event| knooppunt_event::format::json::Identity::of_json(&event.json));
        let sees_all = principal.is_admin()
            || identity.as_ref().is_some_and(|identity| {
                self.catalog().in_own_space(principal, &identity.source)
                    || self
                        .catalog()
                        .owners_of(&identity.source, &identity.ty)
                        .iter()
                        .any(|owner| owner == &principal.name)
            });
        let mut receipts: Vec<(Receipt, Option<String>)> = Vec::new();
        for receipt in self.running.store.receipts_of_event(seq).await? {
            // A deleted subscription's receipt still names (and belongs to) its subscriber.
            let subscriber = self.subscriptions().owner_of(&receipt.subscription).await?;
            if sees_all || subscriber.as_ref() == Some(&principal.name) {
                receipts.push((receipt, subscriber));
            }
        }
        if receipts.is_empty() && (!sees_all || identity.is_none()) {
            return Ok(None);
        }
        Ok(Some(EventReceipts {
            seq,
            identity: identity.map(|i| (i.source, i.id, i.ty)),
            receipts,
        }))
    }

    /// What subscription `id` took, in delivery order, and where the next page starts, as
    /// `principal` may read it: `None` unless it is the subscription's subscriber or an
    /// admin (a deleted subscription's receipts stay its subscriber's to read).
    pub async fn receipts_of_subscription(
        &self,
        principal: &Principal,
        id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Option<(Vec<Receipt>, Option<String>)>, StoreError> {
        let owner = self.subscriptions().owner_of(id).await?;
        if !(principal.is_admin() || owner.as_deref() == Some(principal.name.as_str())) {
            return Ok(None);
        }
        self.running
            .store
            .receipts_of_subscription(id, after, limit)
            .await
            .map(Some)
    }

    /// The delivery queues' sizes (for `/metrics`).
    pub async fn queue_stats(&self) -> Result<Vec<QueueStats>, StoreError> {
        self.running.store.queue_stats().await
    }

    /// One subscription's queue statistics.
    pub async fn queue_stats_of(&self, id: &str) -> Result<Option<QueueStats>, StoreError> {
        self.running.store.queue_stats_of(id).await
    }

    /// The disk the store takes (for `/metrics`).
    /// Writes a copy of the store, with the audit trail's checkpoint, to `out` while the
    /// hub serves (blocking: call it off the async runtime).
    pub fn back_up(
        &self,
        out: &mut dyn std::io::Write,
    ) -> Result<knooppunt_store::BackupSummary, StoreError> {
        let beside: Vec<(String, Vec<u8>)> =
            self.audit().head.checkpoint_file().into_iter().collect();
        self.running.store.backup(out, &beside)
    }

    pub async fn disk_usage(&self) -> Result<knooppunt_store::DiskUsage, StoreError> {
        self.running.store.disk_usage().await
    }
}

/// Who took an event, as one principal may see it ([`AppState::receipts_of_event`]).
pub struct EventReceipts {
    pub seq: u64,
    /// Its `source`, `id` and `type`, while it is retained.
    pub identity: Option<(String, String, String)>,
    /// Each receipt with the principal whose subscription took it, if known.
    pub receipts: Vec<(Receipt, Option<String>)>,
}

/// The catalog entries whose owner may not describe their source prefix (made before the
/// rule held, or the owner's rights changed since), each said as a sentence.
fn catalog_out_of_bounds(
    catalog: &Catalog,
    principals: &Principals,
    zgw: &identity::zgw::ZgwOptions,
) -> Vec<String> {
    let owner = |name: &str| {
        principals
            .rights(name)
            .map(Arc::unwrap_or_clone)
            .or_else(|| {
                zgw.clients
                    .iter()
                    .map(identity::zgw::ZgwClient::principal)
                    .find(|p| p.name == name)
            })
    };
    catalog
        .out_of_bounds(owner)
        .into_iter()
        .map(|(entry, why)| {
            format!(
                "catalog entry {} (source `{}`, type `{}`, owner `{}`) is outside its owner's \
                 source space: {why}",
                entry.id, entry.source_prefix, entry.event_type, entry.owner
            )
        })
        .collect()
}

/// For `knooppunt check --store`: the catalog entries of `store` whose owner may not describe
/// their source prefix, each said as a sentence (reads the principals and the catalog only).
pub async fn catalog_problems(
    store: Arc<dyn Store>,
    options: &HubOptions,
) -> Result<Vec<String>, StoreError> {
    let principals = Principals::load(Arc::clone(&store)).await?;
    let catalog = Catalog::load(store, options.ingest.reserve_oin_sources).await?;
    Ok(catalog_out_of_bounds(&catalog, &principals, &options.zgw))
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for EventReceipts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventReceipts").finish_non_exhaustive()
    }
}
