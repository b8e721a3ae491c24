//! The event log: accepted events in append-only segment files, made durable with one
//! `fdatasync` per group of appends.
//!
//! A segment is named after the sequence number of its first record
//! (`00000000000000000001.log`) and holds records `[len: u32][crc32: u32][payload]`, little
//! endian. The payload starts with its kind and sequence number: an event record (kind 1)
//! holds the acceptance time, `source`, `id`, the event's JSON and the subscriptions it was
//! routed to (kind 3 holds the types of its extensions after the JSON, for events that have
//! types the JSON cannot carry); a delivery-state record (kind 2) holds a change as JSON (`records.rs`: attempt
//! results, redeliveries, removed dead letters, retired subscriptions). A crash can leave a partly written
//! record at the end of the newest segment; opening the log cuts it off (it was never
//! acknowledged: acknowledgement waits for the `fdatasync` after the write).
//!
//! The active segment is written ahead with zeros, [`ZEROED_AHEAD`] at a time, and records
//! overwrite them in place: an `fdatasync` then has only data to write, not the file's new
//! size and blocks as well (a third less time and CPU per sync here; BENCHMARKS.md). A zero
//! header ends a segment's records like a torn one (length 0 decodes to nothing), so the
//! replay stops there and opening cuts the zeros off with a torn end; a segment is cut to
//! its records before the next one starts, so only the newest can end in zeros.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::records::ChangeRecord;
use knooppunt_store::StoreError;
use knooppunt_store::{DeliveryChange, StoredEvent};

const EVENT: u8 = 1;
const CHANGE: u8 = 2;
/// An event record with the types of its extensions after its JSON (written only for events
/// that have such types, so older hubs' logs and most records stay as they were).
const TYPED_EVENT: u8 = 3;

/// A record read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    Event(LogRecord),
    Change { seq: u64, change: DeliveryChange },
}

impl Entry {
    pub(crate) fn seq(&self) -> u64 {
        match self {
            Entry::Event(record) => record.seq,
            Entry::Change { seq, .. } => *seq,
        }
    }

    fn decode(payload: &[u8]) -> Option<Entry> {
        let (kind, rest) = payload.split_first()?;
        match *kind {
            EVENT => LogRecord::decode(rest, false).map(Entry::Event),
            TYPED_EVENT => LogRecord::decode(rest, true).map(Entry::Event),
            CHANGE => {
                let seq = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
                let record: ChangeRecord = serde_json::from_slice(rest.get(8..)?).ok()?;
                Some(Entry::Change {
                    seq,
                    change: record.into(),
                })
            }
            _ => None,
        }
    }
}

/// Appends a delivery-state record with its header to `out`; returns its length.
pub(crate) fn encode_change(seq: u64, change: &DeliveryChange, out: &mut Vec<u8>) -> usize {
    framed(out, |payload| {
        payload.push(CHANGE);
        payload.extend_from_slice(&seq.to_le_bytes());
        serde_json::to_writer(payload, &ChangeRecord::from(change))
            .expect("changes always serialise");
    })
}

/// Writes a header and the payload `fill` appends; returns the framed length.
fn framed(out: &mut Vec<u8>, fill: impl FnOnce(&mut Vec<u8>)) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER]);
    fill(out);
    let payload = &out[start + HEADER..];
    let (len, crc) = (payload.len() as u32, crc32fast::hash(payload));
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + HEADER].copy_from_slice(&crc.to_le_bytes());
    out.len() - start
}

/// One accepted event as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogRecord {
    pub(crate) seq: u64,
    pub(crate) accepted_at: u64,
    pub(crate) source: String,
    pub(crate) id: String,
    pub(crate) json: String,
    pub(crate) extension_types: Option<String>,
    pub(crate) subscriptions: Vec<String>,
}

/// Where a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Location {
    /// The segment's first sequence number (its name).
    pub(crate) segment: u64,
    /// Within the segment: a segment never grows past 4 GiB (`write_encoded`).
    pub(crate) offset: u32,
    pub(crate) len: u32,
}

const HEADER: usize = 8;

