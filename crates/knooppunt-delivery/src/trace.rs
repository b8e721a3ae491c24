//! Traces exported with OpenTelemetry (docs/operating.md, "Traces"): a publish, its routing,
//! its durable append and every delivery attempt are `tracing` spans, which the binary's
//! OpenTelemetry layer exports when the operator turns it on ([`enable`]). This module joins
//! them into one trace: the publish continues the publisher's context, and each delivery
//! attempt continues the publish that accepted its event ([`Links`]), or, when this hub did
//! not accept it recently, the event's own context (its distributed tracing extension). The
//! event is never changed: a delivery's HTTP request carries the attempt's context in its
//! `traceparent` header, the extension as it was published.
//!
//! Off (the default), nothing here runs: the spans stay disabled below debug logging.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use knooppunt_event::trace_context::TraceContext;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Called once the process exports traces (the OpenTelemetry layer is installed).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether this process exports traces.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Makes `span` (not yet entered) a child of `parent`, a context from outside the process.
pub fn continue_from(span: &tracing::Span, parent: &TraceContext) {
    let (Ok(trace_id), Ok(span_id)) = (
        TraceId::from_hex(&parent.trace_id),
        SpanId::from_hex(&parent.parent_id),
    ) else {
        return;
    };
    let state = parent
        .tracestate
        .as_deref()
        .and_then(|state| state.parse::<TraceState>().ok())
        .unwrap_or_default();
    let remote = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(parent.flags),
        true,
        state,
    );
    let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
}

/// `span`'s own context, as the parent its children (in this process or a sink) name:
/// `None` when it is not exported.
pub fn context_of(span: &tracing::Span) -> Option<TraceContext> {
    let context = span.context();
    let own = context.span();
    let own = own.span_context();
    if !own.is_valid() {
        return None;
    }
    let state = own.trace_state().header();
    Some(TraceContext {
        trace_id: own.trace_id().to_string(),
        parent_id: own.span_id().to_string(),
        flags: own.trace_flags().to_u8(),
        tracestate: (!state.is_empty()).then_some(state),
    })
}

/// The publish spans of the events this hub accepted most recently, by sequence number, so
/// that their delivery attempts join the publish's trace. Bounded: the oldest are forgotten
/// (their attempts then continue the event's own context, as after a restart or on another
/// hub of a shared store). Filled only while traces are exported.
#[derive(Debug, Default)]
pub struct Links {
    recent: Mutex<(HashMap<u64, TraceContext>, VecDeque<u64>)>,
}

/// How many publishes [`Links`] remembers (about 150 bytes each).
const REMEMBERED: usize = 65_536;

impl Links {
    /// Remembers that the event `seq` was accepted in the span `context`.
    pub fn remember(&self, seq: u64, context: TraceContext) {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let (by_seq, order) = &mut *recent;
        if by_seq.insert(seq, context).is_none() {
            order.push_back(seq);
        }
        while order.len() > REMEMBERED {
            if let Some(oldest) = order.pop_front() {
                by_seq.remove(&oldest);
            }
        }
    }

    /// The publish span of the event `seq`, if remembered.
    pub fn publish_of(&self, seq: u64) -> Option<TraceContext> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.0.get(&seq).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(n: u64) -> TraceContext {
        TraceContext {
            trace_id: format!("{n:032x}"),
            parent_id: format!("{n:016x}"),
            flags: 1,
            tracestate: None,
        }
    }

    #[test]
    fn links_forget_the_oldest_publishes_beyond_their_bound() {
        let links = Links::default();
        for seq in 1..=(REMEMBERED as u64 + 10) {
            links.remember(seq, context(seq));
        }
        assert_eq!(links.publish_of(1), None);
        assert_eq!(links.publish_of(10), None);
        assert_eq!(links.publish_of(11), Some(context(11)));
        let last = REMEMBERED as u64 + 10;
        assert_eq!(links.publish_of(last), Some(context(last)));
        assert_eq!(links.recent.lock().unwrap().0.len(), REMEMBERED);
    }

    #[test]
    fn a_span_that_is_not_exported_has_no_context() {
        let span = tracing::debug_span!("deliver");
        assert_eq!(context_of(&span), None);
    }
}
