//! The command line, run as a newcomer would.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output, Stdio};

fn knooppunt(args: &[&str], stdin: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_knooppunt"));
    command.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    run_with_stdin(command, stdin)
}

/// Runs a command that must end by itself; one still running after 60 s is killed (and so
/// fails the test) rather than hanging the suite.
fn run_with_stdin(mut command: Command, stdin: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let pid = child.id().to_string();
    let watchdog = std::thread::spawn(move || {
        if finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .is_err()
        {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
    });
    // A child that exits before reading its input (a bad configuration, say) closes the pipe.
    if let Err(error) = child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    let output = child.wait_with_output().unwrap();
    let _ = done.send(());
    watchdog.join().unwrap();
    output
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
fn serve_runs_the_hub_until_sigterm() {
    let data = tempfile::tempdir().unwrap();
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/knooppunt.toml");
    let hub = common::HubProcess::start(&config, data.path());
    let mut stream = TcpStream::connect(&hub.address).unwrap();
    stream
        .write_all(b"GET /v1/openapi.json HTTP/1.1\r\nHost: hub\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.to_ascii_lowercase().contains("api-version: 1.0.0"));
    assert!(hub.terminate().success(), "SIGTERM stops the hub cleanly");
}

#[test]
fn hash_token_makes_a_token_and_its_hash() {
    let output = knooppunt(&["hash-token", "s3cret"], "");
    let text = stdout(&output);
    assert!(
        text.contains(&format!("token_sha256: {}", sha256sum("s3cret"))),
        "{text}"
    );
    let fresh = stdout(&knooppunt(&["hash-token"], ""));
    let token = fresh
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("token:")
        .trim();
    assert_eq!(token.len(), 64);
    assert!(
        fresh.contains(&format!("token_sha256: {}", sha256sum(token))),
        "{fresh}"
    );
}

/// The hash by an independent implementation (coreutils).
fn sha256sum(token: &str) -> String {
    let output = run_with_stdin(Command::new("sha256sum"), token);
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn help_explains_the_commands() {
    let text = stdout(&knooppunt(&["--help"], ""));
    for expected in [
        "CloudEvents",
        "serve",
        "hash-token",
        "check",
        "publish",
        "subscriptions",
        "dead-letters",
        "KNOOPPUNT_URL",
        "KNOOPPUNT_TOKEN",
        "/v1/openapi.json",
    ] {
        assert!(text.contains(expected), "{expected}: {text}");
    }
    for (command, expected) in [
        (
            &["publish", "--help"][..],
            &["--file", "--binary", "--source", "NAME:=VALUE", "Examples"][..],
        ),
        (
            &["subscriptions", "create", "--help"],
            &["--sink", "--sql", "--config", "pending"],
        ),
        (
            &["subscriptions", "--help"],
            &["list", "get", "create", "delete"],
        ),
        (&["dead-letters", "--help"], &["list", "redeliver"]),
        (
            &["pull", "--help"],
            &[
                "receive",
                "acknowledge",
                "release",
                "reject",
                "renew",
                "stream",
                "replay",
            ],
        ),
    ] {
        let help = stdout(&knooppunt(command, ""));
        for expected in expected {
            assert!(help.contains(expected), "{command:?} {expected}: {help}");
        }
    }
    let serve = stdout(&knooppunt(&["serve", "--help"], ""));
    for expected in [
        "--listen",
        "--data-dir",
        "--dev-no-auth",
        "DEVELOPMENT ONLY",
    ] {
        assert!(serve.contains(expected), "{expected}: {serve}");
    }
}

#[test]
fn environment_variables_override_the_configuration_and_are_checked() {
    let data = tempfile::tempdir().unwrap();
    let serve = |env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_knooppunt"));
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data.path())
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .envs(env.iter().copied());
        run_with_stdin(command, "")
    };
    let output = serve(&[("KNOOPPUNT_INGEST_MAX_EVENT_BYTES", "1000")]);
    assert_eq!(output.status.code(), Some(2));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("ingest.max_event_bytes"), "{error}");
    assert!(
        error.contains("KNOOPPUNT_"),
        "the message points at the environment: {error}"
    );

    let output = serve(&[("KNOOPPUNT_DELIVERY_MAX_INFLIGHT", "4")]);
    assert_eq!(output.status.code(), Some(2));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("max_inflight"), "{error}");

    // A typo of a level would silence every log line while /healthz says up.
    let output = serve(&[("KNOOPPUNT_LOG_LEVEL", "warning")]);
    assert_eq!(output.status.code(), Some(2));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(
        error.contains("log.level") && error.contains("warning"),
        "{error}"
    );
}