/// How far past its records the active segment is written with zeros (see the module's
/// text): one sync per this many bytes of records also writes the file's new size.
pub(crate) const ZEROED_AHEAD: u64 = 1024 * 1024;

/// Zeros to write ahead with.
static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

/// How many events the log in `dir` holds, from the records' headers and kinds alone (no
/// checks: a torn end stops the count, a damaged record is counted), so that the replay can
/// make room for them at once.
pub(crate) fn count_events(dir: &Path) -> Result<usize, StoreError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(0);
    };
    let mut events = 0;
    for entry in entries {
        let path = entry.map_err(|e| io("cannot list", dir, e))?.path();
        if path.extension().is_none_or(|ext| ext != "log") {
            continue;
        }
        let file = File::open(&path).map_err(|e| io("cannot read", &path, e))?;
        let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
        let mut head = [0u8; HEADER + 1];
        while read_whole(&mut reader, &mut head).map_err(|e| io("cannot read", &path, e))? {
            let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
            if matches!(head[HEADER], EVENT | TYPED_EVENT) {
                events += 1;
            }
            let rest = i64::from(len) - 1;
            if rest < 0 || std::io::Seek::seek_relative(&mut reader, rest).is_err() {
                break;
            }
        }
    }
    Ok(events)
}

/// Fills `buf` from `reader`: `false` when the file ends first (a torn end).
fn read_whole(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    match reader.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(error) => Err(error),
    }
}

fn io(what: &str, path: &Path, error: std::io::Error) -> StoreError {
    StoreError::Backend(format!("{what} {}: {error}", path.display()))
}

fn put_str(buffer: &mut Vec<u8>, text: &str) {
    buffer.extend_from_slice(&(text.len() as u32).to_le_bytes());
    buffer.extend_from_slice(text.as_bytes());
}

impl LogRecord {
    /// The record with its header, ready to append.
    #[cfg(test)]
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut record = Vec::new();
        self.encode_into(&mut record);
        record
    }

    /// Appends the record with its header to `out`; returns its length.
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) -> usize {
        framed(out, |payload| self.encode_payload(payload))
    }

    fn encode_payload(&self, payload: &mut Vec<u8>) {
        payload.push(if self.extension_types.is_some() {
            TYPED_EVENT
        } else {
            EVENT
        });
        payload.extend_from_slice(&self.seq.to_le_bytes());
        payload.extend_from_slice(&self.accepted_at.to_le_bytes());
        put_str(payload, &self.source);
        put_str(payload, &self.id);
        put_str(payload, &self.json);
        if let Some(types) = &self.extension_types {
            put_str(payload, types);
        }
        payload.extend_from_slice(&(self.subscriptions.len() as u32).to_le_bytes());
        for subscription in &self.subscriptions {
            put_str(payload, subscription);
        }
    }

    /// The event alone, without the list of subscriptions after it (which grows with the
    /// fan-out and is needed only to rebuild the queues at open).
    fn decode_event(payload: &[u8], typed: bool) -> Option<StoredEvent> {
        Fields::new(payload).event(typed)
    }

    fn decode(payload: &[u8], typed: bool) -> Option<LogRecord> {
        let mut fields = Fields::new(payload);
        let event = fields.event(typed)?;
        let count = fields.u32()? as usize;
        let mut subscriptions = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            subscriptions.push(fields.string()?);
        }
        Some(LogRecord {
            seq: event.seq,
            accepted_at: event.accepted_at,
            source: event.source,
            id: event.id,
            json: event.json,
            extension_types: event.extension_types,
            subscriptions,
        })
    }
}

