//! What evaluating a hostile filter against a large event may cost: every evaluation runs
//! under a [`Meter`], so its work and the memory it allocates are bounded whatever the
//! filter and the event. Memory is held to a bound by a counting allocator (this test
//! binary's own), work with the meter's units, never with a clock.

use std::alloc::System;
use std::sync::Mutex;

use cap::Cap;
use knooppunt_event::{Event, EventBuilder};
use knooppunt_filter::cesql::{ErrorKind, Expression, LikePattern};
use knooppunt_filter::{Criteria, EvalLimits, Filter, Limits, MatchIndex, Meter};
use proptest::prelude::*;

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// The tests that hold memory to a bound run one at a time (the allocator is the process's).
static MEASURING: Mutex<()> = Mutex::new(());

/// Runs `work` with at most `bound` bytes more allocated at once than before it: past that
/// an allocation fails and the test process aborts, which fails the test loudly.
fn within_memory<T>(bound: usize, work: impl FnOnce() -> T) -> T {
    let _one = MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    ALLOCATOR
        .set_limit(ALLOCATOR.allocated() + bound)
        .expect("a limit above what is allocated");
    let result = work();
    ALLOCATOR.set_limit(usize::MAX).expect("no limit");
    result
}

fn event_with_subject(subject: &str) -> Event {
    EventBuilder::new("1", "urn:nld:test", "nl.test.created")
        .subject(subject)
        .build()
        .unwrap()
}

fn sql(text: &str) -> Criteria {
    Criteria {
        filters: vec![Filter::Sql(
            Expression::compile(text, &Limits::CEILING).unwrap(),
        )],
        ..Criteria::default()
    }
}

const MIB: usize = 1024 * 1024;

#[test]
fn like_is_linear_in_the_value() {
    // The probe's case: `%` + 4,000 `a` + `b` against 300 KB of `a`: quadratic backtracking
    // took seconds; a linear matcher scans the value about once.
    let pattern = LikePattern::new(&format!("%{}b", "a".repeat(4_000)));
    let subject = "a".repeat(300_000);
    assert!(!pattern.matches(&subject));
    assert!(pattern.matches(&format!("{subject}b")));
    assert!(pattern.cost(subject.len()) < 400_000);
    let criteria = sql(&format!("subject LIKE '%{}b'", "a".repeat(4_000)));
    let mut meter = Meter::new(EvalLimits::DEFAULT);
    assert!(!criteria.matches_metered(&event_with_subject(&subject), &mut meter));
    assert!(!meter.exceeded(), "well within the default budget");
    assert!(meter.spent() < 1_000_000, "{}", meter.spent());

    // With `_`, the bit-parallel search: still one pass per 64 pattern characters.
    let wild = LikePattern::new(&format!("%{}_b%", "a".repeat(200)));
    assert!(!wild.matches(&subject));
    assert!(wild.matches(&format!("{subject}xb")));
}

#[test]
fn concat_of_a_large_attribute_is_stopped_by_the_budget_and_bounded_in_memory() {
    // The probe's case: CONCAT over a 1 MB subject 450 times took 13 s and 4 GB.
    let criteria = sql(&format!(
        "CONCAT({}) = 'x'",
        vec!["subject"; 450].join(", ")
    ));
    let event = event_with_subject(&"s".repeat(MIB));
    let mut meter = Meter::new(EvalLimits::DEFAULT);
    // The budget is 4 Mi units, one per byte copied: a few copies of the subject at most.
    let matched = within_memory(16 * MIB, || criteria.matches_metered(&event, &mut meter));
    assert!(!matched);
    assert!(meter.exceeded(), "the evaluation ran out of its budget");
}

#[test]
fn intermediate_strings_are_bounded() {
    let limits = EvalLimits {
        max_units: u64::MAX,
        max_string_bytes: 1_000,
        max_units_per_tenant: 0,
        max_units_per_event: 0,
    };
    let expression =
        Expression::compile("CONCAT(subject, subject, subject)", &Limits::DEFAULT).unwrap();
    let event = event_with_subject(&"x".repeat(400));
    let evaluation = expression.evaluate_metered(&event, &mut Meter::new(limits));
    let error = evaluation.error.expect("too long");
    assert_eq!(error.kind, ErrorKind::FunctionEvaluation);
    assert!(error.message.contains("1200 bytes"), "{}", error.message);
    assert!(error.message.contains("limit is 1000"), "{}", error.message);
    // Within the bound it is made.
    let event = event_with_subject(&"x".repeat(300));
    let evaluation = expression.evaluate_metered(&event, &mut Meter::new(limits));
    assert_eq!(evaluation.error, None);
}

