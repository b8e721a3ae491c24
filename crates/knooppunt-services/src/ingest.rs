//! What the hub does with published events before it answers, as a pipeline of stages:
//! [`Pipeline::accept`] validates the decoded events against the profile, checks the publisher may
//! publish their sources, routes them, commits them with their deliveries to the store
//! (the 2xx waits for that), wakes the workers, and counts. Decoding and the HTTP answer
//! are `api/events.rs`'s.

use std::sync::Arc;
use std::time::Duration;

use knooppunt_delivery::{Deliverer, trace};
use knooppunt_event::trace_context::TraceContext;
use knooppunt_event::validate::Rule;
use knooppunt_event::{
    Data, Event, ProfileLevel, ReceivedEvent, Severity, Violation, Violations, validate,
};
use knooppunt_filter::EvalLimits;
use knooppunt_store::{Appended, NewEvent, SchemaCheck, Store, StoreError};
use serde::Serialize;
use tracing::Instrument;

use crate::approvals::Approvals;
use crate::backlog::Backlog;
use crate::catalog::{Catalog, Covered};
use crate::identity::{Principal, SourceRefused};
use crate::subscriptions::Subscriptions;
use crate::telemetry::{IngestCounters, Rejection, Telemetry};

/// The publish pipeline and what it needs: the store it commits to, the subscriptions it
/// routes to (read through the lifecycle) and the workers it wakes.
pub struct Pipeline {
    pub options: IngestOptions,
    pub counters: IngestCounters,
    store: Arc<dyn Store>,
    subscriptions: Arc<Subscriptions>,
    catalog: Arc<Catalog>,
    approvals: Arc<Approvals>,
    deliverer: Deliverer,
    telemetry: Arc<Telemetry>,
    backlog: Arc<Backlog>,
    eval_limits: EvalLimits,
    /// Blocking threads that evaluate costly publishes' filters ([`ROUTING_THREADS`]).
    routing_slots: tokio::sync::Semaphore,
    /// Each source's last Integer `sequence` (the profile's contiguity, warned of).
    sequences: crate::sequences::Sequences,
}

/// The services a pipeline works with.
pub struct Services {
    pub store: Arc<dyn Store>,
    pub subscriptions: Arc<Subscriptions>,
    pub catalog: Arc<Catalog>,
    pub approvals: Arc<Approvals>,
    pub deliverer: Deliverer,
    pub telemetry: Arc<Telemetry>,
    pub backlog: Arc<Backlog>,
}

impl Pipeline {
    pub fn new(options: IngestOptions, services: Services, eval_limits: EvalLimits) -> Pipeline {
        let Services {
            store,
            subscriptions,
            catalog,
            approvals,
            deliverer,
            telemetry,
            backlog,
        } = services;
        Pipeline {
            options,
            counters: IngestCounters::default(),
            store,
            subscriptions,
            catalog,
            approvals,
            deliverer,
            telemetry,
            backlog,
            eval_limits,
            routing_slots: tokio::sync::Semaphore::new(ROUTING_THREADS),
            sequences: crate::sequences::Sequences::default(),
        }
    }

    /// The pipeline for decoded events (`batched`: they came as a batch, so problems carry
    /// their positions). All or none: one refused event refuses them all.
    ///
    /// It runs in a span `publish` (with `route` and `append` inside), which continues `hop`,
    /// the trace context of the publisher's request (its `traceparent` header), or else that
    /// of a lone event (its distributed tracing extension); exported traces join each
    /// accepted event's delivery attempts to it ([`knooppunt_delivery::trace`]).
    pub async fn accept(
        &self,
        publisher: &Principal,
        received: Vec<ReceivedEvent>,
        batched: bool,
        hop: Option<TraceContext>,
    ) -> Result<Vec<Receipt>, Refused> {
        // A SERVER span (the OpenTelemetry HTTP conventions: the hub answers the request).
        let span = tracing::debug_span!(
            "publish",
            otel.kind = "server",
            principal = %publisher.name,
            events = received.len(),
            http_trace_id = tracing::field::Empty,
            http_parent_id = tracing::field::Empty,
        );
        if !span.is_disabled() {
            if let Some(hop) = &hop {
                span.record("http_trace_id", hop.trace_id.as_str());
                span.record("http_parent_id", hop.parent_id.as_str());
            }
            let parent = hop.or_else(|| match received.as_slice() {
                [event] => TraceContext::of_event(&event.event),
                _ => None,
            });
            if let (true, Some(parent)) = (trace::enabled(), &parent) {
                trace::continue_from(&span, parent);
            }
        }
        accept(self, publisher, received, batched)
            .instrument(span)
            .await
    }