/// Reads the fields of an event record's payload in order; `None` when it is cut short.
struct Fields<'a> {
    payload: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    fn new(payload: &'a [u8]) -> Fields<'a> {
        Fields { payload, at: 0 }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.payload.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn string(&mut self) -> Option<String> {
        let len = self.u32()? as usize;
        String::from_utf8(self.take(len)?.to_vec()).ok()
    }

    /// The sequence number, acceptance time, `source`, `id`, JSON and (`typed`) extension
    /// types, in record order.
    fn event(&mut self, typed: bool) -> Option<StoredEvent> {
        let seq = self.u64()?;
        let accepted_at = self.u64()?;
        Some(StoredEvent {
            seq,
            accepted_at,
            source: self.string()?,
            id: self.string()?,
            json: self.string()?,
            extension_types: if typed { Some(self.string()?) } else { None },
        })
    }
}

/// The segment files of one directory; owned by the store's committer thread for appending,
/// read by anyone through its [`Readers`].
#[derive(Debug)]
pub(crate) struct EventLog {
    dir: PathBuf,
    readers: Arc<Readers>,
    /// First sequence numbers of the segments, oldest first; the last is the active one.
    segments: Vec<u64>,
    active: File,
    active_len: u64,
    /// The active segment's length on disk: its records, then zeros.
    written_len: u64,
    /// How much of the active segment the last sync made durable.
    synced_len: u64,
    segment_bytes: u64,
    next_seq: u64,
}

fn segment_path(dir: &Path, first_seq: u64) -> PathBuf {
    dir.join(format!("{first_seq:020}.log"))
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("cannot sync the directory", dir, e))
}