#[test]
fn an_exhausted_budget_never_matches_not_even_under_not() {
    let tiny = EvalLimits {
        max_units: 50,
        max_string_bytes: MIB,
        max_units_per_tenant: 0,
        max_units_per_event: 0,
    };
    let event = event_with_subject(&"x".repeat(100));
    for text in [
        "NOT (subject = 'y')",
        "subject LIKE '%x'",
        "LENGTH(subject) > 0",
    ] {
        let criteria = sql(text);
        assert!(
            criteria.matches(&event),
            "{text} matches with the default budget"
        );
        let mut meter = Meter::new(tiny);
        assert!(!criteria.matches_metered(&event, &mut meter), "{text}");
        assert!(meter.exceeded(), "{text}");
    }
    let not = Criteria {
        filters: vec![Filter::Not(Box::new(Filter::Sql(
            Expression::compile("subject = 'y'", &Limits::DEFAULT).unwrap(),
        )))],
        ..Criteria::default()
    };
    assert!(not.matches(&event));
    let mut meter = Meter::new(tiny);
    assert!(
        !not.matches_metered(&event, &mut meter),
        "NOT of a spent filter"
    );
    assert!(meter.exceeded());
}

/// Pieces of CESQL that cost: attributes, string functions, LIKE with wildcards.
fn piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "subject",
        "subject",
        "type",
        "CONCAT(",
        "CONCAT_WS(",
        "UPPER(",
        "LOWER(",
        "SUBSTRING(",
        "LEFT(",
        "LENGTH(",
        ", ",
        ", ",
        ")",
        ")",
        ")",
        " LIKE '%a%b_c%'",
        " LIKE '%aaaaaaaa_'",
        " = ",
        " IN (",
        " AND ",
        " OR ",
        "NOT ",
        "'abc'",
        "1",
        "1000",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Random costly filters against an event with a 256 KiB subject: whatever parses is
    /// evaluated within its budget of work and within a bounded amount of memory.
    #[test]
    fn random_filters_on_large_events_stay_within_their_budget(
        pieces in prop::collection::vec(piece(), 1..60),
        fill in prop::sample::select(vec!['a', 'b', 'c', 'é']),
    ) {
        let text: String = pieces.concat();
        let Ok(expression) = Expression::compile(&text, &Limits::CEILING) else {
            return Ok(());
        };
        let criteria = Criteria {
            filters: vec![Filter::Sql(expression)],
            ..Criteria::default()
        };
        let event = event_with_subject(&fill.to_string().repeat(128 * 1024));
        let limits = EvalLimits {
            max_units: 2_000_000,
            max_string_bytes: MIB,
            max_units_per_tenant: 0,
            max_units_per_event: 0,
        };
        let mut meter = Meter::new(limits);
        // Every byte allocated was charged first, so memory stays within a few budgets
        // (case mapping and `Vec<char>` in SUBSTRING allocate up to four bytes per byte).
        within_memory(32 * MIB, || criteria.matches_metered(&event, &mut meter));
        prop_assert!(meter.spent() <= limits.max_units || meter.exceeded());
    }
}

/// One tenant's subscriptions share a budget per event: past it, that tenant's other
/// candidates are not evaluated and do not match, while another tenant's are evaluated as
/// ever, whatever the first tenant's filters cost.
#[test]
fn a_tenants_subscriptions_share_one_budget_per_event() {
    let mut index = MatchIndex::new();
    let costly = "subject LIKE '%y%z%'";
    for n in 0..100 {
        index.insert_for(format!("a-{n}"), sql(costly), 1);
    }
    index.insert_for("b".to_owned(), sql("subject LIKE '%x'"), 2);
    let event = event_with_subject(&"x".repeat(100_000));
    let limits = EvalLimits {
        max_units: 4_000_000,
        max_string_bytes: MIB,
        max_units_per_tenant: 2_000_000,
        max_units_per_event: 0,
    };
    let routed = index.matching_metered(&event, limits, u64::MAX);
    assert_eq!(
        routed.matched,
        ["b"],
        "the other tenant's subscription matches"
    );
    let evaluated = 100 - routed.over_budget.len();
    assert!(
        (1..=25).contains(&evaluated),
        "{evaluated} of tenant 1's subscriptions were evaluated"
    );
    assert!(
        routed.spent < 2_000_000 + 400_000,
        "the work is bounded by the tenants' budgets: {}",
        routed.spent
    );
    // Without the bound, every one is evaluated.
    let unbounded = EvalLimits {
        max_units_per_tenant: 0,
        ..limits
    };
    let routed = index.matching_metered(&event, unbounded, u64::MAX);
    assert!(routed.over_budget.is_empty());
    assert!(routed.spent > 100 * 100_000);
    // The part left for later (past the allowance) keeps to the same bound.
    let mut routed = index.matching_metered(&event, limits, 0);
    assert!(!routed.rest.is_empty());
    routed.evaluate_rest(&event, limits);
    assert_eq!(routed.matched, ["b"]);
    assert!(
        routed.over_budget.len() >= 75,
        "{}",
        routed.over_budget.len()
    );
}

