//! The OpenAPI document: served without authentication with CORS `*`, and clean under the
//! Dutch API Design Rules' Spectral ruleset (`specs/api-design-rules/linter.yaml`).

use std::path::PathBuf;
use std::process::Command;

use knooppunt_tests::{Answer, TestHub, specs_dir, tools};

/// The Spectral CLI, installed from the npm registry into `target/tools` on first use.
fn spectral() -> PathBuf {
    tools::npm("spectral", "@stoplight/spectral-cli@6").join("node_modules/.bin/spectral")
}

#[tokio::test]
async fn the_document_is_public_and_lints_clean_with_the_adr_ruleset() {
    let hub = TestHub::start().await;
    let answer = Answer::from(
        hub.client
            .get(hub.url("/v1/openapi.json"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("access-control-allow-origin"), Some("*"));
    assert_eq!(answer.header("api-version"), Some("1.0.0"));
    assert_eq!(answer.body["info"]["version"], "1.0.0");
    assert!(answer.body["paths"]["/events"]["post"]["responses"]["202"].is_object());
    assert_eq!(
        answer.body["components"]["schemas"]["Config"]["properties"]["ttl"]["default"], "PT24H",
        "the config keys are documented from the code"
    );

    let dir = tempfile::tempdir().unwrap();
    let document = dir.path().join("openapi.json");
    std::fs::write(
        &document,
        serde_json::to_string_pretty(&answer.body).unwrap(),
    )
    .unwrap();
    let output = Command::new(spectral())
        .arg("lint")
        .arg("--ruleset")
        .arg(specs_dir().join("api-design-rules/linter.yaml"))
        .arg("--fail-severity")
        .arg("error")
        .arg(&document)
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{report}");
    assert!(
        output.status.success(),
        "the ADR lint found errors:\n{report}"
    );
    assert!(!report.contains(" error "), "{report}");
}