impl EventLog {
    /// Opens the log in `dir`, calling `visit` for every record in order, and cuts off a
    /// partly written record at the end of the newest segment.
    pub(crate) fn open(
        dir: &Path,
        segment_bytes: u64,
        mut visit: impl FnMut(Entry, Location),
    ) -> Result<EventLog, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| io("cannot create", dir, e))?;
        let mut segments: Vec<u64> = std::fs::read_dir(dir)
            .map_err(|e| io("cannot list", dir, e))?
            .filter_map(|entry| {
                let name = entry.ok()?.file_name().into_string().ok()?;
                name.strip_suffix(".log")?.parse().ok()
            })
            .collect();
        segments.sort_unstable();
        let mut next_seq = 1;
        let mut active_len = 0;
        for (index, &segment) in segments.iter().enumerate() {
            let path = segment_path(dir, segment);
            // Read record by record through a small buffer, not whole: a segment read into
            // one vector (64 MiB, grown by doubling) stayed with the allocator after the
            // replay, some 300 bytes for every event the hub holds.
            let file = File::open(&path).map_err(|e| io("cannot read", &path, e))?;
            let file_len = file
                .metadata()
                .map_err(|e| io("cannot read", &path, e))?
                .len();
            if file_len > u64::from(u32::MAX) {
                return Err(StoreError::Corrupt(format!(
                    "{} is larger than 4 GiB, which no segment of this hub ever is",
                    path.display()
                )));
            }
            let file_len = file_len as usize;
            let mut reader = std::io::BufReader::with_capacity(256 * 1024, file);
            let mut payload = Vec::new();
            let mut offset = 0usize;
            while offset < file_len {
                let mut header = [0u8; HEADER];
                if !read_whole(&mut reader, &mut header).map_err(|e| io("cannot read", &path, e))? {
                    break;
                }
                let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
                let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
                if offset + HEADER + len > file_len {
                    break;
                }
                payload.resize(len, 0);
                if !read_whole(&mut reader, &mut payload)
                    .map_err(|e| io("cannot read", &path, e))?
                {
                    break;
                }
                let Some(record) = (crc32fast::hash(&payload) == crc)
                    .then(|| Entry::decode(&payload))
                    .flatten()
                else {
                    break;
                };
                let location = Location {
                    segment,
                    offset: offset as u32,
                    len: (HEADER + len) as u32,
                };
                next_seq = record.seq() + 1;
                visit(record, location);
                offset += HEADER + len;
            }
            if offset < file_len {
                if index + 1 != segments.len() {
                    return Err(StoreError::Corrupt(format!(
                        "{} is damaged at byte {offset}, before the newest segment",
                        path.display()
                    )));
                }
                let file = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| io("cannot open", &path, e))?;
                file.set_len(offset as u64)
                    .and_then(|()| file.sync_all())
                    .map_err(|e| io("cannot cut the torn end of", &path, e))?;
            }
            active_len = offset as u64;
        }
        if segments.is_empty() {
            segments.push(next_seq);
            File::create(segment_path(dir, next_seq)).map_err(|e| io("cannot create", dir, e))?;
            sync_dir(dir)?;
        }
        let active_path = segment_path(dir, *segments.last().expect("one segment"));
        let active = OpenOptions::new()
            .write(true)
            .open(&active_path)
            .map_err(|e| io("cannot open", &active_path, e))?;
        Ok(EventLog {
            dir: dir.to_owned(),
            readers: Arc::new(Readers::new(dir)),
            segments,
            active,
            active_len,
            written_len: active_len,
            synced_len: active_len,
            segment_bytes,
            next_seq,
        })
    }

    /// The first sequence number of the oldest segment: every record numbered below it was
    /// deleted.
    pub(crate) fn first_seq(&self) -> u64 {
        self.segments[0]
    }

    /// The sequence number of the last record written (0 for an empty log).
    pub(crate) fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// The sequence number the next record gets (for tests, which number records by hand).
    #[cfg(test)]
    pub(crate) fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Appends records (numbered by [`EventLog::next_seq`], in order) and waits until they
    /// are on disk; returns where each is.
    #[cfg(test)]
    pub(crate) fn append(&mut self, records: &[LogRecord]) -> Result<Vec<Location>, StoreError> {
        let Some(first) = records.first() else {
            return Ok(Vec::new());
        };
        let mut bytes = Vec::new();
        let lens: Vec<usize> = records.iter().map(|r| r.encode_into(&mut bytes)).collect();
        let (segment, mut offset) = self.write_encoded(first.seq, records.len() as u64, &bytes)?;
        self.sync()?;
        Ok(lens
            .into_iter()
            .map(|len| {
                let location = Location {
                    segment,
                    offset,
                    len: len as u32,
                };
                offset += len as u32;
                location
            })
            .collect())
    }

    /// Writes `count` encoded records, the first numbered `first_seq` (the next number, as
    /// [`EventLog::next_seq`] would give it), without waiting for the disk; returns the
    /// segment and offset of the first. They are durable after the next [`EventLog::sync`].
    pub(crate) fn write_encoded(
        &mut self,
        first_seq: u64,
        count: u64,
        bytes: &[u8],
    ) -> Result<(u64, u32), StoreError> {
        let limit = u64::from(u32::MAX);
        let past_limit = self.active_len > 0 && self.active_len + bytes.len() as u64 > limit;
        if self.active_len >= self.segment_bytes || past_limit {
            self.rotate(first_seq)?;
        }
        let segment = *self.segments.last().expect("one segment");
        let offset = self.active_len;
        if offset + bytes.len() as u64 > limit {
            return Err(StoreError::Backend(format!(
                "cannot append {} bytes at once: a segment holds at most 4 GiB",
                bytes.len()
            )));
        }
        let end = offset + bytes.len() as u64;
        let mut written = self.active.write_all_at(bytes, offset);
        if written.is_ok() && end > self.written_len {
            written = self.zero_ahead(end);
        }
        if let Err(error) = written {
            // Leave no partial record behind a later append.
            let _ = self.active.set_len(offset);
            self.written_len = offset;
            return Err(io(
                "cannot append to",
                &segment_path(&self.dir, segment),
                error,
            ));
        }
        self.active_len = end;
        self.next_seq = first_seq + count;
        Ok((segment, offset as u32))
    }

    /// Writes zeros from `end` (where the records now end) to [`ZEROED_AHEAD`] past it.
    fn zero_ahead(&mut self, end: u64) -> std::io::Result<()> {
        let until = (end + ZEROED_AHEAD).min(u64::from(u32::MAX));
        let mut at = end;
        while at < until {
            let n = (until - at).min(ZEROS.len() as u64) as usize;
            self.active.write_all_at(&ZEROS[..n], at)?;
            at += n as u64;
        }
        self.written_len = until;
        Ok(())
    }

    /// Cuts the active segment back to what the last successful [`EventLog::sync`] left
    /// (after a write or sync that failed).
    pub(crate) fn cut_back(&mut self) -> Result<(), StoreError> {
        let path = segment_path(&self.dir, *self.segments.last().expect("one segment"));
        self.active
            .set_len(self.synced_len)
            .map_err(|e| io("cannot cut back", &path, e))?;
        self.active_len = self.synced_len;
        self.written_len = self.synced_len;
        Ok(())
    }

    /// Whether the disk takes writes again: writes and syncs a small file beside the
    /// segments, then removes it.
    pub(crate) fn probe(&self) -> Result<(), StoreError> {
        let path = self.dir.join("probe.tmp");
        let written = std::fs::File::create(&path).and_then(|mut file| {
            std::io::Write::write_all(&mut file, &[0u8; 64 * 1024])?;
            file.sync_data()
        });
        let _ = std::fs::remove_file(&path);
        written.map_err(|e| io("cannot write", &path, e))
    }

    /// Waits until everything written is on disk (`fdatasync` of the active segment; a
    /// segment is synced before the next one is started).
    pub(crate) fn sync(&mut self) -> Result<(), StoreError> {
        self.active.sync_data().map_err(|e| {
            io(
                "cannot sync",
                &segment_path(&self.dir, *self.segments.last().expect("one segment")),
                e,
            )
        })?;
        self.synced_len = self.active_len;
        Ok(())
    }

    fn rotate(&mut self, first: u64) -> Result<(), StoreError> {
        let path = segment_path(&self.dir, first);
        // Only the newest segment may end in zeros: this one is cut to its records, and the
        // sync makes the cut durable with them.
        self.active.set_len(self.active_len).map_err(|e| {
            io(
                "cannot cut the zeros off",
                &segment_path(&self.dir, *self.segments.last().expect("one segment")),
                e,
            )
        })?;
        self.written_len = self.active_len;
        self.sync()?;
        self.active = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)
            .map_err(|e| io("cannot create", &path, e))?;
        sync_dir(&self.dir)?;
        self.segments.push(first);
        self.active_len = 0;
        self.synced_len = 0;
        self.written_len = 0;
        Ok(())
    }

    /// The segments other than the active one, oldest first, each with the first sequence
    /// number of the next segment.
    pub(crate) fn closed_segments(&self) -> Vec<(u64, u64)> {
        self.segments.windows(2).map(|w| (w[0], w[1])).collect()
    }

    /// Reads records of this log from any thread.
    pub(crate) fn readers(&self) -> Arc<Readers> {
        Arc::clone(&self.readers)
    }

    /// Deletes a closed segment.
    pub(crate) fn delete(&mut self, segment: u64) -> Result<(), StoreError> {
        if self.segments.last() == Some(&segment) {
            return Ok(());
        }
        let path = segment_path(&self.dir, segment);
        self.readers.forget(segment);
        std::fs::remove_file(&path).map_err(|e| io("cannot delete", &path, e))?;
        self.segments.retain(|s| *s != segment);
        Ok(())
    }
}

