//! W3C Trace Context carried by an event: the distributed tracing extension
//! (extensions/distributed-tracing.md), whose `traceparent` and `tracestate` attributes hold
//! the context of the trace that produced the event. The hub never changes them; it reads
//! them to join its own spans to that trace and to give each delivery's HTTP request a
//! `traceparent` of its own in the same trace.

use serde::Deserialize;

use crate::event::{AttributeValue, Event};

/// An event's trace context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// 32 lowercase hex digits, not all zero.
    pub trace_id: String,
    /// The span that produced the event: 16 lowercase hex digits, not all zero.
    pub parent_id: String,
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
    /// The vendor-specific `tracestate`, passed on as it came.
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// Reads a `traceparent` value (W3C Trace Context §3.2): version `00`, or a later
    /// version read as `00` where its first fields have the same form. Anything else is no
    /// trace context at all.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let text = traceparent.trim();
        let version = text.get(0..2)?;
        if !is_lower_hex(version) || version == "ff" {
            return None;
        }
        if (version == "00" && text.len() != 55)
            || text.len() < 55
            || (text.len() > 55 && text.as_bytes()[55] != b'-')
        {
            return None;
        }
        let bytes = text.as_bytes();
        if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let (trace_id, parent_id, flags) = (&text[3..35], &text[36..52], &text[53..55]);
        let nonzero = |hex: &str| hex.bytes().any(|b| b != b'0');
        let valid = is_lower_hex(trace_id)
            && is_lower_hex(parent_id)
            && is_lower_hex(flags)
            && nonzero(trace_id)
            && nonzero(parent_id);
        if !valid {
            return None;
        }
        Some(TraceContext {
            trace_id: trace_id.to_owned(),
            parent_id: parent_id.to_owned(),
            flags: u8::from_str_radix(flags, 16).ok()?,
            tracestate: tracestate
                .map(str::trim)
                .filter(|state| !state.is_empty())
                .map(str::to_owned),
        })
    }

    /// The trace context of an event, from its `traceparent` and `tracestate` extensions.
    pub fn of_event(event: &Event) -> Option<TraceContext> {
        let text = |name: &str| match event.extension(name) {
            Some(AttributeValue::String(value)) => Some(value.as_str()),
            _ => None,
        };
        TraceContext::parse(text("traceparent")?, text("tracestate"))
    }

    /// The trace context of an event in the JSON format, reading only those two members.
    /// Most events carry none: a text without `traceparent` (and without escapes, which
    /// could spell it) is answered without parsing.
    pub fn of_json(json: &str) -> Option<TraceContext> {
        if !json.contains("traceparent") && !json.contains('\\') {
            return None;
        }
        #[derive(Deserialize)]
        struct Members<'a> {
            #[serde(borrow)]
            traceparent: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow)]
            tracestate: Option<std::borrow::Cow<'a, str>>,
        }
        let members: Members<'_> = serde_json::from_str(json).ok()?;
        TraceContext::parse(&members.traceparent?, members.tracestate.as_deref())
    }

    /// The `traceparent` of a span of this trace with id `span_id` (a zero id, which W3C
    /// forbids, becomes 1): the way a hop continues the trace.
    pub fn child(&self, span_id: u64) -> String {
        format!(
            "00-{}-{:016x}-{:02x}",
            self.trace_id,
            span_id.max(1),
            self.flags
        )
    }
}

fn is_lower_hex(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const W3C_EXAMPLE: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn reads_the_w3c_example_and_continues_its_trace() {
        let context = TraceContext::parse(W3C_EXAMPLE, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(context.trace_id, "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(context.parent_id, "b7ad6b7169203331");
        assert_eq!(context.flags, 1);
        assert_eq!(context.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
        assert_eq!(
            context.child(0xabc),
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000abc-01"
        );
        assert!(
            TraceContext::parse(&context.child(0), None).is_some(),
            "never a zero span id"
        );
    }

    #[test]
    fn refuses_what_w3c_calls_invalid_and_reads_later_versions() {
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",
            "0x-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ] {
            assert_eq!(TraceContext::parse(bad, None), None, "{bad}");
        }
        let later = "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-comes";
        assert!(TraceContext::parse(later, None).is_some());
    }

    #[test]
    fn is_read_from_an_event_or_its_json() {
        let json = format!(
            r#"{{"specversion":"1.0","id":"1","source":"/s","type":"t","traceparent":"{W3C_EXAMPLE}","tracestate":"rojo=1"}}"#
        );
        let received = crate::format::json::decode_event(json.as_bytes()).unwrap();
        let from_event = TraceContext::of_event(&received.event).unwrap();
        assert_eq!(TraceContext::of_json(&json), Some(from_event.clone()));
        assert_eq!(from_event.tracestate.as_deref(), Some("rojo=1"));
        assert_eq!(
            TraceContext::of_json(r#"{"specversion":"1.0","id":"1","source":"/s","type":"t"}"#),
            None
        );
        let escaped = format!(r#"{{"id":"1","trace\u0070arent":"{W3C_EXAMPLE}"}}"#);
        assert_eq!(
            TraceContext::of_json(&escaped).map(|t| t.parent_id),
            Some("b7ad6b7169203331".to_owned()),
            "a name spelled with escapes is still read"
        );
    }
}