/// A Kubernetes Service named `knooppunt` puts `KNOOPPUNT_SERVICE_HOST`, `KNOOPPUNT_PORT`
/// and their kin in every pod of its namespace: the hub starts all the same, and says at
/// level debug which variables it left alone.
#[test]
fn a_kubernetes_services_variables_do_not_stop_the_hub() {
    let hub = JsonLoggingHub::start(&[
        ("KNOOPPUNT_LOG_LEVEL", "info,knooppunt=debug"),
        ("KNOOPPUNT_SERVICE_HOST", "10.96.0.12"),
        ("KNOOPPUNT_SERVICE_PORT", "8080"),
        ("KNOOPPUNT_SERVICE_PORT_HTTP", "8080"),
        ("KNOOPPUNT_PORT", "tcp://10.96.0.12:8080"),
        ("KNOOPPUNT_PORT_8080_TCP", "tcp://10.96.0.12:8080"),
        ("KNOOPPUNT_PORT_8080_TCP_PROTO", "tcp"),
        ("KNOOPPUNT_PORT_8080_TCP_PORT", "8080"),
        ("KNOOPPUNT_PORT_8080_TCP_ADDR", "10.96.0.12"),
    ]);
    let told = hub.records.iter().find(|record| {
        record["variables"].as_str().is_some_and(|v| {
            v.contains("KNOOPPUNT_SERVICE_HOST") && v.contains("KNOOPPUNT_PORT_8080_TCP")
        })
    });
    let told = told.expect("the variables left alone are named at debug");
    assert_eq!(told["level"], "DEBUG", "{told}");
    assert!(hub.address.starts_with("127.0.0.1:"));
    hub.terminate();
}

/// The commit checked out here, abbreviated as the build names it.
fn checked_out_commit() -> String {
    let output = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

/// A GET on a hub's address over plain HTTP; the whole response.
fn get(address: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: hub\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// The release and the commit: `--version`, the start-up log (which also names the
/// configuration it read, here none), `/v1/status` and `knooppunt_build_info`.
#[test]
fn the_hub_names_its_version_and_commit_everywhere_an_operator_looks() {
    let commit = checked_out_commit();
    let release = env!("CARGO_PKG_VERSION");
    let version = knooppunt(&["--version"], "");
    assert!(version.status.success());
    assert_eq!(
        stdout(&version),
        format!("knooppunt {release} (commit {commit})\n")
    );

    let hub = JsonLoggingHub::start(&[]);
    let starting = hub
        .records
        .iter()
        .find(|record| record["message"] == "Knooppunt is starting.")
        .unwrap_or_else(|| panic!("no start-up line in {:?}", hub.records));
    assert_eq!(starting["version"], release, "{starting}");
    assert_eq!(starting["commit"], commit.as_str(), "{starting}");
    let configuration = starting["configuration"].as_str().unwrap();
    assert!(
        configuration.contains("config/knooppunt.toml does not exist")
            && configuration.contains("defaults"),
        "{configuration}"
    );

    let status = get(&hub.address, "/v1/status");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let body: serde_json::Value =
        serde_json::from_str(status.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["version"], release, "{body}");
    assert_eq!(body["commit"], commit.as_str(), "{body}");

    let metrics = get(&hub.address, "/metrics");
    let line = format!("knooppunt_build_info{{version=\"{release}\",commit=\"{commit}\"}} 1");
    assert!(metrics.lines().any(|l| l == line), "no {line} in {metrics}");
    hub.terminate();
}

/// The start-up log names the configuration file it read.
#[test]
fn the_start_up_log_names_the_configuration_file() {
    let data = tempfile::tempdir().unwrap();
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/knooppunt.toml");
    let hub = common::HubProcess::start(&config, data.path());
    let starting = hub
        .log()
        .iter()
        .find(|line| line.contains("Knooppunt is starting."))
        .cloned()
        .unwrap_or_else(|| panic!("no start-up line in {:?}", hub.log()));
    assert!(
        starting.contains(&format!("configuration={}", config.display())),
        "{starting}"
    );
    assert!(hub.terminate().success());
}

/// `knooppunt serve --dev-no-auth` on a free port of loopback, logging JSON lines, with
/// some variables set.
struct JsonLoggingHub {
    child: std::process::Child,
    /// Its log, read up to and with the line naming the address it listens on.
    records: Vec<serde_json::Value>,
    address: String,
    /// The rest of its log, open while it runs (it must be able to write its last lines).
    _log: std::io::BufReader<std::process::ChildStderr>,
    _data: tempfile::TempDir,
}

impl JsonLoggingHub {
    fn start(envs: &[(&str, &str)]) -> JsonLoggingHub {
        let data = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_knooppunt"))
            .args([
                "serve",
                "--dev-no-auth",
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
            ])
            .arg(data.path())
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("KNOOPPUNT_LOG_FORMAT", "json")
            .envs(envs.iter().copied())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut log = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut records = Vec::new();
        let address = loop {
            let mut line = String::new();
            assert!(
                std::io::BufRead::read_line(&mut log, &mut line).unwrap() > 0,
                "the hub stopped before it listened"
            );
            let record: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
            let address = record["address"].as_str().map(str::to_owned);
            records.push(record);
            if let Some(address) = address {
                break address;
            }
        };
        JsonLoggingHub {
            child,
            records,
            address,
            _log: log,
            _data: data,
        }
    }

    /// Stops the hub with SIGTERM; it must exit cleanly.
    fn terminate(mut self) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        assert!(self.child.wait().unwrap().success());
    }
}

#[test]
fn json_logs_from_the_environment() {
    let hub = JsonLoggingHub::start(&[]);
    for record in &hub.records {
        assert!(record["level"].is_string() && record["timestamp"].is_string());
    }
    assert!(hub.address.starts_with("127.0.0.1:"));
    hub.terminate();
}

/// The hub's tasks run on one thread per CPU by default, or on `server.worker_threads`; the
/// start-up log says how many, and a count outside 1 to 1024 stops the hub with the key
/// named.
#[test]
fn the_task_threads_are_the_cpus_or_as_configured() {
    let threads = |hub: &JsonLoggingHub| {
        let listening = hub.records.last().unwrap();
        listening["task_threads"].as_u64().unwrap()
    };
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    let hub = JsonLoggingHub::start(&[]);
    assert_eq!(threads(&hub), cpus);
    hub.terminate();
    let hub = JsonLoggingHub::start(&[("KNOOPPUNT_SERVER_WORKER_THREADS", "3")]);
    assert_eq!(threads(&hub), 3);
    hub.terminate();
    let output = Command::new(env!("CARGO_BIN_EXE_knooppunt"))
        .args(["serve", "--dev-no-auth", "--listen", "127.0.0.1:0"])
        .env("KNOOPPUNT_SERVER_WORKER_THREADS", "0")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("server.worker_threads: 0 is outside 1 to 1024"),
        "{said}"
    );
}

