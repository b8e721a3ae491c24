//! The command line, run as a newcomer would.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn knooppunt(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_knooppunt"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

const NL_EVENT: &str = r#"{"specversion":"1.0","id":"1",
    "source":"urn:nld:oin:00000001823288444000:systeem:BRP","type":"nl.brp.persoon-verhuisd"}"#;

#[test]
fn check_accepts_a_valid_event() {
    let output = knooppunt(&["check", "-"], NL_EVENT);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout(&output).contains("-: valid"), "{}", stdout(&output));
}

#[test]
fn check_lists_every_problem_and_fails() {
    let output = knooppunt(
        &["check", "-"],
        r#"{"specversion":"1.0","id":"","type":"t","time":"now"}"#,
    );
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.contains("INVALID"), "{text}");
    assert!(text.contains("[core.required] `source`"), "{text}");
    assert!(text.contains("[core.non-empty] `id`"), "{text}");
    assert!(text.contains("[core.timestamp] `time`"), "{text}");
}

#[test]
fn check_applies_the_profile_level() {
    let event = r#"{"specversion":"1.0","id":"1","source":"/s","type":"PersonMoved"}"#;
    let warn = knooppunt(&["check", "--profile", "warn", "-"], event);
    assert!(warn.status.success());
    assert!(
        stdout(&warn).contains("warning [nlgov.type.reverse-domain]"),
        "{}",
        stdout(&warn)
    );
    let enforce = knooppunt(&["check", "--profile", "enforce", "-"], event);
    assert_eq!(enforce.status.code(), Some(1));
    assert!(stdout(&enforce).contains("error [nlgov.type.reverse-domain]"));
}

#[test]
fn check_reports_batches_by_index() {
    let batch = format!(r#"[{NL_EVENT}, {{"id":"2"}}]"#);
    let output = knooppunt(&["check", "-"], &batch);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.contains("-[0]: valid"), "{text}");
    assert!(text.contains("-[1]: INVALID"), "{text}");
    assert!(text.contains("2 events checked"), "{text}");
}

#[test]
fn bad_configuration_stops_with_the_key_named() {
    let dir = std::env::temp_dir().join(format!("knooppunt-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(&path, "[validation]\nprofile = \"strict\"\n").unwrap();
    let output = knooppunt(
        &["check", "--config", path.to_str().unwrap(), "-"],
        NL_EVENT,
    );
    assert_eq!(output.status.code(), Some(2));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(
        error.contains("profile") && error.contains("strict"),
        "{error}"
    );
}

#[test]
fn serve_says_plainly_that_the_hub_is_not_built_yet() {
    let output = knooppunt(&["serve", "--config", "../../config/knooppunt.toml"], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("the hub is not built yet"));
}

#[test]
fn help_explains_the_commands() {
    let output = knooppunt(&["--help"], "");
    let text = stdout(&output);
    assert!(text.contains("CloudEvents"), "{text}");
    assert!(text.contains("check"), "{text}");
}