    /// Whether `publisher` may publish at all (the publisher role, or admin): the one rule
    /// for every surface. A surface may ask before it reads a body, so that a caller without
    /// the right learns nothing of its events' validity; [`Pipeline::accept`] asks again, so
    /// a surface that does not ask cannot publish either (a ZGW client acts with its
    /// principal's roles, less what its scopes leave out).
    pub fn may_publish(&self, publisher: &Principal, count: usize) -> Result<(), String> {
        publisher
            .may(crate::identity::Role::Publisher, "publish events")
            .inspect_err(|_| rejected(self, Rejection::Forbidden, count))
    }

    /// Whether a repeat of an accepted event (`receipt` says `duplicate`) carries other
    /// content than the original: `json`, the repeat, against the stored original, both
    /// read as JSON (spacing and member order do not count). Duplicates are told by `source`
    /// and `id` alone, so a surface that answers as if the event were taken (the facade's
    /// 201) asks this first: a different event under a used identity is dropped, and must be
    /// refused, not acknowledged. An original no longer kept is taken as the same.
    pub async fn repeat_differs(&self, receipt: &Receipt, json: &str) -> Result<bool, StoreError> {
        if !receipt.duplicate {
            return Ok(false);
        }
        let Some(original) = self.store.event(receipt.sequence).await? else {
            return Ok(false);
        };
        let read = |text: &str| serde_json::from_str::<serde_json::Value>(text).ok();
        Ok(read(&original.json) != read(json))
    }

    /// Counts refused events, by why (also those refused before they reach the pipeline).
    pub fn rejected(&self, why: Rejection, count: usize) {
        rejected(self, why, count)
    }

    /// Publishes the hub's own notice `json` (a CloudEvent of [`crate::notices`]) to
    /// `recipient`'s subscriptions alone: routed as any event, then kept only for the
    /// subscriptions `recipient` owns, and committed; the hub's backlog limits hold (a
    /// notice the hub has no room for is not kept).
    pub async fn publish_notice(&self, json: String, recipient: &str) -> Result<(), String> {
        let received = knooppunt_event::format::json::decode_event(json.as_bytes())
            .map_err(|violations| violations.to_string())?;
        if self.backlog.admit_publish().await.is_err() {
            return Err("the hub holds all the undelivered data it may".into());
        }
        // Matched in one look (notices are few; the publish metrics do not count them),
        // then kept for the recipient's subscriptions that ask for notices by name.
        let mut matched = self
            .subscriptions
            .route(
                std::iter::once(&received.event),
                self.eval_limits,
                u64::MAX,
                |_| {},
            )
            .pop()
            .map(|r| r.matched)
            .unwrap_or_default();
        matched.retain(|id| {
            self.subscriptions
                .get(id)
                .is_some_and(|s| s.owner == recipient && crate::notices::asks_for_notices(&s))
        });
        let routed = vec![new_event(received, matched)];
        commit(self, routed, None)
            .await
            .map_err(|refused| match refused {
                Refused::Store(error) => error.to_string(),
                _ => "refused".into(),
            })?;
        Ok(())
    }
}

/// The spec's floor: intermediaries must forward events of 64 KiB or less.
pub const MIN_EVENT_BYTES: usize = 64 * 1024;

