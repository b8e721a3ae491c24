//! The audit trail's writer: every change the API makes and every refused request becomes
//! an [`AuditRecord`], appended to the store's hash chain by one task in batches. A change
//! waits until its entry is on disk ([`Audit::record`]); a refusal does not
//! ([`Audit::refused`]), and a flood of them cannot grow memory: past [`QUEUE`] waiting
//! records, refusals are counted instead and the count becomes one entry of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use knooppunt_store::{AuditLog, AuditRange, AuditRecord, Store, StoreError, now_ms};
use tokio::sync::{mpsc, oneshot};

/// The actor of what the hub decides by itself.
pub const HUB: &str = "knooppunt";

/// How many records may wait for the writer.
pub const QUEUE: usize = 10_000;

/// At most this many audit entries are read, and so removed, by one retention sweep; the
/// rest go at the next.
pub const RETAIN_AT_ONCE: u64 = 100_000;

/// At most this many records go into one append.
const BATCH: usize = 500;

/// The actor of a request, and the ids that tie the entry to it.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub actor: Option<String>,
    pub actor_oin: Option<String>,
    pub request_id: Option<String>,
    pub trace_id: Option<String>,
    /// The surface the request came through: the one thing a surface tells the trail.
    pub surface: Surface,
}

/// The surface a change came through. The use case that makes the change builds its entry
/// (what changed, redacted, and whom it concerns); the surface only picks the entry's name
/// (`/v1`'s `subscription.create` or the facade's `abonnement.create`) and, for the
/// Notificaties facade, adds the ZGW client that asked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Surface {
    /// The `/v1` API, and the console, which calls it.
    #[default]
    Api,
    /// The Notificaties facade, called by the ZGW client `client`.
    Facade { client: String },
}

impl Context {
    /// `action` as this context's surface names it: the facade's name when it came through
    /// the facade (and the facade has one), with the client in its details.
    fn label(&self, mut action: Action) -> Action {
        if let Surface::Facade { client } = &self.surface {
            action.name = match action.name {
                ActionName::SubscriptionCreate => ActionName::AbonnementCreate,
                ActionName::SubscriptionReplace => ActionName::AbonnementUpdate,
                ActionName::SubscriptionDelete => ActionName::AbonnementDelete,
                ActionName::EventtypeCreate => ActionName::KanaalCreate,
                ActionName::EventtypeReplace => ActionName::KanaalUpdate,
                name => name,
            };
            if let Some(details) = action.details.as_object_mut() {
                details.insert("client".into(), client.as_str().into());
            }
        }
        action
    }
}

macro_rules! action_names {
    ($($variant:ident = $name:literal,)*) => {
        /// Every action the audit trail records, by its `name` (`<resource>.<verb>`; what
        /// comes before the dot is the entry's processing activity): one list, so that the
        /// API's description names them all and no surface makes up its own.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ActionName {
            $($variant,)*
        }

        impl ActionName {
            pub const ALL: &[ActionName] = &[$(ActionName::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(ActionName::$variant => $name,)*
                }
            }
        }
    };
}

action_names! {
    SubscriptionCreate = "subscription.create",
    SubscriptionReplace = "subscription.replace",
    SubscriptionDelete = "subscription.delete",
    SubscriptionConsent = "subscription.consent",
    SubscriptionTest = "subscription.test",
    SubscriptionSigningSecretRotate = "subscription.signing-secret-rotate",
    SubscriptionShed = "subscription.shed",
    SubscriptionExpire = "subscription.expire",
    SubscriptionDisable = "subscription.disable",
    DeadLetterRedeliver = "dead-letter.redeliver",
    DeadLetterDelete = "dead-letter.delete",
    ReplayCreate = "replay.create",
    ReplayCancel = "replay.cancel",
    EventtypeCreate = "eventtype.create",
    EventtypeReplace = "eventtype.replace",
    EventtypeDelete = "eventtype.delete",
    ApprovalRequest = "approval.request",
    ApprovalGrant = "approval.grant",
    ApprovalRefuse = "approval.refuse",
    ApprovalRevoke = "approval.revoke",
    PrincipalCreate = "principal.create",
    PrincipalChange = "principal.change",
    PrincipalDelete = "principal.delete",
    PrincipalTokenIssue = "principal.token-issue",
    StoreBackup = "store.backup",
    KanaalCreate = "kanaal.create",
    KanaalUpdate = "kanaal.update",
    AbonnementCreate = "abonnement.create",
    AbonnementUpdate = "abonnement.update",
    AbonnementDelete = "abonnement.delete",
    ConsoleSignin = "console.signin",
    ConsoleSignout = "console.signout",
    RequestUnauthenticated = "request.unauthenticated",
    RequestForbidden = "request.forbidden",
    AuditRefusalsCounted = "audit.refusals-counted",
    AuditEntriesLost = "audit.entries-lost",
    AuditRetention = "audit.retention",
}

