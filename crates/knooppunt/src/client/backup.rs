//! `knooppunt backup --to DIR`: a running hub's embedded store, copied while it serves, as a
//! data directory the hub opens as it is.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;

use anyhow::Context;

use super::{Answer, Client, Connection, Outcome, Output, print_json, refused};

/// Copy a running hub's embedded store (needs a principal with the `admin` role, and a hub
/// on the embedded store).
///
/// The hub goes on serving meanwhile. DIR (new, or empty) becomes a data directory: to
/// restore, stop the hub, put DIR in place of its data directory (`server.data_dir`) and
/// start it. Every event acknowledged before the backup began is in it, with its pending
/// deliveries; what was acknowledged while it was taken may or may not be. A hub on
/// PostgreSQL is backed up with pg_dump instead (docs/postgresql.md).
///
/// Example:
///   KNOOPPUNT_TOKEN=… knooppunt backup --url https://knooppunt.example.nl --to /backups/2026-11-27
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct BackupCommand {
    #[command(flatten)]
    connection: Connection,
    /// The directory to write: it must not exist yet, or be empty.
    #[arg(long, value_name = "DIR")]
    to: PathBuf,
    #[command(flatten)]
    output: Output,
}

/// Reads what arrives on a channel as one stream: the backup as the hub sends it.
struct Arriving {
    chunks: mpsc::Receiver<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
}

impl std::io::Read for Arriving {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.current.len() {
            match self.chunks.recv() {
                Ok(chunk) => {
                    self.current = chunk;
                    self.at = 0;
                }
                // The stream ended (or broke off): the restore says whether it was whole.
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn empty_or_absent(dir: &Path) -> anyhow::Result<bool> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                anyhow::bail!(
                    "--to: {} is not empty: give a new directory (a backup never overwrites)",
                    dir.display()
                );
            }
            Ok(false)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(error) => Err(error).with_context(|| format!("--to: cannot read {}", dir.display())),
    }
}

/// Removes what a failed backup wrote: the directory when it made it, else its contents.
fn clean_up(dir: &Path, made: bool) {
    if made {
        let _ = std::fs::remove_dir_all(dir);
    } else if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
}

pub(crate) async fn run(command: BackupCommand) -> Outcome {
    let BackupCommand {
        connection,
        to,
        output,
    } = command;
    let made = empty_or_absent(&to)?;
    let client = Client::new(&connection)?;
    let mut response = client.stream("/v1/backup").await?;
    if !response.status().is_success() {
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.unwrap_or_default();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&bytes).into()));
        return Ok(refused(&Answer {
            status,
            headers,
            body,
        }));
    }
    let (sender, chunks) = mpsc::sync_channel(16);
    let restoring = {
        let to = to.clone();
        std::thread::spawn(move || {
            knooppunt_store_embedded::restore(
                &mut Arriving {
                    chunks,
                    current: Vec::new(),
                    at: 0,
                },
                &to,
            )
        })
    };
    let mut broke_off = None;
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if sender.send(chunk.to_vec()).is_err() {
                    break; // The restore stopped: it says why.
                }
            }
            Ok(None) => break,
            Err(error) => {
                broke_off = Some(error);
                break;
            }
        }
    }
    drop(sender);
    let restored = restoring.join().expect("the restore does not panic");
    let summary = match (restored, broke_off) {
        (Ok(summary), None) => summary,
        (_, Some(error)) => {
            clean_up(&to, made);
            anyhow::bail!(
                "the backup broke off ({}); nothing was kept: try again",
                super::cause(&error)
            );
        }
        (Err(error), None) => {
            clean_up(&to, made);
            anyhow::bail!(
                "the backup could not be written to {}: {error}",
                to.display()
            );
        }
    };
    let summary = serde_json::to_value(&summary).expect("a summary serializes");
    std::fs::write(
        to.join("backup.json"),
        serde_json::to_vec_pretty(&summary).expect("JSON"),
    )
    .with_context(|| format!("cannot write {}", to.join("backup.json").display()))?;
    if output.json {
        print_json(&summary);
    } else {
        let records = &summary["records"];
        let count = |tree: &str| records[tree].as_u64().unwrap_or(0);
        say!(
            "Backed up into {}: {} segment(s) of the event log ({} bytes), {} subscription(s), \
             {} principal(s), {} audit entries.",
            to.display(),
            summary["segments"],
            summary["logBytes"],
            count("subscriptions"),
            count("principals"),
            count("audit"),
        );
        say!(
            "To restore: stop the hub, put this directory in place of its data directory \
             (server.data_dir), start it."
        );
    }
    Ok(ExitCode::SUCCESS)
}