/// How published events are accepted.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// How strictly the NL GOV profile is applied.
    pub profile: ProfileLevel,
    /// The largest event accepted, in bytes on the wire (body, plus `ce-` headers in binary
    /// mode). At least [`MIN_EVENT_BYTES`].
    pub max_event_bytes: usize,
    /// The largest batch body accepted, in bytes.
    pub max_batch_bytes: usize,
    /// An event whose `source` + `id` was accepted this recently is acknowledged again but
    /// not routed twice.
    pub dedupe_window: Duration,
    /// How long events whose deliveries are all finished are kept (at least as long as the
    /// duplicate window: duplicate detection needs them).
    pub retention: Duration,
    /// How often the retention sweep runs.
    pub sweep_interval: Duration,
    /// Sources of the form `urn:nld:oin:<OIN>:…` (an organisation's source space, NL GOV
    /// profile) may be published only by the principal with that OIN, or one whose
    /// `publish_source_prefixes` name that OIN (a supplier publishing on its behalf).
    pub reserve_oin_sources: bool,
    /// Refuse events that no catalog entry covers (the operator's "catalog required").
    pub catalog_required: bool,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            profile: ProfileLevel::Warn,
            max_event_bytes: 1024 * 1024,
            max_batch_bytes: 10 * 1024 * 1024,
            dedupe_window: Duration::from_secs(24 * 3600),
            retention: Duration::from_secs(7 * 24 * 3600),
            sweep_interval: Duration::from_secs(60),
            reserve_oin_sources: true,
            catalog_required: false,
        }
    }
}

pub use knooppunt_store::now_ms;

/// What the hub says about one published event.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    rename = "PublishReceipt",
    description = "What the hub did with one published event.",
    deny_unknown_fields
)]
pub struct Receipt {
    pub id: String,
    pub source: String,
    /// The hub's acceptance sequence number (the original's, for a duplicate).
    pub sequence: u64,
    /// An event with this `source` and `id` was accepted before, within the duplicate window;
    /// it was acknowledged again but not routed again.
    pub duplicate: bool,
    /// How many subscriptions it was routed to.
    pub matched_subscriptions: usize,
    /// SHOULD-level findings (and, at profile level `warn`, the profile's MUSTs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<ViolationSchema>")]
    pub warnings: Vec<Violation>,
    /// Present (true) when the event type catalog deprecates its type: it was accepted all
    /// the same.
    #[serde(rename = "deprecatedType", skip_serializing_if = "std::ops::Not::not")]
    #[schemars(extend("enum" = [true]))]
    pub deprecated_type: bool,
}

/// One problem with one attribute of one event, as [`knooppunt_event::validate::Violation`]
/// is written (the event crate knows nothing of schemas).
#[derive(schemars::JsonSchema)]
#[schemars(
    rename = "Violation",
    description = "One problem with one attribute of one event."
)]
#[allow(dead_code)]
pub struct ViolationSchema {
    /// The attribute (or `data`, `data_base64`, or an HTTP header name) the problem is in;
    /// empty when it concerns the message as a whole.
    #[schemars(example = &"time")]
    attribute: String,
    /// A stable code such as `core.timestamp` or `nlgov.type.reverse-domain`.
    #[schemars(example = &"core.timestamp")]
    rule: String,
    /// What is wrong and what to do about it, in words.
    detail: String,
    /// The document and section the rule comes from.
    #[schemars(example = &"CloudEvents 1.0 spec.md §Type System")]
    spec: String,
    #[schemars(extend("enum" = ["error", "warning"]))]
    severity: String,
}

pub use crate::refused::Refused;

/// Counts refused events, by why.
fn rejected(pipeline: &Pipeline, why: Rejection, count: usize) {
    IngestCounters::add(&pipeline.counters.rejected, count as u64);
    pipeline.telemetry.rejected(why, count);
}