/// Reads records back, keeping the segment files open between reads (a deleted segment's
/// handle is dropped with it).
#[derive(Debug)]
pub(crate) struct Readers {
    dir: PathBuf,
    open: Mutex<HashMap<u64, Arc<File>>>,
}

impl Readers {
    fn new(dir: &Path) -> Readers {
        Readers {
            dir: dir.to_owned(),
            open: Mutex::new(HashMap::new()),
        }
    }

    fn file(&self, segment: u64) -> Result<Arc<File>, StoreError> {
        let mut open = self.open.lock().expect("readers lock");
        if let Some(file) = open.get(&segment) {
            return Ok(Arc::clone(file));
        }
        let path = segment_path(&self.dir, segment);
        let file = Arc::new(File::open(&path).map_err(|e| io("cannot open", &path, e))?);
        open.insert(segment, Arc::clone(&file));
        Ok(file)
    }

    fn forget(&self, segment: u64) {
        self.open.lock().expect("readers lock").remove(&segment);
    }

    /// Reads the event record at `location`.
    #[cfg(test)]
    pub(crate) fn read(&self, location: Location) -> Result<LogRecord, StoreError> {
        let file = self.file(location.segment)?;
        read_from(&file, &segment_path(&self.dir, location.segment), location)
    }

    /// Reads the event at `location`, checked against its record's CRC, without decoding
    /// the subscriptions it was routed to.
    pub(crate) fn read_event(&self, location: Location) -> Result<StoredEvent, StoreError> {
        let file = self.file(location.segment)?;
        let path = segment_path(&self.dir, location.segment);
        let bytes = read_payload(&file, &path, location)?;
        match bytes.first() {
            Some(&EVENT) => LogRecord::decode_event(&bytes[1..], false),
            Some(&TYPED_EVENT) => LogRecord::decode_event(&bytes[1..], true),
            _ => None,
        }
        .ok_or_else(|| no_event(&path, location))
    }
}

