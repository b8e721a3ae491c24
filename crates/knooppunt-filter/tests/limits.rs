//! Hostile filters: depth, size and length are bounded while a filter is read, so nothing
//! that walks it later (evaluation, the index, dropping it) can exhaust a thread's stack.
//! Parsing and evaluation run on threads with a small stack to prove it.

use knooppunt_event::{Event, EventBuilder};
use knooppunt_filter::cesql::Expression;
use knooppunt_filter::{Criteria, Filter, Limits, MatchIndex};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Half a Tokio worker's default stack (2 MiB), enough for the deepest allowed filter even in
/// a debug build.
const SMALL_STACK: usize = 1024 * 1024;

fn on_small_stack<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(work)
        .unwrap()
        .join()
        .expect("the work must not overflow a small stack")
}

/// The default depth and node limits, with room for long hostile texts.
const LONG_TEXTS: Limits = Limits {
    max_sql_length: Limits::CEILING.max_sql_length,
    ..Limits::DEFAULT
};

fn event() -> Event {
    EventBuilder::new("1", "urn:nld:test", "nl.test.created")
        .subject("zaak/1")
        .build()
        .unwrap()
}

fn nested_parentheses(depth: usize) -> String {
    format!("{}TRUE{}", "(".repeat(depth), ")".repeat(depth))
}

fn nested_not(depth: usize) -> String {
    format!("{}TRUE", "NOT ".repeat(depth))
}

fn and_chain(terms: usize) -> String {
    vec!["TRUE"; terms].join(" AND ")
}

#[test]
fn deep_parentheses_are_refused_with_the_limit_named() {
    let error = on_small_stack(|| {
        Expression::compile(&nested_parentheses(5_000), &LONG_TEXTS).unwrap_err()
    });
    assert!(error.message.contains("max_depth"), "{error}");
    assert!(error.message.contains("32 levels"), "{error}");
}

#[test]
fn deep_unary_operators_and_like_postfixes_are_refused() {
    for text in [
        nested_not(5_000),
        format!("{}1", "- ".repeat(5_000)),
        format!("subject{}", " LIKE 'a%'".repeat(200)),
        format!("{}1{}", "ABS(".repeat(500), ")".repeat(500)),
    ] {
        let error = on_small_stack(move || Expression::compile(&text, &LONG_TEXTS).unwrap_err());
        assert!(error.message.contains("max_depth"), "{error}");
    }
}

#[test]
fn a_long_flat_chain_is_refused_by_size_not_depth() {
    let error = on_small_stack(|| Expression::compile(&and_chain(7_000), &LONG_TEXTS).unwrap_err());
    assert!(error.message.contains("max_nodes"), "{error}");
    assert!(error.message.contains("1000"), "{error}");
}

#[test]
fn the_longest_allowed_chain_evaluates_without_recursing_along_it() {
    let limits = Limits::CEILING;
    // 4,000 terms and 3,999 operators: within 10,000 nodes, and in 65,536 characters.
    let matched = on_small_stack(move || {
        let expression = Expression::compile(&and_chain(4_000), &limits).unwrap();
        let or_chain = Expression::compile(&vec!["FALSE"; 4_000].join(" OR "), &limits).unwrap();
        let sum = Expression::compile(&vec!["1"; 4_000].join(" + "), &limits).unwrap();
        let event = event();
        (
            expression.matches(&event),
            or_chain.matches(&event),
            sum.evaluate(&event).value.to_string(),
        )
    });
    assert_eq!(matched, (true, false, "4000".to_owned()));
}

#[test]
fn the_deepest_allowed_expression_parses_evaluates_and_is_indexed() {
    let limits = Limits::CEILING;
    on_small_stack(move || {
        for text in [
            nested_not(limits.max_depth - 1),
            nested_parentheses(limits.max_depth - 1),
        ] {
            let expression = Expression::compile(&text, &limits).unwrap();
            expression.evaluate(&event());
            let mut index = MatchIndex::new();
            index.insert(
                1,
                Criteria {
                    filters: vec![Filter::Sql(expression)],
                    ..Criteria::default()
                },
            );
            index.matching(&event());
        }
        let too_deep = nested_not(limits.max_depth + 1);
        assert!(Expression::compile(&too_deep, &limits).is_err());
    });
}

#[test]
fn the_length_is_limited() {
    let limits = Limits::try_new(32, 1_000, 100).unwrap();
    let text = format!("subject = '{}'", "x".repeat(100));
    let error = Expression::compile(&text, &limits).unwrap_err();
    assert!(error.message.contains("max_sql_length"), "{error}");
    assert!(error.message.contains("100 characters"), "{error}");
}