async fn accept(
    pipeline: &Pipeline,
    publisher: &Principal,
    received: Vec<ReceivedEvent>,
    batched: bool,
) -> Result<Vec<Receipt>, Refused> {
    pipeline
        .may_publish(publisher, received.len())
        .map_err(Refused::Forbidden)?;
    let mut warnings = check(pipeline, &received, batched)?;
    authorize(pipeline, publisher, &received)?;
    if pipeline.options.profile != ProfileLevel::Off {
        let events = received.iter().map(|r| &r.event);
        for (at, warning) in pipeline.sequences.follow(events) {
            warnings[at].push(warning);
        }
    }
    if let Err(full) = pipeline.backlog.admit_publish().await {
        rejected(pipeline, Rejection::BacklogFull, received.len());
        return Err(Refused::Full(full));
    }
    let covered = look_up(pipeline, &received, batched, &mut warnings)?;
    // Events of approval-required entries: routed and committed holding a pass of the
    // approvals' gate, so that a revocation waits for them (`approvals.rs`).
    let gated = covered
        .iter()
        .any(|c| c.as_ref().is_some_and(|c| !c.gated.is_empty()));
    let _pass = gated.then(|| pipeline.approvals.gate.enter());
    // Each event's trace context, for the log (only read when debug logging is on).
    let traces: Vec<Option<TraceContext>> = if tracing::enabled!(tracing::Level::DEBUG) {
        received
            .iter()
            .map(|r| TraceContext::of_event(&r.event))
            .collect()
    } else {
        Vec::new()
    };
    // The publish's own context, which its events' delivery attempts continue; the
    // `route` and `append` spans only when the publish is traced (no wrapper otherwise).
    let traced = !tracing::Span::current().is_disabled();
    let publish = if traced && trace::enabled() {
        trace::context_of(&tracing::Span::current())
    } else {
        None
    };
    let mut routed = if traced {
        route(pipeline, received)
            .instrument(tracing::debug_span!("route"))
            .await
    } else {
        route(pipeline, received).await
    };
    if gated {
        pipeline
            .approvals
            .keep_granted(covered.iter().zip(routed.iter_mut()).map(|(c, e)| {
                let gated = c.as_ref().map_or(&[][..], |c| c.gated.as_slice());
                (gated, &mut e.subscriptions)
            }));
    }
    // What the receipts need; the events themselves move into the store.
    let receipted: Vec<Receipted> = routed
        .iter()
        .map(|e| Receipted {
            id: e.id.clone(),
            source: e.source.clone(),
            matched: e.subscriptions.len(),
        })
        .collect();
    let outcomes = if traced {
        commit(pipeline, routed, publish)
            .instrument(tracing::debug_span!("append"))
            .await?
    } else {
        commit(pipeline, routed, publish).await?
    };
    let mut receipts = count(pipeline, receipted, outcomes, warnings, &traces);
    for (receipt, covered) in receipts.iter_mut().zip(covered) {
        receipt.deprecated_type = covered.is_some_and(|c| c.deprecated);
    }
    Ok(receipts)
}

/// An event as its receipt names it.
struct Receipted {
    id: String,
    source: String,
    matched: usize,
}

/// The profile's checks: the warnings of each event, or every problem of the invalid ones.
fn check(
    pipeline: &Pipeline,
    received: &[ReceivedEvent],
    batched: bool,
) -> Result<Vec<Vec<Violation>>, Refused> {
    let mut warnings = Vec::with_capacity(received.len());
    let mut problems = Vec::new();
    for (index, event) in received.iter().enumerate() {
        match validate::check(&event.event, pipeline.options.profile) {
            Ok(found) => warnings.push(found),
            Err(violations) => problems.push((batched.then_some(index), violations)),
        }
    }
    if problems.is_empty() {
        Ok(warnings)
    } else {
        rejected(pipeline, Rejection::Invalid, received.len());
        Err(Refused::Events(problems))
    }
}

