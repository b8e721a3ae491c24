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
    say!("{total} {noun} checked at profile level `{level}`: {invalid} invalid");
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
    say!("{label}: {}", if valid { "valid" } else { "INVALID" });
    for finding in findings {
        let severity = match finding.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        say!("  {severity} [{}] {finding}", finding.rule.code());
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

/// `knooppunt check --health URL`: whether the hub at `url` answers its `/healthz` (or the
/// URL's own path) with 200 within [`HEALTH_TIMEOUT`]; says what it found either way.
pub(crate) fn health(url: &str) -> ExitCode {
    match ask_health(url) {
        Ok(said) => {
            say!("healthy: {said}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            tell!("knooppunt: unhealthy: {why:#}");
            ExitCode::from(1)
        }
    }
}

/// How long the health check waits for the whole answer.
const HEALTH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

fn ask_health(url: &str) -> anyhow::Result<String> {
    let mut url = reqwest::Url::parse(url).with_context(|| {
        format!("`{url}` is not a URL: give the hub's, such as http://127.0.0.1:8080")
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        anyhow::bail!("`{url}` is not an http or https URL");
    }
    if url.path() == "/" {
        url.set_path("/healthz");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(HEALTH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .context("cannot make an HTTP client")?;
        let response = client
            .get(url.clone())
            .send()
            .await
            .map_err(|error| anyhow::anyhow!("{url} did not answer: {}", cause(&error)))?;
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        let body: String = body.trim().chars().take(300).collect();
        if status != reqwest::StatusCode::OK {
            anyhow::bail!("{url} answered {status}: {body}");
        }
        Ok(format!("{url} answered {status}"))
    })
}

/// The innermost cause of a request's failure (connection refused, timed out, …): what an
/// operator acts on (the outer ones repeat the URL).
pub(crate) fn cause(error: &(dyn std::error::Error + 'static)) -> String {
    let Some(mut innermost) = error.source() else {
        return error.to_string();
    };
    while let Some(source) = innermost.source() {
        innermost = source;
    }
    innermost.to_string()
}