fn nested_dialect(depth: usize) -> Value {
    let mut value = json!({"exact": {"type": "nl.test.created"}});
    for i in 0..depth {
        value = if i % 2 == 0 {
            json!({"not": value})
        } else {
            json!({"all": [value]})
        };
    }
    value
}

#[test]
fn dialect_nesting_is_limited() {
    let limits = Limits::DEFAULT;
    let ok = Filter::from_json(&nested_dialect(limits.max_depth - 1), "filters[0]", &limits);
    assert!(ok.is_ok(), "{ok:?}");
    let errors =
        Filter::from_json(&nested_dialect(limits.max_depth), "filters[0]", &limits).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].message.contains("max_depth"), "{errors:?}");
}

#[test]
fn the_node_limit_covers_all_filters_of_a_subscription() {
    let limits = Limits::try_new(32, 10, 4_096).unwrap();
    // 3 filters of 3 nodes (the sql dialect and `a = 'b'`'s chain and two operands): 12.
    let filters = vec![json!({"sql": "type = 'x'"}); 3];
    let errors = Filter::list_from_json(&filters, "filters", &limits).unwrap_err();
    assert_eq!(errors.len(), 1, "one error, not one per filter: {errors:?}");
    assert_eq!(errors[0].path, "filters[2].sql");
    assert!(errors[0].message.contains("max_nodes"), "{errors:?}");
    assert!(Filter::list_from_json(&filters[..2], "filters", &limits).is_ok());
}

#[test]
fn limits_are_checked_against_their_ceiling() {
    assert!(Limits::try_new(0, 1, 1).is_err());
    let error = Limits::try_new(129, 1, 1).unwrap_err();
    assert_eq!(
        error.to_string(),
        "max_depth must be from 1 to 128, not 129"
    );
    assert!(Limits::try_new(1, 10_001, 1).is_err());
    assert!(Limits::try_new(1, 1, 65_537).is_err());
    assert_eq!(Limits::try_new(32, 1_000, 4_096).unwrap(), Limits::DEFAULT);
}

/// Pieces of CESQL, hostile ones included, to glue into random expressions.
fn piece() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "(",
        ")",
        "(",
        ")",
        "NOT ",
        "-",
        "+",
        " AND ",
        " OR ",
        " XOR ",
        " = ",
        " != ",
        " < ",
        " >= ",
        " + ",
        " - ",
        " * ",
        " / ",
        " % ",
        "TRUE",
        "FALSE",
        "1",
        "0",
        "2147483647",
        "-2147483648",
        "'a'",
        "'%b_'",
        "subject",
        "type",
        "missing",
        "EXISTS ",
        " LIKE ",
        " NOT LIKE ",
        " IN ",
        " NOT IN ",
        ",",
        "ABS(",
        "LENGTH(",
        "CONCAT(",
        "SUBSTRING(",
        "UNKNOWN(",
        "'",
        "\"",
        "\\",
        "ü",
        " ",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Random pieces: parsing never panics, and what parses evaluates without panicking.
    #[test]
    fn random_expressions_never_panic(pieces in prop::collection::vec(piece(), 0..120)) {
        let text: String = pieces.concat();
        on_small_stack(move || {
            if let Ok(expression) = Expression::parse(&text) {
                expression.evaluate(&event());
            }
            let _ = Expression::compile(&text, &Limits::DEFAULT);
        });
    }

    /// Nested to a random depth with random operators: accepted exactly when within the limit.
    #[test]
    fn depth_is_accepted_exactly_within_the_limit(
        wrappers in prop::collection::vec(
            prop::sample::select(vec![("NOT ", ""), ("- ", ""), ("ABS(", ")"), ("LENGTH(", ")")]),
            0..60,
        ),
    ) {
        let mut text = "TRUE".to_owned();
        for (open, close) in &wrappers {
            text = format!("{open}{text}{close}");
        }
        let depth = wrappers.len() + 1;
        let parsed = Expression::compile(&text, &Limits::DEFAULT);
        prop_assert_eq!(parsed.is_ok(), depth <= Limits::DEFAULT.max_depth, "{}: {:?}", text, parsed);
    }
}

#[test]
fn a_keyword_before_a_parenthesis_is_not_a_function_call() {
    let expression = Expression::compile("NOT (TRUE) OR NOT(FALSE AND TRUE)", &Limits::DEFAULT);
    assert!(expression.unwrap().matches(&event()));
}
