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

/// A running `nats-server` (Debian's) on 127.0.0.1 with JetStream on (file storage): the
/// users given, each allowed to publish under `knooppunt.>` only (and to the JetStream API
/// and reply subjects), and optionally TLS. Stopped when dropped.
#[derive(Debug)]
pub struct NatsServer {
    pub port: u16,
    tls: bool,
    dir: tempfile::TempDir,
    process: Option<Child>,
}

impl NatsServer {
    pub fn start(users: &[(&str, &str)]) -> NatsServer {
        NatsServer::start_with(users, None)
    }

    /// [`NatsServer::start`] serving this certificate chain and key (PEM files) over TLS
    /// only.
    pub fn start_tls(users: &[(&str, &str)], certificate: &Path, key: &Path) -> NatsServer {
        NatsServer::start_with(users, Some((certificate, key)))
    }

    fn start_with(users: &[(&str, &str)], tls: Option<(&Path, &Path)>) -> NatsServer {
        install(
            || Path::new("/usr/sbin/nats-server").exists(),
            &["nats-server"],
        );
        let dir = tempfile::Builder::new()
            .prefix("knooppunt-nats-")
            .tempdir()
            .expect("a temporary directory");
        let port = free_port();
        let users: Vec<String> = users
            .iter()
            .map(|(user, password)| {
                format!(
                    "{{user: {user}, password: {password}, permissions: {{publish: \
                     [\"knooppunt.>\", \"$JS.API.>\", \"$JS.ACK.>\", \"_INBOX.>\"], \
                     subscribe: [\"knooppunt.>\", \"_INBOX.>\"]}}}}"
                )
            })
            .collect();
        let mut config = format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: \"{store}\" }}\n\
             authorization {{ users: [{users}] }}\n",
            store = dir.path().join("jetstream").display(),
            users = users.join(", "),
        );
        if let Some((certificate, key)) = tls {
            config.push_str(&format!(
                "tls {{ cert_file: \"{}\", key_file: \"{}\" }}\n",
                certificate.display(),
                key.display()
            ));
        }
        std::fs::write(dir.path().join("nats.conf"), config).unwrap();
        let mut server = NatsServer {
            port,
            tls: tls.is_some(),
            dir,
            process: None,
        };
        server.run();
        server
    }

    fn run(&mut self) {
        let process = Command::new("/usr/sbin/nats-server")
            .arg("-c")
            .arg(self.dir.path().join("nats.conf"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        self.process = Some(process);
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("nats-server did not listen on port {}", self.port);
    }

    /// `nats://127.0.0.1:<port>`, or `tls://` for a server started with TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "tls" } else { "nats" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// Stops the server as an operator does (SIGTERM): JetStream's streams are on disk.
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &process.id().to_string()])
                .status();
            for _ in 0..200 {
                if matches!(process.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = process.kill();
            let _ = process.wait();
        }
    }

    /// Starts it again on the same port, with its streams.
    pub fn restart(&mut self) {
        self.stop();
        self.run();
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A message as the NATS subscriber received it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct NatsReceived {
    pub subject: String,
    /// Headers, sorted by name.
    pub headers: Vec<(String, String)>,
    /// The payload, in hex.
    pub payload: String,
}

impl NatsReceived {
    pub fn payload_bytes(&self) -> Vec<u8> {
        (0..self.payload.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&self.payload[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The header of this name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The `python3` with NATS's own client, nats-py (installed with pip when missing: it is
/// not among Debian's packages).
fn python_with_nats() -> &'static str {
    let _once = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let has = || {
        Command::new("python3")
            .args(["-c", "import nats"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !has() {
        eprintln!("installing nats-py for the NATS tests");
        let output = Command::new("python3")
            .args(["-m", "pip", "install", "-q", "nats-py"])
            .output()
            .expect("python3 -m pip runs");
        assert!(
            output.status.success() && has(),
            "installing nats-py failed; install it: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    "python3"
}

/// A NATS subscriber (nats-py) on a subject: core NATS, or a JetStream stream it makes and
/// reads with a durable consumer; reconnecting by itself.
#[derive(Debug)]
pub struct NatsSubscriber {
    process: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl NatsSubscriber {
    /// A core NATS subscriber, subscribed once this returns.
    pub fn core(server: &NatsServer, subject: &str, login: (&str, &str)) -> NatsSubscriber {
        NatsSubscriber::start(server, subject, login, None, None)
    }

    /// Makes the stream `stream` taking `subject`, and reads it.
    pub fn stream(
        server: &NatsServer,
        subject: &str,
        login: (&str, &str),
        stream: &str,
    ) -> NatsSubscriber {
        NatsSubscriber::start(server, subject, login, Some(stream), None)
    }

    /// A core subscriber over TLS, trusting `ca` (PEM file).
    pub fn core_tls(
        server: &NatsServer,
        subject: &str,
        login: (&str, &str),
        ca: &Path,
    ) -> NatsSubscriber {
        NatsSubscriber::start(server, subject, login, None, Some(ca))
    }

    fn start(
        server: &NatsServer,
        subject: &str,
        (user, password): (&str, &str),
        stream: Option<&str>,
        ca: Option<&Path>,
    ) -> NatsSubscriber {
        let python = python_with_nats();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("nats-subscriber.py");
        let mut command = Command::new(python);
        command
            .arg(script)
            .args([&server.port.to_string(), user, password, subject]);
        if let Some(stream) = stream {
            command.arg(stream);
        }
        if let Some(ca) = ca {
            command.arg("--tls").arg(ca);
        }
        let mut process = command
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
            .recv_timeout(Duration::from_secs(30))
            .expect("the NATS subscriber subscribed");
        assert_eq!(first, "ready", "{first}");
        NatsSubscriber { process, lines }
    }

    /// The next message, waiting up to `within`.
    pub fn next(&self, within: Duration) -> Option<NatsReceived> {
        let line = self.lines.recv_timeout(within).ok()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")))
    }

    /// Exactly `count` messages, each within `within`.
    pub fn take(&self, count: usize, within: Duration) -> Vec<NatsReceived> {
        (0..count)
            .map(|n| {
                self.next(within)
                    .unwrap_or_else(|| panic!("message {} of {count} did not come", n + 1))
            })
            .collect()
    }
}

impl Drop for NatsSubscriber {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// Publishes `count` messages of `size` bytes to `subject` with nats-py, NATS's own client
/// (core NATS, or JetStream with 256 acknowledgements awaited at a time); returns when all
/// were flushed or acknowledged. The baseline of the NATS benchmark.
pub fn nats_publish(
    server: &NatsServer,
    (user, password): (&str, &str),
    subject: &str,
    (count, size): (u64, usize),
    jetstream: bool,
) {
    let python = python_with_nats();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("nats-publisher.py");
    let mut command = Command::new(python);
    command.arg(script).args([
        &server.port.to_string(),
        user,
        password,
        subject,
        &count.to_string(),
        &size.to_string(),
    ]);
    if jetstream {
        command.arg("--jetstream");
    }
    let output = command.output().expect("python3 runs");
    assert!(
        output.status.success() && String::from_utf8_lossy(&output.stdout).contains("done"),
        "the NATS publisher failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Makes the JetStream stream `stream` (file storage) taking `subject`, with nats-py.
pub fn nats_make_stream(
    server: &NatsServer,
    (user, password): (&str, &str),
    stream: &str,
    subject: &str,
) {
    let python = python_with_nats();
    let code = format!(
        "import asyncio, nats\n\
         async def main():\n\
         \x20   nc = await nats.connect('nats://127.0.0.1:{port}', user='{user}', password='{password}')\n\
         \x20   await nc.jetstream().add_stream(name='{stream}', subjects=['{subject}'])\n\
         \x20   await nc.close()\n\
         asyncio.run(main())\n",
        port = server.port
    );
    let output = Command::new(python)
        .args(["-c", &code])
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "making the stream failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A core NATS subscriber (nats-py) that only counts the messages on `subject`.
#[derive(Debug)]
pub struct NatsCounter {
    process: Child,
    count: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl NatsCounter {
    /// Subscribed once this returns.
    pub fn start(
        server: &NatsServer,
        subject: &str,
        (user, password): (&str, &str),
    ) -> NatsCounter {
        let python = python_with_nats();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("nats-subscriber.py");
        let mut process = Command::new(python)
            .arg(script)
            .args([&server.port.to_string(), user, password, subject, "--count"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs");
        let stdout = process.stdout.take().unwrap();
        let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = std::sync::Arc::clone(&count);
        let (ready, subscribed) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line == "ready" {
                    let _ = ready.send(());
                } else if let Ok(n) = line.parse::<u64>() {
                    counted.store(n, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
        subscribed
            .recv_timeout(Duration::from_secs(30))
            .expect("the NATS counter subscribed");
        NatsCounter { process, count }
    }

    /// The messages counted so far.
    pub fn count(&self) -> u64 {
        self.count.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for NatsCounter {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A running RabbitMQ (Debian's `rabbitmq-server`) with its AMQP 1.0 plugin on 127.0.0.1:
/// a node of its own (own name, data directory, Erlang distribution and epmd ports), the
/// users given, each allowed to write to the queues and exchanges named `knooppunt…` only,
/// and the durable queue [`RabbitMq::QUEUE`]. Optionally a TLS listener. Stopped when
/// dropped.
#[derive(Debug)]
pub struct RabbitMq {
    pub port: u16,
    /// The TLS listener's port, when started with a certificate.
    pub tls_port: Option<u16>,
    dist_port: u16,
    epmd_port: u16,
    dir: tempfile::TempDir,
    process: Option<Child>,
}

impl RabbitMq {
    /// The queue every broker starts with (address `/amq/queue/knooppunt.events`).
    pub const QUEUE: &'static str = "knooppunt.events";

    pub fn start(users: &[(&str, &str)]) -> RabbitMq {
        RabbitMq::start_with(users, None)
    }

    /// [`RabbitMq::start`] with a second listener serving this certificate chain and key
    /// (PEM files) over TLS.
    pub fn start_tls(users: &[(&str, &str)], certificate: &Path, key: &Path) -> RabbitMq {
        RabbitMq::start_with(users, Some((certificate, key)))
    }

    fn start_with(users: &[(&str, &str)], tls: Option<(&Path, &Path)>) -> RabbitMq {
        install(
            || Path::new("/usr/lib/rabbitmq/bin/rabbitmq-server").exists(),
            &["rabbitmq-server"],
        );
        let dir = tempfile::Builder::new()
            .prefix("knooppunt-rabbitmq-")
            .tempdir()
            .expect("a temporary directory");
        let definitions = serde_json::json!({
            "users": users.iter().map(|(name, password)| serde_json::json!({
                "name": name, "password": password, "tags": ""})).collect::<Vec<_>>(),
            "vhosts": [{"name": "/"}],
            "permissions": users.iter().map(|(name, _)| serde_json::json!({
                "user": name, "vhost": "/", "configure": "^knooppunt.*",
                // The default exchange too: `/amq/queue/<queue>` is sent through it.
                "write": "^(knooppunt.*|amq\\.default)$", "read": "^knooppunt.*"}))
                .collect::<Vec<_>>(),
            "queues": [{"name": Self::QUEUE, "vhost": "/", "durable": true,
                        "auto_delete": false, "arguments": {}}],
            "exchanges": [{"name": "knooppunt.topic", "vhost": "/", "type": "topic",
                           "durable": true, "auto_delete": false, "internal": false,
                           "arguments": {}}],
        });
        std::fs::write(dir.path().join("definitions.json"), definitions.to_string()).unwrap();
        if let Some((certificate, key)) = tls {
            std::fs::copy(certificate, dir.path().join("server.pem")).unwrap();
            std::fs::copy(key, dir.path().join("server.key")).unwrap();
        }
        let mut broker = RabbitMq {
            port: free_port(),
            tls_port: tls.map(|_| free_port()),
            dist_port: free_port(),
            epmd_port: free_port(),
            dir,
            process: None,
        };
        let mut config = format!(
            "listeners.tcp.default = 127.0.0.1:{port}\nloopback_users = none\n\
             load_definitions = {dir}/definitions.json\nlog.console = false\n\
             log.file.level = error\n",
            port = broker.port,
            dir = broker.dir.path().display(),
        );
        if let Some(port) = broker.tls_port {
            config.push_str(&format!(
                "listeners.ssl.default = 127.0.0.1:{port}\n\
                 ssl_options.certfile = {dir}/server.pem\nssl_options.keyfile = {dir}/server.key\n\
                 ssl_options.verify = verify_none\nssl_options.fail_if_no_peer_cert = false\n",
                dir = broker.dir.path().display(),
            ));
        }
        std::fs::write(broker.dir.path().join("rabbitmq.conf"), config).unwrap();
        std::fs::write(
            broker.dir.path().join("enabled_plugins"),
            "[rabbitmq_amqp1_0].\n",
        )
        .unwrap();
        broker.run();
        broker
    }

    fn run(&mut self) {
        use std::os::unix::process::CommandExt;
        let dir = self.dir.path();
        let process = Command::new("/usr/lib/rabbitmq/bin/rabbitmq-server")
            .env("HOME", dir)
            .env(
                "RABBITMQ_NODENAME",
                format!("knooppunt-{}@localhost", self.port),
            )
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", self.port.to_string())
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            .env("ERL_EPMD_PORT", self.epmd_port.to_string())
            .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
            .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", dir.join("log"))
            .env("RABBITMQ_PID_FILE", dir.join("pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group, so that stopping it stops the Erlang VM and epmd.
            .process_group(0)
            .spawn()
            .expect("rabbitmq-server starts");
        self.process = Some(process);
        // The AMQP listener opens when the broker (and its plugin) is up: seconds.
        for _ in 0..1200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "rabbitmq-server did not listen on port {} within a minute",
            self.port
        );
    }

    /// `amqp://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("amqp://127.0.0.1:{}", self.port)
    }

    /// `amqps://127.0.0.1:<TLS port>`, for a broker started with TLS.
    pub fn tls_url(&self) -> String {
        format!(
            "amqps://127.0.0.1:{}",
            self.tls_port.expect("started with TLS")
        )
    }

    /// Stops the broker as an operator does (SIGTERM to its process group): durable queues
    /// and their persistent messages stay on disk.
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            let group = format!("-{}", process.id());
            let quiet = |signal: &str| {
                let _ = Command::new("kill")
                    .args([signal, "--", &group])
                    .stderr(Stdio::null())
                    .status();
            };
            quiet("-TERM");
            for _ in 0..400 {
                if matches!(process.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            quiet("-KILL");
            let _ = process.wait();
            // epmd runs as a daemon outside the group: the one started for this broker's
            // port (told by its environment).
            let mark = format!("ERL_EPMD_PORT={}", self.epmd_port);
            for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                let path = entry.path();
                let is_epmd = std::fs::read(path.join("cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("epmd"));
                let ours = std::fs::read(path.join("environ"))
                    .is_ok_and(|e| e.split(|b| *b == 0).any(|var| var == mark.as_bytes()));
                if is_epmd && ours {
                    let pid = entry.file_name().to_string_lossy().into_owned();
                    let _ = Command::new("kill").args(["-KILL", &pid]).status();
                }
            }
        }
    }

    /// Starts it again on the same ports, with its queues and their messages.
    pub fn restart(&mut self) {
        self.stop();
        self.run();
    }
}

impl Drop for RabbitMq {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A message as the AMQP receiver got it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct AmqpReceived {
    pub content_type: Option<String>,
    /// Application properties: name, AMQP type (`bool`, `long`, `string`) and value as JSON.
    pub application_properties: Vec<(String, String, serde_json::Value)>,
    /// The body (one data section), in hex.
    pub body: String,
    /// Whether the message is durable (kept across a broker restart).
    pub durable: bool,
}

impl AmqpReceived {
    pub fn body_bytes(&self) -> Vec<u8> {
        (0..self.body.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&self.body[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The application property of this name: its AMQP type and value.
    pub fn property(&self, name: &str) -> Option<(&str, &serde_json::Value)> {
        self.application_properties
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, kind, value)| (kind.as_str(), value))
    }
}

/// An AMQP 1.0 receiver (Apache Qpid Proton for Python, Debian's python3-qpid-proton) on a
/// source address of a broker, accepting each message, reconnecting by itself.
#[derive(Debug)]
pub struct AmqpReceiver {
    process: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl AmqpReceiver {
    /// Receiving once this returns.
    pub fn start(port: u16, address: &str, (user, password): (&str, &str)) -> AmqpReceiver {
        install(
            || {
                Command::new(PYTHON)
                    .args(["-c", "import proton"])
                    .output()
                    .is_ok_and(|o| o.status.success())
            },
            &["python3-qpid-proton"],
        );
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("amqp-receiver.py");
        let mut process = Command::new(PYTHON)
            .arg(script)
            .args([&port.to_string(), address, user, password])
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
            .recv_timeout(Duration::from_secs(30))
            .expect("the AMQP receiver attached");
        assert_eq!(first, "ready", "{first}");
        AmqpReceiver { process, lines }
    }

    /// The next message, waiting up to `within` (a `ready` after reconnecting is skipped).
    pub fn next(&self, within: Duration) -> Option<AmqpReceived> {
        loop {
            let line = self.lines.recv_timeout(within).ok()?;
            if line != "ready" {
                return Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
            }
        }
    }

    /// Exactly `count` messages, each within `within`.
    pub fn take(&self, count: usize, within: Duration) -> Vec<AmqpReceived> {
        (0..count)
            .map(|n| {
                self.next(within)
                    .unwrap_or_else(|| panic!("message {} of {count} did not come", n + 1))
            })
            .collect()
    }
}

impl Drop for AmqpReceiver {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// Sends `count` durable messages of `size` bytes to `address` with Apache Qpid Proton
/// (unsettled, as fast as the broker's credit allows); returns when the broker accepted all.
/// The baseline of the AMQP benchmark.
pub fn amqp_publish(
    broker: &RabbitMq,
    (user, password): (&str, &str),
    address: &str,
    (count, size): (u64, usize),
) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("amqp-publisher.py");
    let output = Command::new(PYTHON)
        .arg(script)
        .args([
            &broker.port.to_string(),
            address,
            user,
            password,
            &count.to_string(),
            &size.to_string(),
        ])
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success() && String::from_utf8_lossy(&output.stdout).contains("done"),
        "the AMQP publisher failed: {} {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// An AMQP 1.0 receiver (Qpid Proton) that only counts the messages from `address`.
#[derive(Debug)]
pub struct AmqpCounter {
    process: Child,
    count: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl AmqpCounter {
    /// Receiving once this returns.
    pub fn start(broker: &RabbitMq, address: &str, (user, password): (&str, &str)) -> AmqpCounter {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("amqp-counter.py");
        let mut process = Command::new(PYTHON)
            .arg(script)
            .args([&broker.port.to_string(), address, user, password])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs");
        let stdout = process.stdout.take().unwrap();
        let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = std::sync::Arc::clone(&count);
        let (ready, attached) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line == "ready" {
                    let _ = ready.send(());
                } else if let Ok(n) = line.parse::<u64>() {
                    counted.store(n, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
        attached
            .recv_timeout(Duration::from_secs(30))
            .expect("the AMQP counter attached");
        AmqpCounter { process, count }
    }

    /// The messages counted so far.
    pub fn count(&self) -> u64 {
        self.count.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for AmqpCounter {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