/// A publisher limited to source prefixes publishes only sources within them; one with an
/// OIN only sources of its organisation (`urn:nld:oin:<OIN>:`, NL GOV profile); and (unless the
/// operator lifts it) an organisation's source space is its own or its named suppliers'.
fn authorize(
    pipeline: &Pipeline,
    publisher: &Principal,
    received: &[ReceivedEvent],
) -> Result<(), Refused> {
    let reserve = pipeline.options.reserve_oin_sources;
    // The hub's own source space is its notices': no principal publishes there.
    if let Some(event) = received
        .iter()
        .find(|e| e.event.source().starts_with(crate::notices::SOURCE_PREFIX))
    {
        rejected(pipeline, Rejection::Forbidden, received.len());
        return Err(Refused::Forbidden(format!(
            "event `{}` has source `{}`: sources starting with `{}` are the hub's own (its \
             notices to subscription owners); publish under your organisation's source",
            event.event.id(),
            event.event.source(),
            crate::notices::SOURCE_PREFIX
        )));
    }
    let Some((event, why)) = received.iter().find_map(|e| {
        publisher
            .may_publish(e.event.source(), reserve)
            .err()
            .map(|why| (e, why))
    }) else {
        return Ok(());
    };
    rejected(pipeline, Rejection::Forbidden, received.len());
    let (id, source, name) = (event.event.id(), event.event.source(), &publisher.name);
    Err(Refused::Forbidden(match why {
        SourceRefused::OutsidePrefixes => format!(
            "principal `{name}` may publish only sources starting with `{}`; event `{id}` has \
             source `{source}`",
            publisher.publish_source_prefixes.join("`, `"),
        ),
        SourceRefused::OutsideOwnSpace(own) => format!(
            "principal `{name}` is organisation OIN {} and may publish only sources starting \
             with `{own}`; event `{id}` has source `{source}`",
            publisher
                .oin
                .as_ref()
                .map(|o| o.as_str())
                .unwrap_or_default()
        ),
        SourceRefused::OtherOrganisation(oin) => format!(
            "event `{id}` has source `{source}`, in the source space of organisation OIN {oin}: \
             only the principal with that OIN, or one whose publish_source_prefixes name \
             `urn:nld:oin:{oin}:` (a supplier publishing on its behalf), may publish there, \
             and principal `{name}` is neither (an operator can lift this with [ingest] \
             reserve_oin_sources = false)"
        ),
        // Only for prefixes: a source is refused by the cases above.
        SourceRefused::AllOrganisations | SourceRefused::NoOwnSpace => {
            format!("principal `{name}` may not publish event `{id}` of source `{source}`")
        }
    }))
}

/// What the catalog says of each event (see [`Covered`]), and what its data breaks of the schemas of the entries that cover it (warnings, added to `warnings`, or, for
/// an entry that enforces its schema, problems that refuse them all); with "catalog
/// required", an event no entry covers refuses them all too.
fn look_up(
    pipeline: &Pipeline,
    received: &[ReceivedEvent],
    batched: bool,
    warnings: &mut [Vec<Violation>],
) -> Result<Vec<Option<Covered>>, Refused> {
    let found = pipeline
        .catalog
        .look_up(received.iter().map(|r| (r.event.source(), r.event.ty())));
    if pipeline.options.catalog_required
        && let Some((event, _)) = received.iter().zip(&found).find(|(_, f)| f.is_none())
    {
        rejected(pipeline, Rejection::Forbidden, received.len());
        return Err(Refused::Forbidden(format!(
            "no catalog entry covers type `{}` of source `{}` (event `{}`), and this hub \
             accepts only described events: describe it first with POST /v1/eventtypes",
            event.event.ty(),
            event.event.source(),
            event.event.id()
        )));
    }
    let mut problems = Vec::new();
    for (index, (event, covered)) in received.iter().zip(&found).enumerate() {
        let Some(covered) = covered.as_ref().filter(|c| !c.schemas.is_empty()) else {
            continue;
        };
        let (errors, advice) = schema_findings(&event.event, covered);
        warnings[index].extend(advice);
        if let Some(errors) = Violations::of(errors) {
            problems.push((batched.then_some(index), errors));
        }
    }
    if !problems.is_empty() {
        rejected(pipeline, Rejection::Invalid, received.len());
        return Err(Refused::Events(problems));
    }
    Ok(found)
}

/// At most this many schema problems are reported per event and entry.
const MAX_SCHEMA_PROBLEMS: usize = 10;

