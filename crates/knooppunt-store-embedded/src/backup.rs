//! A copy of the store taken while it serves ([`EmbeddedStore::backup`], behind
//! `knooppunt backup`), and its restore into a data directory the hub opens as it is
//! ([`restore`]).
//!
//! Consistency without stopping the hub: the event log is only ever appended to, so the
//! backup notes each segment's length first (the newest may end in a record half written,
//! which the hub cuts off when it opens the copy, as after a crash) and copies those
//! prefixes last, through handles opened at once (a segment that retention deletes
//! meanwhile stays readable). The sled trees are dumped in between: a subscription made
//! after the lengths were noted is in the copy without events, one deleted meanwhile is
//! not, and its deliveries in the log are then ignored, as for any deleted subscription.
//! The audit trail is dumped while no entry is added or swept, so its chain is whole.
//!
//! The stream: [`MAGIC`], then items, each a tag byte and a name (u16 length, UTF-8):
//! `F` a file (chunks of u32 length and bytes, ended by an empty chunk), `T` a sled tree
//! (pairs of u32 length and key, u32 length and value, ended by a key length of
//! `u32::MAX`), and last `E` with the summary as JSON (u32 length): a stream without it is
//! incomplete and restores nothing.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use knooppunt_store::{BackupSummary, StoreError};

use crate::EmbeddedStore;

/// The first bytes of every backup stream (format 1).
pub const MAGIC: &[u8] = b"KNOOPPUNT BACKUP 1\n";

const FILE: u8 = b'F';
const TREE: u8 = b'T';
const END: u8 = b'E';
const END_OF_TREE: u32 = u32::MAX;
const CHUNK: usize = 256 * 1024;

fn write_name(out: &mut dyn Write, tag: u8, name: &str) -> std::io::Result<()> {
    let len = u16::try_from(name.len()).expect("short names");
    out.write_all(&[tag])?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(name.as_bytes())
}

fn write_bytes(out: &mut dyn Write, bytes: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(bytes.len()).expect("chunks and records are below 4 GiB");
    out.write_all(&len.to_le_bytes())?;
    out.write_all(bytes)
}

fn failed(error: std::io::Error) -> StoreError {
    StoreError::Backend(format!("cannot write the backup: {error}"))
}

impl EmbeddedStore {
    /// Writes a consistent copy of the store, and `beside` (files the hub keeps next to it,
    /// by name), to `out` while the hub goes on serving. Blocking: call it off the async
    /// runtime. Publishes and deliveries go on meanwhile; what is acknowledged after it began
    /// may or may not be in it.
    pub fn backup(
        &self,
        out: &mut dyn Write,
        beside: &[(String, Vec<u8>)],
    ) -> Result<BackupSummary, StoreError> {
        let mut summary = BackupSummary::default();
        out.write_all(MAGIC).map_err(failed)?;
        for (name, bytes) in beside {
            write_name(out, FILE, name).map_err(failed)?;
            for chunk in bytes.chunks(CHUNK) {
                write_bytes(out, chunk).map_err(failed)?;
            }
            write_bytes(out, &[]).map_err(failed)?;
            summary.files.push(name.clone());
        }
        // 1. The log's segments as they are now: open, and their lengths.
        let log_dir = &self.inner.log_dir;
        let mut names: Vec<String> = std::fs::read_dir(log_dir)
            .map_err(|e| StoreError::Backend(format!("cannot list {}: {e}", log_dir.display())))?
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| {
                name.strip_suffix(".log")
                    .is_some_and(|n| n.parse::<u64>().is_ok())
            })
            .collect();
        names.sort_unstable();
        let mut segments = Vec::new();
        for name in names {
            match File::open(log_dir.join(&name)) {
                Ok(file) => segments.push((name, file)),
                // Deleted by retention since the listing: older than what is kept.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => {
                    return Err(StoreError::Backend(format!("cannot read {name}: {error}")));
                }
            }
        }
        let mut noted = Vec::new();
        for (name, file) in segments {
            let len = file
                .metadata()
                .map_err(|e| StoreError::Backend(format!("cannot read {name}: {e}")))?
                .len();
            noted.push((name, file, len));
        }
        // 2. The trees.
        let db = &self.inner.trees.db;
        for name in db.tree_names() {
            let tree = db.open_tree(&name).map_err(crate::backend)?;
            let name = String::from_utf8_lossy(&name).into_owned();
            let _unchanging =
                (name == "audit").then(|| self.inner.audit_writer.lock().expect("audit lock"));
            write_name(out, TREE, &name).map_err(failed)?;
            let mut count = 0;
            for pair in tree.iter() {
                let (key, value) = pair.map_err(crate::backend)?;
                write_bytes(out, &key).map_err(failed)?;
                write_bytes(out, &value).map_err(failed)?;
                count += 1;
            }
            out.write_all(&END_OF_TREE.to_le_bytes()).map_err(failed)?;
            summary.records.insert(name, count);
        }
        // 3. The segments' noted prefixes.
        let mut buffer = vec![0u8; CHUNK];
        for (name, file, len) in noted {
            write_name(out, FILE, &format!("events/{name}")).map_err(failed)?;
            let mut rest = file.take(len);
            loop {
                let read = rest
                    .read(&mut buffer)
                    .map_err(|e| StoreError::Backend(format!("cannot read {name}: {e}")))?;
                if read == 0 {
                    break;
                }
                write_bytes(out, &buffer[..read]).map_err(failed)?;
                summary.log_bytes += read as u64;
            }
            write_bytes(out, &[]).map_err(failed)?;
            summary.segments += 1;
        }
        let end = serde_json::to_vec(&summary).expect("a summary serializes");
        out.write_all(&[END]).map_err(failed)?;
        write_bytes(out, &end).map_err(failed)?;
        out.flush().map_err(failed)?;
        Ok(summary)
    }
}

