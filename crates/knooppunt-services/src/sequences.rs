//! The NL GOV profile's Integer `sequence` (§3.5.1.2.2: it starts at 1 and counts up by one
//! per source, wrapping from 2^31 − 1 to −2^31): the last one this hub accepted of each
//! source, to say when an event does not follow it. A hub sees a source's events only as
//! they reach it (not before a restart, and only its share when several hubs serve one
//! store), so a gap is a warning (`nlgov.sequence.contiguous`), never a refusal.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use knooppunt_event::{AttributeValue, Event, Rule, Severity, Violation};

/// How many sources are remembered; the oldest is forgotten past it (its next event then
/// starts afresh).
const REMEMBERED: usize = 65_536;

/// The last Integer `sequence` accepted per source, bounded.
#[derive(Debug, Default)]
pub struct Sequences {
    last: Mutex<(HashMap<String, i32>, VecDeque<String>)>,
}

/// An event's Integer `sequence`, if it has one (`sequencetype` Integer, a valid value).
fn integer_sequence(event: &Event) -> Option<i32> {
    let Some(AttributeValue::String(kind)) = event.extension("sequencetype") else {
        return None;
    };
    if !kind.eq_ignore_ascii_case("integer") {
        return None;
    }
    match event.extension("sequence") {
        Some(AttributeValue::String(text)) => text.parse().ok(),
        _ => None,
    }
}

impl Sequences {
    /// Notes the events, in order, as accepted; returns (by the event's position) a warning
    /// for each whose Integer `sequence` does not follow the last one of its source (a
    /// resend of that same one, and a source not seen before, follow). Without Integer
    /// sequences (most publishes) it neither locks nor allocates.
    pub fn follow<'a>(&self, events: impl Iterator<Item = &'a Event>) -> Vec<(usize, Violation)> {
        let mut found = Vec::new();
        let mut guard = None;
        for (at, event) in events.enumerate() {
            let Some(sequence) = integer_sequence(event) else {
                continue;
            };
            let (last, order) = &mut **guard
                .get_or_insert_with(|| self.last.lock().unwrap_or_else(|e| e.into_inner()));
            let source = event.source();
            let finding = match last.get(source) {
                Some(&previous) if sequence != previous && sequence != previous.wrapping_add(1) => {
                    let mut warning = Violation::new(
                        "sequence",
                        Rule::NlGovSequenceContiguous,
                        format!(
                            "sequence {sequence} of source `{source}` follows {previous} here: an \
                             Integer sequence counts up by one ({} was expected)",
                            previous.wrapping_add(1)
                        ),
                    );
                    warning.severity = Severity::Warning;
                    Some(warning)
                }
                _ => None,
            };
            let finding = finding.map(|warning| (at, warning));
            if last.insert(source.to_owned(), sequence).is_none() {
                order.push_back(source.to_owned());
                while order.len() > REMEMBERED {
                    if let Some(oldest) = order.pop_front() {
                        last.remove(&oldest);
                    }
                }
            }
            found.extend(finding);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(source: &str, sequence: &str) -> Event {
        let text = format!(
            r#"{{"specversion":"1.0","id":"{sequence}","source":"{source}","type":"nl.x",
                "sequencetype":"Integer","sequence":"{sequence}"}}"#
        );
        knooppunt_event::format::json::decode_event(text.as_bytes())
            .unwrap()
            .event
    }

    fn warned(sequences: &Sequences, events: &[Event]) -> Vec<bool> {
        let found = sequences.follow(events.iter());
        (0..events.len())
            .map(|n| found.iter().any(|(at, _)| *at == n))
            .collect()
    }

    #[test]
    fn a_sequence_that_does_not_count_up_by_one_is_warned_of_per_source() {
        let sequences = Sequences::default();
        let a = "urn:nld:oin:00000001823288444000:systeem:a";
        let b = "urn:nld:oin:00000001823288444000:systeem:b";
        assert_eq!(
            warned(
                &sequences,
                &[event(a, "1"), event(a, "2"), event(b, "7"), event(a, "4")]
            ),
            [false, false, false, true],
            "a source not seen before starts anywhere; a's 4 skips 3"
        );
        let found = sequences.follow([event(b, "9")].iter());
        let warning = &found[0].1;
        assert_eq!(warning.rule.code(), "nlgov.sequence.contiguous");
        assert_eq!(warning.severity, Severity::Warning);
        assert!(warning.detail.contains("follows 7"), "{}", warning.detail);
        // A resend of the last one, and the wrap past 2^31 - 1, follow.
        assert_eq!(
            warned(&sequences, &[event(b, "9"), event(b, "10")]),
            [false, false]
        );
        assert_eq!(
            warned(
                &sequences,
                &[event(a, "2147483647"), event(a, "-2147483648")]
            ),
            [true, false]
        );
    }
}
