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
use crate::ingest::{IngestOptions, Pipeline, Services};
use crate::principals::{self, Principals};
use crate::sessions::Sessions;
use crate::subscriptions::{Quotas, Subscriptions};
use crate::telemetry::Telemetry;
use knooppunt_delivery::DeliveryOptions;

pub use crate::telemetry::Build;

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

/// Shared by every request handler: the services, and the settings the API reads.
pub struct AppState {
    /// The release and commit of this hub.
    pub build: Build,
    /// Whether a backup is being taken (one at a time).
    pub backing_up: std::sync::atomic::AtomicBool,
    /// The one writer of subscriptions, and the registry routing reads.
    pub subscriptions: Arc<Subscriptions>,
    /// The publish pipeline, its options and counters.
    pub publishing: Pipeline,
    /// The one writer of the event type catalog.
    pub catalog: Arc<Catalog>,
    /// The one writer of grants: the data owners' approvals.
    pub approvals: Arc<Approvals>,
    /// Subscriptions' retained events read again: the stream and replays.
    pub history: Arc<History>,
    /// The audit trail's writer.
    pub audit: Arc<Audit>,
    /// The bounds on undelivered data, and what subscriptions shed.
    pub backlog: Arc<Backlog>,
    audit_retention: std::time::Duration,
    pub authentication: Authentication,
    /// The one writer of principals, and the table requests are authenticated against.
    pub principals: Principals,
    /// The trusted issuers of access tokens.
    pub issuers: identity::tokens::Issuers,
    pub deliverer: Deliverer,
    pub telemetry: Arc<Telemetry>,
    pub public_url: Option<String>,
    pub subscription_defaults: ConfigDefaults,
    pub allow_http_sinks: bool,
    pub filter_limits: knooppunt_filter::Limits,
    pub eval_limits: knooppunt_filter::EvalLimits,
    pub signing_overlap: std::time::Duration,
    /// How long a pull or a stream may wait for events.
    pub longest_wait: std::time::Duration,
    /// The ZGW facade's clients and token bounds.
    pub zgw: identity::zgw::ZgwOptions,
    /// The console's sessions.
    pub sessions: Sessions,
    /// The console's look.
    pub console_theme: ConsoleTheme,
    store: Arc<dyn Store>,
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
            Services {
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
            backing_up: std::sync::atomic::AtomicBool::new(false),
            subscriptions,
            publishing,
            catalog,
            approvals,
            history,
            audit,
            backlog,
            audit_retention: options.audit_retention,
            authentication: options.authentication,
            principals,
            issuers: identity::tokens::Issuers::new(issuers),
            deliverer,
            telemetry,
            public_url: options.public_url,
            subscription_defaults: options.subscription_defaults,
            allow_http_sinks: options.allow_http_sinks,
            filter_limits: options.filter_limits,
            eval_limits: options.eval_limits,
            signing_overlap: options.signing_overlap,
            longest_wait: options.longest_wait,
            zgw: options.zgw,
            sessions: Sessions::new(Arc::clone(&store), options.sessions),
            console_theme: options.console_theme,
            store,
            shutdown_grace: options.shutdown_grace,
            resync_interval: options.resync_interval,
            resync_now: tokio::sync::Notify::new(),
            stop,
            background: std::sync::Mutex::new(Vec::new()),
        });
        // Another hub's changes, as soon as the store hears of them (a weak reference: the
        // store must not keep the hub alive).
        let weak = Arc::downgrade(&state);
        state.store.watch(Arc::new(move |change| {
            let Some(state) = weak.upgrade() else {
                return;
            };
            match change {
                knooppunt_store::StoreChange::Subscriptions => state.resync_now.notify_one(),
                knooppunt_store::StoreChange::Deliveries(Some(ids)) => state.deliverer.wake(&ids),
                knooppunt_store::StoreChange::Deliveries(None) => state.deliverer.wake_all(),
                knooppunt_store::StoreChange::Withdrawn(Some(ids)) => {
                    for id in &ids {
                        state.deliverer.recall(id);
                    }
                }
                knooppunt_store::StoreChange::Withdrawn(None) => state.deliverer.recall_all(),
                knooppunt_store::StoreChange::SinkPaused { sink, until_ms } => {
                    state.deliverer.sink_paused(&sink, until_ms);
                }
            }
        }));
        for why in catalog_out_of_bounds(&state.catalog, &state.principals, &state.zgw) {
            tracing::warn!(
                "{why}. The entry still holds back and checks its events: an admin deletes or \
                 narrows it (`knooppunt check --store` lists these)."
            );
        }
        let sweeper = tokio::spawn(sweep_periodically(Arc::clone(&state)));
        let retiring = tokio::spawn(follow_gone(Arc::clone(&state), retirements));
        let resyncing = tokio::spawn(follow_other_hubs(Arc::clone(&state)));
        let replaying = tokio::spawn(Arc::clone(&state.history).take_over());
        let sampling = tokio::spawn(sample_rates(Arc::clone(&state)));
        let guarding = tokio::spawn(guard_backlog(Arc::clone(&state)));
        let telling = tokio::spawn(tell_owners(Arc::clone(&state), notice_queue, hub_name));
        state.background.lock().expect("background lock").extend([
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
        self.deliverer.shutdown(self.shutdown_grace).await;
        self.stop.send_replace(true);
        let tasks = std::mem::take(&mut *self.background.lock().expect("background lock"));
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
        let result = self.principals.update(actor, record).await;
        self.subscriptions
            .suspend_owners(self.principals.disabled())
            .await;
        if record.disabled && matches!(result, Ok(true)) {
            // The other hubs suspend them too before this answers.
            self.subscriptions.wait_for_other_hubs().await?;
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
        if self.principals.get(name).is_none() {
            return Ok(None);
        }
        let mut suspended = self.principals.disabled();
        suspended.insert(name.to_owned());
        self.subscriptions.suspend_owners(suspended).await;
        let mut deleted = Vec::new();
        let outcome = async {
            // Before the principal (a failure leaves it there to delete again), and once more
            // after it, for one the principal made meanwhile.
            deleted.extend(self.delete_subscriptions_of(name, audit).await?);
            let found = self.principals.delete(actor, name).await?;
            deleted.extend(self.delete_subscriptions_of(name, audit).await?);
            Ok::<bool, principals::Refused>(found)
        }
        .await;
        self.subscriptions
            .suspend_owners(self.principals.disabled())
            .await;
        let found = outcome?;
        if found {
            // The other hubs drop them too before this answers.
            self.subscriptions.wait_for_other_hubs().await?;
        }
        Ok(found.then_some(deleted))
    }

    async fn delete_subscriptions_of(
        &self,
        owner: &str,
        audit: &crate::audit::Context,
    ) -> Result<Vec<String>, StoreError> {
        let ids: Vec<String> = self
            .subscriptions
            .owned_by(owner)
            .iter()
            .map(|s| s.id.clone())
            .collect();
        let mut deleted = Vec::new();
        for id in ids {
            if self.subscriptions.delete(&id, |_| true).await?.is_none() {
                continue;
            }
            self.approvals.subscription_deleted(&id).await;
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
            self.audit.record(audit, action).await;
            deleted.push(id);
        }
        Ok(deleted)
    }

    /// Whether the store takes writes now (for `/readyz`).
    pub async fn store_check(&self) -> Result<(), StoreError> {
        self.store.check().await
    }

    /// Whether publishes are accepted now, and if not why: the backlog guard (disk floor,
    /// backlog limit) and the store itself (a log that cannot be written to) both refuse.
    pub async fn publishing(&self) -> Result<(), String> {
        self.backlog.admit().map_err(|full| full.detail)?;
        self.store.check().await.map_err(|error| {
            format!("the store takes no writes now: {error}; nothing of a publish is kept: try again later")
        })
    }

    /// Up to `size` audit entries after `after` that `picks` chooses, reading at most
    /// `scan_limit` entries; and where to go on when there may be more.
    pub async fn audit_page(
        &self,
        after: Option<u64>,
        size: usize,
        scan_limit: usize,
        picks: impl Fn(&AuditEntry) -> bool,
    ) -> Result<(Vec<AuditEntry>, Option<u64>), StoreError> {
        const CHUNK: usize = 500;
        let (mut found, mut cursor, mut scanned) = (Vec::new(), after, 0);
        loop {
            let limit = CHUNK.min(scan_limit - scanned);
            let chunk = self
                .store
                .audit_entries(AuditRange {
                    after: cursor,
                    limit,
                })
                .await?;
            scanned += chunk.len();
            let ended = chunk.len() < limit;
            for entry in chunk {
                cursor = Some(entry.seq);
                if picks(&entry) {
                    found.push(entry);
                    if found.len() == size {
                        return Ok((found, cursor));
                    }
                }
            }
            if ended {
                return Ok((found, None));
            }
            if scanned >= scan_limit {
                return Ok((found, cursor));
            }
        }
    }

    /// [`AppState::audit_page`] from the newest back: the entries before `before` (all
    /// when `None`) that `picks` takes, newest first, and the cursor to go on from.
    pub async fn audit_page_newest(
        &self,
        before: Option<u64>,
        size: usize,
        scan_limit: usize,
        picks: impl Fn(&AuditEntry) -> bool,
    ) -> Result<(Vec<AuditEntry>, Option<u64>), StoreError> {
        const CHUNK: u64 = 500;
        let mut cursor = match before {
            Some(before) => before,
            None => match self.store.audit_last().await? {
                Some(last) => last.seq + 1,
                None => return Ok((Vec::new(), None)),
            },
        };
        let (mut found, mut scanned) = (Vec::new(), 0);
        while cursor > 0 && scanned < scan_limit {
            // The entries in (after, cursor): at most CHUNK of them, whatever gaps the
            // sequence has (`None`: from the first).
            let after = cursor.checked_sub(CHUNK + 1);
            let chunk = self
                .store
                .audit_entries(AuditRange {
                    after,
                    limit: CHUNK as usize,
                })
                .await?;
            let below = cursor;
            for entry in chunk.into_iter().filter(|e| e.seq < below).rev() {
                scanned += 1;
                cursor = entry.seq;
                if picks(&entry) {
                    found.push(entry);
                    if found.len() == size {
                        return Ok((found, (cursor > 0).then_some(cursor)));
                    }
                }
            }
            cursor = after.map_or(0, |after| cursor.min(after + 1));
        }
        Ok((found, (cursor > 0).then_some(cursor)))
    }

    /// Whether `principal` may verify the audit trail (and read its head): admins, who see
    /// every entry. Asked by every surface that verifies or offers to.
    pub fn may_verify_audit(&self, principal: &Principal) -> Result<(), String> {
        principal.may(identity::Role::Admin, "verify the audit trail")
    }

    /// Checks the whole chain, a page at a time; with `head` (a sequence number and hash kept outside the
    /// store), also that the trail still holds that entry, unchanged: entries removed from
    /// the chain's end leave it intact but show here.
    pub async fn verify_audit(
        &self,
        head: Option<(u64, String)>,
    ) -> Result<AuditVerification, StoreError> {
        let (mut checked, mut first, mut last) = (0u64, None, None::<(u64, String)>);
        let mut head_found = None;
        let mut start = knooppunt_store::StartAnchor::default();
        loop {
            let page = self
                .store
                .audit_entries(AuditRange {
                    after: last.as_ref().map(|(seq, _)| *seq),
                    limit: 1000,
                })
                .await?;
            if page.is_empty() {
                if let Err(broken) = start.check() {
                    return Ok(AuditVerification::broken(checked, first, &last, broken));
                }
                let mut report = AuditVerification {
                    intact: true,
                    entries: checked,
                    first,
                    last: last.as_ref().map(|(seq, _)| *seq),
                    broken_at: None,
                    truncated: None,
                    why: None,
                };
                if let Some((seq, hash)) = &head {
                    let why = match (&head_found, &last) {
                        (Some(found), _) if found == hash => None,
                        (Some(_), _) => Some(format!(
                            "entry {seq} is not the one the head names: it was replaced"
                        )),
                        (None, Some((newest, _))) if newest < seq => Some(format!(
                            "the trail ends at entry {newest}, but the head names entry {seq}: \
                             entries were removed from its end"
                        )),
                        (None, None) => Some(format!(
                            "the trail is empty, but the head names entry {seq}: entries were \
                             removed"
                        )),
                        // Swept by retention: older than the trail's first entry.
                        (None, Some(_)) if first.is_some_and(|f| f > *seq) => None,
                        (None, Some(_)) => {
                            Some(format!("the trail has no entry {seq}: it was removed"))
                        }
                    };
                    if let Some(why) = why {
                        tracing::error!(head = seq, %why, "The audit trail is not complete.");
                        report.intact = false;
                        report.truncated = Some(true);
                        report.why = Some(why);
                    }
                }
                return Ok(report);
            }
            first = first.or(page.first().map(|e| e.seq));
            if let Some((seq, _)) = &head
                && let Some(entry) = page.iter().find(|e| e.seq == *seq)
            {
                head_found = Some(entry.hash.clone());
            }
            let previous = last.as_ref().map(|(seq, hash)| (*seq, hash.as_str()));
            match knooppunt_store::verify_audit(previous, &page) {
                Ok(end) => {
                    page.iter().for_each(|entry| start.see(entry));
                    checked += page.len() as u64;
                    last = end;
                }
                Err(broken) => {
                    // The entries of this page before the broken one are intact too.
                    checked += page.iter().take_while(|e| e.seq < broken.seq).count() as u64;
                    return Ok(AuditVerification::broken(checked, first, &last, broken));
                }
            }
        }
    }

    /// The chain's head as this hub knows it, signed with the hub's Ed25519 key when it
    /// has one (over `knooppunt-audit-head:<sequence>:<hash>`).
    pub fn audit_head(&self) -> AuditHead {
        use base64::Engine as _;
        let Some((seq, hash)) = self.audit.head.get() else {
            return AuditHead {
                sequence: 0,
                hash: knooppunt_store::GENESIS.to_owned(),
                head: None,
                signature: None,
            };
        };
        let content = format!("knooppunt-audit-head:{seq}:{hash}");
        let signature =
            self.deliverer
                .sign_with_hub_key(content.as_bytes())
                .map(|(kid, signature)| HeadSignature {
                    alg: "EdDSA".into(),
                    kid,
                    signed: content,
                    value: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signature),
                });
        AuditHead {
            sequence: seq,
            head: Some(format!("{seq}:{hash}")),
            hash,
            signature,
        }
    }

    /// An accepted event, while it is retained.
    pub async fn event(
        &self,
        seq: u64,
    ) -> Result<Option<Arc<knooppunt_store::StoredEvent>>, StoreError> {
        self.store.event(seq).await
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
        let event = self.store.event(seq).await?;
        let identity = event
            .as_ref()
            .and_then(|event| knooppunt_event::format::json::Identity::of_json(&event.json));
        let sees_all = principal.is_admin()
            || identity.as_ref().is_some_and(|identity| {
                self.catalog.in_own_space(principal, &identity.source)
                    || self
                        .catalog
                        .owners_of(&identity.source, &identity.ty)
                        .iter()
                        .any(|owner| owner == &principal.name)
            });
        let mut receipts: Vec<(Receipt, Option<String>)> = Vec::new();
        for receipt in self.store.receipts_of_event(seq).await? {
            // A deleted subscription's receipt still names (and belongs to) its subscriber.
            let subscriber = self.subscriptions.owner_of(&receipt.subscription).await?;
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
        (after, limit): (Option<&str>, usize),
    ) -> Result<Option<(Vec<Receipt>, Option<String>)>, StoreError> {
        let owner = self.subscriptions.owner_of(id).await?;
        if !(principal.is_admin() || owner.as_deref() == Some(principal.name.as_str())) {
            return Ok(None);
        }
        self.store
            .receipts_of_subscription(id, after, limit)
            .await
            .map(Some)
    }

    /// The delivery queues' sizes (for `/metrics`).
    pub async fn queue_stats(&self) -> Result<Vec<QueueStats>, StoreError> {
        self.store.queue_stats().await
    }

    /// One subscription's queue statistics.
    pub async fn queue_stats_of(&self, id: &str) -> Result<Option<QueueStats>, StoreError> {
        self.store.queue_stats_of(id).await
    }

    /// The disk the store takes (for `/metrics`).
    /// Writes a copy of the store, with the audit trail's checkpoint, to `out` while the
    /// hub serves (blocking: call it off the async runtime).
    pub fn back_up(
        &self,
        out: &mut dyn std::io::Write,
    ) -> Result<knooppunt_store::BackupSummary, StoreError> {
        let beside: Vec<(String, Vec<u8>)> =
            self.audit.head.checkpoint_file().into_iter().collect();
        self.store.backup(out, &beside)
    }

    pub async fn disk_usage(&self) -> Result<knooppunt_store::DiskUsage, StoreError> {
        self.store.disk_usage().await
    }
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

/// What the delivery workers report: counted by the telemetry, and dead letters told to
/// their subscriptions' owners.
struct Observed {
    telemetry: Arc<Telemetry>,
    notices: crate::notices::Notices,
}

impl knooppunt_delivery::Observer for Observed {
    fn attempt(
        &self,
        verdict: &knooppunt_store::Verdict,
        status: Option<u16>,
        elapsed: std::time::Duration,
    ) {
        self.telemetry.attempt(verdict, status, elapsed);
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
async fn tell_owners(
    state: Arc<AppState>,
    mut queue: tokio::sync::mpsc::Receiver<crate::notices::Notice>,
    hub: String,
) {
    let mut stop = state.stop.subscribe();
    loop {
        let Some(Some(notice)) = unless_stopped(&mut stop, queue.recv()).await else {
            return;
        };
        let Some(subscription) = state.subscriptions.get(&notice.subscription) else {
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
            .publishing
            .publish_notice(event, &subscription.owner)
            .await
        {
            tracing::warn!(subscription = %notice.subscription, kind = notice.kind, error = %why, "A notice to a subscription's owner could not be published.");
        }
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
        if state.subscriptions.gone(&gone).await {
            let owner = state
                .subscriptions
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
            state.audit.record(&hub, action).await;
        }
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
    // What this hub loaded at its start is applied.
    if let Some(version) = known {
        let _ = state
            .store
            .hub_applied(state.deliverer.hub_id(), version)
            .await;
    }
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
        if let Err(error) = state.catalog.reload().await {
            tracing::warn!(%error, "Reloading the catalog failed; trying again.");
            continue;
        }
        if let Err(error) = state.approvals.reload().await {
            tracing::warn!(%error, "Reloading the approvals failed; trying again.");
            continue;
        }
        if let Err(error) = state.principals.reload().await {
            tracing::warn!(%error, "Reloading the principals failed; trying again.");
            continue;
        }
        // Another hub disabled or enabled a principal: its subscriptions follow here too.
        state
            .subscriptions
            .suspend_owners(state.principals.disabled())
            .await;
        match state.subscriptions.resync().await {
            Ok(changed) => {
                known = Some(version);
                if changed > 0 {
                    tracing::info!(changed, "Subscriptions changed by another hub were loaded.");
                }
                // Told, so that a hub taking a right away knows this one cut it.
                if let Err(error) = state
                    .store
                    .hub_applied(state.deliverer.hub_id(), version)
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
async fn guard_backlog(state: Arc<AppState>) {
    let mut stop = state.stop.subscribe();
    let mut interval = tokio::time::interval(state.backlog.options.check_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while unless_stopped(&mut stop, interval.tick()).await.is_some() {
        if let Err(error) = state.backlog.check(knooppunt_store::now_ms()).await {
            tracing::warn!(%error, "Measuring the backlog failed; it is measured again shortly.");
        }
    }
}

/// Samples the counters every few seconds, for the rates the console shows.
async fn sample_rates(state: Arc<AppState>) {
    let mut stop = state.stop.subscribe();
    let mut interval = tokio::time::interval(std::time::Duration::from_secs(5));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while unless_stopped(&mut stop, interval.tick()).await.is_some() {
        state
            .telemetry
            .sample(&state.publishing.counters, knooppunt_store::now_ms());
    }
}

/// Removes dead letters past their retention, finished events past retention and old
/// duplicate-detection entries, every `sweep_interval`, until the hub stops.
async fn sweep_periodically(state: Arc<AppState>) {
    let mut stop = state.stop.subscribe();
    let mut interval = tokio::time::interval(state.publishing.options.sweep_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if unless_stopped(&mut stop, interval.tick()).await.is_none() {
            return;
        }
        // Dead letters first: the events they held can go in the same sweep.
        if let Err(error) = state
            .backlog
            .sweep_dead_letters(knooppunt_store::now_ms())
            .await
        {
            tracing::warn!(%error, "The dead-letter retention sweep failed; it will run again.");
        }
        let retention = state.publishing.options.retention.as_millis() as u64;
        let window = state.publishing.options.dedupe_window.as_millis() as u64;
        match state
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
        match state.history.sweep(finished_before).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "Finished replays past retention removed."),
            Err(error) => tracing::warn!(%error, "The replay sweep failed; it will run again."),
        }
        match state.sessions.sweep().await {
            Ok(0) => {}
            Ok(ended) => tracing::debug!(ended, "Ended console sessions removed."),
            Err(error) => tracing::warn!(%error, "The session sweep failed; it will run again."),
        }
        let before =
            knooppunt_store::now_ms().saturating_sub(state.audit_retention.as_millis() as u64);
        match state.audit.retain(state.store.as_ref(), before).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "Audit entries past retention removed."),
            Err(error) => {
                tracing::warn!(%error, "The audit retention sweep failed; it will run again.")
            }
        }
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

/// What a check of the audit chain found.
#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditVerification {
    pub intact: bool,
    /// Entries checked.
    pub entries: u64,
    /// The oldest entry kept (older ones were removed by retention).
    pub first: Option<u64>,
    /// The newest entry checked.
    pub last: Option<u64>,
    /// The first broken entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken_at: Option<u64>,
    /// The head given is missing or replaced: entries were removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl AuditVerification {
    /// The report of a chain broken at `broken` after `checked` entries (logged).
    fn broken(
        checked: u64,
        first: Option<u64>,
        last: &Option<(u64, String)>,
        broken: knooppunt_store::Broken,
    ) -> AuditVerification {
        tracing::error!(entry = broken.seq, why = %broken.why, "The audit trail is broken.");
        AuditVerification {
            intact: false,
            entries: checked,
            first,
            last: last.as_ref().map(|(seq, _)| *seq),
            broken_at: Some(broken.seq),
            truncated: None,
            why: Some(broken.why),
        }
    }
}

/// The audit chain's head.
#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AuditHead {
    /// The newest entry's number (0: none yet).
    pub sequence: u64,
    /// Its hash.
    pub hash: String,
    /// `<sequence>:<hash>`, as `verify?head=` takes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// The hub's Ed25519 signature of `signed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<HeadSignature>,
}

/// A signature of the audit chain's head.
#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct HeadSignature {
    #[schemars(extend("enum" = ["EdDSA"]))]
    pub alg: std::borrow::Cow<'static, str>,
    pub kid: String,
    /// `knooppunt-audit-head:<sequence>:<hash>`.
    pub signed: String,
    /// The signature, base64url without padding.
    pub value: String,
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