/// What an event's data breaks of each schema that covers it: errors (entries that
/// enforce their schema) and warnings (entries that warn). No data is checked as `null`;
/// data that is not JSON breaks any schema.
fn schema_findings(event: &Event, covered: &Covered) -> (Vec<Violation>, Vec<Violation>) {
    let data = match event.data() {
        None => Ok(serde_json::Value::Null),
        Some(Data::Json(text)) => text.to_value().map_err(|error| error.to_string()),
        Some(_) => Err("the data is not JSON".to_owned()),
    };
    let (mut errors, mut advice) = (Vec::new(), Vec::new());
    for (entry, check, validator) in &covered.schemas {
        let found: Vec<String> = match &data {
            Ok(value) => validator
                .iter_errors(value)
                .take(MAX_SCHEMA_PROBLEMS)
                .map(|error| {
                    let at = error.instance_path().to_string();
                    if at.is_empty() {
                        error.to_string()
                    } else {
                        format!("at `{at}`: {error}")
                    }
                })
                .collect(),
            Err(why) => vec![why.clone()],
        };
        for detail in found {
            let mut violation = Violation::new(
                "data",
                Rule::DataSchema,
                format!("the schema of catalog entry {entry}: {detail}"),
            );
            if *check == SchemaCheck::Enforce {
                errors.push(violation);
            } else {
                violation.severity = Severity::Warning;
                advice.push(violation);
            }
        }
    }
    (errors, advice)
}

/// Each event in its JSON form with the subscriptions it matches now. The candidates are
/// evaluated in one look at the registry while they are cheap; once they have cost
/// [`INLINE_UNITS`] the rest moves to a blocking thread (at most [`ROUTING_THREADS`] at
/// once), so that no publish, however costly its events are to match, holds an async worker
/// (and every other client) for longer than a slice.
async fn route(pipeline: &Pipeline, received: Vec<ReceivedEvent>) -> Vec<NewEvent> {
    let telemetry = &pipeline.telemetry;
    let limits = pipeline.eval_limits;
    // Each event's routing time: its part here, and its part on a blocking thread.
    let mut took = Vec::with_capacity(received.len());
    let mut routed = pipeline.subscriptions.route(
        received.iter().map(|r| &r.event),
        limits,
        INLINE_UNITS,
        |inline| took.push(inline),
    );
    let mut received = received;
    if routed.iter().any(|r| !r.rest.is_empty()) {
        let _slot = pipeline
            .routing_slots
            .acquire()
            .await
            .expect("the routing slots are never closed");
        IngestCounters::add(&telemetry.routing_offloaded, 1);
        let offloaded;
        (received, routed, offloaded) = tokio::task::spawn_blocking(move || {
            let mut offloaded = Vec::with_capacity(routed.len());
            for (routed, received) in routed.iter_mut().zip(&received) {
                let started = std::time::Instant::now();
                routed.evaluate_rest(&received.event, limits);
                offloaded.push(started.elapsed());
            }
            (received, routed, offloaded)
        })
        .await
        .unwrap_or_else(|error| std::panic::resume_unwind(error.into_panic()));
        for (took, offloaded) in took.iter_mut().zip(offloaded) {
            *took += offloaded;
        }
    }
    for took in took {
        telemetry.routing_seconds.observe(took.as_secs_f64());
    }
    let over_budget: Vec<(String, knooppunt_filter::Exceeded)> = routed
        .iter_mut()
        .flat_map(|r| std::mem::take(&mut r.over_budget))
        .collect();
    if !over_budget.is_empty() {
        IngestCounters::add(&telemetry.filter_over_budget, over_budget.len() as u64);
        pipeline
            .subscriptions
            .note_over_budget(&over_budget, now_ms());
        // Debug, not warn: a costly filter and a busy publisher must not flood the log; the
        // subscription's filterBudget and the metric say it.
        tracing::debug!(
            subscriptions = ?over_budget,
            "Filters ran out of their evaluation budget: the event was not routed to them."
        );
    }
    received
        .into_iter()
        .zip(routed)
        .map(|(received, routed)| new_event(received, routed.matched))
        .collect()
}

