//! Cost of routing one event at 10, 1,000 and 100,000 subscriptions, with a realistic mix of
//! exact, prefix, suffix and CESQL filters; the full scan is measured beside it where that
//! is affordable.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use knooppunt_event::{Event, EventBuilder};
use knooppunt_filter::cesql::Expression;
use knooppunt_filter::{Criteria, Filter, Limits, MatchIndex};
use serde_json::json;

const EVENT_KINDS: u64 = 37;

/// The vocabulary grows with the number of subscriptions (about ten subscriptions per
/// publishing organisation), so an event matches a similar handful of subscriptions at every
/// size and the numbers show the cost of finding them.
fn organisations(subscriptions: u64) -> u64 {
    (subscriptions / 10).max(1)
}

/// A small deterministic generator (no `rand` dependency).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn subscription(i: u64, organisations: u64, rng: &mut Lcg) -> Criteria {
    let org = rng.next() % organisations;
    let kind = rng.next() % EVENT_KINDS;
    let ty = format!("nl.org{org}.event{kind}");
    let filter =
        |value: serde_json::Value| Filter::from_json(&value, "f", &Limits::DEFAULT).unwrap();
    match i % 20 {
        0..=7 => Criteria {
            types: Some(vec![ty]),
            ..Criteria::default()
        },
        8..=11 => Criteria {
            filters: vec![filter(json!({"prefix": {"type": format!("nl.org{org}.")}}))],
            ..Criteria::default()
        },
        12..=13 => Criteria {
            filters: vec![filter(
                json!({"suffix": {"subject": format!("-{}", rng.next() % organisations)}}),
            )],
            ..Criteria::default()
        },
        14..=16 => {
            Criteria {
                filters: vec![Filter::Sql(
                Expression::compile(&format!(
                    "type = '{ty}' AND subject LIKE '{}%' AND (EXISTS region OR sequence > 10)",
                    rng.next() % 10
                ), &Limits::DEFAULT)
                .unwrap(),
            )],
                ..Criteria::default()
            }
        }
        17..=18 => Criteria {
            source: Some(format!("urn:nld:oin:{org}:systeem:app")),
            filters: vec![filter(
                json!({"all": [{"exact": {"region": "noord"}}, {"not": {"exact": {"subject": "x"}}}]}),
            )],
            ..Criteria::default()
        },
        _ => Criteria {
            filters: vec![filter(json!({"any": [
                {"exact": {"type": ty}},
                {"prefix": {"source": format!("urn:nld:oin:{org}:")}}
            ]}))],
            ..Criteria::default()
        },
    }
}

fn events(organisations: u64, rng: &mut Lcg) -> Vec<Event> {
    (0..64)
        .map(|i| {
            let org = rng.next() % organisations;
            EventBuilder::new(
                i.to_string(),
                format!("urn:nld:oin:{org}:systeem:app"),
                format!("nl.org{org}.event{}", rng.next() % EVENT_KINDS),
            )
            .subject(format!(
                "{}-{}",
                rng.next() % 100_000,
                rng.next() % organisations
            ))
            .extension("region", "noord")
            .extension("sequence", "42")
            .build()
            .unwrap()
        })
        .collect()
}

fn matching(c: &mut Criterion) {
    let mut group = c.benchmark_group("route one event");
    group
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    for count in [10u64, 1_000, 100_000] {
        let mut rng = Lcg(7);
        let mut index = MatchIndex::new();
        let organisations = organisations(count);
        for i in 0..count {
            index.insert(i, subscription(i, organisations, &mut rng));
        }
        let events = events(organisations, &mut rng);
        let matches: usize = events.iter().map(|e| index.matching(e).len()).sum();
        eprintln!(
            "{count} subscriptions: {:.1} matches per event, {} in the residue",
            matches as f64 / events.len() as f64,
            index.residue_len()
        );
        let mut next = events.iter().cycle();
        group.bench_with_input(BenchmarkId::new("index", count), &count, |b, _| {
            b.iter(|| black_box(index.matching(next.next().unwrap())))
        });
        if count <= 1_000 {
            group.bench_with_input(BenchmarkId::new("full scan", count), &count, |b, _| {
                b.iter(|| black_box(index.matching_by_scan(next.next().unwrap())))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, matching);
criterion_main!(benches);
