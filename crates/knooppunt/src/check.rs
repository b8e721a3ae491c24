//! `knooppunt check`: validate event files and report every finding.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use knooppunt_event::format::json;
use knooppunt_event::validate;
use knooppunt_event::{ProfileLevel, ReceivedEvent, Severity, Violation, Violations};

pub(crate) fn run(files: &[PathBuf], level: ProfileLevel) -> anyhow::Result<ExitCode> {
    let mut invalid = 0;
    let mut total = 0;
    for file in files {
        let bytes = read(file)?;
        let name = file.display().to_string();
        let is_batch = bytes
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|b| *b == b'[');
        let results = if is_batch {
            match json::decode_batch(&bytes) {
                Ok(results) => results,
                Err(violations) => vec![Err(violations)],
            }
        } else {
            vec![json::decode_event(&bytes)]
        };
        for (index, result) in results.into_iter().enumerate() {
            total += 1;
            let label = if is_batch {
                format!("{name}[{index}]")
            } else {
                name.clone()
            };
            if !report(&label, result, level) {
                invalid += 1;
            }
        }
    }
    let noun = if total == 1 { "event" } else { "events" };
    println!("{total} {noun} checked at profile level `{level}`: {invalid} invalid");
    Ok(if invalid == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Prints the findings for one event; returns whether it is acceptable.
fn report(label: &str, result: Result<ReceivedEvent, Violations>, level: ProfileLevel) -> bool {
    let findings: Vec<Violation> = match &result {
        Ok(received) => validate::findings(&received.event, level),
        Err(violations) => violations.as_slice().to_vec(),
    };
    let valid = findings.iter().all(|f| f.severity != Severity::Error);
    println!("{label}: {}", if valid { "valid" } else { "INVALID" });
    for finding in findings {
        let severity = match finding.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        println!("  {severity} [{}] {finding}", finding.rule.code());
    }
    valid
}

fn read(file: &PathBuf) -> anyhow::Result<Vec<u8>> {
    if file.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("cannot read standard input")?;
        return Ok(bytes);
    }
    std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))
}