/// What an action was and what it concerned.
#[derive(Debug, Clone)]
pub struct Action {
    pub name: ActionName,
    /// E.g. `subscription/<id>`.
    pub object: String,
    /// What changed (never a secret).
    pub details: serde_json::Value,
    /// Principals it concerns besides the actor.
    pub concerns: Vec<String>,
    /// Whom the data is about, when the action concerns one.
    pub data_subject: Option<String>,
}

impl Action {
    pub fn new(name: ActionName, object: String, details: serde_json::Value) -> Action {
        Action {
            name,
            object,
            details,
            concerns: Vec::new(),
            data_subject: None,
        }
    }

    pub fn concerning(mut self, principals: impl IntoIterator<Item = String>) -> Action {
        self.concerns.extend(principals);
        self.concerns.sort();
        self.concerns.dedup();
        self
    }
}

struct Waiting {
    record: AuditRecord,
    written: Option<oneshot::Sender<bool>>,
}

/// The chain's head as this hub last saw it (the newest entry's sequence number and
/// hash), anchored outside the store so that removing entries from the chain's end shows:
/// logged at every change and at start-up, served at `GET /v1/audit/head` and as a metric,
/// and kept in a checkpoint file beside the hub, compared with the store at start-up.
#[derive(Debug, Default)]
pub struct Head {
    current: std::sync::Mutex<Option<(u64, String)>>,
    checkpoint: Option<std::path::PathBuf>,
}

/// Why a hub refuses to start: the store's audit trail lacks what the checkpoint saw.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Truncated(String);

