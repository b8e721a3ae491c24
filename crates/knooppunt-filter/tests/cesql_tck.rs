//! The CESQL TCK (`specs/cloudevents/cesql/tck/*.yaml`), every case of every file.

use std::path::PathBuf;

use knooppunt_event::Event;
use knooppunt_event::format::json;
use knooppunt_filter::cesql::{ErrorKind, Expression, Value};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Suite {
    name: String,
    tests: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Case {
    name: String,
    expression: String,
    result: Option<serde_yaml::Value>,
    error: Option<String>,
    event: Option<serde_json::Value>,
    event_overrides: Option<serde_json::Map<String, serde_json::Value>>,
}

fn tck_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../specs/cloudevents/cesql/tck");
    assert!(
        dir.is_dir(),
        "the CESQL TCK is expected at {}",
        dir.display()
    );
    dir
}

fn event(case: &Case) -> Event {
    let mut object = match &case.event {
        Some(serde_json::Value::Object(object)) => object.clone(),
        Some(other) => panic!("{}: event is not an object: {other}", case.name),
        None => serde_json::json!({
            "specversion": "1.0",
            "id": "myId",
            "source": "localhost.localdomain",
            "type": "myType"
        })
        .as_object()
        .unwrap()
        .clone(),
    };
    for (name, value) in case.event_overrides.clone().unwrap_or_default() {
        object.insert(name, value);
    }
    let text = serde_json::Value::Object(object).to_string();
    json::decode_event(text.as_bytes())
        .unwrap_or_else(|e| panic!("{}: the TCK event is invalid: {e}", case.name))
        .event
}

fn expected_value(result: &serde_yaml::Value) -> Value {
    match result {
        serde_yaml::Value::Bool(b) => Value::Boolean(*b),
        serde_yaml::Value::Number(n) => Value::Integer(n.as_i64().unwrap().try_into().unwrap()),
        serde_yaml::Value::String(s) => Value::String(s.clone()),
        other => panic!("unexpected result {other:?}"),
    }
}

fn error_kind(name: &str) -> ErrorKind {
    match name {
        "parse" => ErrorKind::Parse,
        "math" => ErrorKind::Math,
        "cast" => ErrorKind::Cast,
        "missingAttribute" => ErrorKind::MissingAttribute,
        "missingFunction" => ErrorKind::MissingFunction,
        "functionEvaluation" => ErrorKind::FunctionEvaluation,
        "generic" => ErrorKind::Generic,
        other => panic!("unknown TCK error {other}"),
    }
}

/// Runs one case; returns a description of the failure.
fn run(case: &Case) -> Result<(), String> {
    let expected_error = case.error.as_deref().map(error_kind);
    let expression = match Expression::parse(&case.expression) {
        Ok(expression) => expression,
        Err(error) if expected_error == Some(ErrorKind::Parse) => {
            assert!(!error.message.is_empty());
            return Ok(());
        }
        Err(error) => return Err(format!("parse error: {error}")),
    };
    if expected_error == Some(ErrorKind::Parse) {
        return Err("expected a parse error".into());
    }
    let evaluation = expression.evaluate(&event(case));
    if let Some(result) = &case.result {
        let expected = expected_value(result);
        if evaluation.value != expected {
            return Err(format!("got {:?}, expected {expected:?}", evaluation.value));
        }
    }
    let got_error = evaluation.error.as_ref().map(|e| e.kind);
    if got_error != expected_error {
        return Err(format!(
            "error {:?} ({:?}), expected {expected_error:?}",
            got_error,
            evaluation.error.map(|e| e.message)
        ));
    }
    Ok(())
}

#[test]
fn every_tck_case_passes() {
    let mut files: Vec<_> = std::fs::read_dir(tck_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    // Exactly the TCK in specs/: a file or case that goes missing must fail here.
    assert_eq!(files.len(), 18, "the TCK's files: {files:?}");
    let mut failures = Vec::new();
    let mut count = 0;
    for file in files {
        let suite: Suite = serde_yaml::from_str(&std::fs::read_to_string(&file).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for case in &suite.tests {
            count += 1;
            if let Err(why) = run(case) {
                failures.push(format!(
                    "{} / {}: `{}`: {why}",
                    suite.name, case.name, case.expression
                ));
            }
        }
    }
    assert_eq!(count, 275, "the TCK's cases");
    assert!(
        failures.is_empty(),
        "{} of {count} TCK cases fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
