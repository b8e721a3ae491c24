//! RabbitMQ with its AMQP 1.0 plugin, read with Apache Qpid Proton.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::client::{Counter, Subscriber, script};
use crate::{PYTHON, free_port, install, python_has, stop, wait_listening};

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
        wait_listening(self.port, Duration::from_secs(60), "rabbitmq-server");
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
        if let Some(process) = self.process.take() {
            stop(process, true, Duration::from_secs(20));
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
        crate::client::hex(&self.body)
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
/// source address of a broker, accepting each message, attaching again by itself.
pub type AmqpReceiver = Subscriber<AmqpReceived>;

/// The command of one of this crate's Proton scripts, on `port`, `address` and a login.
fn proton(name: &str, port: u16, address: &str, (user, password): (&str, &str)) -> Command {
    install(|| python_has("proton"), &["python3-qpid-proton"]);
    let mut command = Command::new(PYTHON);
    command
        .arg(script(name))
        .args([&port.to_string(), address, user, password]);
    command
}

impl Subscriber<AmqpReceived> {
    /// Receiving once this returns.
    pub fn start_amqp(port: u16, address: &str, login: (&str, &str)) -> Self {
        let command = proton("amqp-receiver.py", port, address, login);
        Subscriber::start(command, "the AMQP receiver")
    }
}

impl Counter {
    /// An AMQP 1.0 receiver (Qpid Proton) that only counts the messages from `address`.
    pub fn amqp(broker: &RabbitMq, address: &str, login: (&str, &str)) -> Counter {
        let command = proton("amqp-counter.py", broker.port, address, login);
        Counter::start(command, "the AMQP counter")
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
    let output = proton("amqp-publisher.py", broker.port, address, (user, password))
        .args([&count.to_string(), &size.to_string()])
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success() && String::from_utf8_lossy(&output.stdout).contains("done"),
        "the AMQP publisher failed: {} {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
