//! nats-server (core NATS and JetStream), read with nats-py.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::client::{Counter, Subscriber, script};
use crate::{INSTALL, free_port, install, stop, wait_listening};

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
        wait_listening(self.port, Duration::from_secs(10), "nats-server");
    }

    /// `nats://127.0.0.1:<port>`, or `tls://` for a server started with TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "tls" } else { "nats" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// Stops the server as an operator does (SIGTERM): JetStream's streams are on disk.
    pub fn stop(&mut self) {
        if let Some(process) = self.process.take() {
            stop(process, false, Duration::from_secs(10));
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
        crate::client::hex(&self.payload)
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
pub type NatsSubscriber = Subscriber<NatsReceived>;

/// The nats-subscriber.py command for `server`, `subject` and a login.
fn subscriber(server: &NatsServer, subject: &str, (user, password): (&str, &str)) -> Command {
    let mut command = Command::new(python_with_nats());
    command.arg(script("nats-subscriber.py")).args([
        &server.port.to_string(),
        user,
        password,
        subject,
    ]);
    command
}

impl Subscriber<NatsReceived> {
    /// A core NATS subscriber, subscribed once this returns.
    pub fn core(server: &NatsServer, subject: &str, login: (&str, &str)) -> Self {
        Subscriber::start(subscriber(server, subject, login), "the NATS subscriber")
    }

    /// Makes the stream `stream` taking `subject`, and reads it.
    pub fn stream(server: &NatsServer, subject: &str, login: (&str, &str), stream: &str) -> Self {
        let mut command = subscriber(server, subject, login);
        command.arg(stream);
        Subscriber::start(command, "the NATS stream reader")
    }

    /// A core subscriber over TLS, trusting `ca` (PEM file).
    pub fn core_tls(server: &NatsServer, subject: &str, login: (&str, &str), ca: &Path) -> Self {
        let mut command = subscriber(server, subject, login);
        command.arg("--tls").arg(ca);
        Subscriber::start(command, "the NATS subscriber")
    }
}

impl Counter {
    /// A core NATS subscriber (nats-py) that only counts the messages on `subject`.
    pub fn nats(server: &NatsServer, subject: &str, login: (&str, &str)) -> Counter {
        let mut command = subscriber(server, subject, login);
        command.arg("--count");
        Counter::start(command, "the NATS counter")
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
    let mut command = Command::new(python_with_nats());
    command.arg(script("nats-publisher.py")).args([
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
