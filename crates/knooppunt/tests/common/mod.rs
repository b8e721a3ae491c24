//! Running the real `knooppunt` binary in tests.
#![allow(dead_code)] // each test binary uses a part of it

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// How long a hub may take to stop after SIGTERM (its delivery grace is 10 s).
const STOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A `knooppunt serve` process on 127.0.0.1 with a port of its own choosing.
pub(crate) struct HubProcess {
    pub(crate) child: Child,
    pub(crate) address: String,
    /// Every line the hub logged (standard error), as it arrives.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl HubProcess {
    /// Starts `knooppunt serve` and waits until it listens. Its log is read in the
    /// background (so that it never blocks on a full pipe) and kept.
    pub(crate) fn start(config: &Path, data_dir: &Path) -> HubProcess {
        HubProcess::start_with_env(config, data_dir, &[])
    }

    /// The same with these environment variables.
    pub(crate) fn start_with_env(
        config: &Path,
        data_dir: &Path,
        env: &[(&str, &str)],
    ) -> HubProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_knooppunt"));
        command.args(serve_args(config, data_dir));
        command.envs(env.iter().copied());
        HubProcess::spawn(command)
    }

    /// Starts `command` (which runs `knooppunt serve` somehow) and waits until it listens.
    pub(crate) fn spawn(mut command: Command) -> HubProcess {
        let mut child = command.stderr(Stdio::piped()).spawn().unwrap();
        let mut reader = BufReader::new(child.stderr.take().unwrap());
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let address = loop {
            let mut line = String::new();
            assert!(
                reader.read_line(&mut line).unwrap() > 0,
                "the hub exited before listening"
            );
            log.lock().unwrap().push(line.clone());
            if let Some(address) = listening_address(&line) {
                break address;
            }
        };
        let kept = std::sync::Arc::clone(&log);
        let reader = std::thread::spawn(move || {
            for line in reader.lines().map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        HubProcess {
            child,
            address,
            log,
            reader: Some(reader),
        }
    }

    /// The lines logged so far.
    pub(crate) fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// SIGTERM, and the exit status.
    pub(crate) fn terminate(mut self) -> std::process::ExitStatus {
        self.stop()
    }

    /// SIGTERM, and the exit status once the hub and its log have ended. A hub that has not
    /// stopped within [`STOP_LIMIT`] is killed and the test fails with its log, rather than
    /// hanging the test run.
    pub(crate) fn stop(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(status.success());
        let deadline = std::time::Instant::now() + STOP_LIMIT;
        let exit = loop {
            if let Some(exit) = self.child.try_wait().unwrap() {
                break exit;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the hub did not stop within {STOP_LIMIT:?} of SIGTERM; its log:\n{}",
                    self.log().join("\n")
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        exit
    }
}

/// A hub left running by a failing test is killed, so that no test leaves a process behind.
impl Drop for HubProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The arguments of `knooppunt serve` on 127.0.0.1 port 0 with this configuration and store.
pub(crate) fn serve_args(config: &Path, data_dir: &Path) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = vec!["serve".into(), "--config".into()];
    args.push(config.into());
    args.extend(["--listen".into(), "127.0.0.1:0".into(), "--data-dir".into()]);
    args.push(data_dir.into());
    args
}

/// The address in the hub's "listening" log line, pretty or JSON.
fn listening_address(line: &str) -> Option<String> {
    if let Ok(record) = serde_json::from_str::<serde_json::Value>(line) {
        if record["message"] != "Knooppunt is listening." {
            return None;
        }
        return record["address"].as_str().map(str::to_owned);
    }
    if !line.contains("Knooppunt is listening.") {
        return None;
    }
    let at = line.find(" address=")? + 1;
    Some(line[at + 8..].split_whitespace().next()?.to_owned())
}

/// A configuration file with one admin principal whose token is `token`, allowing sinks on
/// loopback (the test sinks' addresses, which a hub refuses by default).
pub(crate) fn config_with_admin(dir: &Path, token: &str) -> std::path::PathBuf {
    let hash = {
        let output = Command::new("sha256sum")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(token.as_bytes())?;
                child.wait_with_output()
            })
            .unwrap();
        String::from_utf8(output.stdout).unwrap()[..64].to_owned()
    };
    let path = dir.join("knooppunt.toml");
    std::fs::write(
        &path,
        format!(
            "[delivery]\nallow_sink_networks = [\"127.0.0.0/8\", \"::1/128\"]\n\n\
             [[principals]]\nname = \"admin\"\ntoken_sha256 = \"{hash}\"\nroles = [\"admin\", \"publisher\", \"subscriber\"]\n"
        ),
    )
    .unwrap();
    path
}

/// Where the hubs of a test keep their state: the embedded store, or a database of a
/// throwaway PostgreSQL cluster (kept running as long as this is).
pub(crate) enum Backend {
    Embedded,
    Postgres {
        _cluster: knooppunt_test_postgres::Cluster,
        url: String,
    },
}