/// `knooppunt serve` run by a shell that first sets `ulimit` as given.
fn serve_under_ulimit(ulimit: &str, config: &std::path::Path, data: &std::path::Path) -> Command {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit {ulimit} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_knooppunt"))
        .args(common::serve_args(config, data));
    command
}

/// The soft open-file limit of a process, from /proc.
fn soft_nofile(pid: u32) -> u64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

#[test]
fn serve_raises_a_low_soft_descriptor_limit_to_what_its_limits_need() {
    let data = tempfile::tempdir().unwrap();
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/knooppunt.toml");
    let hub = common::HubProcess::spawn(serve_under_ulimit("-Sn 300", &config, data.path()));
    // 1024 inbound + 512 outbound + 2 × 128 pools (sinks, and clients with a client
    // certificate) × 32 idle + 256 reserved.
    assert_eq!(soft_nofile(hub.child.id()), 9984);
    assert!(
        hub.log()
            .iter()
            .any(|l| l.contains("Raised the open-file limit")),
        "{:?}",
        hub.log()
    );
    assert!(hub.terminate().success());
}

#[test]
fn serve_refuses_to_start_when_the_descriptor_limit_cannot_cover_its_limits() {
    let data = tempfile::tempdir().unwrap();
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/knooppunt.toml");
    let output = serve_under_ulimit("-n 300", &config, data.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(
        error.contains("open-file limit is 300") && error.contains("server.max_connections"),
        "{error}"
    );
}

#[test]
fn metrics_need_a_token_on_the_api_address_and_none_on_metrics_listen() {
    let data = tempfile::tempdir().unwrap();
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/knooppunt.toml");
    let hub = common::HubProcess::start_with_env(
        &config,
        data.path(),
        &[("KNOOPPUNT_SERVER_METRICS_LISTEN", "\"127.0.0.1:0\"")],
    );
    let metrics_address = hub
        .log()
        .iter()
        .find(|line| line.contains("Metrics are served"))
        .and_then(|line| line.split("metrics_address=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no metrics address in {:?}", hub.log()));
    assert!(get(&hub.address, "/metrics").starts_with("HTTP/1.1 401"));
    let open = get(&metrics_address, "/metrics");
    assert!(open.starts_with("HTTP/1.1 200"), "{open}");
    assert!(open.contains("knooppunt_events_total"), "{open}");
    assert!(get(&metrics_address, "/readyz").starts_with("HTTP/1.1 200"));
    assert!(get(&metrics_address, "/v1/subscriptions").starts_with("HTTP/1.1 404"));
    assert!(hub.terminate().success());
}

/// A catalog entry whose owner may not (or no longer) describe its source prefix — made
/// while the operator had lifted the reservation of organisations' source spaces — is
/// reported by `knooppunt check --store` (exit 1, the entry named) and at start-up.
#[tokio::test]
async fn check_and_start_up_report_catalog_entries_outside_their_owners_space() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("knooppunt.toml");
    let write_config = |reserve: bool| {
        std::fs::write(
            &config,
            format!(
                "[ingest]\nreserve_oin_sources = {reserve}\n\n[[principals]]\nname = \"claimant\"\n\
                 token_sha256 = \"{}\"\nroles = [\"publisher\"]\n\
                 publish_source_prefixes = [\"urn:nld:\"]\n",
                sha256sum("claimant-token")
            ),
        )
        .unwrap();
    };
    write_config(false);
    let hub = common::HubProcess::start(&config, &data);
    let created = reqwest::Client::new()
        .post(hub.url("/v1/eventtypes"))
        .bearer_auth("claimant-token")
        .json(
            &serde_json::json!({"source": "urn:nld:oin:", "type": "nl.", "typeMatch": "prefix",
                                   "description": "Alles.", "approval": "approval-required"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let id = created.json::<serde_json::Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(hub.terminate().success());

    let check = || {
        let mut command = Command::new(env!("CARGO_BIN_EXE_knooppunt"));
        command
            .args(["check", "--store", "--config"])
            .arg(&config)
            .env("KNOOPPUNT_SERVER_DATA_DIR", &data);
        run_with_stdin(command, "")
    };
    let fine = check();
    assert!(fine.status.success(), "{}", stdout(&fine));

    write_config(true);
    let reported = check();
    let said = stdout(&reported);
    assert_eq!(reported.status.code(), Some(1), "{said}");
    assert!(said.contains(&id), "{said}");
    assert!(said.contains("outside its owner's source space"), "{said}");
    assert!(said.contains("every organisation"), "{said}");

    let hub = common::HubProcess::start(&config, &data);
    assert!(
        hub.log()
            .iter()
            .any(|line| line.contains(&id) && line.contains("outside its owner's source space")),
        "{:?}",
        hub.log()
    );
    assert!(hub.terminate().success());
}

/// A volume with less room than `[backlog] min_free_bytes` refuses every publish: the hub
/// says so at start-up and in `/readyz` (still 200: it serves the API and drains), and a
/// publish gets 503 saying why.
#[tokio::test]
async fn a_disk_smaller_than_the_floor_is_reported_at_start_up_and_in_readiness() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::config_with_admin(dir.path(), "floor-admin");
    let hub = common::HubProcess::start_with_env(
        &config,
        &dir.path().join("data"),
        &[("KNOOPPUNT_BACKLOG_MIN_FREE_BYTES", "1000000000000000000")],
    );
    assert!(
        hub.log()
            .iter()
            .any(|line| line.contains("less room than [backlog] min_free_bytes")),
        "{:?}",
        hub.log()
    );
    let client = reqwest::Client::new();
    let mut ready = serde_json::Value::Null;
    for _ in 0..50 {
        let answer = client.get(hub.url("/readyz")).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        ready = answer.json().await.unwrap();
        if ready["checks"]["publishing"]
            .as_str()
            .is_some_and(|p| p.starts_with("refused"))
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        ready["checks"]["publishing"]
            .as_str()
            .unwrap()
            .contains("min_free_bytes"),
        "{ready}"
    );
    let published = client
        .post(hub.url("/v1/events"))
        .bearer_auth("floor-admin")
        .header("content-type", "application/cloudevents+json")
        .body(r#"{"specversion":"1.0","id":"f-1","source":"urn:test","type":"t"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(published.status(), 503);
    assert!(hub.terminate().success());
}
