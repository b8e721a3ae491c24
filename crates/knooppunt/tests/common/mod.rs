//! Running the real `knooppunt` binary in tests.
#![allow(dead_code)] // each test binary uses a part of it

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A `knooppunt serve` process on 127.0.0.1 with a port of its own choosing.
pub(crate) struct HubProcess {
    pub(crate) child: Child,
    pub(crate) address: String,
}

impl HubProcess {
    /// Starts `knooppunt serve` and waits until it listens. Its log is drained in the
    /// background so that it never blocks on a full pipe.
    pub(crate) fn start(config: &Path, data_dir: &Path) -> HubProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_knooppunt"))
            .arg("serve")
            .arg("--config")
            .arg(config)
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut log = BufReader::new(child.stderr.take().unwrap());
        let address = loop {
            let mut line = String::new();
            assert!(
                log.read_line(&mut line).unwrap() > 0,
                "the hub exited before listening"
            );
            if let Some(at) = line.find("address=") {
                break line[at + 8..].split_whitespace().next().unwrap().to_owned();
            }
        };
        std::thread::spawn(move || for _ in log.lines() {});
        HubProcess { child, address }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// SIGTERM, and the exit status.
    pub(crate) fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(status.success());
        self.child.wait().unwrap()
    }
}

/// A configuration file with one admin principal whose token is `token`.
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
            "[[principals]]\nname = \"admin\"\ntoken_sha256 = \"{hash}\"\nroles = [\"admin\", \"publisher\", \"subscriber\"]\n"
        ),
    )
    .unwrap();
    path
}
