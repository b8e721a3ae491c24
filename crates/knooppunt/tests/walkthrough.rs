//! The README's five-minute walkthrough, step by step, with the example subscriber
//! (`config/example-subscriber.py`, run with python3) as the webhook.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "demo-token-123";

fn knooppunt(url: &str, args: &[&str]) -> std::process::Output {
    let output = Command::new(env!("CARGO_BIN_EXE_knooppunt"))
        .args(args)
        .env("KNOOPPUNT_URL", url)
        .env("KNOOPPUNT_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "knooppunt {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The example subscriber on a free port, its output kept line by line.
struct Subscriber {
    child: Child,
    port: u16,
    output: Arc<Mutex<Vec<String>>>,
}

impl Subscriber {
    /// On `port` (0: a free one).
    fn start(port: u16) -> Subscriber {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../config/example-subscriber.py"
        );
        let mut child = Command::new("python3")
            .arg(script)
            .env("PORT", port.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the example subscriber (.ci/run installs it)");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let port = first
            .rsplit(' ')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {first:?}"));
        let output = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&output);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        Subscriber {
            child,
            port,
            output,
        }
    }

    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(line) = self
                .output
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(text))
            {
                return line.clone();
            }
            assert!(
                Instant::now() < deadline,
                "the subscriber never printed {text:?}: {:?}",
                self.output.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap()
}

#[test]
fn the_readme_walkthrough_delivers_a_first_event() {
    // 1. A token and its hash.
    let hashed = knooppunt("", &["hash-token", TOKEN]);
    let hashed = String::from_utf8(hashed.stdout).unwrap();
    let hash = hashed
        .lines()
        .find_map(|l| l.strip_prefix("token_sha256: "))
        .expect("the hash");
    // The README shows the output as it is.
    let readme = readme();
    let demo = knooppunt("", &["hash-token", "demo-token-123"]);
    let demo = String::from_utf8(demo.stdout).unwrap();
    let shown: String = demo.lines().map(|line| format!("   {line}\n")).collect();
    assert!(
        readme.contains(&shown.replace("   \n", "\n")),
        "the README's hash-token output is not what it prints:\n{demo}"
    );

    // 2. A principal in the configuration.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("knooppunt.toml");
    std::fs::write(
        &config,
        format!(
            "[[principals]]\nname = \"gemeente-voorbeeld\"\ntoken_sha256 = \"{hash}\"\n\
             roles = [\"publisher\", \"subscriber\"]\noin = \"00000001823288444000\"\n"
        ),
    )
    .unwrap();

    // 3. The hub (allowing the loopback webhook, as the README says), the webhook, and a
    // subscription.
    let hub = common::HubProcess::start_with_env(
        &config,
        &dir.path().join("data"),
        &[("KNOOPPUNT_DELIVERY_ALLOW_SINK_NETWORKS", "127.0.0.0/8")],
    );
    let url = hub.url("");
    let subscriber = Subscriber::start(0);
    let port = subscriber.port;
    let sink = format!("http://127.0.0.1:{port}/events");
    // The README gives a few quick retries (PT1S, PT2S); quicker still here.
    let created = knooppunt(
        &url,
        &[
            "subscriptions",
            "create",
            "--sink",
            &sink,
            "--type",
            "nl.brp.persoon-verhuisd",
            "--sql",
            "subject LIKE '9999%'",
            "--config",
            "maxAttempts=3",
            "--config",
            "initialBackoff=PT0.1S",
            "--config",
            "maxBackoff=PT0.2S",
        ],
    );
    let created = String::from_utf8(created.stdout).unwrap();
    assert!(created.contains("state:    active"), "{created}");
    let id = created
        .lines()
        .find_map(|l| l.strip_prefix("created "))
        .unwrap()
        .to_owned();
    subscriber.wait_for("validation request from knooppunt: consent given");

    // 4. Publish.
    let published = knooppunt(
        &url,
        &[
            "publish",
            "--id",
            "f3dce042-cd6e-4977-844d-05be8dce7cea",
            "--source",
            "urn:nld:oin:00000001823288444000:systeem:BRP-component",
            "--type",
            "nl.brp.persoon-verhuisd",
            "--subject",
            "999990342",
            "--data",
            r#"{"bsn": "999990342"}"#,
        ],
    );
    let published = String::from_utf8(published.stdout).unwrap();
    assert!(published.contains("for 1 subscription"), "{published}");

    // 5. It arrives.
    let line = subscriber.wait_for("f3dce042-cd6e-4977-844d-05be8dce7cea");
    assert!(line.starts_with("event nl.brp.persoon-verhuisd"), "{line}");
    assert!(
        line.contains(r#""data":{"bsn": "999990342"}"#),
        "the data as written: {line}"
    );

    // 6. The webhook goes down; the attempts run out and the event is a dead letter.
    drop(subscriber);
    knooppunt(
        &url,
        &[
            "publish",
            "--id",
            "tweede",
            "--source",
            "urn:nld:oin:00000001823288444000:systeem:BRP-component",
            "--type",
            "nl.brp.persoon-verhuisd",
            "--subject",
            "999990343",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let listed = loop {
        let listed = knooppunt(&url, &["dead-letters", "list", &id]);
        let listed = String::from_utf8(listed.stdout).unwrap();
        if !listed.starts_with("No dead letters") {
            break listed;
        }
        assert!(Instant::now() < deadline, "no dead letter");
        std::thread::sleep(Duration::from_millis(50));
    };
    let row = listed.lines().nth(1).expect("a dead letter");
    let columns: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(columns[1], "3", "three attempts: {row}");
    let reason = &row[row.find("maxAttempts").expect("the reason")..];
    assert!(
        readme.contains(reason),
        "the README's dead letter reason is not the hub's: {reason}"
    );
    let dead_letter = columns[0];

    // 7. Back up, and redelivered.
    let subscriber = Subscriber::start(port);
    let redelivered = knooppunt(&url, &["dead-letters", "redeliver", &id, dead_letter]);
    assert!(
        String::from_utf8(redelivered.stdout)
            .unwrap()
            .contains("queued")
    );
    subscriber.wait_for("event nl.brp.persoon-verhuisd tweede");
    assert!(hub.terminate().success());
}