/// An event as the store appends it, with the subscriptions it was routed to.
fn new_event(received: ReceivedEvent, subscriptions: Vec<String>) -> NewEvent {
    NewEvent {
        source: received.event.source().to_owned(),
        id: received.event.id().to_owned(),
        extension_types: received.event.extension_types_text(),
        json: received.into_json(),
        subscriptions,
    }
}

/// The units of filter evaluation a publish spends on its async worker, in one look at the
/// registry, before the rest moves to a blocking thread: about a quarter of a millisecond.
const INLINE_UNITS: u64 = 256 * 1024;

/// How many blocking threads evaluate costly publishes at once; more wait their turn.
const ROUTING_THREADS: usize = 2;

/// Appends the events with their deliveries (durable when it returns), then wakes the
/// workers of the subscriptions they were routed to; with `publish`, the span of the publish
/// (traces exported), the accepted events' attempts will continue it.
async fn commit(
    pipeline: &Pipeline,
    routed: Vec<NewEvent>,
    publish: Option<TraceContext>,
) -> Result<Vec<Appended>, Refused> {
    let routed_to: Vec<bool> = if publish.is_some() {
        routed.iter().map(|e| !e.subscriptions.is_empty()).collect()
    } else {
        Vec::new()
    };
    let window = pipeline.options.dedupe_window.as_millis() as u64;
    let wake: Vec<String> = routed
        .iter()
        .flat_map(|e| e.subscriptions.iter().cloned())
        .collect();
    let (mut event_bytes, mut delivery_bytes) = (0, 0);
    for event in &routed {
        let size = event.size();
        event_bytes += size;
        delivery_bytes += size * event.subscriptions.len() as u64;
    }
    let outcomes = pipeline
        .store
        .append_events(routed, now_ms(), window)
        .await
        .map_err(Refused::Store)?;
    pipeline.backlog.accepted(event_bytes, delivery_bytes);
    if let Some(publish) = publish {
        for (outcome, routed) in outcomes.iter().zip(routed_to) {
            if let (Appended::Accepted { seq }, true) = (outcome, routed) {
                pipeline.deliverer.traces().remember(*seq, publish.clone());
            }
        }
    }
    pipeline.deliverer.wake(&wake);
    Ok(outcomes)
}

/// Counts what happened and writes the receipts.
fn count(
    pipeline: &Pipeline,
    receipted: Vec<Receipted>,
    outcomes: Vec<Appended>,
    warnings: Vec<Vec<Violation>>,
    traces: &[Option<TraceContext>],
) -> Vec<Receipt> {
    let counters = &pipeline.counters;
    receipted
        .into_iter()
        .zip(outcomes)
        .zip(warnings)
        .enumerate()
        .map(|(index, ((event, outcome), warnings))| {
            let (duplicate, sequence) = match outcome {
                Appended::Accepted { seq } => (false, seq),
                Appended::Duplicate { seq } => (true, seq),
            };
            let matched = if duplicate { 0 } else { event.matched };
            if duplicate {
                IngestCounters::add(&counters.duplicates, 1);
            } else {
                IngestCounters::add(&counters.accepted, 1);
                IngestCounters::add(&counters.deliveries, matched as u64);
                pipeline.telemetry.matches.observe(matched as f64);
                if matched == 0 {
                    IngestCounters::add(&counters.unmatched, 1);
                }
            }
            let trace = traces.get(index).and_then(Option::as_ref);
            tracing::debug!(
                source = %event.source, id = %event.id, sequence, duplicate, matched,
                trace_id = trace.map(|t| t.trace_id.as_str()),
                link = trace.map(|t| t.parent_id.as_str()),
                "Event accepted."
            );
            Receipt {
                id: event.id,
                source: event.source,
                sequence,
                duplicate,
                matched_subscriptions: matched,
                warnings: warnings
                    .into_iter()
                    .filter(|w| w.severity == Severity::Warning)
                    .collect(),
                deprecated_type: false,
            }
        })
        .collect()
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ViolationSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViolationSchema").finish_non_exhaustive()
    }
}