fn unreadable(why: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("not a whole Knooppunt backup: {why}"))
}

fn read_u32(input: &mut dyn Read) -> Result<u32, StoreError> {
    let mut bytes = [0u8; 4];
    input.read_exact(&mut bytes).map_err(unreadable)?;
    Ok(u32::from_le_bytes(bytes))
}

fn read_exactly(input: &mut dyn Read, len: u32) -> Result<Vec<u8>, StoreError> {
    let mut bytes = Vec::new();
    input
        .take(u64::from(len))
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() != len as usize {
        return Err(unreadable("it ends inside a record"));
    }
    Ok(bytes)
}

/// A file's name in the backup, checked: `events/<number>.log` or a plain name (no
/// directories, nothing hidden), so that a restore writes only inside its directory.
fn checked_file_name(name: &str) -> Result<&str, StoreError> {
    let plain = |n: &str| {
        !n.is_empty()
            && !n.starts_with('.')
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    let fine = match name.strip_prefix("events/") {
        Some(segment) => segment
            .strip_suffix(".log")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        None => plain(name),
    };
    if fine {
        Ok(name)
    } else {
        Err(unreadable(format!("it names a file `{name}`")))
    }
}

/// Restores the backup `input` into `to`, a data directory that must be empty or absent:
/// afterwards `knooppunt serve` opens it as the store the backup was taken of. On any error
/// the caller should remove `to`.
pub fn restore(input: &mut dyn Read, to: &Path) -> Result<BackupSummary, StoreError> {
    let written = |path: &Path, e: std::io::Error| {
        StoreError::Backend(format!("cannot write {}: {e}", path.display()))
    };
    if let Ok(mut entries) = std::fs::read_dir(to)
        && entries.next().is_some()
    {
        return Err(StoreError::Backend(format!(
            "{} is not empty: restore into a new directory",
            to.display()
        )));
    }
    std::fs::create_dir_all(to.join("events")).map_err(|e| written(to, e))?;
    let mut magic = vec![0u8; MAGIC.len()];
    input.read_exact(&mut magic).map_err(unreadable)?;
    if magic != MAGIC {
        return Err(unreadable("it does not start as one"));
    }
    let db = crate::open_sled(to, crate::DEFAULT_CACHE_BYTES)?;
    loop {
        let mut tag = [0u8; 1];
        input.read_exact(&mut tag).map_err(unreadable)?;
        if tag[0] == END {
            let len = read_u32(input)?;
            let summary = read_exactly(input, len)?;
            let summary: BackupSummary = serde_json::from_slice(&summary).map_err(unreadable)?;
            db.flush().map_err(crate::backend)?;
            for dir in [to.join("events"), to.to_path_buf()] {
                File::open(&dir)
                    .and_then(|d| d.sync_all())
                    .map_err(|e| written(&dir, e))?;
            }
            return Ok(summary);
        }
        let mut len = [0u8; 2];
        input.read_exact(&mut len).map_err(unreadable)?;
        let name = read_exactly(input, u32::from(u16::from_le_bytes(len)))?;
        let name = String::from_utf8(name).map_err(unreadable)?;
        match tag[0] {
            FILE => {
                let path = to.join(checked_file_name(&name)?);
                let mut file = File::create(&path).map_err(|e| written(&path, e))?;
                loop {
                    let len = read_u32(input)?;
                    if len == 0 {
                        break;
                    }
                    let chunk = read_exactly(input, len)?;
                    file.write_all(&chunk).map_err(|e| written(&path, e))?;
                }
                file.sync_all().map_err(|e| written(&path, e))?;
            }
            TREE => {
                let tree = db.open_tree(name.as_bytes()).map_err(crate::backend)?;
                loop {
                    let len = read_u32(input)?;
                    if len == END_OF_TREE {
                        break;
                    }
                    let key = read_exactly(input, len)?;
                    let len = read_u32(input)?;
                    let value = read_exactly(input, len)?;
                    tree.insert(key, value).map_err(crate::backend)?;
                }
            }
            other => return Err(unreadable(format!("an item of kind {other}"))),
        }
    }
}