impl Head {
    /// The newest entry this hub knows of.
    pub fn get(&self) -> Option<(u64, String)> {
        self.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Compares the store's trail with the checkpoint file (when the hub keeps one): the
    /// entry it names must be in the store, with its hash, or have been swept by retention
    /// with newer entries after it. Then takes the store's head as its own.
    pub async fn open(
        store: &dyn Store,
        checkpoint: Option<std::path::PathBuf>,
    ) -> Result<Head, Truncated> {
        let last = store
            .audit_last()
            .await
            .map_err(|error| Truncated(format!("cannot read the audit trail's head: {error}")))?;
        let seen = checkpoint
            .as_deref()
            .and_then(|path| std::fs::read_to_string(path).ok())
            .and_then(|text| parse_head(text.trim()));
        if let (Some((seq, hash)), Some(path)) = (&seen, &checkpoint) {
            let place = format!(
                "this hub's checkpoint {} says entry {seq} (hash {hash}) was written",
                path.display()
            );
            let what_to_do = "restore the store from a backup, or, knowing why, move the \
                              checkpoint file aside to start anyway (the hub then anchors the \
                              trail's head anew, in its log and at /v1/audit/head)";
            match last.as_ref().map(|entry| entry.seq) {
                Some(newest) if newest >= *seq => {
                    let found = store
                        .audit_entries(knooppunt_store::AuditRange {
                            after: Some(seq.saturating_sub(1)),
                            limit: 1,
                        })
                        .await
                        .map_err(|error| {
                            Truncated(format!("cannot read the audit trail: {error}"))
                        })?;
                    match found.first() {
                        Some(entry) if entry.seq == *seq => {
                            if entry.hash != *hash {
                                return Err(Truncated(format!(
                                    "the audit trail's entry {seq} is not the one {place}: it \
                                     was replaced; {what_to_do}"
                                )));
                            }
                        }
                        _ => {
                            // Gone: swept by retention (older than the oldest kept), or
                            // removed.
                            let oldest = store
                                .audit_entries(knooppunt_store::AuditRange {
                                    after: None,
                                    limit: 1,
                                })
                                .await
                                .map_err(|error| {
                                    Truncated(format!("cannot read the audit trail: {error}"))
                                })?;
                            if oldest.first().is_none_or(|entry| entry.seq <= *seq) {
                                return Err(Truncated(format!(
                                    "the audit trail has no entry {seq} although newer ones \
                                     follow, and {place}: entries were removed; {what_to_do}"
                                )));
                            }
                        }
                    }
                }
                newest => {
                    return Err(Truncated(format!(
                        "the audit trail ends at entry {}, but {place}: entries were removed \
                         from its end; {what_to_do}",
                        newest.unwrap_or(0)
                    )));
                }
            }
        }
        let head = Head {
            current: std::sync::Mutex::new(last.map(|entry| (entry.seq, entry.hash))),
            checkpoint,
        };
        if let Some((seq, hash)) = head.get() {
            tracing::info!(sequence = seq, %hash, "Audit trail head at start-up.");
            head.keep(seq, &hash);
        }
        Ok(head)
    }

    /// Entries up to `entry` were appended.
    fn advance(&self, entry: &knooppunt_store::AuditEntry) {
        {
            let mut current = self
                .current
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if current.as_ref().is_some_and(|(seq, _)| *seq >= entry.seq) {
                return;
            }
            *current = Some((entry.seq, entry.hash.clone()));
        }
        tracing::info!(sequence = entry.seq, hash = %entry.hash, "Audit trail head.");
        self.keep(entry.seq, &entry.hash);
    }

    /// The checkpoint file as it is now, by its name (a backup takes it along), when the
    /// hub keeps one and has written it.
    pub fn checkpoint_file(&self) -> Option<(String, Vec<u8>)> {
        let path = self.checkpoint.as_ref()?;
        let name = path.file_name()?.to_str()?.to_owned();
        std::fs::read(path).ok().map(|bytes| (name, bytes))
    }

    /// Writes the checkpoint file (a new file renamed into place), when the hub keeps one.
    fn keep(&self, seq: u64, hash: &str) {
        let Some(path) = &self.checkpoint else {
            return;
        };
        let written = (|| {
            let staged = path.with_extension("new");
            std::fs::write(&staged, format!("{seq}:{hash}\n"))?;
            std::fs::rename(&staged, path)
        })();
        if let Err(error) = written {
            tracing::warn!(%error, path = %path.display(), "Writing the audit trail's checkpoint failed; the log keeps the head.");
        }
    }
}

/// `<sequence>:<hash>`, as the checkpoint and `--head` write a head.
pub fn parse_head(text: &str) -> Option<(u64, String)> {
    let (seq, hash) = text.split_once(':')?;
    let seq = seq.trim().parse().ok()?;
    let hash = hash.trim();
    (hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| (seq, hash.to_ascii_lowercase()))
}

pub struct Audit {
    queue: mpsc::Sender<Waiting>,
    /// The chain's head, anchored outside the store.
    pub head: Arc<Head>,
    /// Refusals not recorded one by one since the last count was written.
    dropped: Arc<AtomicU64>,
    /// Every entry written, and every write that failed (for metrics).
    written: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
}

/// The processing activity (Logboek Dataverwerkingen) of an action: the part of its name
/// before the dot (`subscription`, `approval`, …).
fn activity(name: &str) -> String {
    name.split('.').next().unwrap_or(name).to_owned()
}

fn record(context: &Context, action: Action, status: &str) -> AuditRecord {
    let action = context.label(action);
    AuditRecord {
        start_time: now_ms(),
        processing_activity_id: Some(activity(action.name.as_str())),
        name: action.name.as_str().to_owned(),
        status_code: status.to_owned(),
        actor: context.actor.clone(),
        actor_oin: context.actor_oin.clone(),
        object: Some(action.object),
        request_id: context.request_id.clone(),
        trace_id: context.trace_id.clone(),
        data_subject_id: action.data_subject,
        details: action.details,
        concerns: action.concerns,
    }
}

impl Audit {
    /// The writer and its task (to be spawned; it ends when `stop` says so, after writing
    /// what waits, or when the writer is dropped).
    pub fn new(
        store: Arc<dyn Store>,
        head: Head,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> (Audit, impl Future<Output = ()> + Send) {
        let (queue, receiver) = mpsc::channel(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let written = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let head = Arc::new(head);
        let task = write(
            store,
            receiver,
            stop,
            Arc::clone(&head),
            Arc::clone(&dropped),
            Arc::clone(&written),
            Arc::clone(&failed),
        );
        (
            Audit {
                queue,
                head,
                dropped,
                written,
                failed,
            },
            task,
        )
    }

    /// Records a change: returns once its entry is on disk, or, when the store refuses it
    /// now, once the writer keeps it to write when the store takes writes again (before any
    /// newer entry, so the chain keeps the order of the changes). A failed write is handled
    /// here, once, for every use case: the change stands, the entry follows, the error log
    /// and `knooppunt_audit_entries_failed_total` say so.
    pub async fn record(&self, context: &Context, action: Action) {
        self.on_disk(context, action).await;
    }

    /// Records a change and says whether its entry is on disk now (`false`: the writer keeps
    /// it to write later).
    async fn on_disk(&self, context: &Context, action: Action) -> bool {
        let (written, done) = oneshot::channel();
        let waiting = Waiting {
            record: record(context, action, "OK"),
            written: Some(written),
        };
        if self.queue.send(waiting).await.is_err() {
            // The writer stopped (the hub is stopping): the log says what came after.
            tracing::error!("The audit writer has stopped; an entry of a change is not written.");
            return false;
        }
        done.await.unwrap_or(false)
    }

    /// The writer's counters in the Prometheus text format.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write;
        if let Some((seq, hash)) = self.head.get() {
            let _ = writeln!(
                out,
                "# HELP knooppunt_audit_head_sequence The newest audit entry's sequence number; \
                 its hash is the label (compare it with a copy kept elsewhere).\n\
                 # TYPE knooppunt_audit_head_sequence gauge\n\
                 knooppunt_audit_head_sequence{{hash=\"{hash}\"}} {seq}"
            );
        }
        for (name, help, value) in [
            (
                "knooppunt_audit_entries_written_total",
                "Audit entries appended to the trail.",
                self.written.load(Ordering::Relaxed),
            ),
            (
                "knooppunt_audit_entries_failed_total",
                "Audit entries whose write failed (the error log says why).",
                self.failed.load(Ordering::Relaxed),
            ),
            (
                "knooppunt_audit_refusals_waiting_count",
                "Refused requests counted, not yet written as one entry, because the writer was behind.",
                self.dropped.load(Ordering::Relaxed),
            ),
        ] {
            let kind = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
    }

    /// Removes the audit entries older than `before_ms` (the oldest run of them, never the
    /// newest entry, and not when they are all records of earlier removals), at most
    /// [`RETAIN_AT_ONCE`] a call: first the trail records the removal
    /// (through which entry, and its hash: the `prev_hash` the first entry kept will have),
    /// on disk, then the store removes them. Verification so tells a removal by retention
    /// from a deletion, at the trail's start too; a crash in between leaves the entries and a
    /// record of a removal still to come, which verifies as well. Returns how many.
    pub async fn retain(&self, store: &dyn Store, before_ms: u64) -> Result<u64, StoreError> {
        let Some(newest) = store.audit_last().await? else {
            return Ok(0);
        };
        let mut through: Option<(u64, String)> = None;
        let (mut read, mut only_removals) = (0, true);
        'pages: while read < RETAIN_AT_ONCE {
            let page = store
                .audit_entries(AuditRange {
                    after: through.as_ref().map(|(seq, _)| *seq),
                    limit: 1000,
                })
                .await?;
            if page.is_empty() {
                break;
            }
            for entry in page {
                read += 1;
                if entry.seq >= newest.seq || entry.record.start_time >= before_ms {
                    break 'pages;
                }
                only_removals &= entry.record.name == knooppunt_store::audit::RETENTION;
                through = Some((entry.seq, entry.hash));
            }
        }
        // Records of earlier removals alone stay: removing them would record one more, and an
        // idle trail would grow by an entry every sweep.
        let Some((through, hash)) = through.filter(|_| !only_removals) else {
            return Ok(0);
        };
        let recorded = self
            .on_disk(
                &Context {
                    actor: Some(HUB.to_owned()),
                    ..Context::default()
                },
                Action::new(
                    ActionName::AuditRetention,
                    "audit".into(),
                    knooppunt_store::audit::retention_details(through, &hash, before_ms),
                ),
            )
            .await;
        if !recorded {
            return Err(StoreError::Backend(
                "the removal by retention could not be recorded on the trail; nothing was \
                 removed"
                    .into(),
            ));
        }
        store.remove_audit_through(through).await
    }

    /// Records a request the hub answered 401 (`unauthenticated`) or 403 on `route` (the
    /// route, not the path: a path can carry a secret), with the refusal's `detail`.
    pub fn request_refused(
        &self,
        context: &Context,
        unauthenticated: bool,
        route: String,
        detail: Option<String>,
    ) {
        let (name, status) = if unauthenticated {
            (ActionName::RequestUnauthenticated, 401)
        } else {
            (ActionName::RequestForbidden, 403)
        };
        let details = serde_json::json!({"status": status, "detail": detail});
        self.refused(context, Action::new(name, route, details));
    }

    /// Records a refused request without waiting; counted instead when the writer is behind.
    pub fn refused(&self, context: &Context, action: Action) {
        let waiting = Waiting {
            record: record(context, action, "ERROR"),
            written: None,
        };
        if self.queue.try_send(waiting).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The most entries the writer keeps to retry while the store takes no writes; older ones
/// beyond it are counted instead, and the trail says how many when it takes writes again.
const KEEP_UNWRITTEN: usize = 100_000;

/// How long the writer waits before it tries the store again, at first and at most.
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(100);
const RETRY_LONGEST: std::time::Duration = std::time::Duration::from_secs(5);

/// The audit writer: appends what waits in order, in batches. A batch the store refuses is
/// kept and tried again (after a growing pause) before anything newer, so an entry is not
/// dropped because the store was briefly unavailable, and the chain keeps the order of
/// the changes; who waited for it is told it is not yet written. Only when more than
/// [`KEEP_UNWRITTEN`] wait does the writer let the oldest go, and the trail then records how
/// many it lost.
async fn write(
    store: Arc<dyn AuditLog>,
    mut receiver: mpsc::Receiver<Waiting>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    head: Arc<Head>,
    dropped: Arc<AtomicU64>,
    written: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    // Refused by the store, oldest first: written before anything newer.
    let mut unwritten: std::collections::VecDeque<AuditRecord> = std::collections::VecDeque::new();
    // Entries let go because too many waited.
    let mut lost_entries = 0u64;
    let mut pause = RETRY_FIRST;
    let mut closed = false;
    loop {
        let stopping = *stop.borrow_and_update();
        if stopping && !closed {
            // What waits is written, then nothing more is taken.
            receiver.close();
            closed = true;
        }
        let received = if unwritten.is_empty() {
            tokio::select! {
                received = receiver.recv_many(&mut batch, BATCH) => received,
                _ = stop.changed(), if !stopping => continue,
            }
        } else if closed {
            receiver.recv_many(&mut batch, BATCH).await
        } else {
            // Try the store again after the pause, with whatever came meanwhile (all of
            // it, so that no one waits to hand in an entry).
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.changed() => continue,
            }
            while let Ok(waiting) = receiver.try_recv() {
                batch.push(waiting);
            }
            batch.len()
        };
        if received == 0 && unwritten.is_empty() {
            return;
        }
        let mut records: Vec<AuditRecord> = Vec::with_capacity(unwritten.len() + batch.len() + 2);
        records.extend(unwritten.drain(..));
        if lost_entries > 0 {
            records.push(record(
                &hub_context(),
                Action::new(
                    crate::audit::ActionName::AuditEntriesLost,
                    "audit".into(),
                    serde_json::json!({
                        "entries": lost_entries,
                        "why": "the store took no writes for so long that more audit entries \
                                waited than the hub keeps; the oldest of them were let go"
                    }),
                ),
                "ERROR",
            ));
        }
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            records.push(record(
                &hub_context(),
                Action::new(
                    crate::audit::ActionName::AuditRefusalsCounted,
                    "audit".into(),
                    serde_json::json!({
                        "refusals": lost,
                        "why": "more refused requests came than the audit writer could take one \
                                by one; they are counted here"
                    }),
                ),
                "ERROR",
            ));
        }
        records.extend(batch.iter().map(|w| w.record.clone()));
        let count = records.len() as u64;
        let ok = match store.append_audit(records.clone()).await {
            Ok(entries) => {
                written.fetch_add(count, Ordering::Relaxed);
                if let Some(last) = entries.last() {
                    head.advance(last);
                }
                lost_entries = 0;
                pause = RETRY_FIRST;
                true
            }
            Err(error) => {
                // Kept to try again: the counted refusals and the lost entries are in
                // `records` already.
                let new = batch.len() as u64;
                failed.fetch_add(new, Ordering::Relaxed);
                let mut kept: std::collections::VecDeque<AuditRecord> = records.into();
                // The entries of the losses just made are made again next time.
                kept.retain(|r| r.name != crate::audit::ActionName::AuditEntriesLost.as_str());
                while kept.len() > KEEP_UNWRITTEN {
                    kept.pop_front();
                    lost_entries += 1;
                }
                unwritten = kept;
                tracing::error!(
                    %error,
                    waiting = unwritten.len(),
                    retry_in_ms = pause.as_millis() as u64,
                    "Writing the audit trail failed; the entries are kept and written when the \
                     store takes writes again."
                );
                pause = (pause * 2).min(RETRY_LONGEST);
                if closed && received == 0 {
                    // Stopping, and the store still refuses: the log above says what is lost.
                    return;
                }
                false
            }
        };
        for waiting in batch.drain(..) {
            if let Some(answer) = waiting.written {
                let _ = answer.send(ok);
            }
        }
    }
}

/// The context of what the hub itself records.
fn hub_context() -> Context {
    Context {
        actor: Some(HUB.to_owned()),
        ..Context::default()
    }
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::ActionName;

    #[test]
    fn the_retention_entry_has_the_name_the_verifier_knows() {
        assert_eq!(
            ActionName::AuditRetention.as_str(),
            knooppunt_store::audit::RETENTION
        );
    }

    #[test]
    fn every_action_has_a_name_of_its_own_made_of_a_resource_and_a_verb() {
        let mut seen = std::collections::HashSet::new();
        for name in ActionName::ALL {
            let text = name.as_str();
            assert!(seen.insert(text), "`{text}` is named twice");
            let (resource, verb) = text.split_once('.').expect("`<resource>.<verb>`");
            for part in [resource, verb] {
                assert!(
                    !part.is_empty() && part.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                    "`{text}`"
                );
            }
        }
    }

    use std::sync::Arc;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    use knooppunt_store::{AuditEntry, AuditLog, AuditRange, AuditRecord, StoreError, StoreFuture};

    use super::{Action, Audit, Context, Head};

    /// A trail that refuses the first `refuse` appends, then keeps what it is given.
    #[derive(Default)]
    struct Flaky {
        refuse: AtomicU32,
        kept: Mutex<Vec<AuditRecord>>,
    }

    impl AuditLog for Flaky {
        fn append_audit(&self, records: Vec<AuditRecord>) -> StoreFuture<'_, Vec<AuditEntry>> {
            Box::pin(async move {
                if self
                    .refuse
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    return Err(StoreError::Unavailable("the disk is full".into()));
                }
                self.kept.lock().unwrap().extend(records);
                Ok(Vec::new())
            })
        }