/// Reads the record at `location` of the log in `dir`.
#[cfg(test)]
pub(crate) fn read_at(dir: &Path, location: Location) -> Result<LogRecord, StoreError> {
    Readers::new(dir).read(location)
}

/// The payload of the record at `location`, checked against its CRC.
fn read_payload(file: &File, path: &Path, location: Location) -> Result<Vec<u8>, StoreError> {
    let mut bytes = vec![0; location.len as usize];
    file.read_exact_at(&mut bytes, u64::from(location.offset))
        .map_err(|e| io("cannot read", path, e))?;
    let crc = u32::from_le_bytes(bytes[4..8].try_into().expect("four bytes"));
    if crc32fast::hash(&bytes[HEADER..]) != crc {
        return Err(StoreError::Corrupt(format!(
            "{} has a damaged record at byte {}",
            path.display(),
            location.offset
        )));
    }
    bytes.drain(..HEADER);
    Ok(bytes)
}

fn no_event(path: &Path, location: Location) -> StoreError {
    StoreError::Corrupt(format!(
        "{} has no readable event at byte {}",
        path.display(),
        location.offset
    ))
}

#[cfg(test)]
fn read_from(file: &File, path: &Path, location: Location) -> Result<LogRecord, StoreError> {
    match Entry::decode(&read_payload(file, path, location)?) {
        Some(Entry::Event(record)) => Ok(record),
        _ => Err(no_event(path, location)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64) -> LogRecord {
        LogRecord {
            seq,
            accepted_at: 1000 + seq,
            source: "urn:nld:x".into(),
            id: format!("id-{seq}"),
            json: format!(r#"{{"id":"id-{seq}","data":"€ {seq}"}}"#),
            extension_types: None,
            subscriptions: vec!["a".into(), "b".into()],
        }
    }

    fn open(dir: &Path, segment_bytes: u64) -> (EventLog, Vec<(LogRecord, Location)>) {
        let mut seen = Vec::new();
        let log = EventLog::open(dir, segment_bytes, |entry, l| {
            if let Entry::Event(r) = entry {
                seen.push((r, l));
            }
        })
        .unwrap();
        (log, seen)
    }

    fn append(log: &mut EventLog, count: usize) -> Vec<Location> {
        let records: Vec<_> = (0..count).map(|_| record(log.next_seq())).collect();
        log.append(&records).unwrap()
    }

    #[test]
    fn records_round_trip_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, seen) = open(dir.path(), 1 << 20);
        assert!(seen.is_empty());
        let locations = append(&mut log, 3);
        assert_eq!(read_at(dir.path(), locations[1]).unwrap(), record(2));
        drop(log);
        let (mut log, seen) = open(dir.path(), 1 << 20);
        assert_eq!(
            seen.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>(),
            [record(1), record(2), record(3)]
        );
        assert_eq!(seen[2].1, locations[2]);
        assert_eq!(log.next_seq(), 4, "numbering goes on");
    }

    #[test]
    fn a_torn_record_at_the_end_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), 1 << 20);
        let written = append(&mut log, 2);
        drop(log);
        let path = segment_path(dir.path(), 1);
        let end = (written[1].offset + written[1].len) as usize;
        let mut bytes = std::fs::read(&path).unwrap();
        let whole = bytes[..end].to_vec();
        let partial = &record(3).encode()[..20];
        bytes.truncate(end);
        bytes.extend_from_slice(partial);
        std::fs::write(&path, &bytes).unwrap();
        let (mut log, seen) = open(dir.path(), 1 << 20);
        assert_eq!(seen.len(), 2);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            whole,
            "the torn bytes are gone"
        );
        let locations = append(&mut log, 1);
        assert_eq!(read_at(dir.path(), locations[0]).unwrap(), record(3));
    }

    /// The active segment is written ahead with zeros: they are never read as records,
    /// opening cuts them off, and a segment is cut to its records before the next starts.
    #[test]
    fn zeros_ahead_of_the_records_are_never_records() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), 1 << 20);
        let locations = append(&mut log, 3);
        let end = u64::from(locations[2].offset + locations[2].len);
        let path = segment_path(dir.path(), 1);
        let on_disk = || std::fs::metadata(&path).unwrap().len();
        assert_eq!(on_disk(), end + ZEROED_AHEAD, "zeros written ahead");
        assert_eq!(count_events(dir.path()).unwrap(), 3);
        drop(log);
        let (mut log, seen) = open(dir.path(), 1 << 20);
        assert_eq!(seen.len(), 3);
        assert_eq!(on_disk(), end, "opening cuts the zeros off");
        let more = append(&mut log, 1);
        assert_eq!(
            u64::from(more[0].offset),
            end,
            "appends go on at the records' end"
        );
        assert_eq!(read_at(dir.path(), more[0]).unwrap(), record(4));
        drop(log);

        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), 1);
        let first = append(&mut log, 2);
        append(&mut log, 2);
        assert_eq!(log.closed_segments(), [(1, 3)]);
        assert_eq!(
            std::fs::metadata(segment_path(dir.path(), 1))
                .unwrap()
                .len(),
            u64::from(first[1].offset + first[1].len),
            "a closed segment ends at its records"
        );
        drop(log);
        let (mut log, seen) = open(dir.path(), 1);
        assert_eq!(seen.len(), 4);
        assert_eq!(log.next_seq(), 5);
    }

    #[test]
    fn a_damaged_record_is_never_returned() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), 1 << 20);
        let locations = append(&mut log, 2);
        let path = segment_path(dir.path(), 1);
        let mut bytes = std::fs::read(&path).unwrap();
        let flip = locations[1].offset as usize + 12;
        bytes[flip] ^= 0xFF;
        std::fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            read_at(dir.path(), locations[1]),
            Err(StoreError::Corrupt(_))
        ));
    }

    #[test]
    fn segments_rotate_and_closed_ones_can_be_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), 1);
        for _ in 0..3 {
            append(&mut log, 2);
        }
        assert_eq!(log.closed_segments(), [(1, 3), (3, 5)]);
        log.delete(1).unwrap();
        log.delete(5).unwrap();
        assert!(
            segment_path(dir.path(), 5).exists(),
            "the active segment stays"
        );
        drop(log);
        let (mut log, seen) = open(dir.path(), 1);
        assert_eq!(seen.first().map(|(r, _)| r.seq), Some(3));
        assert_eq!(log.next_seq(), 7);
    }

    #[test]
    fn delivery_changes_are_read_back_in_order_between_events() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), 1 << 20);
        append(&mut log, 1);
        let change = DeliveryChange::DeleteDeadLetter {
            subscription: "a".into(),
            seq: 1,
        };
        let mut bytes = Vec::new();
        encode_change(2, &change, &mut bytes);
        log.write_encoded(2, 1, &bytes).unwrap();
        log.sync().unwrap();
        append(&mut log, 1);
        drop(log);
        let mut entries = Vec::new();
        EventLog::open(dir.path(), 1 << 20, |entry, _| entries.push(entry)).unwrap();
        assert_eq!(
            entries,
            [
                Entry::Event(record(1)),
                Entry::Change { seq: 2, change },
                Entry::Event(record(3)),
            ]
        );
    }
}
