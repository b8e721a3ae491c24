//! Message brokers for the tests, from Debian's packages: [`Mosquitto`] runs `mosquitto`
//! on a free loopback port with a password file and an ACL, and [`MqttSubscriber`]
//! receives with Eclipse Paho (`python3-paho-mqtt`). Both are installed with apt when
//! missing (as root, or through `sudo -n`), so that no test is skipped for lack of them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

static INSTALL: Mutex<()> = Mutex::new(());

/// Installs Debian `packages` unless `present` says they are there.
fn install(present: impl Fn() -> bool, packages: &[&str]) {
    let _once = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if present() {
        return;
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let apt = |args: &[&str]| {
        let mut command = if root {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.args(["-n", "apt-get"]);
            sudo
        };
        command
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
    };
    eprintln!("installing {packages:?} for the broker tests");
    let _ = apt(&["update", "-qq"]);
    let mut args = vec!["install", "-y", "-qq"];
    args.extend_from_slice(packages);
    let output = apt(&args).expect("apt-get runs");
    assert!(
        output.status.success() && present(),
        "installing {packages:?} failed; install them: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Mosquitto's own clients (`mosquitto_pub`, `mosquitto_sub`), installed if missing.
pub fn mosquitto_clients() {
    install(
        || std::path::Path::new("/usr/bin/mosquitto_pub").exists(),
        &["mosquitto-clients"],
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A running `mosquitto` (MQTT 3.1.1 and 5) on 127.0.0.1: no anonymous clients; the users
/// given, each allowed to publish and subscribe under `knooppunt/#` only; no bound on the
/// messages it queues for a slow subscriber (Mosquitto's default drops past 1,000, which
/// would hide whether the hub lost one). Stopped when dropped.
#[derive(Debug)]
pub struct Mosquitto {
    pub port: u16,
    /// A second listener with TLS, when started with a certificate.
    pub tls_port: Option<u16>,
    dir: tempfile::TempDir,
    process: Option<Child>,
}

impl Mosquitto {
    pub fn start(users: &[(&str, &str)]) -> Mosquitto {
        Mosquitto::start_with(users, None)
    }

    /// [`Mosquitto::start`] with a second listener, on [`Mosquitto::tls_url`], that serves
    /// this certificate chain and key (PEM files) over TLS.
    pub fn start_tls(users: &[(&str, &str)], certificate: &Path, key: &Path) -> Mosquitto {
        Mosquitto::start_with(users, Some((certificate, key)))
    }

    fn start_with(users: &[(&str, &str)], tls: Option<(&Path, &Path)>) -> Mosquitto {
        install(
            || std::path::Path::new("/usr/sbin/mosquitto").exists(),
            &["mosquitto"],
        );
        let dir = tempfile::Builder::new()
            .prefix("knooppunt-mosquitto-")
            .tempdir()
            .expect("a temporary directory");
        let passwords = dir.path().join("passwords");
        std::fs::write(&passwords, "").unwrap();
        for (user, password) in users {
            let made = Command::new("mosquitto_passwd")
                .args(["-b"])
                .arg(&passwords)
                .args([user, password])
                .output()
                .expect("mosquitto_passwd runs");
            assert!(made.status.success(), "{made:?}");
        }
        let acl = dir.path().join("acl");
        let mut rules = String::new();
        for (user, _) in users {
            rules.push_str(&format!("user {user}\ntopic readwrite knooppunt/#\n\n"));
        }
        std::fs::write(&acl, rules).unwrap();
        if let Some((certificate, key)) = tls {
            std::fs::copy(certificate, dir.path().join("server.pem")).unwrap();
            std::fs::copy(key, dir.path().join("server.key")).unwrap();
        }
        let mut broker = Mosquitto {
            port: free_port(),
            tls_port: tls.map(|_| free_port()),
            dir,
            process: None,
        };
        broker.run();
        broker
    }

    fn config(&self) -> PathBuf {
        let config = self.dir.path().join("mosquitto.conf");
        std::fs::write(
            &config,
            format!(
                "listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {passwords}\n\
                 acl_file {acl}\npersistence true\npersistence_location {dir}/\nuser root\n\
                 log_dest stderr\nlog_type error\n\
                 max_queued_messages 0\n",
                dir = self.dir.path().display(),
                port = self.port,
                passwords = self.dir.path().join("passwords").display(),
                acl = self.dir.path().join("acl").display(),
            ),
        )
        .unwrap();
        if let Some(port) = self.tls_port {
            let mut text = std::fs::read_to_string(&config).unwrap();
            text.push_str(&format!(
                "listener {port} 127.0.0.1\ncertfile {dir}/server.pem\nkeyfile {dir}/server.key\n",
                dir = self.dir.path().display()
            ));
            std::fs::write(&config, text).unwrap();
        }
        config
    }

    fn run(&mut self) {
        let process = Command::new("/usr/sbin/mosquitto")
            .arg("-c")
            .arg(self.config())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("mosquitto starts");
        self.process = Some(process);
        // Listening within a few seconds.
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("mosquitto did not listen on port {}", self.port);
    }

    /// `mqtts://127.0.0.1:<tls port>`, for a broker started with TLS.
    pub fn tls_url(&self) -> String {
        format!(
            "mqtts://127.0.0.1:{}",
            self.tls_port.expect("started with TLS")
        )
    }

    /// `mqtt://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// Stops the broker as an operator does (SIGTERM): it saves its sessions and queued
    /// messages, and closes every connection.
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &process.id().to_string()])
                .status();
            for _ in 0..100 {
                if matches!(process.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = process.kill();
            let _ = process.wait();
        }
    }

    /// Starts it again on the same port, with what it saved.
    pub fn restart(&mut self) {
        self.stop();
        self.run();
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Debian's Python, which Debian's `python3-paho-mqtt` installs into (not another
/// `python3` that may come first on the PATH).
const PYTHON: &str = "/usr/bin/python3";

/// A message as the subscriber received it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct MqttReceived {
    pub topic: String,
    /// The payload, in hex.
    pub payload: String,
    pub qos: u8,
    pub retain: bool,
    pub content_type: Option<String>,
    pub user_properties: Vec<(String, String)>,
    pub expiry: Option<u32>,
}

impl MqttReceived {
    pub fn payload_bytes(&self) -> Vec<u8> {
        (0..self.payload.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&self.payload[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The User Property of this name (the first, if there are several).
    pub fn property(&self, name: &str) -> Option<&str> {
        self.user_properties
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An MQTT 5 subscriber (Eclipse Paho for Python) on a topic filter of a broker, with a
/// session the broker keeps for an hour (QoS 1 and 2 messages wait for it while it is
/// away), reconnecting by itself.
#[derive(Debug)]
pub struct MqttSubscriber {
    process: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl MqttSubscriber {
    /// Subscribed once this returns.
    pub fn start(broker: &Mosquitto, filter: &str, user: &str, password: &str) -> MqttSubscriber {
        install(
            || {
                Command::new(PYTHON)
                    .args(["-c", "import paho.mqtt.client"])
                    .output()
                    .is_ok_and(|o| o.status.success())
            },
            &["python3-paho-mqtt"],
        );
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mqtt-subscriber.py");
        let mut process = Command::new(PYTHON)
            .arg(script)
            .args([
                "127.0.0.1",
                &broker.port.to_string(),
                filter,
                user,
                password,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs");
        let stdout = process.stdout.take().unwrap();
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        let first = lines
            .recv_timeout(Duration::from_secs(20))
            .expect("the subscriber subscribed");
        assert_eq!(first, "ready", "{first}");
        MqttSubscriber { process, lines }
    }

    /// The next message, waiting up to `within` (the subscriber's `ready` after it
    /// reconnected is skipped).
    pub fn next(&self, within: Duration) -> Option<MqttReceived> {
        loop {
            let line = self.lines.recv_timeout(within).ok()?;
            if line != "ready" {
                return Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
            }
        }
    }

    /// Exactly `count` messages, each within `within`.
    pub fn take(&self, count: usize, within: Duration) -> Vec<MqttReceived> {
        (0..count)
            .map(|n| {
                self.next(within)
                    .unwrap_or_else(|| panic!("message {} of {count} did not come", n + 1))
            })
            .collect()
    }
}

impl Drop for MqttSubscriber {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