        fn audit_entries(&self, _: AuditRange) -> StoreFuture<'_, Vec<AuditEntry>> {
            Box::pin(async { Ok(Vec::new()) })
        }

        fn audit_last(&self) -> StoreFuture<'_, Option<AuditEntry>> {
            Box::pin(async { Ok(None) })
        }

        fn remove_audit_through(&self, _: u64) -> StoreFuture<'_, u64> {
            Box::pin(async { Ok(0) })
        }
    }

    #[tokio::test]
    async fn entries_the_store_refused_are_written_later_in_order() {
        let trail = Arc::new(Flaky::default());
        trail.refuse.store(3, Ordering::SeqCst);
        let (queue, receiver) = tokio::sync::mpsc::channel(super::QUEUE);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let failed = Arc::new(AtomicU64::new(0));
        let audit = Audit {
            queue,
            head: Arc::new(Head {
                current: Mutex::new(None),
                checkpoint: None,
            }),
            dropped: Arc::new(AtomicU64::new(0)),
            written: Arc::new(AtomicU64::new(0)),
            failed: Arc::clone(&failed),
        };
        let writer = tokio::spawn(super::write(
            Arc::clone(&trail) as Arc<dyn AuditLog>,
            receiver,
            stopped,
            Arc::clone(&audit.head),
            Arc::clone(&audit.dropped),
            Arc::clone(&audit.written),
            Arc::clone(&failed),
        ));
        let change = |n: u32| {
            Action::new(
                ActionName::SubscriptionCreate,
                format!("subscription/{n}"),
                serde_json::json!({}),
            )
        };
        for n in 0..5 {
            audit.record(&Context::default(), change(n)).await;
        }
        // Refused three times (the first three changes' writes), each entry is kept.
        assert!(failed.load(Ordering::SeqCst) >= 3);
        // The writer tries again after 0.1, 0.2 and 0.4 s.
        let waited = std::time::Instant::now();
        while trail.kept.lock().unwrap().len() < 5 && waited.elapsed().as_secs() < 30 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let objects: Vec<String> = trail
            .kept
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.object.clone().unwrap())
            .collect();
        let wanted: Vec<String> = (0..5).map(|n| format!("subscription/{n}")).collect();
        assert_eq!(
            objects, wanted,
            "every entry once, in the order of the changes"
        );
        stop.send(true).unwrap();
        writer.await.unwrap();
    }
}
