//! Message brokers for the tests and benchmarks, from Debian's packages, each on free
//! loopback ports and stopped when dropped: [`Mosquitto`] (MQTT), [`NatsServer`] (NATS with
//! JetStream) and [`RabbitMq`] (AMQP 1.0). Each is read with its protocol's own client, in
//! Python: Eclipse Paho, nats-py and Apache Qpid Proton ([`Subscriber`], [`Counter`]).
//! What is missing is installed (apt as root or through `sudo -n`; nats-py with pip), so
//! that no test is skipped for lack of it.

mod client;
mod mosquitto;
mod nats;
mod rabbitmq;

pub use client::{Counter, Subscriber};
pub use mosquitto::{Mosquitto, MqttReceived, MqttSubscriber, mosquitto_clients};
pub use nats::{NatsReceived, NatsServer, NatsSubscriber, nats_make_stream, nats_publish};
pub use rabbitmq::{AmqpReceived, AmqpReceiver, RabbitMq, amqp_publish};

use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::Duration;

static INSTALL: Mutex<()> = Mutex::new(());

/// Debian's Python, which Debian's `python3-paho-mqtt` and `python3-qpid-proton` install
/// into (not another `python3` that may come first on the PATH).
const PYTHON: &str = "/usr/bin/python3";

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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Whether Debian's Python imports `module`.
fn python_has(module: &str) -> bool {
    Command::new(PYTHON)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Waits until something listens on loopback `port` (within `within`).
fn wait_listening(port: u16, within: Duration, what: &str) {
    let deadline = std::time::Instant::now() + within;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not listen on port {port} within {} s",
            within.as_secs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops a server as an operator does: SIGTERM (to its process group when `group`), then
/// SIGKILL to what is left after `within` at most.
fn stop(mut process: Child, group: bool, within: Duration) {
    let target = if group {
        format!("-{}", process.id())
    } else {
        process.id().to_string()
    };
    let signal = |signal: &str| {
        let _ = Command::new("kill")
            .args([signal, "--", &target])
            .stderr(std::process::Stdio::null())
            .status();
    };
    signal("-TERM");
    let deadline = std::time::Instant::now() + within;
    while std::time::Instant::now() < deadline {
        if matches!(process.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // A group may keep children after its leader left (the Erlang VM after its script).
    if group || !matches!(process.try_wait(), Ok(Some(_))) {
        signal("-KILL");
    }
    let _ = process.wait();
}