impl Backend {
    pub(crate) fn postgres(database: &str) -> Backend {
        let cluster = knooppunt_test_postgres::Cluster::start();
        let url = cluster.create_database(database);
        Backend::Postgres {
            _cluster: cluster,
            url,
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        match self {
            Backend::Embedded => "embedded",
            Backend::Postgres { .. } => "postgres",
        }
    }

    /// A hub named `name` (its data directory; hubs of one name share the embedded store)
    /// with an admin principal whose token is `token`.
    pub(crate) fn hub(&self, dir: &Path, name: &str, token: &str) -> HubProcess {
        self.hub_with(&config_with_admin(dir, token), dir, name)
    }

    /// The same with this configuration file.
    pub(crate) fn hub_with(&self, config: &Path, dir: &Path, name: &str) -> HubProcess {
        HubProcess::spawn(self.serve_command(config, dir, name))
    }

    /// The `knooppunt serve` command of such a hub, not started.
    pub(crate) fn serve_command(&self, config: &Path, dir: &Path, name: &str) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_knooppunt"));
        command.args(serve_args(config, &dir.join(name)));
        if let Backend::Postgres { url, .. } = self {
            command.envs([
                ("KNOOPPUNT_STORE_BACKEND", "postgres"),
                ("KNOOPPUNT_STORE_URL", url),
                ("KNOOPPUNT_STORE_POOL_SIZE", "8"),
            ]);
        }
        command
    }
}

/// The JSON of a `GET` of `path` with a bearer token; it must answer 200.
pub(crate) async fn get_json(
    client: &reqwest::Client,
    hub: &HubProcess,
    token: &str,
    path: &str,
) -> serde_json::Value {
    let answer = client
        .get(hub.url(path))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "GET {path}");
    answer.json().await.unwrap()
}

/// Publishes `batch` to `hub` in one request with a bearer token; it must be accepted (202).
/// The hub's receipt.
pub(crate) async fn publish_batch(
    client: &reqwest::Client,
    hub: &HubProcess,
    token: &str,
    batch: Vec<serde_json::Value>,
) -> serde_json::Value {
    let answer = client
        .post(hub.url("/v1/events"))
        .bearer_auth(token)
        .header("content-type", "application/cloudevents-batch+json")
        .body(serde_json::Value::Array(batch).to_string())
        .send()
        .await
        .unwrap();
    let status = answer.status();
    let text = answer.text().await.unwrap();
    assert_eq!(status, 202, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// Runs `$scenario` as two tests: on the embedded store, and on a PostgreSQL database named
/// `$database` in a throwaway cluster.
#[allow(unused_macros)] // each test binary uses a part of this module
macro_rules! on_both_backends {
    ($embedded:ident, $postgres:ident, $scenario:ident, $database:literal) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $embedded() {
            $scenario(Backend::Embedded).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $postgres() {
            $scenario(Backend::postgres($database)).await;
        }
    };
}

#[allow(unused_imports)]
pub(crate) use on_both_backends;

/// Creates a push subscription to `sink` for events of `ty` with this `ordering`; its id.
pub(crate) async fn subscribe(
    client: &reqwest::Client,
    hub: &HubProcess,
    token: &str,
    (sink, ty): (&str, &str),
    ordering: &str,
) -> String {
    let body = serde_json::json!({"sink": sink, "protocol": "HTTP", "types": [ty],
                                  "config": {"ordering": ordering}});
    create_subscription(client, hub, token, &body).await
}

/// Creates the subscription `body` describes (201); its id.
pub(crate) async fn create_subscription(
    client: &reqwest::Client,
    hub: &HubProcess,
    token: &str,
    body: &serde_json::Value,
) -> String {
    let created = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = created.status();
    let created: serde_json::Value = created.json().await.unwrap();
    assert_eq!(status, 201, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

/// Every event of pull subscription `id`, received as `token` and acknowledged, until a
/// receive comes back empty.
pub(crate) async fn drain(
    client: &reqwest::Client,
    hub: &HubProcess,
    token: &str,
    id: &str,
) -> Vec<serde_json::Value> {
    let mut all = Vec::new();
    loop {
        let answer = client
            .post(hub.url(&format!(
                "/v1/subscriptions/{id}/receive?maxEvents=100&maxWait=PT1S"
            )))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        let tokens: Vec<String> = answer
            .headers()
            .get("knooppunt-lock-tokens")
            .map(|v| v.to_str().unwrap().split(", ").map(str::to_owned).collect())
            .unwrap_or_default();
        let events: Vec<serde_json::Value> = answer.json().await.unwrap();
        if events.is_empty() {
            return all;
        }
        let settled = client
            .post(hub.url(&format!("/v1/subscriptions/{id}/acknowledge")))
            .bearer_auth(token)
            .json(&serde_json::json!({"lockTokens": tokens}))
            .send()
            .await
            .unwrap();
        assert_eq!(settled.status(), 200);
        all.extend(events);
    }
}