/// The event's budget is shared among the tenants with candidates: the routing of one
/// event costs at most `max_units_per_event` however many tenants have costly filters for
/// it, every tenant gets at least an equal share (so a tenant's one filter is evaluated
/// whatever the others have), and what a tenant leaves goes to the others. Those past it
/// are told apart from those past their tenant's own budget.
#[test]
fn the_events_budget_is_shared_fairly_among_tenants() {
    use knooppunt_filter::Exceeded;
    let mut index = MatchIndex::new();
    let costly = "subject LIKE '%y%z%'";
    // Six costly tenants with 20 subscriptions each, and one with a single filter.
    for tenant in 1..=6u32 {
        for n in 0..20 {
            index.insert_for(format!("t{tenant}-{n}"), sql(costly), tenant);
        }
    }
    index.insert_for("one".to_owned(), sql("subject LIKE '%x%z%'"), 7);
    let event = event_with_subject(&"x".repeat(100_000));
    let limits = EvalLimits {
        max_units: 4_000_000,
        max_string_bytes: MIB,
        max_units_per_tenant: 2_000_000,
        max_units_per_event: 3_500_000,
    };
    let routed = index.matching_metered(&event, limits, u64::MAX);
    let candidates = 6 * 20 + 1;
    assert!(
        routed.spent <= 3_500_000 + 7 * 300_000 + candidates * knooppunt_filter::CANDIDATE_UNITS,
        "the event's routing is bounded, not 6 × the tenant's budget: {}",
        routed.spent
    );
    let over = |id: &str| {
        routed
            .over_budget
            .iter()
            .find(|(over, _)| over == id)
            .map(|(_, why)| *why)
    };
    assert_eq!(
        over("one"),
        None,
        "the tenant with one filter had its share and its filter was evaluated"
    );
    for tenant in 1..=6 {
        let evaluated = (0..20)
            .filter(|n| over(&format!("t{tenant}-{n}")).is_none())
            .count();
        assert!(
            evaluated >= 1,
            "tenant {tenant} had a share: {evaluated} evaluated"
        );
    }
    assert!(
        routed
            .over_budget
            .iter()
            .any(|(_, why)| *why == Exceeded::Event),
        "past the event's budget, and said so: {:?}",
        routed.over_budget
    );
    assert!(
        routed
            .over_budget
            .iter()
            .all(|(_, why)| *why != Exceeded::Tenant),
        "the share, not the tenant's own budget, ran out"
    );
    // With a large budget for the event, the tenants' own budgets bind.
    let roomy = EvalLimits {
        max_units_per_event: 100_000_000,
        ..limits
    };
    let routed = index.matching_metered(&event, roomy, u64::MAX);
    assert!(
        routed
            .over_budget
            .iter()
            .all(|(_, why)| *why == Exceeded::Tenant)
    );
    // What a tenant leaves goes to the others: with two tenants, the one with a single
    // cheap filter leaves nearly all of its half to the other.
    let mut two = MatchIndex::new();
    two.insert_for("cheap".to_owned(), sql("subject = 'nope'"), 1);
    for n in 0..20 {
        two.insert_for(format!("costly-{n}"), sql(costly), 2);
    }
    let limits = EvalLimits {
        max_units_per_tenant: 0,
        max_units_per_event: 2_000_000,
        ..limits
    };
    let routed = two.matching_metered(&event, limits, u64::MAX);
    let evaluated = 20 - routed.over_budget.len();
    let mut alone = MatchIndex::new();
    for n in 0..20 {
        alone.insert_for(format!("costly-{n}"), sql(costly), 2);
    }
    let half = EvalLimits {
        max_units_per_event: 1_000_000,
        ..limits
    };
    let in_half = 20
        - alone
            .matching_metered(&event, half, u64::MAX)
            .over_budget
            .len();
    assert!(
        evaluated > in_half,
        "more than an equal half would allow ({in_half}): {evaluated} of 20 costly filters evaluated"
    );
    // The part left for later (past the allowance) keeps to the same shares.
    let mut later = two.matching_metered(&event, limits, 0);
    later.evaluate_rest(&event, limits);
    assert_eq!(later.over_budget.len(), routed.over_budget.len());
}
