//! Mosquitto (MQTT 3.1.1 and 5), read with Eclipse Paho.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::client::{Subscriber, script};
use crate::{PYTHON, free_port, install, python_has, stop, wait_listening};

/// Mosquitto's own clients (`mosquitto_pub`, `mosquitto_sub`), installed if missing.
pub fn mosquitto_clients() {
    install(
        || Path::new("/usr/bin/mosquitto_pub").exists(),
        &["mosquitto-clients"],
    );
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
        wait_listening(self.port, Duration::from_secs(5), "mosquitto");
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
        if let Some(process) = self.process.take() {
            stop(process, false, Duration::from_secs(5));
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
        crate::client::hex(&self.payload)
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
pub type MqttSubscriber = Subscriber<MqttReceived>;

impl Subscriber<MqttReceived> {
    /// Subscribed once this returns.
    pub fn start_mqtt(broker: &Mosquitto, filter: &str, user: &str, password: &str) -> Self {
        install(|| python_has("paho.mqtt.client"), &["python3-paho-mqtt"]);
        let mut command = Command::new(PYTHON);
        command.arg(script("mqtt-subscriber.py")).args([
            "127.0.0.1",
            &broker.port.to_string(),
            filter,
            user,
            password,
        ]);
        Subscriber::start(command, "the MQTT subscriber")
    }
}
