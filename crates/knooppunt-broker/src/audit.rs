//! The audit trail's writer: every change the API makes and every refused request becomes
//! an [`AuditRecord`], appended to the store's hash chain by one task in batches. A change
//! waits until its entry is on disk ([`Audit::record`]); a refusal does not
//! ([`Audit::refused`]), and a flood of them cannot grow memory: past [`QUEUE`] waiting
//! records, refusals are counted instead and the count becomes one entry of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use knooppunt_store::{AuditRecord, Store, now_ms};
use tokio::sync::{mpsc, oneshot};

/// The actor of what the hub decides by itself.
pub(crate) const HUB: &str = "knooppunt";

/// How many records may wait for the writer.
pub(crate) const QUEUE: usize = 10_000;

/// At most this many records go into one append.
const BATCH: usize = 500;

/// The actor of a request, and the ids that tie the entry to it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Context {
    pub(crate) actor: Option<String>,
    pub(crate) actor_oin: Option<String>,
    pub(crate) request_id: Option<String>,
    pub(crate) trace_id: Option<String>,
}

/// What an action was and what it concerned.
#[derive(Debug, Clone)]
pub(crate) struct Action {
    /// E.g. `subscription.create`.
    pub(crate) name: &'static str,
    /// E.g. `subscription/<id>`.
    pub(crate) object: String,
    /// What changed (never a secret).
    pub(crate) details: serde_json::Value,
    /// Principals it concerns besides the actor.
    pub(crate) concerns: Vec<String>,
    /// Whom the data is about, when the action concerns one.
    pub(crate) data_subject: Option<String>,
}

impl Action {
    pub(crate) fn new(name: &'static str, object: String, details: serde_json::Value) -> Action {
        Action {
            name,
            object,
            details,
            concerns: Vec::new(),
            data_subject: None,
        }
    }

    pub(crate) fn concerning(mut self, principals: impl IntoIterator<Item = String>) -> Action {
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

pub(crate) struct Audit {
    queue: mpsc::Sender<Waiting>,
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
    AuditRecord {
        start_time: now_ms(),
        processing_activity_id: Some(activity(action.name)),
        name: action.name.to_owned(),
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
    pub(crate) fn new(
        store: Arc<dyn Store>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> (Audit, impl Future<Output = ()> + Send) {
        let (queue, receiver) = mpsc::channel(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let written = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let task = write(
            store,
            receiver,
            stop,
            Arc::clone(&dropped),
            Arc::clone(&written),
            Arc::clone(&failed),
        );
        (
            Audit {
                queue,
                dropped,
                written,
                failed,
            },
            task,
        )
    }

    /// Records a change and returns once its entry is on disk (`false` when it could not be
    /// written: the change stands, the log says so).
    pub(crate) async fn record(&self, context: &Context, action: Action) -> bool {
        let (written, done) = oneshot::channel();
        let waiting = Waiting {
            record: record(context, action, "OK"),
            written: Some(written),
        };
        if self.queue.send(waiting).await.is_err() {
            return false;
        }
        done.await.unwrap_or(false)
    }

    /// The writer's counters in the Prometheus text format.
    pub(crate) fn render(&self, out: &mut String) {
        use std::fmt::Write;
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

    /// Records a refused request without waiting; counted instead when the writer is behind.
    pub(crate) fn refused(&self, context: &Context, action: Action) {
        let waiting = Waiting {
            record: record(context, action, "ERROR"),
            written: None,
        };
        if self.queue.try_send(waiting).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The writer: takes what waits (up to [`BATCH`]), appends it in one go, answers.
async fn write(
    store: Arc<dyn Store>,
    mut receiver: mpsc::Receiver<Waiting>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    dropped: Arc<AtomicU64>,
    written: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let stopping = *stop.borrow_and_update();
        if stopping {
            // What waits is written, then nothing more is taken.
            receiver.close();
        }
        let received = tokio::select! {
            received = receiver.recv_many(&mut batch, BATCH) => received,
            _ = stop.changed(), if !stopping => continue,
        };
        if received == 0 {
            return;
        }
        let mut records: Vec<AuditRecord> = Vec::with_capacity(batch.len() + 1);
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            records.push(record(
                &Context {
                    actor: Some(HUB.to_owned()),
                    ..Context::default()
                },
                Action::new(
                    "audit.refusals-counted",
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
        let ok = match store.append_audit(records).await {
            Ok(_) => {
                written.fetch_add(count, Ordering::Relaxed);
                true
            }
            Err(error) => {
                failed.fetch_add(count, Ordering::Relaxed);
                dropped.fetch_add(lost, Ordering::Relaxed);
                tracing::error!(%error, entries = count, "Writing the audit trail failed.");
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
