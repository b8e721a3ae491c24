//! The protocols' own clients, run as Python processes that print `ready` once subscribed:
//! a [`Subscriber`] that prints one JSON line per message, and a [`Counter`] that prints how
//! many it received.

use std::io::{BufRead, BufReader};
use std::marker::PhantomData;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// Starts `command` with its output read line by line on a thread of its own, and waits
/// for its first `ready`.
fn spawn(mut command: Command, what: &str) -> (Child, mpsc::Receiver<String>) {
    let mut process = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} starts: {e}"));
    let stdout = process.stdout.take().expect("piped");
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    let first = lines
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{what} did not get ready"));
    assert_eq!(first, "ready", "{what}: {first}");
    (process, lines)
}

/// A subscriber process printing each message as a JSON line of type `T` (and `ready`
/// again after it reconnected).
#[derive(Debug)]
pub struct Subscriber<T> {
    process: Child,
    lines: mpsc::Receiver<String>,
    kind: PhantomData<fn() -> T>,
}

impl<T: serde::de::DeserializeOwned> Subscriber<T> {
    /// Subscribed once this returns.
    pub(crate) fn start(command: Command, what: &str) -> Subscriber<T> {
        let (process, lines) = spawn(command, what);
        Subscriber {
            process,
            lines,
            kind: PhantomData,
        }
    }

    /// The next message, waiting up to `within`.
    pub fn next(&self, within: Duration) -> Option<T> {
        loop {
            let line = self.lines.recv_timeout(within).ok()?;
            if line != "ready" {
                return Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
            }
        }
    }

    /// Exactly `count` messages, each within `within`.
    pub fn take(&self, count: usize, within: Duration) -> Vec<T> {
        (0..count)
            .map(|n| {
                self.next(within)
                    .unwrap_or_else(|| panic!("message {} of {count} did not come", n + 1))
            })
            .collect()
    }
}

impl<T> Drop for Subscriber<T> {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A subscriber process that prints how many messages it received so far.
#[derive(Debug)]
pub struct Counter {
    process: Child,
    count: Arc<AtomicU64>,
}

impl Counter {
    /// Subscribed once this returns.
    pub(crate) fn start(command: Command, what: &str) -> Counter {
        let (process, lines) = spawn(command, what);
        let count = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&count);
        std::thread::spawn(move || {
            for line in lines {
                if let Ok(n) = line.parse::<u64>() {
                    counted.store(n, Ordering::Relaxed);
                }
            }
        });
        Counter { process, count }
    }

    /// The messages counted so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// Bytes from hex (how the subscribers print payloads).
pub(crate) fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A script of this crate's (`*.py`).
pub(crate) fn script(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}
